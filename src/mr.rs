//! Memory regions (`ibv_reg_mr`, `ibv_reg_dmabuf_mr`, `ibv_dereg_mr`).
//!
//! Registration is the `REG_MR` write command (in 6.1 plain registration has
//! no ioctl method); dma-buf registration is `UVERBS_METHOD_REG_DMABUF_MR`;
//! deregistration is `UVERBS_METHOD_MR_DESTROY` with the `DEREG_MR` write
//! fallback.
//!
//! # Memory safety
//!
//! The device (or rxe, in the kernel) may write registered memory at any
//! time, so no Rust reference to it may exist. [`ProtectionDomain::alloc_mr`]
//! allocates the memory itself (page-aligned anonymous pages), never lends it
//! out as `&`/`&mut`, and offers copies in and out ([`MemoryRegion::write`],
//! [`MemoryRegion::read`]); the pages are unmapped only after the region is
//! deregistered. A buffer the program allocated (`Vec<u8>`, `Box<[u8]>`, a
//! `memmap2::MmapMut`) is registered safely by handing it to the region
//! ([`ProtectionDomain::register_owned`], `mr/owned.rs`), which gives it
//! back only after deregistering it. Registering memory you keep is
//! [`ProtectionDomain::register_raw`], which is `unsafe` for exactly that
//! reason. Registered pages stay pinned until deregistration, so work
//! requests still in flight when a region is dropped cannot reach memory
//! that was reused: they complete with an error instead.

#![allow(unsafe_code)]

use std::{os::fd::BorrowedFd, sync::Arc};

use bitflags::bitflags;
use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::Verb,
    error::{DestroyError, Error, ErrorKind, Result},
    fork::{self, ForkGuard},
    object::{self, Destroy, Owned},
    pd::{PdInner, ProtectionDomain},
    shared_memory,
    sys::{Errno, Mapping},
    wr::Sge,
};

mod owned;
pub(crate) mod pool;
pub use owned::{OwnedMemoryRegion, RegionBuffer};
pub use pool::{BufferPool, PoolBuf};

bitflags! {
    /// Access rights of a memory region or QP (`enum ibv_access_flags`,
    /// the kernel's `enum ib_uverbs_access_flags`).
    ///
    /// Bits this crate does not name are kept as they are.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct AccessFlags: u32 {
        /// The local device may write (needed for receives, reads and
        /// atomics): `IBV_ACCESS_LOCAL_WRITE`.
        #[doc(alias = "IBV_ACCESS_LOCAL_WRITE")]
        const LOCAL_WRITE = 1;
        /// Peers may RDMA-write (requires `LOCAL_WRITE`):
        /// `IBV_ACCESS_REMOTE_WRITE`.
        #[doc(alias = "IBV_ACCESS_REMOTE_WRITE")]
        const REMOTE_WRITE = 1 << 1;
        /// Peers may RDMA-read: `IBV_ACCESS_REMOTE_READ`.
        #[doc(alias = "IBV_ACCESS_REMOTE_READ")]
        const REMOTE_READ = 1 << 2;
        /// Peers may run atomics (requires `LOCAL_WRITE`):
        /// `IBV_ACCESS_REMOTE_ATOMIC`.
        #[doc(alias = "IBV_ACCESS_REMOTE_ATOMIC")]
        const REMOTE_ATOMIC = 1 << 3;
        /// Memory windows may be bound: `IBV_ACCESS_MW_BIND`.
        #[doc(alias = "IBV_ACCESS_MW_BIND")]
        const MW_BIND = 1 << 4;
        /// Addresses are offsets from 0: `IBV_ACCESS_ZERO_BASED`.
        #[doc(alias = "IBV_ACCESS_ZERO_BASED")]
        const ZERO_BASED = 1 << 5;
        /// On-demand paging: `IBV_ACCESS_ON_DEMAND`.
        #[doc(alias = "IBV_ACCESS_ON_DEMAND")]
        const ON_DEMAND = 1 << 6;
        /// Huge pages back the region: `IBV_ACCESS_HUGETLB`.
        #[doc(alias = "IBV_ACCESS_HUGETLB")]
        const HUGETLB = 1 << 7;
        /// Peers may flush to the global visibility point
        /// (`IBV_ACCESS_FLUSH_GLOBAL`; Linux 6.2+).
        #[doc(alias = "IBV_ACCESS_FLUSH_GLOBAL")]
        const FLUSH_GLOBAL = 1 << 8;
        /// Peers may flush to persistence
        /// (`IBV_ACCESS_FLUSH_PERSISTENT`; Linux 6.2+).
        #[doc(alias = "IBV_ACCESS_FLUSH_PERSISTENT")]
        const FLUSH_PERSISTENT = 1 << 9;
        /// Relaxed ordering (optional: ignored where unsupported):
        /// `IBV_ACCESS_RELAXED_ORDERING`.
        #[doc(alias = "IBV_ACCESS_RELAXED_ORDERING")]
        const RELAXED_ORDERING = 1 << 20;
        const _ = !0;
    }
}

/// Where a region's memory comes from.
#[derive(Debug)]
enum Backing {
    /// Pages the crate allocated; unmapped after deregistration.
    Owned(Mapping),
    /// Memory the caller manages (`register_raw`), or that an
    /// `OwnedMemoryRegion` holds and frees itself (`register_owned`).
    Borrowed,
    /// A dma-buf: not mapped in this process.
    DmaBuf,
    /// Another context's region, imported by handle: its memory is the
    /// owner's (maybe in another process).
    Imported,
}

/// A memory region's kernel object.
#[derive(Debug)]
pub(crate) struct MrInner {
    pd: Arc<Owned<PdInner>>,
    handle: u32,
    lkey: u32,
    rkey: u32,
    addr: u64,
    len: usize,
    /// The range's fork protection ([`crate::fork_init`]); released after
    /// the deregistration, before the memory is unmapped or given back
    /// (fields drop in order).
    _fork: Option<ForkGuard>,
    // Dropped after `destroy_kernel` has deregistered the region.
    backing: Backing,
}

impl Destroy for MrInner {
    fn owns_kernel_object(&self) -> bool {
        !matches!(self.backing, Backing::Imported)
    }

    fn destroy_kernel(&self) -> Result<()> {
        self.pd
            .ctx
            .destroy_simple(
                Verb::DestroyMr,
                (
                    abi::UVERBS_OBJECT_MR,
                    abi::UVERBS_METHOD_MR_DESTROY,
                    abi::UVERBS_ATTR_DESTROY_MR_HANDLE,
                ),
                abi::IB_USER_VERBS_CMD_DEREG_MR,
                self.handle,
            )
            .map_err(|e| Error::sys("UVERBS_METHOD_MR_DESTROY", e))
    }
}

/// A registered memory region (`struct ibv_mr`).
///
/// # Concurrent access
///
/// A region is `Clone + Send + Sync`: several threads may read and write
/// it, and the device writes it when it likes. Rust's memory model (the
/// [`std::sync::atomic`] module documentation, "Memory model for atomic
/// accesses") makes two kinds of unordered overlapping access undefined
/// behaviour: a data race (one of the accesses non-atomic), and a
/// mixed-size race (atomic accesses of different sizes to overlapping
/// bytes, unless both are reads).
///
/// Every access the crate makes to region memory ([`MemoryRegion::write`],
/// [`MemoryRegion::read`], [`MemoryRegion::fill`],
/// [`MemoryRegion::read_u8`], [`MemoryRegion::write_u8`], and the in-process
/// test device) is therefore of one kind: an atomic access of 8 bytes to
/// the aligned word that contains the bytes concerned (the region starts
/// page-aligned, so these are the words at offsets that are multiples of
/// 8). The copies use relaxed loads and stores, and a compare-exchange for a
/// word they cover only partly, which changes only the bytes in the range.
/// `read_u8` is an acquire load of the word and `write_u8` a release
/// compare-exchange. Two such accesses either access exactly the same 8
/// bytes or are disjoint, and neither is non-atomic, so neither kind of
/// race can occur between these methods on any threads, whatever the
/// offsets and lengths. What is promised is exactly that, plus:
///
/// - each 8-byte word is read and written whole, so a copy racing a
///   writer of the same bytes may see some words old and some new;
/// - a write to part of a word never undoes a concurrent write to the
///   word's other bytes, by another thread or (with cache-coherent DMA)
///   the device;
/// - programs order their accesses as with any shared buffer (a
///   completion, a flag byte, a lock).
///
/// The device's DMA is outside the Rust abstract machine, as before: its
/// writes cannot make these accesses undefined, and what a copy sees of
/// them is ordered as the methods' "Ordering with the device" notes say.
///
/// Through [`MemoryRegion::as_ptr`] the rule is the caller's. Unless it is
/// ordered with every method call that may touch the same bytes, an access
/// must be an aligned 8-byte atomic access to a whole word (such as
/// [`AtomicU64::from_ptr`](std::sync::atomic::AtomicU64::from_ptr) at a
/// multiple of 8). A byte or `u32` atomic is not enough, even to bytes
/// outside the ranges the methods are given: `write` of bytes 5..9 also
/// accesses bytes 0..16.
#[derive(Debug, Clone)]
pub struct MemoryRegion {
    inner: Arc<Owned<MrInner>>,
}

fn check_access(op: &'static str, access: AccessFlags) -> Result<()> {
    // The kernel's ib_check_mr_access: remote write or atomic need local write.
    if access.intersects(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC)
        && !access.contains(AccessFlags::LOCAL_WRITE)
    {
        return Err(Error::new(
            op,
            ErrorKind::InvalidArgument,
            "REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE",
        ));
    }
    Ok(())
}

impl ProtectionDomain {
    /// Allocates `len` bytes of zeroed, page-aligned memory and registers it
    /// (`ibv_reg_mr` on memory the library owns).
    #[doc(alias = "ibv_reg_mr")]
    pub fn alloc_mr(&self, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        let op = "allocate memory region";
        if len == 0 {
            return Err(Error::new(op, ErrorKind::InvalidArgument, "length 0"));
        }
        let map = memmap2::MmapOptions::new()
            .len(len)
            .map_anon()
            .map(Mapping::from)
            .map_err(|e| {
                Error::sys(
                    op,
                    Errno::from_raw(e.raw_os_error().unwrap_or(libc::ENOMEM)),
                )
            })?;
        let addr = map.as_mut_ptr() as u64;
        self.register(addr, len, addr, access, Backing::Owned(map))
    }

    /// Registers memory the caller manages, like `ibv_reg_mr` on a buffer.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be mapped, and must stay mapped and not be
    /// accessed through Rust references (`&`/`&mut`, slices, `Vec`s) while the
    /// region exists, because the device may read and (with write access)
    /// write it at any time. Access it through raw pointers only, or keep it
    /// for the device alone. The region exists until its deregistration
    /// succeeds: if the kernel refuses it (at `destroy` and again at the
    /// drop), the region lives on with the context, and so does this
    /// promise (memory the library allocated is leaked in that case).
    ///
    /// Under the mlx5 device model (feature `test-utils`), which plays the
    /// device in this process, the same holds for the aligned 8-byte words
    /// that contain the range's first and last bytes: the model writes
    /// memory with whole-word atomics (`MemoryRegion`'s copies), so a byte
    /// of such a word outside the range must not be accessed concurrently
    /// except by 8-byte atomics. A real device's DMA has no such rule.
    #[doc(alias = "ibv_reg_mr")]
    pub unsafe fn register_raw(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        self.register(addr as u64, len, addr as u64, access, Backing::Borrowed)
    }

    /// [`ProtectionDomain::register_raw`] with the I/O virtual address
    /// `iova` for the first byte, like `ibv_reg_mr_iova2` (and
    /// `ibv_reg_mr_iova`, the same without optional access bits): work requests
    /// and peers name the region's bytes `iova..iova + len`
    /// ([`MemoryRegion::addr`] is `iova`), while the device reads and
    /// writes `addr..addr + len`.
    ///
    /// # Safety
    ///
    /// As [`ProtectionDomain::register_raw`], for `addr..addr + len`.
    #[doc(alias = "ibv_reg_mr_iova2")]
    #[doc(alias = "ibv_reg_mr_iova")]
    pub unsafe fn register_raw_iova(
        &self,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        self.register(addr as u64, len, iova, access, Backing::Borrowed)
    }

    /// Registers `len` bytes at `addr`, named `iova..` by work requests
    /// (`struct ib_uverbs_reg_mr`'s `start` and `hca_va`).
    fn register(
        &self,
        addr: u64,
        len: usize,
        iova: u64,
        access: AccessFlags,
        backing: Backing,
    ) -> Result<MemoryRegion> {
        let op = "IB_USER_VERBS_CMD_REG_MR";
        check_access(op, access)?;
        // libibverbs' ibv_reg_mr: the range is kept from children before it
        // is registered (not an on-demand region, which pins nothing), and
        // released if the registration fails.
        let fork = if access.contains(AccessFlags::ON_DEMAND) {
            None
        } else {
            fork::protect(addr as usize, len).map_err(|e| {
                Error::sys(op, e).with_detail(format!(
                    "madvise(MADV_DONTFORK) of {addr:#x}+{len} (fork_init) failed"
                ))
            })?
        };
        let mut req = abi::IbUverbsRegMr::new_zeroed();
        req.start = addr;
        req.length = len as u64;
        req.hca_va = iova;
        req.pd_handle = self.inner.handle;
        req.access_flags = access.bits();
        let mut resp = abi::IbUverbsRegMrResp::new_zeroed();
        self.inner
            .ctx
            .write_with_resp(
                abi::IB_USER_VERBS_CMD_REG_MR,
                req.as_bytes(),
                &[],
                resp.as_mut_bytes(),
                &mut [],
            )
            .map_err(|e| {
                let err = Error::sys(op, e);
                match e {
                    Errno::EFAULT => err.with_detail("the address range is not mapped"),
                    Errno::EINVAL => err.with_detail(format!(
                        "access {access:?} or the range {addr:#x}+{len} is not accepted"
                    )),
                    _ => err,
                }
            })?;
        Ok(MemoryRegion {
            inner: Owned::new(MrInner {
                pd: self.inner.clone(),
                handle: resp.mr_handle,
                lkey: resp.lkey,
                rkey: resp.rkey,
                addr: iova,
                len,
                _fork: fork,
                backing,
            }),
        })
    }

    /// Registers `len` bytes at `offset` of a dma-buf, like `ibv_reg_dmabuf_mr`.
    /// `iova` is the address work requests use for its first byte.
    #[doc(alias = "ibv_reg_dmabuf_mr")]
    pub fn register_dmabuf(
        &self,
        fd: BorrowedFd<'_>,
        offset: u64,
        len: usize,
        iova: u64,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        use std::os::fd::AsRawFd;
        let op = "UVERBS_METHOD_REG_DMABUF_MR";
        check_access(op, access)?;
        let ctx = &self.inner.ctx;
        let (mut lkey, mut rkey) = (0u32, 0u32);
        let mut cmd = ctx.ioctl_cmd(abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_REG_DMABUF_MR);
        let h = cmd.new_object(abi::UVERBS_ATTR_REG_DMABUF_MR_HANDLE);
        cmd.object(abi::UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, self.inner.handle);
        cmd.input_u64(abi::UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset);
        cmd.input_u64(abi::UVERBS_ATTR_REG_DMABUF_MR_LENGTH, len as u64);
        cmd.input_u64(abi::UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova);
        // The fd is a u32 PTR_IN in 6.1, not an FD attribute.
        cmd.input_u32(abi::UVERBS_ATTR_REG_DMABUF_MR_FD, fd.as_raw_fd() as u32);
        cmd.flags_in(
            abi::UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS,
            u64::from(access.bits()),
        );
        cmd.optional();
        cmd.output(
            abi::UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY,
            lkey.as_mut_bytes(),
        );
        cmd.output(
            abi::UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY,
            rkey.as_mut_bytes(),
        );
        ctx.ioctl(&mut cmd).map_err(|e| {
            let err = Error::sys(op, e);
            if e == Errno::EOPNOTSUPP {
                err.with_detail("this device does not support dma-buf memory regions")
            } else {
                err
            }
        })?;
        let handle = cmd.new_handle(h);
        drop(cmd);
        Ok(MemoryRegion {
            inner: Owned::new(MrInner {
                pd: self.inner.clone(),
                handle,
                lkey,
                rkey,
                addr: iova,
                len,
                _fork: None,
                backing: Backing::DmaBuf,
            }),
        })
    }
}

impl ProtectionDomain {
    /// The memory region another context of the same kernel user context
    /// registered, by its handle, like `ibv_import_mr` (see
    /// [`crate::Context::import`]): `UVERBS_METHOD_QUERY_MR` answers its
    /// keys, length and address ([`MemoryRegion::addr`]: the iova work
    /// requests name, where rdma-core leaves `mr->addr` NULL). The memory
    /// is the owner's: this handle neither reads nor writes it
    /// ([`MemoryRegion::as_ptr`] is `None`), and dropping it or
    /// [`MemoryRegion::unimport`] leaves the registration to its owner.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` on a provider that imports nothing (rxe, as rdma-core's);
    /// the kernel's answer for a handle that names nothing (`ENOENT`) or no
    /// region (`EINVAL`).
    #[doc(alias = "ibv_import_mr")]
    pub fn import_mr(&self, handle: u32) -> Result<MemoryRegion> {
        let op = "UVERBS_METHOD_QUERY_MR";
        let ctx = &self.inner.ctx;
        if !ctx.provider.imports_mrs() {
            return Err(Error::new(
                "ibv_import_mr",
                ErrorKind::UnsupportedProvider,
                format!(
                    "the {} provider shares no memory regions between contexts (as \
                     rdma-core's: no import_mr)",
                    ctx.provider.name()
                ),
            ));
        }
        let (mut lkey, mut rkey, mut length, mut iova) = (0u32, 0u32, 0u64, 0u64);
        let mut cmd = ctx.ioctl_cmd(abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_QUERY_MR);
        cmd.object(abi::UVERBS_ATTR_QUERY_MR_HANDLE, handle);
        cmd.output(abi::UVERBS_ATTR_QUERY_MR_RESP_LKEY, lkey.as_mut_bytes());
        cmd.output(abi::UVERBS_ATTR_QUERY_MR_RESP_RKEY, rkey.as_mut_bytes());
        cmd.output(abi::UVERBS_ATTR_QUERY_MR_RESP_LENGTH, length.as_mut_bytes());
        // Since Linux 5.12 (older kernels leave it out): optional.
        let at = cmd.output(abi::UVERBS_ATTR_QUERY_MR_RESP_IOVA, iova.as_mut_bytes());
        cmd.optional();
        ctx.ioctl(&mut cmd).map_err(|e| Error::sys(op, e))?;
        let has_iova = cmd.is_valid_output(at);
        drop(cmd);
        let len = usize::try_from(length).map_err(|_| {
            Error::new(
                op,
                ErrorKind::Malformed,
                format!("a region of {length} bytes"),
            )
        })?;
        Ok(MemoryRegion {
            inner: Owned::new(MrInner {
                pd: self.inner.clone(),
                handle,
                lkey,
                rkey,
                addr: if has_iova { iova } else { 0 },
                len,
                _fork: None,
                backing: Backing::Imported,
            }),
        })
    }
}

/// Checks that bytes `offset..offset + len` lie inside a region of
/// `total` bytes (every region's accessors).
#[inline]
pub(crate) fn check_range(op: &'static str, offset: usize, len: usize, total: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= total => Ok(()),
        _ => Err(range_error(op, offset, len, total)),
    }
}

#[cold]
#[inline(never)]
fn range_error(op: &'static str, offset: usize, len: usize, total: usize) -> Error {
    Error::new(
        op,
        ErrorKind::InvalidArgument,
        format!(
            "bytes {offset}..{} are outside the region's {total} bytes",
            offset as u128 + len as u128,
        ),
    )
}

impl MemoryRegion {
    /// The local key, for scatter/gather elements.
    pub fn lkey(&self) -> u32 {
        self.inner.lkey
    }

    /// The remote key, for peers' RDMA and atomics.
    pub fn rkey(&self) -> u32 {
        self.inner.rkey
    }

    /// The address of the first byte (what work requests and peers use).
    pub fn addr(&self) -> u64 {
        self.inner.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the region is empty (never true: zero-length regions are refused).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The kernel's handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The PD's kernel object.
    pub(crate) fn pd_inner(&self) -> &Arc<Owned<PdInner>> {
        &self.inner.pd
    }

    /// A scatter/gather element for `len` bytes at `offset`, checked against the region.
    pub fn sge(&self, offset: usize, len: u32) -> Result<Sge> {
        self.check_range("MemoryRegion::sge", offset, len as usize)?;
        Ok(Sge::new(
            self.inner.addr + offset as u64,
            len,
            self.inner.lkey,
        ))
    }

    /// A pointer to the first byte of memory the crate allocated
    /// ([`ProtectionDomain::alloc_mr`]; page-aligned); `None` for other
    /// regions. Accesses through it must keep the rule of "Concurrent
    /// access" on [`MemoryRegion`]: no reference into the region, and
    /// nothing but aligned 8-byte atomic accesses to whole words that
    /// another thread or the device may access at the same time.
    pub fn as_ptr(&self) -> Option<*mut u8> {
        match &self.inner.backing {
            Backing::Owned(map) => Some(map.as_mut_ptr()),
            _ => None,
        }
    }

    #[inline]
    fn check_range(&self, op: &'static str, offset: usize, len: usize) -> Result<()> {
        check_range(op, offset, len, self.inner.len)
    }

    fn range_error(&self, op: &'static str, offset: usize, len: usize) -> Error {
        range_error(op, offset, len, self.inner.len)
    }

    /// The address of byte `offset` of memory the crate allocated, if
    /// `offset` is inside the region: the checks of `read_u8`/`write_u8`.
    #[inline]
    fn owned_byte(&self, offset: usize) -> Option<*mut u8> {
        match &self.inner.backing {
            // `offset < len`, the length of the live mapping: the result
            // stays inside it.
            Backing::Owned(map) if offset < self.inner.len => {
                Some(map.as_mut_ptr().wrapping_add(offset))
            }
            _ => None,
        }
    }

    #[cold]
    #[inline(never)]
    fn byte_error(&self, op: &'static str, offset: usize) -> Error {
        match self.check_range(op, offset, 1) {
            Err(e) => e,
            Ok(()) => self
                .owned_ptr(op)
                .err()
                .unwrap_or_else(|| self.range_error(op, offset, 1)),
        }
    }

    #[inline]
    fn owned_ptr(&self, op: &'static str) -> Result<*mut u8> {
        self.as_ptr().ok_or_else(|| {
            Error::new(
                op,
                ErrorKind::InvalidArgument,
                "only regions from alloc_mr can be read and written through the region",
            )
        })
    }

    /// Copies `data` into the region at `offset`.
    ///
    /// The copy is made of relaxed atomic accesses to the 8-byte words the
    /// bytes are in (see "Concurrent access" on [`MemoryRegion`]): clones
    /// of this handle on other threads and the device may use the same
    /// bytes meanwhile without undefined behaviour; ordering them is the
    /// program's protocol. Ordering with the device: write before posting
    /// the work request that sends it (posting publishes it with release
    /// ordering).
    #[inline]
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let op = "MemoryRegion::write";
        self.check_range(op, offset, data.len())?;
        let base = self.owned_ptr(op)?;
        // SAFETY: `offset..offset + data.len()` is inside the mapping this
        // region owns (checked above), which stays mapped while `self` lives.
        // The mapping is page-aligned, so the range's containing 8-byte
        // words are inside its pages too, and the crate accesses them only
        // through `shared_memory` (the program, through `as_ptr`, only with
        // aligned 8-byte atomics: "Concurrent access").
        unsafe { shared_memory::copy_in(base.add(offset), data) };
        Ok(())
    }

    /// Copies bytes out of the region at `offset` into `out` (relaxed atomic
    /// accesses, as [`MemoryRegion::write`]).
    ///
    /// Ordering with the device: read after polling the completion that
    /// reports the data (polling acquires it), or after [`MemoryRegion::read_u8`]
    /// saw the flag the peer writes last.
    #[inline]
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let op = "MemoryRegion::read";
        self.check_range(op, offset, out.len())?;
        let base = self.owned_ptr(op)?;
        // SAFETY: as in `write`.
        unsafe { shared_memory::copy_out(base.add(offset), out) };
        Ok(())
    }

    /// Reads a native-endian `u64` at `offset` (e.g. an atomic's result).
    pub fn read_u64(&self, offset: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// Reads the byte at `offset` with one acquire load (of its 8-byte
    /// word): the cheap way to busy-poll for a byte the device writes
    /// (perftest's write-lat spin). Reads made after it are not performed
    /// before it, so data that was complete when the flag was written (a
    /// peer's RDMA write lands in order, flag last) is seen complete;
    /// between threads it pairs with [`MemoryRegion::write_u8`].
    #[inline]
    pub fn read_u8(&self, offset: usize) -> Result<u8> {
        match self.owned_byte(offset) {
            // SAFETY: `p` is inside the live mapping this region owns
            // (`owned_byte`), and so is its containing 8-byte word (the
            // mapping is page-aligned); accessed as in `write`.
            Some(p) => Ok(unsafe { shared_memory::load_u8(p) }),
            None => Err(self.byte_error("MemoryRegion::read_u8", offset)),
        }
    }

    /// Writes the byte at `offset` with release ordering (a
    /// compare-exchange of its 8-byte word that changes only this byte):
    /// what was written before it is visible to a thread whose
    /// [`MemoryRegion::read_u8`] sees it.
    ///
    /// Ordering with the device: as [`MemoryRegion::write`].
    #[inline]
    pub fn write_u8(&self, offset: usize, byte: u8) -> Result<()> {
        match self.owned_byte(offset) {
            Some(p) => {
                // SAFETY: as in `read_u8`.
                unsafe { shared_memory::store_u8(p, byte) };
                Ok(())
            }
            None => Err(self.byte_error("MemoryRegion::write_u8", offset)),
        }
    }

    /// Fills `len` bytes at `offset` with `byte` (relaxed atomic stores, as
    /// [`MemoryRegion::write`]).
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        let op = "MemoryRegion::fill";
        self.check_range(op, offset, len)?;
        let base = self.owned_ptr(op)?;
        // SAFETY: in bounds of the live mapping (checked above), with the
        // containing words; as in `write`.
        unsafe { shared_memory::fill(base.add(offset), len, byte) };
        Ok(())
    }

    /// Deregisters the region now, like `ibv_dereg_mr`, giving it back on
    /// any failure: `EBUSY` while clones of this handle exist, or the
    /// kernel's refusal (rxe refuses with `EINVAL` while a memory window
    /// is bound to the region, rxe_mr.c `rxe_dereg_mr`). Given back, the
    /// region is as it was, still registered (its keys still open it):
    /// deregister it again once what kept it is gone, or drop it (the drop
    /// tries once more). An imported region is deregistered too, for its
    /// owner as well (as `ibv_dereg_mr` does); to let go of it only, drop
    /// it or [`MemoryRegion::unimport`] it.
    #[doc(alias = "ibv_dereg_mr")]
    pub fn destroy(self) -> std::result::Result<(), DestroyError<Self>> {
        object::try_destroy(self.inner, "ibv_dereg_mr")
            .map_err(|(inner, e)| DestroyError::new(MemoryRegion { inner }, e))
    }

    /// Whether the region was imported ([`ProtectionDomain::import_mr`]).
    pub fn is_imported(&self) -> bool {
        matches!(self.inner.backing, Backing::Imported)
    }

    /// Lets go of an imported region, like `ibv_unimport_mr`: the
    /// registration stays its owner's. A region registered here is given
    /// back (`EINVAL`): [`MemoryRegion::destroy`] or drop it.
    #[doc(alias = "ibv_unimport_mr")]
    pub fn unimport(self) -> std::result::Result<(), DestroyError<Self>> {
        if !self.is_imported() {
            let e = Error::new(
                "ibv_unimport_mr",
                ErrorKind::InvalidArgument,
                "the region was registered here, not imported",
            );
            return Err(DestroyError::new(self, e));
        }
        drop(self);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
