//! The DevX family of `mlx5dv.h` over `uverbs::mlx5`'s DevX API.
//!
//! Not built yet: each fails with `EOPNOTSUPP` in its convention.

#![allow(unsafe_code)]

use super::unsupported::unsupported;

unsupported! {
    minus_one_ssize: [mlx5dv_devx_get_event],
    void: [
        mlx5dv_devx_destroy_cmd_comp,
        mlx5dv_devx_destroy_event_channel,
        mlx5dv_devx_free_uar,
    ],
    null: [
        mlx5dv_devx_alloc_uar,
        mlx5dv_devx_create_cmd_comp,
        mlx5dv_devx_create_event_channel,
        mlx5dv_devx_obj_create,
        mlx5dv_devx_umem_reg,
        mlx5dv_devx_umem_reg_ex,
    ],
    positive: [
        mlx5dv_devx_cq_modify,
        mlx5dv_devx_cq_query,
        mlx5dv_devx_general_cmd,
        mlx5dv_devx_get_async_cmd_comp,
        mlx5dv_devx_obj_destroy,
        mlx5dv_devx_obj_modify,
        mlx5dv_devx_obj_query,
        mlx5dv_devx_obj_query_async,
        mlx5dv_devx_qp_modify,
        mlx5dv_devx_qp_query,
        mlx5dv_devx_query_eqn,
        mlx5dv_devx_srq_modify,
        mlx5dv_devx_srq_query,
        mlx5dv_devx_subscribe_devx_event,
        mlx5dv_devx_subscribe_devx_event_fd,
        mlx5dv_devx_umem_dereg,
    ],
}
