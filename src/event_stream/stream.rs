//! An event source and its fd's readiness: events polled, awaited, streamed.

use std::{
    io,
    os::fd::BorrowedFd,
    sync::atomic::AtomicBool,
    task::{Context as TaskContext, Poll},
};

use super::{io_errno, EventSource, Readiness, ReadyGuard};
#[cfg(feature = "cm")]
use crate::cm::EventChannel;
#[cfg(feature = "devx")]
use crate::mlx5::DevxEventChannel;
use crate::{
    error::{Error, ErrorKind, Result},
    CompletionChannel, Context,
};

/// How many times one poll takes a readiness whose get finds nothing
/// before it yields (a readiness that never clears must not spin a thread).
const SPURIOUS_PER_POLL: u32 = 32;

/// An event source ([`EventSource`]) whose events are awaited on a
/// reactor's readiness of its fd ([`Readiness`]); see [the module
/// docs](super).
///
/// `poll_next_event(&self, cx)` is the runtime-independent primitive;
/// [`EventStream::next_event`] is the same as a future, and with the
/// `stream` feature the stream is a `futures_core::Stream` of
/// `Result<S::Event>` (it ends after an error that every later get would
/// repeat: [`ErrorKind::DeviceRemoved`], or a failing reactor).
/// Every event is a value of the blocking API, acknowledged as there.
#[derive(Debug)]
pub struct EventStream<S, R> {
    // Declared first, so dropped first: the registration of the source's
    // fd goes before the fd.
    ready: R,
    source: S,
    /// The `Stream` returned its last item.
    #[cfg_attr(not(feature = "stream"), allow(dead_code))]
    ended: AtomicBool,
}

/// Returns `Pending` once, its waker woken: lets the executor run others.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// How a poll ended, for the `Stream`: whether the stream goes on.
enum Failure {
    /// An error the next get may not repeat (`EventsLost`, a bad record).
    Transient(Error),
    /// The source or the reactor is gone: every later poll fails too.
    Final(Error),
}

impl Failure {
    fn of_get(e: Error) -> Failure {
        if e.kind() == ErrorKind::DeviceRemoved {
            Failure::Final(e)
        } else {
            Failure::Transient(e)
        }
    }

    fn into_error(self) -> Error {
        match self {
            Failure::Transient(e) | Failure::Final(e) => e,
        }
    }
}

impl<S: EventSource, R: Readiness> EventStream<S, R> {
    /// Wraps `source`, whose fd `register` registers with a reactor (see
    /// [`Readiness`]: the fd itself, or a duplicate of it). An error of
    /// `register` is returned with its errno.
    pub fn register(
        source: S,
        register: impl FnOnce(BorrowedFd<'_>) -> io::Result<R>,
    ) -> Result<Self> {
        let ready =
            register(source.event_fd()).map_err(|e| Error::sys(S::REGISTER, io_errno(&e)))?;
        Ok(EventStream {
            ready,
            source,
            ended: AtomicBool::new(false),
        })
    }

    /// The next event: `Ready` with it (or an error) once one is queued,
    /// `Pending` with `cx`'s waker registered with the reactor until then.
    /// Cancellation-safe: an event is read only in the call that returns
    /// it. The reactor wakes the waker of the latest call: one task polls a
    /// stream (several tasks may await [`EventStream::next_event`] at once
    /// where the reactor's [`Readiness::read_ready`] allows it: tokio's does).
    pub fn poll_next_event(&self, cx: &mut TaskContext<'_>) -> Poll<Result<S::Event>> {
        self.poll_event(cx).map_err(Failure::into_error)
    }

    fn poll_event(&self, cx: &mut TaskContext<'_>) -> Poll<Result<S::Event, Failure>> {
        for _ in 0..SPURIOUS_PER_POLL {
            let guard = match self.ready.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(Err(Failure::Final(Error::sys(S::WAIT, io_errno(&e)))))
                }
                Poll::Ready(Ok(guard)) => guard,
            };
            // An error keeps the readiness (the guard is dropped, not
            // cleared): the next poll gets again.
            match self.source.try_next_event().map_err(Failure::of_get)? {
                Some(event) => return Poll::Ready(Ok(event)),
                None => guard.clear_ready(),
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// The next event, awaited on the reactor ([`Readiness::read_ready`]).
    /// Cancellation-safe: nothing is read before the last `.await`.
    pub async fn next_event(&self) -> Result<S::Event> {
        let mut empty = 0;
        loop {
            let guard = self
                .ready
                .read_ready()
                .await
                .map_err(|e| Error::sys(S::WAIT, io_errno(&e)))?;
            match self.source.try_next_event()? {
                Some(event) => return Ok(event),
                None => guard.clear_ready(),
            }
            empty += 1;
            if empty % SPURIOUS_PER_POLL == 0 {
                yield_now().await;
            }
        }
    }

    /// The source (for its blocking and non-blocking gets).
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The reactor's registration of the source's fd.
    pub fn readiness(&self) -> &R {
        &self.ready
    }

    /// Deregisters the source (the readiness is dropped first) and gives it
    /// back.
    pub fn into_inner(self) -> S {
        let EventStream { ready, source, .. } = self;
        drop(ready);
        source
    }
}

impl<R> EventStream<CompletionChannel, R> {
    /// The channel (to create CQs on it).
    pub fn channel(&self) -> &CompletionChannel {
        &self.source
    }
}

impl<R> EventStream<Context, R> {
    /// The context whose async events these are.
    pub fn context(&self) -> &Context {
        &self.source
    }
}

#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
impl<R> EventStream<EventChannel, R> {
    /// The channel (to create ids on it).
    pub fn channel(&self) -> &EventChannel {
        &self.source
    }
}

#[cfg(feature = "devx")]
#[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
impl<R> EventStream<DevxEventChannel, R> {
    /// The channel (to subscribe).
    pub fn channel(&self) -> &DevxEventChannel {
        &self.source
    }
}

/// `Result<S::Event>` items; after an error every later get would repeat
/// ([`ErrorKind::DeviceRemoved`], a failing reactor) the stream ends
/// (`None`). Other errors (a DevX channel's `EventsLost`) are items and
/// the stream goes on.
#[cfg(feature = "stream")]
#[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
impl<S: EventSource, R: Readiness> futures_core::Stream for EventStream<S, R> {
    type Item = Result<S::Event>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Self::Item>> {
        if self.ended.load(std::sync::atomic::Ordering::Relaxed) {
            return Poll::Ready(None);
        }
        match self.poll_event(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(event)) => Poll::Ready(Some(Ok(event))),
            Poll::Ready(Err(Failure::Transient(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Err(Failure::Final(e))) => {
                self.ended.store(true, std::sync::atomic::Ordering::Relaxed);
                Poll::Ready(Some(Err(e)))
            }
        }
    }
}

#[cfg(feature = "stream")]
#[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
impl<S: EventSource, R: Readiness> futures_core::FusedStream for EventStream<S, R> {
    fn is_terminated(&self) -> bool {
        self.ended.load(std::sync::atomic::Ordering::Relaxed)
    }
}
