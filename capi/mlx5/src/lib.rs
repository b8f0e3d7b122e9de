//! `libmlx5.so.1` over uverbs: rdma-core 44's `<infiniband/mlx5dv.h>` ABI.
//!
//! Nothing but stubs: each `mlx5dv_*` function of rdma-core's library,
//! under the version node rdma-core gives it (`mlx5dv_open_device@@MLX5_1.7`),
//! is one jump to the function of the same name that our `libibverbs.so.1`
//! exports privately as `uverbs_mlx5dv_*` (the `uverbs-cabi` crate,
//! `capi/src/mlx5/`), where the verbs objects the functions take live. So a
//! program that loads both libraries, as every mlx5dv user does, works on
//! one copy of uverbs, and a static link needs only `libibverbs.a`, which
//! defines the same functions under their plain names. `build.rs` generates
//! the stubs from `exports.txt`; see `capi/README.md`. (It links std, as
//! every Rust cdylib must, and uses none of it.)

#[allow(unsafe_code)] // the generated `global_asm!` stubs: jumps, no Rust code
mod stubs {
    #[cfg(not(target_env = "musl"))]
    include!(concat!(env!("OUT_DIR"), "/stubs.rs"));
}
