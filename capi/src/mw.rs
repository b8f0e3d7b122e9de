//! Memory windows: the `alloc_mw`, `bind_mw` and `dealloc_mw` slots of
//! `ibv_context_ops`, which verbs.h's inline `ibv_alloc_mw`, `ibv_bind_mw`
//! and `ibv_dealloc_mw` call (they are not exported functions).
//!
//! `bind_mw` is the type 1 bind of rdma-core's rxe (providers/rxe/rxe.c
//! `rxe_bind_mw`): a `BIND_MW` send request to the window's next key
//! through the QP's `post_send`, the key stored in `mw->rkey` once posted
//! (the program undoes it if the bind completes in error). verbs.h's
//! inline has already refused other window types (`EINVAL`) and a region
//! of another PD (`EPERM`).

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{
    ffi::c_int,
    mem::{transmute, zeroed},
    ptr::null_mut,
    sync::atomic::{AtomicU32, Ordering},
};
use std::sync::{Mutex, PoisonError};

use uverbs::{sys::Errno, MemoryWindow, MwType};

use crate::{
    errno,
    layout::{
        pd::{ibv_mw, ibv_pd},
        qp::{ibv_mw_bind, ibv_qp, ibv_send_wr},
        AnyFn,
    },
    pd::Pd,
};

/// `IBV_WR_BIND_MW`.
const IBV_WR_BIND_MW: c_int = 8;
/// `IBV_ACCESS_ZERO_BASED`, which rxe's windows refuse.
const ACCESS_ZERO_BASED: u32 = 1 << 5;

/// A memory window: what `ibv_alloc_mw` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Mw {
    /// The C part (`ibv_mw *` is this object's address).
    pub c: ibv_mw,
    mw: Mutex<Option<MemoryWindow>>,
}

// SAFETY: the C part's pointers name this library's context and PD and
// are written once before the object is handed out; `rkey` is an atomic.
// The Rust state is Send + Sync.
unsafe impl Send for Mw {}
// SAFETY: as for Send.
unsafe impl Sync for Mw {}

crate::handle!(Mw: ibv_mw = c);

impl Mw {
    /// The window's current key.
    pub(crate) fn rkey(&self) -> u32 {
        self.c.rkey.load(Ordering::Acquire)
    }
}

/// The key after `rkey`: its low byte incremented, wrapping within it
/// (rdma-core rxe.c `next_rkey`, pyverbs' `inc_rkey`).
fn next_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// The `alloc_mw` op: a window of `mw_type` in `pd`; NULL and `errno` on
/// failure (`EINVAL` for a type the kernel does not know, as its
/// `ib_uverbs_alloc_mw` answers).
unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, mw_type: c_int) -> *mut ibv_mw {
    // SAFETY: verbs.h's contract: a live PD of this context.
    let p = match unsafe { Pd::from_c(pd) } {
        Ok(p) => p,
        Err(e) => return errno::null(e),
    };
    let kind = match mw_type {
        1 => MwType::Type1,
        2 => MwType::Type2,
        _ => return errno::null(Errno::EINVAL),
    };
    let uv = match p.with(|uv| uv.alloc_mw(kind)) {
        Ok(Ok(mw)) => mw,
        Ok(Err(e)) => return errno::null(errno::of(&e)),
        Err(e) => return errno::null(e),
    };
    let boxed = Box::new(Mw {
        c: ibv_mw {
            context: p.c.context,
            pd,
            rkey: AtomicU32::new(uv.rkey()),
            handle: uv.handle(),
            r#type: mw_type,
        },
        mw: Mutex::new(Some(uv)),
    });
    boxed.into_c()
}

/// The `dealloc_mw` op: 0, or the positive errno with the window as it
/// was (uverbs gives it back on any failure): a later call tries again.
unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: verbs.h's contract: a live window of this library.
    let m = match unsafe { Mw::from_c(mw) } {
        Ok(m) => m,
        Err(e) => return errno::positive(e),
    };
    {
        let mut guard = m.mw.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(uv) = guard.take() else {
            return errno::positive(Errno::EINVAL);
        };
        if let Err(e) = uv.destroy() {
            let (uv, e) = e.into_parts();
            *guard = Some(uv);
            return errno::positive(errno::of(&e));
        }
    }
    // SAFETY: `mw` came from `into_c` in `alloc_mw` and the program
    // gives it up with this call.
    unsafe { Mw::free(mw) };
    0
}

/// The `bind_mw` op (type 1 windows, `ibv_bind_mw`): 0 once the bind is
/// posted, or the positive errno.
unsafe extern "C" fn bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, bind: *mut ibv_mw_bind) -> c_int {
    // SAFETY: verbs.h's contract: a live window of this library.
    let m = match unsafe { Mw::from_c(mw) } {
        Ok(m) => m,
        Err(e) => return errno::positive(e),
    };
    // SAFETY: verbs.h's contract: `bind` points to a request.
    let Some(bind) = (unsafe { bind.as_ref() }) else {
        return errno::positive(Errno::EINVAL);
    };
    if bind.bind_info.mw_access_flags & ACCESS_ZERO_BASED != 0 {
        return errno::positive(Errno::EINVAL);
    }
    let rkey = next_rkey(m.rkey());
    // SAFETY: `ibv_send_wr` is plain data (integers, raw pointers, unions
    // of them), for which all zeroes is a valid value.
    let mut wr: ibv_send_wr = unsafe { zeroed() };
    wr.wr_id = bind.wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = bind.send_flags;
    wr.bind_mw.bind_mw.mw = mw.cast();
    wr.bind_mw.bind_mw.rkey = rkey;
    wr.bind_mw.bind_mw.bind_info = bind.bind_info;
    let mut bad = null_mut();
    // SAFETY: `wr` is one valid request (its window is `mw`, its region
    // the program's, both live by verbs.h's contract) and `bad` writable;
    // `qp` is the program's, checked by `post_send`.
    let r = unsafe { crate::qp::post_send(qp, &mut wr, &mut bad) };
    if r != 0 {
        return r;
    }
    m.c.rkey.store(rkey, Ordering::Release);
    if let Some(uv) = m.mw.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
        uv.set_rkey(rkey);
    }
    0
}

type AllocMwFn = unsafe extern "C" fn(*mut ibv_pd, c_int) -> *mut ibv_mw;
type DeallocMwFn = unsafe extern "C" fn(*mut ibv_mw) -> c_int;
type BindMwFn = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int;

/// `ibv_context_ops.alloc_mw`.
// SAFETY: a function pointer as another function pointer type; programs
// call the slot with verbs.h's signature, which is `AllocMwFn`.
pub(crate) const ALLOC_MW: AnyFn =
    Some(unsafe { transmute::<AllocMwFn, unsafe extern "C" fn()>(alloc_mw) });
/// `ibv_context_ops.dealloc_mw`.
// SAFETY: as for ALLOC_MW, with `DeallocMwFn`.
pub(crate) const DEALLOC_MW: AnyFn =
    Some(unsafe { transmute::<DeallocMwFn, unsafe extern "C" fn()>(dealloc_mw) });
/// `ibv_context_ops.bind_mw`.
// SAFETY: as for ALLOC_MW, with `BindMwFn`.
pub(crate) const BIND_MW: AnyFn =
    Some(unsafe { transmute::<BindMwFn, unsafe extern "C" fn()>(bind_mw) });

pub(crate) mod bind;

#[cfg(test)]
mod tests;
