//! The mlx5 (ConnectX) provider.
//!
//! Opening a context sends `mlx5_ib_alloc_ucontext_req_v2` as driver data and
//! keeps the device geometry from `mlx5_ib_alloc_ucontext_resp`
//! (`include/uapi/rdma/mlx5-abi.h`; the kernel side is `mlx5_ib_alloc_ucontext`
//! in `drivers/infiniband/hw/mlx5/main.c`).

mod context;

pub(crate) use context::{ContextRequest, Mlx5Context, ABI_VERSIONS};
