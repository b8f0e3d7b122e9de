//! Completion channels and completion events (`ibv_create_comp_channel`,
//! `ibv_get_cq_event`, `ibv_ack_cq_events`).
//!
//! A channel is an fd the kernel queues one 8-byte `ib_uverbs_comp_event_desc`
//! on each time an armed CQ attached to it gets a completion
//! (`drivers/infiniband/core/uverbs_main.c`, `ib_uverbs_comp_handler`).
//! [`CompletionChannel::get_event`] is one blocking `read(2)`, as in
//! libibverbs; the first [`CompletionChannel::try_get_event`] or timed get
//! switches the fd to `O_NONBLOCK`, after which one channel serves blocking
//! callers, non-blocking callers and event loops (`AsFd`) at once (see
//! `event_fd`).
//!
//! # Edge-triggered epoll
//!
//! With `EPOLLET`, drain the channel on every wake-up: call `try_get_event`
//! until it returns `Ok(None)`, acknowledge, re-arm each CQ with
//! `req_notify`, then poll each CQ until it is empty. An event can arrive for
//! completions already polled (the CQ was re-armed before the last poll); its
//! poll simply finds nothing.

use std::{
    os::fd::{AsFd, BorrowedFd},
    sync::Arc,
    time::Duration,
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::{Context, ContextInner},
    cq::CqInner,
    error::{Error, ErrorKind, Result},
    event_count::{Held, Lookup, Stream},
    event_fd::{read_record, EventFd, Wait},
    object::Owned,
    sys::WriteCmd,
};

/// The kernel side of a channel; CQs attached to it hold an `Arc`.
#[derive(Debug)]
pub(crate) struct ChannelInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) fd: EventFd,
}

/// A completion channel (`struct ibv_comp_channel`).
///
/// How to get, poll and acknowledge its events (blocking, `O_NONBLOCK`,
/// `EINTR`, edge-triggered `epoll`, acknowledgement by count) is told once
/// for every event fd in [the event rules](crate::events).
#[derive(Debug, Clone)]
pub struct CompletionChannel {
    pub(crate) inner: Arc<ChannelInner>,
}

impl Context {
    /// Creates a completion channel, like `ibv_create_comp_channel` (the
    /// `CREATE_COMP_CHANNEL` write command: 6.1 has no ioctl for it).
    #[doc(alias = "ibv_create_comp_channel")]
    pub fn create_comp_channel(&self) -> Result<CompletionChannel> {
        let op = "IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL";
        let ctx = &self.inner;
        let req = abi::IbUverbsCreateCompChannel::new_zeroed();
        let mut resp = abi::IbUverbsCreateCompChannelResp::new_zeroed();
        let mut cmd = WriteCmd {
            command: abi::IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL,
            core_in: req.as_bytes(),
            core_out: resp.as_mut_bytes(),
            fd_at: Some(std::mem::offset_of!(abi::IbUverbsCreateCompChannelResp, fd)),
            ..WriteCmd::default()
        };
        ctx.write_cmd(&mut cmd).map_err(|e| Error::sys(op, e))?;
        let fd = cmd.new_fd.take().ok_or_else(|| {
            Error::new(
                op,
                ErrorKind::Malformed,
                "the kernel returned no channel fd",
            )
        })?;
        Ok(CompletionChannel {
            inner: Arc::new(ChannelInner {
                ctx: ctx.clone(),
                fd: EventFd::new(ctx.kernel.clone(), fd, "completion channel"),
            }),
        })
    }
}

/// The channel's fd, to `poll`/`epoll` for readiness before
/// [`CompletionChannel::try_get_event`] (see [the event
/// rules](crate::events)).
///
/// Never `read` it yourself: a record read that way is an event the kernel
/// counts as delivered and the library never sees, so nobody can
/// acknowledge it. An explicit `destroy()` of its CQ then waits for it
/// forever (as `ibv_destroy_cq` does for an event never acknowledged);
/// `try_destroy()` and dropping the CQ do not wait.
impl AsFd for CompletionChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}

impl CompletionChannel {
    /// Waits for the next completion event, like `ibv_get_cq_event`.
    ///
    /// On a channel the program made `O_NONBLOCK`, returns a
    /// [`WouldBlock`](crate::ErrorKind::WouldBlock) error at once when
    /// nothing is queued; a signal handler interrupts it with
    /// [`Interrupted`](crate::ErrorKind::Interrupted) (see [the event
    /// rules](crate::events)).
    #[doc(alias = "ibv_get_cq_event")]
    pub fn get_event(&self) -> Result<CqEvent> {
        self.inner.fd.next_forever(
            "read completion event",
            read_record::<abi::IbUverbsCompEventDesc>,
            |desc| self.deliver(desc.cq_handle),
        )
    }

    /// Waits for the next completion event and leaves it unacknowledged,
    /// counted by its CQ: what `ibv_get_cq_event` does, and the same as
    /// `get_event()` followed by [`CqEvent::defer_ack`] in one step, without
    /// the event value (no claim on the CQ is taken and released).
    /// Acknowledge by count with
    /// [`CompletionQueue::ack_events`](crate::CompletionQueue::ack_events),
    /// from any thread, before the CQ's `destroy()` (which fails with
    /// `EBUSY` while such counts are unacknowledged).
    ///
    /// Errors as [`CompletionChannel::get_event`].
    #[doc(alias = "ibv_get_cq_event")]
    pub fn get_event_deferred(&self) -> Result<DeferredCqEvent> {
        self.inner.fd.next_forever(
            "read completion event",
            read_record::<abi::IbUverbsCompEventDesc>,
            |desc| self.deliver_deferred(desc.cq_handle),
        )
    }

    /// The next completion event if one is queued; `Ok(None)` when the
    /// channel is empty ("would block").
    pub fn try_get_event(&self) -> Result<Option<CqEvent>> {
        self.read(Wait::Never)
    }

    /// Waits at most `timeout` (`None`: forever) for the next event.
    pub fn get_event_timeout(&self, timeout: Option<Duration>) -> Result<Option<CqEvent>> {
        self.read(Wait::timeout(timeout))
    }

    fn read(&self, wait: Wait) -> Result<Option<CqEvent>> {
        self.inner.fd.next(
            wait,
            "read completion event",
            read_record::<abi::IbUverbsCompEventDesc>,
            |desc| self.deliver(desc.cq_handle),
        )
    }

    /// Counts a read event as deferred by its CQ
    /// ([`CompletionChannel::get_event_deferred`]), or acknowledges it at
    /// once when its CQ is already being destroyed.
    #[inline]
    fn deliver_deferred(&self, user_handle: u64) -> Option<DeferredCqEvent> {
        let d = self
            .inner
            .ctx
            .events
            .deliver_deferred::<Owned<CqInner>>(user_handle, Stream::Completion)?;
        Some(DeferredCqEvent {
            cq: d.object,
            cq_handle: d.facts.handle,
            cq_context: d.facts.context,
        })
    }

    /// Turns a read event into a [`CqEvent`], or acknowledges it at once when
    /// its CQ is already being destroyed.
    #[inline]
    fn deliver(&self, user_handle: u64) -> Option<CqEvent> {
        let events = &self.inner.ctx.events;
        match events.lookup::<Owned<CqInner>>(user_handle, Stream::Completion) {
            Lookup::Live(held) => Some(CqEvent {
                held,
                _not_send: std::marker::PhantomData,
            }),
            Lookup::Detached(counts) => {
                events.ack_detached(user_handle, &counts, Stream::Completion);
                None
            }
            // Not a CQ of this context: the kernel never does this.
            Lookup::Unknown => None,
        }
    }
}

/// A completion event read by [`CompletionChannel::get_event_deferred`]
/// and counted, unacknowledged, by its CQ: which CQ fired, as
/// `ibv_get_cq_event` reports it. It is a plain value (no claim on the CQ):
/// the count is acknowledged with
/// [`CompletionQueue::ack_events`](crate::CompletionQueue::ack_events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeferredCqEvent {
    /// The address of the CQ's shared state, to tell CQs apart (a CQ with
    /// unacknowledged counts cannot be destroyed, so it stays put while
    /// they are).
    cq: usize,
    cq_handle: u32,
    cq_context: u64,
}

impl DeferredCqEvent {
    /// The kernel handle of the CQ that fired (compare with
    /// [`crate::CompletionQueue::handle`]).
    pub fn cq_handle(&self) -> u32 {
        self.cq_handle
    }

    /// The [`crate::CqOptions::context`] of the CQ that fired, as
    /// `ibv_get_cq_event` returns `cq_context`.
    pub fn cq_context(&self) -> u64 {
        self.cq_context
    }

    /// Whether the event is for `cq`.
    pub fn is_for(&self, cq: &crate::CompletionQueue) -> bool {
        self.cq == Arc::as_ptr(&cq.inner) as usize
    }
}

/// One completion event (`ibv_get_cq_event`'s result).
///
/// It keeps its CQ alive and is acknowledged in one of two ways:
///
/// - **as a value**: when dropped (or explicitly with [`CqEvent::ack`], or
///   many at once with [`ack_cq_events`]). It is not `Send`: the thread that
///   received it acknowledges it, and a destroy of its CQ from that thread
///   fails with `EBUSY` instead of waiting on itself, while a destroy on
///   another thread waits for it;
/// - **by count**, as C programs do: [`CqEvent::defer_ack`] leaves it
///   unacknowledged, counted by its CQ, and
///   [`CompletionQueue::ack_events`](crate::CompletionQueue::ack_events)
///   acknowledges a number of them later, from any thread (the pattern of
///   `ibv_rc_pingpong -e`, which counts its events and acknowledges them
///   all before it destroys the CQ).
#[derive(Debug)]
#[must_use = "an event is acknowledged when dropped; inspect it first"]
pub struct CqEvent {
    held: Held<Owned<CqInner>>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl CqEvent {
    fn cq(&self) -> &Arc<Owned<CqInner>> {
        self.held.object()
    }

    /// The kernel handle of the CQ that fired (compare with
    /// [`crate::CompletionQueue::handle`]).
    pub fn cq_handle(&self) -> u32 {
        self.cq().handle
    }

    /// The [`crate::CqOptions::context`] of the CQ that fired, as
    /// `ibv_get_cq_event` returns `cq_context`.
    pub fn cq_context(&self) -> u64 {
        self.cq().context
    }

    /// Whether the event is for `cq`.
    pub fn is_for(&self, cq: &crate::CompletionQueue) -> bool {
        Arc::ptr_eq(self.cq(), &cq.inner)
    }

    /// Acknowledges the event, like `ibv_ack_cq_events(cq, 1)`.
    #[doc(alias = "ibv_ack_cq_events")]
    pub fn ack(self) {
        drop(self);
    }

    /// Leaves the event unacknowledged, counted by its CQ, for a later
    /// [`CompletionQueue::ack_events`](crate::CompletionQueue::ack_events)
    /// from any thread: what a C program does between `ibv_get_cq_event`
    /// and `ibv_ack_cq_events(cq, n)`. The CQ's destroy fails with `EBUSY`
    /// while such counts are unacknowledged (nobody else could acknowledge
    /// them once the destroy owns the CQ).
    pub fn defer_ack(self) {
        self.held.defer();
    }
}

/// Acknowledges a batch of events, like `ibv_ack_cq_events(cq, n)`: one
/// lock of each CQ's counts for all its events in the batch (the events may
/// come from several CQs), whether or not a destroy is waiting.
#[doc(alias = "ibv_ack_cq_events")]
pub fn ack_cq_events(events: impl IntoIterator<Item = CqEvent>) {
    let mut pending: Vec<CqEvent> = events.into_iter().collect();
    pending.sort_by_key(|e| Arc::as_ptr(e.cq()) as usize);
    let mut rest = &mut pending[..];
    while let Some(first) = rest.first() {
        let cq = Arc::as_ptr(first.cq());
        let n = rest
            .iter()
            .take_while(|e| std::ptr::eq(Arc::as_ptr(e.cq()), cq))
            .count();
        let (group, tail) = rest.split_at_mut(n);
        let mut claims: Vec<&mut Held<Owned<CqInner>>> =
            group.iter_mut().map(|e| &mut e.held).collect();
        Held::ack_batch(&mut claims);
        rest = tail;
    }
}

#[cfg(test)]
mod tests {
    use zerocopy::FromBytes;

    use super::*;

    #[test]
    fn the_event_record_is_eight_bytes() {
        assert_eq!(size_of::<abi::IbUverbsCompEventDesc>(), 8);
        let d = abi::IbUverbsCompEventDesc::read_from_bytes(&7u64.to_ne_bytes()).unwrap();
        assert_eq!(d.cq_handle, 7);
    }
}
