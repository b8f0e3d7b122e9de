//! The pool's hand-off under every interleaving (`scripts/loom.sh`): a
//! buffer moved into a posted request, written by a simulated device on
//! another thread, and given back by its completion, while the program
//! writes the buffers it holds; and buffers taken and given back across
//! threads. Each slot's bytes are stood for by a loom cell
//! (`PoolInner::cell`), which `PoolBuf`'s `Deref`/`DerefMut` and the
//! simulated device access, so loom fails any interleaving in which two
//! accesses to one slot are not ordered. The last test breaks the rule on
//! purpose (the program reads a posted buffer before its completion) and
//! must fail.

use std::sync::Arc;

use loom::sync::Mutex;

use super::PoolInner;
use crate::pooled_qp::Posted;

/// The simulated device: writes `byte` into the slot the request `wr_id`
/// names, then completes it into `cq` (a lock, as a CQ's ownership bit is
/// a release by the device and the poll an acquire).
fn device(pool: Arc<PoolInner>, slot: u32, wr_id: u64, cq: Arc<Mutex<Vec<u64>>>, byte: u8) {
    let p = pool.slot_ptr_for_device(slot);
    pool.cell(slot).with_mut(|_| {
        // SAFETY: the slot's 8 bytes are inside the pool's memory, which
        // `pool` keeps; loom checks that nothing else accesses the slot
        // unordered with this write (the cell).
        unsafe { std::ptr::write_bytes(p, byte, 8) }
    });
    cq.lock().unwrap().push(wr_id);
}

fn poll(cq: &Mutex<Vec<u64>>) -> u64 {
    loop {
        if let Some(w) = cq.lock().unwrap().pop() {
            return w;
        }
        loom::thread::yield_now();
    }
}

/// A receive buffer posted, written by the device, completed, read by the
/// program; the program writes its other buffer all along.
#[test]
fn loom_a_buffer_comes_back_only_after_the_device_wrote_it() {
    loom::model(|| {
        let pool = PoolInner::heap(2, 8);
        let mut posted = Posted::new(pool.clone());
        let a = pool.take_for_test().unwrap();
        let mut b = pool.take_for_test().unwrap();
        let slot = a.slot();
        let wr_id = posted.park(a, false);
        let cq = Arc::new(Mutex::new(Vec::new()));
        let dev = {
            let (pool, cq) = (pool.clone(), cq.clone());
            loom::thread::spawn(move || device(pool, slot, wr_id, cq, 0x5a))
        };
        b.fill(1);
        let done = posted.finish(poll(&cq)).expect("the posted buffer");
        assert!(!done.send);
        assert!(done.buf.iter().all(|&x| x == 0x5a));
        assert!(b.iter().all(|&x| x == 1));
        assert_eq!(posted.posted(), 0);
        dev.join().unwrap();
    });
}

/// A buffer given back on one thread (its drop) and taken on another: one
/// slot, two threads, each writing what it holds.
#[test]
fn loom_a_slot_has_one_owner_across_threads() {
    loom::model(|| {
        let pool = PoolInner::heap(1, 8);
        let other = {
            let pool = pool.clone();
            loom::thread::spawn(move || {
                if let Some(mut buf) = pool.take_for_test() {
                    buf.fill(2);
                }
            })
        };
        if let Some(mut buf) = pool.take_for_test() {
            buf.fill(1);
        }
        other.join().unwrap();
        assert_eq!(pool.available(), 1);
    });
}

/// The rule broken: the program reads the slot of a posted request before
/// its completion (what `PoolBuf` being moved into the request forbids).
/// Loom finds the interleaving in which that read and the device's write
/// are unordered.
#[test]
#[should_panic(expected = "Causality violation")]
fn loom_reading_a_posted_buffer_races_with_the_device() {
    loom::model(|| {
        let pool = PoolInner::heap(1, 8);
        let mut posted = Posted::new(pool.clone());
        let a = pool.take_for_test().unwrap();
        let slot = a.slot();
        let wr_id = posted.park(a, false);
        let cq = Arc::new(Mutex::new(Vec::new()));
        let dev = {
            let (pool, cq) = (pool.clone(), cq.clone());
            loom::thread::spawn(move || device(pool, slot, wr_id, cq, 0x5a))
        };
        // As if the program still held the buffer.
        pool.cell(slot).with(|_| ());
        let _ = posted.finish(poll(&cq));
        dev.join().unwrap();
    });
}
