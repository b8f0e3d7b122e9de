//! Userspace providers, compiled in and chosen by the device's driver id.
//!
//! A provider supplies what the kernel leaves to the driver's userspace
//! library: the driver data ("UHW") of every command, the memory the device
//! reads and writes (queue buffers, doorbell records, UAR pages), and the data
//! path (WQE building, doorbells, completion parsing, CQ arming). rdma-core
//! loads providers with `dlopen` and calls them through `verbs_context_ops`;
//! uverbs links them in and calls them through one typed interface:
//!
//! - [`Provider`] (`interface.rs`): what a provider implements, object by
//!   object: open a context (with its own driver data and fallbacks), the
//!   driver data of PD and AH, and for CQ, QP and SRQ a **plan** taken from
//!   the full create request (the provider sizes and allocates its buffers and
//!   writes the command's driver data), then a **finish** from the kernel's
//!   answer (the data-path state), plus the data path itself: post, poll,
//!   arm, and the hook run when a completion event is read.
//! - [`Device`] (`device.rs`): the narrow handle a provider gets from the
//!   core: the kernel transport and command fd (ioctl, write, mmap), nothing
//!   of the core's objects. [`dma`] allocates memory the device may access,
//!   and [`barrier`] names the CPU/device ordering points rdma-core uses.
//! - `dispatch.rs`: the only place that matches on providers. One macro call
//!   lists them; it generates the `Any*` enums the core stores and their
//!   delegating methods. Every data-path call is a `match` on a small enum
//!   followed by a direct call: no virtual call on the hot path.
//!
//! Providers import only the crate's vocabulary (`abi`, `error`, `sys`, `wc`,
//! `wr`) and this module (their unit tests also the test doubles,
//! `crate::testing`); the core imports only this module's dispatch types.
//! `tests/provider_boundary.rs` enforces both directions.
//!
//! Adding a provider (siw, efa, ...) is a new folder with a type that
//! implements [`Provider`], one line in the `providers!` list in
//! `dispatch.rs`, and its driver id in [`ProviderKind::for_driver`]. The
//! provider's kernel (or device) side, faked for tests, lives with the other
//! test doubles in `src/testing/` behind the `test-utils` feature, as rxe's
//! does (`src/testing/rxe/`, `uverbs::testing::rxe`): one simulation shared
//! by unit tests, host tests and `uverbs perf micro --fake`, written without
//! importing the provider (the boundary test checks that too).
//!
//! The source lives in the workspace's `providers/` directory, next to
//! `src/`, as the project's layout asks; it is compiled as modules of the
//! `uverbs` crate (mounted from `src/lib.rs`), so the providers' `unsafe`
//! is audited with the crate's and nothing here is a stable plugin API.

pub mod barrier;
pub(crate) mod context_fds;
mod device;
mod dispatch;
pub(crate) mod dma;
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzzing;
mod interface;
#[cfg(feature = "mlx5")]
#[cfg_attr(docsrs, doc(cfg(feature = "mlx5")))]
pub mod mlx5;
#[cfg(feature = "rxe")]
pub(crate) mod rxe;
pub(crate) mod typed;

pub(crate) use device::{ioctl_on, write_cmd_on, Device, Transport};
pub(crate) use dispatch::*;
pub(crate) use interface::*;

use crate::{
    abi,
    error::{Error, ErrorKind},
};

/// Names an `RDMA_DRIVER_*` id, for messages.
pub(crate) fn driver_name(id: u32) -> &'static str {
    match id {
        abi::RDMA_DRIVER_UNKNOWN => "unknown",
        abi::RDMA_DRIVER_MLX5 => "mlx5",
        abi::RDMA_DRIVER_MLX4 => "mlx4",
        abi::RDMA_DRIVER_CXGB3 => "cxgb3",
        abi::RDMA_DRIVER_CXGB4 => "cxgb4",
        abi::RDMA_DRIVER_MTHCA => "mthca",
        abi::RDMA_DRIVER_BNXT_RE => "bnxt_re",
        abi::RDMA_DRIVER_OCRDMA => "ocrdma",
        abi::RDMA_DRIVER_NES => "nes",
        abi::RDMA_DRIVER_I40IW => "irdma",
        abi::RDMA_DRIVER_VMW_PVRDMA => "vmw_pvrdma",
        abi::RDMA_DRIVER_QEDR => "qedr",
        abi::RDMA_DRIVER_HNS => "hns",
        abi::RDMA_DRIVER_USNIC => "usnic",
        abi::RDMA_DRIVER_RXE => "rxe",
        abi::RDMA_DRIVER_HFI1 => "hfi1",
        abi::RDMA_DRIVER_QIB => "qib",
        abi::RDMA_DRIVER_EFA => "efa",
        abi::RDMA_DRIVER_SIW => "siw",
        abi::RDMA_DRIVER_ERDMA => "erdma",
        _ => "a driver newer than this crate",
    }
}

/// The error for a driver no provider handles.
pub(crate) fn unsupported_driver(driver_id: Option<u32>, device: &str) -> Error {
    let detail = match driver_id {
        Some(id) => format!(
            "device {device} uses driver id {id} ({}); uverbs has providers for {}",
            driver_name(id),
            ProviderKind::supported()
        ),
        None => format!(
            "the driver of device {device} could not be identified (netlink \
             RDMA_NLDEV_CMD_GET_CHARDEV gave no driver id)"
        ),
    };
    Error::new("select provider", ErrorKind::UnsupportedProvider, detail)
}
