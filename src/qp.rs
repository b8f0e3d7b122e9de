//! Queue pairs (`ibv_create_qp`, `ibv_modify_qp`, `ibv_query_qp`,
//! `ibv_post_send`, `ibv_post_recv`, `ibv_destroy_qp`).
//!
//! Creation is `UVERBS_METHOD_QP_CREATE` (falling back to `CREATE_QP`);
//! modify and query exist only as write commands in 6.1 (`MODIFY_QP`,
//! `QUERY_QP`); destruction is `UVERBS_METHOD_QP_DESTROY` (or `DESTROY_QP`)
//! and waits for the acknowledgement of every async event the kernel reported
//! for the QP. A modify is checked against the IB state machine first
//! ([`crate::check_modify`]), so a missing attribute is named instead of
//! surfacing as the kernel's bare `EINVAL`.

use std::sync::{
    atomic::{AtomicU64, AtomicU8, Ordering},
    Arc,
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::{ContextInner, DestroyReporting, Verb},
    cq::{CompletionQueue, CqInner},
    error::{DestroyError, Error, ErrorKind, Result},
    event_count::{
        ack_deferred, destroy_reachable, destroy_unreachable, EventCounts, EventObject, Pending,
        Registry, Stream,
    },
    object::{Destroy, Owned, ParentLink},
    parent_domain::DomainInner,
    pd::PdInner,
    providers::{AnyQp, AnyQpShared},
    qp_attr::{
        decode_query, encode_ex_modify, encode_modify, QpAttr, QpAttrMask, QpCap, QpInitInfo,
        QpState, QpType,
    },
    qp_ex::{self, WrSession},
    qp_state::{check_modify, check_rtr_av_port, required_attrs},
    recv_queue::RecvQueue,
    send_session::{OpenSend, SendBatch},
    srq::{SharedReceiveQueue, SrqInner},
    sys::{Errno, WriteCmd},
    wr::{PostError, PostErrorKind, RecvWr, SendWr},
};

mod create;
mod shared;

pub use shared::{SendLock, SharedQueuePair};

/// What [`ProtectionDomain::create_qp`](crate::ProtectionDomain::create_qp) takes (`struct ibv_qp_init_attr`).
///
/// Made by [`QpInitAttr::rc`] (or [`uc`](QpInitAttr::uc),
/// [`ud`](QpInitAttr::ud), [`new`](QpInitAttr::new) for any type) with the
/// two CQs, then set field by field:
/// `QpInitAttr::rc(&cq, &cq).cap(QpCap::new(16, 16, 1, 1)).sq_sig_all(true)`.
/// Unset fields are zero: no SRQ, no queue entries, context 0.
#[doc(alias = "ibv_qp_init_attr")]
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct QpInitAttr<'a> {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// The CQ for send completions.
    pub send_cq: &'a CompletionQueue,
    /// The CQ for receive completions.
    pub recv_cq: &'a CompletionQueue,
    /// Receive from a shared receive queue instead of the QP's own.
    pub srq: Option<&'a SharedReceiveQueue>,
    /// Requested queue sizes; the created QP reports what it got.
    pub cap: QpCap,
    /// Generate a completion for every send, signaled or not.
    pub sq_sig_all: bool,
    /// A value of the program's own that the QP's async events carry
    /// ([`QueuePair::context`], [`crate::AsyncEvent::context`]):
    /// `ibv_qp_init_attr`'s `qp_context`, e.g. an index into the program's
    /// connection table.
    pub context: u64,
}

impl<'a> QpInitAttr<'a> {
    /// A QP of type `qp_type` completing sends to `send_cq` and receives to
    /// `recv_cq` (they may be the same CQ); no queue entries yet: set
    /// [`cap`](Self::cap).
    #[inline]
    pub const fn new(
        qp_type: QpType,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
    ) -> Self {
        QpInitAttr {
            qp_type,
            send_cq,
            recv_cq,
            srq: None,
            cap: QpCap::new(0, 0, 0, 0),
            sq_sig_all: false,
            context: 0,
        }
    }

    /// A reliable connected QP ([`QpType::Rc`]).
    #[inline]
    pub const fn rc(send_cq: &'a CompletionQueue, recv_cq: &'a CompletionQueue) -> Self {
        Self::new(QpType::Rc, send_cq, recv_cq)
    }

    /// An unreliable connected QP ([`QpType::Uc`]).
    #[inline]
    pub const fn uc(send_cq: &'a CompletionQueue, recv_cq: &'a CompletionQueue) -> Self {
        Self::new(QpType::Uc, send_cq, recv_cq)
    }

    /// An unreliable datagram QP ([`QpType::Ud`]).
    #[inline]
    pub const fn ud(send_cq: &'a CompletionQueue, recv_cq: &'a CompletionQueue) -> Self {
        Self::new(QpType::Ud, send_cq, recv_cq)
    }

    /// Receives from `srq` (`&srq`, or an `Option`) instead of the QP's own
    /// receive queue.
    #[inline]
    #[must_use]
    pub fn srq(mut self, srq: impl Into<Option<&'a SharedReceiveQueue>>) -> Self {
        self.srq = srq.into();
        self
    }

    crate::setters::setters! {
        /// Sets the transport type.
        qp_type: QpType,
        /// Sets the CQ for send completions.
        send_cq: &'a CompletionQueue,
        /// Sets the CQ for receive completions.
        recv_cq: &'a CompletionQueue,
        /// Sets the requested queue sizes.
        cap: QpCap,
        /// Sets whether every send generates a completion.
        sq_sig_all: bool,
        /// Sets the program's own value the QP's events carry.
        context: u64,
    }
}

/// A QP's kernel object; async events hold an `Arc` of it.
#[derive(Debug)]
pub(crate) struct QpInner {
    pub(crate) ctx: Arc<ContextInner>,
    _pd: Arc<Owned<PdInner>>,
    /// The parent domain it was made in, which its queue memory may come
    /// from.
    _domain: Option<Arc<DomainInner>>,
    // Counted in their parents' `children` while the QP exists.
    _send_cq: ParentLink<CqInner>,
    _recv_cq: ParentLink<CqInner>,
    _srq: Option<ParentLink<SrqInner>>,
    pub(crate) handle: u32,
    pub(crate) user_handle: u64,
    pub(crate) qp_num: u32,
    pub(crate) qp_type: QpType,
    /// `QpInitAttr::context`.
    pub(crate) context: u64,
    /// The port set at RESET->INIT (0 before).
    port: AtomicU8,
    pub(crate) events: Arc<EventCounts>,
    /// The provider's state kept with the kernel QP: dropped after the QP
    /// is destroyed (it may own memory the device reads and writes).
    pub(crate) shared: AnyQpShared,
}

/// The state a [`QueuePair::gate`] word holds.
fn gate_state(gate: u64) -> QpState {
    QpState::from_raw(gate as u8)
}

/// The [`QueuePair::gate`] word after a modify from `gate` that left the
/// QP in `next`, one more reset if it `set` the state to RESET.
fn next_gate(gate: u64, next: QpState, set: bool) -> u64 {
    let resets = (gate >> 8) + u64::from(set && next == QpState::Reset);
    (resets << 8) | u64::from(next.raw())
}

/// What a post is about to do, for [`QueuePair::pass_gate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Posting {
    /// `post_send`: refused while a send session is open.
    Sends,
    /// Opening a send session (`begin_send`, `start_send`, `start_wr`):
    /// an open one is aborted first.
    Session,
    Receives,
}

impl Destroy for QpInner {
    fn destroy_kernel(&self) -> Result<()> {
        destroy_unreachable(self)
    }
}

impl EventObject for QpInner {
    fn counts(&self) -> &EventCounts {
        &self.events
    }

    fn registry(&self) -> (&Registry, u64) {
        (&self.ctx.events, self.user_handle)
    }

    fn destroy_reporting(&self) -> Result<Option<[u32; 2]>> {
        let mut req = abi::IbUverbsDestroyQp::new_zeroed();
        req.qp_handle = self.handle;
        let mut resp = abi::IbUverbsDestroyQpResp::new_zeroed();
        let gone = self.ctx.destroy_reporting(
            &DestroyReporting {
                verb: Verb::DestroyQp,
                op: "UVERBS_METHOD_QP_DESTROY",
                object: abi::UVERBS_OBJECT_QP,
                method: abi::UVERBS_METHOD_QP_DESTROY,
                handle_attr: abi::UVERBS_ATTR_DESTROY_QP_HANDLE,
                resp_attr: abi::UVERBS_ATTR_DESTROY_QP_RESP,
                write_command: abi::IB_USER_VERBS_CMD_DESTROY_QP,
            },
            self.handle,
            req.as_bytes(),
            resp.as_mut_bytes(),
        )?;
        self.shared.on_destroyed();
        // The CQs and the SRQ count this QP as a child until it is dropped
        // (`ParentLink`): after the destroy, even a failed one.
        Ok((!gone).then_some([0, resp.events_reported]))
    }
}

/// A queue pair (`struct ibv_qp`).
///
/// The handle owns the producer side of its queues: posting takes
/// `&mut self` and needs no lock. No `&self` method posts:
/// [`PooledQp::qp`](crate::PooledQp::qp) lends `&QueuePair` on that promise.
#[derive(Debug)]
pub struct QueuePair {
    pub(crate) inner: Arc<Owned<QpInner>>,
    pub(crate) queues: AnyQp,
    cap: QpCap,
    /// The state after the last modify (low byte) and how many modifies
    /// set RESET (the 56 bits above, which do not wrap): one word, so that
    /// a post checks both with one load and one comparison
    /// ([`QueuePair::pass_gate`]). Here rather than in the shared
    /// [`QpInner`]: only this handle's `modify` writes it and only its
    /// posts and `state` read it, and a post then needs no pointer to it.
    pub(crate) gate: AtomicU64,
    /// The gate word ([`QueuePair::gate`]) the last post that found the QP
    /// in a sending state passed with ([`GATE_NEVER`] before one did).
    pub(crate) gate_passed: u64,
    /// The resets ([`QueuePair::gate`]'s upper bits) the queues were
    /// restarted for.
    pub(crate) resets_seen: u64,
    /// The QP's type, here too so a typed session checks it without
    /// reaching for the shared part.
    qp_type: QpType,
    /// The gate word of the receive queue split off
    /// ([`QueuePair::split_recv`]): `modify` updates it as it updates
    /// [`QueuePair::gate`]. `None` while the QP posts its own receives.
    recv_gate: Option<Arc<AtomicU64>>,
    /// The send session opened by [`QueuePair::begin_send`], if one is
    /// open (`src/send_session.rs`). While it is, [`QueuePair::gate_passed`]
    /// is [`GATE_NEVER`], so that every post and session start takes
    /// [`QueuePair::cross_gate`], which sees it.
    pub(crate) send_open: Option<OpenSend>,
}

/// The error of a typed session started for another provider than the
/// QP's.
#[cold]
#[inline(never)]
fn wrong_provider(inner: &QpInner, session: &'static str) -> PostError {
    PostError {
        index: 0,
        kind: PostErrorKind::WrongProvider {
            qp: inner.ctx.provider.name(),
            session,
        },
    }
}

/// A gate word no QP has (its state byte is no state), so the first post
/// takes [`QueuePair::cross_gate`].
pub(crate) const GATE_NEVER: u64 = u64::MAX;

impl QueuePair {
    /// The QP number peers address.
    pub fn qp_num(&self) -> u32 {
        self.inner.qp_num
    }

    /// The value given as [`QpInitAttr::context`] (`qp->qp_context`).
    pub fn context(&self) -> u64 {
        self.inner.context
    }

    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The QP's transport type.
    pub fn qp_type(&self) -> QpType {
        self.inner.qp_type
    }

    /// The queue sizes the QP got.
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// The state after the last successful [`QueuePair::modify`] (the device
    /// may since have moved it to an error state; [`QueuePair::query`] asks it).
    pub fn state(&self) -> QpState {
        gate_state(self.gate.load(Ordering::Acquire))
    }

    /// Modifies the QP, like `ibv_modify_qp`: the `mask` says which fields of
    /// `attr` apply. The transition is checked first; the error names the
    /// attributes a transition is missing or does not allow.
    #[doc(alias = "ibv_modify_qp")]
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let inner = &self.inner;
        let current = if mask.contains(QpAttrMask::CUR_STATE) {
            attr.cur_qp_state
        } else {
            self.state()
        };
        let next = check_modify(inner.qp_type, current, attr, mask)?;
        let port = inner.port.load(Ordering::Acquire);
        check_rtr_av_port(port, attr, mask)?;
        let result = if mask.needs_ex() {
            // The rate limit only exists in the extended command.
            let req = encode_ex_modify(inner.handle, attr, mask);
            let mut resp = abi::IbUverbsExModifyQpResp::new_zeroed();
            let mut cmd = WriteCmd {
                command: abi::IB_USER_VERBS_CMD_FLAG_EXTENDED | abi::IB_USER_VERBS_EX_CMD_MODIFY_QP,
                core_in: req.as_bytes(),
                driver_in: &[],
                core_out: resp.as_mut_bytes(),
                driver_out: &mut [],
                ..WriteCmd::default()
            };
            inner.ctx.write_cmd(&mut cmd)
        } else {
            let req = encode_modify(inner.handle, attr, mask);
            inner.ctx.write_with_resp(
                abi::IB_USER_VERBS_CMD_MODIFY_QP,
                req.as_bytes(),
                &[],
                &mut [],
                &mut [],
            )
        };
        result.map_err(|e| {
            let err = Error::sys("IB_USER_VERBS_CMD_MODIFY_QP", e);
            if e == Errno::EINVAL {
                err.with_detail(format!(
                    "the kernel refused {:?} -> {:?} with {}; check the values (e.g. \
                         port, GID index, path MTU against the port's active MTU, QP numbers)",
                    current,
                    next,
                    mask.names().join(", ")
                ))
            } else {
                err
            }
        })?;
        if mask.contains(QpAttrMask::PORT) {
            inner.port.store(attr.port_num, Ordering::Release);
        }
        let set = mask.contains(QpAttrMask::STATE);
        if set {
            inner.shared.on_state(next);
        }
        // After the provider's hook: a post that sees the new word sees
        // what the hook did (mlx5: a new receive-queue epoch, the CQs'
        // clean and restart requests, the doorbell records reset).
        // An update, not a store: modifies on other threads (`&self`) must
        // not lose a reset.
        let update = |g| Some(next_gate(g, next, set));
        let _ = self
            .gate
            .fetch_update(Ordering::Release, Ordering::Relaxed, update);
        if let Some(recv) = &self.recv_gate {
            let _ = recv.fetch_update(Ordering::Release, Ordering::Relaxed, update);
        }
        Ok(())
    }

    /// Moves the QP to `attr.qp_state` with exactly the attributes that
    /// transition requires for this QP type (the kernel's table, see
    /// [`crate::required_attrs`]): RESET→INIT takes the port, P_Key index and
    /// access flags (Q_Key for UD), INIT→RTR the address vector, MTU, remote
    /// QP number and PSN and the responder settings, RTR→RTS the send-side
    /// settings. For optional attributes, use [`QueuePair::modify`].
    pub fn modify_to(&self, attr: &QpAttr) -> Result<()> {
        let (required, _) = required_attrs(self.inner.qp_type, self.state(), attr.qp_state)
            .ok_or_else(|| {
                Error::new(
                    "modify QP",
                    ErrorKind::InvalidArgument,
                    format!(
                        "{} {}->{}: this transition does not exist",
                        self.inner.qp_type,
                        self.state(),
                        attr.qp_state
                    ),
                )
            })?;
        self.modify(attr, QpAttrMask::STATE | required)
    }

    /// Attaches this UD QP to a multicast group, like `ibv_attach_mcast`
    /// (the `ATTACH_MCAST` write command): it then receives datagrams sent to
    /// `gid` (and `lid` on InfiniBand; 0 on RoCE).
    #[doc(alias = "ibv_attach_mcast")]
    pub fn attach_mcast(&self, gid: crate::Gid, lid: u16) -> Result<()> {
        self.mcast(abi::IB_USER_VERBS_CMD_ATTACH_MCAST, gid, lid)
            .map_err(|e| Error::sys("IB_USER_VERBS_CMD_ATTACH_MCAST", e))
    }

    /// Detaches this QP from a multicast group, like `ibv_detach_mcast`.
    #[doc(alias = "ibv_detach_mcast")]
    pub fn detach_mcast(&self, gid: crate::Gid, lid: u16) -> Result<()> {
        self.mcast(abi::IB_USER_VERBS_CMD_DETACH_MCAST, gid, lid)
            .map_err(|e| Error::sys("IB_USER_VERBS_CMD_DETACH_MCAST", e))
    }

    fn mcast(&self, command: u32, gid: crate::Gid, lid: u16) -> Result<(), Errno> {
        // ATTACH and DETACH share one layout (ib_user_verbs.h).
        let mut req = abi::IbUverbsAttachMcast::new_zeroed();
        req.gid = gid.0;
        req.qp_handle = self.inner.handle;
        req.mlid = lid;
        self.inner
            .ctx
            .write_with_resp(command, req.as_bytes(), &[], &mut [], &mut [])
    }

    /// Queries the QP, like `ibv_query_qp`; `mask` selects what to report
    /// (the kernel reports everything it has either way).
    #[doc(alias = "ibv_query_qp")]
    pub fn query(&self, mask: QpAttrMask) -> Result<(QpAttr, QpInitInfo)> {
        let mut req = abi::IbUverbsQueryQp::new_zeroed();
        req.qp_handle = self.inner.handle;
        req.attr_mask = mask.bits();
        let mut resp = abi::IbUverbsQueryQpResp::new_zeroed();
        self.inner
            .ctx
            .write_with_resp(
                abi::IB_USER_VERBS_CMD_QUERY_QP,
                req.as_bytes(),
                &[],
                resp.as_mut_bytes(),
                &mut [],
            )
            .map_err(|e| Error::sys("IB_USER_VERBS_CMD_QUERY_QP", e))?;
        let (mut attr, mut init) = decode_query(&resp);
        // mlx5_ib reports a user QP's send capacities as 0: the send queue
        // is the library's, and libmlx5's `mlx5_query_qp` reports its own
        // (max_post, max_gs, max_inline_data). rxe's kernel reports the
        // ones the QP was created with, which are the ones it got.
        if resp.max_send_wr == 0 {
            init.cap.max_send_wr = self.cap.max_send_wr;
            init.cap.max_send_sge = self.cap.max_send_sge;
            init.cap.max_inline_data = self.cap.max_inline_data;
            attr.cap = init.cap;
        }
        Ok((attr, init))
    }

    /// Posts send work requests, like `ibv_post_send`, and rings the doorbell
    /// once for the batch. On error, the requests before
    /// [`PostError::index`] were posted and the doorbell rung for them.
    #[doc(alias = "ibv_post_send")]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        // The gate's slow path inlined here: a call to it anywhere in this
        // function cost the loop below registers (`benches/callgrind.sh
        // --mlx5`: 4 more instructions per request in 64).
        let gate = self.gate.load(Ordering::Acquire);
        if gate != self.gate_passed {
            self.cross_gate(gate, Posting::Sends)?;
        }
        self.queues.post_send(self.inner.ctx.device(), wrs)
    }

    /// Checks, before a post, that the QP's state allows it, and restarts
    /// the queues if a modify set RESET since the last post (mlx5's
    /// producer counters; rxe has none to restart). While no modify happens, one
    /// load and one comparison: the gate word is the one the last post in
    /// a sending state passed ([`QueuePair::gate_passed`]).
    ///
    /// A modify cannot run during a post: it takes `&self`, a post `&mut
    /// self`. The word is loaded with acquire, paired with the modify's
    /// release, so the queues restart after the provider's own reset.
    /// Inlined into callers in other crates (`start_send`).
    #[inline(always)]
    pub(crate) fn pass_gate(&mut self, posting: Posting) -> Result<(), PostError> {
        let gate = self.gate.load(Ordering::Acquire);
        if gate == self.gate_passed {
            return Ok(());
        }
        self.cross_gate_apart(gate, posting)
    }

    /// [`QueuePair::cross_gate`] out of line, for the callers that inline
    /// [`QueuePair::pass_gate`] (`start_send` is inlined into its callers).
    #[cold]
    #[inline(never)]
    fn cross_gate_apart(&mut self, gate: u64, posting: Posting) -> Result<(), PostError> {
        self.cross_gate(gate, posting)
    }

    /// [`QueuePair::pass_gate`] after a modify (or before the first post):
    /// the queues restarted if the QP was reset since they last were, the
    /// state checked, and the word kept if the state sends (and so
    /// receives).
    #[inline(always)]
    fn cross_gate(&mut self, gate: u64, posting: Posting) -> Result<(), PostError> {
        if self.send_open.is_some() {
            // `post_send` (which inlines this) gets no call: a call anywhere
            // in it costs its loop registers (see `post_send`).
            return match posting {
                Posting::Sends => Err(PostError {
                    index: 0,
                    kind: PostErrorKind::BadState(
                        "a send session is open on the QP (begin_send): complete or abort it \
                         before post_send",
                    ),
                }),
                _ => self.cross_gate_in_session(gate, posting),
            };
        }
        let resets = gate >> 8;
        if resets != self.resets_seen {
            self.resets_seen = resets;
            self.queues.restart();
        }
        let state = gate_state(gate);
        let sends = !matches!(state, QpState::Reset | QpState::Init | QpState::Rtr);
        if sends {
            self.gate_passed = gate;
        }
        let refused = match posting {
            Posting::Sends | Posting::Session if !sends => {
                "sends need the QP in RTS (or SQD, SQE, ERR)"
            }
            Posting::Receives if state == QpState::Reset => "receives cannot be posted in RESET",
            _ => return Ok(()),
        };
        Err(PostError {
            index: 0,
            kind: PostErrorKind::BadState(refused),
        })
    }

    /// Starts the QP's send session and returns an untyped view of it, a
    /// [`SendBatch`]: send work requests pushed one at a time and rung with
    /// one doorbell by [`SendBatch::complete`], like `ibv_wr_start` on an
    /// `ibv_qp_ex` (see [`crate::send_session`]); any QP takes sessions. A
    /// session open through [`QueuePair::begin_send`] is aborted first.
    /// Needs the QP in a state that sends, as [`QueuePair::post_send`]
    /// does.
    #[doc(alias = "ibv_wr_start")]
    #[doc(alias = "ibv_qp_ex")]
    #[inline(always)]
    pub fn start_send(&mut self) -> Result<SendBatch<'_>, PostError> {
        self.pass_gate(Posting::Session)?;
        let dev = self.inner.ctx.device();
        Ok(SendBatch::new(self.queues.start_send(dev)))
    }

    /// Starts the QP's send session and returns a typed view of it
    /// ([`WrSession`], the `ibv_qp_ex` API: see [`crate::qp_ex`]) for a QP of
    /// transport `K` ([`qp_ex::Rc`], [`qp_ex::Uc`], [`qp_ex::Ud`]) on provider
    /// `P` ([`qp_ex::Mlx5`], [`qp_ex::Rxe`]), like `ibv_wr_start` (no
    /// `ibv_qp_to_qp_ex` or create flag first: any QP takes sessions).
    /// Checks once what the session's requests then need not: the QP's
    /// type ([`PostErrorKind::WrongQpType`]), its provider
    /// ([`PostErrorKind::WrongProvider`]) and its state (sends need RTS,
    /// [`PostErrorKind::BadState`]). A session open through
    /// [`QueuePair::begin_send`] is aborted first (see
    /// [`crate::send_session`]).
    #[doc(alias = "ibv_wr_start")]
    #[doc(alias = "ibv_qp_to_qp_ex")]
    #[inline(always)]
    pub fn start_wr<K: qp_ex::QpKind, P: qp_ex::ProviderKind>(
        &mut self,
    ) -> Result<WrSession<'_, K, P>, PostError> {
        if self.qp_type != K::TYPE {
            return Err(self.wrong_qp_type(K::TYPE));
        }
        self.pass_gate(Posting::Session)?;
        let QueuePair { queues, inner, .. } = self;
        let dev = inner.ctx.device();
        match WrSession::start(crate::providers::typed::Queues::new(queues, dev)) {
            Some(s) => Ok(s),
            None => Err(wrong_provider(inner, P::NAME)),
        }
    }

    #[cold]
    #[inline(never)]
    fn wrong_qp_type(&self, session: QpType) -> PostError {
        PostError {
            index: 0,
            kind: PostErrorKind::WrongQpType {
                qp: self.qp_type,
                session,
            },
        }
    }

    /// Splits the QP's receive queue off into a [`RecvQueue`] of its own,
    /// so that one thread posts receives while another posts sends, each
    /// with `&mut` of its own handle and no lock shared between them (as
    /// libibverbs' providers lock a QP's send and receive queues apart).
    /// Afterwards this handle's [`QueuePair::post_recv`] fails
    /// ([`PostErrorKind::OpNotSupported`]); modifies, queries, sends and
    /// destroy stay here, and the [`RecvQueue`] follows the QP's state
    /// (receives need it out of RESET; after a reset it restarts its
    /// queue on its next post).
    ///
    /// `InvalidArgument` if the QP has no receive queue of its own (it
    /// receives from an SRQ) or it was split off already.
    pub fn split_recv(&mut self) -> Result<RecvQueue> {
        let Some(rq) = self.queues.take_rq() else {
            return Err(Error::new(
                "QueuePair::split_recv",
                ErrorKind::InvalidArgument,
                "the QP has no receive queue of its own: it receives from an SRQ, or its \
                 queue was split off already",
            ));
        };
        let gate = Arc::new(AtomicU64::new(self.gate.load(Ordering::Acquire)));
        self.recv_gate = Some(gate.clone());
        Ok(RecvQueue::new(
            rq,
            gate,
            self.resets_seen,
            self.inner.qp_num,
        ))
    }

    /// Posts receive work requests, like `ibv_post_recv` (no system call).
    #[doc(alias = "ibv_post_recv")]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        self.pass_gate(Posting::Receives)?;
        self.queues.post_recv(wrs)
    }

    /// Destroys the QP, like `ibv_destroy_qp`: waits until async events other
    /// threads hold for it are acknowledged ([`QueuePair::try_destroy`] does
    /// not); `EBUSY` if the calling thread holds one. On any failure the QP
    /// comes back in the error, unchanged and still usable. Dropping the
    /// handle destroys it when its last reference goes (see
    /// [`crate::CompletionQueue::destroy`]).
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::Wait)
    }

    /// [`QueuePair::destroy`] that fails with `EAGAIN` instead of waiting
    /// for events other threads hold.
    pub fn try_destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::Refuse)
    }

    /// [`QueuePair::destroy`] in libibverbs' form (`ibv_destroy_qp`), for callers that
    /// acknowledge by count from other threads through
    /// [`QueuePair::event_acks`]: events deferred and not yet acknowledged do
    /// not refuse it. The destroy command runs first; then it waits until
    /// every event the kernel reported for the object is acknowledged,
    /// deferred ones included (forever, as libibverbs, for one nobody
    /// acknowledges). `EBUSY`, the object given back unchanged, as for
    /// [`QueuePair::destroy`] or while the calling thread holds an event
    /// value of it.
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy_awaiting_acks(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::WaitDeferred)
    }

    /// A handle that acknowledges this object's deferred events from any
    /// thread, also while [`QueuePair::destroy_awaiting_acks`] waits for them
    /// (see [`EventAcks`](crate::EventAcks)).
    pub fn event_acks(&self) -> crate::EventAcks {
        crate::EventAcks::new(&self.inner.events)
    }

    /// Acknowledges `n` async events of this QP left unacknowledged with
    /// [`AsyncEvent::defer_ack`](crate::AsyncEvent::defer_ack), from any
    /// thread (libibverbs acknowledges async events one at a time:
    /// `ibv_ack_async_event`). `InvalidArgument` (and nothing
    /// acknowledged) when fewer than `n` are deferred.
    pub fn ack_async_events(&self, n: u32) -> Result<()> {
        ack_deferred(&self.inner.events, Stream::Async, n, "ibv_ack_async_event")
    }

    /// Async events of this QP deferred and not yet acknowledged.
    pub fn deferred_async_events(&self) -> u32 {
        self.inner.events.deferred(Stream::Async)
    }

    fn destroy_with(self, pending: Pending) -> Result<(), DestroyError<Self>> {
        let result = destroy_reachable(&self.inner, || 0, pending, "ibv_destroy_qp");
        // On success `self` drops here: the kernel QP is gone first, then
        // the queues the device read.
        result.map_err(|e| DestroyError::new(self, e))
    }
}
