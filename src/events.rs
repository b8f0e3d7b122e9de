//! The rules of event fds, in one place: completion channels
//! ([`CompletionChannel`]), the context's async events
//! ([`Context::get_async_event`]), the rdma_cm event channel
//! ([`cm::EventChannel`](crate::cm::EventChannel)) and mlx5 DevX event
//! channels ([`mlx5::DevxEventChannel`](crate::mlx5::DevxEventChannel)).
//! Documentation only; the types are re-exported here for reference.
//!
//! # Three ways to get an event
//!
//! Every event fd has the same three gets:
//!
//! | get | waits | returns when nothing is queued |
//! | --- | --- | --- |
//! | `get_event()`, `get_async_event()` | until an event arrives | (it waits) |
//! | `get_event_timeout(Some(t))` | at most `t` | `Ok(None)` |
//! | `try_get_event()`, `try_get_async_event()` | not at all | `Ok(None)` |
//!
//! The blocking get is one blocking `read` (for rdma_cm, one `GET_EVENT`
//! command), the same single system call libibverbs and librdmacm make.
//! Any number of threads may get from one fd at once; each event goes to
//! exactly one of them. The first timed or non-blocking get switches the fd
//! to `O_NONBLOCK` for good, so that a thread that loses a race for an
//! event never sleeps in `read`; blocking gets keep blocking after that.
//!
//! # Polling the fd yourself (`poll`, `epoll`, an event loop)
//!
//! Each event type implements `AsFd`. Register it with `poll`/`epoll` (or
//! wrap it in an [`EventStream`](crate::event_stream::EventStream) on any
//! async runtime's reactor, or use the `tokio` feature's wrappers) and call
//! the non-blocking get when it is readable.
//!
//! - **`O_NONBLOCK` is honoured**: when the program sets it on the fd (as
//!   rdma-core's examples do before polling), a blocking get with nothing
//!   queued returns at once with an error of kind
//!   [`ErrorKind::WouldBlock`] (errno `EAGAIN`), as `ibv_get_cq_event`,
//!   `ibv_get_async_event` and `rdma_get_cm_event` return `EAGAIN`. The
//!   library tells the program's flag from its own by the fd's flags when it
//!   first needs to switch it; a flag the program sets after a timed or
//!   non-blocking get already switched the fd cannot be told apart, and the
//!   blocking get then waits.
//! - **Edge-triggered `epoll` (`EPOLLET`)**: drain on every wake-up. Call
//!   the non-blocking get until it returns `Ok(None)`; an event arriving
//!   during the drain makes the fd ready again, so no wake-up is lost. For
//!   completion events: acknowledge, re-arm each CQ with
//!   [`CompletionQueue::req_notify`], then poll each CQ until it is empty
//!   (an event can arrive for completions already polled: its poll simply
//!   finds nothing).
//! - **Never `read` an event fd yourself.** A record read that way is an
//!   event the kernel counts as delivered and the library never sees, so
//!   nobody can acknowledge it: an explicit `destroy()` of its object then
//!   waits forever (as `ibv_destroy_cq` does for an event never
//!   acknowledged); `try_destroy()` and dropping the object do not wait.
//!
//! # Signals (`EINTR`)
//!
//! A signal handler that runs while a blocking get waits in the kernel ends
//! the get with an error of kind [`ErrorKind::Interrupted`] (errno `EINTR`),
//! as libibverbs' gets return `EINTR`: act on the signal, or call again.
//! Handlers installed with `SA_RESTART` do not interrupt a blocking `read`
//! (the kernel restarts it) but do interrupt the `poll` a blocking get makes
//! once the fd is non-blocking. Timed and non-blocking gets are never
//! interrupted: they wait again with the time that is left.
//!
//! # Acknowledging
//!
//! Completion events, async events of CQs, QPs and SRQs, and rdma_cm events
//! must be acknowledged before their object can be destroyed, as in
//! libibverbs and librdmacm (the kernel tells the destroy how many events it
//! handed out: `events_reported`). Two styles:
//!
//! - **by value**: an event ([`CqEvent`], [`AsyncEvent`],
//!   [`cm::CmEvent`](crate::cm::CmEvent)) is acknowledged when dropped, or
//!   with `ack()`; [`ack_cq_events`] acknowledges a batch. Event values are
//!   not `Send`: the thread that got one acknowledges it, and a destroy of
//!   its object from that thread fails with `EBUSY` instead of waiting for
//!   itself (libibverbs would deadlock);
//! - **by count**, as C programs do: [`CqEvent::defer_ack`] and
//!   [`AsyncEvent::defer_ack`] leave the event unacknowledged, counted by its
//!   object, and [`CompletionQueue::ack_events`] (`ibv_ack_cq_events(cq,
//!   n)`), `ack_async_events(n)` of a CQ, QP or SRQ acknowledge that many
//!   later, from any thread. `ibv_rc_pingpong -e` counts its events and
//!   acknowledges them all at exit; so does `uverbs rc-pingpong -e`, which
//!   gets them with [`CompletionChannel::get_event_deferred`]: the get and
//!   the deferral in one step, returning a plain [`DeferredCqEvent`].
//!   Acknowledging more than are deferred is an `InvalidArgument` error and
//!   acknowledges nothing.
//!
//! Destroy (`ibv_destroy_cq`, `ibv_destroy_qp`, `ibv_destroy_srq`,
//! `rdma_destroy_id`) works in libibverbs' order: the destroy command
//! first, then a wait until every event the kernel reported is
//! acknowledged. While the command runs, events of every other object keep
//! being delivered. Before the command, a destroy fails with `EBUSY` (and
//! gives the object back) while the calling thread holds an event value of
//! the object, or while deferred counts are unacknowledged (the destroy owns
//! the handle they are acknowledged through, so nobody else could ever do
//! it). `try_destroy()` fails with `EAGAIN` instead of waiting for event
//! values other threads hold. Dropping an object never waits: deferred
//! counts are given up with it.
//!
//! # Device removal and overflow
//!
//! - After `DEVICE_FATAL`, the async events still queued are read (as
//!   libibverbs reads them); then every get fails at once with an error of
//!   kind [`ErrorKind::DeviceRemoved`] instead of waiting forever. Any
//!   event fd whose source is gone (a removed device, a destroyed DevX
//!   channel) reports `DeviceRemoved` in every mode: blocking, timed and
//!   non-blocking.
//! - A DevX channel whose kernel queue overflowed reports it once as an
//!   error of kind [`ErrorKind::EventsLost`] (errno `EOVERFLOW`, as
//!   `mlx5dv_devx_get_event` returns it): resynchronise by querying the
//!   objects; the next get reads normally. A buffer too short for the
//!   channel's records is an `InvalidArgument` error (`EINVAL`); this crate
//!   always offers a buffer large enough.

#[cfg(doc)]
use crate::{CompletionQueue, Context, ErrorKind};

pub use crate::{
    ack_cq_events, AsyncElement, AsyncEvent, AsyncEventType, CompletionChannel, CqEvent,
    DeferredCqEvent, EventAffiliation, EventSeverity,
};
