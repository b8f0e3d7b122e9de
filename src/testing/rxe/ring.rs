//! The kernel's side of an rxe ring (`drivers/infiniband/sw/rxe/rxe_queue.h`):
//! a memfd mapped twice, once for the library and once for the fake's
//! [`RxeRing`] view, with its own code for the index protocol.
#![allow(unsafe_code)]

use std::{
    collections::HashMap,
    os::fd::OwnedFd,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    sys::{Errno, Mapping},
};

/// The rxe queue geometry the fake's mmaps describe: 64 slots of 2 KiB
/// after the 384-byte `rxe_queue_buf` header.
pub const RING_LOG2_STRIDE: u32 = 11;
/// Slots per ring.
pub const RING_SLOTS: u32 = 64;
/// Bytes per ring.
pub const RING_LEN: u32 = HEADER_LEN as u32 + (RING_SLOTS << RING_LOG2_STRIDE);

/// `sizeof(struct rxe_queue_buf)`: the header before the slots.
pub const HEADER_LEN: usize = 384;
/// Offsets of `producer_index` and `consumer_index` in the header (each on
/// its own cache line group, as `rxe_queue_buf` lays them out).
const PRODUCER: usize = 128;
const CONSUMER: usize = 256;

/// The mmap offset of the (first) ring of the object with kernel `handle`;
/// a QP's receive queue follows at [`RQ_OFFSET`].
pub(super) fn ring_offset(handle: u32) -> u64 {
    u64::from(handle) << 20
}
pub(super) const RQ_OFFSET: u64 = 1 << 12;

pub(super) fn ring_mi(handle: u32) -> abi::Mminfo {
    let mut mi = abi::Mminfo::new_zeroed();
    mi.offset = ring_offset(handle);
    mi.size = RING_LEN;
    mi
}

/// The rings the fake exports: the kernel's view of each ring mapped, by
/// mmap offset; the rings a resize made and the library has not mapped yet
/// (the kernel's `pending_mmaps`); and where each resized CQ's ring is now.
#[derive(Debug, Default)]
pub(super) struct Rings {
    pub(super) views: HashMap<u64, RxeRing>,
    pub(super) pending: HashMap<u64, Mapping>,
    /// CQ handle → mmap offset of its ring, for CQs resized.
    moved: HashMap<u32, u64>,
    resizes: u64,
}

impl Rings {
    /// The mmap offset of the ring of the CQ with kernel `handle`.
    pub(super) fn cq_offset(&self, handle: u32) -> u64 {
        self.moved
            .get(&handle)
            .copied()
            .unwrap_or_else(|| ring_offset(handle))
    }

    /// Puts `view` in place of the CQ's ring (the kernel frees the old
    /// queue, `rxe_queue_cleanup`) and keeps the library's `mapping` until
    /// it is mapped; returns the new ring's mmap offset, apart from every
    /// object's first ring.
    pub(super) fn replace_cq(&mut self, handle: u32, mapping: Mapping, view: RxeRing) -> u64 {
        let old = self.cq_offset(handle);
        self.views.remove(&old);
        self.pending.remove(&old);
        self.resizes += 1;
        let offset = (1 << 40) | (self.resizes << 20);
        self.moved.insert(handle, offset);
        self.views.insert(offset, view);
        self.pending.insert(offset, mapping);
        offset
    }
}

/// The kernel's side of one rxe ring: the index words it owns and the slots
/// the protocol hands it. Cloning shares the ring.
#[derive(Debug, Clone)]
pub struct RxeRing {
    map: Arc<Mapping>,
    mask: u32,
    stride: usize,
}

impl RxeRing {
    /// A new ring of `slots` (a power of two) slots of `1 << log2_stride`
    /// bytes, its header written as `rxe_queue_init` writes it: the mapping
    /// for the library and the kernel's view of the same memory.
    pub fn new(log2_stride: u32, slots: u32) -> Result<(Mapping, RxeRing), Errno> {
        if !slots.is_power_of_two() || log2_stride > 16 {
            return Err(Errno::EINVAL);
        }
        let len = HEADER_LEN + ((slots as usize) << log2_stride);
        let fd = nix::sys::memfd::memfd_create(
            c"uverbs-fake-rxe-ring",
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
        )?;
        nix::unistd::ftruncate(&fd, len as i64)?;
        let map = |fd: &OwnedFd| {
            memmap2::MmapOptions::new()
                .len(len)
                .map_raw(fd)
                .map_err(|_| Errno::ENOMEM)
        };
        let (library, kernel) = (map(&fd)?, map(&fd)?);
        let ring = RxeRing {
            map: Arc::new(kernel),
            mask: slots - 1,
            stride: 1 << log2_stride,
        };
        ring.word(0).store(log2_stride, Ordering::Relaxed);
        ring.word(4).store(slots - 1, Ordering::Relaxed);
        Ok((library, ring))
    }

    /// A 32-bit word of the header.
    pub fn word(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset % 4 == 0 && offset + 4 <= HEADER_LEN,
            "header word {offset}"
        );
        // SAFETY: the offset is a 4-aligned word inside the header of the
        // page-aligned mapping this view owns (checked above); header words
        // are only ever accessed atomically, by the library and by views.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(offset).cast()) }
    }

    /// `producer_index`, as the kernel reads it (`smp_load_acquire`).
    pub fn producer(&self) -> u32 {
        self.word(PRODUCER).load(Ordering::Acquire)
    }

    /// Publishes `producer_index` of a queue the kernel fills (CQ), masked
    /// (`smp_store_release`).
    pub fn set_producer(&self, v: u32) {
        self.word(PRODUCER).store(v & self.mask, Ordering::Release);
    }

    /// `consumer_index` (`smp_load_acquire`).
    pub fn consumer(&self) -> u32 {
        self.word(CONSUMER).load(Ordering::Acquire)
    }

    /// Publishes `consumer_index` of a queue the kernel drains (SQ, RQ, SRQ).
    pub fn set_consumer(&self, v: u32) {
        self.word(CONSUMER).store(v & self.mask, Ordering::Release);
    }

    fn slot_ptr(&self, index: u32) -> *mut u8 {
        let at = HEADER_LEN + (index & self.mask) as usize * self.stride;
        // SAFETY: the masked index selects one of the mapping's slots, so
        // `at + stride` is within its length.
        unsafe { self.map.as_mut_ptr().add(at) }
    }

    /// A copy of slot `index` (masked).
    pub fn slot(&self, index: u32) -> Vec<u8> {
        let mut out = vec![0; self.stride];
        // SAFETY: the slot lies inside the mapping (`slot_ptr`); the bytes
        // are copied without forming a reference to shared memory, and the
        // protocol gives the slot to the kernel side at the call sites.
        unsafe {
            std::ptr::copy_nonoverlapping(self.slot_ptr(index), out.as_mut_ptr(), self.stride)
        };
        out
    }

    /// Writes `bytes` (at most a slot) to the start of slot `index`; the
    /// rest of the slot is filled with 0xa5, so a reader that looks past
    /// what was written sees garbage.
    pub fn write_slot(&self, index: u32, bytes: &[u8]) {
        let n = bytes.len().min(self.stride);
        let p = self.slot_ptr(index);
        // SAFETY: `n` and `stride - n` bytes stay inside the slot
        // (`slot_ptr`); raw copies, no references into shared memory.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, n);
            std::ptr::write_bytes(p.add(n), 0xa5, self.stride - n);
        }
    }

    /// Slots in the ring (`index_mask + 1`).
    pub fn slots(&self) -> u32 {
        self.mask + 1
    }

    /// Elements waiting (`queue_count`: `(producer - consumer) & mask`).
    pub fn count(&self) -> u32 {
        self.producer().wrapping_sub(self.consumer()) & self.mask
    }

    /// Takes the next WQE of a queue the kernel drains, if any.
    pub fn consume(&self) -> Option<Vec<u8>> {
        let cons = self.consumer();
        if self.producer() == cons {
            return None;
        }
        let bytes = self.slot(cons);
        self.set_consumer(cons + 1);
        Some(bytes)
    }

    /// Drains everything posted (`consumer_index = producer_index`).
    #[inline(never)]
    pub fn consume_all(&self) {
        let prod = self.producer() & self.mask;
        self.set_consumer(prod);
    }

    /// Posts a CQE (`rxe_cq_post`); false when the CQ is full.
    #[inline(never)]
    pub fn post_cqe(&self, cqe: &abi::IbUverbsWc) -> bool {
        let prod = self.word(PRODUCER).load(Ordering::Relaxed);
        if (prod + 1) & self.mask == self.consumer() & self.mask {
            return false;
        }
        self.write_slot(prod, cqe.as_bytes());
        self.set_producer(prod + 1);
        true
    }
}
