//! mlx5 QPs: the per-QP completion state CQs find by resource number, and
//! the table they find it in. Queue sizing is `qp_size.rs`.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
};

use super::{
    rq::{RqTrack, SrqTrack},
    sq::SqTrack,
};
use crate::error::{Error, ErrorKind, Result};

/// `MLX5_IB_DEFAULT_UIDX`: "no user index" (CQE v0 contexts).
pub(crate) const NO_UIDX: u32 = 0x00ff_ffff;

/// A receive queue's tail: how far completions have freed it, published by
/// the poller of the CQ it completes on, tagged with the QP's resets. It
/// serves the receive queue only: the send queue's work-request counter
/// runs on across resets and its tail only moves forward, which keeps the
/// send path free of the tag's check ("Resets" in `sq.rs`). A receive's
/// CQE does not name its WQE: the poller finds it at the tail, which so
/// follows the ring back to 0.
///
/// A RESET restarts the queue: the poster's counter goes back to 0, and
/// so must the tail. The poller runs without a lock, so a poller that took
/// a CQE before the reset may store the tail it computed from it after the
/// reset; an untagged tail would then say the restarted queue is full (the
/// stale tail ahead of the poster's counter) or that WQEs the device has
/// not executed are free (behind it). So the word holds `(epoch << 32) |
/// count`, the epoch being the resets the QP has been through
/// ([`Tail::begin_reset`]), and the count advances in the lower half
/// without carrying into the tag. The poster counts as freed only a tail of
/// its own epoch; one of another epoch is 0, nothing freed yet in this one
/// ([`TailReader`]).
///
/// After the queue's creation only the poller writes the word: a reset
/// asks it to restart the count in the reset's epoch ([`Tail::restart`],
/// through the CQ's clean list) rather than storing it itself, so nothing
/// the poller computed before the restart can be stored after it. The
/// poller keeps the tag it finds ([`Tail::advance`]), which is the epoch of
/// every CQE of the queue it takes (for resets made one after the other):
/// a CQE of epoch `e` is written after the poster restarted in `e`, so
/// after reset `e` pushed its request, which the poller takes before the
/// CQE (`Mlx5Cq::poll`); and before reset `e + 1` reached the device, so
/// before the index up to which that reset's request drops the QP's CQEs:
/// if the poller has taken that request, it drops the CQE. (The epoch
/// wraps after 2^32 resets; a stale tail would have to survive all of them
/// to be taken for a current one.)
#[derive(Debug, Default)]
pub(crate) struct Tail {
    /// `(epoch << 32) | count`.
    word: crate::sync::AtomicU64,
    /// The QP's resets so far: the latest epoch.
    resets: crate::sync::AtomicU32,
}

/// The upper half of a tagged tail: its epoch.
const EPOCH_MASK: u64 = !0xffff_ffff;

impl Tail {
    /// The tagged tail (the poller, its only writer: relaxed).
    #[inline(always)]
    pub(crate) fn load(&self) -> u64 {
        self.word.load(Ordering::Relaxed)
    }

    /// The tagged tail of `tagged`'s epoch whose count is `count`.
    #[inline(always)]
    pub(crate) fn with_count(tagged: u64, count: u32) -> u64 {
        (tagged & EPOCH_MASK) | u64::from(count)
    }

    /// Publishes the tagged tail `t` (the poller, after reading the slots
    /// of the work requests it frees).
    #[inline(always)]
    pub(crate) fn store(&self, t: u64) {
        self.word.store(t, Ordering::Release);
    }

    /// Publishes the count `count` in the tail's epoch (the poller; the
    /// receive queue's run stores the tag it read instead, `RqRun`, so
    /// only the tests' pollers use this).
    #[cfg(test)]
    #[inline(always)]
    pub(crate) fn advance(&self, count: u32) {
        self.store(Self::with_count(self.load(), count));
    }

    /// A new epoch starts (`on_qp_state`, after the kernel moved the QP to
    /// RESET, before it asks the CQs to restart the tail and before the
    /// state is published to posts, which read the new epoch); returns it,
    /// for the restart request.
    pub(crate) fn begin_reset(&self) -> u32 {
        self.resets.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
    }

    /// The latest epoch, for the poster restarting its counter: acquire,
    /// though the gate's acquire already orders it after the reset's
    /// increment.
    fn epoch(&self) -> u32 {
        self.resets.load(Ordering::Acquire)
    }

    /// The count back to 0 in epoch `epoch` (the poller, when it takes the
    /// clean request of the reset that began it). Never back to an older
    /// epoch: requests of resets made at once on two threads may be pushed
    /// in either order.
    pub(crate) fn restart(&self, epoch: u32) {
        let current = (self.load() >> 32) as u32;
        if epoch.wrapping_sub(current) as i32 > 0 {
            self.store(u64::from(epoch) << 32);
        }
    }
}

/// The poster's side of a [`Tail`]: the epoch its counter counts in, and
/// whether it has seen the tail in that epoch yet.
///
/// Until it has, a tail of another epoch counts as nothing freed (the
/// poller has not restarted it yet, or stored a stale tail before it did).
/// Once it has, the epoch needs no more checking: the poller, the tail's
/// only writer, stored every tail of the epochs before the restart before
/// the restart itself, so in the word's modification order they all come
/// before the value this thread has read, and a later load of the same
/// word by the same thread cannot return them (coherence). The check is a
/// flag then, tested on the poster's path, the comparison out of line.
/// (The tail may move on to a later epoch, a reset the poster has not yet
/// restarted for; the QP is in RESET then, and the device executes nothing
/// it posts until it restarts.)
#[derive(Debug)]
pub(crate) struct TailReader {
    epoch: u32,
    /// Whether the tail was seen in `epoch` (only the poster reads and
    /// writes it: an atomic, as [`TailReader::freed`] takes `&self`).
    seen: crate::sync::AtomicBool,
}

impl TailReader {
    /// The reader of a new queue's tail (epoch 0: no tail of another epoch
    /// exists).
    pub(crate) fn new(tail: &Tail) -> Self {
        TailReader {
            epoch: tail.epoch(),
            seen: crate::sync::AtomicBool::new(true),
        }
    }

    /// Work requests the poller freed in this reader's epoch; 0 if the
    /// tail is of another. Acquire: a poster that sees the count may write
    /// the slots it frees (the poller read them before its release store).
    #[inline(always)]
    pub(crate) fn freed(&self, tail: &Tail) -> u32 {
        if !self.seen.load(Ordering::Relaxed) {
            return self.freed_unseen(tail);
        }
        tail.word.load(Ordering::Acquire) as u32
    }

    /// [`TailReader::freed`] before the tail was seen in the epoch.
    #[cold]
    #[inline(never)]
    fn freed_unseen(&self, tail: &Tail) -> u32 {
        let t = tail.word.load(Ordering::Acquire);
        if (t >> 32) as u32 != self.epoch {
            return 0;
        }
        self.seen.store(true, Ordering::Relaxed);
        t as u32
    }

    /// The poster restarts its counter, in the latest epoch.
    pub(crate) fn restart(&mut self, tail: &Tail) {
        self.epoch = tail.epoch();
        self.seen.store(false, Ordering::Relaxed);
    }
}

/// A QP's completion side, found by CQs from a CQE's resource number.
#[derive(Debug)]
pub(crate) struct QpTrack {
    /// User index (CQE v1) or QP number (v0): what CQEs name it by.
    pub(crate) rsn: u32,
    /// The QP number, which work completions carry (a polling session's
    /// buffer drops the completions of a destroyed or reset QP by it).
    pub(crate) qp_num: u32,
    alive: AtomicBool,
    pub(crate) sq: Arc<SqTrack>,
    pub(crate) rq: Option<Arc<RqTrack>>,
    pub(crate) srq: Option<Arc<SrqTrack>>,
}

impl QpTrack {
    pub(crate) fn new(
        rsn: u32,
        qp_num: u32,
        sq: Arc<SqTrack>,
        rq: Option<Arc<RqTrack>>,
        srq: Option<Arc<SrqTrack>>,
    ) -> Self {
        QpTrack {
            rsn,
            qp_num,
            alive: AtomicBool::new(true),
            sq,
            rq,
            srq,
        }
    }

    /// Whether the QP is still registered (a CQ's cached QP is checked
    /// with it). Relaxed: nothing read after it depends on what its
    /// destroyer wrote before clearing it (the track's memory lives as long
    /// as the `Arc`), and an acquire load would be no fresher; the CQEs a
    /// destroyed QP left behind are dropped by the CQ's clean list, whose
    /// taking also clears the cache.
    #[inline(always)]
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// The work request of a receive completion.
    #[inline]
    pub(crate) fn complete_recv(&self, wqe_counter: u16) -> u64 {
        match (&self.srq, &self.rq) {
            (Some(srq), _) => srq.complete(wqe_counter),
            (None, Some(rq)) => rq.complete(),
            (None, None) => 0,
        }
    }
}

/// The context's table of live QPs by resource number, and the user
/// indexes handed out (`mlx5_store_uidx`).
#[derive(Debug, Default)]
pub(crate) struct Resources {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    qps: HashMap<u32, Arc<QpTrack>>,
    /// The next user index to try.
    next_uidx: u32,
    uidx_used: HashSet<u32>,
}

impl Resources {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A free user index (24 bits, never `NO_UIDX`), handed out round robin
    /// so a destroyed QP's index is not reused at once.
    pub(crate) fn alloc_uidx(&self) -> Result<u32> {
        let mut t = self.lock();
        for _ in 0..NO_UIDX {
            let u = t.next_uidx;
            t.next_uidx = (u + 1) % NO_UIDX;
            if t.uidx_used.insert(u) {
                return Ok(u);
            }
        }
        Err(Error::new(
            "ibv_create_qp",
            ErrorKind::InvalidArgument,
            "all 2^24 - 1 mlx5 user indexes are in use",
        ))
    }

    /// Returns a user index.
    pub(crate) fn free_uidx(&self, uidx: u32) {
        self.lock().uidx_used.remove(&uidx);
    }

    /// Registers a created QP.
    pub(crate) fn insert(&self, track: Arc<QpTrack>) {
        self.lock().qps.insert(track.rsn, track);
    }

    /// Unregisters a QP: CQs no longer find it.
    pub(crate) fn remove(&self, track: &QpTrack) {
        track.alive.store(false, Ordering::Relaxed);
        let mut t = self.lock();
        if t.qps
            .get(&track.rsn)
            .is_some_and(|q| std::ptr::eq(&**q, track))
        {
            t.qps.remove(&track.rsn);
        }
    }

    /// The live QP with resource number `rsn`.
    pub(crate) fn find(&self, rsn: u32) -> Option<Arc<QpTrack>> {
        self.lock().qps.get(&rsn).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_indexes_are_not_reused_at_once() {
        let r = Resources::default();
        let a = r.alloc_uidx().unwrap();
        r.free_uidx(a);
        let b = r.alloc_uidx().unwrap();
        assert_ne!(a, b);
    }
}
