//! TEMP(wt-qp): the `crate::pd::Pd` of the cross-module contract, as far as
//! QPs, SRQs and AHs need it (plus `ibv_alloc_pd`/`ibv_dealloc_pd` so the
//! guest runs can use it); the merge takes wt-obj's module instead.

#![allow(unsafe_code)]

use std::sync::{Mutex, PoisonError};

use uverbs::{sys::Errno, ProtectionDomain};

use core::ffi::{c_int, c_void};

use uverbs::{AccessFlags, MemoryRegion};

use crate::{
    ctx::Context,
    errno,
    layout::context::ibv_context,
    layout::pd::{ibv_mr, ibv_pd},
};

/// A protection domain: what `ibv_alloc_pd` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Pd {
    /// The C part.
    pub c: ibv_pd,
    pd: Mutex<Option<ProtectionDomain>>,
}

// SAFETY: the C part's pointer names the context, which lives until the
// program closes it; the Rust state is behind a mutex.
unsafe impl Send for Pd {}
// SAFETY: as for Send.
unsafe impl Sync for Pd {}

impl Pd {
    /// The PD behind a program's pointer.
    ///
    /// # Safety
    /// `p` is NULL or a live PD of this library.
    pub(crate) unsafe fn from_c<'a>(p: *mut ibv_pd) -> Result<&'a Pd, Errno> {
        // SAFETY: the caller's contract; `c` is the first field.
        unsafe { p.cast::<Pd>().as_ref() }.ok_or(Errno::EINVAL)
    }

    /// Runs `f` on the uverbs PD.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&ProtectionDomain) -> R) -> Result<R, Errno> {
        let g = self.pd.lock().unwrap_or_else(PoisonError::into_inner);
        g.as_ref().map(f).ok_or(Errno::EINVAL)
    }

    /// The context the PD was allocated on.
    pub(crate) fn context(&self) -> &Context {
        // SAFETY: `c.context` is the live context the PD was made on.
        match unsafe { Context::from_c(self.c.context) } {
            Ok(c) => c,
            Err(_) => unreachable!("a PD always has its context"),
        }
    }
}

/// `ibv_alloc_pd`.
///
/// # Safety
/// `context` is NULL or a live context of this library.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::null(e),
    };
    match ctx.uv.alloc_pd() {
        Ok(pd) => {
            let handle = pd.handle();
            let b = Box::new(Pd {
                c: ibv_pd { context, handle },
                pd: Mutex::new(Some(pd)),
            });
            Box::into_raw(b).cast()
        }
        Err(e) => errno::null(errno::of(&e)),
    }
}

/// `ibv_dealloc_pd`.
///
/// # Safety
/// `pd` is NULL or a live PD of this library, not used after success.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> i32 {
    // SAFETY: the caller's contract.
    let p = match unsafe { Pd::from_c(pd) } {
        Ok(p) => p,
        Err(e) => return errno::positive(e),
    };
    let taken = p.pd.lock().unwrap_or_else(PoisonError::into_inner).take();
    let Some(uv) = taken else {
        return errno::positive(Errno::EINVAL);
    };
    if let Err(e) = uv.destroy() {
        return errno::positive(errno::of(&e));
    }
    // SAFETY: made by Box::into_raw in ibv_alloc_pd; the program gives it up.
    drop(unsafe { Box::from_raw(pd.cast::<Pd>()) });
    0
}

/// A memory region (TEMP).
#[repr(C)]
#[derive(Debug)]
struct Mr {
    c: ibv_mr,
    mr: Option<MemoryRegion>,
}

/// `ibv_reg_mr` (TEMP).
///
/// # Safety
/// `pd` live; `addr`..`addr + length` the program's memory.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's contract.
    let p = match unsafe { Pd::from_c(pd) } {
        Ok(p) => p,
        Err(e) => return errno::null(e),
    };
    let flags = AccessFlags::from_bits_retain(access as u32);
    // SAFETY: the program registers its own memory, as with libibverbs.
    let r = p.with(|uv| unsafe { uv.register_raw(addr.cast(), length, flags) });
    match r {
        Ok(Ok(mr)) => {
            let b = Box::new(Mr {
                c: ibv_mr {
                    context: p.c.context,
                    pd,
                    addr,
                    length,
                    handle: mr.handle(),
                    lkey: mr.lkey(),
                    rkey: mr.rkey(),
                },
                mr: Some(mr),
            });
            Box::into_raw(b).cast()
        }
        Ok(Err(e)) => errno::null(errno::of(&e)),
        Err(e) => errno::null(e),
    }
}

/// `ibv_dereg_mr` (TEMP).
///
/// # Safety
/// `mr` live, unused after.
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    if mr.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    // SAFETY: made by Box::into_raw in ibv_reg_mr.
    let mut b = unsafe { Box::from_raw(mr.cast::<Mr>()) };
    match b.mr.take().map(MemoryRegion::destroy) {
        Some(Err(e)) => errno::positive(errno::of(&e)),
        _ => 0,
    }
}
