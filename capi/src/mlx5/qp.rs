//! `mlx5dv_create_qp` and the mlx5 `wr_*` operations (`mlx5dv_qp_ex`).

#![allow(unsafe_code)]

super::unsupported::unsupported! {
    null: [mlx5dv_create_qp, mlx5dv_qp_ex_from_ibv_qp_ex],
}
