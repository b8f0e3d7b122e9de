//! The receive queue's tail between a poller inside a run and a reset,
//! under loom (`scripts/loom.sh`: `--cfg loom`, every interleaving).
//!
//! The real [`Tail`] and [`TailReader`] (their atomics are loom's in this
//! build, `src/sync.rs`), driven as their users drive them:
//!
//! - the poller (`Mlx5Cq::poll`, `RecvRun`) began a run before the reset:
//!   it read the tail of epoch 0 and stores the tail it computed from a CQE
//!   of that epoch, whenever the interleaving puts that store; afterwards,
//!   in its own order, it takes the CQ's clean requests after the CQE
//!   ownership it acquired (`take_clean`, which restarts the tail in the
//!   request's epoch) and frees the new epoch's receive;
//! - the resetter (`reset_completions` in `on_qp_state`) begins epoch 1
//!   and pushes the restart request (the CQ's clean list and its
//!   `clean_pending` flag), publishes the reset (the QP's gate word), and
//!   the poster, having seen the gate, restarts its reader and posts one
//!   receive, which the "device" completes (a flag the poller acquires, as
//!   it acquires a CQE's ownership byte).
//!
//! Checked in every interleaving: the poster never counts a receive of
//! epoch 0 as freed in epoch 1 (the stale store is never taken for one of
//! its own), the poller never meets the new epoch's CQE before the restart
//! request is visible to it, and the restarted tail ends at the one receive
//! the poller freed.

use std::sync::atomic::Ordering;

use loom::sync::{
    atomic::{AtomicBool, AtomicU64},
    Arc, Mutex,
};

use super::qp::{Tail, TailReader};

/// The tagged tail of `epoch` with `count` receives freed.
fn tagged(epoch: u32, count: u32) -> u64 {
    (u64::from(epoch) << 32) | u64::from(count)
}

struct Cq {
    /// Restart requests: the epoch each reset began.
    clean: Mutex<Vec<u32>>,
    clean_pending: AtomicBool,
    /// The one CQE of the new epoch, written by the device.
    cqe: AtomicBool,
}

#[test]
fn loom_a_stale_receive_tail_is_never_counted_in_the_new_epoch() {
    loom::model(|| {
        let tail = Arc::new(Tail::default());
        // Epoch 0: five receives posted, three freed.
        tail.store(tagged(0, 3));
        let mut reader = TailReader::new(&tail);
        assert_eq!(reader.freed(&tail), 3);
        let cq = Arc::new(Cq {
            clean: Mutex::new(Vec::new()),
            clean_pending: AtomicBool::new(false),
            cqe: AtomicBool::new(false),
        });
        let gate = Arc::new(AtomicU64::new(0));

        let (t, c) = (tail.clone(), cq.clone());
        let poller = loom::thread::spawn(move || {
            // A run of epoch 0 that read the tail before the reset.
            let seen = t.load();
            t.advance(seen as u32 + 1);
            // Later polls: the new epoch's CQE, if the device wrote it...
            if !c.cqe.load(Ordering::Acquire) {
                return false;
            }
            // ...and then the clean requests, which its chain made visible.
            assert!(
                c.clean_pending.load(Ordering::Relaxed),
                "a CQE of the new epoch before the reset's restart request"
            );
            for epoch in c.clean.lock().unwrap().drain(..) {
                t.restart(epoch);
            }
            c.clean_pending.store(false, Ordering::Relaxed);
            t.advance((t.load() as u32).wrapping_add(1));
            true
        });

        // The reset: a new epoch, its restart request, then the gate.
        let epoch = tail.begin_reset();
        assert_eq!(epoch, 1);
        cq.clean.lock().unwrap().push(epoch);
        cq.clean_pending.store(true, Ordering::Release);
        gate.store(1, Ordering::Release);
        // The poster sees the gate move, restarts, and posts one receive.
        assert_eq!(gate.load(Ordering::Acquire), 1);
        reader.restart(&tail);
        let before = reader.freed(&tail);
        assert_eq!(before, 0, "a tail of epoch 0 counted in epoch 1");
        cq.cqe.store(true, Ordering::Release);
        let during = reader.freed(&tail);
        assert!(during <= 1, "{during} receives freed of the 1 posted");

        let freed_by_poller = poller.join().unwrap();
        let after = reader.freed(&tail);
        if freed_by_poller {
            assert_eq!(after, 1, "the new epoch's receive is freed");
            assert_eq!(tail.load(), tagged(1, 1));
        } else {
            assert_eq!(after, 0, "nothing of epoch 1 freed");
        }
    });
}
