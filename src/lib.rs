//! uverbs: userspace RDMA verbs in pure Rust.
//!
//! The crate talks to the kernel's uverbs character devices
//! (`/dev/infiniband/uverbsN`) directly, through the ioctl ABI
//! (`RDMA_VERBS_IOCTL`) and the legacy `write()` commands where the kernel
//! still requires them; it does not use libibverbs or any C code, and it has
//! no dynamic loading, so it links into fully static (musl) binaries.
//!
//! ```no_run
//! # fn main() -> uverbs::Result<()> {
//! for dev in uverbs::devices()? {
//!     let ctx = uverbs::Context::open_device(uverbs::sys::linux(), dev)?;
//!     let attr = ctx.query_device()?;
//!     println!("{}: {} port(s)", ctx.device().name, attr.phys_port_cnt);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A QP and its data path (the connection setup, an exchange of QP numbers
//! and GIDs with the peer followed by `modify` to INIT, RTR and RTS, is
//! left out):
//!
//! ```no_run
//! use uverbs::{AccessFlags, Context, CqOptions, QpCap, QpInitAttr, QpType, RecvWr, SendWr};
//!
//! # fn main() -> uverbs::Result<()> {
//! let ctx = Context::open(None)?;
//! let pd = ctx.alloc_pd()?;
//! let mut cq = ctx.create_cq(64, CqOptions::default())?;
//! let mut qp = pd.create_qp(&QpInitAttr {
//!     qp_type: QpType::Rc,
//!     send_cq: &cq,
//!     recv_cq: &cq,
//!     srq: None,
//!     cap: QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 64 },
//!     sq_sig_all: false,
//! })?;
//! let buf = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)?;
//! qp.post_recv(&[RecvWr::new(1, &[buf.sge(0, 4096)?])])?;
//! qp.post_send(&[SendWr::send(2, &[buf.sge(0, 64)?])])?;
//! let mut wc = [uverbs::WorkCompletion::default(); 16];
//! let n = cq.poll(&mut wc);
//! # let _ = n;
//! # Ok(())
//! # }
//! ```
//!
//! Layout:
//! - [`sys`]: the only module that makes system calls ([`sys::Kernel`]); tests fake it.
//! - [`ioctl`]: the `RDMA_VERBS_IOCTL` command builder.
//! - [`devices`], [`Context`]: discovery and opening a device.
//! - [`Context::query_device`], [`Context::query_port`], [`Context::query_gid_table`]: queries.
//! - providers (rxe, mlx5) are compiled in and chosen by the device's driver
//!   id; [`mlx5`] holds the mlx5-only API (the counterpart of `mlx5dv`), and
//!   [`barrier`] the CPU/device ordering points of a userspace data path.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod ah;
mod ah_from_wc;
mod async_event;
pub mod cm;
mod comp_channel;
mod context;
mod cq;
mod device_list;
mod error;
mod event_count;
mod event_fd;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod ioctl;
mod mr;
pub mod netlink;
mod object;
mod pd;
mod qp;
mod qp_attr;
mod qp_state;
mod query;
mod query_types;
mod srq;
pub mod sys;
mod wc;
mod wr;

// The providers live in the workspace's `providers/` folder (the project's
// layout) and are modules of this crate: `providers/mod.rs` describes the
// interface they implement, `providers/dispatch.rs` is the only place the
// core's calls fan out to them.
#[path = "../providers/mod.rs"]
mod providers;

pub use providers::barrier;

/// The kernel's side, faked, for tests, benchmarks and `uverbs perf micro
/// --fake` (feature `test-utils`, which this crate's own tests turn on).
/// The generic scripted kernel is [`sys::fake`].
#[cfg(any(test, feature = "test-utils"))]
pub mod testing {
    pub use crate::providers::mlx5::model as mlx5;
    pub use crate::providers::rxe::fake as rxe;
}
pub use providers::mlx5::dv as mlx5;

pub use ah::AddressHandle;
pub use async_event::{AsyncElement, AsyncEvent, AsyncEventType};
pub use comp_channel::{ack_cq_events, CompletionChannel, CqEvent};
pub use context::{CommandMode, Context};
pub use cq::{CompletionQueue, CqOptions};
pub use device_list::{devices, devices_with, find_device, DeviceInfo, NodeType};
pub use error::{Error, ErrorKind, FirmwareStatus, Result};
pub use mr::{AccessFlags, MemoryRegion};
pub use pd::ProtectionDomain;
pub use qp::{QpInitAttr, QueuePair};
pub use qp_attr::*;
pub use qp_state::{check_modify, next_states, required_attrs};
pub use query::*;
pub use srq::{SharedReceiveQueue, SrqAttr};
pub use wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion};
pub use wr::{Payload, PostError, PostErrorKind, RecvWr, SendFlags, SendOp, SendWr, Sge, UdDest};

/// The kernel ABI (`uverbs-abi`) in one namespace, as the C headers have it.
pub mod abi {
    pub use uverbs_abi::{
        events::*, ioctl::*, ioctl_verbs::*, mlx5::*, mlx5_ioctl::*, nldev::*, rxe::*, ucma::*,
        write::*, write_cq::*, write_flow::*, write_qp::*, write_srq_wq::*,
    };
}
