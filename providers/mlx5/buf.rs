//! Queue memory the device reads or writes: a queue buffer (WQEs or CQEs)
//! followed by its doorbell record, in one page-aligned allocation.
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

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use crate::{
    error::Result,
    providers::dma::{DmaBuf, PAGE},
};

/// A queue buffer and its doorbell record.
#[derive(Debug)]
pub(crate) struct QueueBuf {
    dma: DmaBuf,
    /// Bytes of queue (a multiple of the page size).
    len: usize,
}

impl QueueBuf {
    /// Allocates `len` bytes of queue (rounded up to pages) and a doorbell
    /// record page after them, zeroed.
    pub(crate) fn new(len: usize, what: &'static str) -> Result<Self> {
        let len = len.max(1).div_ceil(PAGE) * PAGE;
        let dma = DmaBuf::new(len + PAGE, what)?;
        Ok(QueueBuf { dma, len })
    }

    /// The queue's address (`buf_addr`).
    pub(crate) fn addr(&self) -> u64 {
        self.dma.addr()
    }

    /// The doorbell record's address (`db_addr`).
    pub(crate) fn db_addr(&self) -> u64 {
        self.dma.addr() + self.len as u64
    }

    /// Bytes of queue.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies `bytes` to queue offset `at`; false (and nothing written) if
    /// they do not fit.
    #[inline(always)]
    pub(crate) fn write(&self, at: usize, bytes: &[u8]) -> bool {
        if at > self.len || bytes.len() > self.len - at {
            return false;
        }
        // SAFETY: `at..at + bytes.len()` is inside the queue (checked
        // above), which is inside the live allocation; a raw copy forms no
        // reference to memory the device may access.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.dma.as_ptr().add(at), bytes.len())
        };
        true
    }

    /// Fills `n` bytes at `at` with `value` (CQ initialisation); false if
    /// they do not fit.
    pub(crate) fn fill(&self, at: usize, n: usize, value: u8) -> bool {
        if at > self.len || n > self.len - at {
            return false;
        }
        // SAFETY: inside the queue (checked above), raw write.
        unsafe { std::ptr::write_bytes(self.dma.as_ptr().add(at), value, n) };
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
        let b = unsafe { AtomicU8::from_ptr(self.dma.as_ptr().add(at)) };
        Some(b.load(Ordering::Acquire))
    }

    /// Copies `N` bytes at `at` out with volatile loads (a CQE after its
    /// ownership byte was seen), or `None` outside the queue.
    #[inline(always)]
    pub(crate) fn read<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        if at > self.len || N > self.len - at || at % 8 != 0 || N % 8 != 0 {
            return None;
        }
        let mut out = [0u8; N];
        let src = self.dma.as_ptr().wrapping_add(at).cast::<u64>();
        for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
            // SAFETY: `at + 8 * i + 8 <= at + N <= len` and `at` is 8-aligned
            // in a page-aligned allocation: an aligned u64 inside the queue.
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
        // SAFETY: the record page follows the queue in the same allocation
        // (`new`); words 0 and 1 are 4-aligned and inside it, and they are
        // only accessed atomically.
        unsafe { AtomicU32::from_ptr(self.dma.as_ptr().add(self.len + 4 * i).cast()) }
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
        assert!(b.write(PAGE - 16, &[7; 16]));
        assert!(!b.write(PAGE - 15, &[7; 16]));
        assert!(!b.write(usize::MAX, &[7; 1]));
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
}
