//! The mlx5 (ConnectX) provider.
//!
//! Opening a context sends `mlx5_ib_alloc_ucontext_req_v2` as driver data and
//! keeps the device geometry from `mlx5_ib_alloc_ucontext_resp`
//! (`include/uapi/rdma/mlx5-abi.h`; the kernel side is `mlx5_ib_alloc_ucontext`
//! in `drivers/infiniband/hw/mlx5/main.c`). A PD's driver data is its PD
//! number (`mlx5_ib_alloc_pd_resp`), which QPs and DevX objects name.
//!
//! The data path, rdma-core's `providers/mlx5` in Rust:
//!
//! - `uar.rs`: UAR pages (dynamic or static) and the context's UARs;
//!   `uar/bfreg.rs`: ringing a blue-flame register (doorbells, BlueFlame
//!   copies, the lock a shared one needs); `uar/assign.rs`: which one a
//!   QP or thread domain rings;
//! - `buf.rs`: queue buffers and doorbell records the library allocates;
//!   `alloc.rs`: where their memory comes from (a parent domain's
//!   allocator, libmlx5's `MLX_*_ALLOC_TYPE` variables);
//! - `wqe.rs` / `cqe.rs`: segment encoders and the CQE decoder, byte-exact
//!   against `mlx5dv.h` (`golden.rs` checks them with the header's helpers);
//! - `create.rs`: the create commands' driver data (`plan_*`) and the
//!   CQs, QPs and SRQs made from their answers (`finish_*`);
//! - `qp.rs`: queue sizing, the per-QP completion state CQs find by user
//!   index (CQE v1) or QP number; `sq.rs`: send WQEs and the send doorbell
//!   (BlueFlame or 8-byte), `sq/track.rs` the work request of each WQE for
//!   the poller, `sq/session.rs` the session cursor; `rq.rs`: receive
//!   queues and SRQs;
//! - `cq.rs`: a CQ's shared state, arming with the arm sequence number,
//!   and cleaning a destroyed or reset QP's CQEs; `cq/parse.rs`: CQEs into
//!   work completions; `cq/poll.rs`: polling and the consumer index;
//! - `clock.rs`: the kernel's clock info page, which converts completion
//!   timestamps to wall-clock time (`mlx5dv_ts_to_ns`).
//!
//! Scatter-to-CQE is never requested (`MLX5_QP_FLAG_SCATTER_CQE` stays
//! clear): with it, the device puts small receives and READ/atomic results
//! in the CQE instead of the buffer, and software must copy them. Without
//! it, data always lands in the buffers the work requests name, at the cost
//! of one PCIe write more for small messages.
//!
//! The public, mlx5-only API (the counterpart of `mlx5dv`) is [`dv`],
//! exported as `uverbs::mlx5`. A software ConnectX for tests lives with the
//! other test doubles (`src/testing/mlx5/`, feature `test-utils`,
//! `uverbs::testing::mlx5`).

use std::{
    ops::RangeInclusive,
    sync::{atomic::Ordering, Arc, Mutex, OnceLock},
};

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::{
    CompletionHook, CqCreated, CqRequest, Device, Domain, DriverData, GetContext, Member,
    OpenRequest, Provider, QpCreated, QpLinks, QpRequest, QueryContext, RunWithIn, RunWithInOut,
    RunWithOut, SrqCreated, SrqRequest, SESSION_BATCH,
};
use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    sys::Errno,
    wc::WorkCompletion,
    wr::{PostError, PostErrorKind, RecvWr, SendWr},
    AhAttr, QpCap, QpState, QpType, SendOpsFlags,
};

mod ah;
mod alloc;
mod buf;
pub(crate) mod clock;
pub(crate) mod context;
mod cq;
mod cqe;
mod create;
#[cfg(feature = "devx")]
#[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
pub mod devx;
pub mod dv;
mod dv_create;
mod dv_obj;
mod dv_qp;
mod dv_query;
#[cfg(feature = "devx")]
mod dv_query_caps;
#[cfg(test)]
mod golden;
#[cfg(all(test, loom))]
mod loom_tests;
mod qp;
mod qp_size;
#[cfg(test)]
mod reset_tests;
mod rq;
mod slots;
mod sq;
#[cfg(test)]
mod tests;
mod uar;
mod wqe;

pub(crate) use context::Mlx5State;

use ah::{build_av, Mlx5Ah};
use buf::QueueBuf;
use cq::{CqCore, Mlx5Cq, Restart};
use qp::{QpTrack, Resources};
use rq::{Mlx5Rq, Mlx5Srq, RqTrack, SrqTrack};
pub(crate) use sq::SqSession;
use sq::{Known, Mlx5Sq, SqTrack};
use uar::{Bfreg, UarGeometry, Uars};
use wqe::Av;

/// The mlx5 provider.
#[derive(Debug)]
pub(crate) struct Mlx5;

/// Per-context mlx5 state: the device geometry, the UARs and the table of
/// live QPs.
#[derive(Debug)]
pub(crate) struct Mlx5Ctx {
    pub(crate) state: Mlx5State,
    uars: Arc<Uars>,
    resources: Arc<Resources>,
    /// The kernel's clock info page, when it maps one (`clock.rs`).
    pub(crate) clock: Option<Arc<clock::ClockPage>>,
    /// The device's free-running clock, when the kernel maps it
    /// (`clock.rs`).
    pub(crate) core_clock: Option<clock::CoreClockPage>,
}

/// An mlx5 PD: the PD number the kernel reports in the driver response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mlx5Pd {
    /// Read by [`Mlx5Context::pd_number`](dv::Mlx5Context::pd_number).
    pub(crate) pdn: u32,
}

/// An mlx5 thread domain: its own bfreg (`mlx5_td`), given back to the
/// context's thread-domain bfregs when it is dropped.
#[derive(Debug)]
pub(crate) struct Mlx5Td {
    /// `None` with static UARs ([`Uars::td_bfreg`]).
    bfreg: Option<Arc<Bfreg>>,
    uars: Arc<Uars>,
}

impl Drop for Mlx5Td {
    fn drop(&mut self) {
        if let Some(b) = &self.bfreg {
            self.uars.release_td(b);
        }
    }
}

/// The older variable that makes huge pages a QP's default
/// (libmlx5's `qptype2key`).
fn huge_key(t: QpType) -> &'static str {
    match t {
        QpType::Rc => "HUGE_RC",
        QpType::Uc => "HUGE_UC",
        QpType::Ud => "HUGE_UD",
        QpType::RawPacket => "HUGE_RAW_ETH",
        _ => "HUGE_NA",
    }
}

/// Driver input and output of a create command.
#[derive(Debug)]
pub(crate) struct Drv<I, O> {
    input: I,
    output: O,
}

impl<I: IntoBytes + zerocopy::Immutable, O: IntoBytes + FromBytes> DriverData for Drv<I, O> {
    fn driver_bufs(&mut self) -> (&[u8], &mut [u8]) {
        (self.input.as_bytes(), self.output.as_mut_bytes())
    }
}

/// A QP's state kept until the kernel QP is gone: its buffer, its
/// completion side, the CQs it completes to, its bfreg and user index.
#[derive(Debug)]
pub(crate) struct Mlx5QpShared {
    buf: Arc<QueueBuf>,
    sq: Arc<SqTrack>,
    rq: Option<Arc<RqTrack>>,
    uidx: Option<u32>,
    bfreg: Mutex<Option<Arc<Bfreg>>>,
    /// The bfreg is its thread domain's, which gives it back.
    td_bfreg: bool,
    track: OnceLock<Arc<QpTrack>>,
    cqs: OnceLock<[Arc<CqCore>; 2]>,
    resources: Arc<Resources>,
    uars: Arc<Uars>,
    geometry: qp_size::QpGeometry,
}

impl Mlx5QpShared {
    /// Has the QP's CQs drop its CQEs now in them (it was destroyed).
    fn clean_cqs(&self) {
        if let (Some(track), Some(cqs)) = (self.track.get(), self.cqs.get()) {
            clean_cqs(track, cqs, None);
        }
    }
}

/// Has `cqs` (the send CQ, the receive CQ) drop the CQEs of QP `track` now
/// in them; after a reset, `rq_epoch` is the epoch it began for the
/// receive queue, whose tail the receive CQ restarts.
fn clean_cqs(track: &QpTrack, [send, recv]: &[Arc<CqCore>; 2], rq_epoch: Option<u32>) {
    let restart = rq_epoch.and_then(|epoch| {
        let rq = track.rq.clone()?;
        Some(Restart { rq, epoch })
    });
    let (rsn, qp_num) = (track.rsn, track.qp_num);
    if Arc::ptr_eq(send, recv) {
        send.clean(rsn, qp_num, restart);
    } else {
        send.clean(rsn, qp_num, None);
        recv.clean(rsn, qp_num, restart);
    }
}

/// What a RESET does to the completion side of QP `track`, which completes
/// on `cqs`: its receive queue's tail enters a new epoch (the poster
/// restarts in it once the reset is published,
/// [`Provider::restart_queues`]), and its CQs drop its CQEs, the receive
/// CQ restarting that tail in the epoch when its poller takes the request.
/// The tail is not stored here: a poller inside a run of the QP's old
/// CQEs could store the tail it computed after this store; the poller
/// stores it (see `Tail` in `qp.rs`). The send queue's tail is left
/// alone, neither stored nor restarted here: its work-request counter runs
/// on across resets and its tail only moves forward, up to the counter
/// when the poster restarts, so a tail stored late cannot take it back
/// ("Resets" in `sq.rs`).
fn reset_completions(track: &QpTrack, cqs: &[Arc<CqCore>; 2]) {
    let rq = track.rq.as_ref().map(|rq| rq.tail.begin_reset());
    clean_cqs(track, cqs, rq);
}

impl Drop for Mlx5QpShared {
    fn drop(&mut self) {
        if let Some(track) = self.track.get() {
            self.resources.remove(track);
        }
        if let Some(u) = self.uidx {
            self.resources.free_uidx(u);
        }
        let bfreg = self.bfreg.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(b) = bfreg.filter(|_| !self.td_bfreg) {
            self.uars.release(&b);
        }
    }
}

/// An SRQ's state kept until the kernel SRQ is gone.
#[derive(Debug)]
pub(crate) struct Mlx5SrqShared {
    track: Arc<SrqTrack>,
    uidx: Option<u32>,
    resources: Arc<Resources>,
}

impl Drop for Mlx5SrqShared {
    fn drop(&mut self) {
        if let Some(u) = self.uidx {
            self.resources.free_uidx(u);
        }
    }
}

/// The queues of an mlx5 QP (the poster's side).
#[derive(Debug)]
pub(crate) struct Mlx5Qp {
    sq: Mlx5Sq,
    rq: Option<Mlx5Rq>,
}

/// The mlx5 address vector of a UD request's address handle.
#[inline]
fn av_of<'w>(wr: &SendWr<'w>) -> Result<&'w Av, PostErrorKind> {
    wr.ud
        .and_then(|d| Mlx5::ah_of(d.ah_driver()))
        .map(|a| &a.av)
        .ok_or(PostErrorKind::BadDestination(
            "the address handle belongs to a device of another driver",
        ))
}

/// A queue whose geometry does not fit the buffer sized for it: a bug in
/// this provider's sizing, reported instead of writing outside the buffer.
#[cold]
fn sizing_bug(op: &'static str, queue: &str) -> Error {
    Error::new(
        op,
        ErrorKind::Malformed,
        format!("the {queue}'s geometry does not fit its buffer (a bug in the mlx5 sizing)"),
    )
}

fn uidx_for(ctx: &Mlx5Ctx) -> Result<Option<u32>> {
    if ctx.state.cqe_version == 1 {
        ctx.resources.alloc_uidx().map(Some)
    } else {
        Ok(None)
    }
}

impl Mlx5 {
    /// The context state from its driver response, at open and at import
    /// (libmlx5's `mlx5_set_context`): the UARs, the clock page.
    fn set_up(dev: Device<'_>, state: Mlx5State) -> Result<Mlx5Ctx> {
        if state.cqe_version > 1 {
            return Err(Error::new(
                "GET_CONTEXT",
                ErrorKind::Malformed,
                format!(
                    "mlx5 CQE version {} (rdma-core knows 0 and 1)",
                    state.cqe_version
                ),
            ));
        }
        let uars = Uars::open(
            dev,
            UarGeometry {
                tot_bfregs: state.resp.tot_bfregs,
                bf_reg_size: state.bf_reg_size,
                num_uars_per_page: state.num_uars_per_page,
            },
        )?;
        // The same system page length the UAR mappings use (`Uars::open`).
        let page_len = state.num_uars_per_page as usize * uar::ADAPTER_PAGE;
        let clock = clock::ClockPage::map(dev, state.resp.clock_info_versions, page_len);
        let core_clock = clock::CoreClockPage::map(dev, &state.resp, page_len);
        Ok(Mlx5Ctx {
            state,
            uars: Arc::new(uars),
            resources: Arc::default(),
            clock: clock.map(Arc::new),
            core_clock,
        })
    }
}

impl Provider for Mlx5 {
    const NAME: &'static str = "mlx5";
    /// libmlx5 builds `ibv_wc_flags` from the CQE (`handle_responder`,
    /// `mlx5_parse_cqe` of `providers/mlx5/cq.c`).
    const WC_FLAGS_NUMBERING: crate::WcFlagsNumbering = crate::WcFlagsNumbering::Verbs;
    const DRIVER_ID: u32 = abi::RDMA_DRIVER_MLX5;
    /// `MLX5_IB_UVERBS_ABI_VERSION` is 1; rdma-core accepts 1..=1
    /// (`MLX5_UVERBS_MIN_ABI_VERSION`/`MAX`).
    const ABI_VERSIONS: RangeInclusive<u32> = 1..=1;

    type Context = Mlx5Ctx;
    type Pd = Mlx5Pd;
    type Td = Mlx5Td;
    type Ah = Mlx5Ah;
    type CqPlan = Drv<abi::Mlx5IbCreateCq, abi::Mlx5IbCreateCqResp>;
    type CqShared = Arc<CqCore>;
    type Cq = Mlx5Cq;
    type SendSession<'q> = SqSession<'q>;
    type QpPlan = Drv<abi::Mlx5IbCreateQp, abi::Mlx5IbCreateQpResp>;
    type QpShared = Mlx5QpShared;
    type Qp = Mlx5Qp;
    type Rq = Mlx5Rq;
    type SrqPlan = Drv<abi::Mlx5IbCreateSrq, abi::Mlx5IbCreateSrqResp>;
    type SrqShared = Mlx5SrqShared;
    type Srq = Mlx5Srq;

    /// libmlx5's sets (`providers/mlx5/qp.c` `mlx5_qp_fill_wr_pfns`,
    /// `MLX5_SUPPORTED_SEND_OPS_FLAGS_RC`/`_UC`/`_UD`) without what this
    /// provider builds no WQE for (windows, invalidations, atomic writes:
    /// UMR WQEs and their opcodes, refused by its posts too), and without
    /// TSO (raw packet QPs, whose send path it has not).
    fn send_ops(qp_type: QpType) -> Option<SendOpsFlags> {
        let sends = SendOpsFlags::SEND | SendOpsFlags::SEND_WITH_IMM;
        let writes = SendOpsFlags::RDMA_WRITE | SendOpsFlags::RDMA_WRITE_WITH_IMM;
        match qp_type {
            QpType::Rc => Some(
                sends
                    | writes
                    | SendOpsFlags::RDMA_READ
                    | SendOpsFlags::ATOMIC_CMP_AND_SWP
                    | SendOpsFlags::ATOMIC_FETCH_AND_ADD,
            ),
            QpType::Uc => Some(sends | writes),
            QpType::Ud => Some(sends),
            _ => None,
        }
    }

    /// mlx5 devices are named `mlx5_N` by the kernel (the convention
    /// libibverbs' sysfs matching relies on as well).
    fn claims_sysfs_device(name: &str, _has_parent: bool) -> bool {
        name.starts_with("mlx5")
    }

    fn open(
        dev: Device<'_>,
        get_context: &mut GetContext<'_>,
        request: &OpenRequest,
    ) -> Result<Mlx5Ctx> {
        let state = Mlx5State::open(get_context, request.devx)?;
        Self::set_up(dev, state)
    }

    /// libmlx5's `mlx5_import_context`: the context's driver response
    /// again (`MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX`, main.c
    /// `mlx5_ib_query_ucontext`), set up as at open, but only a context
    /// with dynamic UARs (`mlx5_set_context` with `is_import`: static
    /// bfregs are EINVAL; the UARs this context rings are its own).
    fn import(dev: Device<'_>, query: &mut QueryContext<'_>) -> Result<Mlx5Ctx> {
        let mut out = vec![0u8; Mlx5State::response_len()];
        query(Some((abi::MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX, &mut out)))?;
        // Whether the context has a DevX uid is not in the response.
        let state = Mlx5State::from_response(context::ContextRequest { devx: false }, &out)
            .ok_or_else(|| {
                Error::new(
                    "UVERBS_METHOD_QUERY_CONTEXT",
                    ErrorKind::Malformed,
                    "short mlx5_ib_alloc_ucontext_resp",
                )
            })?;
        if state.resp.tot_bfregs != 0 {
            return Err(Error::sys("ibv_import_device", Errno::EINVAL).with_detail(
                "the context uses static bfregs (a kernel without dynamic UARs): libmlx5 \
                 imports only contexts with dynamic UARs",
            ));
        }
        Self::set_up(dev, state)
    }

    /// `MLX5_IB_METHOD_PD_QUERY` (std_types.c): the PD number.
    fn import_pd(_: &Mlx5Ctx, dev: Device<'_>, handle: u32) -> Result<Mlx5Pd> {
        let mut pdn = 0u32;
        let mut cmd = dev.ioctl_cmd(abi::UVERBS_OBJECT_PD, abi::MLX5_IB_METHOD_PD_QUERY);
        cmd.object(abi::MLX5_IB_ATTR_QUERY_PD_HANDLE, handle);
        cmd.output(abi::MLX5_IB_ATTR_QUERY_PD_RESP_PDN, pdn.as_mut_bytes());
        dev.ioctl(&mut cmd)
            .map_err(|e| Error::sys("MLX5_IB_METHOD_PD_QUERY", e))?;
        drop(cmd);
        Ok(Mlx5Pd { pdn })
    }

    const IMPORTS_MRS: bool = true;

    /// `mlx5_query_rt_values`: the core clock's counter, when mapped.
    fn read_raw_clock(ctx: &Mlx5Ctx) -> Option<u64> {
        ctx.core_clock.as_ref().map(clock::CoreClockPage::read)
    }

    /// `mlx5_query_device_ex` prints the sub-minor with four digits.
    fn fw_ver(raw: u64) -> String {
        let (major, minor, sub) = ((raw >> 32) & 0xffff, (raw >> 16) & 0xffff, raw & 0xffff);
        format!("{major}.{minor}.{sub:04}")
    }

    fn alloc_pd(_: &Mlx5Ctx, run: &mut RunWithOut<'_>) -> Result<Mlx5Pd, Errno> {
        let mut resp = [0u8; size_of::<abi::Mlx5IbAllocPdResp>()];
        run(&mut resp)?;
        let pdn = abi::Mlx5IbAllocPdResp::read_from_bytes(&resp)
            .map(|r| r.pdn)
            .unwrap_or(0);
        Ok(Mlx5Pd { pdn })
    }

    /// libmlx5's `mlx5_alloc_parent_domain`: any context has them.
    fn check_parent_domain(_: &Mlx5Ctx) -> Result<()> {
        Ok(())
    }

    /// libmlx5's `mlx5_alloc_td`: a dedicated bfreg.
    fn alloc_td(ctx: &Mlx5Ctx, dev: Device<'_>) -> Result<Mlx5Td> {
        Ok(Mlx5Td {
            bfreg: ctx.uars.td_bfreg(dev)?,
            uars: ctx.uars.clone(),
        })
    }

    fn create_ah(_: &Mlx5Ctx, attr: &AhAttr, run: &mut RunWithOut<'_>) -> Result<Mlx5Ah, Errno> {
        let mut resp = abi::Mlx5IbCreateAhResp::new_zeroed();
        run(resp.as_mut_bytes())?;
        Ok(Mlx5Ah::new(build_av(attr, resp.dmac)))
    }

    fn plan_cq(
        ctx: &Mlx5Ctx,
        dev: Device<'_>,
        req: &CqRequest,
        domain: Domain<'_, Mlx5Td>,
    ) -> Result<(Self::CqPlan, Arc<CqCore>)> {
        create::plan_cq(ctx, dev, req, domain)
    }

    fn finish_cq(
        ctx: &Mlx5Ctx,
        _: Device<'_>,
        plan: Self::CqPlan,
        shared: &Arc<CqCore>,
        _: &CqCreated,
    ) -> Result<Mlx5Cq> {
        create::finish_cq(ctx, plan, shared)
    }

    #[inline]
    fn poll_cq(cq: &mut Mlx5Cq, out: &mut [WorkCompletion]) -> usize {
        cq.poll(out)
    }

    #[inline]
    fn cq_clean_flag(shared: &Arc<CqCore>) -> Option<Arc<std::sync::atomic::AtomicBool>> {
        Some(shared.clean_flag().clone())
    }

    #[inline]
    fn take_cq_cleans(cq: &mut Mlx5Cq, stale: &mut dyn FnMut(u32)) {
        cq.take_cleans(stale);
    }

    #[inline]
    fn poll_cq_batch(
        cq: &mut Mlx5Cq,
        out: &mut [WorkCompletion; SESSION_BATCH],
        stamps: Option<&mut [u64; SESSION_BATCH]>,
    ) -> usize {
        cq.poll_batch(out, stamps)
    }

    #[inline]
    fn refresh_cq_clock(cq: &mut Mlx5Cq) {
        cq.refresh_clock();
    }

    #[inline]
    fn cq_ts_to_ns(cq: &Mlx5Cq, ticks: u64) -> Option<u64> {
        cq.ts_to_ns(ticks)
    }

    fn req_notify_cq(
        cq: &Mlx5Cq,
        _: &Arc<CqCore>,
        _: Device<'_>,
        _: u32,
        solicited_only: bool,
    ) -> Result<(), Errno> {
        cq.arm(solicited_only);
        Ok(())
    }

    /// `mlx5_cq_event`: the arm sequence number advances when an event is read.
    #[inline]
    fn completion_hook(shared: &Arc<CqCore>) -> Option<CompletionHook> {
        let core = shared.clone();
        Some(CompletionHook(Arc::new(move || {
            core.arm_sn.fetch_add(1, Ordering::AcqRel);
        })))
    }

    /// Not yet: RC `mlx5_resize_cq` allocates a new CQE buffer, sends its
    /// address in `struct mlx5_ib_resize_cq`, and after the command copies
    /// the CQEs still owned by software into it until the resize CQE the
    /// device writes, before freeing the old buffer. Refused before any
    /// command, so the CQ is untouched.
    fn resize_cq(
        _: &mut Mlx5Cq,
        _: &Arc<CqCore>,
        _: Device<'_>,
        _: &mut RunWithInOut<'_>,
    ) -> Result<()> {
        Err(Error::new(
            "ibv_resize_cq",
            ErrorKind::UnsupportedProvider,
            "resizing an mlx5 CQ is not implemented (it needs a new CQE buffer and the \
             CQEs copied into it: rdma-core's mlx5_resize_cq)",
        ))
    }

    fn plan_qp(
        ctx: &Mlx5Ctx,
        dev: Device<'_>,
        _: &Mlx5Pd,
        req: &QpRequest,
        domain: Domain<'_, Mlx5Td>,
    ) -> Result<(Self::QpPlan, Mlx5QpShared)> {
        create::plan_qp(ctx, dev, req, domain)
    }

    fn finish_qp(
        ctx: &Mlx5Ctx,
        _: Device<'_>,
        plan: Self::QpPlan,
        shared: &Mlx5QpShared,
        req: &QpRequest,
        created: &QpCreated,
        links: QpLinks<'_, Self>,
    ) -> Result<Mlx5Qp> {
        create::finish_qp(ctx, plan, shared, req, created, links)
    }

    /// After the kernel moved the QP to RESET (the device executes and
    /// completes nothing of it any more), and before the new state is
    /// published to posts: the CQs drop the QP's CQEs still in them and
    /// the receive queue's tail enters a new epoch, restarted by the
    /// receive CQ's poller ([`reset_completions`]); the doorbell records
    /// back to 0, as the device's counters. No tail is stored here (a
    /// poller inside a run of the QP's CQEs could store an older one after
    /// it): the receive queue's is tagged with its epoch (`Tail` in
    /// `qp.rs`); the send queue's work-request counter runs on across
    /// resets, only its ring position restarting, and its tail only moves
    /// forward ("Resets" in `sq.rs`).
    fn on_qp_state(shared: &Mlx5QpShared, state: QpState) {
        if state == QpState::Reset {
            if let (Some(track), Some(cqs)) = (shared.track.get(), shared.cqs.get()) {
                reset_completions(track, cqs);
            }
            shared.buf.set_dbrec(0, 0);
            shared.buf.set_dbrec(1, 0);
        }
    }

    /// The producer counters back to 0, as the doorbell records
    /// [`Provider::on_qp_state`] reset: the receive queue's in its new
    /// epoch (its tail restarts when the receive CQ's poller takes the
    /// reset's request; until then the epoch before's counts as nothing
    /// freed), the send queue's WQEBB counter alone (its work-request
    /// counter runs on, and its tail moves up to it: "Resets" in `sq.rs`).
    fn restart_queues(qp: &mut Mlx5Qp) {
        qp.sq.reset();
        if let Some(rq) = &mut qp.rq {
            rq.reset();
        }
    }

    /// What libmlx5's `create_qp` reports: its own `max_post` and receive
    /// queue for the work requests and receive SGEs, the inline size it
    /// sized (and sent), the kernel's `max_send_sge`.
    fn qp_cap(shared: &Mlx5QpShared, kernel: &QpCap) -> QpCap {
        QpCap {
            max_send_sge: kernel.max_send_sge,
            ..shared.geometry.cap
        }
    }

    fn on_qp_destroyed(shared: &Mlx5QpShared) {
        shared.clean_cqs();
        if let Some(track) = shared.track.get() {
            shared.resources.remove(track);
        }
    }

    #[inline]
    fn post_send(qp: &mut Mlx5Qp, _: Device<'_>, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        qp.sq
            .post(wrs, av_of)
            .map_err(|(index, kind)| PostError { index, kind })
    }

    #[inline]
    fn begin_send(qp: &mut Mlx5Qp) {
        qp.sq.begin();
    }

    #[inline(always)]
    fn resume_send<'q>(qp: &'q mut Mlx5Qp, _: Device<'q>) -> SqSession<'q> {
        qp.sq.resume()
    }

    #[inline(always)]
    fn start_send<'q>(qp: &'q mut Mlx5Qp, _: Device<'q>) -> SqSession<'q> {
        qp.sq.start()
    }

    #[inline(always)]
    fn suspend_send(s: SqSession<'_>) {
        s.suspend();
    }

    #[inline(always)]
    fn push_send_open(
        qp: &mut Mlx5Qp,
        _: Device<'_>,
        wr: &SendWr<'_>,
    ) -> Result<(), PostErrorKind> {
        qp.sq.push_open(wr, av_of)
    }

    #[inline(always)]
    fn push_send(s: &mut SqSession<'_>, wr: &SendWr<'_>) -> Result<(), PostErrorKind> {
        s.push(wr, av_of, Known::Nothing)
    }

    #[inline(always)]
    fn push_send_typed(
        s: &mut SqSession<'_>,
        wr: &SendWr<'_>,
        ud: bool,
    ) -> Result<(), PostErrorKind> {
        s.push(wr, av_of, Known::Typed { ud })
    }

    #[inline(always)]
    fn complete_send(s: &mut SqSession<'_>, pushed: usize) -> Result<(), PostError> {
        s.complete(pushed);
        Ok(())
    }

    /// Nothing to undo: the queue's counters never moved.
    fn abort_send(_: &mut SqSession<'_>) {}

    #[inline]
    fn post_recv(qp: &mut Mlx5Qp, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        match &mut qp.rq {
            Some(rq) => rq.post(wrs),
            None => Err(PostError {
                index: 0,
                kind: PostErrorKind::OpNotSupported(
                    "this QP has no receive queue here (it receives from an SRQ, max_recv_wr was \
                     0, or its queue was split off: post to its RecvQueue)",
                ),
            }),
        }
    }

    /// The queue's buffer is shared by reference count with the QP's
    /// shared state ([`Units`](buf::Units)), so posting after the QP is gone
    /// writes memory nobody reads any more, not freed memory.
    fn take_rq(qp: &mut Mlx5Qp) -> Option<Mlx5Rq> {
        qp.rq.take()
    }

    fn put_rq(qp: &mut Mlx5Qp, rq: Mlx5Rq) {
        qp.rq = Some(rq);
    }

    #[inline]
    fn post_rq(rq: &mut Mlx5Rq, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        rq.post(wrs)
    }

    fn restart_rq(rq: &mut Mlx5Rq) {
        rq.reset();
    }

    fn plan_srq(
        ctx: &Mlx5Ctx,
        dev: Device<'_>,
        _: &Mlx5Pd,
        req: &SrqRequest,
        domain: Domain<'_, Mlx5Td>,
    ) -> Result<(Self::SrqPlan, Mlx5SrqShared)> {
        create::plan_srq(ctx, dev, req, domain)
    }

    fn finish_srq(
        _: &Mlx5Ctx,
        _: Device<'_>,
        plan: Self::SrqPlan,
        shared: &Mlx5SrqShared,
        _: &SrqCreated,
    ) -> Result<(Mlx5Srq, u32)> {
        create::finish_srq(plan, shared)
    }

    #[inline]
    fn post_srq_recv(srq: &mut Mlx5Srq, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        srq.post(wrs)
    }

    /// mlx5 sends no driver data with `MODIFY_SRQ`.
    fn modify_srq(_: &Mlx5Srq, run: &mut RunWithIn<'_>) -> Result<(), Errno> {
        run(&[])
    }
}
