//! Userspace providers, compiled in and chosen by the device's driver id.
//!
//! A provider supplies what the kernel leaves to the driver's userspace
//! library: the driver data ("UHW") of every create command, the queue
//! memory layouts, and the data path (doorbells, WQE building, completion
//! parsing). rdma-core loads providers with `dlopen`; uverbs has no dynamic
//! loading: both live in this crate, and [`Provider::for_driver`] picks one
//! from the `RDMA_DRIVER_*` id the kernel reports for the device.
//!
//! The source lives in the workspace's `providers/` directory and is compiled
//! as modules of the `uverbs` crate, so providers use the crate's transport
//! and object types directly (no public plugin interface to keep stable, one
//! `unsafe` audit list).

pub(crate) mod mlx5;
pub(crate) mod queues;
pub(crate) mod rxe;

use crate::abi;

use crate::error::{Error, ErrorKind, Result};

/// The provider state of one open context.
#[derive(Debug)]
pub(crate) enum Provider {
    /// Soft-RoCE (`rdma_rxe`).
    Rxe(rxe::RxeContext),
    /// Mellanox/NVIDIA ConnectX (`mlx5_ib`).
    Mlx5(mlx5::Mlx5Context),
}

/// The provider chosen for a device before its context exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProviderKind {
    Rxe,
    Mlx5,
}

impl ProviderKind {
    /// The provider for a driver id, or an error naming the driver.
    pub(crate) fn for_driver(driver_id: Option<u32>, device: &str) -> Result<Self> {
        match driver_id {
            Some(abi::RDMA_DRIVER_RXE) => Ok(ProviderKind::Rxe),
            Some(abi::RDMA_DRIVER_MLX5) => Ok(ProviderKind::Mlx5),
            Some(other) => Err(Error::new(
                "select provider",
                ErrorKind::UnsupportedProvider,
                format!(
                    "device {device} uses driver id {other} ({}); uverbs has providers for \
                     rxe (14) and mlx5 (1) only",
                    driver_name(other)
                ),
            )),
            None => Err(Error::new(
                "select provider",
                ErrorKind::UnsupportedProvider,
                format!(
                    "the driver of device {device} could not be identified (netlink \
                     RDMA_NLDEV_CMD_GET_CHARDEV gave no driver id)"
                ),
            )),
        }
    }

    /// The provider's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ProviderKind::Rxe => "rxe",
            ProviderKind::Mlx5 => "mlx5",
        }
    }

    /// The driver ABI versions (`uverbsN/abi_version`) the provider speaks.
    pub(crate) fn abi_versions(self) -> std::ops::RangeInclusive<u32> {
        match self {
            ProviderKind::Rxe => rxe::ABI_VERSIONS,
            ProviderKind::Mlx5 => mlx5::ABI_VERSIONS,
        }
    }
}

/// The name of an `RDMA_DRIVER_*` id, for messages.
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
