//! The event fds as futures on tokio's reactor (feature `tokio`).
//!
//! This is [`uverbs::event_stream`](crate::event_stream), the
//! runtime-independent layer, on tokio: its [`Readiness`](crate::event_stream::Readiness)
//! is a [`TokioFd`] (tokio's `AsyncFd`), and each wrapper is an
//! [`EventStream`](crate::event_stream::EventStream) or
//! [`event_stream::AsyncCq`](crate::event_stream::AsyncCq) with it:
//!
//! | channel | async wrapper | awaits |
//! |---|---|---|
//! | [`CompletionChannel`](crate::CompletionChannel) | [`AsyncCompletionChannel`] | [`CqEvent`](crate::CqEvent) |
//! | the context's async event fd | [`AsyncEvents`] | [`AsyncEvent`](crate::AsyncEvent) |
//! | [`cm::EventChannel`](crate::cm::EventChannel) | [`AsyncCmChannel`] | [`CmEvent`](crate::cm::CmEvent) |
//! | [`mlx5::DevxEventChannel`](crate::mlx5::DevxEventChannel) | [`AsyncDevxChannel`] | [`DevxEvent`](crate::mlx5::DevxEvent) |
//!
//! Each has `new`, `next_event().await` (any number of tasks may await one
//! wrapper), `poll_next_event(cx)` and, with the `stream` feature,
//! `futures_core::Stream`. [`AsyncCq`] awaits completions the way programs
//! write it by hand: poll (for a configurable busy-poll budget), arm, poll
//! again, await the channel, acknowledge what it read in one batch, poll.
//!
//! # Guarantees
//!
//! - **No lost wake-up.** tokio registers the fd edge-triggered. A wait
//!   clears the readiness it saw only after a non-blocking get found the
//!   queue empty, and tokio keeps any readiness that arrived after the
//!   wake-up it cleared (`AsyncFdReadyGuard::clear_ready`), so a record
//!   queued between the drain and the re-arm wakes the next wait.
//! - **Cancellation-safe.** A future dropped while it waits has read
//!   nothing: events are taken from the kernel only in the step that
//!   returns them, after the last `.await`. Nothing is left unacknowledged.
//! - **The acknowledgement contract holds.** The events are the same values
//!   as the blocking API's: acknowledged when dropped, holding their object
//!   alive, and not `Send` (so they are not held across an `.await` of a
//!   task that may move between threads). A destroy still waits for them,
//!   and never blocks an executor if called as
//!   [`CompletionQueue::try_destroy`](crate::CompletionQueue::try_destroy).
//!
//! Each wrapper registers a duplicate of its channel's fd (one more fd,
//! closed with the wrapper). The same layer runs on other runtimes with a
//! few lines of glue (`examples/smol_cq_events.rs`: smol).
//!
//! ```no_run
//! # async fn run() -> uverbs::Result<()> {
//! use uverbs::{tokio::AsyncCq, Context, WorkCompletion};
//!
//! let ctx = Context::open(None)?;
//! let mut cq = AsyncCq::create(&ctx, 64, 0)?;
//! // ... create QPs on `cq.cq()`, post work ...
//! let mut wc = [WorkCompletion::default(); 16];
//! let n = cq.poll(&mut wc).await?;
//! for c in &wc[..n] {
//!     println!("{:?} {:?}", c.wr_id, c.status);
//! }
//! # Ok(())
//! # }
//! ```

mod channels;
mod cq;

pub use crate::event_stream::BusyPoll;
#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
pub use channels::AsyncCmChannel;
#[cfg(feature = "devx")]
#[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
pub use channels::AsyncDevxChannel;
pub use channels::{AsyncCompletionChannel, AsyncEvents, TokioFd, TokioReady};
pub use cq::AsyncCq;
