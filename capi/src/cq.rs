//! TEMP(wt-qp): the `crate::cq` items of the cross-module contract that
//! QPs need (`Cq`, `with_cqs`, `ack_async_event`), with a plain
//! `ibv_create_cq`/`ibv_destroy_cq` and the polling op so the host tests
//! can make QPs; the merge takes wt-obj's module instead.

#![allow(unsafe_code)]

use core::{
    ffi::{c_int, c_void},
    mem::transmute,
};
use std::sync::{Mutex, MutexGuard, PoisonError};

use uverbs::{sys::Errno, CompletionQueue, CqOptions, WorkCompletion};

use crate::{
    ctx::Context,
    errno,
    layout::{
        context::ibv_context,
        cq::{ibv_comp_channel, ibv_cq, ibv_cq_ex, ibv_wc},
        pthread_cond_t, pthread_mutex_t, AnyFn,
    },
};

/// A completion queue, allocated as an `ibv_cq_ex`.
#[repr(C)]
#[derive(Debug)]
pub struct Cq {
    /// The C part.
    pub c: ibv_cq_ex,
    cq: Mutex<Option<CompletionQueue>>,
}

// SAFETY: the C part's pointers name live objects of this library or the
// program's own context value; the Rust state is behind a mutex.
unsafe impl Send for Cq {}
// SAFETY: as for Send.
unsafe impl Sync for Cq {}

impl Cq {
    /// The CQ behind a program's pointer.
    ///
    /// # Safety
    /// `p` is NULL or a live CQ of this library.
    pub(crate) unsafe fn from_c<'a>(p: *mut ibv_cq) -> Result<&'a Cq, Errno> {
        // SAFETY: the caller's contract; `c` is the first field.
        unsafe { p.cast::<Cq>().as_ref() }.ok_or(Errno::EINVAL)
    }

    /// Runs `f` on the uverbs CQ.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&CompletionQueue) -> R) -> Result<R, Errno> {
        self.lock().as_ref().map(f).ok_or(Errno::EINVAL)
    }

    fn lock(&self) -> MutexGuard<'_, Option<CompletionQueue>> {
        self.cq.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs `f` on the uverbs CQs of `send` and `recv` (one lock when they are
/// the same CQ, both in address order otherwise).
pub(crate) fn with_cqs<R>(
    send: &Cq,
    recv: &Cq,
    f: impl FnOnce(&CompletionQueue, &CompletionQueue) -> R,
) -> Result<R, Errno> {
    if core::ptr::eq(send, recv) {
        let g = send.lock();
        let cq = g.as_ref().ok_or(Errno::EINVAL)?;
        return Ok(f(cq, cq));
    }
    let (first, second) = if (send as *const Cq) < (recv as *const Cq) {
        (send, recv)
    } else {
        (recv, send)
    };
    let g1 = first.lock();
    let g2 = second.lock();
    let (a, b) = (g1.as_ref(), g2.as_ref());
    let (Some(a), Some(b)) = (a, b) else {
        return Err(Errno::EINVAL);
    };
    let (s, r) = if core::ptr::eq(first, send) {
        (a, b)
    } else {
        (b, a)
    };
    Ok(f(s, r))
}

/// Acknowledges one async event of the CQ at `p`.
///
/// # Safety
/// `p` is NULL or a live CQ of this library.
#[allow(dead_code)] // called by wt-dev's ibv_ack_async_event
pub(crate) unsafe fn ack_async_event(p: *mut ibv_cq) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let cq = unsafe { Cq::from_c(p) }?;
    let g = cq.lock();
    let cq = g.as_ref().ok_or(Errno::EINVAL)?;
    cq.ack_async_events(1).map_err(|e| errno::of(&e))
}

/// `ibv_create_cq` (TEMP).
///
/// # Safety
/// `context` is NULL or a live context of this library.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::null(e),
    };
    let chan = if channel.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        match unsafe { crate::comp_channel::CompChannel::from_c(channel) } {
            Ok(c) => Some(&c.ch),
            Err(e) => return errno::null(e),
        }
    };
    let (Ok(n), Ok(vector)) = (u32::try_from(cqe), u32::try_from(comp_vector)) else {
        return errno::null(Errno::EINVAL);
    };
    let mut b = Box::new(Cq {
        c: ibv_cq_ex {
            context,
            channel,
            cq_context,
            handle: 0,
            cqe: 0,
            mutex: pthread_mutex_t([0; 40]),
            cond: pthread_cond_t([0; 48]),
            comp_events_completed: 0,
            async_events_completed: 0,
            comp_mask: 0,
            status: 0,
            wr_id: 0,
            start_poll: None,
            next_poll: None,
            end_poll: None,
            read_opcode: None,
            read_vendor_err: None,
            read_byte_len: None,
            read_imm_data: None,
            read_qp_num: None,
            read_src_qp: None,
            read_wc_flags: None,
            read_slid: None,
            read_sl: None,
            read_dlid_path_bits: None,
            read_completion_ts: None,
            read_cvlan: None,
            read_flow_tag: None,
            read_tm_info: None,
            read_completion_wallclock_ns: None,
        },
        cq: Mutex::new(None),
    });
    let addr = (&raw const *b) as u64;
    let opts = CqOptions {
        channel: chan,
        comp_vector: vector,
        context: addr,
        ..CqOptions::default()
    };
    match ctx.uv.create_cq(n, opts) {
        Ok(cq) => {
            b.c.handle = cq.handle();
            b.c.cqe = i32::try_from(cq.cqe()).unwrap_or(i32::MAX);
            *b.cq.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(cq);
            Box::into_raw(b).cast()
        }
        Err(e) => errno::null(errno::of(&e)),
    }
}

/// `ibv_destroy_cq`.
///
/// # Safety
/// `cq` is NULL or a live CQ of this library, not used after success.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: the caller's contract.
    let c = match unsafe { Cq::from_c(cq) } {
        Ok(c) => c,
        Err(e) => return errno::positive(e),
    };
    let taken = c.lock().take();
    let Some(uv) = taken else {
        return errno::positive(Errno::EINVAL);
    };
    if let Err(e) = uv.destroy() {
        let no = errno::of(e.error());
        *c.lock() = Some(e.into_inner());
        return errno::positive(no);
    }
    // SAFETY: made by Box::into_raw in ibv_create_cq; given up by the program.
    drop(unsafe { Box::from_raw(cq.cast::<Cq>()) });
    0
}

/// The `poll_cq` op.
unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, ne: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: verbs.h's contract: a live CQ.
    let Ok(c) = (unsafe { Cq::from_c(cq) }) else {
        return -1;
    };
    let n = usize::try_from(ne).unwrap_or(0).min(32);
    if n == 0 || wc.is_null() {
        return 0;
    }
    let mut out = [WorkCompletion::default(); 32];
    let got = {
        let mut g = c.lock();
        let Some(uv) = g.as_mut() else {
            return -1;
        };
        uv.poll(&mut out[..n])
    };
    for (i, w) in out.iter().take(got).enumerate() {
        let v = ibv_wc {
            wr_id: w.wr_id,
            status: w.status.0 as c_int,
            opcode: w.opcode.0 as c_int,
            vendor_err: w.vendor_err,
            byte_len: w.byte_len,
            imm_data: w.imm_data.to_be(),
            qp_num: w.qp_num,
            src_qp: w.src_qp,
            wc_flags: w.wc_flags.bits(),
            pkey_index: w.pkey_index,
            slid: w.slid,
            sl: w.sl,
            dlid_path_bits: w.dlid_path_bits,
        };
        // SAFETY: the program gives room for `ne` completions.
        unsafe { wc.add(i).write(v) };
    }
    got as c_int
}

type PollCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;

/// The `poll_cq` op.
// SAFETY: a function pointer cast to another function pointer type; the
// program calls it with verbs.h's signature, which is `PollCqFn`.
pub(crate) const POLL_CQ: AnyFn =
    Some(unsafe { transmute::<PollCqFn, unsafe extern "C" fn()>(poll_cq) });
/// The `req_notify_cq` op.
unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: verbs.h's contract: a live CQ.
    let Ok(c) = (unsafe { Cq::from_c(cq) }) else {
        return errno::positive(Errno::EINVAL);
    };
    match c.with(|q| q.req_notify(solicited_only != 0)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => errno::positive(errno::of(&e)),
        Err(e) => errno::positive(e),
    }
}

type ReqNotifyFn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;

/// The `req_notify_cq` op.
// SAFETY: as for POLL_CQ, with `ReqNotifyFn`.
pub(crate) const REQ_NOTIFY_CQ: AnyFn =
    Some(unsafe { transmute::<ReqNotifyFn, unsafe extern "C" fn()>(req_notify_cq) });
