//! DevX user memory (`MLX5_IB_OBJECT_DEVX_UMEM`, `mlx5dv_devx_umem_reg`):
//! memory registered for the device to use through PRM objects, which name
//! it by its UMEM id (a DevX CQ's buffer, a QP's queues, doorbell records).
//!
//! Kernel side (`devx.c` `devx_umem_get`, `UMEM_REG`): the address and
//! length (mandatory), the access flags (`LOCAL_WRITE`, `REMOTE_WRITE`,
//! `REMOTE_READ` and relaxed ordering only; remote write needs local write,
//! `ib_check_mr_access`), an optional bitmap of the page sizes the object may
//! use, and on newer kernels a dma-buf fd instead of an address; it answers
//! the UMEM id. The memory stays pinned until the UMEM is deregistered, and
//! the device may write it at any time: so the memory must stay valid for
//! the registration's whole life. [`Devx::umem_reg`] allocates the memory
//! itself and keeps it until the UMEM is gone; [`Devx::umem_reg_raw`] and
//! [`Devx::umem_reg_ex`] (the page-size bitmap and dma-buf forms of
//! `mlx5dv_devx_umem_reg_ex`) register the caller's memory under that
//! contract (the `unsafe` functions of this module, hence its
//! `allow(unsafe_code)`).
//!
//! [`DevxUmem::dereg`] deregisters explicitly, as
//! `mlx5dv_devx_umem_dereg` does: the kernel's answer decides, and a
//! refusal gives the UMEM back.
//!
//! Who keeps the memory while an object uses it. The kernel counts no
//! users of a UMEM: `UMEM_DEREG` is the firmware's `DESTROY_UMEM`, and the
//! pages are unpinned as soon as firmware accepts it (`devx.c`
//! `devx_umem_cleanup`: `mlx5_cmd_exec` of the destroy command built at
//! registration, then `ib_umem_release`). Whether firmware refuses while a
//! CQ or QP still names the UMEM is not in any public source (the kernel's
//! teardown retries refused destroys, `rdma_core.c`
//! `uverbs_destroy_ufile_hw`, and rdma-core's DevX tests destroy objects
//! before their UMEMs, `tests/mlx5_base.py`, but neither says what firmware
//! does with the other order). So the library does not rely on it: an
//! object keeps alive every UMEM of its context its create command names
//! (`named_by`, used by [`Devx::obj_create`] and
//! [`Devx::obj_create_using`]) or that was passed to `obj_create_using`,
//! and a UMEM is deregistered only after them. When a deregistration fails
//! anyway (an object made outside this library names the UMEM, and
//! firmware refused), the memory is leaked, never given back while the
//! device may still write it.
#![allow(unsafe_code)]

use std::{
    any::Any,
    collections::BTreeMap,
    os::fd::{AsRawFd, BorrowedFd},
    sync::{Arc, Mutex, MutexGuard, PoisonError, Weak},
};

use bitflags::bitflags;

use super::{
    obj::{invalid, sealed, DevxResource},
    Devx,
};
use crate::{
    abi,
    error::{DestroyError, Error, Result},
    fork::ForkGuard,
    providers::dma::DmaBuf,
    sys::Errno,
};

bitflags! {
    /// What the device may do with a UMEM (the IB access flags the kernel
    /// accepts for one).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct UmemAccess: u32 {
        /// The device writes it (queues it completes into, receive buffers).
        const LOCAL_WRITE = abi::IB_UVERBS_ACCESS_LOCAL_WRITE;
        /// Peers write it.
        const REMOTE_WRITE = abi::IB_UVERBS_ACCESS_REMOTE_WRITE;
        /// Peers read it.
        const REMOTE_READ = abi::IB_UVERBS_ACCESS_REMOTE_READ;
    }
}

/// Registered DevX memory (`struct mlx5dv_devx_umem`). Clones share it; it
/// is deregistered when the last clone and the last object using it are
/// gone: the objects created with it ([`Devx::obj_create_using`]) and the
/// objects whose command names its [`id`](DevxUmem::id) ([`Devx::obj_create`]).
#[derive(Debug, Clone)]
pub struct DevxUmem {
    inner: Arc<UmemInner>,
}

#[derive(Debug)]
struct UmemInner {
    devx: Devx,
    handle: u32,
    id: u32,
    addr: u64,
    len: usize,
    /// The memory, when this library allocated it (dropped after the
    /// deregistration, in `Drop`).
    memory: Option<DmaBuf>,
    /// Still registered with the kernel: false once [`DevxUmem::dereg`]
    /// deregistered it (the objects holding it then hold a shell).
    registered: Mutex<bool>,
    /// The fork protection of the program's memory (libmlx5's
    /// `ibv_dontfork_range` in `mlx5dv_devx_umem_reg`), released after the
    /// deregistration.
    fork: Option<ForkGuard>,
}

/// What [`Devx::umem_reg_ex`] registers (`struct mlx5dv_devx_umem_in`).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct UmemIn<'a> {
    /// The start of the memory; with [`UmemIn::dmabuf`], the offset in the
    /// dma-buf.
    pub addr: *mut u8,
    /// Its length in bytes.
    pub len: usize,
    /// What the device may do with it.
    pub access: UmemAccess,
    /// The page sizes (bit `n`: 2^n bytes) objects may map it with
    /// (`pgsz_bitmap`); `None`: the kernel chooses.
    pub page_sizes: Option<u64>,
    /// A dma-buf to register a range of instead of memory of this process
    /// (`MLX5DV_UMEM_MASK_DMABUF`, `dmabuf_fd`).
    pub dmabuf: Option<BorrowedFd<'a>>,
}

impl<'a> UmemIn<'a> {
    /// Memory of this process, no page-size bitmap, no dma-buf.
    pub fn new(addr: *mut u8, len: usize, access: UmemAccess) -> Self {
        UmemIn {
            addr,
            len,
            access,
            page_sizes: None,
            dmabuf: None,
        }
    }

    /// With a page-size bitmap.
    pub fn with_page_sizes(mut self, bitmap: u64) -> Self {
        self.page_sizes = Some(bitmap);
        self
    }

    /// A range of `fd` starting at offset `addr`.
    pub fn with_dmabuf(mut self, fd: BorrowedFd<'a>) -> Self {
        self.dmabuf = Some(fd);
        self
    }
}

/// The UMEMs alive, by context (its address) and UMEM id: what
/// [`named_by`] finds an object's UMEMs in. An entry whose UMEM is alive
/// keeps its context alive (through the UMEM's [`Devx`]), so a context's
/// address is not reused while it has entries that upgrade.
static LIVE: Mutex<BTreeMap<(usize, u32), Weak<UmemInner>>> = Mutex::new(BTreeMap::new());

fn live() -> MutexGuard<'static, BTreeMap<(usize, u32), Weak<UmemInner>>> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The key of `devx`'s context in [`LIVE`].
fn context_key(devx: &Devx) -> usize {
    Arc::as_ptr(&devx.ctx.inner) as usize
}

/// The UMEMs of `devx`'s context that a PRM command names, as references
/// that keep them registered: every live UMEM whose id is one of the
/// command's big-endian 32-bit words past the 8-byte header. PRM layouts
/// give UMEM ids whole aligned words (`cq_umem_id`, `dbr_umem_id`,
/// `wq_umem_id` and the others of `mlx5_ifc.h`), so no layout is needed
/// here; a word that equals a UMEM's id by chance only keeps that UMEM
/// registered until the object is destroyed.
pub(super) fn named_by(devx: &Devx, cmd: &[u8]) -> Vec<Arc<dyn Any + Send + Sync>> {
    let key = context_key(devx);
    let mut found: Vec<Arc<UmemInner>> = Vec::new();
    {
        let live = live();
        for word in cmd.get(8..).unwrap_or_default().chunks_exact(4) {
            let id = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
            found.extend(live.get(&(key, id)).and_then(Weak::upgrade));
        }
        // The lock is released before duplicates are dropped: dropping the
        // last reference deregisters, which takes the lock.
    }
    let mut uses: Vec<Arc<UmemInner>> = Vec::with_capacity(found.len());
    for u in found {
        if !uses.iter().any(|k| Arc::ptr_eq(k, &u)) {
            uses.push(u);
        }
    }
    uses.into_iter()
        .map(|u| u as Arc<dyn Any + Send + Sync>)
        .collect()
}

impl Devx {
    /// Allocates `len` bytes (rounded up to pages, zeroed, page-aligned)
    /// and registers them, like `mlx5dv_devx_umem_reg` on memory the UMEM
    /// owns: it is freed only after the deregistration.
    #[doc(alias = "mlx5dv_devx_umem_reg")]
    pub fn umem_reg(&self, len: usize, access: UmemAccess) -> Result<DevxUmem> {
        let memory = DmaBuf::new(len, "allocate DevX UMEM memory")?;
        let (addr, len) = (memory.addr(), memory.len());
        self.register(Source::Addr(addr), len, access, None, Some(memory))
    }

    /// Registers `len` bytes at `addr`, like `mlx5dv_devx_umem_reg_ex`, with
    /// an optional bitmap of page sizes the objects using it may take
    /// ([`Devx::umem_reg_ex`] without a dma-buf).
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be memory of this process that stays mapped
    /// and is not used for anything the device must not write, until the
    /// returned UMEM (every clone) and every object created with it are
    /// dropped: the device may write it through the objects that use the
    /// UMEM for as long as it is registered.
    #[doc(alias = "mlx5dv_devx_umem_reg_ex")]
    pub unsafe fn umem_reg_raw(
        &self,
        addr: *mut u8,
        len: usize,
        access: UmemAccess,
        page_sizes: Option<u64>,
    ) -> Result<DevxUmem> {
        let mut input = UmemIn::new(addr, len, access);
        input.page_sizes = page_sizes;
        // SAFETY: the caller's contract is this function's.
        unsafe { self.umem_reg_ex(&input) }
    }

    /// Registers `len` bytes at `offset` of a dma-buf (`fd`), on kernels
    /// that take one. The dma-buf's exporter keeps the memory.
    pub fn umem_reg_dmabuf(
        &self,
        fd: BorrowedFd<'_>,
        offset: u64,
        len: usize,
        access: UmemAccess,
    ) -> Result<DevxUmem> {
        self.register(Source::DmaBuf(fd, offset), len, access, None, None)
    }

    /// Registers what `input` describes, as `mlx5dv_devx_umem_reg_ex` takes
    /// a `struct mlx5dv_devx_umem_in`: memory of this process at
    /// [`UmemIn::addr`], or with [`UmemIn::dmabuf`] the range of that
    /// dma-buf starting at offset `addr` (the kernel's `UMEM_REG` takes the
    /// address attribute as the offset then); with [`UmemIn::page_sizes`],
    /// the bitmap of page sizes the objects using it may map it with (the
    /// kernel refuses the registration when none fits, `EINVAL`).
    ///
    /// # Safety
    ///
    /// Without a dma-buf, as [`Devx::umem_reg_raw`]: the memory stays
    /// mapped and is used for nothing the device must not write until the
    /// UMEM and the objects using it are gone. With one, nothing: the
    /// exporter keeps the memory.
    #[doc(alias = "mlx5dv_devx_umem_reg_ex")]
    pub unsafe fn umem_reg_ex(&self, input: &UmemIn<'_>) -> Result<DevxUmem> {
        let source = match input.dmabuf {
            Some(fd) => Source::DmaBuf(fd, input.addr as u64),
            None => Source::Addr(input.addr as u64),
        };
        self.register(source, input.len, input.access, input.page_sizes, None)
    }

    fn register(
        &self,
        source: Source<'_>,
        len: usize,
        access: UmemAccess,
        page_sizes: Option<u64>,
        memory: Option<DmaBuf>,
    ) -> Result<DevxUmem> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_UMEM_REG";
        if len == 0 {
            return Err(invalid(OP, "a UMEM of 0 bytes"));
        }
        let dev = self.device();
        // The program's memory: protected from fork while registered (the
        // library's own is, as a `DmaBuf`).
        let fork = match (source, &memory) {
            (Source::Addr(a), None) => crate::fork::protect(a as usize, len)
                .map_err(|e| Error::sys(OP, e).with_detail("madvise(MADV_DONTFORK) (fork_init)"))?,
            _ => None,
        };
        let mut id = 0u32;
        let (handle, addr) = {
            let mut cmd = dev.ioctl_cmd(
                abi::MLX5_IB_OBJECT_DEVX_UMEM,
                abi::MLX5_IB_METHOD_DEVX_UMEM_REG,
            );
            let at = cmd.new_object(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE);
            let addr = match source {
                Source::Addr(a) => a,
                Source::DmaBuf(_, offset) => offset,
            };
            cmd.input_u64(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR, addr);
            cmd.input_u64(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_LEN, len as u64);
            cmd.flags_in(
                abi::MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS,
                u64::from(access.bits()),
            );
            if let Some(p) = page_sizes {
                cmd.const_in(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP, p);
            }
            if let Source::DmaBuf(fd, _) = source {
                // A raw fd number (`UVERBS_ATTR_RAW_FD`: length 0).
                cmd.raw_fd(abi::MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD, fd.as_raw_fd());
            }
            cmd.output(
                abi::MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID,
                zerocopy::IntoBytes::as_mut_bytes(&mut id),
            );
            dev.ioctl(&mut cmd).map_err(|e| match e {
                Errno::EINVAL => Error::sys(OP, e).with_detail(
                    "the kernel refused the registration: the context has no DevX uid, or \
                     the access flags are other than LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, \
                     or REMOTE_WRITE comes without LOCAL_WRITE",
                ),
                Errno::EPROTONOSUPPORT | Errno::EOPNOTSUPP
                    if matches!(source, Source::DmaBuf(..)) =>
                {
                    Error::sys(OP, e).with_detail("this kernel registers no dma-buf UMEMs")
                }
                Errno::EBADF if matches!(source, Source::DmaBuf(..)) => {
                    Error::sys(OP, e).with_detail("the dma-buf fd is not open")
                }
                e => Error::sys(OP, e),
            })?;
            (cmd.new_handle(at), addr)
        };
        let inner = Arc::new(UmemInner {
            devx: self.clone(),
            handle,
            id,
            addr,
            len,
            memory,
            registered: Mutex::new(true),
            fork,
        });
        live().insert((context_key(self), id), Arc::downgrade(&inner));
        Ok(DevxUmem { inner })
    }
}

#[derive(Debug, Clone, Copy)]
enum Source<'a> {
    Addr(u64),
    DmaBuf(BorrowedFd<'a>, u64),
}

impl DevxUmem {
    /// The UMEM id PRM objects name it by (`umem_id`).
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// The kernel's handle of the registration.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The registered length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the registration is empty (never: 0 bytes is refused).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The start address (for a dma-buf UMEM, the offset in it).
    pub fn addr(&self) -> u64 {
        self.inner.addr
    }

    /// A pointer to the memory this library allocated ([`Devx::umem_reg`]),
    /// `None` for the caller's or a dma-buf's. The device writes it
    /// concurrently: access it only with volatile or atomic operations,
    /// never through references.
    pub fn as_ptr(&self) -> Option<*mut u8> {
        self.inner.memory.as_ref().map(DmaBuf::as_ptr)
    }
}

impl DevxUmem {
    /// Deregisters the UMEM now, like `mlx5dv_devx_umem_dereg`: the
    /// kernel's `UMEM_DEREG` (the firmware's `DESTROY_UMEM`) decides, even
    /// while clones or objects still hold this UMEM (they then hold a shell
    /// that deregisters nothing when dropped; memory this library allocated
    /// is freed when the last of them goes). When the kernel refuses (the
    /// firmware still uses it for an object), the UMEM comes back in the
    /// error, registered and usable, to deregister again once that object
    /// is destroyed.
    #[doc(alias = "mlx5dv_devx_umem_dereg")]
    pub fn dereg(self) -> Result<(), DestroyError<Self>> {
        match self.inner.deregister() {
            Ok(()) => Ok(()),
            Err(e) => Err(DestroyError::new(self, e)),
        }
    }
}

impl UmemInner {
    /// `UMEM_DEREG` unless done already; the registry forgets the UMEM
    /// once the kernel has.
    fn deregister(&self) -> Result<()> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_UMEM_DEREG";
        let mut registered = self
            .registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !*registered {
            return Ok(());
        }
        let dev = self.devx.device();
        let mut cmd = dev.ioctl_cmd(
            abi::MLX5_IB_OBJECT_DEVX_UMEM,
            abi::MLX5_IB_METHOD_DEVX_UMEM_DEREG,
        );
        cmd.object(abi::MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE, self.handle);
        match dev.ioctl(&mut cmd) {
            // EIO: the device is gone, and the kernel released everything.
            Ok(()) | Err(Errno::EIO) => {
                *registered = false;
                drop(registered);
                self.unlist();
                Ok(())
            }
            Err(e) => Err(Error::sys(OP, e).with_detail(
                "the firmware refused to destroy the UMEM: an object still uses it; destroy \
                 that object first",
            )),
        }
    }

    /// Removes this UMEM from [`LIVE`].
    fn unlist(&self) {
        let mut live = live();
        let key = (context_key(&self.devx), self.id);
        if live
            .get(&key)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), self))
        {
            live.remove(&key);
        }
    }
}

impl sealed::Sealed for DevxUmem {}

impl DevxResource for DevxUmem {
    fn keep_alive(&self) -> Arc<dyn Any + Send + Sync> {
        self.inner.clone()
    }
}

impl Drop for UmemInner {
    fn drop(&mut self) {
        if self.deregister().is_err() {
            // Still registered: firmware refused DESTROY_UMEM (an object
            // made outside this library names the UMEM), and the kernel
            // keeps the pages pinned (`devx_umem_cleanup`). The device may
            // still write the memory, so it is leaked rather than given
            // back; the kernel releases the registration when the context
            // is closed.
            self.unlist();
            if let Some(m) = self.memory.take() {
                std::mem::forget(m);
            }
            if let Some(f) = self.fork.take() {
                std::mem::forget(f);
            }
        }
    }
}
