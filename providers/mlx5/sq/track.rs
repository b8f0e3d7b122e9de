//! The completion side of a send queue ([`SqTrack`]): which work request
//! each WQE was and how far completions have freed the queue, written by
//! the poster before the doorbell and read by the CQ's poller. Why the tail
//! only moves forward: "Resets" in `sq.rs`'s documentation.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::providers::mlx5::slots::MaskedSlots;

/// The completion side of a send queue, shared with the CQ that polls it:
/// which work request each WQE was, and how far completions have freed the
/// queue. Written by the poster before the doorbell, read by the poller
/// after the device completed the WQE (atomics: the two may be on
/// different threads).
#[derive(Debug)]
pub(crate) struct SqTrack {
    pub(super) mask: u32,
    pub(super) slots: Box<[SqSlot]>,
    /// Work requests completed (freed) so far: the poster's counter of the
    /// WQE completed last, plus one. It only moves forward ("Resets" in the
    /// module's documentation).
    pub(crate) tail: AtomicU32,
}

/// The slots of a [`SqTrack`] ([`MaskedSlots`]), as the poller takes them.
pub(crate) type Slots<'a> = MaskedSlots<'a, SqSlot>;

impl Slots<'_> {
    /// The work request of the WQE at `wqe_counter`, and the tail that
    /// frees the queue up to it, for [`SqTrack::free`] (the poller). The
    /// `wr_id` is read first: a poster that sees the new tail (acquire, in
    /// `room`) may write the slot again. `None` does not happen (every
    /// masked counter indexes a slot).
    /// The third value: whether the WQE was a raw one
    /// ([`SqSession::push_raw`]), whose completion is `WcOpcode::DRIVER2`.
    #[inline(always)]
    pub(crate) fn take(self, wqe_counter: u16) -> Option<(u64, u32, bool)> {
        let slot = self.at(u32::from(wqe_counter))?;
        Some((
            slot.wrid.load(Ordering::Relaxed),
            slot.head.load(Ordering::Relaxed).wrapping_add(1),
            slot.raw.load(Ordering::Relaxed),
        ))
    }
}

/// What the poller needs of one WQE (by its first WQEBB).
#[derive(Debug, Default)]
pub(crate) struct SqSlot {
    pub(super) wrid: AtomicU64,
    /// The poster's work-request counter when it wrote the WQE.
    pub(super) head: AtomicU32,
    /// The program wrote the WQE itself (`mlx5dv_wr_raw_wqe`): libmlx5
    /// completes it as `IBV_WC_DRIVER2` (its `wr_data[idx]`).
    pub(super) raw: AtomicBool,
}

impl SqTrack {
    pub(crate) fn new(wqe_cnt: u32) -> Self {
        let n = wqe_cnt.max(1) as usize;
        SqTrack {
            mask: wqe_cnt.max(1) - 1,
            slots: (0..n).map(|_| SqSlot::default()).collect(),
            tail: AtomicU32::new(0),
        }
    }

    /// The work request of the WQE at `wqe_counter`, and frees the queue up
    /// to it (a requester CQE completes every unsignaled WQE before it).
    #[inline]
    pub(crate) fn complete(&self, wqe_counter: u16) -> (u64, bool) {
        let (wr_id, tail, raw) = self.take(wqe_counter);
        self.free(tail);
        (wr_id, raw)
    }

    /// [`Slots::take`] of one WQE; with no slot (which does not happen)
    /// no work request and the tail unchanged.
    #[inline(always)]
    pub(crate) fn take(&self, wqe_counter: u16) -> (u64, u32, bool) {
        self.slots()
            .and_then(|s| s.take(wqe_counter))
            .unwrap_or_else(|| (0, self.tail.load(Ordering::Relaxed), false))
    }

    /// The slots (`None` never happens: `new` makes `mask + 1` of them).
    #[inline(always)]
    pub(crate) fn slots(&self) -> Option<Slots<'_>> {
        MaskedSlots::new(&self.slots, self.mask)
    }

    /// Frees the queue up to `tail` (the poller: the latest
    /// [`SqTrack::take`] gave; the poster at a restart: its counter), if
    /// that is ahead of the tail: a compare-exchange, so that a tail the
    /// poller computed before a reset and stores after the restart never
    /// takes the tail back ("Resets" in the module's documentation). Release:
    /// a poster that sees the tail may write the slots it frees (the poller
    /// read them before).
    #[inline(always)]
    pub(crate) fn free(&self, tail: u32) {
        let _ = self
            .tail
            .fetch_update(Ordering::Release, Ordering::Relaxed, |t| {
                ((tail.wrapping_sub(t) as i32) > 0).then_some(tail)
            });
    }

    /// Every WQE index from `from` (a counter) to `to`, for flushing.
    #[allow(dead_code)]
    pub(crate) fn mask(&self) -> u32 {
        self.mask
    }
}
