//! [`SharedQueuePair`]: a queue pair several threads post to.

use std::{ops::Deref, sync::Arc};

use crate::{
    error::{DestroyError, Result},
    qp_attr::{QpAttr, QpAttrMask, QpCap, QpInitInfo, QpState, QpType},
    qp_ex::{self, WrSession},
    recv_queue::RecvQueue,
    send_session::SendBatch,
    spin_lock::{SpinGuard, SpinLock},
    wr::{PostError, RecvWr, SendWr},
};

use super::{QueuePair, GATE_NEVER};

/// A queue pair several threads post to: [`SharedQueuePair`]
/// ([`QueuePair::into_shared`]).
///
/// A [`QueuePair`] posts with `&mut self` and takes no lock: one thread
/// posts, and that stays the fastest form. libibverbs lets any number of
/// threads post to one QP, each provider locking each queue apart
/// (rdma-core `providers/mlx5/qp.c`: `mlx5_spin_lock(&qp->sq.lock)` in
/// `mlx5_post_send`, `&qp->rq.lock` in `mlx5_post_recv`; rxe likewise).
/// [`SharedQueuePair`] is that form, opted into: `Send + Sync`, posting
/// with `&self`, one lock for the send queue and one for the receive queue
/// (the QP's receive queue split off as [`QueuePair::split_recv`] does), so
/// a thread posting sends never waits for one posting receives. The lock is
/// a spinlock that yields its CPU after a short spin (`src/spin_lock.rs`
/// says why: one atomic operation uncontended, a sleep and a wake never in
/// a critical section of a few dozen nanoseconds).
///
/// - [`SharedQueuePair::post_send`] / [`SharedQueuePair::post_recv`]: one
///   `ibv_post_send` / `ibv_post_recv`, each under its queue's lock.
/// - [`SharedQueuePair::lock_send`]: the send lock held by a [`SendLock`]
///   for as long as it lives, for a send session ([`SendLock::start_send`],
///   [`SendLock::start_wr`], the `ibv_wr_*` API) or several posts in a row;
///   other threads' sends wait meanwhile, receives do not.
/// - Modify and query take the send lock (a modify changes what a post
///   checks; it waits for a session another thread holds).
/// - [`SharedQueuePair::into_inner`] gives the [`QueuePair`] back, its
///   receive queue rejoined; destroy gives the shared form back unchanged
///   when refused, and dropping it destroys the QP as dropping a
///   [`QueuePair`] does.
///
/// The receive side's lock exists only for a QP with a receive queue of
/// its own; on an SRQ, post to the [`SharedReceiveQueue`](crate::SharedReceiveQueue).
/// [`SharedCompletionQueue`](crate::SharedCompletionQueue) is the same for a
/// CQ.
#[derive(Debug)]
pub struct SharedQueuePair {
    // Dropped in this order: the QP (its kernel object destroyed before
    // its queues' memory goes, as a `QueuePair`'s drop does), then its
    // receive queue, whose memory is its own or reference-counted
    // (`src/recv_queue.rs`).
    send: SpinLock<QueuePair>,
    /// The QP's own receive queue, split off; `None` if it has none (it
    /// receives from an SRQ) or it had been split off before.
    recv: Option<SpinLock<RecvQueue>>,
    qp_num: u32,
    handle: u32,
    qp_type: QpType,
    cap: QpCap,
    context: u64,
}

impl QueuePair {
    /// This QP in the form several threads post to with `&self`, one lock
    /// per queue ([`SharedQueuePair`]; [`SharedQueuePair::into_inner`]
    /// gives it back). A send session open through
    /// [`QueuePair::begin_send`] is aborted first.
    pub fn into_shared(mut self) -> SharedQueuePair {
        self.abort_send();
        let recv = self.split_recv().ok().map(SpinLock::new);
        SharedQueuePair {
            qp_num: self.qp_num(),
            handle: self.handle(),
            qp_type: self.qp_type(),
            cap: self.cap(),
            context: self.context(),
            send: SpinLock::new(self),
            recv,
        }
    }

    /// Puts the receive queue [`QueuePair::split_recv`] took back into
    /// this QP, each side restarted for the resets it has not seen yet
    /// (so that neither is restarted later over receives posted since:
    /// after this, one reset count serves both).
    fn join_recv(&mut self, rq: RecvQueue) {
        let (rq, gate, rq_resets) = rq.into_parts();
        let Some(own) = self.recv_gate.take() else {
            debug_assert!(false, "join_recv without split_recv");
            return;
        };
        debug_assert!(Arc::ptr_eq(&own, &gate), "another QP's receive queue");
        let resets = self.gate.load(std::sync::atomic::Ordering::Acquire) >> 8;
        if self.resets_seen != resets {
            // The send queue alone: the receive queue is still out.
            self.queues.restart();
            self.resets_seen = resets;
        }
        let mut rq = rq;
        if rq_resets != resets {
            rq.restart();
        }
        if self.queues.put_rq(rq).is_err() {
            debug_assert!(false, "a receive queue of another provider");
        }
        // The next post looks at the state again.
        self.gate_passed = GATE_NEVER;
    }
}

impl SharedQueuePair {
    /// The QP number peers address.
    pub fn qp_num(&self) -> u32 {
        self.qp_num
    }

    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The QP's transport type.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The queue sizes the QP got.
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// The value given as [`QpInitAttr::context`](crate::QpInitAttr::context).
    pub fn context(&self) -> u64 {
        self.context
    }

    /// Posts send work requests under the send lock, like `ibv_post_send`
    /// (the same rules and errors as [`QueuePair::post_send`]).
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send(&self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        self.send.lock().post_send(wrs)
    }

    /// Posts receive work requests under the receive lock, like
    /// `ibv_post_recv` (the same rules and errors as
    /// [`QueuePair::post_recv`]); never waits for the send side.
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        match &self.recv {
            Some(rq) => rq.lock().post_recv(wrs),
            // No receive queue of its own: the QP's refusal names why.
            None => self.send.lock().post_recv(wrs),
        }
    }

    /// Takes the send lock and holds it while the [`SendLock`] lives: for
    /// a send session ([`SendLock::start_send`], [`SendLock::start_wr`]) or
    /// several posts without another thread's in between. Other threads'
    /// sends (and modifies) wait meanwhile; receives do not. Taking it
    /// again on the same thread while holding it never returns.
    #[inline]
    pub fn lock_send(&self) -> SendLock<'_> {
        SendLock {
            qp: self.send.lock(),
        }
    }

    /// The state after the last successful modify ([`QueuePair::state`]).
    pub fn state(&self) -> QpState {
        self.send.lock().state()
    }

    /// [`QueuePair::modify`] (`ibv_modify_qp`), under the send lock.
    #[doc(alias = "ibv_modify_qp")]
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        self.send.lock().modify(attr, mask)
    }

    /// [`QueuePair::modify_to`], under the send lock.
    pub fn modify_to(&self, attr: &QpAttr) -> Result<()> {
        self.send.lock().modify_to(attr)
    }

    /// [`QueuePair::query`] (`ibv_query_qp`), under the send lock.
    #[doc(alias = "ibv_query_qp")]
    pub fn query(&self, mask: QpAttrMask) -> Result<(QpAttr, QpInitInfo)> {
        self.send.lock().query(mask)
    }

    /// A handle that acknowledges the QP's deferred async events from any
    /// thread ([`QueuePair::event_acks`]).
    pub fn event_acks(&self) -> crate::EventAcks {
        self.send.lock().event_acks()
    }

    /// The [`QueuePair`] back, posting with `&mut self` again, its receive
    /// queue rejoined (restarted if the QP was reset since its last post).
    pub fn into_inner(self) -> QueuePair {
        let mut qp = self.send.into_inner();
        if let Some(rq) = self.recv {
            qp.join_recv(rq.into_inner());
        }
        qp
    }

    /// Destroys the QP, like [`QueuePair::destroy`] (`ibv_destroy_qp`); on
    /// any failure the
    /// shared QP comes back in the error, unchanged.
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(QueuePair::destroy)
    }

    /// [`QueuePair::try_destroy`]: `EAGAIN` instead of waiting for events
    /// other threads hold.
    pub fn try_destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(QueuePair::try_destroy)
    }

    /// [`QueuePair::destroy_awaiting_acks`].
    pub fn destroy_awaiting_acks(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(QueuePair::destroy_awaiting_acks)
    }

    fn destroy_with(
        self,
        destroy: fn(QueuePair) -> Result<(), DestroyError<QueuePair>>,
    ) -> Result<(), DestroyError<Self>> {
        let SharedQueuePair {
            send,
            recv,
            qp_num,
            handle,
            qp_type,
            cap,
            context,
        } = self;
        // The receive queue stays out of the QP: a refused destroy gives
        // back the shared QP as it was, a successful one drops it after the
        // kernel QP is gone.
        match destroy(send.into_inner()) {
            Ok(()) => Ok(()),
            Err(e) => {
                let (qp, error) = e.into_parts();
                let again = SharedQueuePair {
                    send: SpinLock::new(qp),
                    recv,
                    qp_num,
                    handle,
                    qp_type,
                    cap,
                    context,
                };
                Err(DestroyError::new(again, error))
            }
        }
    }
}

/// The send lock of a [`SharedQueuePair`], held until this drops
/// ([`SharedQueuePair::lock_send`]). Reads of the QP ([`QueuePair`]'s
/// `&self` methods) go through it too.
pub struct SendLock<'a> {
    qp: SpinGuard<'a, QueuePair>,
}

impl std::fmt::Debug for SendLock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendLock")
            .field("qp_num", &self.qp.qp_num())
            .finish_non_exhaustive()
    }
}

impl SendLock<'_> {
    /// [`QueuePair::post_send`] (`ibv_post_send`), the lock already held.
    #[doc(alias = "ibv_post_send")]
    #[inline]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        self.qp.post_send(wrs)
    }

    /// [`QueuePair::start_send`]: a send batch, rung with one doorbell by
    /// [`SendBatch::complete`] (`ibv_wr_start`).
    #[doc(alias = "ibv_wr_start")]
    #[inline(always)]
    pub fn start_send(&mut self) -> Result<SendBatch<'_>, PostError> {
        self.qp.start_send()
    }

    /// [`QueuePair::start_wr`]: a typed send session ([`WrSession`],
    /// `ibv_wr_start` on an `ibv_qp_ex`).
    #[doc(alias = "ibv_wr_start")]
    #[inline(always)]
    pub fn start_wr<K: qp_ex::QpKind, P: qp_ex::ProviderKind>(
        &mut self,
    ) -> Result<WrSession<'_, K, P>, PostError> {
        self.qp.start_wr::<K, P>()
    }
}

impl Deref for SendLock<'_> {
    type Target = QueuePair;

    fn deref(&self) -> &QueuePair {
        &self.qp
    }
}
