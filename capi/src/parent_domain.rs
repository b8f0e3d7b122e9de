//! Parent and thread domains: the `alloc_parent_domain`, `alloc_td` and
//! `dealloc_td` ops behind verbs.h's inline `ibv_alloc_parent_domain`,
//! `ibv_alloc_td` and `ibv_dealloc_td`.
//!
//! A parent domain is a [`Pd`] whose uverbs PD is a parent domain
//! (`uverbs::ProtectionDomain::alloc_parent_domain`): QPs, SRQs, MRs, AHs
//! and MWs take it as any PD, and report it as their `pd` (as libibverbs
//! does); `ibv_create_cq_ex` takes it as its `parent_domain`;
//! `ibv_dealloc_pd` deallocates it (`EBUSY` while objects made in it
//! exist). Its `alloc` and `free` callbacks become a
//! [`uverbs::QueueAllocator`] ([`CallbackAllocator`]) when both are set, as
//! libmlx5 uses them only then (`mlx5_is_custom_alloc`); the callbacks get
//! the parent domain's `ibv_pd` pointer and `pd_context`, and the resource
//! types the provider numbers (mlx5dv.h's `MLX5DV_RES_TYPE_*`).
//!
//! uverbs decides whether the device has them: on rxe both ops fail with
//! `EOPNOTSUPP`, what libibverbs answers for rdma-core's rxe (whose ops are
//! unset).

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{
    ffi::{c_int, c_void},
    ptr::NonNull,
    sync::atomic::{AtomicPtr, Ordering},
};
use std::sync::{Arc, Mutex, PoisonError};

use uverbs::{
    sys::Errno, ParentDomainAttr, QueueAllocRequest, QueueAllocator, QueueMemory, ThreadDomain,
};

use crate::{
    context::Context,
    errno,
    layout::{
        context::ibv_context,
        pd::{ibv_parent_domain_init_attr, ibv_pd, ibv_td, ibv_td_init_attr, AllocFn, FreeFn},
        AnyFn,
    },
    pd::Pd,
};

/// `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS`.
const INIT_ATTR_ALLOCATORS: u32 = 1 << 0;
/// `IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT`.
const INIT_ATTR_PD_CONTEXT: u32 = 1 << 1;
/// `IBV_ALLOCATOR_USE_DEFAULT`: `(void *)-1`.
const ALLOCATOR_USE_DEFAULT: usize = usize::MAX;

/// A thread domain: what `ibv_alloc_td` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Td {
    /// The C part (`ibv_td *` is this object's address).
    pub c: ibv_td,
    td: Mutex<Option<ThreadDomain>>,
}

// SAFETY: the C part is written once before the object is handed out; its
// pointer names this library's context. The Rust state is Send + Sync.
unsafe impl Send for Td {}
// SAFETY: as for Send.
unsafe impl Sync for Td {}

crate::handle!(Td: ibv_td = c);

/// A parent domain's C callbacks as uverbs' allocator.
#[derive(Debug)]
pub(crate) struct CallbackAllocator {
    alloc: AllocFn,
    free: FreeFn,
    pd_context: *mut c_void,
    /// The parent domain's `ibv_pd` (set once it is boxed, before any
    /// object can be made in it).
    pd: AtomicPtr<ibv_pd>,
}

// SAFETY: the callbacks and `pd_context` are the program's, which verbs.h
// lets libraries call from any thread that creates or destroys objects
// (libmlx5 does); `pd` is an atomic.
unsafe impl Send for CallbackAllocator {}
// SAFETY: as for Send.
unsafe impl Sync for CallbackAllocator {}

// SAFETY: the memory is the program's answer to `alloc`, which verbs.h's
// contract for `ibv_parent_domain_init_attr` makes `size` bytes at
// `alignment` for the library's use until `free` (the provider checks the
// alignment once more).
unsafe impl QueueAllocator for CallbackAllocator {
    fn alloc(&self, req: &QueueAllocRequest) -> Result<QueueMemory, Errno> {
        Errno::set_raw(0);
        // SAFETY: the program's callback, called as libmlx5 calls it.
        let p = unsafe {
            (self.alloc)(
                self.pd.load(Ordering::Acquire),
                self.pd_context,
                req.size,
                req.alignment,
                req.resource_type,
            )
        };
        if p as usize == ALLOCATOR_USE_DEFAULT {
            return Ok(QueueMemory::UseDefault);
        }
        match NonNull::new(p.cast::<u8>()) {
            Some(p) => Ok(QueueMemory::Memory(p)),
            // The errno the callback left, as libmlx5 leaves it.
            None => match Errno::last_raw() {
                0 => Err(Errno::ENOMEM),
                e => Err(Errno::from_raw(e)),
            },
        }
    }

    unsafe fn free(&self, ptr: NonNull<u8>, req: &QueueAllocRequest) {
        // SAFETY: the program's callback, with memory its `alloc` answered
        // (the caller's contract).
        unsafe {
            (self.free)(
                self.pd.load(Ordering::Acquire),
                self.pd_context,
                ptr.as_ptr().cast(),
                req.resource_type,
            )
        }
    }
}

/// `verbs_context.alloc_td`: NULL and `errno` on failure (`EINVAL` for a
/// `comp_mask`, as libmlx5; `EOPNOTSUPP` on rxe).
///
/// # Safety
/// `context` is NULL or an open context of this library; `init_attr` is
/// NULL or readable.
unsafe extern "C" fn alloc_td(
    context: *mut ibv_context,
    init_attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::null(e),
    };
    // SAFETY: the caller's contract.
    match unsafe { init_attr.as_ref() } {
        Some(a) if a.comp_mask == 0 => {}
        _ => return errno::null(Errno::EINVAL),
    }
    match ctx.uv.alloc_td() {
        Ok(td) => Box::new(Td {
            c: ibv_td { context },
            td: Mutex::new(Some(td)),
        })
        .into_c(),
        Err(e) => errno::null(errno::of(&e)),
    }
}

/// `verbs_context.dealloc_td`: 0, or the positive errno (`EBUSY` while
/// parent domains use it; the thread domain is then as it was).
///
/// # Safety
/// `td` is NULL or a live thread domain of this library.
unsafe extern "C" fn dealloc_td(td: *mut ibv_td) -> c_int {
    // SAFETY: the caller's contract.
    let t = match unsafe { Td::from_c(td) } {
        Ok(t) => t,
        Err(e) => return errno::positive(e),
    };
    {
        let mut guard = t.td.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(uv) = guard.take() else {
            return errno::positive(Errno::EINVAL);
        };
        if let Err(e) = uv.destroy() {
            let (uv, e) = e.into_parts();
            *guard = Some(uv);
            return errno::positive(errno::of(&e));
        }
    }
    // SAFETY: made by `into_c` in `alloc_td`; the program gives it up
    // with this call.
    unsafe { Td::free(td) };
    0
}

/// `verbs_context.alloc_parent_domain`: a parent domain over `attr->pd`
/// (`EINVAL` for a NULL PD, a PD or thread domain of another context, or
/// unknown `comp_mask` bits, as libmlx5; `EOPNOTSUPP` on rxe).
///
/// # Safety
/// `context` is NULL or an open context of this library; `attr` is NULL or
/// readable, naming NULL or live objects of this library.
unsafe extern "C" fn alloc_parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    // SAFETY: the caller's contract.
    match unsafe { parent_domain(context, attr) } {
        Ok(pd) => pd,
        Err(e) => errno::null(e),
    }
}

/// [`alloc_parent_domain`]'s body.
///
/// # Safety
/// As [`alloc_parent_domain`].
unsafe fn parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> Result<*mut ibv_pd, Errno> {
    // SAFETY: the caller's contract.
    let ctx = unsafe { Context::from_c(context) }?;
    // SAFETY: the caller's contract.
    let a = unsafe { attr.as_ref() }.ok_or(Errno::EINVAL)?;
    if a.comp_mask & !(INIT_ATTR_ALLOCATORS | INIT_ATTR_PD_CONTEXT) != 0 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: the caller's contract; NULL is EINVAL.
    let pd = unsafe { Pd::from_c(a.pd) }?;
    if pd.c.context != context {
        return Err(Errno::EINVAL);
    }
    let mut want = ParentDomainAttr::new();
    if let Some(t) = NonNull::new(a.td.cast::<Td>()) {
        // SAFETY: the caller's contract: a live `Td` of this library.
        let t = unsafe { t.as_ref() };
        if t.c.context != context {
            return Err(Errno::EINVAL);
        }
        let guard = t.td.lock().unwrap_or_else(PoisonError::into_inner);
        want = want.with_thread_domain(guard.as_ref().ok_or(Errno::EINVAL)?);
    }
    let pd_context = if a.comp_mask & INIT_ATTR_PD_CONTEXT != 0 {
        a.pd_context
    } else {
        core::ptr::null_mut()
    };
    let callbacks = match (a.comp_mask & INIT_ATTR_ALLOCATORS != 0, a.alloc, a.free) {
        (true, Some(alloc), Some(free)) => Some(Arc::new(CallbackAllocator {
            alloc,
            free,
            pd_context,
            pd: AtomicPtr::new(core::ptr::null_mut()),
        })),
        _ => None,
    };
    if let Some(c) = &callbacks {
        want = want.with_allocator(c.clone());
    }
    let uv = pd
        .with(|p| p.alloc_parent_domain(want))?
        .map_err(|e| errno::of(&e))?;
    let made = Pd::into_c(ctx, uv);
    if let Some(c) = callbacks {
        c.pd.store(made, Ordering::Release);
    }
    Ok(made)
}

/// `verbs_context.alloc_td`.
pub(crate) const ALLOC_TD: AnyFn = Some(
    // SAFETY: a function pointer cast to another function pointer type of
    // the same size; programs call it through verbs.h's slot, whose
    // signature is the one given here.
    unsafe {
        core::mem::transmute::<
            unsafe extern "C" fn(*mut ibv_context, *mut ibv_td_init_attr) -> *mut ibv_td,
            unsafe extern "C" fn(),
        >(alloc_td)
    },
);

/// `verbs_context.dealloc_td`.
pub(crate) const DEALLOC_TD: AnyFn = Some(
    // SAFETY: as for `ALLOC_TD`.
    unsafe {
        core::mem::transmute::<unsafe extern "C" fn(*mut ibv_td) -> c_int, unsafe extern "C" fn()>(
            dealloc_td,
        )
    },
);

/// `verbs_context.alloc_parent_domain`.
pub(crate) const ALLOC_PARENT_DOMAIN: AnyFn = Some(
    // SAFETY: as for `ALLOC_TD`.
    unsafe {
        core::mem::transmute::<
            unsafe extern "C" fn(*mut ibv_context, *mut ibv_parent_domain_init_attr) -> *mut ibv_pd,
            unsafe extern "C" fn(),
        >(alloc_parent_domain)
    },
);

#[cfg(test)]
mod tests;
