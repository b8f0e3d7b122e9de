//! Send batches: work requests written one at a time and rung with one
//! doorbell, like rdma-core's `ibv_wr_start` / `ibv_wr_*` /
//! `ibv_wr_complete` / `ibv_wr_abort` (the `ibv_qp_ex` API).
//!
//! [`QueuePair::post_send`] takes a slice of requests, so a caller that
//! produces requests one by one (from a loop over I/O requests, say) must
//! first gather them. A [`SendBatch`] takes each request as it comes,
//! writes its WQE at once and rings the doorbell for all of them in
//! [`SendBatch::complete`]. Each [`SendBatch::push`] checks its request as
//! `post_send` does and reports a bad one right away, with nothing of it
//! queued; what was pushed before stays in the batch.
//!
//! Until `complete`, nothing of the batch is visible to the device or the
//! kernel (mlx5: the doorbell record is not advanced; rxe: the ring's
//! producer index is not stored), so [`SendBatch::abort`], or dropping the
//! batch, takes every request back and none of them executes.
//!
//! Differences from rdma-core: a request is one [`SendWr`] instead of an
//! opcode call followed by setter calls, and a bad request is refused by its
//! own `push` instead of failing (and rolling back) the whole batch at
//! `ibv_wr_complete`. No create flag is needed: every QP takes batches.
//!
//! A `push` whose [`SendWr`] is built at the call site is inlined there with
//! its opcode and payload kind known, so the checks and the WQE layout of
//! other opcodes fold away (`benches/mlx5.sh` measures it beside
//! `post_send`).

use crate::{
    providers::AnySendBatch,
    wr::{PostError, SendWr},
};

#[cfg(doc)]
use crate::qp::QueuePair;

/// Send work requests being written to one QP, rung with one doorbell by
/// [`SendBatch::complete`]. Made by [`QueuePair::start_send`]; it borrows
/// the QP, so nothing else posts to it meanwhile.
///
/// Dropping the batch without `complete` aborts it: none of its requests is
/// executed. A batch passed to `mem::forget` is not completed either; what
/// becomes of its requests depends on the provider (mlx5: the next post
/// writes over them and they never execute; rxe: they stay in the ring
/// and go with the next doorbell). Either way nothing unsound happens.
#[derive(Debug)]
#[must_use = "a send batch posts nothing until complete() is called"]
pub struct SendBatch<'q> {
    batch: AnySendBatch<'q>,
    /// Requests pushed so far.
    pushed: usize,
    /// Completed or aborted (nothing left for `Drop` to do).
    closed: bool,
}

impl<'q> SendBatch<'q> {
    /// A batch its provider has started.
    #[inline(always)]
    pub(crate) fn new(batch: AnySendBatch<'q>) -> Self {
        SendBatch {
            batch,
            pushed: 0,
            closed: false,
        }
    }

    /// Writes one work request's WQE, after the checks
    /// [`QueuePair::post_send`] makes (opcode for the QP type, SGE count,
    /// inline size, destination, room in the queue). On an error nothing of
    /// this request is queued and [`PostError::index`] is its position in
    /// the batch; the requests pushed before stay, to be completed or
    /// aborted. No system call, no allocation.
    #[inline(always)]
    pub fn push(&mut self, wr: &SendWr<'_>) -> Result<(), PostError> {
        match self.batch.push(wr) {
            Ok(()) => {
                self.pushed += 1;
                Ok(())
            }
            Err(kind) => Err(PostError {
                index: self.pushed,
                kind,
            }),
        }
    }

    /// How many requests the batch holds.
    pub fn len(&self) -> usize {
        self.pushed
    }

    /// Whether the batch holds no request.
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }

    /// Hands the batch's requests to the device or kernel and rings the
    /// doorbell once (none for an empty batch), like `ibv_wr_complete`. On
    /// rxe the doorbell is a system call; should it fail, the requests are
    /// in the queue and [`PostError::index`] is [`SendBatch::len`], as for a
    /// failed doorbell of `post_send`.
    #[doc(alias = "ibv_wr_complete")]
    #[inline(always)]
    pub fn complete(mut self) -> Result<(), PostError> {
        self.closed = true;
        self.batch.complete(self.pushed)
    }

    /// Takes every request of the batch back, like `ibv_wr_abort`: none of
    /// them executes, and the queue is as before [`QueuePair::start_send`].
    #[doc(alias = "ibv_wr_abort")]
    pub fn abort(mut self) {
        self.close_aborted();
    }

    fn close_aborted(&mut self) {
        if !self.closed {
            self.closed = true;
            self.batch.abort();
        }
    }
}

impl Drop for SendBatch<'_> {
    fn drop(&mut self) {
        self.close_aborted();
    }
}

// A batch may be held across an `.await` in a `Send` future (its mlx5 form
// holds a view of the queue memory, which is `Send` as `&Units` is).
const _: fn() = || {
    fn send<T: Send>() {}
    send::<SendBatch<'static>>();
};
