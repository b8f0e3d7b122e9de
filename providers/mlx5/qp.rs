//! mlx5 QPs: queue sizing as the kernel checks it, the per-QP completion
//! state CQs find by resource number, and the table they find it in.
//!
//! Sizing follows rdma-core `providers/mlx5/verbs.c` (`mlx5_calc_send_wqe`,
//! `mlx5_calc_sq_size`, `mlx5_calc_rcv_wqe`, `mlx5_calc_rq_size`,
//! `mlx5_calc_wq_size`) and is what the kernel accepts
//! (`drivers/infiniband/hw/mlx5/qp.c` `set_rq_size`, `set_user_buf_size`:
//! power-of-two counts, the RQ first in the buffer, the SQ after it). The
//! send overhead counts only the operations this library posts: no memory
//! windows or UMR (rdma-core reserves room for them on RC, which only
//! lowers `max_inline_data`).

use std::{
    collections::{HashMap, HashSet},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
};

use super::{
    rq::{RqTrack, SrqTrack},
    sq::{SqGeometry, SqTrack},
    wqe::{DS, SEND_WQE_BB},
};
use crate::{
    error::{Error, ErrorKind, Result},
    QpCap, QpType,
};

/// `MLX5_IB_DEFAULT_UIDX`: "no user index" (CQE v0 contexts).
pub(crate) const NO_UIDX: u32 = 0x00ff_ffff;

/// The queue geometry of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpGeometry {
    pub(crate) sq: SqGeometry,
    /// RQ WQEs (0: no RQ, the QP uses an SRQ or asked for no receives).
    pub(crate) rq_wqe_cnt: u32,
    /// log2 of the RQ stride.
    pub(crate) rq_wqe_shift: u32,
    /// Bytes of queue buffer (RQ then SQ).
    pub(crate) buf_len: usize,
}

/// Bytes of a send WQE before its data, for the operations a QP type
/// carries (`_sq_overhead` without memory windows).
fn sq_overhead(qp_type: QpType) -> usize {
    match qp_type {
        // ctrl + raddr + atomic
        QpType::Rc => 48,
        // ctrl + raddr
        QpType::Uc => 32,
        // ctrl + datagram (address vector)
        _ => 64,
    }
}

fn invalid(detail: String) -> Error {
    Error::new("ibv_create_qp", ErrorKind::InvalidArgument, detail)
}

/// Sizes a QP's queues; errors name the capability that does not fit.
pub(crate) fn geometry(
    qp_type: QpType,
    cap: &QpCap,
    has_srq: bool,
    max_sq_desc: u32,
    max_rq_desc: u32,
) -> Result<QpGeometry> {
    if !matches!(qp_type, QpType::Rc | QpType::Uc | QpType::Ud) {
        return Err(invalid(format!(
            "QP type {qp_type:?}: the mlx5 provider creates RC, UC and UD QPs"
        )));
    }
    let max_sq_desc = max_sq_desc as usize;
    // Receive side first: it sits at offset 0.
    let (rq_wqe_cnt, rq_wqe_shift, rq_len) = if has_srq || cap.max_recv_wr == 0 {
        (0, 0, 0)
    } else {
        let stride = (DS * cap.max_recv_sge.max(1) as usize).next_power_of_two();
        if stride > max_rq_desc as usize {
            return Err(invalid(format!(
                "max_recv_sge {} needs {stride}-byte receive WQEs; the device takes {max_rq_desc}",
                cap.max_recv_sge
            )));
        }
        let len = ((cap.max_recv_wr as usize).next_power_of_two() * stride).max(SEND_WQE_BB);
        ((len / stride) as u32, stride.trailing_zeros(), len)
    };
    let sq = if cap.max_send_wr == 0 {
        SqGeometry {
            offset: rq_len,
            wqe_cnt: 0,
            max_post: 0,
            max_gs: 0,
            max_inline: 0,
        }
    } else {
        let overhead = sq_overhead(qp_type);
        let inline = if cap.max_inline_data > 0 {
            overhead + (4 + cap.max_inline_data as usize).next_multiple_of(DS)
        } else {
            0
        };
        let max_gather = max_sq_desc.saturating_sub(overhead) / DS;
        if cap.max_send_sge as usize > max_gather {
            return Err(invalid(format!(
                "max_send_sge {} is more than the {max_gather} data segments a {max_sq_desc}-byte \
                 send WQE holds",
                cap.max_send_sge
            )));
        }
        let size = (overhead + cap.max_send_sge as usize * DS).max(inline);
        if size > max_sq_desc {
            return Err(invalid(format!(
                "max_inline_data {} needs a {size}-byte send WQE; the device takes {max_sq_desc}",
                cap.max_inline_data
            )));
        }
        let wqe_size = size.next_multiple_of(SEND_WQE_BB);
        let wq_len = (cap.max_send_wr as usize)
            .checked_mul(wqe_size)
            .filter(|&l| l <= 1 << 30)
            .ok_or_else(|| invalid(format!("max_send_wr {} is too large", cap.max_send_wr)))?
            .next_power_of_two();
        SqGeometry {
            offset: rq_len,
            wqe_cnt: (wq_len / SEND_WQE_BB) as u32,
            max_post: (wq_len / wqe_size) as u32,
            max_gs: cap.max_send_sge,
            max_inline: (wqe_size - overhead - 4) as u32,
        }
    };
    Ok(QpGeometry {
        sq,
        rq_wqe_cnt,
        rq_wqe_shift,
        buf_len: rq_len + sq.wqe_cnt as usize * SEND_WQE_BB,
    })
}

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
    alive: AtomicBool,
    pub(crate) sq: Arc<SqTrack>,
    pub(crate) rq: Option<Arc<RqTrack>>,
    pub(crate) srq: Option<Arc<SrqTrack>>,
}

impl QpTrack {
    pub(crate) fn new(
        rsn: u32,
        sq: Arc<SqTrack>,
        rq: Option<Arc<RqTrack>>,
        srq: Option<Arc<SrqTrack>>,
    ) -> Self {
        QpTrack {
            rsn,
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

    fn cap(send: u32, recv: u32, ssge: u32, rsge: u32, inline: u32) -> QpCap {
        QpCap {
            max_send_wr: send,
            max_recv_wr: recv,
            max_send_sge: ssge,
            max_recv_sge: rsge,
            max_inline_data: inline,
        }
    }

    /// Worked by hand from rdma-core's formulas (RC overhead 48 here).
    #[test]
    fn sizes_match_rdma_core_formulas() {
        let g = geometry(QpType::Rc, &cap(64, 32, 2, 2, 64), false, 1024, 512).unwrap();
        // RQ: stride 32, 32 WQEs = 1024 bytes.
        assert_eq!((g.rq_wqe_cnt, g.rq_wqe_shift), (32, 5));
        // SQ: max(48 + 32, 48 + align(68, 16) = 128) = 128 -> 128-byte WQEs,
        // 64 * 128 = 8192 bytes = 128 WQEBBs, 64 posts, inline 128-48-4.
        assert_eq!(g.sq.offset, 1024);
        assert_eq!(
            (g.sq.wqe_cnt, g.sq.max_post, g.sq.max_inline),
            (128, 64, 76)
        );
        assert_eq!(g.buf_len, 1024 + 8192);
        // UD: overhead 64, 1 SGE: 80 -> 128.
        let g = geometry(QpType::Ud, &cap(1, 1, 1, 1, 0), false, 1024, 512).unwrap();
        assert_eq!((g.sq.wqe_cnt, g.sq.max_post, g.sq.max_inline), (2, 1, 60));
        assert_eq!((g.rq_wqe_cnt, g.rq_wqe_shift), (4, 4));
        // SRQ: no RQ.
        let g = geometry(QpType::Rc, &cap(1, 8, 1, 1, 0), true, 1024, 512).unwrap();
        assert_eq!(g.rq_wqe_cnt, 0);
        assert_eq!(g.sq.offset, 0);
    }

    #[test]
    fn sizes_beyond_the_device_are_named() {
        let e = geometry(QpType::Rc, &cap(1, 1, 100, 1, 0), false, 1024, 512).unwrap_err();
        assert!(e.to_string().contains("max_send_sge 100"), "{e}");
        let e = geometry(QpType::Rc, &cap(1, 1, 1, 1, 2000), false, 1024, 512).unwrap_err();
        assert!(e.to_string().contains("max_inline_data 2000"), "{e}");
        let e = geometry(QpType::Rc, &cap(1, 1, 1, 64, 0), false, 1024, 512).unwrap_err();
        assert!(e.to_string().contains("max_recv_sge 64"), "{e}");
    }

    #[test]
    fn user_indexes_are_not_reused_at_once() {
        let r = Resources::default();
        let a = r.alloc_uidx().unwrap();
        r.free_uidx(a);
        let b = r.alloc_uidx().unwrap();
        assert_ne!(a, b);
    }
}
