//! Kernel ABI of Linux RDMA userspace, for a pure-Rust verbs stack.
//!
//! Hand-maintained `#[repr(C)]` structs (zerocopy `FromBytes`/`IntoBytes`) and
//! constants of the Linux 6.1 UAPI headers `<rdma/*.h>`:
//!
//! | module | header(s) | used for |
//! |---|---|---|
//! | [`ioctl`] | `rdma_user_ioctl_cmds.h`, `ib_user_ioctl_cmds.h` | `RDMA_VERBS_IOCTL` framing and ids |
//! | [`ioctl_verbs`] | `ib_user_ioctl_verbs.h` | enums/structs shared by ioctl and write |
//! | [`write`](mod@write), [`write_cq`], [`write_qp`], [`write_srq_wq`], [`write_flow`] | `ib_user_verbs.h` | legacy/extended `write()` commands |
//! | [`events`] | `ib_user_verbs.h` | async event and completion channel records |
//! | [`rxe`] | `rdma_user_rxe.h` | soft-RoCE driver data and queue formats |
//! | [`mlx5`], [`mlx5_ioctl`] | `mlx5-abi.h`, `mlx5_user_ioctl_{cmds,verbs}.h` | mlx5 driver data and DEVX ids |
//! | [`ucma`] | `rdma_user_cm.h`, `ib_user_sa.h` | `/dev/infiniband/rdma_cm` |
//! | [`nldev`] | `rdma_netlink.h` | `NETLINK_RDMA` discovery |
//!
//! Names follow C exactly: struct `ib_uverbs_attr` is [`ioctl::IbUverbsAttr`],
//! constants keep their C spelling, and a Rust keyword gets a trailing `_`.
//! C enums are plain integer constants: kernel-written fields stay integers.
//! Multi-byte fields the kernel declares `__be*` are plain integers holding
//! big-endian bytes (their docs say so).
//!
//! Every struct and constant is defined through the [`layout`] macros and is
//! checked against the real headers by `tests/layout.rs` (size, alignment,
//! every field offset and size, every constant value). Layouts assume a 64-bit
//! Linux target.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(not(target_pointer_width = "64"))]
compile_error!("uverbs-abi layouts are checked for 64-bit Linux targets only");

pub mod layout;

pub mod events;
pub mod ioctl;
pub mod ioctl_verbs;
pub mod mlx5;
pub mod mlx5_ioctl;
pub mod nldev;
pub mod rxe;
pub mod ucma;
pub mod write;
pub mod write_cq;
pub mod write_flow;
pub mod write_qp;
pub mod write_srq_wq;
