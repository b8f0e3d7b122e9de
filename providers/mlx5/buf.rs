//! Queue memory the device reads or writes: a queue buffer (WQEs or CQEs)
//! and its doorbell record, by default in one page-aligned allocation (the
//! record in the page after the queue). Where else they may come from (a
//! parent domain's allocator, huge pages) is `alloc.rs`; every queue starts
//! at least 64-byte aligned (a page for CQs and SRQs, libmlx5's alignment
//! for QPs, checked when an allocator answers).
//!
//! The kernel pins the buffer (`buf_addr`, a whole number of pages) and,
//! separately, the page holding the doorbell record (`db_addr`,
//! `mlx5_ib_db_map_user`); both must stay mapped until the kernel object is
//! destroyed, which the core guarantees by keeping this buffer in the
//! object's shared state.
//!
//! Nothing here hands out a Rust reference into the memory: WQE bytes are
//! written with raw copies (the device only reads send and receive queues),
//! CQEs are read with volatile loads after an acquire load of their
//! ownership byte, and doorbell records are 32-bit atomics (big-endian
//! values, as the device reads them). Every offset is checked against the
//! buffer, so a wrong index can corrupt the queue but never other memory.
#![allow(unsafe_code)]

use std::{
    marker::PhantomData,
    sync::{
        atomic::{AtomicU32, AtomicU8, Ordering},
        Arc,
    },
};

use super::{
    alloc::{self, Backing, BufSpec, Origin},
    wqe::Seg,
};
use crate::{
    error::Result,
    providers::{
        dma::{DmaBuf, PAGE},
        Device,
    },
};

/// The unit WQEs are written in (`MLX5_SEND_WQE_DS`).
pub(crate) const UNIT: usize = 16;

/// A queue buffer and its doorbell record.
///
/// By default one anonymous allocation: the queue, then a page whose first
/// 8 bytes are the record. In a parent domain with an allocator, or with an
/// allocation type ([`super::alloc`]), each may come from elsewhere; every
/// access goes through `base` and `db`, which its backings keep valid for
/// as long as the buffer lives.
#[derive(Debug)]
pub(crate) struct QueueBuf {
    /// The queue's first byte.
    base: *mut u8,
    /// Bytes of queue.
    len: usize,
    /// The doorbell record (two 4-aligned 32-bit words).
    db: *mut u8,
    queue: Backing,
    dbrec: Backing,
}

// SAFETY: `base` and `db` point into memory the backings own or were lent
// for the buffer's lifetime (an allocator's, by `QueueAllocator`'s
// contract); it is only read and written with raw and atomic accesses,
// from any thread, as the device does.
unsafe impl Send for QueueBuf {}
// SAFETY: as for `Send`: every access through `&QueueBuf` is raw or atomic.
unsafe impl Sync for QueueBuf {}

impl QueueBuf {
    /// Allocates `len` bytes of queue (rounded up to pages) and a doorbell
    /// record page after them, zeroed: the default, anonymous memory
    /// (unit tests; the provider allocates with [`QueueBuf::alloc`]).
    #[cfg(test)]
    pub(crate) fn new(len: usize, what: &'static str) -> Result<Self> {
        let rounded = len.max(1).div_ceil(PAGE) * PAGE;
        let dma = DmaBuf::new(rounded + PAGE, what)?;
        let base = dma.as_ptr();
        Ok(QueueBuf {
            base,
            len: rounded,
            db: base.wrapping_add(rounded),
            queue: Backing::Own(dma),
            dbrec: Backing::InQueue,
        })
    }

    /// The queue as `spec` asks for it and its doorbell record, each where
    /// libmlx5 would take it ([`super::alloc`]); `dev` maps contiguous
    /// pages. Zeroed.
    pub(crate) fn alloc(dev: Option<Device<'_>>, spec: &BufSpec<'_>) -> Result<Self> {
        let (q, record_page) = alloc::queue(dev, spec)?;
        let (db, dbrec) = match alloc::dbrec(spec.allocator, spec.what)? {
            Some(p) => (p.ptr.as_ptr(), p.backing),
            None if record_page => (q.ptr.as_ptr().wrapping_add(q.len), Backing::InQueue),
            None => {
                let d = DmaBuf::new(PAGE, spec.what)?;
                (d.as_ptr(), Backing::Own(d))
            }
        };
        Ok(QueueBuf {
            base: q.ptr.as_ptr(),
            len: q.len,
            db,
            queue: q.backing,
            dbrec,
        })
    }

    /// Where the queue and the doorbell record came from.
    #[allow(dead_code)] // tests and diagnostics
    pub(crate) fn origins(&self) -> (Origin, Origin) {
        (self.queue.origin(), self.dbrec.origin())
    }

    /// The queue's address (`buf_addr`).
    pub(crate) fn addr(&self) -> u64 {
        self.base as u64
    }

    /// The doorbell record's address (`db_addr`).
    pub(crate) fn db_addr(&self) -> u64 {
        self.db as u64
    }

    /// Bytes of queue.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Fills `n` bytes at `at` with `value` (CQ initialisation); false if
    /// they do not fit.
    pub(crate) fn fill(&self, at: usize, n: usize, value: u8) -> bool {
        if at > self.len || n > self.len - at {
            return false;
        }
        // SAFETY: inside the queue (checked above), raw write.
        unsafe { std::ptr::write_bytes(self.base.add(at), value, n) };
        true
    }

    /// Reads the byte at `at` with acquire ordering (a CQE's `op_own`: the
    /// device writes it last), or `None` outside the queue.
    #[inline(always)]
    pub(crate) fn load_u8(&self, at: usize) -> Option<u8> {
        if at >= self.len {
            return None;
        }
        // SAFETY: `at` is inside the queue; the byte is accessed atomically
        // by every reader and writer that races on it (the device's writes
        // are DMA; the test model stores it atomically).
        let b = unsafe { AtomicU8::from_ptr(self.base.add(at)) };
        Some(b.load(Ordering::Acquire))
    }

    /// Copies `N` bytes at `at` out with volatile loads, or `None` outside
    /// the queue (tests: what the library wrote).
    #[cfg(test)]
    pub(crate) fn read<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        if at > self.len || N > self.len - at || at % 8 != 0 || N % 8 != 0 {
            return None;
        }
        let mut out = [0u8; N];
        let src = self.base.wrapping_add(at).cast::<u64>();
        for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
            // SAFETY: `at + 8 * i + 8 <= at + N <= len` and `at` is 8-aligned
            // in an allocation aligned to 64 bytes at least (module doc): an
            // aligned u64 inside the queue.
            // Volatile: the device may write the memory at any time.
            let v = unsafe { std::ptr::read_volatile(src.add(i)) };
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        Some(out)
    }

    /// Stores doorbell record word `i` (0 or 1) as big-endian `value`, with
    /// release ordering: the queue writes before it are visible first.
    #[inline(always)]
    pub(crate) fn set_dbrec(&self, i: usize, value: u32) {
        if i > 1 {
            return;
        }
        self.dbrec(i).store(value.to_be(), Ordering::Release);
    }

    /// Doorbell record word `i` in host order.
    #[allow(dead_code)] // tests and diagnostics
    pub(crate) fn dbrec_value(&self, i: usize) -> u32 {
        u32::from_be(self.dbrec(i.min(1)).load(Ordering::Acquire))
    }

    fn dbrec(&self, i: usize) -> &AtomicU32 {
        // SAFETY: `db` is the doorbell record, 8 bytes aligned to 8 (a page
        // after the queue or of its own, or an allocator's answer to an
        // 8-byte, 8-aligned request) that the backings keep valid; words 0
        // and 1 are inside it and only accessed atomically.
        unsafe { AtomicU32::from_ptr(self.db.add(4 * i).cast()) }
    }
}

/// A power-of-two ring of 16-byte units inside a queue buffer (a send
/// queue, a receive queue, an SRQ), checked against the buffer once when it
/// is made: every unit index is masked into the ring, so a write through it
/// needs no bounds check of its own and can never leave the queue.
#[derive(Debug)]
pub(crate) struct Units {
    buf: Arc<QueueBuf>,
    /// Byte offset of unit 0 in the queue.
    offset: usize,
    /// Units in the ring, minus one.
    mask: u32,
}

impl Units {
    /// The queue buffer the units are in.
    pub(crate) fn queue(&self) -> &QueueBuf {
        &self.buf
    }

    /// `count` units (a power of two) from byte `offset` of `buf`; `None`
    /// if they are not inside the queue or `offset` is not 16-aligned.
    pub(crate) fn new(buf: Arc<QueueBuf>, offset: usize, count: u32) -> Option<Self> {
        let bytes = (count as usize).checked_mul(UNIT)?;
        let fits = count.is_power_of_two()
            && offset % UNIT == 0
            && offset <= buf.len
            && bytes <= buf.len - offset;
        fits.then(|| Units {
            buf,
            offset,
            mask: count - 1,
        })
    }

    /// The buffer the ring is in.
    pub(crate) fn buf(&self) -> &Arc<QueueBuf> {
        &self.buf
    }

    /// A view for a burst of writes: the ring's start and mask in two
    /// registers, so writing a segment is a mask, a shift and two stores
    /// (the compiler cannot keep them in registers across writes through
    /// `self`, which the queue memory might alias as far as it knows).
    #[inline(always)]
    pub(crate) fn view(&self) -> UnitsView<'_> {
        UnitsView {
            base: self.buf.base.wrapping_add(self.offset),
            mask: self.mask,
            _ring: PhantomData,
        }
    }

    /// Writes a 16-byte segment at unit `u` (a counter: masked here), as
    /// two 8-byte stores.
    #[inline(always)]
    pub(crate) fn put(&self, u: u32, seg: Seg) {
        self.view().put(u, seg);
    }

    /// Reads the 16-byte segment at unit `u` (one the library wrote: the
    /// device only reads these queues).
    #[inline]
    pub(crate) fn get(&self, u: u32) -> Seg {
        let at = self.offset + (u & self.mask) as usize * UNIT;
        // SAFETY: inside the ring, aligned, as in `put`; a raw read.
        Seg(unsafe { self.buf.base.add(at).cast::<[u64; 2]>().read() })
    }
}

/// The CQEs of a CQ buffer, checked against it once per poll: `ncqe` (a
/// power of two) entries of 64 or 128 bytes, the 64-byte CQE at the end of
/// each (`mlx5_cqe64` is the second half of a 128-byte CQE).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CqeRing<'a> {
    /// The 64-byte CQE of entry 0.
    first: *const u8,
    /// Entries, minus one.
    mask: u32,
    /// log2 of the entry size.
    shift: u32,
    _buf: PhantomData<&'a QueueBuf>,
}

/// The shape of a CQ: `ncqe` (a power of two) entries of 64 or 128 bytes,
/// checked once when the CQ is made ([`CqeGeometry::new`]) so a poll checks
/// only that the buffer holds it ([`QueueBuf::cqes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CqeGeometry {
    /// Entries, minus one.
    mask: u32,
    /// log2 of the entry size.
    shift: u32,
    /// Bytes of all entries.
    bytes: usize,
}

impl CqeGeometry {
    /// `ncqe` CQEs of `cqe_size` bytes; `None` if that is not a CQ's shape.
    pub(crate) fn new(ncqe: u32, cqe_size: usize) -> Option<Self> {
        let ok = ncqe.is_power_of_two() && (cqe_size == 64 || cqe_size == 128);
        Some(CqeGeometry {
            mask: ncqe.checked_sub(1).filter(|_| ok)?,
            shift: cqe_size.trailing_zeros(),
            bytes: (ncqe as usize).checked_mul(cqe_size)?,
        })
    }

    /// How many CQEs (a power of two).
    #[inline(always)]
    pub(crate) fn ncqe(self) -> u32 {
        self.mask + 1
    }

    /// Bytes per CQE (64 or 128).
    #[inline(always)]
    pub(crate) fn cqe_size(self) -> usize {
        1 << self.shift
    }
}

impl QueueBuf {
    /// The buffer as the CQEs of `g`; `None` if they do not fit.
    #[inline(always)]
    pub(crate) fn cqes(&self, g: CqeGeometry) -> Option<CqeRing<'_>> {
        (g.bytes <= self.len).then(|| CqeRing {
            // Entries are 64 or 128 bytes (`CqeGeometry::new`).
            first: self.base.wrapping_add((1 << g.shift) - 64),
            mask: g.mask,
            shift: g.shift,
            _buf: PhantomData,
        })
    }
}

impl<'a> CqeRing<'a> {
    /// The entries from consumer index `ci` to the end of the ring, at most
    /// `max`: a run in which the hardware's owner bit does not change and
    /// entry `k` is `k` entries after the first, with no masking.
    #[inline(always)]
    pub(crate) fn run(self, ci: u32, max: u32) -> CqeRun<'a> {
        let first = ci & self.mask;
        CqeRun {
            // In bounds: `first << shift` is below `ncqe * cqe_size`, and
            // the CQE's 64 bytes end where its entry ends (`cqes`).
            start: self.first.wrapping_add((first as usize) << self.shift),
            len: (self.mask - first + 1).min(max),
            stride: 1 << self.shift,
            _buf: PhantomData,
        }
    }
}

/// Consecutive entries of a [`CqeRing`] that do not wrap: see
/// [`CqeRing::run`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct CqeRun<'a> {
    /// The 64-byte CQE of its first entry.
    start: *const u8,
    /// Entries in the run (none past the ring's end).
    len: u32,
    /// Bytes from one entry to the next.
    stride: usize,
    _buf: PhantomData<&'a QueueBuf>,
}

impl<'a> CqeRun<'a> {
    /// How many entries it has.
    #[inline(always)]
    pub(crate) fn len(self) -> u32 {
        self.len
    }

    /// Its entries `from..to` (those it has), in order.
    #[inline(always)]
    pub(crate) fn iter(self, from: u32, to: u32) -> CqeIter<'a> {
        let from = from.min(self.len);
        CqeIter {
            // In bounds or one past the run's end (`get`), never read
            // when `left` is 0.
            next: self.start.wrapping_add(from as usize * self.stride),
            left: to.min(self.len).saturating_sub(from),
            stride: self.stride,
            _buf: PhantomData,
        }
    }

    /// The CQE of its entry `k`, if it has one.
    #[inline(always)]
    pub(crate) fn get(self, k: u32) -> Option<CqeRef<'a>> {
        (k < self.len).then(|| CqeRef {
            // In bounds: entry `k < len` of the run is inside the ring
            // (`CqeRing::run`).
            cqe: self.start.wrapping_add(k as usize * self.stride),
            _buf: PhantomData,
        })
    }
}

/// Entries of a [`CqeRun`], from [`CqeRun::iter`].
#[derive(Debug)]
pub(crate) struct CqeIter<'a> {
    /// The 64-byte CQE of the next entry.
    next: *const u8,
    /// Entries left.
    left: u32,
    stride: usize,
    _buf: PhantomData<&'a QueueBuf>,
}

impl<'a> Iterator for CqeIter<'a> {
    type Item = CqeRef<'a>;

    #[inline(always)]
    fn next(&mut self) -> Option<CqeRef<'a>> {
        if self.left == 0 {
            return None;
        }
        // In bounds: `next` is entry `from + taken` of the run and `left`
        // counts the entries after it that the run has (`CqeRun::iter`).
        let cqe = CqeRef {
            cqe: self.next,
            _buf: PhantomData,
        };
        self.left -= 1;
        self.next = self.next.wrapping_add(self.stride);
        Some(cqe)
    }
}

/// One 64-byte CQE in a CQ buffer, read with atomic and volatile loads:
/// the device writes it by DMA. Made only by [`CqeRun::get`] and
/// [`CqeIter`], for an entry inside the run, so its 64 bytes are inside
/// the buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CqeRef<'a> {
    cqe: *const u8,
    _buf: PhantomData<&'a QueueBuf>,
}

impl CqeRef<'_> {
    /// The ownership byte (`op_own`), with acquire ordering: the device
    /// writes it last.
    #[inline(always)]
    pub(crate) fn op_own(self) -> u8 {
        // SAFETY: byte 63 of the CQE is inside the buffer (a `CqeRef` is
        // made only for an entry of its run), which the borrow keeps alive;
        // software only accesses it atomically (the device writes it by
        // DMA; the test model atomically).
        unsafe { AtomicU8::from_ptr(self.cqe.add(63).cast_mut()) }.load(Ordering::Acquire)
    }

    /// The CQE (after its ownership byte was seen), read with volatile
    /// loads: bytes 32..64, which every CQE kind uses (the timestamp at 48
    /// among them), and with `head` also bytes 16..32 (the fields of a
    /// receive: path bits, SLID, source QP). The rest (checksums and other
    /// fields of offloads this library never turns on) is left zero.
    #[inline(always)]
    pub(crate) fn read(self, head: bool) -> [u8; 64] {
        let mut out = [0u8; 64];
        let first = if head { 2 } else { 4 };
        for i in first..8 {
            if let Some(chunk) = out.get_mut(8 * i..8 * i + 8) {
                chunk.copy_from_slice(&self.word(i).to_ne_bytes());
            }
        }
        out
    }

    /// Word `i % 8` (bytes `8 * i..8 * i + 8`) of the CQE, with a volatile
    /// load (after its ownership byte was seen).
    #[inline(always)]
    pub(crate) fn word(self, i: usize) -> u64 {
        // SAFETY: word `i % 8` of the CQE is inside the buffer and 8-aligned
        // (a `CqeRef` is made only for an entry of its run; entries are 64
        // or 128 bytes in an allocation aligned to 64 at least). Volatile: the device
        // may write at any time.
        unsafe { std::ptr::read_volatile(self.cqe.cast::<u64>().add(i % 8)) }
    }
}

/// A borrowed [`Units`] ring: see [`Units::view`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct UnitsView<'a> {
    /// Unit 0 of the ring.
    base: *mut u8,
    /// Units in the ring, minus one.
    mask: u32,
    _ring: PhantomData<&'a Units>,
}

// SAFETY: a view is a shared borrow of a `Units` (`Send + Sync`): the same
// ring, written with the same raw stores `Units::put` makes through `&self`,
// for no longer than that borrow. Sending or sharing it is sending or
// sharing `&Units`.
unsafe impl Send for UnitsView<'_> {}
// SAFETY: as for `Send` above.
unsafe impl Sync for UnitsView<'_> {}

impl UnitsView<'_> {
    /// Writes a 16-byte segment at unit `u` (a counter: masked here), as
    /// two 8-byte stores.
    #[inline(always)]
    pub(crate) fn put(self, u: u32, seg: Seg) {
        let at = (u & self.mask) as usize * UNIT;
        // SAFETY: the view borrows a `Units`, whose ring of `mask + 1`
        // units from `base` is inside its queue buffer (checked in
        // `Units::new`), alive while the borrow lasts; `u & mask` is in
        // the ring; `base` is 16-aligned. A raw write forms no reference.
        unsafe { self.base.add(at).cast::<[u64; 2]>().write(seg.0) };
    }

    /// Reads the 64 bytes of basic block `bb` (a counter of 64-byte blocks,
    /// masked here: units `4 * bb .. 4 * bb + 4` of the ring), or `None`
    /// if the ring is smaller than a block.
    #[inline(always)]
    pub(crate) fn read_bb(self, bb: u32) -> Option<[u64; 8]> {
        if self.mask < 3 {
            return None;
        }
        // `mask + 1` is a power of two (`Units::new`) of at least 4 units,
        // so `mask`'s two low bits are set and a unit index with its two
        // low bits clear is at most `mask - 3`: the block's four units are
        // inside the ring.
        let first = bb.wrapping_mul(4) & self.mask & !3;
        let src = self.base.wrapping_add(first as usize * UNIT).cast::<u64>();
        let mut block = [0u64; 8];
        for (i, w) in block.iter_mut().enumerate() {
            // SAFETY: units `first..first + 4` are inside the ring (above),
            // which the view borrows, inside its queue buffer (`Units::new`);
            // `base` is 16-aligned, so word `i < 8` is 8-aligned. A raw
            // read: the device only reads this queue.
            *w = unsafe { src.add(i).read() };
        }
        Some(block)
    }

    /// Writes `head` and then `data` as one byte stream from the start of
    /// unit `u`, wrapping from the ring's end to its start as the device
    /// reads it; returns the units used. The last unit's bytes after the
    /// stream are left as they were: the device takes the inline segment's
    /// byte count of them (rdma-core's `set_data_inl_seg` does not clear
    /// them either), and a store of zeros under the data cost an inline
    /// SEND about 0.5 ns (the BlueFlame copy's loads then span two stores).
    /// A stream longer than the ring writes nothing and returns 0 (callers
    /// bound it far below: the largest inline segment).
    #[inline]
    pub(crate) fn put_stream(self, u: u32, head: [u8; 4], data: &[u8]) -> u32 {
        let total = head.len() + data.len();
        let units = total.div_ceil(UNIT);
        if units > self.mask as usize + 1 {
            return 0;
        }
        let units = units as u32;
        let first = (u & self.mask) as usize;
        let room = (self.mask as usize + 1 - first) * UNIT;
        let base = self.base;
        let to_end = data.len().min(room - head.len());
        // SAFETY: unit `first` starts `room >= UNIT` bytes before the end
        // of the ring (inside the queue, checked in `Units::new`, alive
        // while the view's borrow lasts): the head's 4 bytes and the next
        // `to_end <= room - 4` bytes fit there; the remaining
        // `data.len() - to_end` bytes go to the ring's start and fit
        // because the whole stream is at most the ring's size (checked
        // above). Raw copies from a slice the caller owns; no reference to
        // the queue is formed.
        unsafe {
            let at = base.add(first * UNIT);
            std::ptr::copy_nonoverlapping(head.as_ptr(), at, head.len());
            copy_short(data.as_ptr(), at.add(head.len()), to_end);
            if to_end < data.len() {
                copy_short(data.as_ptr().add(to_end), base, data.len() - to_end);
            }
        }
        units
    }
}

/// Copies `len` bytes from `src` to `dst` as `copy_nonoverlapping` does,
/// without a call for the short payloads inline sends carry: up to 32
/// bytes as two overlapping loads and stores of the widest size that fits
/// (a call of the C library's `memcpy` costs a short copy about 20
/// instructions more), longer ones through `copy_nonoverlapping`.
///
/// # Safety
///
/// As for `copy_nonoverlapping`: `src` valid for reading and `dst` for
/// writing `len` bytes, the two not overlapping (alignment is not needed).
#[inline(always)]
unsafe fn copy_short(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: each pair of accesses covers bytes `0..w` and
    // `len - w..len` with `w <= len` for the branch taken, so every access
    // is inside the `len` bytes the caller vouches for; unaligned accesses
    // are used, and the two ranges do not overlap (caller).
    unsafe {
        if (16..=32).contains(&len) {
            let a = src.cast::<[u8; 16]>().read_unaligned();
            let b = src.add(len - 16).cast::<[u8; 16]>().read_unaligned();
            dst.cast::<[u8; 16]>().write_unaligned(a);
            dst.add(len - 16).cast::<[u8; 16]>().write_unaligned(b);
        } else if (8..16).contains(&len) {
            let a = src.cast::<u64>().read_unaligned();
            let b = src.add(len - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(a);
            dst.add(len - 8).cast::<u64>().write_unaligned(b);
        } else if (4..8).contains(&len) {
            let a = src.cast::<u32>().read_unaligned();
            let b = src.add(len - 4).cast::<u32>().read_unaligned();
            dst.cast::<u32>().write_unaligned(a);
            dst.add(len - 4).cast::<u32>().write_unaligned(b);
        } else if len < 4 {
            for i in 0..len {
                *dst.add(i) = *src.add(i);
            }
        } else {
            std::ptr::copy_nonoverlapping(src, dst, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_stay_inside_the_queue() {
        let b = QueueBuf::new(100, "test").unwrap();
        assert_eq!(b.len(), PAGE);
        assert_eq!(b.db_addr() - b.addr(), PAGE as u64);
        assert!(b.fill(PAGE - 16, 16, 7));
        assert!(!b.fill(PAGE - 15, 16, 7));
        assert!(!b.fill(usize::MAX, 1, 7));
        assert_eq!(b.read::<16>(PAGE - 16), Some([7; 16]));
        assert_eq!(b.read::<16>(PAGE - 8), None);
        assert_eq!(b.load_u8(PAGE - 1), Some(7));
        assert_eq!(b.load_u8(PAGE), None);
        b.set_dbrec(1, 0x1234);
        assert_eq!(b.dbrec_value(1), 0x1234);
        assert_eq!(b.dbrec_value(0), 0);
        assert!(b.fill(0, 64, 0xf0));
        assert_eq!(b.load_u8(63), Some(0xf0));
    }

    /// Runs end at the ring's end, and their iterators stay inside them.
    #[test]
    fn cqe_runs_stop_at_the_rings_end() {
        for cqe_size in [64, 128] {
            let b = QueueBuf::new(8 * cqe_size, "test").unwrap();
            // Entry i's op_own byte (the last of its 64-byte CQE) is i.
            for i in 0..8 {
                assert!(b.fill(i * cqe_size + cqe_size - 1, 1, i as u8));
            }
            let ring = b.cqes(CqeGeometry::new(8, cqe_size).unwrap()).unwrap();
            let own = |run: CqeRun<'_>, from, to| -> Vec<u8> {
                run.iter(from, to).map(|c| c.op_own()).collect()
            };
            let run = ring.run(8 + 5, 16);
            assert_eq!(run.len(), 3, "entries 5..8, not past the end");
            assert_eq!(own(run, 0, run.len()), [5, 6, 7]);
            assert_eq!(own(run, 1, 99), [6, 7]);
            assert_eq!(own(run, 3, 9), Vec::<u8>::new());
            assert_eq!(own(run, 7, 2), Vec::<u8>::new());
            assert_eq!(run.get(2).map(|c| c.op_own()), Some(7));
            assert!(run.get(3).is_none());
            assert_eq!(ring.run(0, 2).len(), 2, "bounded by max");
            assert_eq!(own(ring.run(16, 8), 0, 8), [0, 1, 2, 3, 4, 5, 6, 7]);
        }
        let g = CqeGeometry::new(256, 128).unwrap();
        assert_eq!((g.ncqe(), g.cqe_size()), (256, 128));
        assert!(CqeGeometry::new(8, 96).is_none());
        assert!(CqeGeometry::new(12, 64).is_none());
        assert!(CqeGeometry::new(0, 64).is_none());
        let small = QueueBuf::new(4096, "test").unwrap();
        assert!(small.cqes(CqeGeometry::new(64, 64).unwrap()).is_some());
        assert!(small.cqes(CqeGeometry::new(64, 128).unwrap()).is_none());
    }

    #[test]
    fn unit_rings_are_checked_once_and_wrap_inside_themselves() {
        let b = Arc::new(QueueBuf::new(2 * PAGE, "test").unwrap());
        assert!(
            Units::new(b.clone(), PAGE, 257).is_none(),
            "not a power of two"
        );
        assert!(Units::new(b.clone(), PAGE + 8, 64).is_none(), "misaligned");
        assert!(
            Units::new(b.clone(), PAGE + 16, 256).is_none(),
            "runs past the queue"
        );
        assert!(Units::new(b.clone(), usize::MAX - 15, 1).is_none());
        let r = Units::new(b.clone(), PAGE, 256).unwrap();
        r.put(255, Seg([u64::from_ne_bytes([1; 8]); 2]));
        r.put(256 + 3, Seg([u64::from_ne_bytes([2; 8]); 2])); // wraps to unit 3
        assert_eq!(b.read::<16>(2 * PAGE - 16), Some([1; 16]));
        assert_eq!(b.read::<16>(PAGE + 48), Some([2; 16]));
        assert_eq!(b.read::<16>(0), Some([0; 16]), "nothing before the ring");
        let byte = |x: [u64; 8], i: usize| x[i / 8].to_ne_bytes()[i % 8];
        assert_eq!(
            r.view().read_bb(63).map(|x| (byte(x, 0), byte(x, 48))),
            Some((0, 1)),
            "the last block: units 252 to 255"
        );
        assert_eq!(
            r.view().read_bb(64).map(|x| byte(x, 48)),
            Some(2),
            "block 64 is block 0"
        );
        let tiny = Units::new(b.clone(), PAGE, 2).unwrap();
        assert!(
            tiny.view().read_bb(0).is_none(),
            "a ring smaller than a block"
        );
        // A stream that wraps: 4 header bytes and 40 data bytes from unit 254
        // (two units to the end) take three units, the last one's last
        // four bytes untouched.
        r.put(0, Seg([u64::from_ne_bytes([0xee; 8]); 2]));
        let data: Vec<u8> = (1..=40).collect();
        assert_eq!(r.view().put_stream(254, [0xaa; 4], &data), 3);
        let tail = b.read::<32>(2 * PAGE - 32).unwrap();
        assert_eq!(tail[..4], [0xaa; 4]);
        assert_eq!(tail[4..], data[..28]);
        let start = b.read::<16>(PAGE).unwrap();
        assert_eq!(start[..12], data[28..]);
        assert_eq!(start[12..], [0xee; 4], "after the stream");
        assert_eq!(
            r.view().put_stream(0, [0; 4], &vec![7; 256 * 16]),
            0,
            "longer than the ring"
        );
    }

    /// A short copy moves exactly its bytes, for every length a copy takes
    /// a different branch for and every misalignment, and touches nothing
    /// around them.
    #[test]
    fn short_copies_move_exactly_their_bytes() {
        let src: Vec<u8> = (0..100).map(|i| i as u8 ^ 0x5a).collect();
        for len in 0..=70 {
            for (s_off, d_off) in [(0, 0), (1, 3), (7, 9), (13, 2)] {
                let mut dst = [0xeeu8; 120];
                // SAFETY: `src[s_off..s_off + len]` and
                // `dst[16 + d_off..16 + d_off + len]` are inside their
                // buffers (len <= 70), which are distinct.
                unsafe {
                    copy_short(
                        src.as_ptr().add(s_off),
                        dst.as_mut_ptr().add(16 + d_off),
                        len,
                    )
                };
                let at = 16 + d_off;
                assert_eq!(dst[at..at + len], src[s_off..s_off + len], "len {len}");
                assert!(dst[..at].iter().all(|&b| b == 0xee), "before, len {len}");
                assert!(
                    dst[at + len..].iter().all(|&b| b == 0xee),
                    "after, len {len}"
                );
            }
        }
    }
}
