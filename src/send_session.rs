//! A QP's send session: work requests written one at a time and rung with
//! one doorbell, like rdma-core's `ibv_wr_start` / `ibv_wr_*` /
//! `ibv_wr_complete` / `ibv_wr_abort` (the `ibv_qp_ex` API).
//!
//! # One session, its cursor in the send queue
//!
//! A QP has one send session at a time, and the session's **cursor** (where
//! the next WQE goes, what is written and not yet handed over, where the
//! session began) lives in the provider's send queue, as libmlx5 keeps
//! `cur_post`/`nreq` in its `mlx5_qp` and rdma-core's rxe its producer index
//! in its QP: mlx5's `SqState::open` next to what the device was given,
//! rxe's ring producer index as we keep it and the session's mark. Nothing
//! of an open session is visible to the device or the kernel (mlx5: the
//! doorbell record is not advanced; rxe: the ring's producer index is not
//! stored) until it completes, so aborting takes every request back.
//!
//! The session is reached three ways, all writing the same WQEs with the
//! same code (the provider's `push_send`):
//!
//! - **Non-borrowing calls** on the QP: [`QueuePair::begin_send`],
//!   [`QueuePair::push_send`], [`QueuePair::complete_send`],
//!   [`QueuePair::abort_send`]. Each is a call of its own that borrows the
//!   QP only for itself, so a caller whose requests arrive as separate calls
//!   (the C library's `ibv_wr_*`, a request per C call) writes each request
//!   into the queue when it is made. While such a session is open,
//!   [`QueuePair::post_send`] is refused (`PostErrorKind::BadState`: the
//!   queue's next WQEs are the session's), and starting a session again
//!   (any of the three ways) aborts it first, as a thread that calls
//!   `ibv_wr_start` inside its own session starts over.
//! - **[`SendBatch`]**, an untyped view ([`QueuePair::start_send`]): a
//!   session begun and held for as long as the view borrows the QP, each
//!   request a [`SendWr`] checked as `post_send` checks it.
//! - **[`crate::WrSession`]**, the typed view ([`QueuePair::start_wr`],
//!   `crate::qp_ex`): the QP's type and provider checked once, per request
//!   only what its values decide, the provider's queue held without a
//!   dispatch.
//!
//! A view borrows the QP mutably for its whole life, so nothing else can
//! reach the queue meanwhile; it may therefore hold the cursor in itself
//! (mlx5's view does, so that over requests written in one function the
//! cursor and what writing needs stay in registers: `benches/callgrind.sh
//! --mlx5`), putting it back when it ends. The non-borrowing calls take
//! the cursor out of the queue and put it back in each call (a view made
//! and suspended inside the call).
//!
//! Until complete, nothing is visible to the device, so aborting (or
//! dropping a view) takes every request back and none executes. A view
//! passed to `mem::forget` is not completed either; what becomes of its
//! requests depends on the provider (mlx5: the next post writes over them
//! and they never execute; rxe: they stay in the ring and go with the next
//! doorbell). Either way nothing unsound happens.
//!
//! Differences from rdma-core: a request is one [`SendWr`] instead of an
//! opcode call followed by setter calls (the C library gathers a builder
//! and its setters into one, `capi/src/qp_ex/`), and a bad request is
//! refused by its own push instead of failing (and rolling back) the whole
//! session at `ibv_wr_complete`. No create flag is needed: every QP takes
//! sessions.
//!
//! A `push` whose [`SendWr`] is built at the call site is inlined there with
//! its opcode and payload kind known, so the checks and the WQE layout of
//! other opcodes fold away (`benches/mlx5.sh` measures it beside
//! `post_send`).
//!
//! # A modify during a non-borrowing session
//!
//! A view holds the QP mutably, so no modify happens during it. Between
//! non-borrowing calls one may (`modify` takes `&self`): each call compares
//! the QP's gate word with the one the session began with (one load and
//! one comparison). A modify that did not reset the QP leaves the session
//! as it was (a QP that sends keeps sending until a reset). A reset
//! restarts the queues, which drops the session: the call fails with
//! `PostErrorKind::BadState` and the session is closed, none of its
//! requests posted.

use crate::{
    providers::AnySendSession,
    qp::{Posting, QueuePair, GATE_NEVER},
    wr::{PostError, PostErrorKind, SendWr},
};

/// A send session opened by [`QueuePair::begin_send`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenSend {
    /// Requests pushed so far.
    pushed: usize,
    /// The gate word when the session began (or when a call last found a
    /// modify that did not reset the QP).
    gate: u64,
}

/// The refusal of a non-borrowing call with no session open.
#[cold]
fn not_open() -> PostError {
    PostError {
        index: 0,
        kind: PostErrorKind::BadState("no send session is open on the QP (begin_send first)"),
    }
}

impl QueuePair {
    /// Opens the QP's send session, like `ibv_wr_start`: requests then go
    /// in one at a time with [`QueuePair::push_send`] and are handed over
    /// with one doorbell by [`QueuePair::complete_send`] (or taken back by
    /// [`QueuePair::abort_send`]). Unlike [`QueuePair::start_send`] this
    /// borrows the QP only for the call: between the calls the QP is free
    /// for others (a modify, a query), which suits requests that arrive as
    /// separate calls. A session already open is aborted first (none of its
    /// requests is posted). Needs the QP in a state that sends, as
    /// [`QueuePair::post_send`] does. See [the module](crate::send_session).
    #[doc(alias = "ibv_wr_start")]
    pub fn begin_send(&mut self) -> Result<(), PostError> {
        self.pass_gate(Posting::Session)?;
        self.queues.begin_send();
        self.send_open = Some(OpenSend {
            pushed: 0,
            gate: self.gate_passed,
        });
        self.gate_passed = GATE_NEVER;
        Ok(())
    }

    /// Writes one request into the open send session, after the checks
    /// [`QueuePair::post_send`] makes (opcode for the QP type, SGE count,
    /// inline size, destination, room in the queue); not yet visible to
    /// the device or kernel. On an error nothing of this request is queued
    /// and [`PostError::index`] is its position in the session; the
    /// requests pushed before stay, to be completed or aborted. No system
    /// call, no allocation.
    ///
    /// Inlined: a caller that builds its request with a constant operation
    /// (a `match` on it, one push per arm) gets a push with the other
    /// operations' checks and WQE layouts folded away (the C library's
    /// `ibv_wr_*` setters do).
    #[inline(always)]
    pub fn push_send(&mut self, wr: &SendWr<'_>) -> Result<(), PostError> {
        let open = self.open_session()?;
        let dev = self.inner.ctx.device();
        let r = self.queues.push_send_open(dev, wr);
        self.count_push(open, r)
    }

    /// Requests pushed into the open send session, `None` when none is
    /// open.
    pub fn send_pending(&self) -> Option<usize> {
        self.send_open.map(|o| o.pushed)
    }

    /// Ends the open send session, like `ibv_wr_complete`: its requests are
    /// handed to the device or kernel with one doorbell (none for an empty
    /// session). On rxe the doorbell is a system call; should it fail, the
    /// requests are in the queue and [`PostError::index`] is how many there
    /// are, as for a failed doorbell of `post_send`. The session is closed
    /// whatever the outcome; `BadState` if none was open.
    #[doc(alias = "ibv_wr_complete")]
    pub fn complete_send(&mut self) -> Result<(), PostError> {
        let open = self.open_session()?;
        self.send_open = None;
        self.gate_passed = open.gate;
        let dev = self.inner.ctx.device();
        self.queues.resume_send(dev).complete(open.pushed)
    }

    /// Ends the open send session, like `ibv_wr_abort`: none of its
    /// requests executes, and the queue is as before
    /// [`QueuePair::begin_send`]. Nothing if no session is open.
    #[doc(alias = "ibv_wr_abort")]
    pub fn abort_send(&mut self) {
        if let Some(open) = self.send_open.take() {
            self.gate_passed = open.gate;
            let dev = self.inner.ctx.device();
            self.queues.resume_send(dev).abort();
        }
    }

    /// Runs `push` on a view of the open session and counts the request
    /// it took: a non-borrowing push of another kind of request than a
    /// [`SendWr`] (mlx5's raw WQEs).
    #[inline]
    #[cfg_attr(not(feature = "mlx5"), allow(dead_code))] // used by mlx5 only
    pub(crate) fn push_open_with(
        &mut self,
        push: impl FnOnce(&mut AnySendSession<'_>) -> Result<(), PostErrorKind>,
    ) -> Result<(), PostError> {
        let open = self.open_session()?;
        let dev = self.inner.ctx.device();
        let mut s = self.queues.resume_send(dev);
        let r = push(&mut s);
        s.suspend();
        self.count_push(open, r)
    }

    /// Counts a request the open session took, or names the refused one
    /// by its position in the session.
    #[inline(always)]
    fn count_push(
        &mut self,
        open: OpenSend,
        r: Result<(), PostErrorKind>,
    ) -> Result<(), PostError> {
        match r {
            Ok(()) => {
                self.send_open = Some(OpenSend {
                    pushed: open.pushed + 1,
                    ..open
                });
                Ok(())
            }
            Err(kind) => Err(PostError {
                index: open.pushed,
                kind,
            }),
        }
    }

    /// The open session, after checking that no modify reset the QP since
    /// it began (one load and one comparison while none happened).
    #[inline(always)]
    fn open_session(&mut self) -> Result<OpenSend, PostError> {
        let gate = self.gate.load(std::sync::atomic::Ordering::Acquire);
        match self.send_open {
            Some(open) if open.gate == gate => Ok(open),
            _ => self.session_gate_moved(gate),
        }
    }

    /// [`QueuePair::open_session`] when no session is open or a modify
    /// happened since it began: one that reset the QP drops the session
    /// (the queues restart at the next post or session); any other leaves
    /// it, the QP still sending (only a reset leaves the sending states).
    #[cold]
    #[inline(never)]
    fn session_gate_moved(&mut self, gate: u64) -> Result<OpenSend, PostError> {
        let Some(mut open) = self.send_open else {
            return Err(not_open());
        };
        if gate >> 8 != self.resets_seen {
            self.abort_send();
            self.gate_passed = GATE_NEVER;
            return Err(PostError {
                index: open.pushed,
                kind: PostErrorKind::BadState(
                    "the QP was reset during the send session: its requests were dropped",
                ),
            });
        }
        open.gate = gate;
        self.send_open = Some(open);
        Ok(open)
    }

    /// [`QueuePair::cross_gate`] while a non-borrowing session is open, for
    /// a session start (which aborts it) or receives (which pass, aborting
    /// it first if the QP was reset since it began, as the queues then
    /// restart); `post_send` is refused in `cross_gate` itself.
    #[cold]
    #[inline(never)]
    pub(crate) fn cross_gate_in_session(
        &mut self,
        gate: u64,
        posting: Posting,
    ) -> Result<(), PostError> {
        if posting == Posting::Receives && gate >> 8 == self.resets_seen {
            // No reset since the session began: the QP is in a sending
            // state, which takes receives.
            return Ok(());
        }
        self.abort_send();
        self.pass_gate(posting)
    }
}

/// Send work requests being written to one QP, rung with one doorbell by
/// [`SendBatch::complete`]: an untyped view of the QP's send session (see
/// [the module](crate::send_session)). Made by [`QueuePair::start_send`];
/// it borrows the QP, so nothing else posts to it meanwhile.
///
/// Dropping the batch without `complete` aborts it: none of its requests is
/// executed. A batch passed to `mem::forget` is not completed either; what
/// becomes of its requests depends on the provider (mlx5: the next post
/// writes over them and they never execute; rxe: they stay in the ring
/// and go with the next doorbell). Either way nothing unsound happens.
#[derive(Debug)]
#[must_use = "a send batch posts nothing until complete() is called"]
pub struct SendBatch<'q> {
    session: AnySendSession<'q>,
    /// Requests pushed so far.
    pushed: usize,
    /// Completed or aborted (nothing left for `Drop` to do).
    closed: bool,
}

impl<'q> SendBatch<'q> {
    /// A view of a session its provider has begun.
    #[inline(always)]
    pub(crate) fn new(session: AnySendSession<'q>) -> Self {
        SendBatch {
            session,
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
        match self.session.push(wr) {
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
        self.session.complete(self.pushed)
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
            self.session.abort();
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
