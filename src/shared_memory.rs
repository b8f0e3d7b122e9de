//! Copies into and out of memory that other threads and the device access
//! at the same time (registered memory regions, and the queues and regions
//! the in-process mlx5 device model reads and writes).
//!
//! # What is promised, and why
//!
//! A `MemoryRegion` is `Clone + Send + Sync` and the device writes its
//! pages whenever a peer's RDMA arrives, so two accesses to the same bytes
//! can overlap. The `std::sync::atomic` module documentation ("Memory model
//! for atomic accesses") makes two kinds of overlap undefined behaviour:
//!
//! - a *data race*: conflicting accesses (at least one a write) that
//!   happens-before does not order, at least one of them non-atomic;
//! - a *mixed-size* race: atomic accesses that happens-before does not
//!   order and that partially overlap. Unordered atomic accesses must be
//!   disjoint, or access exactly the same memory with the same size, or
//!   both be reads.
//!
//! Relaxed 8-byte accesses for the middle of a copy and byte accesses for
//! its ends (what this module used to do) avoid the first but not the
//! second: `write(0, &[0; 16])` on one thread racing `read_u8(3)` on
//! another is an 8-byte store and a 1-byte load of the same byte.
//!
//! So every access this module makes is of one kind: an aligned 8-byte
//! atomic access ([`AtomicU64`]) to the whole word containing the bytes
//! concerned. Two such accesses either touch exactly the same 8 bytes with
//! the same size or are disjoint, so no mixed-size race exists between
//! them, and being atomic neither is part of a data race:
//!
//! - the words a copy or fill covers whole: relaxed `u64` loads and stores
//!   (on x86-64 and AArch64 a plain load or store; the price is that the
//!   compiler copies 8 bytes at a time instead of with vector
//!   instructions);
//! - a word the range covers only partly (its ends, or a range inside one
//!   word): a relaxed load of the word for [`copy_out`]; for [`copy_in`]
//!   and [`fill`] a compare-exchange loop on the word that replaces only the
//!   range's bytes;
//! - [`load_u8`]: an `Acquire` load of the byte's word; [`store_u8`]: the
//!   compare-exchange loop, with `Release` ordering.
//!
//! A copy racing a writer of the same bytes reads each word with one load,
//! so no word is torn, but it may see some words old and some new; the
//! caller orders copies with its own synchronisation (a completion, a flag
//! byte, a lock), as with any shared buffer.
//!
//! # Why a compare-exchange for partial words
//!
//! Writing some bytes of a word with word accesses means writing the
//! others back. A plain load, merge and store would undo a neighbour's
//! write made in between (another thread's [`store_u8`] to the next byte,
//! a copy into the next bytes). Clearing with `fetch_and` and then setting
//! with `fetch_or` loses nothing but makes two modifications, and a load
//! between them sees the bytes zero: a value nobody stored (a polled flag
//! would read 0). A successful compare-exchange is one modification that
//! writes the other bytes back with exactly the value they have at that
//! moment in the word's modification order, so no write is lost and no
//! intermediate value is visible; it retries only when another writer
//! changed the word meanwhile (lock-free). Being a read-modify-write, it
//! also continues release sequences: a relaxed copy into the bytes next to
//! a flag stored with [`store_u8`] does not break that flag's pairing with
//! an acquire [`load_u8`] that reads the word after the copy.
//!
//! # The containing words: the contract
//!
//! An access to a byte is an access to its whole aligned word, so the
//! safety contract of each function is about the *containing words* of its
//! range (from the 8-aligned address at or below its first byte to the
//! 8-aligned address at or above its end), not only about the range:
//!
//! 1. they must be valid for reads (and, for [`copy_in`], [`fill`] and
//!    [`store_u8`], for writes) for the whole call;
//! 2. every other access in this process to any of their bytes that
//!    happens-before does not order with the call must be made through
//!    these functions or be an aligned 8-byte atomic access to the same
//!    word; only if neither it nor the call writes ([`copy_out`] or
//!    [`load_u8`] against a read) may it be any read. Ordered accesses may
//!    be anything.
//!
//! Writes put back the bytes outside the range unchanged, but they are
//! still writes of those bytes in the memory model. This module does not
//! try to handle memory whose containing words extend beyond what the
//! caller owns (it could not know what lives there); it widens the
//! contract instead, and the callers vouch for it:
//!
//! - `MemoryRegion` (`src/mr.rs`) passes only memory of regions from
//!   `alloc_mr`: an anonymous mapping, page-aligned, whose pages it alone
//!   uses. A word containing a byte of the region lies inside those pages
//!   (a page is a multiple of 8 bytes), and the bytes past the region's
//!   length up to the next word boundary are accessed by nothing else.
//!   Nothing else in the crate accesses region memory; through
//!   `MemoryRegion::as_ptr` the rule above is the program's, as its
//!   documentation says.
//! - The mlx5 device model (`src/testing/mlx5/memory.rs`) passes
//!   ranges of memory regions and of queue buffers (page-aligned
//!   allocations) and must vouch for their containing words too. Two cases
//!   need care there: a region registered with `register_raw` may start or
//!   end inside a word whose other bytes the program uses for something
//!   else; and a copy of bytes 0..63 of a CQE writes the word of byte 63,
//!   `op_own`, which the library polls with a byte atomic, so that byte
//!   must be written and polled with word accesses too (as [`store_u8`]
//!   and [`load_u8`] do).
//!
//! # The device
//!
//! The device's DMA is not part of the Rust abstract machine, so its
//! writes cannot make these accesses undefined (as before). With
//! cache-coherent DMA a device write to a word between the load and the
//! compare-exchange of a partial-word write changes the word, so the
//! exchange fails and retries: the write here never undoes the device's
//! write to the word's other bytes.
//!
//! [`load_u8`] and [`store_u8`] are the flags of polling loops: between
//! threads they synchronise as usual; with the device, an acquire load
//! keeps the reads after it from being performed before it, so a flag the
//! device wrote after its data (RDMA writes land in order on RC, as rxe
//! copies them and as PCIe orders a device's posted writes) guards data
//! that is then complete.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};

const WORD: usize = size_of::<u64>();

/// The 8-byte word at `w` as an atomic.
///
/// # Safety
/// `w` must be 8-aligned and the 8 bytes at it valid for the accesses made
/// through the result while it is used, and accessed as the module's
/// contract says.
#[inline(always)]
unsafe fn word<'a>(w: *mut u8) -> &'a AtomicU64 {
    // SAFETY: the caller's contract, alignment included.
    unsafe { AtomicU64::from_ptr(w.cast()) }
}

/// Loads the word at `w`.
///
/// # Safety
/// As [`word`], for reads.
#[inline(always)]
unsafe fn load(w: *mut u8, order: Ordering) -> u64 {
    // SAFETY: the caller's contract.
    let a = unsafe { word(w) };
    #[cfg(test)]
    trace::record(w.addr(), size_of_val(a));
    a.load(order)
}

/// Stores `v` to the word at `w`.
///
/// # Safety
/// As [`word`], for writes.
#[inline(always)]
unsafe fn store(w: *mut u8, v: u64, order: Ordering) {
    // SAFETY: the caller's contract.
    let a = unsafe { word(w) };
    #[cfg(test)]
    trace::record(w.addr(), size_of_val(a));
    a.store(v, order)
}

/// Replaces bytes `at..at + bytes.len()` of the word at `w` with `bytes`,
/// leaving its other bytes as they are, in one compare-exchange (see the
/// module documentation); `order` is the ordering of the store.
///
/// # Safety
/// As [`word`], for reads and writes; `at + bytes.len() <= 8`.
#[inline]
unsafe fn store_part(w: *mut u8, at: usize, bytes: &[u8], order: Ordering) {
    let mut mask = [0u8; WORD];
    let mut value = [0u8; WORD];
    mask[at..at + bytes.len()].fill(0xff);
    value[at..at + bytes.len()].copy_from_slice(bytes);
    let (mask, value) = (u64::from_ne_bytes(mask), u64::from_ne_bytes(value));
    // SAFETY: the caller's contract.
    let a = unsafe { word(w) };
    #[cfg(test)]
    trace::record(w.addr(), size_of_val(a));
    let mut old = a.load(Ordering::Relaxed);
    loop {
        #[cfg(test)]
        trace::record(w.addr(), size_of_val(a));
        match a.compare_exchange_weak(old, (old & !mask) | value, order, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => old = now,
        }
    }
}

/// Copies `src` to `dst..dst + src.len()`.
///
/// # Safety
/// The containing words of the destination range (module documentation)
/// must be valid for reads and writes, and accessed as the module's
/// contract says.
pub(crate) unsafe fn copy_in(dst: *mut u8, src: &[u8]) {
    let lead = dst.addr() % WORD;
    // The containing word of the first byte (`dst` itself if aligned).
    let mut w = dst.wrapping_sub(lead);
    let mut src = src;
    if lead != 0 && !src.is_empty() {
        let (part, rest) = src.split_at(src.len().min(WORD - lead));
        // SAFETY: the containing word of `dst`, which the caller vouches
        // for; `lead + part.len() <= 8`.
        unsafe { store_part(w, lead, part, Ordering::Relaxed) };
        src = rest;
        w = w.wrapping_add(WORD);
    }
    // `w` is 8-aligned from here on.
    let mut words = src.chunks_exact(WORD);
    for chunk in &mut words {
        let mut v = [0u8; WORD];
        v.copy_from_slice(chunk);
        // SAFETY: a word wholly inside the range.
        unsafe { store(w, u64::from_ne_bytes(v), Ordering::Relaxed) };
        w = w.wrapping_add(WORD);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        // SAFETY: the containing word of the range's last bytes.
        unsafe { store_part(w, 0, tail, Ordering::Relaxed) };
    }
}

/// Copies `src..src + dst.len()` into `dst`.
///
/// # Safety
/// The containing words of the source range must be valid for reads, and
/// accessed as the module's contract says.
pub(crate) unsafe fn copy_out(src: *mut u8, dst: &mut [u8]) {
    let lead = src.addr() % WORD;
    let mut w = src.wrapping_sub(lead);
    let mut dst = dst;
    if lead != 0 && !dst.is_empty() {
        let n = dst.len().min(WORD - lead);
        let (part, rest) = dst.split_at_mut(n);
        // SAFETY: the containing word of `src`, which the caller vouches
        // for.
        let v = unsafe { load(w, Ordering::Relaxed) }.to_ne_bytes();
        part.copy_from_slice(&v[lead..lead + n]);
        dst = rest;
        w = w.wrapping_add(WORD);
    }
    let mut words = dst.chunks_exact_mut(WORD);
    for chunk in &mut words {
        // SAFETY: a word wholly inside the range.
        let v = unsafe { load(w, Ordering::Relaxed) };
        chunk.copy_from_slice(&v.to_ne_bytes());
        w = w.wrapping_add(WORD);
    }
    let tail = words.into_remainder();
    if !tail.is_empty() {
        // SAFETY: the containing word of the range's last bytes.
        let v = unsafe { load(w, Ordering::Relaxed) }.to_ne_bytes();
        tail.copy_from_slice(&v[..tail.len()]);
    }
}

/// Sets `len` bytes at `dst` to `value`.
///
/// # Safety
/// As [`copy_in`].
pub(crate) unsafe fn fill(dst: *mut u8, len: usize, value: u8) {
    let lead = dst.addr() % WORD;
    let mut w = dst.wrapping_sub(lead);
    let mut len = len;
    let bytes = [value; WORD];
    if lead != 0 && len != 0 {
        let n = len.min(WORD - lead);
        // SAFETY: the containing word of `dst`; `lead + n <= 8`.
        unsafe { store_part(w, lead, &bytes[..n], Ordering::Relaxed) };
        len -= n;
        w = w.wrapping_add(WORD);
    }
    for _ in 0..len / WORD {
        // SAFETY: a word wholly inside the range.
        unsafe { store(w, u64::from_ne_bytes(bytes), Ordering::Relaxed) };
        w = w.wrapping_add(WORD);
    }
    if len % WORD != 0 {
        // SAFETY: the containing word of the range's last bytes.
        unsafe { store_part(w, 0, &bytes[..len % WORD], Ordering::Relaxed) };
    }
}

/// Loads the byte at `p` with `Acquire` ordering: an acquire load of its
/// word (see the module documentation).
///
/// # Safety
/// As [`copy_out`], for the one byte (its containing word).
#[inline]
pub(crate) unsafe fn load_u8(p: *mut u8) -> u8 {
    let at = p.addr() % WORD;
    // SAFETY: the containing word of `p`, which the caller vouches for.
    let v = unsafe { load(p.wrapping_sub(at), Ordering::Acquire) };
    v.to_ne_bytes()[at]
}

/// Stores the byte at `p` with `Release` ordering: a release
/// compare-exchange of its word that changes only that byte.
///
/// # Safety
/// As [`copy_in`], for the one byte (its containing word).
#[inline]
pub(crate) unsafe fn store_u8(p: *mut u8, v: u8) {
    let at = p.addr() % WORD;
    // SAFETY: the containing word of `p`, which the caller vouches for;
    // `at + 1 <= 8`.
    unsafe { store_part(p.wrapping_sub(at), at, &[v], Ordering::Release) }
}

/// A log of the accesses the functions above make, for the tests: every
/// access records its address and width here (only while a test traces).
#[cfg(test)]
mod trace {
    use std::cell::RefCell;

    thread_local! {
        static LOG: RefCell<Option<Vec<(usize, usize)>>> = const { RefCell::new(None) };
    }

    /// Notes an access of `width` bytes at `addr` (if this thread traces).
    pub(super) fn record(addr: usize, width: usize) {
        LOG.with(|l| {
            if let Some(v) = l.borrow_mut().as_mut() {
                v.push((addr, width));
            }
        });
    }

    /// The accesses `f` makes on this thread, as (address, width).
    pub(super) fn accesses(f: impl FnOnce()) -> Vec<(usize, usize)> {
        LOG.with(|l| *l.borrow_mut() = Some(Vec::new()));
        f();
        LOG.with(|l| l.borrow_mut().take()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU32};

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
        drop(buf);
    }

    /// Checks that the accesses of one call on `len` bytes at offset
    /// `start` of `base` (8-aligned) are all 8-byte, 8-aligned accesses to
    /// the containing words of the range, and that they reach each of those
    /// words (none for an empty range).
    fn check(what: &str, base: usize, start: usize, len: usize, log: &[(usize, usize)]) {
        let (lo, hi) = if len == 0 {
            (start, start)
        } else {
            (start / WORD * WORD, (start + len).div_ceil(WORD) * WORD)
        };
        for &(addr, width) in log {
            let at = addr.wrapping_sub(base);
            assert!(
                width == WORD && at % WORD == 0 && lo <= at && at + width <= hi,
                "{what} of {len} bytes at {start}: a {width}-byte access at {}, \
                 not one aligned word of {lo}..{hi}",
                at as isize,
            );
        }
        let mut words: Vec<usize> = log.iter().map(|&(addr, _)| addr - base).collect();
        words.dedup();
        let want: Vec<usize> = (lo..hi).step_by(WORD).collect();
        assert_eq!(words, want, "{what} of {len} bytes at {start}: the words");
    }

    /// The issue-27 property: every access `copy_in`, `copy_out`, `fill`,
    /// `load_u8` and `store_u8` make, at every start offset in two words
    /// and every length up to five words, is one aligned 8-byte access
    /// inside the containing words of the range, so no two of them can
    /// partially overlap (a mixed-size race). The byte accesses at the ends
    /// of the old copies fail it.
    #[test]
    fn every_access_is_one_aligned_word_of_the_containing_words() {
        let mut buf = vec![0u64; 8];
        let base = buf.as_mut_ptr().cast::<u8>();
        let b = base.addr();
        let src = [0x5au8; 40];
        let mut out = [0u8; 40];
        for start in 0..17 {
            let p = base.wrapping_add(start);
            for len in 0..40 {
                // SAFETY: `start + len <= 56`: inside `buf`, with the
                // containing words; only this thread accesses it.
                let log = trace::accesses(|| unsafe { copy_in(p, &src[..len]) });
                check("copy_in", b, start, len, &log);
                // SAFETY: as above.
                let log = trace::accesses(|| unsafe { copy_out(p, &mut out[..len]) });
                check("copy_out", b, start, len, &log);
                // SAFETY: as above.
                let log = trace::accesses(|| unsafe { fill(p, len, 0xa5) });
                check("fill", b, start, len, &log);
            }
            // SAFETY: as above.
            let log = trace::accesses(|| unsafe { store_u8(p, 7) });
            check("store_u8", b, start, 1, &log);
            // SAFETY: as above.
            let log = trace::accesses(|| assert_eq!(unsafe { load_u8(p) }, 7));
            check("load_u8", b, start, 1, &log);
        }
        drop(buf);
    }

    /// Two threads writing different bytes of the same words: one with
    /// `store_u8` on bytes 0..3 and 13..16, the other with `copy_in` on bytes
    /// 3..13 (the partial ends of both words). Each checks, before every
    /// write, that its own bytes still hold what it wrote last: a
    /// read-merge-store that wrote back a neighbour's stale byte would fail
    /// that check (it does, with such a store in place of the
    /// compare-exchange).
    #[test]
    fn neighbouring_writers_of_one_word_lose_nothing() {
        const ROUNDS: u32 = 200_000;
        const MINE: [usize; 6] = [0, 1, 2, 13, 14, 15];
        let mut buf = vec![0u64; 2];
        let addr = buf.as_mut_ptr() as usize;
        let bytes = std::thread::spawn(move || {
            let p = addr as *mut u8;
            for round in 1..=ROUNDS {
                for &i in &MINE {
                    // SAFETY: `buf` outlives the thread (joined below); all
                    // accesses to it are through this module.
                    let got = unsafe { load_u8(p.wrapping_add(i)) };
                    assert_eq!(got, (round - 1) as u8, "byte {i} lost round {}", round - 1);
                    // SAFETY: as above.
                    unsafe { store_u8(p.wrapping_add(i), round as u8) };
                }
            }
        });
        let p = addr as *mut u8;
        let mut seen = [0u8; 10];
        for round in 1..=ROUNDS {
            // SAFETY: as above.
            unsafe { copy_out(p.wrapping_add(3), &mut seen) };
            let last = ((round - 1) as u8) ^ 0x80;
            let want = if round == 1 { [0; 10] } else { [last; 10] };
            assert_eq!(seen, want, "bytes 3..13 lost round {}", round - 1);
            // SAFETY: as above.
            unsafe { copy_in(p.wrapping_add(3), &[(round as u8) ^ 0x80; 10]) };
        }
        bytes.join().unwrap();
        drop(buf);
    }

    /// `store_u8`/`load_u8` still pair as release/acquire (message
    /// passing), with a third thread copying into the flag's neighbouring
    /// bytes all the while: its compare-exchanges continue the flag's
    /// release sequence.
    #[test]
    fn a_flag_byte_publishes_data_across_a_neighbours_copies() {
        const ROUNDS: u32 = 500;
        let mut buf = vec![0u64; 4]; // word 0: flag byte 0; words 1..4: data
        let addr = buf.as_mut_ptr() as usize;
        let ack = std::sync::Arc::new(AtomicU32::new(0));
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let writer = {
            let ack = ack.clone();
            std::thread::spawn(move || {
                let p = addr as *mut u8;
                for round in 1..=ROUNDS {
                    // SAFETY: `buf` outlives the threads (joined below); all
                    // accesses to it are through this module.
                    unsafe {
                        copy_in(p.wrapping_add(8), &[round as u8; 24]);
                        store_u8(p, round as u8);
                    }
                    while ack.load(Ordering::Acquire) != round {
                        std::thread::yield_now();
                    }
                }
            })
        };
        let neighbour = {
            let done = done.clone();
            std::thread::spawn(move || {
                let p = addr as *mut u8;
                let mut k = 0u8;
                while !done.load(Ordering::Relaxed) {
                    k = k.wrapping_add(1);
                    // SAFETY: as above.
                    unsafe { copy_in(p.wrapping_add(1), &[k; 7]) };
                }
            })
        };
        let p = addr as *mut u8;
        let mut data = [0u8; 24];
        for round in 1..=ROUNDS {
            // SAFETY: as above.
            while unsafe { load_u8(p) } != round as u8 {
                std::thread::yield_now();
            }
            // SAFETY: as above.
            unsafe { copy_out(p.wrapping_add(8), &mut data) };
            assert_eq!(data, [round as u8; 24], "round {round}");
            ack.store(round, Ordering::Release);
        }
        writer.join().unwrap();
        done.store(true, Ordering::Relaxed);
        neighbour.join().unwrap();
        drop(buf);
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
