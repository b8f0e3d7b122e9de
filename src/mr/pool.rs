//! A registered buffer pool whose buffers the program reads and writes as
//! plain slices, and hands to the device by moving them into a posted work
//! request ([`BufferPool`], [`PoolBuf`]; the posting side is
//! [`PooledQp`](crate::PooledQp), `src/pooled_qp.rs`).
//!
//! Everywhere else in the crate registered memory is reached by copies
//! (`MemoryRegion::read`), because the device may write it at any time. A
//! pool's slot is different: the device can write it only while a work
//! request naming it is outstanding, and such a request exists only while
//! the slot's [`PoolBuf`] is moved into a [`PooledQp`](crate::PooledQp).
//! Ownership of the `PoolBuf` value is the permission to touch the bytes;
//! the completion that finished the request gives the value back. What
//! makes that hold is listed in "Why a `&mut [u8]` into registered memory
//! is sound" on [`BufferPool`].
#![allow(unsafe_code)]

use std::{fmt, ops::Deref, ops::DerefMut, ptr::NonNull, sync::Arc};

use super::{AccessFlags, MemoryRegion};
use crate::{
    context::Context,
    error::{Error, ErrorKind, Result},
    pd::ProtectionDomain,
    sync::Mutex,
};

/// Slots start at multiples of this (a cache line), so the aligned 8-byte
/// words around one slot never hold another slot's bytes (see "The device
/// model" on [`BufferPool`]).
const STRIDE_ALIGN: usize = 64;
/// Slot indices fit in the low bits of a pooled work request's `wr_id`.
pub(crate) const MAX_SLOTS: usize = 1 << 24;
const NEW: &str = "BufferPool::new";

/// Where the slots live.
enum Memory {
    /// Anonymous pages registered in the pool's own protection domain
    /// (`ProtectionDomain::alloc_mr`): deregistered, then unmapped, when
    /// the last reference to the pool goes (the region's own drop order),
    /// or leaked with the kernel object if the deregistration is refused.
    Registered {
        /// Held for its drop only: deregistered, then unmapped.
        _mr: MemoryRegion,
        pd: ProtectionDomain,
    },
    /// Plain memory, for the model-checked tests of the hand-off (no
    /// kernel under loom). Reached only through `base` after creation.
    #[cfg(test)]
    Heap(#[allow(dead_code)] Vec<u64>),
}

/// The pool's memory, its free slots, and (under loom) one tracked cell
/// per slot that stands for the slot's bytes.
pub(crate) struct PoolInner {
    base: NonNull<u8>,
    stride: usize,
    size: usize,
    count: u32,
    lkey: u32,
    free: Mutex<Vec<u32>>,
    #[cfg(loom)]
    cells: Vec<loom::cell::UnsafeCell<()>>,
    /// Last, so it is dropped (deregistered, unmapped) after nothing else
    /// here can reach it.
    _memory: Memory,
}

// SAFETY: `base` is used only to build slices of slots whose `PoolBuf` is
// owned by the thread doing it (the free list, a `Mutex`, hands each slot
// to one owner at a time), and as the address of posted scatter/gather
// elements; the memory stays mapped while the `PoolInner` lives.
unsafe impl Send for PoolInner {}
// SAFETY: as above: `&PoolInner` gives no access to slot bytes by itself.
unsafe impl Sync for PoolInner {}

impl PoolInner {
    fn with_memory(memory: Memory, base: NonNull<u8>, lkey: u32, count: u32, size: usize) -> Self {
        PoolInner {
            base,
            stride: stride_of(size),
            size,
            count,
            lkey,
            // Popped from the end: slot 0 first.
            free: Mutex::new((0..count).rev().collect()),
            #[cfg(loom)]
            cells: (0..count)
                .map(|_| loom::cell::UnsafeCell::new(()))
                .collect(),
            _memory: memory,
        }
    }

    /// Slots in the pool.
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// The address of slot `slot`'s first byte, as the device sees it.
    pub(crate) fn slot_addr(&self, slot: u32) -> u64 {
        self.slot_ptr(slot) as u64
    }

    /// The local key of the pool's region (never shown to the program).
    pub(crate) fn lkey(&self) -> u32 {
        self.lkey
    }

    fn slot_ptr(&self, slot: u32) -> *mut u8 {
        // In bounds: `slot < count`, and the memory is `count * stride`.
        self.base.as_ptr().wrapping_add(slot as usize * self.stride)
    }

    fn take(self: &Arc<Self>) -> Option<PoolBuf> {
        let slot = lock(&self.free).pop()?;
        Some(PoolBuf {
            pool: self.clone(),
            slot,
            len: self.size as u32,
        })
    }

    pub(crate) fn available(&self) -> usize {
        lock(&self.free).len()
    }

    /// The `PoolBuf` of a slot that a completion handed back
    /// (`PooledQp`), with `len` valid bytes (at most the slot's size).
    pub(crate) fn rebuild(self: &Arc<Self>, slot: u32, len: u32) -> PoolBuf {
        PoolBuf {
            pool: self.clone(),
            slot,
            len: len.min(self.size as u32),
        }
    }

    /// The slot's tracked cell: loom checks every access made through it
    /// against the others (the model-checked tests' stand-in for the
    /// slot's bytes; the simulated device writes through it too).
    #[cfg(loom)]
    pub(crate) fn cell(&self, slot: u32) -> &loom::cell::UnsafeCell<()> {
        &self.cells[slot as usize]
    }

    /// A pool of `count` slots of `size` bytes over plain memory, for the
    /// unit and model-checked tests (no kernel).
    #[cfg(test)]
    pub(crate) fn heap(count: u32, size: usize) -> Arc<Self> {
        let mut mem = vec![0u64; count as usize * stride_of(size) / 8];
        let base = NonNull::new(mem.as_mut_ptr().cast::<u8>()).expect("a Vec's pointer");
        Arc::new(Self::with_memory(Memory::Heap(mem), base, 0, count, size))
    }

    /// A slot's address, for the simulated device of the tests.
    #[cfg(all(test, loom))]
    pub(crate) fn slot_ptr_for_device(&self, slot: u32) -> *mut u8 {
        self.slot_ptr(slot)
    }

    /// Takes a free slot, for the tests.
    #[cfg(test)]
    pub(crate) fn take_for_test(self: &Arc<Self>) -> Option<PoolBuf> {
        self.take()
    }
}

fn lock<T>(m: &Mutex<T>) -> crate::sync::MutexGuard<'_, T> {
    // A panic while holding the free list cannot leave it inconsistent (a
    // push or a pop): go on with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn stride_of(size: usize) -> usize {
    size.div_ceil(STRIDE_ALIGN) * STRIDE_ALIGN
}

/// A pool of equal-sized buffers in one registered region, lent out as
/// [`PoolBuf`]s that read and write like `&[u8]` / `&mut [u8]` and are
/// moved into posted receives and sends ([`PooledQp`](crate::PooledQp))
/// and moved back out by the completions that finished them: zero-copy
/// without `unsafe`.
///
/// ```no_run
/// # fn main() -> uverbs::Result<()> {
/// use uverbs::{BufferPool, PoolCompletion, QpCap, QpType};
/// let ctx = uverbs::Context::open(None)?;
/// let mut cq = ctx.create_cq(64, Default::default())?;
/// let pool = BufferPool::new(&ctx, 64, 4096)?;
/// let cap = QpCap::new(16, 16, 1, 1);
/// let (mut qp, _others) = pool.create_qp(QpType::Rc, cap, &mut cq)?;
/// // ... bring `qp.qp()` up to RTS against the peer ...
/// qp.post_recv(pool.take().expect("a free buffer"))?;
/// let mut out = Vec::new();
/// qp.poll(&mut cq, &mut out)?;
/// for c in out.drain(..) {
///     if let PoolCompletion::Recv { wc, buf } = c {
///         println!("{} bytes: {:?}", wc.byte_len, &buf[..]); // the bytes, no copy
///         qp.post_recv(buf)?; // and back to the device
///     }
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Why a `&mut [u8]` into registered memory is sound
///
/// The device writes registered memory when a work request tells it to
/// (a receive, an RDMA read's or an atomic's local buffer) or when a peer
/// names the region's remote key. The pool closes both ways while a
/// [`PoolBuf`] exists:
///
/// - the region is registered with [`AccessFlags::LOCAL_WRITE`] only: it
///   has no remote access, so no peer can write (or read) it;
/// - the region is in a protection domain the pool allocates for itself
///   and never hands out, and its local key never leaves the pool: the
///   only queue pairs that can name it are the pool's own
///   [`PooledQp`](crate::PooledQp)s (a work request's local key must be of
///   its QP's protection domain), which post nothing but the pool's
///   buffers, each moved in by value;
/// - a [`PooledQp`](crate::PooledQp) gives a buffer back only with the
///   completion of the one request that named it, polled from the QP's
///   own CQ (see "Completions" there); until then the buffer is held in
///   the QP, out of the program's reach (`compile_fail` below). A request
///   whose completion never comes (the QP reset or destroyed with it
///   posted) keeps its buffer forever;
/// - the memory is freed only after the region is deregistered, when the
///   last of the pool, its buffers and its QPs is gone (deregistration is
///   what guarantees the device no longer reaches the pages); if the
///   kernel refuses it, the memory is leaked with the region.
///
/// What this leaves outside the type system: a program that imports the
/// pool's protection domain into another context by its handle
/// ([`Context::import`] on a duplicated command fd, then
/// [`Context::import_pd`]) and guesses the pool's local key can aim a work
/// request at a buffer it holds, as a program can write its own memory
/// through `/proc/self/mem`.
///
/// A posted buffer cannot be touched, because it was moved:
///
/// ```compile_fail,E0382
/// # fn f(pool: &uverbs::BufferPool, qp: &mut uverbs::PooledQp) -> uverbs::Result<()> {
/// let mut buf = pool.take().unwrap();
/// qp.post_recv(buf)?;
/// buf[0] = 1; // the device may be writing it
/// # Ok(())
/// # }
/// ```
///
/// and a received buffer's bytes borrowed from it cannot outlive it being
/// posted again:
///
/// ```compile_fail,E0505
/// # fn f(qp: &mut uverbs::PooledQp, buf: uverbs::PoolBuf) -> uverbs::Result<()> {
/// let bytes: &[u8] = &buf;
/// qp.post_recv(buf)?;
/// println!("{}", bytes[0]); // the device may be writing it
/// # Ok(())
/// # }
/// ```
///
/// # The device model
///
/// The in-process mlx5 model writes memory with aligned 8-byte atomics
/// (`MemoryRegion`'s copies), which cover the words around a range. Slots
/// start at multiples of 64 bytes and are 64-byte multiples apart (the
/// size is rounded up: [`BufferPool::stride`]), so the words of a slot the
/// model writes never hold bytes of a slot the program holds.
///
/// # Sharing
///
/// `BufferPool` is `Clone` (a reference to one pool) and `Send + Sync`;
/// [`take`](Self::take) and the drop of a [`PoolBuf`] (which gives its slot
/// back) take the free list's lock, from any thread.
#[derive(Clone)]
pub struct BufferPool {
    pub(crate) inner: Arc<PoolInner>,
}

impl BufferPool {
    /// A pool of `count` buffers of `size` bytes each: one region of
    /// zeroed pages, registered with local write access only, in a
    /// protection domain of its own on `ctx`.
    ///
    /// `InvalidArgument` for a `count` or `size` of 0, a `size` above
    /// `u32::MAX`, more than 2^24 buffers, or a total that overflows;
    /// the kernel's errno if it refuses the protection domain or the
    /// registration.
    pub fn new(ctx: &Context, count: usize, size: usize) -> Result<BufferPool> {
        if count == 0 || size == 0 {
            return Err(Error::new(
                NEW,
                ErrorKind::InvalidArgument,
                "a pool needs at least one buffer of at least one byte",
            ));
        }
        if count > MAX_SLOTS || u32::try_from(size).is_err() {
            return Err(Error::new(
                NEW,
                ErrorKind::InvalidArgument,
                format!(
                    "{count} buffers of {size} bytes: at most {MAX_SLOTS} buffers of at most \
                     {} bytes",
                    u32::MAX
                ),
            ));
        }
        let total = count.checked_mul(stride_of(size)).ok_or_else(|| {
            Error::new(
                NEW,
                ErrorKind::InvalidArgument,
                format!("{count} buffers of {size} bytes overflow the address space"),
            )
        })?;
        let pd = ctx.alloc_pd()?;
        let mr = pd.alloc_mr(total, AccessFlags::LOCAL_WRITE)?;
        let Some(base) = mr.as_ptr().and_then(NonNull::new) else {
            // Unreachable: `alloc_mr` regions have their pages.
            return Err(Error::new(NEW, ErrorKind::InvalidArgument, "no pages"));
        };
        let lkey = mr.lkey();
        let memory = Memory::Registered { _mr: mr, pd };
        Ok(BufferPool {
            inner: Arc::new(PoolInner::with_memory(
                memory,
                base,
                lkey,
                count as u32,
                size,
            )),
        })
    }

    /// The pool's protection domain, for the pool's QPs.
    pub(crate) fn pd(&self) -> Option<&ProtectionDomain> {
        match &self.inner._memory {
            Memory::Registered { pd, .. } => Some(pd),
            #[cfg(test)]
            Memory::Heap(_) => None,
        }
    }
}

impl BufferPool {
    /// Takes a free buffer (`None` when all are lent out or posted). Its
    /// length is the buffer size; its bytes are what the last user left
    /// (zero at first).
    pub fn take(&self) -> Option<PoolBuf> {
        self.inner.take()
    }

    /// Buffers free to [`take`](Self::take).
    pub fn available(&self) -> usize {
        self.inner.available()
    }

    /// Buffers in the pool.
    pub fn count(&self) -> usize {
        self.inner.count as usize
    }

    /// Each buffer's size in bytes (its capacity).
    pub fn buf_size(&self) -> usize {
        self.inner.size
    }

    /// The distance between two buffers' first bytes: the size rounded up
    /// to a multiple of 64.
    pub fn stride(&self) -> usize {
        self.inner.stride
    }
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool")
            .field("count", &self.inner.count)
            .field("buf_size", &self.inner.size)
            .field("available", &self.available())
            .finish()
    }
}

/// One buffer of a [`BufferPool`], owned: it reads and writes as a byte
/// slice of [`len`](PoolBuf::len) bytes (`Deref<Target = [u8]>`,
/// `DerefMut`), is moved into a posted request
/// ([`PooledQp::post_recv`](crate::PooledQp::post_recv),
/// [`PooledQp::post_send`](crate::PooledQp::post_send)) and comes back
/// with its completion. Dropping it gives the slot back to the pool.
///
/// The length is what the slice shows: the buffer size when taken, what a
/// receive wrote when it comes back from one (0 for a failed one), and
/// what a send sends. [`set_len`](PoolBuf::set_len) changes it within the
/// capacity; the bytes beyond it stay there (a buffer's bytes are always
/// initialised).
pub struct PoolBuf {
    pool: Arc<PoolInner>,
    slot: u32,
    len: u32,
}

impl PoolBuf {
    /// The bytes the slice shows.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the slice is empty (a failed receive gives back an empty
    /// buffer).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer size (the pool's [`BufferPool::buf_size`]).
    pub fn capacity(&self) -> usize {
        self.pool.size
    }

    /// Sets the length the slice shows (and a send sends).
    /// `InvalidArgument` above the capacity.
    pub fn set_len(&mut self, len: usize) -> Result<()> {
        if len > self.pool.size {
            return Err(Error::new(
                "PoolBuf::set_len",
                ErrorKind::InvalidArgument,
                format!("{len} bytes in a buffer of {}", self.pool.size),
            ));
        }
        self.len = len as u32;
        Ok(())
    }

    /// Copies `data` to the start of the buffer and sets the length to its
    /// length. `InvalidArgument` (nothing copied) if it does not fit.
    pub fn copy_from(&mut self, data: &[u8]) -> Result<()> {
        self.set_len(data.len())?;
        self.copy_from_slice(data);
        Ok(())
    }

    /// Whether the buffer belongs to `pool`.
    pub fn is_from(&self, pool: &BufferPool) -> bool {
        Arc::ptr_eq(&self.pool, &pool.inner)
    }

    pub(crate) fn pool(&self) -> &Arc<PoolInner> {
        &self.pool
    }

    pub(crate) fn slot(&self) -> u32 {
        self.slot
    }

    /// Gives up the value without returning the slot to the free list:
    /// the caller holds the slot from now on (a posted request).
    pub(crate) fn into_slot(self) -> (u32, u32) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again: its `pool` is moved
        // out once here, so the reference count stays balanced.
        let pool = unsafe { std::ptr::read(&me.pool) };
        drop(pool);
        (me.slot, me.len)
    }
}

impl Deref for PoolBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        #[cfg(loom)]
        self.pool.cell(self.slot).with(|_| ());
        // SAFETY: the slot's `len <= size` bytes are inside the pool's
        // memory, mapped and initialised (zeroed pages, then whatever the
        // device and owners wrote) while `self.pool` lives. This value owns
        // the slot: the free list and the posted table hold it nowhere else
        // while it exists, and the device writes it only while a request
        // naming it is outstanding, which needs the value moved into a
        // `PooledQp` (see "Why a `&mut [u8]` ..." on `BufferPool`). The
        // returned borrow of `self` keeps it from being moved meanwhile.
        unsafe { std::slice::from_raw_parts(self.pool.slot_ptr(self.slot), self.len as usize) }
    }
}

impl DerefMut for PoolBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        #[cfg(loom)]
        self.pool.cell(self.slot).with_mut(|_| ());
        // SAFETY: as in `deref`, with `&mut self`: the one owner of the
        // slot, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.pool.slot_ptr(self.slot), self.len as usize) }
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        lock(&self.pool.free).push(self.slot);
    }
}

impl fmt::Debug for PoolBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBuf")
            .field("slot", &self.slot)
            .field("len", &self.len)
            .field("capacity", &self.pool.size)
            .finish()
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
