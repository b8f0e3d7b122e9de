//! mlx5 send batches (`ibv_wr_start` .. `ibv_wr_complete`): the queue's
//! counters and its view of the ring held by the batch, so that over a
//! batch written in one function they stay in registers.

use std::borrow::Borrow;

use super::{wqebbs, Av, Known, Last, Mlx5Sq, Posted, SqRules, SqShape, Writer};
use crate::wr::{PostErrorKind, SendWr};

impl Mlx5Sq {
    /// Starts a send batch (`ibv_wr_start`). The batch keeps the queue's
    /// counters and what writing WQEs needs in itself, so over a batch
    /// written in one function they stay in registers; the queue takes
    /// them back at [`SqBatch::complete`]. A batch that is dropped or
    /// forgotten leaves the queue as it was: its WQEs, written past the
    /// doorbell record, are overwritten by the next ones.
    #[inline(always)]
    pub(crate) fn start_batch(&mut self) -> SqBatch<'_> {
        self.start_batch_with(|rules| *rules)
    }

    /// [`Mlx5Sq::start_batch`] with the queue's settings held as `rules`
    /// gives them: copied or by reference (see [`Writer`]).
    #[inline(always)]
    pub(super) fn start_batch_with<'q, R>(
        &'q mut self,
        rules: impl FnOnce(&'q SqRules) -> R,
    ) -> SqBatch<'q, R> {
        let Mlx5Sq { shape, posted } = self;
        SqBatch {
            w: shape.writer(rules),
            shape,
            cur: posted.cur_post,
            head: posted.head,
            room: shape.room(posted.head),
            last: Last {
                at: posted.cur_post,
                ds: 0,
                head: [0; 8],
                inline: false,
            },
            posted,
        }
    }
}

/// A send batch being written (`ibv_wr_start` .. `ibv_wr_complete`): WQEs
/// written past the doorbell record, invisible to the device until
/// [`SqBatch::complete`].
#[derive(Debug)]
pub(crate) struct SqBatch<'q, R = SqRules> {
    w: Writer<'q, R>,
    shape: &'q SqShape,
    /// WQEBB counter of the next WQE.
    cur: u32,
    /// Work requests written, the batch's included.
    head: u32,
    /// Requests the queue takes before the poller's tail is read again.
    room: u32,
    /// The last WQE written.
    last: Last,
    /// The queue's counters: what the device was given, updated at
    /// complete.
    posted: &'q mut Posted,
}

impl<R: Borrow<SqRules>> SqBatch<'_, R> {
    /// Checks and writes one WQE, as [`Mlx5Sq::post`] does for each of its
    /// requests; the doorbell record stays where it was, so the device
    /// does not see it before [`SqBatch::complete`]. On an error nothing of
    /// it is taken. `known`: what the caller's types already checked.
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        wr: &SendWr<'_>,
        av_of: impl for<'w> Fn(&SendWr<'w>) -> Result<&'w Av, PostErrorKind>,
        known: Known,
    ) -> Result<(), PostErrorKind> {
        // The room first: a full queue's next blocks may still be read by
        // the device, so nothing may be written there.
        if self.room == 0 {
            self.room = self.shape.room(self.head);
            if self.room == 0 {
                return Err(PostErrorKind::QueueFull);
            }
        }
        let last = self.w.write_wqe(wr, &av_of, self.cur, self.head, known)?;
        self.last = last;
        self.room -= 1;
        self.head = self.head.wrapping_add(1);
        self.cur = self.cur.wrapping_add(wqebbs(last.ds));
        Ok(())
    }

    /// Writes a WQE the program built (`mlx5dv_wr_raw_wqe`), as the next
    /// request of the batch: its ctrl segment's DS (`qpn_ds & 0x3f`) says
    /// how many 16-byte units of `wqe` it has. Refused (nothing taken): a
    /// full queue; a DS of 0, more than `wqe` holds, or more than this
    /// queue's WQEs were sized for (the ring's room is counted in WQEs of
    /// that size, so a larger one could overwrite one the device reads).
    pub(crate) fn push_raw(&mut self, wr_id: u64, wqe: &[u8]) -> Result<(), PostErrorKind> {
        let ds = wqe.get(4..8).map_or(0, |b| u32::from(b[3] & 0x3f));
        if ds == 0 || ds as usize * 16 > wqe.len() {
            return Err(PostErrorKind::OpNotSupported(
                "a raw WQE's ctrl segment must count its 16-byte units (qpn_ds & 0x3f), \
                 all of them in the buffer given",
            ));
        }
        if ds > self.shape.max_ds() {
            return Err(PostErrorKind::OpNotSupported(
                "a raw WQE larger than the WQEs the send queue was sized for",
            ));
        }
        if self.room == 0 {
            self.room = self.shape.room(self.head);
            if self.room == 0 {
                return Err(PostErrorKind::QueueFull);
            }
        }
        let last = self.w.write_raw(wqe, ds, self.cur, wr_id, self.head);
        self.last = last;
        self.room -= 1;
        self.head = self.head.wrapping_add(1);
        self.cur = self.cur.wrapping_add(wqebbs(ds));
        Ok(())
    }

    /// Ends the batch (`ibv_wr_complete`) of `nreq` requests (the pushes
    /// that succeeded, as the caller counts them: counted here too, the
    /// count would be reloaded from the queue after the WQE stores): the
    /// queue takes its WQEs and the doorbell is rung once for them, if
    /// there are any.
    #[inline(always)]
    pub(crate) fn complete(&mut self, nreq: usize) {
        debug_assert_eq!(nreq, self.head.wrapping_sub(self.posted.head) as usize);
        if nreq != 0 {
            *self.posted = Posted {
                cur_post: self.cur,
                head: self.head,
            };
            self.shape.ring(self.cur, self.last, nreq, self.w.q);
        }
    }
}
