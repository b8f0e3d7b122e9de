//! `mlx5dv_init_obj`: the direct-verbs view of verbs objects.

#![allow(unsafe_code)]

super::unsupported::unsupported! {
    positive: [mlx5dv_init_obj, mlx5dv_init_obj_1_0],
}
