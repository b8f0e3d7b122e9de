//! The event fds as runtime-independent `poll_*` methods, for any async
//! runtime's reactor.
//!
//! Every event fd of the crate polls readable while a record is queued,
//! and its non-blocking get (`try_get_event`, `try_get_async_event`) reads
//! one record or says the queue is empty (see [the event rules](crate::events)).
//! What an async program needs on top is a reactor that watches the fd and
//! the loop that awaits readiness, gets, and clears the readiness it
//! consumed. The loop is here, once, for every runtime; the reactor is
//! whatever the program runs, plugged in through one small trait:
//!
//! - [`Readiness`]: "poll the fd for read readiness" returning a
//!   [`ReadyGuard`], whose [`clear_ready`](ReadyGuard::clear_ready) forgets
//!   the readiness that guard reported. tokio's `AsyncFd`
//!   (`uverbs::tokio::TokioFd` with the `tokio` feature),
//!   async-io's (smol's) `Async`, or a `poll(2)` thread implement it in a
//!   few lines (`examples/smol_cq_events.rs`).
//! - [`EventStream`]: an event source ([`EventSource`]: a
//!   [`CompletionChannel`], a [`Context`]'s async events, an rdma_cm
//!   [`EventChannel`](crate::cm::EventChannel), a DevX
//!   [`DevxEventChannel`](crate::mlx5::DevxEventChannel)) and its fd's
//!   readiness: [`EventStream::poll_next_event`] (`&self`, a
//!   `std::task::Context`), [`EventStream::next_event`] (a future), and
//!   `futures_core::Stream` with the `stream` feature.
//! - [`AsyncCq`]: a CQ with a channel of its own whose completions are
//!   awaited ([`AsyncCq::poll_completions`], [`AsyncCq::poll`]), with a
//!   [`BusyPoll`] budget.
//!
//! `uverbs::tokio` is this layer on tokio's reactor; the crate itself
//! depends on no runtime.
//!
//! # Guarantees (for any [`Readiness`] that keeps its contract)
//!
//! - **No lost wake-up.** Readiness is cleared only after a non-blocking
//!   get found the queue empty, and only the readiness the guard reported:
//!   a record queued after that get makes the fd ready again.
//! - **Cancellation-safe, no event lost.** An event is read from the
//!   kernel only in the poll that returns it; a future or stream dropped
//!   between polls has read nothing, so nothing is left unacknowledged.
//! - **The acknowledgement contract holds.** The events are the blocking
//!   API's values ([`CqEvent`](crate::CqEvent), [`AsyncEvent`](crate::AsyncEvent),
//!   [`CmEvent`](crate::cm::CmEvent), [`DevxEvent`](crate::mlx5::DevxEvent)):
//!   acknowledged when dropped, holding their object alive, not `Send`.
//!
//! # Implementing [`Readiness`]
//!
//! [`EventStream::register`] hands the source's fd to a closure that
//! registers it (or a duplicate, [`BorrowedFd::try_clone_to_owned`]: a
//! duplicate shares the open file, so its readiness and its flags, and is
//! deregistered and closed when the readiness is dropped) with the reactor.
//! The stream drops the readiness before the source and never gives it
//! away by value, so a registration of the borrowed fd's number stays valid.
//! A reactor without explicit clearing (async-io: each `poll_readable`
//! after a `Ready` registers interest anew) uses `()` as its guard:
//!
//! ```no_run
//! # async fn sketch(ctx: uverbs::Context) -> uverbs::Result<()> {
//! use std::{io, os::fd::OwnedFd, task::{Context, Poll}};
//! use uverbs::event_stream::{EventStream, Readiness};
//!
//! struct SmolFd(smol::Async<OwnedFd>);
//!
//! impl Readiness for SmolFd {
//!     type Ready<'a> = ();
//!     fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
//!         self.0.poll_readable(cx)
//!     }
//! }
//!
//! let channel = EventStream::register(ctx.create_comp_channel()?, |fd| {
//!     smol::Async::new_nonblocking(fd.try_clone_to_owned()?).map(SmolFd)
//! })?;
//! let ev = channel.next_event().await?;
//! # drop(ev);
//! # Ok(())
//! # }
//! ```
//!
//! An edge-triggered reactor (tokio, `EPOLLET`) must clear only the
//! readiness the guard saw, not readiness that arrived after it; a
//! level-triggered one may clear nothing. [`EventStream::poll_next_event`]
//! wakes only the waker of its latest call (as the reactors' own `poll_*`
//! methods do); [`EventStream::next_event`] uses
//! [`Readiness::read_ready`], which a reactor may implement with its
//! many-waiter future (tokio does).

mod cq;
mod source;
mod stream;

use std::{
    future::Future,
    io,
    task::{Context, Poll},
};

#[cfg(doc)]
use std::os::fd::BorrowedFd;

#[cfg(doc)]
use crate::CompletionChannel;

pub use cq::{AsyncCq, BusyPoll};
pub use source::EventSource;
pub use stream::EventStream;

/// A reactor's read readiness of one fd: what [`EventStream`] and
/// [`AsyncCq`] wait on (see [the module docs](self)).
pub trait Readiness {
    /// What a ready poll returns; cleared when the get found nothing.
    type Ready<'a>: ReadyGuard
    where
        Self: 'a;

    /// `Ready(Ok(guard))` when the fd may be readable (a spurious
    /// readiness is fine: the get then finds nothing and clears it);
    /// `Pending`, with `cx`'s waker registered, when it is not.
    fn poll_read_ready<'a>(&'a self, cx: &mut Context<'_>) -> Poll<io::Result<Self::Ready<'a>>>;

    /// The same as a future. The default polls
    /// [`Readiness::poll_read_ready`]; a reactor whose own future lets
    /// several tasks wait at once (tokio's `AsyncFd::readable`) uses it.
    fn read_ready(&self) -> impl Future<Output = io::Result<Self::Ready<'_>>> {
        std::future::poll_fn(move |cx| self.poll_read_ready(cx))
    }
}

/// The readiness one [`Readiness::poll_read_ready`] reported.
pub trait ReadyGuard {
    /// The non-blocking get found the queue empty: forget the readiness
    /// this guard reported, and only that (readiness that arrived since
    /// must wake the next poll).
    fn clear_ready(self);
}

/// For reactors that need no clearing (level-triggered, or re-armed on
/// every poll, as async-io's `poll_readable`).
impl ReadyGuard for () {
    fn clear_ready(self) {}
}

/// The errno of a reactor's `io::Error` (`EIO` when it has none).
pub(crate) fn io_errno(e: &io::Error) -> crate::sys::Errno {
    crate::sys::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}
