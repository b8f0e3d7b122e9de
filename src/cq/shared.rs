//! [`SharedCompletionQueue`]: a completion queue several threads poll.

use std::ops::Deref;

use crate::{
    cq_ex::CqPoll,
    error::{DestroyError, Result},
    spin_lock::{SpinGuard, SpinLock},
    wc::WorkCompletion,
};

use super::CompletionQueue;

/// A completion queue several threads poll: [`SharedCompletionQueue`]
/// ([`CompletionQueue::into_shared`]).
///
/// [`CompletionQueue::poll`] takes `&mut self` and no lock. libibverbs lets
/// any thread poll any CQ, the provider taking the CQ's lock around each
/// poll (rdma-core `providers/mlx5/cq.c`: `mlx5_spin_lock(&cq->lock)` in
/// `poll_cq`; rxe `cq->lock`). [`SharedCompletionQueue`] is that form,
/// opted into: `Send + Sync`, [`SharedCompletionQueue::poll`] with `&self`
/// under one spinlock (`src/spin_lock.rs`), each completion taken by
/// exactly one poller. [`SharedCompletionQueue::lock`] holds the lock for
/// an extended polling session ([`CqLock::start_poll`]) or for anything
/// else of the CQ's (a [`CqLock`] reads as a `&CompletionQueue`, e.g. for
/// [`QpInitAttr`](crate::QpInitAttr) while creating a QP). Arming and the
/// event acknowledgements take the lock too. See
/// [`SharedQueuePair`](crate::SharedQueuePair) for the QP.
#[derive(Debug)]
pub struct SharedCompletionQueue {
    cq: SpinLock<CompletionQueue>,
    handle: u32,
    context: u64,
}

impl CompletionQueue {
    /// This CQ in the form several threads poll with `&self`, under one
    /// lock ([`SharedCompletionQueue`];
    /// [`SharedCompletionQueue::into_inner`] gives it back).
    pub fn into_shared(self) -> SharedCompletionQueue {
        SharedCompletionQueue {
            handle: self.handle(),
            context: self.context(),
            cq: SpinLock::new(self),
        }
    }
}

impl SharedCompletionQueue {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The value given as [`CqOptions::context`](crate::CqOptions::context).
    pub fn context(&self) -> u64 {
        self.context
    }

    /// The number of completions the CQ holds ([`CompletionQueue::cqe`]).
    pub fn cqe(&self) -> u32 {
        self.cq.lock().cqe()
    }

    /// Polls up to `out.len()` completions under the CQ's lock, like
    /// `ibv_poll_cq` ([`CompletionQueue::poll`]); returns how many were
    /// written. Each completion goes to exactly one poller.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll(&self, out: &mut [WorkCompletion]) -> usize {
        self.cq.lock().poll(out)
    }

    /// Takes the CQ's lock and holds it while the [`CqLock`] lives. Other
    /// threads' polls wait meanwhile; taking it again on the same thread
    /// while holding it never returns.
    #[inline]
    pub fn lock(&self) -> CqLock<'_> {
        CqLock { cq: self.cq.lock() }
    }

    /// Arms the CQ ([`CompletionQueue::req_notify`], `ibv_req_notify_cq`),
    /// under the lock.
    #[doc(alias = "ibv_req_notify_cq")]
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        self.cq.lock().req_notify(solicited_only)
    }

    /// [`CompletionQueue::ack_events`] (`ibv_ack_cq_events`), under the
    /// lock.
    #[doc(alias = "ibv_ack_cq_events")]
    pub fn ack_events(&self, n: u32) -> Result<()> {
        self.cq.lock().ack_events(n)
    }

    /// A handle that acknowledges the CQ's deferred events from any thread
    /// ([`CompletionQueue::event_acks`]).
    pub fn event_acks(&self) -> crate::EventAcks {
        self.cq.lock().event_acks()
    }

    /// The [`CompletionQueue`] back, polling with `&mut self` again.
    pub fn into_inner(self) -> CompletionQueue {
        self.cq.into_inner()
    }

    /// Destroys the CQ, like [`CompletionQueue::destroy`] (`ibv_destroy_cq`;
    /// `EBUSY` while QPs use it); on any failure the shared CQ comes back in the error,
    /// unchanged.
    #[doc(alias = "ibv_destroy_cq")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(CompletionQueue::destroy)
    }

    /// [`CompletionQueue::try_destroy`]: `EAGAIN` instead of waiting for
    /// events other threads hold.
    pub fn try_destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(CompletionQueue::try_destroy)
    }

    /// [`CompletionQueue::destroy_awaiting_acks`].
    pub fn destroy_awaiting_acks(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(CompletionQueue::destroy_awaiting_acks)
    }

    fn destroy_with(
        self,
        destroy: fn(CompletionQueue) -> Result<(), DestroyError<CompletionQueue>>,
    ) -> Result<(), DestroyError<Self>> {
        destroy(self.cq.into_inner()).map_err(|e| {
            let (cq, error) = e.into_parts();
            DestroyError::new(cq.into_shared(), error)
        })
    }
}

/// The lock of a [`SharedCompletionQueue`], held until this drops
/// ([`SharedCompletionQueue::lock`]); reads as a `&CompletionQueue`.
pub struct CqLock<'a> {
    cq: SpinGuard<'a, CompletionQueue>,
}

impl std::fmt::Debug for CqLock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqLock")
            .field("handle", &self.cq.handle())
            .finish_non_exhaustive()
    }
}

impl CqLock<'_> {
    /// [`CompletionQueue::poll`] (`ibv_poll_cq`), the lock already held.
    #[doc(alias = "ibv_poll_cq")]
    #[inline]
    pub fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        self.cq.poll(out)
    }

    /// [`CompletionQueue::start_poll`]: an extended polling session
    /// (`ibv_start_poll`), the lock held for its life.
    #[doc(alias = "ibv_start_poll")]
    #[inline]
    pub fn start_poll(&mut self) -> Option<CqPoll<'_>> {
        self.cq.start_poll()
    }

    /// [`CompletionQueue::resize`] (`ibv_resize_cq`).
    #[doc(alias = "ibv_resize_cq")]
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        self.cq.resize(cqe)
    }
}

impl Deref for CqLock<'_> {
    type Target = CompletionQueue;

    fn deref(&self) -> &CompletionQueue {
        &self.cq
    }
}
