//! Locks owned by a thread across C calls: libibverbs' critical sections
//! that begin in one call and end in another (`ibv_wr_start` ..
//! `ibv_wr_complete` on a QP, `ibv_start_poll` .. `ibv_end_poll` on a CQ),
//! which rdma-core's providers make with a spin lock taken in the first
//! call and released in the last.
//!
//! An [`OwnerLock`] is one word: 0 when free, else the owning thread's
//! [`thread_token`] (with [`WAITING`] set when another thread waits for
//! it). Taking it free is one compare-exchange, releasing it one swap;
//! a thread that finds it held waits on a condition variable, woken by
//! the release (no spinning). Calls made inside the section check that the
//! caller is the owner (one load and one comparison with the thread token,
//! which is one instruction on x86_64 and aarch64), so a program that
//! calls from another thread gets an error or nothing, never two threads
//! in the section.

#![allow(unsafe_code)]

use std::sync::{
    atomic::{
        AtomicUsize,
        Ordering::{Acquire, Relaxed, Release},
    },
    Condvar, Mutex, MutexGuard, PoisonError,
};

/// The bit of an [`OwnerLock`]'s word that says a thread waits for it.
/// Thread tokens are addresses of at least 8-byte alignment, so it is
/// never part of one.
const WAITING: usize = 1;

/// A number that tells the calling thread from every other live thread:
/// its thread pointer (never 0, 8-byte aligned at least). x86_64 Linux:
/// `%fs:0`, which the TLS ABI makes the thread control block's pointer to
/// itself (glibc's `tcbhead_t.tcb`, musl's `pthread.self`); aarch64:
/// `TPIDR_EL0`, the thread pointer; elsewhere the address of a
/// thread-local word.
#[inline(always)]
pub(crate) fn thread_token() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let t: usize;
        // SAFETY: reads the word at the thread pointer, which the x86_64
        // TLS ABI (variant II) requires to hold the thread pointer itself;
        // no memory is written and no flag changed.
        unsafe {
            core::arch::asm!(
                "mov {}, qword ptr fs:[0]",
                out(reg) t,
                options(nostack, readonly, preserves_flags, pure)
            );
        }
        t
    }
    #[cfg(all(target_arch = "aarch64", target_os = "linux"))]
    {
        let t: usize;
        // SAFETY: reads the thread pointer register; no memory is touched.
        unsafe {
            core::arch::asm!(
                "mrs {}, tpidr_el0",
                out(reg) t,
                options(nomem, nostack, preserves_flags, pure)
            );
        }
        t
    }
    #[cfg(not(any(
        all(target_arch = "x86_64", target_os = "linux"),
        all(target_arch = "aarch64", target_os = "linux")
    )))]
    {
        thread_local! {
            static TOKEN: u64 = const { 0 };
        }
        TOKEN.with(|t| core::ptr::from_ref(t) as usize)
    }
}

/// A lock a thread may hold from one C call to another (see the module).
#[derive(Debug, Default)]
pub(crate) struct OwnerLock {
    /// 0: free; else the owner's token, `| WAITING` when a thread waits.
    word: AtomicUsize,
    /// Taken by waiters and by a release that finds `WAITING`.
    waiting: Mutex<()>,
    /// Signalled by releases that find `WAITING`.
    changed: Condvar,
}

/// How [`OwnerLock::acquire`] got the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Taken now: the caller releases it.
    Taken,
    /// The calling thread held it already (inside its own section): the
    /// caller leaves it held.
    Reentered,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl OwnerLock {
    /// Whether thread `me` holds the lock.
    #[inline(always)]
    pub(crate) fn held_by(&self, me: usize) -> bool {
        self.word.load(Relaxed) & !WAITING == me
    }

    /// Takes the lock for thread `me`, waiting while another thread holds
    /// it; [`Entry::Reentered`] if `me` holds it already.
    #[inline(always)]
    pub(crate) fn acquire(&self, me: usize) -> Entry {
        match self.word.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => Entry::Taken,
            Err(w) if w & !WAITING == me => Entry::Reentered,
            Err(_) => self.acquire_slow(me),
        }
    }

    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, me: usize) -> Entry {
        let mut g = lock(&self.waiting);
        loop {
            let w = self.word.load(Relaxed);
            if w == 0 {
                if self.word.compare_exchange(0, me, Acquire, Relaxed).is_ok() {
                    return Entry::Taken;
                }
                continue;
            }
            if w & !WAITING == me {
                return Entry::Reentered;
            }
            // Say that a thread waits, then wait: a release takes
            // `waiting` before it signals, which this thread holds until
            // the wait has begun, so the signal is not lost.
            if w & WAITING == 0
                && self
                    .word
                    .compare_exchange(w, w | WAITING, Relaxed, Relaxed)
                    .is_err()
            {
                continue;
            }
            g = self.changed.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Releases the lock (the caller holds it), waking the threads that
    /// wait for it.
    #[inline(always)]
    pub(crate) fn release(&self) {
        if self.word.swap(0, Release) & WAITING != 0 {
            self.wake();
        }
    }

    /// Wakes every thread waiting for the lock.
    #[cold]
    fn wake(&self) {
        let _g = lock(&self.waiting);
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn thread_tokens_differ_between_live_threads_and_leave_the_waiting_bit_free() {
        let me = thread_token();
        assert_ne!(me, 0);
        assert_eq!(me & WAITING, 0);
        assert_eq!(me, thread_token(), "stable within a thread");
        let others: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let t = thread_token();
                        // Alive together: wait for the others.
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        t
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all = others.clone();
        all.push(me);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 5, "{others:?} and {me}");
    }

    #[test]
    fn the_lock_is_reentered_by_its_owner_and_excludes_other_threads() {
        let l = OwnerLock::default();
        let me = thread_token();
        assert_eq!(l.acquire(me), Entry::Taken);
        assert!(l.held_by(me));
        assert_eq!(l.acquire(me), Entry::Reentered);
        // Four threads add to a plain counter under the lock, held across
        // a sleep: no increment is lost, and the owner always finds
        // itself the owner.
        let count = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let t = thread_token();
                    for _ in 0..200 {
                        assert_eq!(l.acquire(t), Entry::Taken);
                        assert!(l.held_by(t));
                        let v = count.load(Relaxed);
                        if v % 50 == 0 {
                            std::thread::yield_now();
                        }
                        count.store(v + 1, Relaxed);
                        l.release();
                    }
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            assert_eq!(count.load(Relaxed), 0, "others ran while it was held");
            l.release();
        });
        assert_eq!(count.load(Relaxed), 800);
        assert!(!l.held_by(me));
    }
}
