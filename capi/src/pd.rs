//! Protection domains and memory regions: `ibv_alloc_pd`, `ibv_dealloc_pd`,
//! `ibv_reg_mr` (and its `_iova`/`_iova2` forms), `ibv_reg_dmabuf_mr`,
//! `ibv_rereg_mr`, `ibv_dereg_mr`, and their imports from another context
//! (`ibv_import_pd`, `ibv_unimport_pd`, `ibv_import_mr`, `ibv_unimport_mr`).
//!
//! A [`Pd`] holds its uverbs [`ProtectionDomain`] behind a `RwLock`: the
//! objects made from it (MRs here, QPs, SRQs and AHs in their modules) take
//! it shared through [`Pd::with`], the deallocation exclusively.
//!
//! A parent domain (`ibv_alloc_parent_domain`, `parent_domain.rs`) is a
//! [`Pd`] too, holding uverbs' parent domain: every verb that takes a PD
//! takes it.
//!
//! # When a destroy is refused
//!
//! uverbs' `ProtectionDomain::destroy` and `MemoryRegion::destroy` give
//! the object back on any failure (`EBUSY` while QPs, SRQs, MRs, AHs, MWs,
//! CQs of a parent domain or parent domains over a PD use it; the kernel's
//! refusal, such as rxe's `EINVAL` for a region under a bound memory
//! window): `ibv_dealloc_pd` and `ibv_dereg_mr` put it back in the C
//! object and return the errno, as libibverbs does. The C object is then
//! as it was: objects can still be made from the PD, the region is still
//! registered, and a later call tries again.

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::ffi::{c_int, c_uint, c_void};
use std::{
    os::fd::BorrowedFd,
    sync::{Mutex, PoisonError, RwLock},
};

use uverbs::{abi::IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS, sys::Errno};
use uverbs::{AccessFlags, MemoryRegion, ProtectionDomain};

use crate::{
    context::Context,
    errno,
    layout::{
        context::ibv_context,
        pd::{ibv_mr, ibv_pd},
    },
};

/// `IBV_ACCESS_OPTIONAL_RANGE`: bits 20..=29, which a kernel that does
/// not report `IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS` never sees.
const ACCESS_OPTIONAL_RANGE: u32 = ((1 << 29) << 1) - (1 << 20);
/// Every access bit some kernel knows: LOCAL_WRITE ... HUGETLB,
/// FLUSH_GLOBAL and FLUSH_PERSISTENT (6.2+; older kernels answer `EINVAL`
/// themselves), and the optional range.
const ACCESS_KNOWN: u32 = 0x3ff | ACCESS_OPTIONAL_RANGE;

/// `IBV_REREG_MR_CHANGE_TRANSLATION`.
const REREG_CHANGE_TRANSLATION: c_int = 1;
/// `IBV_REREG_MR_CHANGE_ACCESS`.
const REREG_CHANGE_ACCESS: c_int = 1 << 2;
/// `IBV_REREG_MR_FLAGS_SUPPORTED`.
const REREG_FLAGS_SUPPORTED: c_int = (REREG_CHANGE_ACCESS << 1) - 1;
/// `IBV_REREG_MR_ERR_INPUT`.
const REREG_ERR_INPUT: c_int = -1;
/// `IBV_REREG_MR_ERR_CMD`.
const REREG_ERR_CMD: c_int = -4;

/// A protection domain: what `ibv_alloc_pd` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Pd {
    /// The C part (`ibv_pd *` is this object's address).
    pub c: ibv_pd,
    ctx: *const Context,
    pd: RwLock<Option<ProtectionDomain>>,
}

// SAFETY: the C part is written once before the object is handed out; its
// pointers name this library's context. The Rust state is Send + Sync.
unsafe impl Send for Pd {}
// SAFETY: as for Send.
unsafe impl Sync for Pd {}

crate::handle!(Pd: ibv_pd = c);

impl Pd {
    /// Runs `f` with the uverbs PD (to make an object from it); `EINVAL`
    /// when it is gone (see the module documentation).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&ProtectionDomain) -> R) -> Result<R, Errno> {
        let pd = self.pd.read().unwrap_or_else(PoisonError::into_inner);
        pd.as_ref().map(f).ok_or(Errno::EINVAL)
    }

    /// Boxes `uv` (a PD or a parent domain of `ctx`) as the C object and
    /// returns the program's pointer.
    pub(crate) fn into_c(ctx: &Context, uv: ProtectionDomain) -> *mut ibv_pd {
        let pd = Box::new(Pd {
            c: ibv_pd {
                context: ctx.as_c(),
                handle: uv.handle(),
            },
            ctx,
            pd: RwLock::new(Some(uv)),
        });
        pd.into_c()
    }

    /// The context the PD belongs to.
    pub(crate) fn context(&self) -> &Context {
        // SAFETY: set from a live context at allocation; verbs.h's contract
        // keeps the context open while its PDs exist.
        unsafe { &*self.ctx }
    }
}

/// A memory region: what `ibv_reg_mr` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Mr {
    /// The C part (`ibv_mr *` is this object's address).
    pub c: ibv_mr,
    mr: Mutex<Option<MemoryRegion>>,
    /// Registered from a dma-buf (libibverbs' `IBV_MR_TYPE_DMABUF_MR`,
    /// which `ibv_rereg_mr` refuses).
    dmabuf: bool,
}

// SAFETY: as for `Pd`.
unsafe impl Send for Mr {}
// SAFETY: as for `Pd`.
unsafe impl Sync for Mr {}

crate::handle!(Mr: ibv_mr = c);

/// Allocates a protection domain; NULL and `errno` on failure.
///
/// # Safety
/// `context` is NULL or an open context of this library.
#[export_name = "uverbs_ibv_alloc_pd"]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::null(e),
    };
    match ctx.uv.alloc_pd() {
        Ok(uv) => Pd::into_c(ctx, uv),
        Err(e) => errno::null(errno::of(&e)),
    }
}

/// Deallocates a protection domain: 0, or the positive errno (`EBUSY`
/// while objects use it), the PD then as it was (see the module
/// documentation).
///
/// # Safety
/// `pd` is NULL or a PD of this library not yet deallocated.
#[export_name = "uverbs_ibv_dealloc_pd"]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: the caller's contract.
    let p = match unsafe { Pd::from_c(pd) } {
        Ok(p) => p,
        Err(e) => return errno::positive(e),
    };
    {
        // Exclusive: no object is being made from the PD meanwhile.
        let mut guard = p.pd.write().unwrap_or_else(PoisonError::into_inner);
        let Some(uv) = guard.take() else {
            return errno::positive(Errno::EINVAL);
        };
        // A refused deallocation gives the PD back, as it was.
        if let Err(e) = uv.destroy() {
            let (uv, e) = e.into_parts();
            *guard = Some(uv);
            return errno::positive(errno::of(&e));
        }
    }
    // SAFETY: `pd` came from `into_c` in `ibv_alloc_pd` and the
    // program gives it up with this call.
    unsafe { Pd::free(pd) };
    0
}

/// Checks `access` as libibverbs and the kernel do and turns it into
/// uverbs' flags: the optional bits are dropped when the kernel does not
/// take them (`ibv_reg_mr_iova2`), bits no kernel knows are `EINVAL`.
fn access_flags(ctx: &Context, access: u32) -> Result<AccessFlags, Errno> {
    let optional =
        ctx.uv.core_support() & u64::from(IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS) != 0;
    mr_access(access, optional)
}

/// `access` (`enum ibv_access_flags`) as uverbs' flags, the optional bits
/// dropped unless the kernel takes them (`optional`); `EINVAL` for bits no
/// kernel knows.
pub(crate) fn mr_access(access: u32, optional: bool) -> Result<AccessFlags, Errno> {
    let mut access = access;
    if !optional {
        access &= !ACCESS_OPTIONAL_RANGE;
    }
    if access & !ACCESS_KNOWN != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(AccessFlags::from_bits_retain(access))
}

/// Boxes the region registered in `p` (the program's `pd`) and returns the
/// program's pointer.
fn new_mr(
    p: &Pd,
    pd: *mut ibv_pd,
    mr: MemoryRegion,
    addr: *mut c_void,
    length: usize,
    dmabuf: bool,
) -> *mut ibv_mr {
    let boxed = Box::new(Mr {
        c: ibv_mr {
            context: p.c.context,
            pd,
            addr,
            length,
            handle: mr.handle(),
            lkey: mr.lkey(),
            rkey: mr.rkey(),
        },
        mr: Mutex::new(Some(mr)),
        dmabuf,
    });
    boxed.into_c()
}

/// `ibv_reg_mr_iova2`'s body: `addr..addr + length` registered with the
/// I/O virtual address `iova` (`mr->addr` stays the program's `addr`, as
/// libibverbs sets it; work requests use `iova`).
///
/// # Safety
/// As `ibv_reg_mr_iova2`.
unsafe fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> Result<*mut ibv_mr, Errno> {
    // SAFETY: the caller's contract.
    let p = unsafe { Pd::from_c(pd) }?;
    let flags = access_flags(p.context(), access)?;
    p.with(|uv| {
        // SAFETY: verbs.h's contract for ibv_reg_mr: the program keeps
        // `addr..addr + length` mapped while it is registered and reaches it
        // only through raw pointers of its own (C has no references).
        let mr = unsafe { uv.register_raw_iova(addr.cast(), length, iova, flags) };
        mr.map(|mr| new_mr(p, pd, mr, addr, length, false))
            .map_err(|e| errno::of(&e))
    })?
}

/// Registers `length` bytes at `addr`; NULL and `errno` on failure.
///
/// # Safety
/// `pd` is NULL or a live PD of this library; the memory stays mapped
/// while registered.
#[export_name = "uverbs_ibv_reg_mr"]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's contract.
    unsafe { reg_mr(pd, addr, length, addr as u64, access as u32) }.unwrap_or_else(errno::null)
}

/// Registers memory with I/O virtual address `iova` (`IBVERBS_1.7`).
///
/// # Safety
/// As [`ibv_reg_mr`].
#[export_name = "uverbs_ibv_reg_mr_iova"]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's contract.
    unsafe { reg_mr(pd, addr, length, iova, access as u32) }.unwrap_or_else(errno::null)
}

/// Registers memory with I/O virtual address `iova` (`IBVERBS_1.8`;
/// verbs.h's `ibv_reg_mr` macro calls it when `access` has optional bits).
///
/// # Safety
/// As [`ibv_reg_mr`].
#[export_name = "uverbs_ibv_reg_mr_iova2"]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    // SAFETY: the caller's contract.
    unsafe { reg_mr(pd, addr, length, iova, access) }.unwrap_or_else(errno::null)
}

/// Registers `length` bytes at `offset` of the dma-buf `fd`, at I/O
/// virtual address `iova` (`IBVERBS_1.12`); NULL and `errno` on failure
/// (`EOPNOTSUPP` from rxe's kernel driver, as with rdma-core).
///
/// # Safety
/// `pd` is NULL or a live PD of this library.
#[export_name = "uverbs_ibv_reg_dmabuf_mr"]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's contract.
    let p = match unsafe { Pd::from_c(pd) } {
        Ok(p) => p,
        Err(e) => return errno::null(e),
    };
    if access as u32 & !ACCESS_KNOWN != 0 {
        return errno::null(Errno::EINVAL);
    }
    if fd < 0 {
        return errno::null(Errno::EBADF);
    }
    // SAFETY: `fd` is not -1; the kernel checks that it names a dma-buf
    // (EBADF otherwise), and the borrow ends with this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let flags = AccessFlags::from_bits_retain(access as u32);
    let made = p.with(|uv| {
        uv.register_dmabuf(fd, offset, length, iova, flags)
            .map(|mr| new_mr(p, pd, mr, offset as usize as *mut c_void, length, true))
            .map_err(|e| errno::of(&e))
    });
    match made {
        Ok(Ok(mr)) => mr,
        Ok(Err(e)) | Err(e) => errno::null(e),
    }
}

/// Deregisters a memory region: 0, or the positive errno with the region
/// as it was, still registered (rxe's `EINVAL` while a memory window is
/// bound to it): a later call tries again.
///
/// # Safety
/// `mr` is NULL or a live MR of this library.
#[export_name = "uverbs_ibv_dereg_mr"]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    // SAFETY: the caller's contract.
    let m = match unsafe { Mr::from_c(mr) } {
        Ok(m) => m,
        Err(e) => return errno::positive(e),
    };
    {
        let mut guard = m.mr.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(uv) = guard.take() else {
            return errno::positive(Errno::EINVAL);
        };
        if let Err(e) = uv.destroy() {
            let (uv, e) = e.into_parts();
            *guard = Some(uv);
            return errno::positive(errno::of(&e));
        }
    }
    // SAFETY: `mr` came from `into_c` in `new_mr` and the program
    // gives it up with this call.
    unsafe { Mr::free(mr) };
    0
}

/// `ibv_import_pd`: the PD another context of the same kernel context
/// allocated, by its handle (`uverbs::Context::import_pd`); NULL and
/// `errno` on failure (`EOPNOTSUPP` on rxe, as rdma-core's rxe; the
/// kernel's `ENOENT` for a handle that names nothing, `EINVAL` for one of
/// another object; `EINVAL` for a NULL context).
///
/// # Safety
/// `context` is NULL or an open context of this library.
#[export_name = "uverbs_ibv_import_pd"]
pub unsafe extern "C" fn ibv_import_pd(context: *mut ibv_context, pd_handle: u32) -> *mut ibv_pd {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::null(e),
    };
    let uv = match ctx.uv.import_pd(pd_handle) {
        Ok(pd) => pd,
        Err(e) => return errno::null(errno::of(&e)),
    };
    Pd::into_c(ctx, uv)
}

/// `ibv_unimport_pd`: frees the PD object and lets go of the kernel PD,
/// which stays its owner's (`uverbs::ProtectionDomain::unimport`); objects
/// made from it keep it until they are gone. A PD this library allocated
/// (not imported) is deallocated. NULL: nothing.
///
/// # Safety
/// `pd` is NULL or a PD of this library not yet freed; the program uses it
/// no more.
#[export_name = "uverbs_ibv_unimport_pd"]
pub unsafe extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
    // SAFETY: the caller's contract.
    let Ok(p) = (unsafe { Pd::from_c(pd) }) else {
        return;
    };
    let uv = p.pd.write().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(uv) = uv {
        // Not imported: given back, and dropped (deallocated).
        drop(uv.unimport());
    }
    // SAFETY: `pd` came from `into_c` here or in `ibv_alloc_pd` and
    // the program gives it up with this call.
    unsafe { Pd::free(pd) };
}

/// `ibv_import_mr`: the memory region another context registered, by its
/// handle (`uverbs::ProtectionDomain::import_mr`: `QUERY_MR`'s keys and
/// length); `mr->addr` is NULL, as libibverbs leaves it (the memory is
/// the owner's). NULL and `errno` on failure (`EOPNOTSUPP` on rxe; the
/// kernel's `ENOENT` for a handle that names nothing, `EINVAL` for one of
/// another object; `EINVAL` for a NULL PD).
///
/// # Safety
/// `pd` is NULL or a live PD of this library.
#[export_name = "uverbs_ibv_import_mr"]
pub unsafe extern "C" fn ibv_import_mr(pd: *mut ibv_pd, mr_handle: u32) -> *mut ibv_mr {
    // SAFETY: the caller's contract.
    let p = match unsafe { Pd::from_c(pd) } {
        Ok(p) => p,
        Err(e) => return errno::null(e),
    };
    let made = p.with(|uv| {
        uv.import_mr(mr_handle)
            .map(|mr| {
                let len = mr.len();
                new_mr(p, pd, mr, core::ptr::null_mut(), len, false)
            })
            .map_err(|e| errno::of(&e))
    });
    match made {
        Ok(Ok(mr)) => mr,
        Ok(Err(e)) | Err(e) => errno::null(e),
    }
}

/// `ibv_unimport_mr`: frees the MR object and lets go of the region,
/// which stays registered for its owner
/// (`uverbs::MemoryRegion::unimport`). A region this library registered
/// (not imported) is deregistered. NULL: nothing.
///
/// # Safety
/// `mr` is NULL or an MR of this library not yet freed; the program uses
/// it no more.
#[export_name = "uverbs_ibv_unimport_mr"]
pub unsafe extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
    // SAFETY: the caller's contract.
    let Ok(m) = (unsafe { Mr::from_c(mr) }) else {
        return;
    };
    let uv = m.mr.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(uv) = uv {
        // Not imported: given back, and dropped (deregistered).
        drop(uv.unimport());
    }
    // SAFETY: `mr` came from `into_c` in `new_mr` and the program
    // gives it up with this call.
    unsafe { Mr::free(mr) };
}

/// Re-registers a memory region. uverbs cannot (the kernel's REREG_MR is
/// not in its API): after libibverbs' own argument checks
/// (`IBV_REREG_MR_ERR_INPUT` with `EINVAL`) it answers as libibverbs does
/// for a provider without rereg, rxe's case: `IBV_REREG_MR_ERR_CMD` with
/// `errno` `EOPNOTSUPP`. The region is unchanged.
///
/// # Safety
/// `mr` is NULL or a live MR of this library.
#[export_name = "uverbs_ibv_rereg_mr"]
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    _pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let input = |e| {
        errno::set(e);
        REREG_ERR_INPUT
    };
    // SAFETY: the caller's contract.
    let m = match unsafe { Mr::from_c(mr) } {
        Ok(m) => m,
        Err(e) => return input(e),
    };
    if m.dmabuf || flags & !REREG_FLAGS_SUPPORTED != 0 {
        return input(Errno::EINVAL);
    }
    if flags & REREG_CHANGE_TRANSLATION != 0 && (length == 0 || addr.is_null()) {
        return input(Errno::EINVAL);
    }
    if access != 0 && flags & REREG_CHANGE_ACCESS == 0 {
        return input(Errno::EINVAL);
    }
    errno::set(Errno::EOPNOTSUPP);
    REREG_ERR_CMD
}

#[cfg(test)]
mod tests;
