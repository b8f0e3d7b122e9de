//! A CQ whose completions are awaited on tokio.

use super::channels::TokioFd;
use crate::{error::Result, event_stream, Context};

/// A CQ with a completion channel of its own, whose completions are
/// awaited on tokio: [`event_stream::AsyncCq`] with a [`TokioFd`]
/// ([`AsyncCq::poll`](event_stream::AsyncCq::poll) returns as soon as at
/// least one completion is there).
pub type AsyncCq = event_stream::AsyncCq<TokioFd>;

impl event_stream::AsyncCq<TokioFd> {
    /// Creates a completion channel and a CQ on it with room for `cqe`
    /// completions on completion vector `comp_vector`, registered with the
    /// current tokio runtime. The channel signals this CQ only.
    pub fn create(ctx: &Context, cqe: u32, comp_vector: u32) -> Result<Self> {
        let channel = super::AsyncCompletionChannel::new(ctx.create_comp_channel()?)?;
        Self::from_channel(ctx, cqe, comp_vector, channel)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AsyncCmChannel, AsyncCompletionChannel, AsyncDevxChannel, AsyncEvents};
    use super::*;
    use crate::WorkCompletion;

    fn assert_send<T: Send>(_: &T) {}

    /// The futures can be spawned on a multi-threaded runtime: no event
    /// value is held across an `.await`.
    #[allow(dead_code, unreachable_code, clippy::diverging_sub_expression)]
    fn futures_are_send(
        cq: &mut AsyncCq,
        ch: &AsyncCompletionChannel,
        ev: &AsyncEvents,
        cm: &AsyncCmChannel,
        devx: &AsyncDevxChannel,
        out: &mut [WorkCompletion],
    ) {
        assert_send(&cq.poll(out));
        assert_send(&ch.next_event());
        assert_send(&ev.next_event());
        assert_send(&cm.next_event());
        assert_send(&devx.next_event());
    }
}
