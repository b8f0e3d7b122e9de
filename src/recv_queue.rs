//! A queue pair's receive queue as a handle of its own
//! ([`QueuePair::split_recv`](crate::QueuePair::split_recv)).
//!
//! A [`QueuePair`](crate::QueuePair) owns its send and receive queues and
//! posts to both with `&mut self`, so a program that posts sends on one
//! thread and receives on another would put the QP behind one lock and
//! serialise them. libibverbs' providers lock the two queues apart
//! (rdma-core `providers/mlx5/qp.c` takes `qp->sq.lock` in
//! `mlx5_post_send` and `qp->rq.lock` in `mlx5_post_recv`; rxe
//! `providers/rxe/rxe.c` likewise `qp->sq.lock` and `qp->rq.lock`), so a
//! sender never waits for a receiver. Splitting the receive queue off gives
//! each side its own handle, and each its own `&mut`.
//!
//! The receive queue follows the QP's state through a gate word of its own
//! that the QP's modify updates alongside its own (release, after the
//! provider's state hook, as for the QP's posts): receives are refused in
//! RESET, and after a reset the queue restarts on its next post (mlx5: its
//! producer counter back to 0 in the receive queue's new epoch), as the
//! QP's own post would have restarted it.
//!
//! Its memory is its own (rxe: its mapping of the ring) or shared by
//! reference count with the QP's (mlx5: the QP buffer), so posting after
//! the QP was destroyed writes memory nobody reads, never freed memory; the
//! requests are simply never executed.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use crate::{
    providers::AnyRq,
    qp_attr::QpState,
    wr::{PostError, PostErrorKind, RecvWr},
};

/// A gate word no QP has, so the first post crosses the gate.
const GATE_NEVER: u64 = u64::MAX;

/// The receive queue of a [`QueuePair`](crate::QueuePair), split off with
/// [`QueuePair::split_recv`](crate::QueuePair::split_recv): posts receives
/// with `&mut self`, independently of the QP's sends.
#[derive(Debug)]
pub struct RecvQueue {
    rq: AnyRq,
    /// The QP's state and reset count, as [`QueuePair`](crate::QueuePair)'s
    /// gate word (state in the low byte, resets above), written by the
    /// QP's modify.
    gate: Arc<AtomicU64>,
    /// The gate word the last post passed in a state that receives.
    gate_passed: u64,
    /// The resets the queue was restarted for.
    resets_seen: u64,
    qp_num: u32,
}

impl RecvQueue {
    pub(crate) fn new(rq: AnyRq, gate: Arc<AtomicU64>, resets_seen: u64, qp_num: u32) -> Self {
        RecvQueue {
            rq,
            gate,
            gate_passed: GATE_NEVER,
            resets_seen,
            qp_num,
        }
    }

    /// The queue, its gate word and the resets it was restarted for, to
    /// give it back to its QP ([`crate::SharedQueuePair::into_inner`]).
    pub(crate) fn into_parts(self) -> (AnyRq, Arc<AtomicU64>, u64) {
        (self.rq, self.gate, self.resets_seen)
    }

    /// The QP number of the QP this queue belongs to.
    pub fn qp_num(&self) -> u32 {
        self.qp_num
    }

    /// Posts receive work requests, like `ibv_post_recv` (no system call);
    /// the same rules and errors as
    /// [`QueuePair::post_recv`](crate::QueuePair::post_recv).
    #[doc(alias = "ibv_post_recv")]
    #[inline]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let gate = self.gate.load(Ordering::Acquire);
        if gate != self.gate_passed {
            self.cross_gate(gate)?;
        }
        self.rq.post_recv(wrs)
    }

    /// The gate after a modify, or before the first post: restart the
    /// queue if the QP was reset since it last was, refuse in RESET.
    #[cold]
    fn cross_gate(&mut self, gate: u64) -> Result<(), PostError> {
        let resets = gate >> 8;
        if resets != self.resets_seen {
            self.resets_seen = resets;
            self.rq.restart();
        }
        if QpState::from_raw(gate as u8) == QpState::Reset {
            return Err(PostError {
                index: 0,
                kind: PostErrorKind::BadState("receives cannot be posted in RESET"),
            });
        }
        self.gate_passed = gate;
        Ok(())
    }
}
