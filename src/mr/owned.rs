//! Memory regions over memory the program allocated, without `unsafe`:
//! `ibv_reg_mr` on your own buffer ([`ProtectionDomain::register_owned`]).
//!
//! Why this needs no `unsafe` is on [`OwnedMemoryRegion`] ("Why this is
//! safe", "The words around the buffer"); the copies are `shared_memory`'s,
//! whose contract the `SAFETY` comments below vouch for.
#![allow(unsafe_code)]

use std::{fmt, ptr::NonNull, sync::Arc};

use super::{check_access, AccessFlags, Backing, MrInner};
use crate::{
    error::{DestroyError, Error, ErrorKind, Result},
    object::{self, Owned},
    pd::ProtectionDomain,
    shared_memory,
    sys::Errno,
    wr::Sge,
};

const WORD: usize = size_of::<u64>();
const REGISTER: &str = "ProtectionDomain::register_owned";
const DEREGISTER: &str = "ibv_dereg_mr";

/// Buffers an [`OwnedMemoryRegion`] can own: `Vec<u8>`, `Box<[u8]>` and
/// [`memmap2::MmapMut`] (anonymous, huge-page (`MmapOptions::huge`) or
/// file mappings).
///
/// Sealed: each of these types keeps its memory at one address while it
/// is not touched, which is what registration needs. For memory of
/// another kind, use [`ProtectionDomain::register_raw`].
pub trait RegionBuffer: sealed::Buffer {}

impl RegionBuffer for Vec<u8> {}
impl RegionBuffer for Box<[u8]> {}
impl RegionBuffer for memmap2::MmapMut {}

mod sealed {
    use std::ptr::NonNull;

    use crate::error::Result;

    /// A buffer while registered, with its first byte and its length.
    #[allow(missing_debug_implementations)] // transient; never shown
    pub struct Hold<H> {
        pub held: H,
        pub base: NonNull<u8>,
        pub len: usize,
    }

    /// How a buffer is held while registered, and given back.
    pub trait Buffer: Sized + Send + Sync + 'static {
        /// The buffer while registered: never borrowed or resized.
        type Held: Send + Sync;
        /// Takes the buffer for registration (see "The words around the
        /// buffer" on `OwnedMemoryRegion`).
        fn hold(self) -> Result<Hold<Self::Held>>;
        /// The buffer back, after the deregistration.
        fn release(held: Self::Held) -> Self;
    }
}

use sealed::Hold;

fn empty(what: &str) -> Error {
    Error::new(
        REGISTER,
        ErrorKind::InvalidArgument,
        format!("the {what} is empty: a memory region needs at least one byte"),
    )
}

impl sealed::Buffer for Vec<u8> {
    type Held = Vec<u8>;

    fn hold(mut self) -> Result<Hold<Vec<u8>>> {
        let len = self.len();
        if len == 0 {
            return Err(empty("Vec"));
        }
        // `len <= isize::MAX`: no overflow.
        let pad = len.div_ceil(WORD) * WORD - len;
        self.try_reserve_exact(pad).map_err(|_| {
            Error::sys(REGISTER, Errno::ENOMEM)
                .with_detail("no memory to pad the buffer to a multiple of 8 bytes")
        })?;
        for b in self.spare_capacity_mut().iter_mut().take(pad) {
            b.write(0);
        }
        let Some(base) = NonNull::new(self.as_mut_ptr()) else {
            return Err(empty("Vec"));
        };
        if base.as_ptr().addr() % WORD != 0 {
            return Err(Error::new(
                REGISTER,
                ErrorKind::InvalidArgument,
                format!(
                    "the buffer at {:p} is not 8-byte aligned, and the region's copies access \
                     whole aligned 8-byte words: allocate it with an allocator that aligns to \
                     8 (the system allocator does), or use ProtectionDomain::alloc_mr",
                    base
                ),
            ));
        }
        Ok(Hold {
            held: self,
            base,
            len,
        })
    }

    fn release(held: Vec<u8>) -> Self {
        held
    }
}

impl sealed::Buffer for Box<[u8]> {
    type Held = Vec<u8>;

    fn hold(self) -> Result<Hold<Vec<u8>>> {
        if self.is_empty() {
            return Err(empty("Box<[u8]>"));
        }
        sealed::Buffer::hold(self.into_vec())
    }

    fn release(held: Vec<u8>) -> Self {
        held.into_boxed_slice()
    }
}

impl sealed::Buffer for memmap2::MmapMut {
    type Held = memmap2::MmapMut;

    fn hold(mut self) -> Result<Hold<memmap2::MmapMut>> {
        let len = self.len();
        if len == 0 {
            return Err(empty("mapping"));
        }
        let Some(base) = NonNull::new(self.as_mut_ptr()) else {
            return Err(empty("mapping"));
        };
        Ok(Hold {
            held: self,
            base,
            len,
        })
    }

    fn release(held: memmap2::MmapMut) -> Self {
        held
    }
}

/// The first byte of the registered buffer.
#[derive(Clone, Copy)]
struct Base(NonNull<u8>);

// SAFETY: the pointer is only used for the atomic copies of
// `shared_memory`, which any thread may make, into memory the region's
// buffer owns (the buffer types are `Send + Sync`).
unsafe impl Send for Base {}
// SAFETY: as above: `&self` methods only make atomic accesses through it.
unsafe impl Sync for Base {}

/// The kernel object and the buffer it covers.
struct Live<B: RegionBuffer> {
    mr: Arc<Owned<MrInner>>,
    held: B::Held,
}

/// A memory region over a buffer the program allocated, which the region
/// owns until it is deregistered: `ibv_reg_mr` on your own buffer, made by
/// [`ProtectionDomain::register_owned`].
///
/// It reads and writes like a [`MemoryRegion`](super::MemoryRegion): by
/// copies in and out ([`write`](Self::write), [`read`](Self::read),
/// [`fill`](Self::fill), [`read_u8`](Self::read_u8),
/// [`write_u8`](Self::write_u8)), never by a reference into the memory
/// the device writes; [`into_inner`](Self::into_inner) gives the buffer
/// back after deregistering it.
///
/// ```no_run
/// # fn main() -> uverbs::Result<()> {
/// use uverbs::AccessFlags;
/// let ctx = uverbs::Context::open(None)?;
/// let pd = ctx.alloc_pd()?;
/// let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
/// let mr = pd.register_owned(vec![0u8; 4096], access)?;
/// // Give peers `mr.addr()` and `mr.rkey()`, post `mr.sge(0, 4096)?`, ...
/// let mut head = [0u8; 16];
/// mr.read(0, &mut head)?; // after the completion that reports the data
/// let buf: Vec<u8> = mr.into_inner()?; // deregistered: the Vec is yours again
/// # let _ = buf;
/// # Ok(())
/// # }
/// ```
///
/// # Why this is safe
///
/// [`ProtectionDomain::register_raw`] is `unsafe` because the device may
/// read and write registered memory at any time: no Rust reference to it
/// may exist while it is registered, and it must stay allocated until the
/// deregistration succeeds. This type keeps both promises itself:
///
/// - it takes the buffer by value and holds it, untouched, for as long as
///   the memory is registered. The program cannot borrow it (`&[u8]`,
///   `&mut [u8]`), grow it (a `Vec` cannot reallocate), unmap or free it,
///   and the region never dereferences it either (not even for `Debug`):
///   it copies in and out with atomic accesses;
/// - it deregisters the memory before it gives the buffer back
///   ([`into_inner`](Self::into_inner)) or frees it (drop). When the
///   kernel refuses the deregistration at the drop, the buffer is leaked
///   with the kernel object, never freed, as every object whose kernel
///   destroy fails is.
///
/// # The words around the buffer
///
/// The copies access whole aligned 8-byte words (see "Concurrent access"),
/// so the words that contain the buffer's first and last bytes must belong
/// to the region as well, be initialised, and be used by nothing else:
///
/// - a `Vec<u8>` (or `Box<[u8]>`, held as one) must start 8-byte aligned,
///   which the system allocator and the common ones do for every buffer of
///   8 bytes and more (otherwise `register_owned` fails). When its length
///   is not a multiple of 8, the bytes up to the next multiple come from
///   its spare capacity (reserved if needed, which may move the buffer
///   once, before registration) and are zeroed. They are not registered
///   and stay outside the `Vec`'s length;
/// - a `memmap2::MmapMut` is page-granular: the words around any range of
///   it lie in its own pages.
///
/// # Concurrent access
///
/// The region is `Send + Sync` (not `Clone`: it owns the buffer), and the
/// copies keep the rule of "Concurrent access" on
/// [`MemoryRegion`](super::MemoryRegion): every access is one aligned
/// 8-byte atomic access to a word containing the bytes concerned, so
/// copies on several threads and the device's writes never make each
/// other undefined; ordering them is the program's protocol (a completion,
/// a flag byte).
pub struct OwnedMemoryRegion<B: RegionBuffer> {
    /// `Some` until `into_inner` takes it; the drop deregisters it.
    live: Option<Live<B>>,
    base: Base,
    len: usize,
    lkey: u32,
    rkey: u32,
    handle: u32,
}

impl ProtectionDomain {
    /// Registers a buffer the program allocated (`Vec<u8>`, `Box<[u8]>`, a
    /// [`memmap2::MmapMut`]): `ibv_reg_mr` on your own memory, without
    /// `unsafe`. The region owns the buffer until it is deregistered
    /// ([`OwnedMemoryRegion::into_inner`] gives it back).
    ///
    /// The `len()` bytes of the buffer are registered, at the buffer's own
    /// address ([`OwnedMemoryRegion::addr`]); a `Vec`'s spare capacity is
    /// not. A `Vec` or `Box` must start 8-byte aligned, and one whose
    /// length is not a multiple of 8 is padded first (possibly moving it):
    /// see "The words around the buffer" on [`OwnedMemoryRegion`].
    ///
    /// Fails with [`ErrorKind::InvalidArgument`] for an empty buffer, a
    /// misaligned one, or `REMOTE_WRITE`/`REMOTE_ATOMIC` without
    /// `LOCAL_WRITE`, and with the kernel's errno if it refuses the
    /// registration. On an error the buffer is dropped (never registered).
    #[doc(alias = "ibv_reg_mr")]
    pub fn register_owned<B: RegionBuffer>(
        &self,
        buf: B,
        access: AccessFlags,
    ) -> Result<OwnedMemoryRegion<B>> {
        check_access(REGISTER, access)?;
        let Hold { held, base, len } = sealed::Buffer::hold(buf)?;
        // `held` is dropped if this fails: the memory was never registered.
        let start = base.as_ptr() as u64;
        let region = self.register(start, len, start, access, Backing::Borrowed)?;
        let mr = region.inner;
        Ok(OwnedMemoryRegion {
            base: Base(base),
            len,
            lkey: mr.lkey,
            rkey: mr.rkey,
            handle: mr.handle,
            live: Some(Live { mr, held }),
        })
    }
}

impl<B: RegionBuffer> OwnedMemoryRegion<B> {
    /// The local key, for scatter/gather elements.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// The remote key, for peers' RDMA and atomics.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The address of the first byte: the buffer's own address, which work
    /// requests and peers use.
    pub fn addr(&self) -> u64 {
        self.base.0.as_ptr() as u64
    }

    /// Length in bytes (the buffer's `len()`).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never true: empty buffers are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The kernel's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// A scatter/gather element for `len` bytes at `offset`, checked against the region.
    pub fn sge(&self, offset: usize, len: u32) -> Result<Sge> {
        self.check_range("OwnedMemoryRegion::sge", offset, len as usize)?;
        Ok(Sge::new(self.addr() + offset as u64, len, self.lkey))
    }

    #[inline]
    fn check_range(&self, op: &'static str, offset: usize, len: usize) -> Result<()> {
        super::check_range(op, offset, len, self.len)
    }

    /// The address of byte `offset`, checked to be inside the region.
    #[inline]
    fn at(&self, op: &'static str, offset: usize, len: usize) -> Result<*mut u8> {
        self.check_range(op, offset, len)?;
        // In bounds of the buffer (checked above).
        Ok(self.base.0.as_ptr().wrapping_add(offset))
    }

    /// Copies `data` into the region at `offset` (relaxed atomic accesses,
    /// as [`MemoryRegion::write`](super::MemoryRegion::write)).
    ///
    /// Ordering with the device: write before posting the work request
    /// that sends it (posting publishes it with release ordering).
    #[inline]
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let p = self.at("OwnedMemoryRegion::write", offset, data.len())?;
        // SAFETY: `p..p + data.len()` is inside the buffer the region holds
        // (checked by `at`), which stays allocated while `self` lives; its
        // containing words are the buffer's too, initialised, and accessed
        // only through `shared_memory` ("The words around the buffer").
        unsafe { shared_memory::copy_in(p, data) };
        Ok(())
    }

    /// Copies bytes out of the region at `offset` into `out`.
    ///
    /// Ordering with the device: read after polling the completion that
    /// reports the data (polling acquires it), or after
    /// [`read_u8`](Self::read_u8) saw the flag the peer writes last.
    #[inline]
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let p = self.at("OwnedMemoryRegion::read", offset, out.len())?;
        // SAFETY: as in `write`.
        unsafe { shared_memory::copy_out(p, out) };
        Ok(())
    }

    /// Reads a native-endian `u64` at `offset` (e.g. an atomic's result).
    pub fn read_u64(&self, offset: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// Fills `len` bytes at `offset` with `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        let p = self.at("OwnedMemoryRegion::fill", offset, len)?;
        // SAFETY: as in `write`.
        unsafe { shared_memory::fill(p, len, byte) };
        Ok(())
    }

    /// Reads the byte at `offset` with one acquire load, as
    /// [`MemoryRegion::read_u8`](super::MemoryRegion::read_u8): the cheap
    /// way to busy-poll for a flag the peer writes last.
    #[inline]
    pub fn read_u8(&self, offset: usize) -> Result<u8> {
        let p = self.at("OwnedMemoryRegion::read_u8", offset, 1)?;
        // SAFETY: as in `write`, for one byte.
        Ok(unsafe { shared_memory::load_u8(p) })
    }

    /// Writes the byte at `offset` with release ordering, as
    /// [`MemoryRegion::write_u8`](super::MemoryRegion::write_u8).
    #[inline]
    pub fn write_u8(&self, offset: usize, byte: u8) -> Result<()> {
        let p = self.at("OwnedMemoryRegion::write_u8", offset, 1)?;
        // SAFETY: as in `write`, for one byte.
        unsafe { shared_memory::store_u8(p, byte) };
        Ok(())
    }

    /// Deregisters the region, like `ibv_dereg_mr`, and gives the buffer
    /// back with what the device and the copies wrote into it. A `Vec`
    /// keeps its length (and at least its capacity); a `Box<[u8]>` whose
    /// length is not a multiple of 8 is shrunk back, which may move it.
    ///
    /// If the kernel refuses, the error comes back with the region, still
    /// registered and usable: try again, or drop it (the drop tries once
    /// more and leaks the buffer if that fails too).
    #[doc(alias = "ibv_dereg_mr")]
    pub fn into_inner(mut self) -> Result<B, DestroyError<Self>> {
        let Some(Live { mr, held }) = self.live.take() else {
            // Unreachable: only a successful `into_inner`, which consumes
            // the region, leaves `live` empty.
            let e = Error::new(
                DEREGISTER,
                ErrorKind::InvalidArgument,
                "already deregistered",
            );
            return Err(DestroyError::new(self, e));
        };
        match object::try_destroy(mr, DEREGISTER) {
            Ok(()) => Ok(<B as sealed::Buffer>::release(held)),
            Err((mr, e)) => {
                self.live = Some(Live { mr, held });
                Err(DestroyError::new(self, e))
            }
        }
    }
}

impl<B: RegionBuffer> Drop for OwnedMemoryRegion<B> {
    fn drop(&mut self) {
        let Some(Live { mr, held }) = self.live.take() else {
            return;
        };
        match object::try_destroy(mr, DEREGISTER) {
            Ok(()) => drop(held),
            Err((mr, _)) => {
                // The kernel object lives on, and may still reach the
                // buffer: both are leaked, never freed (`src/object.rs`).
                std::mem::forget(mr);
                std::mem::forget(held);
                #[cfg(any(test, feature = "test-utils"))]
                object::LEAKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

impl<B: RegionBuffer> fmt::Debug for OwnedMemoryRegion<B> {
    // Never the buffer's own `Debug`: it would read the registered memory
    // through a reference.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedMemoryRegion")
            .field("buffer", &std::any::type_name::<B>())
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .field("lkey", &self.lkey)
            .field("rkey", &self.rkey)
            .field("handle", &self.handle)
            .finish()
    }
}

// Host tests: tests/owned_mr_fake.rs (fake rxe kernel and mlx5 model).
