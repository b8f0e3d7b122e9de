//! Copies into and out of memory that other threads and the device access
//! at the same time (registered memory regions).
//!
//! A `MemoryRegion` is `Clone + Send + Sync` and the device writes its
//! pages whenever a peer's RDMA arrives, so two accesses to the same bytes
//! can overlap. Plain (or volatile) copies would then be a data race, which
//! Rust leaves undefined; atomic accesses never are. Every access here is
//! an atomic one: relaxed 8-byte loads and stores for the aligned middle of
//! a range and relaxed byte accesses for its ends, so a concurrent writer
//! can make a copy observe a mix of old and new bytes (the caller orders
//! copies with its own synchronisation, as with any shared buffer) but
//! never makes it undefined. On x86-64 and AArch64 a relaxed access is a
//! plain load or store: the price is that the compiler copies 8 bytes at a
//! time instead of with vector instructions.
//!
//! The byte accesses with `Acquire`/`Release` ([`load_u8`], [`store_u8`])
//! are the flags of polling loops: between threads they synchronise as
//! usual; with the device, an acquire load keeps the reads after it from
//! being performed before it, so a flag the device wrote after its data
//! (RDMA writes land in order on RC, as rxe copies them and as PCIe orders
//! a device's posted writes) guards data that is then complete.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

const WORD: usize = size_of::<u64>();

/// The byte at `p` as an atomic.
///
/// # Safety
/// `p` must be valid for reads and writes for `'a`, and every access to it
/// in this process atomic while it is shared.
unsafe fn byte<'a>(p: *mut u8) -> &'a AtomicU8 {
    // SAFETY: the caller's contract; `AtomicU8` has alignment 1.
    unsafe { AtomicU8::from_ptr(p) }
}

/// The 8-byte word at `p` (8-aligned) as an atomic.
///
/// # Safety
/// As [`byte`], for the 8 bytes at `p`, which must be 8-aligned.
unsafe fn word<'a>(p: *mut u8) -> &'a AtomicU64 {
    // SAFETY: the caller's contract, alignment included.
    unsafe { AtomicU64::from_ptr(p.cast()) }
}

/// How many bytes from `p` to the next 8-aligned address, at most `len`.
fn head(p: *const u8, len: usize) -> usize {
    p.align_offset(WORD).min(len)
}

/// Copies `src` to `dst..dst + src.len()`.
///
/// # Safety
/// The destination range must be valid for reads and writes (a live
/// mapping), and every access to it in this process atomic.
pub(crate) unsafe fn copy_in(dst: *mut u8, src: &[u8]) {
    let h = head(dst, src.len());
    let (first, rest) = src.split_at(h);
    let words = rest.chunks_exact(WORD);
    let tail = words.remainder();
    for (i, &b) in first.iter().enumerate() {
        // SAFETY: `i < src.len()`: inside the caller's range.
        unsafe { byte(dst.add(i)) }.store(b, Ordering::Relaxed);
    }
    let mut at = h;
    for w in words {
        let mut v = [0u8; WORD];
        v.copy_from_slice(w);
        // SAFETY: `at + 8 <= src.len()`, and `dst + at` is 8-aligned (the
        // words start at the first aligned address, `dst + h`).
        unsafe { word(dst.add(at)) }.store(u64::from_ne_bytes(v), Ordering::Relaxed);
        at += WORD;
    }
    for (i, &b) in tail.iter().enumerate() {
        // SAFETY: `at + i < src.len()`.
        unsafe { byte(dst.add(at + i)) }.store(b, Ordering::Relaxed);
    }
}

/// Copies `src..src + dst.len()` into `dst`.
///
/// # Safety
/// As [`copy_in`], for the source range.
pub(crate) unsafe fn copy_out(src: *mut u8, dst: &mut [u8]) {
    let h = head(src, dst.len());
    let (first, rest) = dst.split_at_mut(h);
    for (i, b) in first.iter_mut().enumerate() {
        // SAFETY: `i < dst.len()`: inside the caller's range.
        *b = unsafe { byte(src.add(i)) }.load(Ordering::Relaxed);
    }
    let mut at = h;
    let mut words = rest.chunks_exact_mut(WORD);
    for w in &mut words {
        // SAFETY: in range and 8-aligned, as in `copy_in`.
        let v = unsafe { word(src.add(at)) }.load(Ordering::Relaxed);
        w.copy_from_slice(&v.to_ne_bytes());
        at += WORD;
    }
    for (i, b) in words.into_remainder().iter_mut().enumerate() {
        // SAFETY: `at + i < dst.len()`.
        *b = unsafe { byte(src.add(at + i)) }.load(Ordering::Relaxed);
    }
}

/// Sets `len` bytes at `dst` to `value`.
///
/// # Safety
/// As [`copy_in`].
pub(crate) unsafe fn fill(dst: *mut u8, len: usize, value: u8) {
    let h = head(dst, len);
    let pattern = u64::from_ne_bytes([value; WORD]);
    let words = (len - h) / WORD;
    for i in 0..h {
        // SAFETY: `i < len`: inside the caller's range.
        unsafe { byte(dst.add(i)) }.store(value, Ordering::Relaxed);
    }
    for i in 0..words {
        // SAFETY: in range and 8-aligned, as in `copy_in`.
        unsafe { word(dst.add(h + i * WORD)) }.store(pattern, Ordering::Relaxed);
    }
    for i in h + words * WORD..len {
        // SAFETY: `i < len`.
        unsafe { byte(dst.add(i)) }.store(value, Ordering::Relaxed);
    }
}

/// Loads the byte at `p` with `Acquire` ordering (see the module
/// documentation).
///
/// # Safety
/// As [`copy_in`], for the one byte.
#[inline]
pub(crate) unsafe fn load_u8(p: *mut u8) -> u8 {
    // SAFETY: the caller's contract.
    unsafe { byte(p) }.load(Ordering::Acquire)
}

/// Stores the byte at `p` with `Release` ordering.
///
/// # Safety
/// As [`copy_in`], for the one byte.
#[inline]
pub(crate) unsafe fn store_u8(p: *mut u8, v: u8) {
    // SAFETY: the caller's contract.
    unsafe { byte(p) }.store(v, Ordering::Release)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every offset and length around the word boundaries, against a plain
    /// copy of the same bytes.
    #[test]
    fn copies_and_fills_match_plain_ones_at_every_alignment() {
        let mut buf = vec![0u64; 8]; // 64 bytes, 8-aligned
        let base = buf.as_mut_ptr().cast::<u8>();
        let pattern: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for start in 0..17 {
            for len in 0..(64 - start).min(40) {
                // SAFETY: inside `buf`, which only this test touches.
                unsafe {
                    fill(base, 64, 0xee);
                    copy_in(base.add(start), &pattern[..len]);
                }
                let mut out = vec![0u8; 64];
                // SAFETY: as above.
                unsafe { copy_out(base, &mut out) };
                let mut want = vec![0xeeu8; 64];
                want[start..start + len].copy_from_slice(&pattern[..len]);
                assert_eq!(out, want, "copy_in at {start}, {len} bytes");
                let mut part = vec![0u8; len];
                // SAFETY: as above.
                unsafe { copy_out(base.add(start), &mut part) };
                assert_eq!(part, pattern[..len], "copy_out at {start}, {len} bytes");
                // SAFETY: as above.
                unsafe { fill(base.add(start), len, 0x11) };
                // SAFETY: as above.
                unsafe { copy_out(base, &mut out) };
                want[start..start + len].fill(0x11);
                assert_eq!(out, want, "fill at {start}, {len} bytes");
            }
        }
        // SAFETY: as above.
        unsafe {
            store_u8(base.add(9), 0x42);
            assert_eq!(load_u8(base.add(9)), 0x42);
        }
    }

    /// Two threads copying into and out of the same bytes: defined (this
    /// is what a plain copy made undefined), and each word arrives whole.
    #[test]
    fn concurrent_copies_of_the_same_bytes_tear_only_between_words() {
        let mut buf = vec![0u64; 512];
        let addr = buf.as_mut_ptr() as usize;
        let writer = std::thread::spawn(move || {
            for round in 0..2000u64 {
                let v = [round as u8; 4096];
                // SAFETY: `buf` outlives the thread (joined below); every
                // access to it is through these atomic copies.
                unsafe { copy_in(addr as *mut u8, &v) };
            }
        });
        let mut out = vec![0u8; 4096];
        for _ in 0..2000 {
            // SAFETY: as above.
            unsafe { copy_out(addr as *mut u8, &mut out) };
            for w in out.chunks_exact(8) {
                assert!(w.iter().all(|&b| b == w[0]), "a word torn: {w:?}");
            }
        }
        writer.join().unwrap();
        drop(buf);
    }
}
