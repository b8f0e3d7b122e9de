//! uverbs: userspace RDMA verbs in pure Rust.
//!
//! The crate talks to the kernel's uverbs character devices
//! (`/dev/infiniband/uverbsN`) directly, through the ioctl ABI
//! (`RDMA_VERBS_IOCTL`) and the legacy `write()` commands where the kernel
//! still requires them; it does not use libibverbs or any C code, and it has
//! no dynamic loading, so it links into fully static (musl) binaries. Its
//! providers, soft-RoCE (rxe) and ConnectX (mlx5), are compiled in and chosen
//! by the device's driver id. If you know libibverbs, you know this crate:
//! the [table below](#libibverbs-names) maps the C names to it, and a search
//! in these docs for a C name (`ibv_post_send`) finds its counterpart.
//!
//! # From a device to an RC exchange
//!
//! No hardware? `rdma link add rxe0 type rxe netdev eth0` (as root) makes a
//! soft-RoCE device of any Ethernet interface; `uverbs devinfo` shows it.
//!
//! **1. Find and open a device** ([`devices`], [`Context::open`]; like
//! `ibv_get_device_list` and `ibv_open_device`):
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
//! **2. Build the objects, connect, exchange.** A protection domain owns the
//! memory registrations and QPs; a CQ receives the completions; an RC QP
//! goes RESET → INIT → RTR → RTS with the peer's QP number and GID. Here the
//! peer is a second QP on the same device, so the program is complete; it
//! is `examples/rc_loopback.rs`, shown whole:
//!
#![doc = concat!("```no_run\n", include_str!("../examples/rc_loopback.rs"), "```")]
//!
//! The example copies the message in and out of its region. To read and
//! write registered buffers in place instead, with no copy and no
//! `unsafe`, take them from a [`BufferPool`] and post them through its
//! [`PooledQp`], which holds each until its completion
//! (`examples/buffer_pool.rs`).
//!
//! **3. Wait instead of spinning.** A CQ created on a
//! [`CompletionChannel`] raises an event after [`CompletionQueue::req_notify`];
//! [`CompletionChannel::get_event`] blocks for it, the [`CqEvent`] is
//! acknowledged when dropped, and a destroy waits for every event handed
//! out to be acknowledged, as `ibv_destroy_cq` does
//! (`examples/cq_events.rs`; with `poll(2)`: `examples/cq_events_nonblocking.rs`).
//! Device-wide events (port changes, QP and CQ errors) come from
//! [`Context::get_async_event`] (`examples/async_event.rs`,
//! `examples/async_event_nonblocking.rs`). Every event fd is `AsFd`.
//!
//! **4. Connect by address** with [`cm`], librdmacm's counterpart
//! (`examples/cm_server.rs`, `examples/cm_client.rs`).
//!
//! **5. Await** with the `tokio` feature: `uverbs::tokio` wraps every event
//! fd in tokio's `AsyncFd` and gives a CQ whose completions are awaited
//! (`AsyncCq`, with a busy-poll budget before it sleeps);
//! `examples/async_cq_events.rs`, `examples/async_cm.rs`. Any other
//! runtime plugs its reactor into [`event_stream`] (`poll_next_event(cx)`,
//! `futures_core::Stream` with the `stream` feature;
//! `examples/smol_cq_events.rs`).
//!
//! **6. mlx5.** The same API drives a ConnectX; [`mlx5`] adds what only
//! mlx5 has (the counterpart of `mlx5dv`): DevX objects, UMEM, async
//! commands and DevX event channels (`examples/devx_events.rs`).
//!
//! Errors ([`Error`]) name the operation, the errno, and what to change.
//! The full programs are in [`examples`] (also on disk
//! under `examples/`, run with `cargo run --example NAME`), and the `uverbs`
//! CLI (`uverbs devinfo`, `rc-pingpong`, `rping`, `perf`, ...) is a larger
//! user of the same API.
//!
//! # libibverbs names
//!
//! | libibverbs / librdmacm / mlx5dv | uverbs |
//! |---|---|
//! | `ibv_get_device_list`, `ibv_get_device_name` | [`devices`], [`DeviceInfo`] |
//! | `ibv_open_device`, `ibv_close_device` | [`Context::open`], [`Context::open_device`], drop |
//! | `ibv_query_device(_ex)`, `ibv_query_port`, `ibv_query_gid_table` | [`Context::query_device`], [`Context::query_port`], [`Context::query_gid_table`] |
//! | `ibv_alloc_pd` | [`Context::alloc_pd`] → [`ProtectionDomain`] |
//! | `ibv_import_device`, `ibv_import_pd`, `ibv_import_mr`, `ibv_unimport_*` | [`Context::import`] (and [`Context::dup_cmd_fd`]), [`Context::import_pd`], [`ProtectionDomain::import_mr`], drop or [`ProtectionDomain::unimport`] / [`MemoryRegion::unimport`] |
//! | `ibv_reg_mr`, `ibv_reg_mr_iova2`, `ibv_reg_dmabuf_mr`, `ibv_dereg_mr` | [`ProtectionDomain::alloc_mr`], [`ProtectionDomain::register_raw`] / [`ProtectionDomain::register_raw_iova`] (unsafe), [`ProtectionDomain::register_dmabuf`] → [`MemoryRegion`]; your own `Vec`/`Box`/mapping: [`ProtectionDomain::register_owned`] → [`OwnedMemoryRegion`] |
//! | `ibv_alloc_parent_domain`, `ibv_alloc_td`, `ibv_dealloc_td` | [`ProtectionDomain::alloc_parent_domain`] with [`ParentDomainAttr`] ([`Context::alloc_td`] → [`ThreadDomain`], a [`QueueAllocator`]) → [`ProtectionDomain`]; CQs: [`CqOptions::parent_domain`] |
//! | `ibv_alloc_mw`, `ibv_bind_mw`, `ibv_dealloc_mw`, `IBV_WR_BIND_MW`, `IBV_WR_LOCAL_INV`, `IBV_WR_SEND_WITH_INV` | [`ProtectionDomain::alloc_mw`] → [`MemoryWindow`], [`MemoryWindow::bind_to`] → [`SendOp::BindMw`], [`SendOp::LocalInvalidate`], [`SendOp::SendWithInvalidate`] |
//! | `ibv_wr_atomic_write` (`IBV_WR_ATOMIC_WRITE`) | [`SendOp::AtomicWrite`], [`WrSession::atomic_write`] |
//! | `ibv_create_comp_channel`, `ibv_get_cq_event`, `ibv_ack_cq_events` | [`Context::create_comp_channel`], [`CompletionChannel::get_event`], drop of [`CqEvent`] / [`ack_cq_events`], or by count: [`CqEvent::defer_ack`] then [`CompletionQueue::ack_events`] (see [`events`]) |
//! | `ibv_create_cq(_ex)`, `ibv_poll_cq`, `ibv_req_notify_cq` | [`Context::create_cq`] → [`CompletionQueue::poll`], [`CompletionQueue::req_notify`] |
//! | `ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`, `ibv_wc_read_*` (`ibv_cq_ex`), `IBV_WC_EX_WITH_*` | [`CompletionQueue::start_poll`] → [`CqPoll`] ([`CqPoll::next`], drop, [`CqPoll::wr_id`], [`CqPoll::byte_len`], [`CqPoll::completion_ts`], ...), [`CqOptions::wc_flags`] ([`WcExFlags`]) |
//! | `ibv_wc_read_completion_wallclock_ns` (`IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK`) | [`CqPoll::completion_wallclock_ns`] (mlx5, with the kernel's clock info page) |
//! | `ibv_create_qp`, `ibv_modify_qp`, `ibv_query_qp` | [`ProtectionDomain::create_qp`] → [`QueuePair::modify`], [`QueuePair::modify_to`], [`QueuePair::query`] |
//! | `ibv_create_qp_ex` (`create_flags`, `send_ops_flags`) | [`ProtectionDomain::create_qp_with`], [`QpCreateOptions`] ([`QpCreateFlags`], [`SendOpsFlags`]) |
//! | `ibv_qp_init_attr`, `ibv_qp_cap` | [`QpInitAttr::rc`] ([`QpInitAttr::uc`], [`QpInitAttr::ud`], [`QpInitAttr::new`]) and its setters, [`QpCap::new`]: `QpInitAttr::rc(&cq, &cq).cap(QpCap::new(16, 16, 1, 1))` |
//! | `ibv_qp_attr`, `ibv_ah_attr`, `ibv_global_route` | [`QpAttr::new`] and a setter per field, [`AhAttr::new`], [`GlobalRoute::new`]: `QpAttr::new().qp_state(QpState::Init).port_num(1)` |
//! | `ibv_cq_init_attr_ex` | [`CqOptions::new`] and its setters: `CqOptions::new().channel(&ch).comp_vector(0)` |
//! | `ibv_srq_attr`, `ibv_srq_init_attr`, `rdma_conn_param` | [`SrqAttr::new`], [`SrqOptions::new`], [`cm::ConnParam::new`], each with its setters |
//! | `IBV_MTU_256`, `IBV_MTU_512`, `IBV_MTU_1024`, `IBV_MTU_2048`, `IBV_MTU_4096` | [`Mtu::BYTES_256`] … [`Mtu::BYTES_4096`] |
//! | `IBV_WC_SUCCESS`, `IBV_WC_*` (`enum ibv_wc_status`, `enum ibv_wc_opcode`), `IBV_EVENT_*` | [`WcStatus::SUCCESS`], the constants of [`WcStatus`], [`WcOpcode`], [`AsyncEventType`] (the C names without their prefix) |
//! | `ibv_fork_init`, `ibv_is_fork_initialized`, `RDMAV_FORK_SAFE` | [`fork_init`], [`fork_status`] → [`ForkStatus`] |
//! | `ibv_post_send`, `ibv_post_recv`, `struct ibv_send_wr` | [`QueuePair::post_send`], [`QueuePair::post_recv`], [`SendWr`], [`RecvWr`], [`Sge`] |
//! | `ibv_wr_start`, `ibv_wr_*`, `ibv_wr_complete`, `ibv_wr_abort` (`ibv_qp_ex`) | one send session per QP ([`send_session`]), seen typed: [`QueuePair::start_wr`] → [`WrSession`] (see [`qp_ex`] for every `ibv_wr_*`); untyped: [`QueuePair::start_send`], [`SendBatch::push`], [`SendBatch::complete`], [`SendBatch::abort`]; call by call: [`QueuePair::begin_send`], [`QueuePair::push_send`], [`QueuePair::complete_send`], [`QueuePair::abort_send`] |
//! | `ibv_create_srq`, `ibv_post_srq_recv`, `ibv_modify_srq` | [`ProtectionDomain::create_srq`] → [`SharedReceiveQueue`] |
//! | `ibv_create_ah`, `ibv_init_ah_from_wc` | [`ProtectionDomain::create_ah`] → [`AddressHandle`] |
//! | `ibv_get_async_event`, `ibv_ack_async_event`, `ibv_event_type_str` | [`Context::get_async_event`], drop of [`AsyncEvent`] (or [`AsyncEvent::defer_ack`] then `ack_async_events(n)`), [`AsyncEventType::description`] |
//! | `struct ibv_wc`, `ibv_wc_status_str` | [`WorkCompletion`], [`WcStatus`] |
//! | `ibv_destroy_*` | `destroy()` (returns the object on failure: [`DestroyError`]), or drop |
//! | `rdma_create_event_channel`, `rdma_create_id`, `rdma_get_cm_event`, `rdma_ack_cm_event` | [`cm::EventChannel`], [`cm::CmId`], [`cm::CmEvent`] (acknowledged on drop) |
//! | `rdma_notify` | [`cm::CmId::notify`] |
//! | `rdma_getaddrinfo`, `rdma_create_ep`, `rdma_get_request` | [`cm::getaddrinfo`], [`cm::create_ep`], [`cm::CmId::get_request`] (synchronous ids: [`cm::CmId::create_sync`]) |
//! | `rdma_set_local_ece`, `rdma_get_remote_ece`, `rdma_reject_ece` | [`cm::CmId::set_local_ece`], [`cm::CmId::remote_ece`], [`cm::CmId::reject_ece`] |
//! | `mlx5dv_open_device` (DevX), `mlx5dv_devx_*` | [`mlx5`] |
//! | `mlx5dv_get_clock_info`, `mlx5dv_ts_to_ns` | [`mlx5::Mlx5Context::clock_info`], [`mlx5::ClockInfo::ts_to_ns`] |
//!
//! # Layout
//!
//! - [`sys`]: the only module that makes system calls ([`sys::Kernel`]); tests fake it.
//! - [`ioctl`]: the `RDMA_VERBS_IOCTL` command builder; [`abi`]: the kernel's structs.
//! - providers (rxe, mlx5) are compiled in and chosen by the device's driver
//!   id; [`mlx5`] holds the mlx5-only API (the counterpart of `mlx5dv`), and
//!   [`barrier`] the CPU/device ordering points of a userspace data path.
//!
//! # Features
//!
//! On by default: `rxe` and `mlx5` (the providers; at least one is
//! needed), `devx` (DevX in [`mlx5`]; implies `mlx5`), `cm` ([`cm`]) and
//! `cli` (the `uverbs` binary, never built for a dependency). Off: `tokio`
//! ([`tokio`](crate::tokio)) and `test-utils` (the fake kernel and the mlx5
//! device model, `uverbs::testing`). Items a feature brings say so in
//! these docs.
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(any(feature = "rxe", feature = "mlx5")))]
compile_error!(
    "uverbs needs at least one provider: enable the feature `rxe` or `mlx5` \
     (both are in the default features)"
);

mod ah;
mod ah_from_wc;
mod async_event;
#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
pub mod cm;
mod comp_channel;
mod context;
mod cq;
mod cq_ex;
mod device_list;
mod endpoint;
mod error;
mod event_acks;
mod event_count;
mod event_fd;
mod event_registry;
pub mod event_stream;
pub mod events;
mod fork;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod import;
pub mod ioctl;
mod mr;
mod mw;
pub mod netlink;
mod object;
mod parent_domain;
mod pd;
pub mod pooled_qp;
mod qp;
mod qp_attr;
pub mod qp_ex;
mod qp_options;
mod qp_state;
mod setters;
/// `uverbs::qp_ex` under its name before issue 37 (`uverbs::qpx::{Rc, Mlx5,
/// ...}` still resolve).
#[doc(hidden)]
pub use qp_ex as qpx;
mod query;
mod query_types;
pub mod queue_alloc;
mod recv_queue;
pub mod send_session;
mod shared_memory;
mod spin_lock;
mod srq;
mod sync;
pub mod sys;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod tokio;
mod wc;
mod wr;

// The providers live in the workspace's `providers/` folder (the project's
// layout) and are modules of this crate: `providers/mod.rs` describes the
// interface they implement, `providers/dispatch.rs` is the only place the
// core's calls fan out to them.
#[path = "../providers/mod.rs"]
mod providers;

pub use providers::barrier;

/// The example programs of the repository's `examples/` folder, shown
/// whole (documentation only). Run one with `cargo run --example NAME --
/// [ARGS]`; the async ones need `--features tokio`.
#[cfg(doc)]
pub mod examples {
    macro_rules! example {
        ($name:ident, $file:literal, $what:literal) => {
            #[doc = concat!("`", $file, "`: ", $what, "\n\n```rust,ignore\n",
                                                    include_str!(concat!("../", $file)), "```")]
            pub mod $name {}
        };
    }
    example!(
        rc_loopback,
        "examples/rc_loopback.rs",
        "an RC exchange from nothing (the crate root's walkthrough)."
    );
    example!(
        buffer_pool,
        "examples/buffer_pool.rs",
        "zero-copy without `unsafe`: pooled buffers moved into posted receives and sends \
         and back out with their completions, read and written in place."
    );
    example!(
        list_devices,
        "examples/list_devices.rs",
        "discovery and device queries."
    );
    example!(
        cq_events,
        "examples/cq_events.rs",
        "completion events, blocking: arm, wait, acknowledge, re-arm, poll."
    );
    example!(
        cq_events_nonblocking,
        "examples/cq_events_nonblocking.rs",
        "completion events with `poll(2)` on the channel's fd."
    );
    example!(
        async_event,
        "examples/async_event.rs",
        "the device's async events, blocking."
    );
    example!(
        async_event_nonblocking,
        "examples/async_event_nonblocking.rs",
        "the device's async events with `poll(2)`."
    );
    example!(
        cm_server,
        "examples/cm_server.rs",
        "an rdma_cm server: listen, accept, exchange."
    );
    example!(
        cm_client,
        "examples/cm_client.rs",
        "an rdma_cm client: resolve, connect, exchange."
    );
    example!(
        async_cq_events,
        "examples/async_cq_events.rs",
        "completions awaited on tokio (`uverbs::tokio::AsyncCq`)."
    );
    example!(
        async_cm,
        "examples/async_cm.rs",
        "an rdma_cm client and server on tokio."
    );
    example!(
        smol_cq_events,
        "examples/smol_cq_events.rs",
        "completion events on smol through `uverbs::event_stream` (a second runtime)."
    );
    example!(
        devx_events,
        "examples/devx_events.rs",
        "DevX event channels of a ConnectX: subscribe, read blocking and with `poll`."
    );
    example!(
        typed_post,
        "examples/typed_post.rs",
        "the extended verbs: a typed posting session (`ibv_wr_*`) generic over the \
         provider, completions read field by field."
    );
    example!(
        loopback,
        "examples/common/loopback.rs",
        "the loopback RC pair the completion-event examples share."
    );
}

#[cfg(any(test, feature = "test-utils"))]
pub mod testing;

// README.md's and src/README.md's Rust snippets compile as doctests
// (tests/docs.rs checks that none is left out with `ignore`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("README.md")]
pub struct SrcReadmeDoctests;
#[cfg(feature = "mlx5")]
#[cfg_attr(docsrs, doc(cfg(feature = "mlx5")))]
pub use providers::mlx5::dv as mlx5;

pub use ah::AddressHandle;
pub use async_event::{AsyncElement, AsyncEvent, AsyncEventType, EventAffiliation, EventSeverity};
pub use comp_channel::{ack_cq_events, CompletionChannel, CqEvent, DeferredCqEvent};
pub use context::{CommandMode, Context};
pub use cq::{CompletionQueue, CqLock, CqOptions, SharedCompletionQueue};
pub use cq_ex::CqPoll;
pub use device_list::{devices, devices_with, find_device, sysfs_path, DeviceInfo, NodeType};
pub use endpoint::{BringUp, Endpoint};
pub use error::{DestroyError, Error, ErrorKind, FirmwareStatus, Result};
pub use event_acks::EventAcks;
pub use fork::{copy_on_fork, fork_init, fork_status, fork_status_with, ForkStatus};
pub use mr::{AccessFlags, BufferPool, MemoryRegion, OwnedMemoryRegion, PoolBuf, RegionBuffer};
pub use mw::{MemoryWindow, MwBind, MwType};
pub use parent_domain::{ParentDomainAttr, ThreadDomain};
pub use pd::ProtectionDomain;
pub use pooled_qp::{PoolCompletion, PooledQp, PostRefused};
pub use qp::{QpInitAttr, QueuePair, SendLock, SharedQueuePair};
pub use qp_attr::{
    AhAttr, GlobalRoute, PathMigState, QpAttr, QpAttrMask, QpCap, QpInitInfo, QpState, QpType,
};
pub use qp_ex::WrSession;
pub use qp_options::{QpCreateFlags, QpCreateOptions, SendOpsFlags};
pub use qp_state::{check_modify, next_states, required_attrs};
pub use query_types::{
    CqModerationCaps, DeviceAttr, DeviceCapFlags, DeviceCapFlagsEx, Gid, GidEntry, GidType,
    LinkLayer, Mtu, OdpCaps, PortAttr, PortCapFlags, PortCapFlags2, PortState, RssCaps, RtValues,
    TmCaps,
};
pub use queue_alloc::{QueueAllocRequest, QueueAllocator, QueueMemory, QueueResource};
pub use recv_queue::RecvQueue;
pub use send_session::SendBatch;
pub use srq::{SharedReceiveQueue, SrqAttr, SrqOptions};
pub use wc::{WcExFlags, WcFlags, WcFlagsNumbering, WcOpcode, WcStatus, WorkCompletion};
pub use wr::{Payload, PostError, PostErrorKind, RecvWr, SendFlags, SendOp, SendWr, Sge, UdDest};

/// The kernel ABI (`uverbs-abi`) in one namespace, as the C headers have it.
pub mod abi {
    pub use uverbs_abi::{
        events::*, ioctl::*, ioctl_verbs::*, mlx5::*, mlx5_ioctl::*, nldev::*, rxe::*, ucma::*,
        write::*, write_cq::*, write_flow::*, write_qp::*, write_srq_wq::*,
    };
}
