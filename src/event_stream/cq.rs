//! A CQ whose completions are awaited, on any reactor.

use std::{
    future::poll_fn,
    io,
    os::fd::BorrowedFd,
    task::{Context as TaskContext, Poll},
    time::{Duration, Instant},
};

use super::{EventStream, Readiness};
use crate::{
    ack_cq_events,
    error::{DestroyError, Result},
    CompletionChannel, CompletionQueue, Context, CqOptions, WorkCompletion,
};

/// How long [`AsyncCq::poll`] keeps polling an empty CQ before it arms it
/// and sleeps on its channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BusyPoll {
    /// Sleep as soon as the CQ is empty (one poll, then arm, poll, wait):
    /// no core is burnt while idle. The default.
    #[default]
    Off,
    /// Poll for up to this long first: completions that arrive within it
    /// are returned without a system call or a wake-up (latency-sensitive
    /// programs), at the price of a busy core meanwhile. The executor
    /// thread is busy too: use it on a thread or runtime of its own.
    For(Duration),
}

/// A CQ with a completion channel of its own, whose completions are
/// awaited on a reactor ([`Readiness`]): [`AsyncCq::poll`] returns as soon
/// as at least one completion is there. `uverbs::tokio::AsyncCq` is this
/// type on tokio.
///
/// Each wait is what programs write by hand around `ibv_get_cq_event`:
/// poll; poll on for the [`BusyPoll`] budget; arm (`req_notify`) and poll
/// once more (a completion that arrived before the arm raises no event);
/// await the channel; take every event queued and acknowledge them in one
/// batch; poll. Completions stay in the CQ until polled, so a cancelled
/// wait loses none, and the CQ stays armed for the next.
#[derive(Debug)]
pub struct AsyncCq<R> {
    cq: CompletionQueue,
    channel: EventStream<CompletionChannel, R>,
    busy: BusyPoll,
    /// Armed, and its event not read yet.
    armed: bool,
}

impl<R: Readiness> AsyncCq<R> {
    /// Creates a completion channel and a CQ on it with room for `cqe`
    /// completions on completion vector `comp_vector`; `register` registers
    /// the channel's fd with the reactor (as [`EventStream::register`]).
    /// The channel signals this CQ only.
    pub fn create_with(
        ctx: &Context,
        cqe: u32,
        comp_vector: u32,
        register: impl FnOnce(BorrowedFd<'_>) -> io::Result<R>,
    ) -> Result<Self> {
        let channel = EventStream::register(ctx.create_comp_channel()?, register)?;
        Self::from_channel(ctx, cqe, comp_vector, channel)
    }

    /// A CQ on `channel`, a channel of its own (its events are taken and
    /// acknowledged as this CQ's).
    pub(crate) fn from_channel(
        ctx: &Context,
        cqe: u32,
        comp_vector: u32,
        channel: EventStream<CompletionChannel, R>,
    ) -> Result<Self> {
        let cq = ctx.create_cq(
            cqe,
            CqOptions {
                channel: Some(channel.channel()),
                comp_vector,
                ..CqOptions::default()
            },
        )?;
        Ok(AsyncCq {
            cq,
            channel,
            busy: BusyPoll::Off,
            armed: false,
        })
    }

    /// Sets the busy-poll budget of later waits.
    pub fn set_busy_poll(&mut self, busy: BusyPoll) {
        self.busy = busy;
    }

    /// The CQ (to create QPs on it).
    pub fn cq(&self) -> &CompletionQueue {
        &self.cq
    }

    /// Polls without waiting, like [`CompletionQueue::poll`].
    pub fn try_poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        self.cq.poll(out)
    }

    /// `Ready(Ok(n))` once at least one completion is there (`n` written to
    /// `out`; 0 only when `out` is empty), `Pending` with `cx`'s waker
    /// registered with the reactor until then: the runtime-independent form
    /// of [`AsyncCq::poll`]. Nothing is held between calls but the CQ's
    /// armed state: a wait given up loses no completion and no event.
    pub fn poll_completions(
        &mut self,
        cx: &mut TaskContext<'_>,
        out: &mut [WorkCompletion],
    ) -> Poll<Result<usize>> {
        if out.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            let n = self.busy_poll(out);
            if n > 0 {
                return Poll::Ready(Ok(n));
            }
            if !self.armed {
                self.cq.req_notify(false)?;
                self.armed = true;
                let n = self.cq.poll(out);
                if n > 0 {
                    return Poll::Ready(Ok(n));
                }
            }
            let first = match self.channel.poll_next_event(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(event) => event?,
            };
            // The event is read: the CQ is no longer armed.
            self.armed = false;
            let mut batch = vec![first];
            while let Some(ev) = self.channel.source().try_get_event()? {
                batch.push(ev);
            }
            ack_cq_events(batch);
        }
    }

    /// Waits until at least one completion is there and returns how many
    /// were written to `out` (0 only when `out` is empty). Cancellation-safe.
    pub async fn poll(&mut self, out: &mut [WorkCompletion]) -> Result<usize> {
        poll_fn(|cx| self.poll_completions(cx, out)).await
    }

    /// One poll, then more for the busy-poll budget while empty.
    fn busy_poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        let n = self.cq.poll(out);
        let BusyPoll::For(budget) = self.busy else {
            return n;
        };
        if n > 0 || budget.is_zero() {
            return n;
        }
        let deadline = Instant::now() + budget;
        loop {
            for _ in 0..64 {
                let n = self.cq.poll(out);
                if n > 0 {
                    return n;
                }
                std::hint::spin_loop();
            }
            if Instant::now() >= deadline {
                return 0;
            }
        }
    }

    /// Destroys the CQ (and its channel) without ever blocking the
    /// executor: [`CompletionQueue::try_destroy`]. On failure (QPs still
    /// use it: `EBUSY`) it comes back whole.
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        let AsyncCq {
            cq,
            channel,
            busy,
            armed,
        } = self;
        cq.try_destroy().map_err(|e| {
            let (cq, err) = e.into_parts();
            DestroyError::new(
                AsyncCq {
                    cq,
                    channel,
                    busy,
                    armed,
                },
                err,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_poll_defaults_to_off() {
        assert_eq!(BusyPoll::default(), BusyPoll::Off);
    }
}
