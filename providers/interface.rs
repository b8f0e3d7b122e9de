//! The interface every provider implements ([`Provider`]) and the requests
//! the core hands it.
//!
//! Object creation has the same shape for CQ, QP and SRQ, whatever the
//! provider:
//!
//! 1. **plan** (`plan_cq`, `plan_qp`, `plan_srq`) gets the full create request
//!    (sizes, QP type, capabilities, SRQ) and returns the plan, which carries
//!    the command's driver data ([`DriverData`]), and the object's **shared**
//!    state. The shared state holds what must live exactly as long as the
//!    kernel object (memory the device writes: mlx5 queue buffers and doorbell
//!    records) and what completion events need (mlx5's CQ arm sequence
//!    number). The core keeps it inside the kernel object's owner, which
//!    drops it only after the kernel object is destroyed, and events hold
//!    that owner alive.
//! 2. the core runs the create command (ioctl, or the write fallback) with
//!    the plan's driver data;
//! 3. **finish** turns the kernel's answer into the data-path state that the
//!    user's handle owns (rxe maps its rings; mlx5 wraps its buffers).
//!
//! The data path (post, poll, arm) takes that state by `&mut` where the
//! handle owns the producer or consumer side, so it needs no lock.

use std::{
    fmt::Debug,
    ops::RangeInclusive,
    sync::{atomic::AtomicBool, Arc},
};

use super::Device;
use crate::{
    error::{Error, ErrorKind, Result},
    sys::Errno,
    wc::{WcExFlags, WorkCompletion},
    wr::{PostError, PostErrorKind, RecvWr, SendWr},
    AhAttr, QpCap, QpCreateFlags, QpState, QpType, QueueAllocator, SendOpsFlags,
};

/// The driver data of a create command: input sent after the core request,
/// output the kernel writes after the core response.
pub(crate) trait DriverData {
    /// `(driver_in, driver_out)`.
    fn driver_bufs(&mut self) -> (&[u8], &mut [u8]);
}

/// What a context is opened with beyond the defaults: provider-specific
/// requests the core passes through without reading them (rdma-core's
/// `mlx5dv_open_device` attributes).
/// A provider's step for every completion event read for a CQ
/// ([`Provider::completion_hook`]): cheap, it runs under the event map's
/// spinlock.
#[derive(Clone)]
pub(crate) struct CompletionHook(pub(crate) Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for CompletionHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompletionHook")
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OpenRequest {
    /// Whether the mlx5 context asks for a DevX user context.
    pub(crate) devx: DevxRequest,
}

/// How an mlx5 context asks for a DevX user context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum DevxRequest {
    /// Ask, and open without DevX if the kernel refuses (`ibv_open_device`).
    #[default]
    Prefer,
    /// Ask, and fail if the kernel refuses (`MLX5DV_CONTEXT_FLAGS_DEVX`).
    #[cfg_attr(not(feature = "mlx5"), allow(dead_code))] // used by mlx5 only
    Require,
}

/// Runs the `GET_CONTEXT` command (ioctl, or the write fallback) with the
/// given driver data; the core keeps what the core response says.
pub(crate) type GetContext<'a> = dyn FnMut(&[u8], &mut [u8]) -> Result<()> + 'a;

/// Runs `UVERBS_METHOD_QUERY_CONTEXT` (an imported context), with the
/// provider's driver output attribute if it has one (`(id, buffer)`); the
/// core keeps what the core attributes say.
pub(crate) type QueryContext<'a> = dyn FnMut(Option<(u16, &mut [u8])>) -> Result<()> + 'a;

/// Runs a command with the given driver output buffer.
pub(crate) type RunWithOut<'a> = dyn FnMut(&mut [u8]) -> Result<(), Errno> + 'a;

/// Runs a command with the given driver input bytes.
pub(crate) type RunWithIn<'a> = dyn FnMut(&[u8]) -> Result<(), Errno> + 'a;

/// Runs a command with the given driver input bytes and driver output
/// buffer; the error is the core's, naming the command.
pub(crate) type RunWithInOut<'a> = dyn FnMut(&[u8], &mut [u8]) -> Result<()> + 'a;

/// The completions one batch of a polling session takes off the ring at
/// most (`src/cq_ex.rs`: the size of a CQ's session buffer).
pub(crate) const SESSION_BATCH: usize = 64;

/// The PD `ibv_create_cq_ex` was given (`IBV_CQ_INIT_ATTR_MASK_PD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// rxe ignores it, as rdma-core's rxe.
#[allow(dead_code)]
pub(crate) enum CqPd {
    /// None.
    None,
    /// A plain protection domain (libmlx5 refuses it with `EINVAL`).
    ProtectionDomain,
    /// A parent domain: its allocator and thread domain come as the
    /// create's [`Domain`].
    ParentDomain,
}

/// What `ibv_create_cq` asked for.
#[derive(Debug, Clone, Copy)]
// rxe reads only part of it; providers that size and allocate their own
// queues (mlx5) need all of it.
#[allow(dead_code)]
pub(crate) struct CqRequest {
    /// The PD it was given.
    pub(crate) pd: CqPd,
    /// Minimum number of completions the CQ holds.
    pub(crate) cqe: u32,
    /// Completion vector.
    pub(crate) comp_vector: u32,
    /// The completion fields asked for (`ibv_create_cq_ex`'s `wc_flags`):
    /// the core has refused what no provider supports; the provider
    /// refuses what it has not (rxe: timestamps).
    pub(crate) wc_flags: WcExFlags,
    /// A driver's own attributes (mlx5's `mlx5dv_create_cq`), already
    /// checked against the device by the provider's API that took them.
    pub(crate) driver: Option<DriverCqAttrs>,
}

/// A driver's own CQ attributes (mlx5's `struct mlx5dv_cq_init_attr`,
/// checked): what goes into its create command's driver data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DriverCqAttrs {
    /// The CQE size asked for (64 or 128); `None`: `MLX5_CQE_SIZE` or 64.
    pub(crate) cqe_size: Option<u16>,
    /// CQE compression with this response format (`cqe_comp_en`).
    pub(crate) compressed_format: Option<u8>,
    /// 128-byte CQE padding (`MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD`).
    pub(crate) pad: bool,
}

/// What the kernel answered to a CQ create.
#[derive(Debug, Clone, Copy)]
// rxe reads only part of it; providers that size and allocate their own
// queues (mlx5) need all of it.
#[allow(dead_code)]
pub(crate) struct CqCreated {
    /// The kernel handle.
    pub(crate) handle: u32,
    /// The number of completions the kernel granted.
    pub(crate) cqe: u32,
}

/// What `ibv_create_qp` asked for.
#[derive(Debug, Clone, Copy)]
// rxe reads only part of it; providers that size and allocate their own
// queues (mlx5) need all of it.
#[allow(dead_code)]
pub(crate) struct QpRequest {
    /// The QP's type (the core passes any; the provider refuses what it
    /// does not create).
    pub(crate) qp_type: QpType,
    /// Requested sizes, as asked (also on an SRQ, where the kernel is
    /// sent no receive sizes: libmlx5 checks `max_recv_wr` there too).
    pub(crate) cap: QpCap,
    /// A completion for every send.
    pub(crate) sq_sig_all: bool,
    /// Receives come from an SRQ: the QP has no receive queue.
    pub(crate) has_srq: bool,
    /// Creation flags (the kernel checks them; rxe refuses any).
    pub(crate) create_flags: QpCreateFlags,
    /// The send operations the QP will post (`None`: not said).
    pub(crate) send_ops: Option<SendOpsFlags>,
    /// A driver's own attributes (mlx5's `mlx5dv_create_qp`), already
    /// checked by the provider's API that took them.
    pub(crate) driver: Option<DriverQpAttrs>,
}

/// A driver's own QP attributes (mlx5's `struct mlx5dv_qp_init_attr`,
/// checked): what goes into its create command's driver data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DriverQpAttrs {
    /// Creation flags of the driver data, for the kernel to check (mlx5:
    /// `mlx5_ib_create_qp.flags`' `MLX5_QP_FLAG_*`).
    pub(crate) flags: u32,
}

/// What the kernel answered to a QP create.
#[derive(Debug, Clone, Copy)]
// rxe reads only part of it; providers that size and allocate their own
// queues (mlx5) need all of it.
#[allow(dead_code)]
pub(crate) struct QpCreated {
    /// The kernel handle.
    pub(crate) handle: u32,
    /// The QP number.
    pub(crate) qp_num: u32,
    /// The sizes the kernel granted.
    pub(crate) cap: QpCap,
}

/// What `ibv_create_srq` asked for.
#[derive(Debug, Clone, Copy)]
// rxe reads only part of it; providers that size and allocate their own
// queues (mlx5) need all of it.
#[allow(dead_code)]
pub(crate) struct SrqRequest {
    /// Receive work requests.
    pub(crate) max_wr: u32,
    /// Scatter/gather entries per request.
    pub(crate) max_sge: u32,
}

/// What the kernel answered to an SRQ create.
#[derive(Debug, Clone, Copy)]
// rxe reads only part of it; providers that size and allocate their own
// queues (mlx5) need all of it.
#[allow(dead_code)]
pub(crate) struct SrqCreated {
    /// The kernel handle.
    pub(crate) handle: u32,
    /// Receive work requests granted.
    pub(crate) max_wr: u32,
    /// Scatter/gather entries granted.
    pub(crate) max_sge: u32,
}

/// The parent domain a CQ, QP or SRQ is created in, as its provider sees
/// it (libmlx5's `mlx5_parent_domain`): the program's queue allocator and
/// the thread domain's provider state, each if it has one. The default is
/// a plain PD's: neither.
pub(crate) struct Domain<'a, Td> {
    /// Where the provider asks for queue memory first.
    pub(crate) allocator: Option<&'a Arc<dyn QueueAllocator>>,
    /// The thread domain's provider state.
    pub(crate) td: Option<&'a Td>,
}

impl<Td> Clone for Domain<'_, Td> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Td> Copy for Domain<'_, Td> {}

impl<Td> Default for Domain<'_, Td> {
    fn default() -> Self {
        Domain {
            allocator: None,
            td: None,
        }
    }
}

/// The error of a provider without parent or thread domains (rdma-core's
/// rxe leaves both ops unset: libibverbs answers `EOPNOTSUPP`).
pub(crate) fn no_domains(op: &'static str, provider: &str) -> Error {
    Error::new(
        op,
        ErrorKind::UnsupportedProvider,
        format!(
            "the {provider} provider has no parent or thread domains (as rdma-core's \
             {provider})"
        ),
    )
}

/// The objects a new QP is attached to, as their provider state: the CQs
/// its completions go to and the SRQ it receives from. mlx5 needs them to
/// find a QP's work requests from a CQE and to clean a CQ of a QP's CQEs.
#[cfg_attr(not(feature = "mlx5"), allow(dead_code))] // used by mlx5 only
pub(crate) struct QpLinks<'a, P: Provider> {
    /// The send CQ's state.
    pub(crate) send_cq: &'a P::CqShared,
    /// The receive CQ's state.
    pub(crate) recv_cq: &'a P::CqShared,
    /// The SRQ's state, for a QP that receives from one.
    pub(crate) srq: Option<&'a P::SrqShared>,
}

/// A userspace provider: the typed counterpart of rdma-core's
/// `verbs_context_ops`. Every function is static (no `self`): the dispatch
/// enums call them directly.
pub(crate) trait Provider: Sized + 'static {
    /// The provider's name (`"rxe"`).
    const NAME: &'static str;
    /// The `RDMA_DRIVER_*` id of the kernel driver it serves.
    const DRIVER_ID: u32;
    /// The driver ABI versions (`uverbsN/abi_version`) it speaks.
    const ABI_VERSIONS: RangeInclusive<u32>;

    /// Per-context state (device geometry, UARs).
    type Context: Debug + Send + Sync;
    /// Per-PD driver data (mlx5's PD number).
    type Pd: Debug + Send + Sync;
    /// A thread domain's state (mlx5: its dedicated bfreg, given back when
    /// it is dropped).
    type Td: Debug + Send + Sync;
    /// Per-AH driver data (rxe's AH index).
    type Ah: Debug + Send + Sync;
    /// A CQ create in progress.
    type CqPlan: DriverData + Debug;
    /// CQ state shared with the event reader and kept until the kernel CQ is gone.
    type CqShared: Debug + Send + Sync;
    /// The CQ's consumer side.
    type Cq: Debug + Send + Sync;
    /// A QP create in progress.
    type QpPlan: DriverData + Debug;
    /// QP state kept until the kernel QP is gone.
    type QpShared: Debug + Send + Sync;
    /// The QP's producer side (send and receive queues).
    type Qp: Debug + Send + Sync;
    /// A QP's own receive queue taken out of [`Provider::Qp`]
    /// ([`Provider::take_rq`]), posted to on its own.
    type Rq: Debug + Send + Sync;
    /// The QP's send session seen through a view (`ibv_wr_start` ..
    /// `ibv_wr_complete`): the session's cursor (where the next WQE goes,
    /// what is written and not yet handed over) lives in the QP's send
    /// queue ([`Provider::begin_send`]); a view holds the queue borrowed
    /// and may keep the cursor in itself while it lives (mlx5 does, so it
    /// stays in registers over requests written in one function), giving
    /// it back to the queue when it is suspended, completed or aborted.
    type SendSession<'q>: Debug + Send
    where
        Self: 'q;
    /// An SRQ create in progress.
    type SrqPlan: DriverData + Debug;
    /// SRQ state kept until the kernel SRQ is gone.
    type SrqShared: Debug + Send + Sync;
    /// The SRQ's producer side.
    type Srq: Debug + Send + Sync;

    /// Whether a device seen only through sysfs (no netlink) is one of this
    /// provider's: its name, and whether it has a `parent` network device.
    fn claims_sysfs_device(name: &str, has_parent: bool) -> bool;

    /// Opens the context: runs `get_context` with the provider's driver data
    /// (retrying with less when the kernel refuses, as the provider's
    /// rdma-core counterpart does) and sets up per-context state.
    fn open(
        dev: Device<'_>,
        get_context: &mut GetContext<'_>,
        request: &OpenRequest,
    ) -> Result<Self::Context>;

    /// The device's free-running clock now (`ibv_query_rt_values_ex`'s
    /// raw clock), in device ticks; `None` when the provider cannot read it
    /// (rdma-core's rxe has no `query_rt_values`).
    fn read_raw_clock(_ctx: &Self::Context) -> Option<u64> {
        None
    }

    /// Sets up the state of a context another process (or this one)
    /// opened, whose command fd the program passed on (libibverbs'
    /// `import_context`, `ibv_import_device`): `query` runs
    /// `UVERBS_METHOD_QUERY_CONTEXT` with the provider's driver attribute.
    /// A provider that shares nothing (rdma-core's rxe has no
    /// `import_context`) keeps the default: `EOPNOTSUPP`.
    fn import(_dev: Device<'_>, _query: &mut QueryContext<'_>) -> Result<Self::Context> {
        Err(no_import(Self::NAME, "ibv_import_device"))
    }

    /// The driver data of a PD this context did not allocate, by its
    /// handle (`ibv_import_pd`: mlx5 asks the kernel its PD number). The
    /// default: `EOPNOTSUPP`.
    fn import_pd(_ctx: &Self::Context, _dev: Device<'_>, _handle: u32) -> Result<Self::Pd> {
        Err(no_import(Self::NAME, "ibv_import_pd"))
    }

    /// Whether memory regions are imported (`ibv_import_mr`, which the
    /// core runs: `UVERBS_METHOD_QUERY_MR`); rdma-core's rxe has no
    /// `import_mr`.
    const IMPORTS_MRS: bool = false;

    /// How rdma-core's counterpart numbers `struct ibv_wc`'s `wc_flags`
    /// (see [`WcFlagsNumbering`](crate::WcFlagsNumbering)).
    const WC_FLAGS_NUMBERING: crate::WcFlagsNumbering;

    /// Formats the firmware version as the provider's `ibv_query_device` does.
    fn fw_ver(raw: u64) -> String {
        let (major, minor, sub) = ((raw >> 32) & 0xffff, (raw >> 16) & 0xffff, raw & 0xffff);
        format!("{major}.{minor}.{sub}")
    }

    /// The driver data of `ALLOC_PD`: `run` executes the command with the
    /// driver output buffer given.
    fn alloc_pd(ctx: &Self::Context, run: &mut RunWithOut<'_>) -> Result<Self::Pd, Errno>;

    /// Whether the provider has parent domains (`alloc_parent_domain`);
    /// the default refuses, as libibverbs without the op.
    fn check_parent_domain(_ctx: &Self::Context) -> Result<()> {
        Err(no_domains("ibv_alloc_parent_domain", Self::NAME))
    }

    /// Allocates a thread domain's state (`alloc_td`); the default
    /// refuses, as libibverbs without the op.
    fn alloc_td(_ctx: &Self::Context, _dev: Device<'_>) -> Result<Self::Td> {
        Err(no_domains("ibv_alloc_td", Self::NAME))
    }

    /// The driver data of `CREATE_AH`, as for [`Provider::alloc_pd`]; `attr`
    /// is what the AH was created with (mlx5 builds its address vector).
    fn create_ah(
        ctx: &Self::Context,
        attr: &AhAttr,
        run: &mut RunWithOut<'_>,
    ) -> Result<Self::Ah, Errno>;

    /// Step 1 of a CQ create.
    fn plan_cq(
        ctx: &Self::Context,
        dev: Device<'_>,
        req: &CqRequest,
        domain: Domain<'_, Self::Td>,
    ) -> Result<(Self::CqPlan, Self::CqShared)>;

    /// Step 3 of a CQ create.
    fn finish_cq(
        ctx: &Self::Context,
        dev: Device<'_>,
        plan: Self::CqPlan,
        shared: &Self::CqShared,
        created: &CqCreated,
    ) -> Result<Self::Cq>;

    /// Moves up to `out.len()` completions into `out`; no system call, no
    /// allocation.
    fn poll_cq(cq: &mut Self::Cq, out: &mut [WorkCompletion]) -> usize;

    /// One batch of a polling session (`ibv_start_poll`, `ibv_next_poll`:
    /// `src/cq_ex.rs`): [`Provider::poll_cq`] into the session's buffer,
    /// and with `stamps` (a CQ created with
    /// [`WcExFlags::COMPLETION_TIMESTAMP`] or
    /// [`WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK`]) the device's timestamp of
    /// completion `out[i]` into `stamps[i]`. Providers without completion
    /// timestamps refuse that flag in [`Provider::plan_cq`], so this
    /// default never sees `stamps`.
    #[inline]
    fn poll_cq_batch(
        cq: &mut Self::Cq,
        out: &mut [WorkCompletion; SESSION_BATCH],
        _stamps: Option<&mut [u64; SESSION_BATCH]>,
    ) -> usize {
        Self::poll_cq(cq, out)
    }

    /// The CQ's flag, set while QPs destroyed or reset have completions
    /// to drop that its poller has not looked at (mlx5: its clean
    /// requests, libmlx5's `__mlx5_cq_clean`). A polling session checks
    /// it before it hands out a completion it took off the ring earlier
    /// (`src/cq_ex.rs`; the CQ keeps it from its creation), and then
    /// asks [`Provider::take_cq_cleans`].
    /// `None` for a provider that never drops a QP's completions (rxe, as
    /// rdma-core's rxe leaves them in the CQ).
    #[inline]
    fn cq_clean_flag(_shared: &Self::CqShared) -> Option<Arc<AtomicBool>> {
        None
    }

    /// Takes what [`Provider::cq_clean_flag`] announced, as the next poll
    /// would, and reports the QP number of each QP destroyed or reset to
    /// `stale`: the session drops its completions taken off the ring
    /// before. No system call, no allocation.
    #[inline]
    fn take_cq_cleans(_cq: &mut Self::Cq, _stale: &mut dyn FnMut(u32)) {}

    /// Refreshes what the CQ converts completion timestamps to wall-clock
    /// time with, after a session's batch found completions on a CQ
    /// created with [`WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK`] (mlx5:
    /// a copy of the kernel's clock info page). No system call, no
    /// allocation. Providers without it refuse the flag in
    /// [`Provider::plan_cq`].
    #[inline]
    fn refresh_cq_clock(_cq: &mut Self::Cq) {}

    /// A completion timestamp (device ticks) in nanoseconds of the
    /// kernel's real-time clock, with what [`Provider::refresh_cq_clock`]
    /// last took; `None` when the provider cannot convert.
    #[inline]
    fn cq_ts_to_ns(_cq: &Self::Cq, _ticks: u64) -> Option<u64> {
        None
    }

    /// Arms the CQ (`ibv_req_notify_cq`).
    fn req_notify_cq(
        cq: &Self::Cq,
        shared: &Self::CqShared,
        dev: Device<'_>,
        handle: u32,
        solicited_only: bool,
    ) -> Result<(), Errno>;

    /// The step run for every completion event read for the CQ, on the
    /// reading thread (mlx5 advances its arm sequence number:
    /// `mlx5_cq_event`); `None` for none. Taken once, when the CQ is
    /// registered for its events.
    fn completion_hook(shared: &Self::CqShared) -> Option<CompletionHook>;

    /// Resizes the CQ (`ibv_resize_cq`): `run` executes the `RESIZE_CQ`
    /// write command with the driver data given, then the provider takes
    /// the kernel's answer (rxe maps the new ring the kernel moved the
    /// waiting completions to). The caller holds the consumer side, so no
    /// poll runs meanwhile. When `run` fails, or the provider refuses
    /// before it, the CQ must be as it was.
    fn resize_cq(
        cq: &mut Self::Cq,
        shared: &Self::CqShared,
        dev: Device<'_>,
        run: &mut RunWithInOut<'_>,
    ) -> Result<()>;

    /// Step 1 of a QP create.
    fn plan_qp(
        ctx: &Self::Context,
        dev: Device<'_>,
        pd: &Self::Pd,
        req: &QpRequest,
        domain: Domain<'_, Self::Td>,
    ) -> Result<(Self::QpPlan, Self::QpShared)>;

    /// Step 3 of a QP create.
    fn finish_qp(
        ctx: &Self::Context,
        dev: Device<'_>,
        plan: Self::QpPlan,
        shared: &Self::QpShared,
        req: &QpRequest,
        created: &QpCreated,
        links: QpLinks<'_, Self>,
    ) -> Result<Self::Qp>;

    /// The send operations this provider posts on a QP of `qp_type`
    /// (`ibv_qp_init_attr_ex::send_ops_flags` a QP may be created with:
    /// rdma-core's providers refuse the others at creation); `None` for a
    /// type it gives no send queue it posts to.
    fn send_ops(qp_type: QpType) -> Option<SendOpsFlags>;

    /// The capacities the created QP reports (`ibv_create_qp`'s `cap`),
    /// from the kernel's answer `kernel`: that answer by default; mlx5
    /// reports its own sizing, as libmlx5 overwrites the kernel's
    /// (`create_qp`: `max_send_wr`, `max_recv_wr`, `max_recv_sge`, and the
    /// inline size it sent).
    fn qp_cap(_shared: &Self::QpShared, kernel: &QpCap) -> QpCap {
        *kernel
    }

    /// Runs after a successful modify that set the QP's state, before the
    /// state is published to posts (on RESET, mlx5 starts a new epoch of
    /// its receive queue's tail and asks its CQs to drop the QP's
    /// completions and restart that tail).
    fn on_qp_state(_shared: &Self::QpShared, _state: QpState) {}

    /// Restarts the poster's side of the queues: the first post after a
    /// modify set RESET calls it (after that modify's
    /// [`Provider::on_qp_state`]), before anything is posted (mlx5's
    /// producer counters go back to 0).
    fn restart_queues(_qp: &mut Self::Qp) {}

    /// Runs after the kernel destroyed the QP, before its shared state is
    /// dropped (mlx5 cleans its CQs of the QP's completions).
    fn on_qp_destroyed(_shared: &Self::QpShared) {}

    /// Writes send WQEs and rings the doorbell once for those written; on an
    /// error at index `i` the requests before `i` are posted and rung.
    fn post_send(qp: &mut Self::Qp, dev: Device<'_>, wrs: &[SendWr<'_>]) -> Result<(), PostError>;

    /// Opens the QP's send session (`ibv_wr_start`): its cursor, in the
    /// send queue, at the end of what was handed over. Nothing is visible
    /// to the device or the kernel until [`Provider::complete_send`]. The
    /// core calls it with no session open (it aborts an open one first).
    fn begin_send(qp: &mut Self::Qp);

    /// The open session as a view (its cursor taken out of the queue),
    /// for requests written now; [`Provider::suspend_send`] puts the cursor
    /// back, [`Provider::complete_send`] or [`Provider::abort_send`] end
    /// the session.
    fn resume_send<'q>(qp: &'q mut Self::Qp, dev: Device<'q>) -> Self::SendSession<'q>;

    /// [`Provider::begin_send`] and [`Provider::resume_send`] at once (what
    /// `ibv_wr_start` followed by requests in one function is).
    #[inline(always)]
    fn start_send<'q>(qp: &'q mut Self::Qp, dev: Device<'q>) -> Self::SendSession<'q> {
        Self::begin_send(qp);
        Self::resume_send(qp, dev)
    }

    /// Puts a view's cursor back into the queue: the session stays open,
    /// with what the view wrote, for the next [`Provider::resume_send`].
    fn suspend_send(s: Self::SendSession<'_>);

    /// One request into the open session, called on its own
    /// (`QueuePair::push_send`): the view made, pushed to and suspended in
    /// one dispatch on the provider. A provider may make a lighter view
    /// for one request (mlx5 reads the queue's settings by reference
    /// instead of copying them).
    #[inline(always)]
    fn push_send_open(
        qp: &mut Self::Qp,
        dev: Device<'_>,
        wr: &SendWr<'_>,
    ) -> Result<(), PostErrorKind> {
        let mut s = Self::resume_send(qp, dev);
        let r = Self::push_send(&mut s, wr);
        Self::suspend_send(s);
        r
    }

    /// Checks and writes one send WQE at the session's cursor, not yet
    /// visible to the device or kernel; on an error nothing of it is taken.
    fn push_send(s: &mut Self::SendSession<'_>, wr: &SendWr<'_>) -> Result<(), PostErrorKind>;

    /// [`Provider::push_send`] of a typed session's request
    /// ([`crate::WrSession`]): the QP's type was checked once for the
    /// session (`ud`: it is UD) and the request's operation is one that
    /// type carries, so a provider may leave those checks out. The default
    /// makes them anyway.
    #[inline(always)]
    fn push_send_typed(
        s: &mut Self::SendSession<'_>,
        wr: &SendWr<'_>,
        ud: bool,
    ) -> Result<(), PostErrorKind> {
        let _ = ud;
        Self::push_send(s, wr)
    }

    /// Ends the session (`ibv_wr_complete`): hands its WQEs over and rings
    /// the doorbell once; `pushed` (how many) is the index a doorbell error
    /// reports. Called at most once per session.
    fn complete_send(s: &mut Self::SendSession<'_>, pushed: usize) -> Result<(), PostError>;

    /// Ends the session (`ibv_wr_abort`): none of its WQEs is ever
    /// executed, and the queue is as before [`Provider::begin_send`].
    /// Called at most once per session, and never after a complete.
    fn abort_send(s: &mut Self::SendSession<'_>);

    /// Writes receive WQEs.
    fn post_recv(qp: &mut Self::Qp, wrs: &[RecvWr<'_>]) -> Result<(), PostError>;

    /// Takes the QP's own receive queue out of it (`None` if it has none:
    /// it receives from an SRQ, or it was taken), for a
    /// [`crate::RecvQueue`] that posts to it while the QP posts sends.
    /// Afterwards [`Provider::restart_queues`] and [`Provider::post_recv`]
    /// leave it alone. It must stay sound to post to after the QP is
    /// destroyed (its memory is its own, or shared by reference count).
    fn take_rq(qp: &mut Self::Qp) -> Option<Self::Rq>;

    /// Puts a receive queue taken with [`Provider::take_rq`] back into its
    /// QP, which has none meanwhile; the caller restarts either side for
    /// resets it missed.
    fn put_rq(qp: &mut Self::Qp, rq: Self::Rq);

    /// Writes receive WQEs into a taken receive queue.
    fn post_rq(rq: &mut Self::Rq, wrs: &[RecvWr<'_>]) -> Result<(), PostError>;

    /// [`Provider::restart_queues`]' part for a taken receive queue.
    fn restart_rq(_rq: &mut Self::Rq) {}

    /// Step 1 of an SRQ create.
    fn plan_srq(
        ctx: &Self::Context,
        dev: Device<'_>,
        pd: &Self::Pd,
        req: &SrqRequest,
        domain: Domain<'_, Self::Td>,
    ) -> Result<(Self::SrqPlan, Self::SrqShared)>;

    /// Step 3 of an SRQ create; also returns the SRQ number.
    fn finish_srq(
        ctx: &Self::Context,
        dev: Device<'_>,
        plan: Self::SrqPlan,
        shared: &Self::SrqShared,
        created: &SrqCreated,
    ) -> Result<(Self::Srq, u32)>;

    /// Writes receive WQEs to the SRQ.
    fn post_srq_recv(srq: &mut Self::Srq, wrs: &[RecvWr<'_>]) -> Result<(), PostError>;

    /// The driver data of `MODIFY_SRQ`: `run` executes the command with the
    /// driver input given.
    fn modify_srq(srq: &Self::Srq, run: &mut RunWithIn<'_>) -> Result<(), Errno>;
}

/// The error of an import a provider does not make.
pub(crate) fn no_import(provider: &str, op: &'static str) -> crate::error::Error {
    crate::error::Error::new(
        op,
        crate::error::ErrorKind::UnsupportedProvider,
        format!(
            "the {provider} provider shares no objects between contexts (as rdma-core's: no \
             import ops)"
        ),
    )
}
