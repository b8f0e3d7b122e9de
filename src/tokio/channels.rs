//! The four event channels on tokio's reactor.
#![allow(unsafe_code)] // `AsyncFd::register_with_interest`: the fd-lifetime contract

use std::os::fd::{AsFd, AsRawFd, RawFd};

use ::tokio::io::{unix::AsyncFd, Interest};

#[cfg(feature = "cm")]
use crate::cm::{CmEvent, EventChannel};
#[cfg(feature = "devx")]
use crate::mlx5::{DevxEvent, DevxEventChannel};
use crate::{
    error::{Error, ErrorKind, Result},
    AsyncEvent, CompletionChannel, Context, CqEvent,
};

/// A channel and the number of the fd it keeps open, for `AsyncFd`.
#[derive(Debug)]
pub(super) struct Registered<T> {
    pub(super) inner: T,
    raw: RawFd,
}

impl<T> AsRawFd for Registered<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.raw
    }
}

/// Registers `inner`, whose open fd is `raw`, for read readiness with the
/// current runtime; an error (not a panic) outside of one.
pub(super) fn register<T>(
    inner: T,
    raw: RawFd,
    what: &'static str,
) -> Result<AsyncFd<Registered<T>>> {
    if ::tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::new(
            what,
            ErrorKind::InvalidArgument,
            "no tokio runtime: create it inside one (a task, or Runtime::enter)",
        ));
    }
    // SAFETY: `raw` is the open fd that `inner` owns (each caller takes it
    // from `inner.as_fd()`), and `Registered` keeps `inner`, hence the fd
    // and its file description, alive and unchanged for as long as the
    // `AsyncFd` holds it; `as_raw_fd` always returns that same number.
    let registered =
        unsafe { AsyncFd::register_with_interest(Registered { inner, raw }, Interest::READABLE) };
    registered.map_err(|e| {
        let (_, e) = e.into_parts();
        let err = Error::sys(what, io_errno(&e));
        if e.raw_os_error() == Some(libc::EEXIST) {
            err.with_detail(
                "the fd is already registered with this runtime: wrap each channel once",
            )
        } else {
            err
        }
    })
}

fn io_errno(e: &std::io::Error) -> crate::sys::Errno {
    crate::sys::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// Awaits the next record of `fd`: `try_get` reads one without blocking.
///
/// Readiness is cleared only when `try_get` found nothing, and tokio keeps
/// readiness newer than the wake-up being cleared: a record queued after
/// the failed get wakes the next wait. Nothing is read before the last
/// `.await`, so dropping the future loses nothing.
pub(super) async fn next<T, E>(
    fd: &AsyncFd<Registered<T>>,
    what: &'static str,
    mut try_get: impl FnMut(&T) -> Result<Option<E>>,
) -> Result<E> {
    loop {
        let mut guard = fd
            .readable()
            .await
            .map_err(|e| Error::sys(what, io_errno(&e)))?;
        match try_get(&guard.get_inner().inner)? {
            Some(event) => return Ok(event),
            None => guard.clear_ready(),
        }
    }
}

/// A [`CompletionChannel`] whose events are awaited.
#[derive(Debug)]
pub struct AsyncCompletionChannel {
    fd: AsyncFd<Registered<CompletionChannel>>,
}

impl AsyncCompletionChannel {
    /// Registers the channel with the current tokio runtime.
    pub fn new(channel: CompletionChannel) -> Result<Self> {
        let raw = channel.as_fd().as_raw_fd();
        Ok(AsyncCompletionChannel {
            fd: register(channel, raw, "register the completion channel with tokio")?,
        })
    }

    /// The next completion event, like `ibv_get_cq_event` (re-arm the CQ and
    /// poll it, then drop or [`ack_cq_events`](crate::ack_cq_events) the
    /// event). Cancellation-safe.
    pub async fn next_event(&self) -> Result<CqEvent> {
        next(
            &self.fd,
            "await a completion event",
            CompletionChannel::try_get_event,
        )
        .await
    }

    /// The channel (for its blocking and non-blocking gets, and to create
    /// CQs on it).
    pub fn channel(&self) -> &CompletionChannel {
        &self.fd.get_ref().inner
    }

    /// Deregisters the channel and gives it back.
    pub fn into_inner(self) -> CompletionChannel {
        self.fd.into_inner().inner
    }
}

/// The async event fd of a [`Context`], awaited.
#[derive(Debug)]
pub struct AsyncEvents {
    fd: AsyncFd<Registered<Context>>,
}

impl AsyncEvents {
    /// Registers the context's async event fd with the current tokio runtime.
    pub fn new(ctx: &Context) -> Result<Self> {
        let raw = ctx.async_fd().as_raw_fd();
        Ok(AsyncEvents {
            fd: register(ctx.clone(), raw, "register the async event fd with tokio")?,
        })
    }

    /// The next async event, like `ibv_get_async_event`. Cancellation-safe.
    pub async fn next_event(&self) -> Result<AsyncEvent> {
        next(
            &self.fd,
            "await an async event",
            Context::try_get_async_event,
        )
        .await
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.fd.get_ref().inner
    }
}

#[cfg(feature = "cm")]
#[cfg_attr(docsrs, doc(cfg(feature = "cm")))]
/// An rdma_cm [`EventChannel`] whose events are awaited.
#[derive(Debug)]
pub struct AsyncCmChannel {
    fd: AsyncFd<Registered<EventChannel>>,
}

#[cfg(feature = "cm")]
impl AsyncCmChannel {
    /// Registers the channel with the current tokio runtime.
    pub fn new(channel: EventChannel) -> Result<Self> {
        let raw = channel.as_fd().as_raw_fd();
        Ok(AsyncCmChannel {
            fd: register(channel, raw, "register the rdma_cm channel with tokio")?,
        })
    }

    /// The next CM event, like `rdma_get_cm_event`. Cancellation-safe.
    pub async fn next_event(&self) -> Result<CmEvent> {
        next(
            &self.fd,
            "await an rdma_cm event",
            EventChannel::try_get_event,
        )
        .await
    }

    /// The channel (to create ids on it).
    pub fn channel(&self) -> &EventChannel {
        &self.fd.get_ref().inner
    }

    /// Deregisters the channel and gives it back.
    pub fn into_inner(self) -> EventChannel {
        self.fd.into_inner().inner
    }
}

#[cfg(feature = "devx")]
#[cfg_attr(docsrs, doc(cfg(feature = "devx")))]
/// An mlx5 DevX [`DevxEventChannel`] whose events are awaited.
#[derive(Debug)]
pub struct AsyncDevxChannel {
    fd: AsyncFd<Registered<DevxEventChannel>>,
}

#[cfg(feature = "devx")]
impl AsyncDevxChannel {
    /// Registers the channel with the current tokio runtime.
    pub fn new(channel: DevxEventChannel) -> Result<Self> {
        let raw = channel.as_fd().as_raw_fd();
        Ok(AsyncDevxChannel {
            fd: register(channel, raw, "register the DevX event channel with tokio")?,
        })
    }

    /// The next DevX event (`mlx5dv_devx_get_event`). Cancellation-safe;
    /// `EventsLost` when the kernel dropped events, as the blocking get.
    pub async fn next_event(&self) -> Result<DevxEvent> {
        next(
            &self.fd,
            "await a DevX event",
            DevxEventChannel::try_get_event,
        )
        .await
    }

    /// The channel (to subscribe).
    pub fn channel(&self) -> &DevxEventChannel {
        &self.fd.get_ref().inner
    }

    /// Deregisters the channel and gives it back.
    pub fn into_inner(self) -> DevxEventChannel {
        self.fd.into_inner().inner
    }
}
