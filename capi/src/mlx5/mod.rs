//! `libmlx5.so.1`'s functions: rdma-core 44's `<infiniband/mlx5dv.h>` over
//! `uverbs::mlx5`.
//!
//! They live in this library, next to the verbs objects they take (an
//! `ibv_context`, `ibv_qp`, `ibv_cq` of ours), and are exported privately
//! as `uverbs_mlx5dv_*`; `libmlx5.so.1` (`capi/mlx5/`) is a library of
//! stubs that give them rdma-core's names and version nodes. The static
//! archive defines the plain names too (`capi/build.rs`), so a static
//! program links one archive for both APIs.
//!
//! Each function translates between mlx5dv.h's structs and `uverbs::mlx5`
//! and fails as libmlx5 does: on a device the mlx5 provider does not
//! drive, `EOPNOTSUPP` in the function's convention (libmlx5's
//! `is_mlx5_dev` check); what uverbs does not provide fails with
//! `EOPNOTSUPP` too (`unsupported.rs`), which pyverbs' tests take as "not
//! supported here".

pub(crate) mod unsupported;

mod context;
mod cq;
mod devx;
mod obj;
mod qp;
