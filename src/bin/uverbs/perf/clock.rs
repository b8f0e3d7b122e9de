//! The timestamp source and thread pinning of `uverbs perf`.
//!
//! perftest timestamps with the CPU cycle counter (`get_cycles()` = `rdtsc`
//! on x86_64) and converts with a MHz figure calibrated against
//! `gettimeofday` (`get_clock.c`). We do the same: [`Clock::Tsc`] reads
//! `rdtsc`, and [`Clock::hz`] calibrates it against `Instant` over the whole
//! run. This matters in the TCG guest, whose clocksource is the HPET: there
//! `clock_gettime` is a system call plus an emulated MMIO read, microseconds
//! per call, which would land inside every measured round trip.
//! [`Clock::Monotonic`] (`--clock monotonic`) uses `Instant` instead.
//!
//! The two `unsafe` blocks of the CLI are here: `rdtsc` and
//! `sched_setaffinity` (the `nix` crate's safe wrapper needs its `sched`
//! feature, which the workspace does not enable).
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

/// How long one wait may spin before the run is declared stuck.
pub const STUCK: Duration = Duration::from_secs(20);

/// Notices a busy-wait that has lasted [`STUCK`]. It reads the time only
/// every 2^20 spins: in the TCG guest a clock read is a system call.
#[derive(Debug, Default)]
pub struct Watchdog {
    spins: u32,
    since: Option<Instant>,
}

impl Watchdog {
    /// Counts one fruitless spin; true once the wait has lasted [`STUCK`].
    #[inline]
    pub fn stuck(&mut self) -> bool {
        self.spins = self.spins.wrapping_add(1);
        self.spins & 0xf_ffff == 0 && self.since.get_or_insert_with(Instant::now).elapsed() > STUCK
    }
}

/// Which counter timestamps are taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockKind {
    /// The CPU's time-stamp counter (perftest's `get_cycles`).
    Tsc,
    /// `CLOCK_MONOTONIC` through `Instant`, in nanoseconds.
    Monotonic,
}

/// A started clock: `now()` in ticks, `hz()` ticks per second.
#[derive(Debug)]
pub struct Clock {
    kind: ClockKind,
    t0: u64,
    i0: Instant,
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` reads the time-stamp counter; it has no memory effects
    // and exists on every x86_64 CPU (the intrinsic is `unsafe` only because
    // all `core::arch` intrinsics are).
    unsafe { core::arch::x86_64::_rdtsc() }
}

impl Clock {
    /// Starts the clock (the calibration's first point).
    pub fn start(kind: ClockKind) -> Clock {
        let kind = if cfg!(target_arch = "x86_64") {
            kind
        } else {
            ClockKind::Monotonic
        };
        let i0 = Instant::now();
        let mut c = Clock { kind, t0: 0, i0 };
        c.t0 = c.now();
        c
    }

    /// The current tick count.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.kind {
            #[cfg(target_arch = "x86_64")]
            ClockKind::Tsc => rdtsc(),
            _ => self.i0.elapsed().as_nanos() as u64,
        }
    }

    /// Ticks per second, measured from [`Clock::start`] until now (call it
    /// after the measured loop, so the calibration spans the whole run).
    pub fn hz(&self) -> f64 {
        match self.kind {
            ClockKind::Monotonic => 1e9,
            ClockKind::Tsc => {
                // Make the interval long enough for a precise ratio.
                while self.i0.elapsed().as_millis() < 50 {
                    std::hint::spin_loop();
                }
                let ticks = self.now().wrapping_sub(self.t0);
                let secs = self.i0.elapsed().as_secs_f64();
                ticks as f64 / secs
            }
        }
    }
}

/// Pins the calling thread to `cpu`; returns whether it worked.
pub fn pin_to(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: `cpu_set_t` is a plain bit array for which all-zero is the
    // empty set; CPU_SET writes one bit of it (bounds-checked above);
    // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of it and
    // affects only the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_does_not_bark_before_its_time() {
        // Millions of spins in well under STUCK: never stuck, and the clock
        // was read (the first check started the timer).
        let mut w = Watchdog::default();
        assert!((0..3 << 20).all(|_| !w.stuck()));
        assert!(w.since.is_some());
    }
}
