//! The lock of the shared queue forms ([`crate::SharedQueuePair`],
//! [`crate::SharedCompletionQueue`]): one word, taken with one
//! compare-and-swap and released with one store.
//!
//! libmlx5 guards each queue with a spinlock for the same reason
//! (rdma-core `providers/mlx5/qp.c`: `mlx5_spin_lock(&qp->sq.lock)` around
//! `_mlx5_post_send`, `&qp->rq.lock` around `mlx5_post_recv`; `cq.c`:
//! `&cq->lock` around `poll_cq`): the critical sections are a few dozen
//! nanoseconds of stores into the queue, shorter than any sleep and wake.
//! `std::sync::Mutex` costs a second atomic read-modify-write on every
//! unlock (it swaps the state to learn whether someone sleeps); measured
//! on the benchmark host, an uncontended lock and unlock took 12.0 ns
//! against this lock's 7.0 ns, and a post of one work request is 16 ns
//! (`benches/README.md`, "Shared posting"). Unlike a bare spinlock, a
//! waiter that has spun [`SPINS`] times yields its CPU on every further
//! look, so a holder preempted on a machine with fewer cores than posting
//! threads gets the CPU back instead of waiting out the spinners' time
//! slices.
//!
//! Built with `--cfg loom` the word is loom's and a waiter swaps it,
//! yielding to loom's scheduler between tries, so the
//! `loom_*` test below checks mutual exclusion and the acquire/release
//! pairing under every interleaving (`scripts/loom.sh`).

#![allow(unsafe_code)] // the lock's cell, handed out by its guard only

use std::{
    cell::UnsafeCell,
    fmt,
    ops::{Deref, DerefMut},
    sync::atomic::Ordering,
};

use crate::sync::AtomicBool;

/// Looks at a held lock before the waiter starts yielding its CPU between
/// looks.
#[cfg_attr(loom, allow(dead_code))]
const SPINS: u32 = 64;

/// A value behind a spinlock (see [the module](self)).
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `value` to one thread at a time
// (`lock` returns a guard only after it swapped `locked` from false to
// true, and only the guard's drop sets it back), so sharing the lock shares
// no `T` between threads at once: `T: Send` is what moving the access
// between threads needs, as for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: the lock owns its `T`; sending it sends the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, waiting for its holder if there is one.
    #[inline(always)]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        match self.try_lock() {
            Some(guard) => guard,
            None => {
                self.lock_contended();
                SpinGuard { lock: self }
            }
        }
    }

    /// Takes the lock if it is free: one compare-and-swap, acquire (what
    /// [`SpinLock::lock`] does first, and what its waiters retry).
    #[inline(always)]
    pub(crate) fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        self.locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| SpinGuard { lock: self })
    }

    /// The lock held by another thread: wait reading it (no write while it
    /// is held, so the waiters do not take the cache line from the
    /// holder), then try again.
    #[cfg(not(loom))]
    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                if spins < SPINS {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Under loom: a swap, yielding between tries. The read-only wait
    /// above only spares the holder's cache line, and loom lets a relaxed
    /// read (or a failed compare-and-swap's) return a stale `true` any
    /// number of times, which it would explore as ever more branches; a
    /// swap always reads the latest value. Taking the lock is the same
    /// acquire of the word a release by the last holder wrote, which is
    /// what the model checks.
    #[cfg(loom)]
    fn lock_contended(&self) {
        while self.locked.swap(true, Ordering::Acquire) {
            loom::thread::yield_now();
        }
    }

    /// The value, the lock given up.
    pub(crate) fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: fmt::Debug> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never waits: a Debug print from the thread holding the lock must
        // not deadlock.
        f.debug_struct("SpinLock")
            .field("locked", &self.locked.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The lock held: the value, until the guard drops.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: this guard exists only while `locked` is true because it
        // took it (`SpinLock::lock`), and no other guard of this lock
        // exists meanwhile: the value is this thread's until the drop
        // below. The acquire of the taking CAS pairs with the release of
        // the previous holder's drop, so that holder's writes are seen.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow of
        // the guard, so of the value.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // Release: the next holder's acquire sees what this one wrote.
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use std::sync::atomic::Ordering::Relaxed;

    use loom::{
        sync::{atomic::AtomicUsize, Arc},
        thread,
    };

    use super::SpinLock;

    /// What a critical section touches: `inside` counts the threads in it
    /// (must never exceed one), `count` is read and written back with
    /// relaxed accesses, so a lock whose release/acquire did not order
    /// them would let loom lose an update; `wins` counts the sections
    /// entered.
    struct Shared {
        inside: AtomicUsize,
        count: AtomicUsize,
    }

    /// Up to two tries to take the lock, a section each time it is taken.
    /// No waiting: loom explores every interleaving of the tries (a spin
    /// loop would be an unbounded one), so what is checked is the taking
    /// compare-and-swap and the releasing store, which `lock` and its
    /// waiters use.
    fn try_sections(lock: &SpinLock<Shared>, wins: &AtomicUsize) {
        for _ in 0..2 {
            if let Some(g) = lock.try_lock() {
                assert_eq!(g.inside.fetch_add(1, Relaxed), 0, "two holders at once");
                let v = g.count.load(Relaxed);
                g.count.store(v + 1, Relaxed);
                g.inside.fetch_sub(1, Relaxed);
                wins.fetch_add(1, Relaxed);
            }
        }
    }

    #[test]
    fn loom_spin_lock_excludes_and_orders() {
        loom::model(|| {
            let lock = Arc::new(SpinLock::new(Shared {
                inside: AtomicUsize::new(0),
                count: AtomicUsize::new(0),
            }));
            let wins = Arc::new(AtomicUsize::new(0));
            let others: Vec<_> = (0..2)
                .map(|_| {
                    let (lock, wins) = (lock.clone(), wins.clone());
                    thread::spawn(move || try_sections(&lock, &wins))
                })
                .collect();
            try_sections(&lock, &wins);
            for t in others {
                t.join().unwrap();
            }
            // Uncontended now: `lock` takes it at once.
            let count = lock.lock().count.load(Relaxed);
            assert_eq!(count, wins.load(Relaxed), "an update was lost");
            assert!(count >= 1, "nobody took a free lock");
        });
    }
}
