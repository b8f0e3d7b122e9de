//! The event fds as futures on tokio's reactor (feature `tokio`).
//!
//! Every event fd of the crate already polls readable while a record is
//! queued and reads without blocking once a `try_*` get has run; what an
//! async program needs on top is a registration with the runtime and the
//! loop that awaits readiness, drains, and clears the readiness it
//! consumed. That loop is here, once, for each kind of channel:
//!
//! | channel | async wrapper | awaits |
//! |---|---|---|
//! | [`CompletionChannel`](crate::CompletionChannel) | [`AsyncCompletionChannel`] | [`CqEvent`](crate::CqEvent) |
//! | the context's async event fd | [`AsyncEvents`] | [`AsyncEvent`](crate::AsyncEvent) |
//! | [`cm::EventChannel`](crate::cm::EventChannel) | [`AsyncCmChannel`] | [`CmEvent`](crate::cm::CmEvent) |
//! | [`mlx5::DevxEventChannel`](crate::mlx5::DevxEventChannel) | [`AsyncDevxChannel`] | [`DevxEvent`](crate::mlx5::DevxEvent) |
//!
//! and [`AsyncCq`] awaits completions the way programs write it by hand:
//! poll (for a configurable busy-poll budget), arm, poll again, await the
//! channel, acknowledge what it read in one batch, poll.
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
//! One fd can be registered with a runtime once: wrap each channel once.
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

#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
pub use channels::AsyncCmChannel;
#[cfg(feature = "devx")]
#[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
pub use channels::AsyncDevxChannel;
pub use channels::{AsyncCompletionChannel, AsyncEvents};
pub use cq::{AsyncCq, BusyPoll};
