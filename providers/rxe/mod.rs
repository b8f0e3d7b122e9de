//! The soft-RoCE (`rdma_rxe`) provider.
//!
//! rxe needs no driver data to open a context (`rxe_alloc_ucontext` is
//! trivial, `drivers/infiniband/sw/rxe/rxe_verbs.c`); its queues are rings
//! the kernel allocates and userspace maps (`include/uapi/rdma/rdma_user_rxe.h`):
//! a create command answers with the ring's `mminfo` (mmap offset and size),
//! which `finish` maps. Receives and polls touch only the rings; a send is
//! announced with a `POST_SEND` write command (`doorbell.rs`), and a CQ is
//! armed with the `REQ_NOTIFY_CQ` write command (`doorbell.rs` too: both
//! are single `write()`s of bytes built without the general command path).

use std::ops::RangeInclusive;

use zerocopy::{FromZeros, IntoBytes};

use super::{
    CompletionHook, CqCreated, CqRequest, Device, Domain, DriverData, GetContext, OpenRequest,
    Provider, QpCreated, QpLinks, QpRequest, RunWithIn, RunWithInOut, RunWithOut, SrqCreated,
    SrqRequest,
};
use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    sys::{Errno, Mapping, Protection},
    wc::{WcExFlags, WorkCompletion},
    wr::{PostError, PostErrorKind, RecvWr, SendWr},
    AhAttr, QpType, SendOpsFlags,
};

pub(crate) mod cq;
mod doorbell;
pub(crate) mod queue;
mod recv;
mod send;
#[cfg(test)]
mod tests;

pub(crate) use cq::RxeCq;
pub(crate) use doorbell::Doorbell;
pub(crate) use recv::RxeRq;
pub(crate) use send::RxeSq;

/// The rxe provider.
#[derive(Debug)]
pub(crate) struct Rxe;

/// Per-context rxe state (none is needed).
#[derive(Debug, Default)]
pub(crate) struct RxeContext {}

/// An rxe address handle: its index in the kernel's AH pool
/// (`rxe_create_ah_resp.ah_num`), which UD send WQEs carry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RxeAh {
    pub(crate) ah_num: u32,
}

/// The driver response of a create command: the ring's `mminfo`.
#[derive(Debug)]
pub(crate) struct RxeResp<T>(T);

impl<T: IntoBytes + zerocopy::FromBytes> DriverData for RxeResp<T> {
    fn driver_bufs(&mut self) -> (&[u8], &mut [u8]) {
        // rxe refuses driver input; it answers with the mminfo.
        (&[], self.0.as_mut_bytes())
    }
}

/// The queues of an rxe QP.
#[derive(Debug)]
pub(crate) struct RxeQp {
    sq: RxeSq,
    /// `None` for a QP that receives from an SRQ.
    rq: Option<RxeRq>,
    doorbell: Doorbell,
}

fn map(dev: Device<'_>, mi: &abi::Mminfo, what: &'static str) -> Result<Mapping> {
    dev.mmap(mi.size as usize, mi.offset, Protection::ReadWrite)
        .map_err(|e| Error::sys(what, e))
}

/// Rings the send doorbell for the `count` requests just posted; a failure
/// is the `PostError` at index `count` (they are in the queue).
#[inline]
fn ring_send(doorbell: &Doorbell, dev: Device<'_>, count: usize) -> Result<(), PostError> {
    match doorbell.ring(dev) {
        Ok(()) => Ok(()),
        Err(e) => Err(doorbell_failed(e, count)),
    }
}

/// The error of a refused send doorbell, out of the post's path.
#[cold]
#[inline(never)]
fn doorbell_failed(e: Errno, count: usize) -> PostError {
    PostError {
        index: count,
        kind: PostErrorKind::Doorbell(Error::sys("rxe send doorbell (POST_SEND)", e)),
    }
}

/// A view of an rxe QP's send session: the session's cursor is the ring's
/// producer index as we keep it (`Producer::prod`), past the WQEs written,
/// and where the session began (`RxeSq`'s mark), both in the queue as
/// rdma-core's rxe keeps them in its QP; complete stores that index for
/// the kernel. The view holds nothing of its own but the queue borrowed.
#[derive(Debug)]
pub(crate) struct RxeSendSession<'q> {
    qp: &'q mut RxeQp,
    /// For the doorbell.
    dev: Device<'q>,
}

impl Provider for Rxe {
    const NAME: &'static str = "rxe";
    /// rdma-core's rxe copies the kernel's completion (`rxe_poll_cq`).
    const WC_FLAGS_NUMBERING: crate::WcFlagsNumbering = crate::WcFlagsNumbering::Kernel;
    const DRIVER_ID: u32 = abi::RDMA_DRIVER_RXE;
    /// rdma-core's rxe provider accepts 1..=2 (`providers/rxe/rxe.c`); the
    /// kernel reports 2 (`RXE_UVERBS_ABI_VERSION`).
    const ABI_VERSIONS: RangeInclusive<u32> = 1..=2;

    type Context = RxeContext;
    type Pd = ();
    /// Never made: rxe has no thread domains (the default
    /// [`Provider::alloc_td`] refuses, as does rdma-core's rxe, which
    /// leaves `alloc_td` and `alloc_parent_domain` unset).
    type Td = ();
    type Ah = RxeAh;
    type CqPlan = RxeResp<abi::RxeCreateCqResp>;
    type CqShared = ();
    type Cq = RxeCq;
    type SendSession<'q> = RxeSendSession<'q>;
    type QpPlan = RxeResp<abi::RxeCreateQpResp>;
    type QpShared = ();
    type Qp = RxeQp;
    type Rq = RxeRq;
    type SrqPlan = RxeResp<abi::RxeCreateSrqResp>;
    type SrqShared = ();
    type Srq = RxeRq;

    /// rdma-core's rxe (`providers/rxe/rxe.c` `RXE_SUP_RC_QP_SEND_OPS_FLAGS`,
    /// `_UC_`, `_UD_`): RC every operation but TSO, UC sends, writes,
    /// binds and sends with invalidate, UD sends.
    fn send_ops(qp_type: QpType) -> Option<SendOpsFlags> {
        let sends = SendOpsFlags::SEND | SendOpsFlags::SEND_WITH_IMM;
        let writes = SendOpsFlags::RDMA_WRITE | SendOpsFlags::RDMA_WRITE_WITH_IMM;
        let windows = SendOpsFlags::BIND_MW | SendOpsFlags::SEND_WITH_INV;
        match qp_type {
            QpType::Rc => Some(
                sends
                    | writes
                    | windows
                    | SendOpsFlags::RDMA_READ
                    | SendOpsFlags::ATOMIC_CMP_AND_SWP
                    | SendOpsFlags::ATOMIC_FETCH_AND_ADD
                    | SendOpsFlags::LOCAL_INV
                    | SendOpsFlags::ATOMIC_WRITE,
            ),
            QpType::Uc => Some(sends | writes | windows),
            QpType::Ud => Some(sends),
            _ => None,
        }
    }

    /// rxe devices carry a `parent` attribute (their netdev); `rxe` is the
    /// name `rdma link add` suggests.
    fn claims_sysfs_device(name: &str, has_parent: bool) -> bool {
        has_parent || name.starts_with("rxe")
    }

    fn open(
        _dev: Device<'_>,
        get_context: &mut GetContext<'_>,
        _: &OpenRequest,
    ) -> Result<RxeContext> {
        get_context(&[], &mut [])?;
        Ok(RxeContext::default())
    }

    fn alloc_pd(_: &RxeContext, run: &mut RunWithOut<'_>) -> Result<(), Errno> {
        run(&mut [])
    }

    fn create_ah(_: &RxeContext, _: &AhAttr, run: &mut RunWithOut<'_>) -> Result<RxeAh, Errno> {
        let mut resp = abi::RxeCreateAhResp::new_zeroed();
        run(resp.as_mut_bytes())?;
        Ok(RxeAh {
            ah_num: resp.ah_num,
        })
    }

    /// rdma-core's `rxe_create_cq_ex` takes the standard completion fields
    /// only (`RXE_SUP_WC_EX_FLAGS`): the kernel's `struct ib_uverbs_wc` has
    /// no timestamp, and rxe refuses the kernel's timestamp flag too
    /// (`rxe_create_cq`: any `attr->flags` is `EOPNOTSUPP`).
    fn plan_cq(
        _: &RxeContext,
        _: Device<'_>,
        req: &CqRequest,
        _: Domain<'_, ()>,
    ) -> Result<(Self::CqPlan, ())> {
        let extra = req.wc_flags - WcExFlags::STANDARD;
        if !extra.is_empty() {
            let what = if extra.intersects(WcExFlags::TIMESTAMPS) {
                "rxe has no completion timestamps"
            } else {
                "rxe has only the standard completion fields"
            };
            return Err(Error::new(
                "ibv_create_cq_ex",
                ErrorKind::UnsupportedProvider,
                format!(
                    "{what} (asked for {extra:?}): rdma-core's rxe refuses anything beyond \
                     WcExFlags::STANDARD with EOPNOTSUPP"
                ),
            ));
        }
        Ok((RxeResp(abi::RxeCreateCqResp::new_zeroed()), ()))
    }

    fn finish_cq(
        _: &RxeContext,
        dev: Device<'_>,
        plan: Self::CqPlan,
        _: &(),
        _: &CqCreated,
    ) -> Result<RxeCq> {
        RxeCq::new(map(dev, &plan.0.mi, "mmap rxe CQ ring")?)
    }

    #[inline]
    fn poll_cq(cq: &mut RxeCq, out: &mut [WorkCompletion]) -> usize {
        cq.poll(out)
    }

    #[inline]
    fn req_notify_cq(
        _: &RxeCq,
        _: &(),
        dev: Device<'_>,
        handle: u32,
        solicited_only: bool,
    ) -> Result<(), Errno> {
        doorbell::arm(dev, handle, solicited_only)
    }

    #[inline]
    fn completion_hook(_: &()) -> Option<CompletionHook> {
        None
    }

    /// RC `rxe_resize_cq`: the kernel (`rxe_cq_resize_queue`) makes a new
    /// ring, copies the completions waiting in the old one into it, and
    /// answers with its `mminfo`; we map it and drop the old mapping. The
    /// new ring is mapped before the old one goes, so a failed command
    /// leaves the CQ on its old ring, untouched.
    fn resize_cq(
        cq: &mut RxeCq,
        _: &(),
        dev: Device<'_>,
        run: &mut RunWithInOut<'_>,
    ) -> Result<()> {
        let mut resp = abi::RxeResizeCqResp::new_zeroed();
        // rxe takes no driver input; it answers with the new ring's mminfo.
        run(&[], resp.as_mut_bytes())?;
        // The kernel CQ now fills the new ring: if it cannot be mapped the
        // CQ receives no further completion here (rdma-core's rxe is left
        // without a ring too), so say so.
        let lost = |e: Error| {
            let why = e.detail().map(|d| format!("{d}; ")).unwrap_or_default();
            e.with_detail(format!(
                "{why}the kernel resized the CQ but its new ring could not be taken over: \
                 this CQ reports no further completion; destroy it"
            ))
        };
        let map = map(dev, &resp.mi, "mmap rxe CQ ring (resize)").map_err(lost)?;
        *cq = RxeCq::new(map).map_err(lost)?;
        Ok(())
    }

    fn plan_qp(
        _: &RxeContext,
        _: Device<'_>,
        _: &(),
        req: &QpRequest,
        _: Domain<'_, ()>,
    ) -> Result<(Self::QpPlan, ())> {
        // The kernel refuses the others with EOPNOTSUPP too
        // (drivers/infiniband/sw/rxe/rxe_qp.c, rxe_qp_chk_init), and
        // programs (pyverbs' raw packet tests) take that errno as "not
        // supported here".
        if !matches!(req.qp_type, QpType::Rc | QpType::Uc | QpType::Ud) {
            return Err(Error::new(
                "ibv_create_qp",
                ErrorKind::UnsupportedProvider,
                format!("QP type {:?}: rxe supports RC, UC and UD", req.qp_type),
            ));
        }
        // rdma-core's rxe takes no creation flag (`check_qp_init_attr`:
        // `RXE_QP_CREATE_FLAGS_SUP` is 0), nor does the kernel's
        // (`rxe_create_qp`: EOPNOTSUPP).
        if !req.create_flags.is_empty() {
            return Err(Error::new(
                "ibv_create_qp",
                ErrorKind::UnsupportedProvider,
                format!("creation flags {:?}: rxe takes none", req.create_flags),
            ));
        }
        Ok((RxeResp(abi::RxeCreateQpResp::new_zeroed()), ()))
    }

    fn finish_qp(
        _: &RxeContext,
        dev: Device<'_>,
        plan: Self::QpPlan,
        _: &(),
        req: &QpRequest,
        created: &QpCreated,
        _: QpLinks<'_, Self>,
    ) -> Result<RxeQp> {
        let resp = plan.0;
        let sq = RxeSq::new(
            map(dev, &resp.sq_mi, "mmap rxe send queue")?,
            created.cap.max_send_sge,
            created.cap.max_inline_data,
            req.qp_type.raw(),
        )?;
        // A QP on an SRQ has no receive queue; the kernel leaves rq_mi empty.
        let rq = if req.has_srq {
            None
        } else {
            Some(RxeRq::new(
                map(dev, &resp.rq_mi, "mmap rxe receive queue")?,
                created.cap.max_recv_sge,
            )?)
        };
        Ok(RxeQp {
            sq,
            rq,
            doorbell: Doorbell::new(created.handle),
        })
    }

    #[inline]
    fn post_send(qp: &mut RxeQp, dev: Device<'_>, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        let ring = |count: usize| ring_send(&qp.doorbell, dev, count);
        match qp.sq.post(wrs) {
            // The hot path: no large `PostError` moved around.
            Ok(()) if wrs.is_empty() => Ok(()),
            Ok(()) => ring(wrs.len()),
            Err(e) => {
                if e.index > 0 {
                    ring(e.index)?;
                }
                Err(e)
            }
        }
    }

    fn begin_send(qp: &mut RxeQp) {
        qp.sq.begin();
    }

    #[inline(always)]
    fn resume_send<'q>(qp: &'q mut RxeQp, dev: Device<'q>) -> RxeSendSession<'q> {
        RxeSendSession { qp, dev }
    }

    /// Nothing to put back: the cursor never left the queue.
    #[inline(always)]
    fn suspend_send(_: RxeSendSession<'_>) {}

    #[inline]
    fn push_send(s: &mut RxeSendSession<'_>, wr: &SendWr<'_>) -> Result<(), PostErrorKind> {
        s.qp.sq.push(wr)
    }

    #[inline(always)]
    fn push_send_typed(
        s: &mut RxeSendSession<'_>,
        wr: &SendWr<'_>,
        _ud: bool,
    ) -> Result<(), PostErrorKind> {
        s.qp.sq.push_typed(wr)
    }

    // Inlined (with what it calls taking the QP, not the session) so that
    // a caller's view stays in registers: the view's address is never taken.
    #[inline]
    fn complete_send(s: &mut RxeSendSession<'_>, pushed: usize) -> Result<(), PostError> {
        if !s.qp.sq.complete_session() {
            return Ok(());
        }
        ring_send(&s.qp.doorbell, s.dev, pushed)
    }

    #[inline]
    fn abort_send(s: &mut RxeSendSession<'_>) {
        s.qp.sq.abort_session();
    }

    #[inline]
    fn post_recv(qp: &mut RxeQp, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        match &mut qp.rq {
            Some(rq) => rq.post(wrs),
            None => Err(PostError {
                index: 0,
                kind: PostErrorKind::OpNotSupported(
                    "this QP has no receive queue here: it receives from an SRQ (post to the \
                     SRQ), or its queue was split off (post to its RecvQueue)",
                ),
            }),
        }
    }

    fn take_rq(qp: &mut RxeQp) -> Option<RxeRq> {
        qp.rq.take()
    }

    fn put_rq(qp: &mut RxeQp, rq: RxeRq) {
        qp.rq = Some(rq);
    }

    #[inline]
    fn post_rq(rq: &mut RxeRq, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        rq.post(wrs)
    }

    fn plan_srq(
        _: &RxeContext,
        _: Device<'_>,
        _: &(),
        _: &SrqRequest,
        _: Domain<'_, ()>,
    ) -> Result<(Self::SrqPlan, ())> {
        Ok((RxeResp(abi::RxeCreateSrqResp::new_zeroed()), ()))
    }

    fn finish_srq(
        _: &RxeContext,
        dev: Device<'_>,
        plan: Self::SrqPlan,
        _: &(),
        created: &SrqCreated,
    ) -> Result<(RxeRq, u32)> {
        let resp = plan.0;
        let rq = RxeRq::new(map(dev, &resp.mi, "mmap rxe SRQ ring")?, created.max_sge)?;
        Ok((rq, resp.srq_num))
    }

    #[inline]
    fn post_srq_recv(srq: &mut RxeRq, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        srq.post(wrs)
    }

    fn modify_srq(_: &RxeRq, run: &mut RunWithIn<'_>) -> Result<(), Errno> {
        // rxe requires its driver struct: the address where it would write a
        // new ring mminfo if MAX_WR were resized (it never is here).
        let mut mi = abi::Mminfo::new_zeroed();
        let mut drv = abi::RxeModifySrqCmd::new_zeroed();
        drv.mmap_info_addr = std::ptr::addr_of_mut!(mi) as u64;
        let result = run(drv.as_bytes());
        let _ = mi;
        result
    }
}
