//! The kernel's clock info page: what converts the device's completion
//! timestamps (free-running `hca_core_clock` ticks) to nanoseconds of the
//! kernel's real-time clock.
//!
//! mlx5_ib offers it when `mlx5_ib_alloc_ucontext` sets bit
//! `MLX5_IB_CLOCK_INFO_V1` of the response's `clock_info_versions` (Linux
//! `drivers/infiniband/hw/mlx5/main.c`), and maps it read-only, one page,
//! at mmap command `MLX5_IB_MMAP_CLOCK_INFO` with index
//! `MLX5_IB_CLOCK_INFO_V1` (`mlx5_ib_mmap` → `mlx5_ib_mmap_clock_info_page`,
//! which refuses a writable mapping with `EPERM`). mlx5_core rewrites the
//! page (`struct mlx5_ib_clock_info`, `include/uapi/rdma/mlx5-abi.h`)
//! whenever its timecounter moves on: it sets `MLX5_IB_CLOCK_INFO_KERNEL_UPDATING`
//! in `sign`, writes `nsec`, `cycles`, `frac` and `mult`, then stores `sign`
//! plus two (`mlx5_update_clock_info_page`, `lib/clock.c` of mlx5_core).
//! A reader therefore takes `sign`, refuses an odd one, copies the fields,
//! and keeps the copy only if `sign` did not change: rdma-core's
//! `_mlx5dv_get_clock_info` (`providers/mlx5/mlx5.c`), which tries ten
//! times before answering `EBUSY`, as [`ClockPage::read`] does.
//!
//! The page is only ever read through atomics (the kernel writes it while
//! this process reads it), never through a Rust reference. This module
//! holds the crate's only accesses to it.

#![allow(unsafe_code)]

use std::{
    mem::offset_of,
    sync::atomic::{AtomicU32, AtomicU64, Ordering},
};

use crate::{
    abi::{self, Mlx5IbClockInfo},
    providers::Device,
    sys::{Mapping, Protection},
};

/// How many times a read finds the page being updated before it gives up
/// (`_mlx5dv_get_clock_info`'s `retry = 10`).
pub(crate) const READ_TRIES: u32 = 10;

/// A consistent copy of the kernel's clock info page, like rdma-core's
/// `struct mlx5dv_clock_info` (from [`Mlx5Context::clock_info`](super::dv::Mlx5Context::clock_info)):
/// the kernel's real time `nsec` at device tick `last_cycles`, and the
/// rate, to convert a device timestamp with [`ClockInfo::ts_to_ns`].
///
/// The copy converts timestamps near `last_cycles`: the kernel refreshes
/// the page before `(ticks - last_cycles) * mult` can overflow 64 bits (its
/// `overflow_period`), so take a fresh copy for fresh timestamps.
#[doc(alias = "mlx5dv_clock_info")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClockInfo {
    /// The kernel's `CLOCK_REALTIME`, in ns, at `last_cycles`.
    pub nsec: u64,
    /// The device tick the page was last updated at.
    pub last_cycles: u64,
    /// The fraction of a nanosecond at `last_cycles`, in units of
    /// `2^-shift` ns.
    pub frac: u64,
    /// Nanoseconds per tick, times `2^shift`.
    pub mult: u32,
    /// See `mult` and `frac`.
    pub shift: u32,
    /// The width of the device's tick counter (ticks wrap at it).
    pub mask: u64,
}

impl ClockInfo {
    /// The kernel's real time, in ns since the Unix epoch, of device
    /// timestamp `ticks`, like rdma-core's `mlx5dv_ts_to_ns` (`mlx5dv.h`):
    /// a timestamp less than half the counter's range after `last_cycles`
    /// is later than it, any other is earlier. The arithmetic wraps as the
    /// C's unsigned arithmetic does.
    #[doc(alias = "mlx5dv_ts_to_ns")]
    #[inline]
    pub fn ts_to_ns(&self, ticks: u64) -> u64 {
        let mult = u64::from(self.mult);
        // A shift of 64 or more is undefined in C; here it gives 0.
        let shr = |v: u64| v.checked_shr(self.shift).unwrap_or(0);
        let delta = ticks.wrapping_sub(self.last_cycles) & self.mask;
        if delta > self.mask / 2 {
            let back = self.last_cycles.wrapping_sub(ticks) & self.mask;
            self.nsec
                .wrapping_sub(shr(back.wrapping_mul(mult).wrapping_sub(self.frac)))
        } else {
            self.nsec
                .wrapping_add(shr(delta.wrapping_mul(mult).wrapping_add(self.frac)))
        }
    }
}

/// The mapped clock info page of a context (read-only, shared with the
/// kernel).
#[derive(Debug)]
pub(crate) struct ClockPage {
    map: Mapping,
}

impl ClockPage {
    /// Maps the page when the context's response offers it
    /// (`clock_info_versions`), as rdma-core's `mlx5_map_clock_info`: one
    /// read-only page of `page_len` bytes at `(MLX5_IB_MMAP_CLOCK_INFO << 8
    /// | MLX5_IB_CLOCK_INFO_V1) * page_len`. `None` when it is not offered
    /// or the mmap fails (the context opens without it, as libmlx5's).
    pub(crate) fn map(dev: Device<'_>, clock_info_versions: u8, page_len: usize) -> Option<Self> {
        if clock_info_versions & (1 << abi::MLX5_IB_CLOCK_INFO_V1) == 0 {
            return None;
        }
        let offset = (u64::from(abi::MLX5_IB_MMAP_CLOCK_INFO) << 8
            | u64::from(abi::MLX5_IB_CLOCK_INFO_V1))
        .checked_mul(page_len as u64)?;
        let map = dev.mmap(page_len, offset, Protection::ReadOnly).ok()?;
        Self::from_mapping(map)
    }

    /// The page in `map` (`None` if it is too short to hold the record).
    pub(crate) fn from_mapping(map: Mapping) -> Option<Self> {
        (map.len() >= size_of::<Mlx5IbClockInfo>()).then_some(ClockPage { map })
    }

    #[inline(always)]
    fn u64_at(&self, offset: usize) -> u64 {
        // SAFETY: `offset` is one of the u64 fields' offsets in `struct
        // mlx5_ib_clock_info`, 8-aligned, and the record lies inside the
        // mapping (`from_mapping`), which is page aligned and lives as
        // long as `self`. The page is shared with the kernel, which
        // writes it concurrently: it is only ever accessed through
        // atomics, and no Rust reference to it exists. The mapping may be
        // read-only: only loads are made, of a size the target has native
        // atomic loads for, which `std::sync::atomic` allows on read-only
        // memory.
        let field = unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(offset).cast()) };
        field.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn u32_at(&self, offset: usize, order: Ordering) -> u32 {
        // SAFETY: as in `u64_at`, for a 4-aligned u32 field.
        let field = unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(offset).cast()) };
        field.load(order)
    }

    /// One attempt: the fields, if `sign` was even and did not change
    /// while they were copied.
    #[inline]
    fn try_read(&self) -> Option<ClockInfo> {
        type C = Mlx5IbClockInfo;
        let sign = self.u32_at(offset_of!(C, sign), Ordering::Acquire);
        if sign & abi::MLX5_IB_CLOCK_INFO_KERNEL_UPDATING != 0 {
            return None;
        }
        let info = ClockInfo {
            nsec: self.u64_at(offset_of!(C, nsec)),
            last_cycles: self.u64_at(offset_of!(C, cycles)),
            frac: self.u64_at(offset_of!(C, frac)),
            mult: self.u32_at(offset_of!(C, mult), Ordering::Relaxed),
            shift: self.u32_at(offset_of!(C, shift), Ordering::Relaxed),
            mask: self.u64_at(offset_of!(C, mask)),
        };
        // The field loads must not move after the second load of `sign`
        // (a seqlock's read side: an acquire fence, then the load).
        std::sync::atomic::fence(Ordering::Acquire);
        (self.u32_at(offset_of!(C, sign), Ordering::Relaxed) == sign).then_some(info)
    }

    /// A consistent copy of the page, like `_mlx5dv_get_clock_info`:
    /// `None` when the kernel was updating it on [`READ_TRIES`] attempts
    /// (rdma-core's `EBUSY`).
    #[inline]
    pub(crate) fn read(&self) -> Option<ClockInfo> {
        (0..READ_TRIES).find_map(|_| {
            let r = self.try_read();
            if r.is_none() {
                std::hint::spin_loop();
            }
            r
        })
    }

    /// A consistent copy, waiting as long as the kernel updates the page
    /// (a handful of stores each time): for a CQ's first copy, which has
    /// no older one to fall back on.
    pub(crate) fn read_blocking(&self) -> ClockInfo {
        loop {
            if let Some(info) = self.read() {
                return info;
            }
            std::thread::yield_now();
        }
    }

    /// The kernel's `overflow_period`: how often, in ns, it refreshes the
    /// page at least (`mlx5dv_query_device`'s `max_clock_info_update_nsec`).
    pub(crate) fn overflow_period(&self) -> u64 {
        self.u64_at(offset_of!(Mlx5IbClockInfo, overflow_period))
    }
}

/// The device's free-running clock, mapped read-only: the page of the
/// kernel's mmap command `MLX5_IB_MMAP_CORE_CLOCK` (the HCA's internal
/// timer register, `mlx5_ib_mmap` → `MLX5_IB_MMAP_CORE_CLOCK`), which the
/// context response offers with `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET`
/// and `hca_core_clock_offset` (the counter's offset in the page). The
/// counter is 64 bits in two big-endian words, high then low, which the
/// device updates as it ticks: rdma-core's `mlx5_read_clock`
/// (`providers/mlx5/verbs.c`) reads high, low, high again and takes the
/// pair when the two high words agree (at most two tries), as
/// [`CoreClockPage::read`] does.
#[derive(Debug)]
pub(crate) struct CoreClockPage {
    map: Mapping,
    /// The counter's offset in the mapping (4-aligned).
    offset: usize,
}

impl CoreClockPage {
    /// Maps the page when the response offers it, as rdma-core's
    /// `mlx5_map_internal_clock`: one read-only page at `(MLX5_IB_MMAP_CORE_CLOCK
    /// << 8) * page_len`, the counter at `hca_core_clock_offset` modulo the
    /// page. `None` when not offered or the mmap fails (libmlx5 opens the
    /// context without it, with a warning).
    pub(crate) fn map(
        dev: Device<'_>,
        resp: &abi::Mlx5IbAllocUcontextResp,
        page_len: usize,
    ) -> Option<Self> {
        if resp.comp_mask & abi::MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET == 0 {
            return None;
        }
        let offset = (u64::from(abi::MLX5_IB_MMAP_CORE_CLOCK) << 8).checked_mul(page_len as u64)?;
        let map = dev.mmap(page_len, offset, Protection::ReadOnly).ok()?;
        let at = (resp.hca_core_clock_offset % page_len as u64) as usize;
        Self::from_mapping(map, at)
    }

    /// The counter at `offset` of `map` (`None` if it does not fit or is
    /// not 4-aligned).
    pub(crate) fn from_mapping(map: Mapping, offset: usize) -> Option<Self> {
        let fits = offset.checked_add(8).is_some_and(|end| end <= map.len());
        (fits && offset % 4 == 0).then_some(CoreClockPage { map, offset })
    }

    /// The counter's address in this process (`mlx5dv_context`'s
    /// `hca_core_clock`): read it only with volatile or atomic 32-bit
    /// loads, big-endian, high word first.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        // In bounds: `from_mapping` checked the counter lies inside.
        self.map.as_mut_ptr().wrapping_add(self.offset).cast_const()
    }

    #[inline(always)]
    fn word(&self, index: usize) -> u32 {
        // SAFETY: the counter's two 4-aligned words lie inside the mapping
        // (`from_mapping`), which lives as long as `self`; the device
        // writes them concurrently, so they are only loaded atomically (a
        // load of a native width, allowed on read-only memory), never
        // through a Rust reference.
        let w = unsafe {
            AtomicU32::from_ptr(self.map.as_mut_ptr().add(self.offset + 4 * index).cast())
        };
        u32::from_be(w.load(Ordering::Acquire))
    }

    /// The counter's value now (device ticks).
    pub(crate) fn read(&self) -> u64 {
        let (mut hi, mut lo) = (0, 0);
        for _ in 0..2 {
            hi = self.word(0);
            lo = self.word(1);
            if self.word(0) == hi {
                break;
            }
        }
        u64::from(hi) << 32 | u64::from(lo)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
        Arc,
    };

    use super::*;

    #[test]
    fn conversion_is_mlx5dv_ts_to_ns() {
        // 156.25 MHz: 6.4 ns a tick, mult/shift as mlx5_core would pick
        // them (shift 23, mult = 6.4 * 2^23 rounded down).
        let info = ClockInfo {
            nsec: 1_000_000_000_000,
            last_cycles: 1_000,
            frac: 0,
            mult: 53_687_091,
            shift: 23,
            mask: (1 << 41) - 1,
        };
        // Worked by hand: 1000 ticks later, 1000 * 53687091 >> 23 = 6399.
        assert_eq!(info.ts_to_ns(2_000), 1_000_000_000_000 + 6_399);
        assert_eq!(info.ts_to_ns(1_000), 1_000_000_000_000);
        // Earlier: 500 ticks back, (500 * 53687091) >> 23 = 3199.
        assert_eq!(info.ts_to_ns(500), 1_000_000_000_000 - 3_199);
        // A counter that wrapped since: tick 10 is 2^41 - 990 + 10 later.
        let wrapped = ClockInfo {
            last_cycles: (1 << 41) - 990,
            ..info
        };
        assert_eq!(wrapped.ts_to_ns(10), 1_000_000_000_000 + 6_399);
        // `frac` carries: 0.5 ns in, a tick later is 6.9 ns → 6.
        let half = ClockInfo {
            frac: 1 << 22,
            ..info
        };
        assert_eq!(half.ts_to_ns(1_001), 1_000_000_000_000 + 6);
        // A nonsense shift does not panic.
        assert_eq!(
            ClockInfo { shift: 70, ..info }.ts_to_ns(2_000),
            1_000_000_000_000
        );
    }

    /// An anonymous page standing in for the kernel's.
    fn anonymous_page() -> ClockPage {
        let map = memmap2::MmapOptions::new()
            .len(4096)
            .map_anon()
            .map(Mapping::from)
            .expect("anonymous mapping");
        ClockPage::from_mapping(map).unwrap()
    }

    /// The page's fields as atomics, for a test's writer thread (what the
    /// kernel does, `mlx5_update_clock_info_page`).
    struct Writer {
        base: usize,
    }

    impl Writer {
        fn u64(&self, off: usize) -> &AtomicU64 {
            // SAFETY: `base` is the page's address, kept mapped by the
            // test's `ClockPage` until the writer thread is joined; the
            // offset is an aligned field inside the record; the page is
            // only accessed through atomics.
            unsafe { AtomicU64::from_ptr((self.base + off) as *mut u64) }
        }
        fn u32(&self, off: usize) -> &AtomicU32 {
            // SAFETY: as in `u64`.
            unsafe { AtomicU32::from_ptr((self.base + off) as *mut u32) }
        }
        /// Writes generation `k` into every field, `sign` odd throughout
        /// (and for a while, to make readers see it).
        fn update(&self, k: u64) {
            type C = Mlx5IbClockInfo;
            let sign = self.u32(offset_of!(C, sign));
            let s = sign.load(Ordering::Relaxed);
            sign.store(s | 1, Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::SeqCst);
            self.u64(offset_of!(C, nsec)).store(k, Ordering::Relaxed);
            for _ in 0..50 {
                std::hint::spin_loop();
            }
            self.u64(offset_of!(C, cycles))
                .store(k.wrapping_mul(3), Ordering::Relaxed);
            self.u64(offset_of!(C, frac))
                .store(k ^ 0x55, Ordering::Relaxed);
            self.u32(offset_of!(C, mult))
                .store(k as u32, Ordering::Relaxed);
            self.u32(offset_of!(C, shift))
                .store((k as u32) >> 1, Ordering::Relaxed);
            self.u64(offset_of!(C, mask)).store(!k, Ordering::Relaxed);
            sign.store(s.wrapping_add(2), Ordering::Release);
        }
    }

    fn consistent(i: &ClockInfo) -> bool {
        let k = i.nsec;
        i.last_cycles == k.wrapping_mul(3)
            && i.frac == k ^ 0x55
            && i.mult == k as u32
            && i.shift == (k as u32) >> 1
            && i.mask == !k
    }

    #[test]
    fn a_read_never_sees_a_torn_update() {
        let page = Arc::new(anonymous_page());
        let w = Writer {
            base: page.map.as_mut_ptr() as usize,
        };
        w.update(1);
        assert_eq!(page.read().map(|i| i.nsec), Some(1));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (stop, page) = (stop.clone(), page.clone());
            std::thread::spawn(move || {
                let _keep = page;
                let mut k = 2u64;
                while !stop.load(Ordering::Relaxed) {
                    w.update(k);
                    k += 1;
                    // A gap between updates, as the kernel's are a tick
                    // apart: back to back, a reader on a loaded machine
                    // may find every read busy.
                    for _ in 0..256 {
                        std::hint::spin_loop();
                    }
                }
            })
        };
        let (mut ok, mut busy, mut last) = (0u32, 0u32, 0u64);
        for _ in 0..200_000 {
            match page.read() {
                Some(i) => {
                    assert!(consistent(&i), "torn read: {i:?}");
                    assert!(i.nsec >= last, "went back: {} after {last}", i.nsec);
                    last = i.nsec;
                    ok += 1;
                }
                None => busy += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert!(ok > 0, "no read succeeded ({busy} busy)");
        assert!(consistent(&page.read_blocking()));
    }

    #[test]
    fn an_odd_sign_is_busy() {
        let page = anonymous_page();
        let w = Writer {
            base: page.map.as_mut_ptr() as usize,
        };
        w.update(5);
        w.u32(offset_of!(Mlx5IbClockInfo, sign))
            .fetch_or(1, Ordering::Relaxed);
        assert_eq!(page.read(), None);
        w.u32(offset_of!(Mlx5IbClockInfo, sign))
            .fetch_add(1, Ordering::Relaxed);
        assert_eq!(page.read().map(|i| i.nsec), Some(5));
    }

    #[test]
    fn the_core_clock_is_two_big_endian_words_high_first() {
        let map = memmap2::MmapOptions::new()
            .len(4096)
            .map_anon()
            .map(Mapping::from)
            .expect("anonymous mapping");
        let base = map.as_mut_ptr() as usize;
        // The offset must leave room for 8 bytes, 4-aligned.
        assert!(CoreClockPage::from_mapping(map, 4090).is_none());
        let map = memmap2::MmapOptions::new()
            .len(4096)
            .map_anon()
            .map(Mapping::from)
            .expect("anonymous mapping");
        assert!(CoreClockPage::from_mapping(map, 2).is_none());
        let map = memmap2::MmapOptions::new()
            .len(4096)
            .map_anon()
            .map(Mapping::from)
            .expect("anonymous mapping");
        let base2 = map.as_mut_ptr() as usize;
        assert_ne!(base, 0);
        let page = CoreClockPage::from_mapping(map, 0x10).unwrap();
        assert_eq!(page.as_ptr() as usize, base2 + 0x10);
        // The device's register: 0x0000_0012_3456_789a as two BE words,
        // written as bytes (what a big-endian store puts in memory).
        let bytes = [0x00, 0x00, 0x00, 0x12, 0x34, 0x56, 0x78, 0x9a];
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: inside the 4096-byte anonymous mapping `page` owns.
            unsafe { (page.as_ptr().cast_mut()).add(i).write_volatile(*b) };
        }
        assert_eq!(page.read(), 0x12_3456_789a);
    }
}
