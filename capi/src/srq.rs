//! Shared receive queues: `ibv_create_srq` and the `create_srq_ex` op
//! (basic SRQs), `ibv_modify_srq`, `ibv_query_srq`, `ibv_destroy_srq`, and
//! the `post_srq_recv` and `get_srq_num` ops.
//!
//! The uverbs SRQ's context value ([`uverbs::SrqOptions::context`]) is the
//! C object's address, so its async events (`SRQ_LIMIT_REACHED`,
//! `SRQ_ERR`) lead back to it; its destroy waits for their
//! acknowledgements as libibverbs' does (`qp/guard.rs`).

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{
    ffi::{c_int, c_void},
    mem::transmute,
    ptr::null_mut,
};

use uverbs::{sys::Errno, SharedReceiveQueue, SrqAttr, SrqOptions};

use crate::{
    errno,
    layout::{
        context::ibv_context,
        pd::ibv_pd,
        pthread_cond_t, pthread_mutex_t,
        qp::{ibv_recv_wr, ibv_srq, ibv_srq_attr, ibv_srq_init_attr, ibv_srq_init_attr_ex},
        AnyFn,
    },
    pd::Pd,
    qp::{guard::Guarded, post},
};

/// `IBV_SRQ_MAX_WR` / `IBV_SRQ_LIMIT` of `ibv_modify_srq`'s mask.
const IBV_SRQ_MAX_WR: c_int = 1 << 0;
const IBV_SRQ_LIMIT: c_int = 1 << 1;
/// `IBV_SRQ_INIT_ATTR_*` of `ibv_srq_init_attr_ex.comp_mask`.
const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;
/// XRCD, CQ and TM: for XRC and tag-matching SRQs (`EOPNOTSUPP`).
const UNSUPPORTED_INIT_ATTR: u32 = (1 << 2) | (1 << 3) | (1 << 4);
const KNOWN_INIT_ATTR: u32 = (1 << 5) - 1;
/// `IBV_SRQT_BASIC`.
const IBV_SRQT_BASIC: c_int = 0;

/// A shared receive queue: what `ibv_create_srq` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Srq {
    /// The C part.
    pub c: ibv_srq,
    srq: Guarded<SharedReceiveQueue>,
}

// SAFETY: the C part's pointers name this library's live objects or the
// program's own context value; the uverbs SRQ is behind `Guarded`'s lock.
unsafe impl Send for Srq {}
// SAFETY: as for Send.
unsafe impl Sync for Srq {}

crate::handle!(Srq: ibv_srq = c);

impl Srq {
    /// Runs `f` on the uverbs SRQ (a QP being created on it).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&SharedReceiveQueue) -> R) -> Result<R, Errno> {
        self.srq.with(f)
    }
}

/// Creates a basic SRQ on `pd`; `attr` gets the sizes granted.
///
/// # Safety
/// `pd` is NULL or a live PD of this library.
unsafe fn create(
    pd: *mut ibv_pd,
    srq_context: *mut c_void,
    attr: &mut ibv_srq_attr,
) -> Result<*mut ibv_srq, Errno> {
    // SAFETY: the caller's contract.
    let p = unsafe { Pd::from_c(pd) }?;
    let mut b = Box::new(Srq {
        c: ibv_srq {
            context: p.c.context,
            srq_context,
            pd,
            handle: 0,
            mutex: pthread_mutex_t([0; 40]),
            cond: pthread_cond_t([0; 48]),
            events_completed: 0,
        },
        srq: Guarded::new(),
    });
    let opts = SrqOptions::new().context((&raw const *b) as u64);
    let want = SrqAttr::new(attr.max_wr, attr.max_sge).srq_limit(attr.srq_limit);
    let srq = p
        .with(|uv| uv.create_srq_with(want, opts))?
        .map_err(|e| errno::of(&e))?;
    let got = srq.attr();
    attr.max_wr = got.max_wr;
    attr.max_sge = got.max_sge;
    b.c.handle = srq.handle();
    b.srq.set(srq);
    Ok(b.into_c())
}

/// `ibv_create_srq`: NULL and `errno` on failure; on success
/// `srq_init_attr->attr` holds the sizes granted (as libibverbs writes
/// `max_wr` and `max_sge` back).
///
/// # Safety
/// `pd` is NULL or a live PD of this library; `srq_init_attr` is NULL or
/// writable.
#[export_name = "uverbs_ibv_create_srq"]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    srq_init_attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { srq_init_attr.as_mut() }) else {
        return errno::null(Errno::EINVAL);
    };
    // SAFETY: the caller's contract.
    unsafe { create(pd, a.srq_context, &mut a.attr) }.unwrap_or_else(errno::null)
}

/// The `create_srq_ex` op: basic SRQs (`IBV_SRQ_INIT_ATTR_PD` required);
/// XRC and tag-matching SRQs fail with `EOPNOTSUPP`.
pub(crate) unsafe extern "C" fn create_srq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    // SAFETY: verbs.h's contract: NULL or the program's attributes.
    let Some(a) = (unsafe { attr.as_mut() }) else {
        return errno::null(Errno::EINVAL);
    };
    let mask = a.comp_mask;
    if mask & !KNOWN_INIT_ATTR != 0 {
        return errno::null(Errno::EINVAL);
    }
    if mask & UNSUPPORTED_INIT_ATTR != 0
        || (mask & IBV_SRQ_INIT_ATTR_TYPE != 0 && a.srq_type != IBV_SRQT_BASIC)
    {
        return errno::null(Errno::EOPNOTSUPP);
    }
    if mask & IBV_SRQ_INIT_ATTR_PD == 0 {
        return errno::null(Errno::EINVAL);
    }
    // SAFETY: verbs.h's contract: the PD is NULL or live.
    if let Ok(pd) = unsafe { Pd::from_c(a.pd) } {
        if pd.c.context != context {
            return errno::null(Errno::EINVAL);
        }
    }
    // SAFETY: verbs.h's contract.
    unsafe { create(a.pd, a.srq_context, &mut a.attr) }.unwrap_or_else(errno::null)
}

/// `ibv_modify_srq`: `IBV_SRQ_LIMIT` arms the limit event; resizing
/// (`IBV_SRQ_MAX_WR`) fails with `EOPNOTSUPP` (uverbs cannot resize an
/// SRQ); 0 or the positive errno.
///
/// # Safety
/// `srq` is NULL or a live SRQ of this library; `srq_attr` NULL or
/// readable.
#[export_name = "uverbs_ibv_modify_srq"]
pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    srq_attr: *mut ibv_srq_attr,
    srq_attr_mask: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    let (Ok(s), Some(a)) = (unsafe { Srq::from_c(srq) }, unsafe { srq_attr.as_ref() }) else {
        return errno::positive(Errno::EINVAL);
    };
    if srq_attr_mask & !(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) != 0 {
        return errno::positive(Errno::EINVAL);
    }
    if srq_attr_mask & IBV_SRQ_MAX_WR != 0 {
        return errno::positive(Errno::EOPNOTSUPP);
    }
    if srq_attr_mask == 0 {
        return 0;
    }
    match s.srq.with(|uv| uv.set_limit(a.srq_limit)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => errno::positive(errno::of(&e)),
        Err(e) => errno::positive(e),
    }
}

/// `ibv_query_srq`: 0 or the positive errno.
///
/// # Safety
/// `srq` is NULL or a live SRQ of this library; `srq_attr` NULL or
/// writable.
#[export_name = "uverbs_ibv_query_srq"]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int {
    // SAFETY: the caller's contract.
    let (Ok(s), Some(out)) = (unsafe { Srq::from_c(srq) }, unsafe { srq_attr.as_mut() }) else {
        return errno::positive(Errno::EINVAL);
    };
    match s.srq.with(|uv| uv.query()) {
        Ok(Ok(a)) => {
            *out = ibv_srq_attr {
                max_wr: a.max_wr,
                max_sge: a.max_sge,
                srq_limit: a.srq_limit,
            };
            0
        }
        Ok(Err(e)) => errno::positive(errno::of(&e)),
        Err(e) => errno::positive(e),
    }
}

/// `ibv_destroy_srq`: destroys the SRQ, then waits until the program has
/// acknowledged the async events the kernel reported for it (uverbs'
/// `SharedReceiveQueue::destroy_awaiting_acks`, libibverbs' order);
/// `EBUSY` while QPs use it; 0 or the positive errno (the SRQ is then
/// unchanged).
///
/// # Safety
/// `srq` is NULL or a live SRQ of this library, not used after success.
#[export_name = "uverbs_ibv_destroy_srq"]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    // SAFETY: the caller's contract.
    let s = match unsafe { Srq::from_c(srq) } {
        Ok(s) => s,
        Err(e) => return errno::positive(e),
    };
    if let Err(e) = s.srq.destroy(|_| {}) {
        return errno::positive(e);
    }
    // SAFETY: made by `into_c` in `create`; the program gives it up.
    unsafe { Srq::free(srq) };
    0
}

/// Acknowledges one async event of the SRQ at `p` (`ibv_ack_async_event`).
///
/// # Safety
/// `p` is NULL or a live SRQ of this library.
pub(crate) unsafe fn ack_async_event(p: *mut ibv_srq) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    unsafe { Srq::from_c(p) }?.srq.ack_async_event()
}

/// The `post_srq_recv` op (`ibv_post_srq_recv`).
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    if bad_wr.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    // SAFETY: verbs.h's contract: `bad_wr` is writable.
    unsafe { bad_wr.write(null_mut()) };
    // SAFETY: verbs.h's contract: a live SRQ.
    let s = match unsafe { Srq::from_c(srq) } {
        Ok(s) if !wr.is_null() => s,
        _ => return errno::positive(Errno::EINVAL),
    };
    let r = s.srq.posting(|uv, bufs| {
        // SAFETY: verbs.h's contract: a chain of valid requests.
        unsafe { post::post_recv_chain(bufs, wr, bad_wr, |w| uv.post_recv(w)) }
    });
    r.unwrap_or_else(errno::positive)
}

/// The `get_srq_num` op (`ibv_get_srq_num`): the SRQ number the kernel
/// reported at creation.
pub(crate) unsafe extern "C" fn get_srq_num(srq: *mut ibv_srq, srq_num: *mut u32) -> c_int {
    // SAFETY: verbs.h's contract: a live SRQ and a writable number.
    let (Ok(s), Some(out)) = (unsafe { Srq::from_c(srq) }, unsafe { srq_num.as_mut() }) else {
        return errno::positive(Errno::EINVAL);
    };
    match s.srq.with(|uv| uv.srq_num()) {
        Ok(n) => {
            *out = n;
            0
        }
        Err(e) => errno::positive(e),
    }
}

type PostSrqRecvFn =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
type GetSrqNumFn = unsafe extern "C" fn(*mut ibv_srq, *mut u32) -> c_int;
type CreateSrqExFn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_srq_init_attr_ex) -> *mut ibv_srq;

/// `ibv_context_ops.post_srq_recv`.
// SAFETY: a function pointer as another function pointer type; programs
// call the slot with verbs.h's signature, which is `PostSrqRecvFn`.
pub(crate) const POST_SRQ_RECV: AnyFn =
    Some(unsafe { transmute::<PostSrqRecvFn, unsafe extern "C" fn()>(post_srq_recv) });
/// `verbs_context.get_srq_num`.
// SAFETY: as for POST_SRQ_RECV, with `GetSrqNumFn`.
pub(crate) const GET_SRQ_NUM: AnyFn =
    Some(unsafe { transmute::<GetSrqNumFn, unsafe extern "C" fn()>(get_srq_num) });
/// `verbs_context.create_srq_ex`.
// SAFETY: as for POST_SRQ_RECV, with `CreateSrqExFn`.
pub(crate) const CREATE_SRQ_EX: AnyFn =
    Some(unsafe { transmute::<CreateSrqExFn, unsafe extern "C" fn()>(create_srq_ex) });
