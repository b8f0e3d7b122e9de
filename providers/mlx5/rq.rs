//! mlx5 receive queues and SRQs: receive WQEs and their doorbell records.
//!
//! RQ (rdma-core `qp.c` `mlx5_post_recv`): a WQE is a list of data segments
//! (zero-length SGEs skipped) ended, when shorter than the stride, by a
//! terminator segment (`lkey = MLX5_INVALID_LKEY`); after the batch, a
//! to-device barrier and `db[0] = head & 0xffff`, counted in WQEs. RQ
//! completions come back in order, so the poller takes work-request ids
//! from its tail.
//!
//! SRQ (`srq.c`): a WQE is a 16-byte next segment (`next_wqe_index`) and
//! data segments; free WQEs form a list through `next_wqe_index` whose tail
//! is a sentinel that is never posted (one WQE fewer than the queue holds).
//! Posting takes WQEs from the head; a completion, which names the WQE by
//! index, links it after the tail. The doorbell record is a 16-bit counter
//! of WQEs posted. Poster and poller may be different threads: the list is
//! under a mutex, as rdma-core takes the SRQ's spinlock.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, Mutex, MutexGuard,
};

use super::{
    buf::{QueueBuf, Units, UnitsView},
    qp::{Tail, TailReader},
    slots::MaskedSlots,
    wqe::{self, DS},
};
use crate::{
    providers::barrier,
    wr::{PostError, PostErrorKind, RecvWr},
};

/// Writes the scatter list of one receive WQE from unit `u` (a stride of
/// `max_gs` segments): the non-empty SGEs, then a terminator if there is room.
#[inline]
fn put_scatter(q: &Units, u: u32, max_gs: u32, wr: &RecvWr<'_>) {
    let mut j = 0u32;
    for s in wr.sges {
        if s.length != 0 {
            q.put(u + j, wqe::data(s.length, s.lkey, s.addr));
            j += 1;
        }
    }
    if j < max_gs {
        q.put(u + j, wqe::recv_terminator());
    }
}

/// The completion side of a receive queue (shared with the poller).
#[derive(Debug)]
pub(crate) struct RqTrack {
    mask: u32,
    wrid: Box<[AtomicU64]>,
    /// Receives completed, tagged with the epoch ([`Tail`]).
    pub(crate) tail: Tail,
}

impl RqTrack {
    pub(crate) fn new(wqe_cnt: u32) -> Self {
        RqTrack {
            mask: wqe_cnt.max(1) - 1,
            wrid: (0..wqe_cnt.max(1)).map(|_| AtomicU64::new(0)).collect(),
            tail: Tail::default(),
        }
    }

    /// The slots, for taking a run of completions ([`RqSlots`]); `None`
    /// never happens (`new` makes `mask + 1` of them).
    #[inline(always)]
    pub(crate) fn slots(&self) -> Option<RqSlots<'_>> {
        MaskedSlots::new(&self.wrid, self.mask)
    }

    /// Frees the queue up to the tagged tail `tail` (the poller, after
    /// reading the `wr_id`s of the receives before it from [`RqSlots`]).
    #[inline(always)]
    pub(crate) fn free(&self, tail: u64) {
        self.tail.store(tail);
    }

    /// The work request of the oldest outstanding receive, now completed.
    /// Its `wr_id` is read before the slot is freed: once the release store
    /// of the tail is seen (acquire, in `post`), the poster may write the
    /// slot again.
    #[inline]
    pub(crate) fn complete(&self) -> u64 {
        let Some(mut run) = self.run() else {
            return 0;
        };
        let wr_id = run.take(0);
        run.finish();
        wr_id
    }

    /// Completes a run of receives ([`RecvRun`]); `None` never happens.
    /// The run counts in the tail's lower half and keeps its tag.
    #[inline(always)]
    pub(crate) fn run(&self) -> Option<RqRun<'_>> {
        let tagged = self.tail.load();
        Some(RqRun {
            track: self,
            slots: self.slots()?,
            tagged,
            tail: tagged as u32,
        })
    }
}

/// The `wr_id` slots of a receive queue or an SRQ ([`MaskedSlots`]).
pub(crate) type RqSlots<'a> = MaskedSlots<'a, AtomicU64>;

impl RqSlots<'_> {
    /// The `wr_id` of receive number `n` (every masked counter indexes a
    /// slot, so the 0 for a missing one does not happen).
    #[inline(always)]
    pub(crate) fn wr_id(self, n: u32) -> u64 {
        self.at(n).map_or(0, |w| w.load(Ordering::Relaxed))
    }
}

/// The receive queue of an mlx5 QP (the poster's side).
#[derive(Debug)]
pub(crate) struct Mlx5Rq {
    /// The queue in 16-byte units (it starts the QP buffer).
    units: Units,
    wqe_cnt: u32,
    wqe_shift: u32,
    max_gs: u32,
    head: u32,
    /// The poster's view of the tail: the epoch `head` counts in.
    freed: TailReader,
    pub(crate) track: Arc<RqTrack>,
}

impl Mlx5Rq {
    /// A receive queue at offset 0 of the QP buffer; `None` if it does
    /// not fit the buffer.
    pub(crate) fn new(
        buf: Arc<QueueBuf>,
        wqe_cnt: u32,
        wqe_shift: u32,
        track: Arc<RqTrack>,
    ) -> Option<Self> {
        let units = Units::new(buf, 0, wqe_cnt.checked_shl(wqe_shift.checked_sub(4)?)?)?;
        Some(Mlx5Rq {
            units,
            wqe_cnt,
            wqe_shift,
            max_gs: (1u32 << wqe_shift) / DS as u32,
            head: 0,
            freed: TailReader::new(&track.tail),
            track,
        })
    }

    /// Restarts the queue (the QP went through RESET) in the QP's current
    /// epoch: until the poller restarts the tail in it, the tail of the
    /// epoch before counts as nothing freed ([`Tail`]).
    pub(crate) fn reset(&mut self) {
        self.head = 0;
        self.freed.restart(&self.track.tail);
    }

    /// How many more receives fit: a tail of another epoch frees nothing
    /// of this one ([`TailReader`]).
    #[inline(always)]
    fn room(&self) -> u32 {
        let outstanding = self.head.wrapping_sub(self.freed.freed(&self.track.tail));
        self.wqe_cnt.saturating_sub(outstanding)
    }

    /// Writes receive WQEs and updates the doorbell record once. The tail
    /// is read again only when the room last read is used up (the poller
    /// only frees more).
    #[inline]
    pub(crate) fn post(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let mut result = Ok(());
        let start = self.head;
        let mut room = self.room();
        for (index, wr) in wrs.iter().enumerate() {
            if room == 0 {
                room = self.room();
                if room == 0 {
                    result = Err(PostError {
                        index,
                        kind: PostErrorKind::QueueFull,
                    });
                    break;
                }
            }
            if wr.sges.len() > self.max_gs as usize {
                result = Err(PostError {
                    index,
                    kind: PostErrorKind::TooManySges {
                        given: wr.sges.len(),
                        max: self.max_gs,
                    },
                });
                break;
            }
            let idx = self.head & (self.wqe_cnt - 1);
            put_scatter(&self.units, idx << (self.wqe_shift - 4), self.max_gs, wr);
            self.track.wrid[idx as usize].store(wr.wr_id, Ordering::Relaxed);
            self.head = self.head.wrapping_add(1);
            room -= 1;
        }
        if self.head != start {
            barrier::udma_to_device_barrier();
            self.units.buf().set_dbrec(0, self.head & 0xffff);
        }
        result
    }
}

/// The free list of an SRQ's WQEs.
#[derive(Debug)]
struct FreeList {
    head: u32,
    tail: u32,
}

/// An SRQ's state shared by its poster and the CQs that complete it.
#[derive(Debug)]
pub(crate) struct SrqTrack {
    /// The queue in 16-byte units.
    units: Units,
    wqe_cnt: u32,
    wqe_shift: u32,
    wrid: Box<[AtomicU64]>,
    list: Mutex<FreeList>,
}

/// An SRQ's direct view (`mlx5dv_srq`): queue address, doorbell record
/// address, stride, free-list head and tail.
pub(crate) type SrqViewParts = (u64, u64, u32, u32, u32);

impl SrqTrack {
    /// The parts of the SRQ's direct view, the free list as it is now.
    pub(crate) fn dv_view(&self) -> SrqViewParts {
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        let buf = self.units.queue();
        (
            buf.addr(),
            buf.db_addr(),
            1 << self.wqe_shift,
            list.head,
            list.tail,
        )
    }

    /// Links every WQE to the next (`mlx5_alloc_srq_buf`); the last is the
    /// sentinel. `None` if `wqe_cnt` WQEs of `1 << wqe_shift` bytes do not
    /// fit the buffer.
    pub(crate) fn new(buf: Arc<QueueBuf>, wqe_cnt: u32, wqe_shift: u32) -> Option<Self> {
        let units = Units::new(buf, 0, wqe_cnt.checked_shl(wqe_shift.checked_sub(4)?)?)?;
        for i in 0..wqe_cnt {
            let next = ((i + 1) & (wqe_cnt - 1)) as u16;
            units.put(i << (wqe_shift - 4), wqe::srq_next(next));
        }
        Some(SrqTrack {
            units,
            wqe_cnt,
            wqe_shift,
            wrid: (0..wqe_cnt).map(|_| AtomicU64::new(0)).collect(),
            list: Mutex::new(FreeList {
                head: 0,
                tail: wqe_cnt - 1,
            }),
        })
    }

    fn next_of(&self, idx: u32) -> u32 {
        let seg = self.units.get(idx << (self.wqe_shift - 4)).bytes();
        u32::from(u16::from_be_bytes([seg[2], seg[3]])) & (self.wqe_cnt - 1)
    }

    fn lock(&self) -> MutexGuard<'_, FreeList> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The work request of completed WQE `wqe_counter`, whose WQE goes
    /// back on the free list (`mlx5_free_srq_wqe`).
    #[inline]
    pub(crate) fn complete(&self, wqe_counter: u16) -> u64 {
        let Some(mut run) = self.run() else {
            return 0;
        };
        let wr_id = run.take(wqe_counter);
        run.finish();
        wr_id
    }

    /// Completes a run of receives ([`RecvRun`]), under the free list's
    /// lock, taken here and held until the run ends (rdma-core takes the
    /// SRQ's lock per completion); `None` never happens (`new` makes
    /// `wqe_cnt` slots).
    #[inline(always)]
    pub(crate) fn run(&self) -> Option<SrqRun<'_>> {
        let wrid = MaskedSlots::new(&self.wrid, self.wqe_cnt - 1)?;
        let list = self.lock();
        Some(SrqRun {
            tail: list.tail,
            list,
            units: self.units.view(),
            wrid,
            unit_shift: self.wqe_shift - 4,
        })
    }
}

/// Where a run of receive completions the poller takes in a row gets their
/// work requests from, and what it gives back when the run ends.
pub(crate) trait RecvRun {
    /// The `wr_id` of the receive a CQE naming WQE `wqe_counter` completes
    /// (an RQ's completions come in order and do not need it).
    fn take(&mut self, wqe_counter: u16) -> u64;
    /// Hands the completed receives' WQEs back to the poster.
    fn finish(self);
}

/// A run of an RQ's completions: `wr_id`s from its tail, the tail
/// published once at the end, after the last was read (as in
/// [`RqTrack::complete`]), in the epoch it was read in: the count advances
/// in the lower half, without carrying into the tag ([`Tail`]).
#[derive(Debug)]
pub(crate) struct RqRun<'a> {
    track: &'a RqTrack,
    slots: RqSlots<'a>,
    /// The tagged tail the run started from.
    tagged: u64,
    /// The count so far.
    tail: u32,
}

impl RecvRun for RqRun<'_> {
    #[inline(always)]
    fn take(&mut self, _wqe_counter: u16) -> u64 {
        let wr_id = self.slots.wr_id(self.tail);
        self.tail = self.tail.wrapping_add(1);
        wr_id
    }

    #[inline(always)]
    fn finish(self) {
        if self.tail != self.tagged as u32 {
            self.track.free(Tail::with_count(self.tagged, self.tail));
        }
    }
}

/// A run of an SRQ's completions ([`SrqTrack::run`]): each completed WQE
/// linked after the free list's tail, whose value the run keeps in a local
/// (in a register over a poll's loop, where read and written through the
/// lock's guard it would be loaded and stored per completion) and stores
/// back when it ends, before the lock is released: in `Drop`, so that no
/// way out of a run (an early return, a panic) leaves the list's tail
/// behind the WQEs linked after it.
#[derive(Debug)]
pub(crate) struct SrqRun<'a> {
    list: MutexGuard<'a, FreeList>,
    tail: u32,
    units: UnitsView<'a>,
    wrid: RqSlots<'a>,
    /// log2 of the 16-byte units of a WQE.
    unit_shift: u32,
}

impl RecvRun for SrqRun<'_> {
    #[inline(always)]
    fn take(&mut self, wqe_counter: u16) -> u64 {
        let idx = u32::from(wqe_counter);
        let wr_id = self.wrid.wr_id(idx);
        let idx = idx & self.wrid.mask();
        self.units
            .put(self.tail << self.unit_shift, wqe::srq_next(idx as u16));
        self.tail = idx;
        wr_id
    }

    /// Ends the run (its `Drop`).
    #[inline(always)]
    fn finish(self) {}
}

impl Drop for SrqRun<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.list.tail = self.tail;
    }
}

/// An mlx5 SRQ (the poster's side).
#[derive(Debug)]
pub(crate) struct Mlx5Srq {
    pub(crate) track: Arc<SrqTrack>,
    max_gs: u32,
    counter: u16,
}

impl Mlx5Srq {
    pub(crate) fn new(track: Arc<SrqTrack>) -> Self {
        let max_gs = ((1u32 << track.wqe_shift) - DS as u32) / DS as u32;
        Mlx5Srq {
            track,
            max_gs,
            counter: 0,
        }
    }

    /// Writes receive WQEs to free WQEs and updates the doorbell record once.
    #[inline]
    pub(crate) fn post(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        let t = &*self.track;
        let mut result = Ok(());
        let start = self.counter;
        {
            let mut list = t.lock();
            for (index, wr) in wrs.iter().enumerate() {
                if wr.sges.len() > self.max_gs as usize {
                    result = Err(PostError {
                        index,
                        kind: PostErrorKind::TooManySges {
                            given: wr.sges.len(),
                            max: self.max_gs,
                        },
                    });
                    break;
                }
                if list.head == list.tail {
                    result = Err(PostError {
                        index,
                        kind: PostErrorKind::QueueFull,
                    });
                    break;
                }
                let idx = list.head;
                let next = t.next_of(idx);
                put_scatter(&t.units, (idx << (t.wqe_shift - 4)) + 1, self.max_gs, wr);
                t.wrid[idx as usize].store(wr.wr_id, Ordering::Relaxed);
                list.head = next;
                self.counter = self.counter.wrapping_add(1);
            }
        }
        if self.counter != start {
            barrier::udma_to_device_barrier();
            t.units.buf().set_dbrec(0, u32::from(self.counter));
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A completed SRQ WQE goes after the free list's tail, and the tail
    /// follows it, whether the run ends by `finish` or is dropped.
    #[test]
    fn an_srq_run_links_its_wqes_and_moves_the_tail_however_it_ends() {
        let buf = Arc::new(QueueBuf::new(8 * 64, "test SRQ").unwrap());
        let track = SrqTrack::new(buf, 8, 6).unwrap();
        track.wrid[3].store(33, Ordering::Relaxed);
        track.wrid[5].store(55, Ordering::Relaxed);
        let mut run = track.run().unwrap();
        assert_eq!(run.take(3), 33);
        assert_eq!(run.take(8 + 5), 55, "the WQE counter is masked");
        drop(run);
        assert_eq!(track.lock().tail, 5);
        // The sentinel (7) links to 3, 3 to 5.
        assert_eq!((track.next_of(7), track.next_of(3)), (3, 5));
        assert_eq!(track.complete(1), 0);
        assert_eq!(track.lock().tail, 1);
        assert_eq!(track.next_of(5), 1);
    }
}
