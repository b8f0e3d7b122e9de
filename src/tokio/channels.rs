//! The four event channels on tokio's reactor: [`EventStream`]s whose
//! readiness is a [`TokioFd`].
#![allow(unsafe_code)] // `AsyncFd::register_with_interest`: the fd-lifetime contract

use std::{
    io,
    os::fd::{BorrowedFd, OwnedFd},
    task::{Context as TaskContext, Poll},
};

use ::tokio::io::{
    unix::{AsyncFd, AsyncFdReadyGuard},
    Interest,
};

#[cfg(feature = "cm")]
use crate::cm::EventChannel;
// The async wrapper of the public DevX event channel.
#[cfg(feature = "devx")]
use crate::mlx5::DevxEventChannel;
use crate::{
    error::{Error, ErrorKind, Result},
    event_stream::{EventSource, EventStream, Readiness, ReadyGuard},
    CompletionChannel, Context,
};

/// An event fd registered with tokio's reactor (`AsyncFd`, read interest):
/// the [`Readiness`] of the `uverbs::tokio` types.
///
/// What it registers is a duplicate of the source's fd (the same open
/// file: the same readiness and flags), owned by the `AsyncFd` and closed
/// after tokio deregistered it; one fd per wrapper.
#[derive(Debug)]
pub struct TokioFd {
    fd: AsyncFd<OwnedFd>,
}

impl TokioFd {
    /// Registers a duplicate of `fd` with the current runtime (which
    /// [`on_tokio`] checked is there).
    fn register(fd: BorrowedFd<'_>) -> io::Result<TokioFd> {
        let dup = fd.try_clone_to_owned()?;
        // SAFETY: the `AsyncFd` owns `dup`, an open fd of its own (not the
        // source's number), which stays open and unchanged until the
        // `AsyncFd` drops it; `OwnedFd::as_raw_fd` always returns it.
        let fd = unsafe { AsyncFd::register_with_interest(dup, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(TokioFd { fd })
    }
}

/// The readiness one poll of a [`TokioFd`] saw (tokio's ready guard).
#[derive(Debug)]
pub struct TokioReady<'a>(AsyncFdReadyGuard<'a, OwnedFd>);

impl ReadyGuard for TokioReady<'_> {
    /// tokio keeps readiness newer than the wake-up being cleared
    /// (`AsyncFdReadyGuard::clear_ready`): a record queued after the failed
    /// get wakes the next wait.
    fn clear_ready(mut self) {
        self.0.clear_ready();
    }
}

impl Readiness for TokioFd {
    type Ready<'a> = TokioReady<'a>;

    fn poll_read_ready<'a>(&'a self, cx: &mut TaskContext<'_>) -> Poll<io::Result<TokioReady<'a>>> {
        self.fd.poll_read_ready(cx).map_ok(TokioReady)
    }

    /// `AsyncFd::readable`: any number of tasks may wait at once.
    async fn read_ready(&self) -> io::Result<TokioReady<'_>> {
        self.fd.readable().await.map(TokioReady)
    }
}

/// `source` on the current tokio runtime; "no tokio runtime" is an
/// `InvalidArgument` error.
fn on_tokio<S: EventSource>(source: S, what: &'static str) -> Result<EventStream<S, TokioFd>> {
    if ::tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::new(
            what,
            ErrorKind::InvalidArgument,
            "no tokio runtime: create it inside one (a task, or Runtime::enter)",
        ));
    }
    EventStream::register(source, TokioFd::register)
}

/// A [`CompletionChannel`] whose events are awaited on tokio
/// ([`EventStream::next_event`], [`EventStream::poll_next_event`]; a
/// `Stream` with the `stream` feature).
pub type AsyncCompletionChannel = EventStream<CompletionChannel, TokioFd>;

impl EventStream<CompletionChannel, TokioFd> {
    /// Registers the channel with the current tokio runtime. Its events are
    /// [`CqEvent`](crate::CqEvent)s, as `ibv_get_cq_event` returns them
    /// (re-arm the CQ and poll it, then drop or
    /// [`ack_cq_events`](crate::ack_cq_events) the event).
    pub fn new(channel: CompletionChannel) -> Result<Self> {
        on_tokio(channel, "register the completion channel with tokio")
    }
}

/// The async event fd of a [`Context`], awaited on tokio (like
/// `ibv_get_async_event`).
pub type AsyncEvents = EventStream<Context, TokioFd>;

impl EventStream<Context, TokioFd> {
    /// Registers the context's async event fd with the current tokio runtime.
    pub fn new(ctx: &Context) -> Result<Self> {
        on_tokio(ctx.clone(), "register the async event fd with tokio")
    }
}

#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
/// An rdma_cm [`EventChannel`] whose events are awaited on tokio (like
/// `rdma_get_cm_event`).
pub type AsyncCmChannel = EventStream<EventChannel, TokioFd>;

#[cfg(feature = "cm")]
impl EventStream<EventChannel, TokioFd> {
    /// Registers the channel with the current tokio runtime.
    pub fn new(channel: EventChannel) -> Result<Self> {
        on_tokio(channel, "register the rdma_cm channel with tokio")
    }
}

#[cfg(feature = "devx")]
#[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
/// An mlx5 DevX [`DevxEventChannel`] whose events are awaited on tokio
/// (`mlx5dv_devx_get_event`; `EventsLost` when the kernel dropped events,
/// as the blocking get).
pub type AsyncDevxChannel = EventStream<DevxEventChannel, TokioFd>;

#[cfg(feature = "devx")]
impl EventStream<DevxEventChannel, TokioFd> {
    /// Registers the channel with the current tokio runtime.
    pub fn new(channel: DevxEventChannel) -> Result<Self> {
        on_tokio(channel, "register the DevX event channel with tokio")
    }
}
