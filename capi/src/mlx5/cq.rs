//! `mlx5dv_create_cq`: an extended CQ with mlx5 attributes.

#![allow(unsafe_code)]

super::unsupported::unsupported! {
    null: [mlx5dv_create_cq],
}
