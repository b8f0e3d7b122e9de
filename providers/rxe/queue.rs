//! rxe's shared rings (`struct rxe_queue_buf`, `include/uapi/rdma/rdma_user_rxe.h`).
//!
//! Every rxe queue is one mmapped buffer: a 384-byte header followed by
//! `index_mask + 1` slots of `1 << log2_elem_size` bytes. The header holds the
//! geometry (written once by the kernel in `rxe_queue_init`, K61
//! `drivers/infiniband/sw/rxe/rxe_queue.c`) and two index words on their own
//! cache lines. Indices are stored masked; empty ⇔ `prod == cons`, full ⇔
//! `((prod + 1) & mask) == cons` (one slot is always left free).
//!
//! Ownership (K61 `rxe_queue.h`, `enum queue_type`):
//! - SQ, RQ, SRQ are `QUEUE_TYPE_FROM_CLIENT`: userspace owns
//!   `producer_index` ([`Producer`]), the kernel owns `consumer_index`.
//! - CQ is `QUEUE_TYPE_TO_CLIENT`: the kernel owns `producer_index`,
//!   userspace owns `consumer_index` ([`Consumer`]).
//!
//! The kernel keeps a private copy of the index it owns (`q->index`) and only
//! publishes it, so we never write the peer's word, and we never re-read our
//! own: it is cached here and only stored.
//!
//! K61 is Debian's `linux-source-6.1` (6.1.192); upstream the same file is
//! <https://git.kernel.org/pub/scm/linux/kernel/git/stable/linux.git/tree/drivers/infiniband/sw/rxe/rxe_queue.h?h=v6.1.192>.
//! rdma-core's `providers/rxe/rxe_queue.h` (RC) implements the same protocol
//! with C11 atomics: acquire loads of the peer's index, release stores of
//! its own.
//!
//! Memory access rules (style rules 7, 8, 10):
//! - The geometry is read and validated once in [`RxeRing::new`]; the mask
//!   and stride are cached and never re-read from shared memory.
//! - The index words are only touched as `AtomicU32`s formed from raw
//!   pointers for the duration of one load or store; no other Rust reference
//!   into the mapping is ever formed.
//! - Slots are addressed by raw pointer from a masked index and copied with
//!   `ptr::copy_nonoverlapping`, bounds-checked against the cached stride.
//!   Plain (non-volatile) copies are enough: the index protocol gives us
//!   exclusive access to a slot between the acquire that hands it to us and
//!   the release that hands it back, so nobody writes it concurrently, and a
//!   volatile copy would add no atomicity anyway (RC `rxe.c` uses `memcpy`).
#![allow(unsafe_code)]

use std::{
    fmt, mem,
    ptr::{self, NonNull},
    sync::atomic::{AtomicU32, Ordering},
};

use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::{
    error::{Error, ErrorKind},
    sys::Mapping,
};

/// Size of `struct rxe_queue_buf` (the header before `data[]`).
pub(crate) const HEADER_LEN: usize = 384;
/// Offset of `producer_index` in the header.
const PRODUCER_OFFSET: usize = 128;
/// Offset of `consumer_index` in the header.
const CONSUMER_OFFSET: usize = 256;
/// Smallest slot: the kernel rounds the element up to a cache line
/// (`rxe_queue_init`: `max(elem_size, cache_line_size())`, a power of two).
const MIN_LOG2_ELEM_SIZE: u32 = 6;
/// Largest slot we accept. The largest rxe element is a send WQE with 32 SGEs
/// or the matching inline area (under 1 KiB, `RXE_MAX_WQE_SIZE`); anything
/// far beyond that is a corrupt header.
const MAX_LOG2_ELEM_SIZE: u32 = 16;
/// Alignment we require of the mapping (mmap gives a page): slots are then
/// 64-byte aligned and the index words 4-byte aligned, as `AtomicU32` needs.
const MAP_ALIGN: usize = 64;

/// Which index word of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word {
    Producer,
    Consumer,
}

impl Word {
    fn offset(self) -> usize {
        match self {
            Word::Producer => PRODUCER_OFFSET,
            Word::Consumer => CONSUMER_OFFSET,
        }
    }
}

/// A validated rxe ring: the mapping and its cached geometry.
pub(crate) struct RxeRing {
    map: Mapping,
    /// `index_mask` (slots - 1), read once.
    mask: u32,
    /// `log2_elem_size`, read once.
    log2: u32,
    /// `1 << log2`.
    stride: usize,
}

impl fmt::Debug for RxeRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            map,
            mask,
            log2: _,
            stride,
        } = self;
        f.debug_struct("RxeRing")
            .field("len", &map.len())
            .field("slots", &(u64::from(*mask) + 1))
            .field("stride", stride)
            .finish()
    }
}

impl RxeRing {
    /// Validates the header of `map` once and caches its geometry.
    ///
    /// `what` names the queue in errors ("rxe send queue"); `min_slot` is the
    /// number of bytes each slot must hold for the caller's element.
    pub(crate) fn new(map: Mapping, what: &'static str, min_slot: usize) -> Result<Self, Error> {
        let bad = |detail: String| Error::new(what, ErrorKind::Malformed, detail);
        let len = map.len();
        if len < HEADER_LEN {
            return Err(bad(format!(
                "the mapping is {len} bytes, smaller than the {HEADER_LEN}-byte rxe_queue_buf header"
            )));
        }
        if map.as_ptr().align_offset(MAP_ALIGN) != 0 {
            return Err(bad(format!("the mapping is not {MAP_ALIGN}-byte aligned")));
        }
        let base = map.as_mut_ptr();
        // SAFETY: `base` is the start of a live mapping of `len >= 384`
        // bytes, aligned to 64 (checked above), so offsets 0 and 4 are
        // in-bounds 4-aligned u32 words. They are only accessed atomically
        // here; the kernel wrote them before returning the mminfo and never
        // writes them again (K61 rxe_queue.c `rxe_queue_init`).
        let (log2, mask) = unsafe {
            (
                AtomicU32::from_ptr(base.cast::<u32>()).load(Ordering::Relaxed),
                AtomicU32::from_ptr(base.add(4).cast::<u32>()).load(Ordering::Relaxed),
            )
        };
        if !(MIN_LOG2_ELEM_SIZE..=MAX_LOG2_ELEM_SIZE).contains(&log2) {
            return Err(bad(format!(
                "log2_elem_size is {log2}, expected {MIN_LOG2_ELEM_SIZE}..={MAX_LOG2_ELEM_SIZE}"
            )));
        }
        let stride = 1usize << log2;
        let slots = u64::from(mask) + 1;
        if !slots.is_power_of_two() {
            return Err(bad(format!(
                "index_mask is {mask:#x}, so the slot count {slots} is not a power of two"
            )));
        }
        let need = usize::try_from(slots)
            .ok()
            .and_then(|n| n.checked_mul(stride))
            .and_then(|n| n.checked_add(HEADER_LEN));
        match need {
            Some(need) if need <= len => {}
            _ => {
                return Err(bad(format!(
                    "{slots} slots of {stride} bytes after the {HEADER_LEN}-byte header do not \
                     fit in the {len}-byte mapping"
                )))
            }
        }
        if stride < min_slot {
            return Err(bad(format!(
                "slots are {stride} bytes, but an element with the queue's capabilities needs \
                 {min_slot}"
            )));
        }
        Ok(RxeRing {
            map,
            mask,
            log2,
            stride,
        })
    }

    /// `index_mask`: the number of slots minus one, which is also the
    /// capacity (one slot always stays free).
    #[cfg(test)]
    pub(crate) fn mask(&self) -> u32 {
        self.mask
    }

    /// Runs `f` on the header word `w` viewed as an atomic.
    #[inline(always)]
    fn with_word<R>(&self, w: Word, f: impl FnOnce(&AtomicU32) -> R) -> R {
        // SAFETY: `new` checked that the mapping is at least HEADER_LEN bytes
        // and 64-byte aligned, so offsets 128 and 256 are in bounds and
        // 4-aligned. The mapping lives as long as `self`, and the reference
        // does not outlive this call. The word is shared with the kernel,
        // which only accesses it with `smp_load_acquire`/`smp_store_release`
        // or plain aligned word accesses (K61 rxe_queue.h), and with no one
        // else in this process except through this function.
        let word = unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(w.offset()).cast()) };
        f(word)
    }

    /// `load(Acquire)` of an index word, masked (the kernel's value is not
    /// trusted to be in range).
    #[inline(always)]
    fn load_acquire(&self, w: Word) -> u32 {
        self.with_word(w, |a| a.load(Ordering::Acquire)) & self.mask
    }

    /// `load(Relaxed)`, masked: only for reading our own index once at setup.
    fn load_relaxed(&self, w: Word) -> u32 {
        self.with_word(w, |a| a.load(Ordering::Relaxed)) & self.mask
    }

    /// `store(Release)` of a (masked) index.
    #[inline(always)]
    fn store_release(&self, w: Word, v: u32) {
        self.with_word(w, |a| a.store(v & self.mask, Ordering::Release));
    }

    /// The address of byte `offset` of slot `index & mask`, after checking
    /// that `len` bytes from there stay inside the slot.
    ///
    /// Panics if they do not: callers size their elements against the
    /// stride in their constructors, so this is an internal invariant, and
    /// it is what keeps every slot access inside the mapping.
    #[inline(always)]
    fn slot_ptr(&self, index: u32, offset: usize, len: usize) -> NonNull<u8> {
        if offset > self.stride || len > self.stride - offset {
            slot_overflow(offset, len, self.stride);
        }
        let at = HEADER_LEN + (((index & self.mask) as usize) << self.log2) + offset;
        // SAFETY: `new` checked `HEADER_LEN + (mask + 1) << log2 <= len`; the
        // index is masked and `offset + len <= stride` was just checked, so
        // `at..at + len` lies inside the mapping. A mapping's pointer is
        // never null.
        unsafe { NonNull::new_unchecked(self.map.as_mut_ptr().add(at)) }
    }

    /// Copies a `T` out of slot `index` at `offset`.
    #[inline(always)]
    fn read<T: FromBytes + IntoBytes>(&self, index: u32, offset: usize) -> T {
        let mut value = T::new_zeroed();
        let dst = value.as_mut_bytes();
        let src = self.slot_ptr(index, offset, dst.len());
        // SAFETY: `src..src + size_of::<T>()` is inside the mapping
        // (`slot_ptr`); the caller owns the slot by the index protocol (a
        // consumer reads only `slot[cons]` after an acquire load of the
        // producer index showed it filled), so the kernel does not write it
        // now. `dst` is a local; any bytes are a valid `T` (`FromBytes`).
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr(), dst.len()) }
        value
    }
}

/// Our side of a queue we produce into (SQ, RQ, SRQ: `QUEUE_TYPE_FROM_CLIENT`).
#[derive(Debug)]
pub(crate) struct Producer {
    ring: RxeRing,
    /// Our producer index, cached; the header word is only ever stored.
    prod: u32,
    /// The kernel's consumer index as last loaded (masked). It only moves
    /// forward, so a slot it showed free stays free; it is loaded again only
    /// when the ring looks full.
    cons: u32,
}

impl Producer {
    /// Validates the ring and reads our producer index once (non-zero after
    /// an SRQ resize, where the kernel copies the entries over).
    pub(crate) fn new(map: Mapping, what: &'static str, min_slot: usize) -> Result<Self, Error> {
        let ring = RxeRing::new(map, what, min_slot)?;
        let prod = ring.load_relaxed(Word::Producer);
        let cons = ring.load_acquire(Word::Consumer);
        Ok(Producer { ring, prod, cons })
    }

    /// The ring geometry.
    #[cfg(test)]
    pub(crate) fn ring(&self) -> &RxeRing {
        &self.ring
    }

    /// Whether every slot is taken: `((prod + 1) & mask) == cons`.
    ///
    /// The consumer index is loaded with Acquire, pairing with the kernel's
    /// `smp_store_release(&q->buf->consumer_index, ..)` in
    /// `queue_advance_consumer` (K61 rxe_queue.h, `QUEUE_TYPE_FROM_CLIENT`):
    /// the kernel's last reads of a slot happen before we overwrite it. The
    /// cached value was loaded the same way, and the kernel only advances
    /// it, so a slot it shows free is free; it is reloaded only when the
    /// cached value says full.
    #[inline]
    pub(crate) fn is_full(&mut self) -> bool {
        let next = self.prod.wrapping_add(1) & self.ring.mask;
        if next != self.cons {
            return false;
        }
        self.cons = self.ring.load_acquire(Word::Consumer);
        next == self.cons
    }

    /// Our producer index: committed slots included, published or not.
    #[inline]
    pub(crate) fn prod(&self) -> u32 {
        self.prod
    }

    /// Hands every committed slot to the kernel (see [`Slot::publish`] for
    /// the ordering).
    #[inline]
    pub(crate) fn publish(&mut self) {
        self.ring.store_release(Word::Producer, self.prod);
    }

    /// Takes back the slots committed since our producer index was `mark`
    /// and never published: the kernel never saw them, and the next slots
    /// written overwrite them.
    #[inline]
    pub(crate) fn rewind(&mut self, mark: u32) {
        self.prod = mark & self.ring.mask;
    }

    /// The next free slot, or `None` when the queue is full.
    #[inline]
    pub(crate) fn next_slot(&mut self) -> Option<Slot<'_>> {
        if self.is_full() {
            return None;
        }
        let base = self.ring.slot_ptr(self.prod, 0, 0);
        let len = self.ring.stride;
        Some(Slot {
            producer: self,
            base,
            len,
        })
    }
}

/// A free slot of a [`Producer`], being filled. Dropping it without
/// [`Slot::publish`] publishes nothing (the next post rewrites the slot).
///
/// The slot's address and length are computed once (masked index, cached
/// stride); every write is bounds-checked against that length. Writers that
/// put several fields first [`Slot::reserve`] the span they fill, after
/// which the compiler drops the per-field checks that the one covers.
#[derive(Debug)]
#[must_use = "a slot is handed to the kernel only by publish()"]
pub(crate) struct Slot<'a> {
    producer: &'a mut Producer,
    /// Start of slot `producer.prod` in the mapping.
    base: NonNull<u8>,
    /// The slot's length (the ring's stride).
    len: usize,
}

/// The panic of an out-of-slot write: an internal invariant (elements are
/// sized against the stride in the queues' constructors) that keeps every
/// write inside the mapping.
#[cold]
#[inline(never)]
fn slot_overflow(offset: usize, len: usize, stride: usize) -> ! {
    panic!("rxe ring access of {len} bytes at {offset} overflows a {stride}-byte slot")
}

impl<'a> Slot<'a> {
    /// Checks that `offset..offset + len` lies inside the slot (panics if not).
    #[inline(always)]
    fn check(&self, offset: usize, len: usize) {
        if offset > self.len || len > self.len - offset {
            slot_overflow(offset, len, self.len);
        }
    }

    /// Checks once that the first `len` bytes lie inside the slot, so that
    /// the checks of the fixed-offset writes that follow fold away.
    #[inline(always)]
    pub(crate) fn reserve(&self, len: usize) {
        self.check(0, len);
    }

    /// Copies `value`'s bytes to `offset` in the slot.
    #[inline(always)]
    pub(crate) fn write<T: IntoBytes + Immutable>(&mut self, offset: usize, value: &T) {
        let len = mem::size_of::<T>();
        self.check(offset, len);
        // SAFETY: `offset..offset + len` is inside the slot (checked just
        // above), and the slot is inside the mapping (`next_slot` took its
        // address from `slot_ptr` with a masked index). We own the slot by
        // the index protocol (see `write_bytes`). `value` is ordinary memory
        // with no padding (`IntoBytes`), which cannot overlap the mapping
        // because no Rust reference into it exists.
        unsafe {
            ptr::copy_nonoverlapping(
                (value as *const T).cast::<u8>(),
                self.base.as_ptr().add(offset),
                len,
            );
        }
    }

    /// Copies `bytes` to `offset` in the slot.
    #[inline]
    pub(crate) fn write_bytes(&mut self, offset: usize, bytes: &[u8]) {
        self.check(offset, bytes.len());
        // SAFETY: in bounds as in `write`. The caller owns the slot by the
        // index protocol (a producer writes only `slot[prod]` after seeing
        // it free with an acquire load of the consumer index), so the kernel
        // does not access it now; `bytes` is ordinary memory, which cannot
        // overlap the mapping because no Rust reference into it exists.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.as_ptr().add(offset), bytes.len());
        }
    }

    /// Hands the slot to the kernel: `store(Release)` of the advanced
    /// producer index, pairing with the kernel's
    /// `smp_load_acquire(&q->buf->producer_index)` in `queue_get_producer`
    /// (K61 rxe_queue.h, `QUEUE_TYPE_FROM_CLIENT`), so the slot's contents
    /// are visible to the kernel before the index is.
    #[inline]
    pub(crate) fn publish(self) {
        self.commit().publish();
    }

    /// Takes the slot into our producer index without handing it to the
    /// kernel yet: [`Producer::publish`] hands over every slot committed so
    /// far, [`Producer::rewind`] takes them back (a send batch:
    /// `ibv_wr_complete` / `ibv_wr_abort`).
    #[inline]
    pub(crate) fn commit(self) -> &'a mut Producer {
        let p = self.producer;
        p.prod = p.prod.wrapping_add(1) & p.ring.mask;
        p
    }
}

/// Our side of a queue we consume from (CQ: `QUEUE_TYPE_TO_CLIENT`).
#[derive(Debug)]
pub(crate) struct Consumer {
    ring: RxeRing,
    /// Our consumer index, cached; the header word is only ever stored.
    cons: u32,
    /// The last producer index seen (masked), to avoid a load per element.
    prod: u32,
}

impl Consumer {
    /// Validates the ring and reads our consumer index once (non-zero after
    /// a CQ resize).
    pub(crate) fn new(map: Mapping, what: &'static str, min_slot: usize) -> Result<Self, Error> {
        let ring = RxeRing::new(map, what, min_slot)?;
        let cons = ring.load_relaxed(Word::Consumer);
        Ok(Consumer {
            ring,
            cons,
            prod: cons,
        })
    }

    /// The ring geometry.
    #[cfg(test)]
    pub(crate) fn ring(&self) -> &RxeRing {
        &self.ring
    }

    /// `load(Acquire)` of the producer index, pairing with the kernel's
    /// `smp_store_release(&q->buf->producer_index, prod)` in
    /// `queue_advance_producer` (K61 rxe_queue.h, `QUEUE_TYPE_TO_CLIENT`,
    /// called by `rxe_cq_post` after it copied the CQE into the slot).
    #[inline(always)]
    fn load_producer(&self) -> u32 {
        self.ring.load_acquire(Word::Producer)
    }

    /// How many elements are waiting, up to the producer index last seen;
    /// that index is loaded again only when everything seen was consumed.
    #[inline]
    pub(crate) fn available(&mut self) -> u32 {
        if self.cons == self.prod {
            self.prod = self.load_producer();
        }
        self.prod.wrapping_sub(self.cons) & self.ring.mask
    }

    /// Copies out element `i` after our consumer index (`i < available()`).
    #[inline]
    pub(crate) fn read_at<T: FromBytes + IntoBytes>(&self, i: u32) -> T {
        self.ring.read(self.cons.wrapping_add(i), 0)
    }

    /// Steps past `n` elements and hands their slots back to the kernel:
    /// `store(Release)` of our consumer index, pairing with the kernel's
    /// `smp_load_acquire(&q->buf->consumer_index)` in `queue_get_consumer`
    /// (K61 rxe_queue.h, `QUEUE_TYPE_TO_CLIENT`, used by `queue_full` in
    /// `rxe_cq_post`): our reads of the slots happen before the kernel
    /// overwrites them. One store per batch.
    #[inline]
    pub(crate) fn consume(&mut self, n: u32) {
        self.cons = self.cons.wrapping_add(n) & self.ring.mask;
        self.ring.store_release(Word::Consumer, self.cons);
    }
}
