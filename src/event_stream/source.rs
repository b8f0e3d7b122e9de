//! The event fds an [`EventStream`](super::EventStream) can wait on.

use std::os::fd::{AsFd, BorrowedFd};

#[cfg(feature = "cm")]
use crate::cm::{CmEvent, EventChannel};
// The public DevX event channel, as any program uses it.
#[cfg(feature = "devx")]
use crate::mlx5::{DevxEvent, DevxEventChannel};
use crate::{error::Result, AsyncEvent, CompletionChannel, Context, CqEvent};

mod sealed {
    pub trait Sealed {}
}

/// An event fd of the crate and its non-blocking get: [`CompletionChannel`]
/// ([`CqEvent`]), [`Context`] (its async events, [`AsyncEvent`]),
/// [`cm::EventChannel`](EventChannel) ([`CmEvent`]) and
/// [`mlx5::DevxEventChannel`](DevxEventChannel) ([`DevxEvent`]). Sealed:
/// the acknowledgement rules of [the event rules](crate::events) are the
/// sources' own.
pub trait EventSource: sealed::Sealed {
    /// What one get returns.
    type Event;

    /// What a wait on this source is called in errors.
    #[doc(hidden)]
    const WAIT: &'static str;

    /// What registering this source is called in errors.
    #[doc(hidden)]
    const REGISTER: &'static str;

    /// The fd a reactor watches (readable while an event is queued).
    fn event_fd(&self) -> BorrowedFd<'_>;

    /// The next event if one is queued, `Ok(None)` when the queue is empty:
    /// the source's `try_get_*` method.
    fn try_next_event(&self) -> Result<Option<Self::Event>>;
}

impl sealed::Sealed for CompletionChannel {}
impl EventSource for CompletionChannel {
    type Event = CqEvent;
    const WAIT: &'static str = "await a completion event";
    const REGISTER: &'static str = "register the completion channel with the reactor";

    fn event_fd(&self) -> BorrowedFd<'_> {
        self.as_fd()
    }

    fn try_next_event(&self) -> Result<Option<CqEvent>> {
        self.try_get_event()
    }
}

impl sealed::Sealed for Context {}
impl EventSource for Context {
    type Event = AsyncEvent;
    const WAIT: &'static str = "await an async event";
    const REGISTER: &'static str = "register the async event fd with the reactor";

    fn event_fd(&self) -> BorrowedFd<'_> {
        self.async_fd()
    }

    fn try_next_event(&self) -> Result<Option<AsyncEvent>> {
        self.try_get_async_event()
    }
}

#[cfg(feature = "cm")]
impl sealed::Sealed for EventChannel {}
#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
impl EventSource for EventChannel {
    type Event = CmEvent;
    const WAIT: &'static str = "await an rdma_cm event";
    const REGISTER: &'static str = "register the rdma_cm channel with the reactor";

    fn event_fd(&self) -> BorrowedFd<'_> {
        self.as_fd()
    }

    fn try_next_event(&self) -> Result<Option<CmEvent>> {
        self.try_get_event()
    }
}

#[cfg(feature = "devx")]
impl sealed::Sealed for DevxEventChannel {}
#[cfg(feature = "devx")]
#[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
impl EventSource for DevxEventChannel {
    type Event = DevxEvent;
    const WAIT: &'static str = "await a DevX event";
    const REGISTER: &'static str = "register the DevX event channel with the reactor";

    fn event_fd(&self) -> BorrowedFd<'_> {
        self.as_fd()
    }

    /// `EventsLost` when the kernel dropped events, as the blocking get.
    fn try_next_event(&self) -> Result<Option<DevxEvent>> {
        self.try_get_event()
    }
}
