//! The poll loop of an mlx5 CQ (`ibv_poll_cq`, and the batches of
//! polling sessions, with the device's timestamps): runs of CQEs the
//! device handed over, one barrier per run, the clean requests of QPs
//! destroyed or reset taken after it, the CQEs turned into completions
//! (`parse.rs`), and the consumer index published (`dbrec[0]`).

use std::sync::atomic::Ordering;

use super::{parse::cqe_is_valid, Clean, CqCore, Mlx5Cq, Parser};
use crate::{
    providers::{
        barrier,
        mlx5::cqe::{cqe_opcode, Cqe64},
        SESSION_BATCH,
    },
    wc::WorkCompletion,
};

/// Where a poll puts the device's timestamp of each completion it writes:
/// nowhere ([`NoStamps`], `ibv_poll_cq`), or a slice beside the
/// completions (`stamps[i]` for `out[i]`, a CQ created with completion
/// timestamps). A type parameter passed by value, so the plain poll is
/// compiled as it was before timestamps (`S::ON` is a constant, and
/// `NoStamps` is no argument at all).
pub(crate) trait Stamps {
    /// Whether timestamps are kept.
    const ON: bool;
    /// The timestamp of completion `i` of the poll.
    fn set(&mut self, i: usize, ts: u64);
    /// Moves the timestamp of completion `from` to `to` (`to < from`: the
    /// completions in between were dropped).
    fn shift(&mut self, from: usize, to: usize);
}

/// No timestamps (every poll but a timestamped CQ's `start_poll`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NoStamps;

impl Stamps for NoStamps {
    const ON: bool = false;
    #[inline(always)]
    fn set(&mut self, _: usize, _: u64) {}
    #[inline(always)]
    fn shift(&mut self, _: usize, _: usize) {}
}

impl Stamps for &mut [u64] {
    const ON: bool = true;
    #[inline(always)]
    fn set(&mut self, i: usize, ts: u64) {
        if let Some(s) = self.get_mut(i) {
            *s = ts;
        }
    }
    #[inline(always)]
    fn shift(&mut self, from: usize, to: usize) {
        if let Some(&ts) = self.get(from) {
            self.set(to, ts);
        }
    }
}

impl Mlx5Cq {
    /// Takes the CQ's clean requests now, as the next poll would (the
    /// ring's side is the same: the poll drops the QPs' CQEs still in the
    /// ring as it meets them, and restarts the receive queues' tails here),
    /// and reports each request's QP number to `stale`: a polling session
    /// drops the completions of that QP it took off the ring before the
    /// request (`src/cq_ex.rs`). Only when [`CqCore::clean_flag`] is set.
    #[cold]
    #[inline(never)]
    pub(crate) fn take_cleans(&mut self, stale: &mut dyn FnMut(u32)) {
        let from = self.parser.cleaning.len();
        take_clean(&self.core, &mut self.parser);
        for c in self.parser.cleaning.get(from..).unwrap_or_default() {
            stale(c.qp_num);
        }
        // Requests whose CQEs are all behind the consumer index are done
        // (the poll prunes them the same way once it moved).
        let ci = self.ci;
        self.parser
            .cleaning
            .retain(|c| (c.before.wrapping_sub(ci) as i32) > 0);
    }

    /// Moves up to `out.len()` completions into `out`.
    ///
    /// Clean requests ([`CqCore::clean`]) are taken after each run's
    /// barrier, before any of its CQEs is read, not once when the poll
    /// starts: a poll that began before a QP was reset may meet the CQEs of
    /// the QP's new epoch, and must restart its receive queue's tail first
    /// (else it frees the new epoch's receives from the old epoch's tail).
    /// The chain that makes the check see the request: the resetter stores
    /// `clean_pending` with release, then publishes the reset to posts
    /// with release (the QP's gate word, `src/qp.rs`); the poster loads the
    /// gate with acquire before it writes any WQE of the new epoch, and
    /// rings its doorbell after `udma_to_device_barrier` and
    /// `mmio_wc_start` (cumulative barriers: every store the poster has
    /// seen, the request included, is visible before the doorbell); the
    /// device writes the CQE after it executed the WQE; the poller loads
    /// the CQE's ownership byte (acquire) and then
    /// `udma_from_device_barrier` (`providers/barrier.rs`: `lfence` on
    /// x86_64, `dmb oshld` on aarch64, orders the loads before it, the
    /// ownership bytes, before the loads after it) before loading
    /// `clean_pending`, which so cannot be older than the request. A relaxed
    /// load, one per run: the lock is taken only when it is set (cold).
    /// (A run whose check came before a reset may still read a slot the
    /// restarted poster wrote again: see "Resets" in `sq.rs`.)
    #[inline(always)]
    pub(crate) fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        self.poll_with(out, NoStamps)
    }

    /// One batch of a polling session ([`Provider::poll_cq_batch`]):
    /// [`Mlx5Cq::poll`] into the session's buffer, and with `stamps` the
    /// timestamp of `out[i]` into `stamps[i]` (`mlx5_cqe64`'s `timestamp`;
    /// 0 for a completion in error: an error CQE has none, `struct
    /// mlx5_err_cqe`). Copies of the poll of their own, compiled for the
    /// buffer's length.
    ///
    /// [`Provider::poll_cq_batch`]: crate::providers::Provider::poll_cq_batch
    #[inline(always)]
    pub(crate) fn poll_batch(
        &mut self,
        out: &mut [WorkCompletion; SESSION_BATCH],
        stamps: Option<&mut [u64; SESSION_BATCH]>,
    ) -> usize {
        match stamps {
            None => self.poll_batch_plain(out),
            Some(ts) => self.poll_batch_stamped(out, ts),
        }
    }

    /// [`Mlx5Cq::poll_batch`] without timestamps.
    #[inline(never)]
    fn poll_batch_plain(&mut self, out: &mut [WorkCompletion; SESSION_BATCH]) -> usize {
        self.poll_with(out, NoStamps)
    }

    /// [`Mlx5Cq::poll_batch`] with timestamps.
    #[inline(never)]
    fn poll_batch_stamped(
        &mut self,
        out: &mut [WorkCompletion; SESSION_BATCH],
        stamps: &mut [u64; SESSION_BATCH],
    ) -> usize {
        self.poll_with(out, &mut stamps[..])
    }

    /// [`Mlx5Cq::poll`] into `out` (a slice, or the session's array),
    /// keeping timestamps in `stamps`.
    ///
    /// The fast paths know nothing of timestamps: each CQE they take gives
    /// one completion, in order, so the timestamps of what they took are
    /// read afterwards, from the same CQEs (still the library's: the
    /// consumer index is published at the end of the poll).
    #[inline]
    fn poll_with<S: Stamps, O: AsMut<[WorkCompletion]> + ?Sized>(
        &mut self,
        out: &mut O,
        mut stamps: S,
    ) -> usize {
        let out = out.as_mut();
        let core = &*self.core;
        let Some(ring) = core.buf.cqes(core.geometry) else {
            return 0;
        };
        let ncqe = core.geometry.ncqe();
        let start = self.ci;
        let mut ci = start;
        let mut n = 0;
        while n < out.len() {
            // The run of CQEs the device has handed over, up to what `out`
            // still takes and the ring's end (so the owner bit the device
            // writes is the same for all): their ownership bytes first,
            // then one barrier for the whole run, then their bodies. Every
            // body load follows the barrier, which follows its own CQE's
            // ownership load: the ordering rdma-core gets with a barrier
            // per CQE (`mlx5_get_next_cqe`), at the cost of one per run.
            let run = ring.run(ci, (out.len() - n).min(ncqe as usize) as u32);
            let owner = u8::from(ci & ncqe != 0);
            let mut ready = 0;
            for cqe in run.iter(0, run.len()) {
                if !cqe_is_valid(cqe.op_own(), owner) {
                    break;
                }
                ready += 1;
            }
            if ready == 0 {
                break;
            }
            barrier::udma_from_device_barrier();
            // After the barrier: see the function's comment.
            if core.clean_pending.load(Ordering::Relaxed) {
                let from = self.parser.cleaning.len();
                take_clean(core, &mut self.parser);
                if n != 0 {
                    let taken = self.parser.cleaning.get(from..).unwrap_or_default();
                    n = drop_taken(taken, out.get_mut(..n).unwrap_or_default(), &mut stamps);
                }
            }
            let mut k = 0;
            while k < ready {
                // The common cases in tight loops (one copy per CQE
                // format, so the loop does not test it), then one CQE of
                // any kind (which may change the cached QP).
                let (k0, n0) = (k, n);
                k = if self.parser.cqe_v1 {
                    self.parser.fast_runs::<true>(run, k, ready, out, &mut n)
                } else {
                    self.parser.fast_runs::<false>(run, k, ready, out, &mut n)
                };
                if S::ON {
                    debug_assert_eq!((k - k0) as usize, n - n0, "one completion per CQE");
                    for (j, cqe) in run.iter(k0, k).enumerate() {
                        stamps.set(n0 + j, u64::from_be(cqe.word(6)));
                    }
                }
                if k >= ready {
                    break;
                }
                let (Some(cqe), Some(wc)) = (run.get(k), out.get_mut(n)) else {
                    break;
                };
                // Receive fields only for responder CQEs (opcodes 1..=4).
                let op = cqe.op_own() >> 4;
                let whole = Cqe64(cqe.read((1..=4).contains(&op)));
                let parsed = self.parser.parse(&whole, ci.wrapping_add(k), wc);
                if S::ON && parsed {
                    let failed = matches!(op, cqe_opcode::REQ_ERR | cqe_opcode::RESP_ERR);
                    stamps.set(n, if failed { 0 } else { whole.timestamp() });
                }
                n += usize::from(parsed);
                k += 1;
            }
            ci = ci.wrapping_add(k);
            if k < run.len() {
                break;
            }
        }
        if ci != start {
            self.ci = ci;
            self.core.buf.set_dbrec(0, ci & 0x00ff_ffff);
            self.core.ci.store(ci, Ordering::Release);
            if !self.parser.cleaning.is_empty() {
                self.parser
                    .cleaning
                    .retain(|c| (c.before.wrapping_sub(ci) as i32) > 0);
            }
        }
        n
    }
}

/// The completions of `out` (this poll's so far) of no QP `taken` names,
/// moved to its front in order with their timestamps; returns how many.
/// A QP destroyed or reset while the poll ran (its request taken between
/// two runs) may have completions in the runs before: they were written
/// before the request was taken, so all of that QP's are old (its new
/// epoch's CQEs come after the request, "Resets" in `sq.rs`).
#[cold]
#[inline(never)]
fn drop_taken<S: Stamps>(taken: &[Clean], out: &mut [WorkCompletion], stamps: &mut S) -> usize {
    let mut kept = 0;
    for i in 0..out.len() {
        if taken.iter().any(|c| c.qp_num == out[i].qp_num) {
            continue;
        }
        if kept != i {
            out[kept] = out[i];
            stamps.shift(i, kept);
        }
        kept += 1;
    }
    kept
}

/// Takes the CQ's clean requests into the poller's list, restarting the
/// tails of reset QPs' receive queues in the epochs the requests carry.
#[cold]
fn take_clean(core: &CqCore, parser: &mut Parser) {
    let mut list = core.clean.lock().unwrap_or_else(|p| p.into_inner());
    for req in list.drain(..) {
        if let Some(r) = req.restart {
            r.rq.tail.restart(r.epoch);
        }
        parser.cleaning.push(req.clean);
    }
    core.clean_pending.store(false, Ordering::Relaxed);
    parser.last = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The completions a poll wrote before it took a clean request: the
    /// named QPs' go, the others move up in order with their timestamps.
    #[test]
    fn a_poll_drops_what_it_wrote_of_a_qp_whose_clean_it_took() {
        let qps = [1u32, 7, 2, 7, 7, 3, 9, 1];
        let mut out: Vec<WorkCompletion> = qps
            .iter()
            .enumerate()
            .map(|(i, &qp_num)| WorkCompletion {
                wr_id: i as u64,
                qp_num,
                ..WorkCompletion::default()
            })
            .collect();
        let mut ts: Vec<u64> = (0..8).map(|i| 100 + i).collect();
        let taken = [
            Clean {
                rsn: 70,
                qp_num: 7,
                before: 5,
            },
            Clean {
                rsn: 90,
                qp_num: 9,
                before: 5,
            },
        ];
        let n = drop_taken(&taken, &mut out, &mut &mut ts[..]);
        let kept: Vec<(u64, u32)> = out[..n].iter().map(|w| (w.wr_id, w.qp_num)).collect();
        assert_eq!(kept, [(0, 1), (2, 2), (5, 3), (7, 1)]);
        assert_eq!(ts[..n], [100, 102, 105, 107], "each its own timestamp");
        let mut none = out.clone();
        assert_eq!(drop_taken(&[], &mut none, &mut NoStamps), 8);
        assert_eq!(none, out);
    }
}
