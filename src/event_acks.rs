//! Acknowledging an object's deferred events from anywhere, also while its
//! destroy waits for them: libibverbs' model, in which `ibv_ack_cq_events`
//! and `ibv_ack_async_event` reach the object through a pointer any thread
//! holds, and `ibv_destroy_*` sends its command and then waits for the
//! acknowledgements the kernel's counts call for.
//!
//! An [`EventAcks`] is that pointer's share of the object: its event counts
//! alone, not the object, so holding one keeps nothing of the device alive
//! and never blocks a destroy. The destroys that wait for it are
//! [`CompletionQueue::destroy_awaiting_acks`],
//! [`QueuePair::destroy_awaiting_acks`] and
//! [`SharedReceiveQueue::destroy_awaiting_acks`]
//! (`tests/destroy_awaiting_acks_fake.rs` shows them on the fake kernel).
//!
//! [`CompletionQueue::destroy_awaiting_acks`]: crate::CompletionQueue::destroy_awaiting_acks
//! [`QueuePair::destroy_awaiting_acks`]: crate::QueuePair::destroy_awaiting_acks
//! [`SharedReceiveQueue::destroy_awaiting_acks`]: crate::SharedReceiveQueue::destroy_awaiting_acks

use std::sync::Arc;

use crate::event_count::{ack_deferred, EventCounts, Stream};

/// Acknowledges by count the events of one CQ, QP or SRQ deferred with
/// `defer_ack` ([`CqEvent::defer_ack`](crate::CqEvent::defer_ack),
/// [`AsyncEvent::defer_ack`](crate::AsyncEvent::defer_ack)), from any thread,
/// before and during the object's `destroy_awaiting_acks` (see the module).
/// Made by the object's `event_acks()`; clones share the counts. After the
/// destroy there is nothing left to acknowledge: every call then fails with
/// `InvalidArgument`.
#[derive(Debug, Clone)]
pub struct EventAcks {
    counts: Arc<EventCounts>,
}

impl EventAcks {
    pub(crate) fn new(counts: &Arc<EventCounts>) -> Self {
        EventAcks {
            counts: counts.clone(),
        }
    }

    /// Acknowledges `n` deferred completion events (a CQ's), like
    /// `ibv_ack_cq_events(cq, n)`. `InvalidArgument` (and nothing
    /// acknowledged) when fewer than `n` are deferred.
    #[doc(alias = "ibv_ack_cq_events")]
    pub fn ack_events(&self, n: u32) -> crate::Result<()> {
        ack_deferred(&self.counts, Stream::Completion, n, "ibv_ack_cq_events")
    }

    /// Acknowledges `n` deferred async events, as `ibv_ack_async_event`
    /// does one. `InvalidArgument` (and nothing acknowledged) when fewer
    /// than `n` are deferred.
    #[doc(alias = "ibv_ack_async_event")]
    pub fn ack_async_events(&self, n: u32) -> crate::Result<()> {
        ack_deferred(&self.counts, Stream::Async, n, "ibv_ack_async_event")
    }
}
