//! Completion queues: `ibv_create_cq`, `ibv_destroy_cq`, `ibv_resize_cq`,
//! `ibv_ack_cq_events`, the `poll_cq` and `req_notify_cq` ops behind verbs.h's inline
//! `ibv_poll_cq` and `ibv_req_notify_cq`, and the event accounting that
//! `ibv_get_cq_event`, `ibv_ack_cq_events` and `ibv_ack_async_event` share
//! with `ibv_destroy_cq`.
//!
//! Every CQ is allocated as an [`ibv_cq_ex`] (`ibv_cq *` and `ibv_cq_ex *`
//! are the same address). The uverbs [`CompletionQueue`] sits behind a
//! `RwLock`: polling and resizing take it exclusively (the lock libibverbs'
//! providers take around a poll and a resize), arming and the objects made
//! with the CQ (QPs, via [`with_cqs`]) take it shared. Acknowledging
//! completion events takes no CQ lock at all.
//!
//! # Events and destroy
//!
//! libibverbs' `ibv_destroy_cq` sends the kernel's destroy, which reports
//! how many completion and async events were read for the CQ, and then
//! waits until the program has acknowledged that many. That is uverbs'
//! `CompletionQueue::destroy_awaiting_acks`: `ibv_get_cq_event` and
//! `ibv_get_async_event` leave each event deferred in uverbs
//! (`defer_ack`), and `ibv_ack_cq_events` and `ibv_ack_async_event`
//! acknowledge them by count through the CQ's [`EventAcks`], from any
//! thread, also while the destroy waits; they add to the C fields
//! `comp_events_completed` and `async_events_completed` as libibverbs does.

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{
    ffi::{c_int, c_void},
    ptr,
};
use std::sync::{atomic::Ordering, PoisonError, RwLock, RwLockReadGuard};

use uverbs::{
    sys::Errno, CompletionQueue, CqOptions, EventAcks, WcExFlags, WcFlags, WcFlagsNumbering,
    WorkCompletion,
};

use crate::{
    comp_channel::CompChannel,
    context::Context,
    errno,
    layout::{
        context::ibv_context,
        cq::{ibv_comp_channel, ibv_cq, ibv_cq_ex, ibv_wc},
        pd::ibv_pd,
        pthread_cond_t, pthread_mutex_t, AnyFn,
    },
    pd::Pd,
};

/// A completion queue: what `ibv_create_cq` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Cq {
    /// The C part (`ibv_cq *` and `ibv_cq_ex *` are this object's address).
    pub c: ibv_cq_ex,
    cq: RwLock<Option<CompletionQueue>>,
    /// The CQ's acknowledgements (set with the uverbs CQ, before the
    /// program has the pointer).
    acks: Option<EventAcks>,
    /// How `wc_flags` are numbered for the program: as rdma-core's
    /// provider for the device numbers them (uverbs says which).
    wc_flags: WcFlagsNumbering,
    /// The `ibv_start_poll` session and its current completion (cq_ex.rs).
    pub(crate) session: crate::cq_ex::Session,
}

// SAFETY: the C part's pointers name this library's objects or are the
// program's opaque `cq_context`; the fields changed after creation are
// atomics. The Rust state is Send + Sync.
unsafe impl Send for Cq {}
// SAFETY: as for Send.
unsafe impl Sync for Cq {}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

crate::handle!(Cq: ibv_cq = c);

impl Cq {
    /// Runs `f` with the uverbs CQ locked shared (for commands that name
    /// it: polls, which lock it exclusively, wait); `EINVAL` when it is
    /// destroyed.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&CompletionQueue) -> R) -> Result<R, Errno> {
        read(&self.cq).as_ref().map(f).ok_or(Errno::EINVAL)
    }

    /// Runs `f` with the uverbs CQ locked exclusively (the lock a poll
    /// takes); `EINVAL` when it is destroyed.
    pub(crate) fn with_mut<R>(
        &self,
        f: impl FnOnce(&mut CompletionQueue) -> R,
    ) -> Result<R, Errno> {
        let mut g = self.cq.write().unwrap_or_else(PoisonError::into_inner);
        g.as_mut().map(f).ok_or(Errno::EINVAL)
    }

    /// A uverbs completion as `ibv_poll_cq` hands it to the program.
    pub(crate) fn wc_to_c(&self, w: &WorkCompletion) -> ibv_wc {
        to_c(w, self.wc_flags)
    }
}

/// Runs `f` with the uverbs CQs of a QP (`send` and `recv` may be the same
/// CQ), each locked shared, two in address order; `EINVAL` when one is
/// destroyed.
pub(crate) fn with_cqs<R>(
    send: &Cq,
    recv: &Cq,
    f: impl FnOnce(&CompletionQueue, &CompletionQueue) -> R,
) -> Result<R, Errno> {
    if ptr::eq(send, recv) {
        let g = read(&send.cq);
        let q = g.as_ref().ok_or(Errno::EINVAL)?;
        return Ok(f(q, q));
    }
    let send_first = (send as *const Cq) < (recv as *const Cq);
    let (first, second) = if send_first {
        (send, recv)
    } else {
        (recv, send)
    };
    let g1 = read(&first.cq);
    let g2 = read(&second.cq);
    let (s, r) = if send_first { (&g1, &g2) } else { (&g2, &g1) };
    match (s.as_ref(), r.as_ref()) {
        (Some(s), Some(r)) => Ok(f(s, r)),
        _ => Err(Errno::EINVAL),
    }
}

/// Acknowledges one async event of the CQ (`ibv_ack_async_event`), from any
/// thread, which a waiting destroy may be waiting for.
///
/// # Safety
/// `p` is NULL or a CQ of this library not yet destroyed.
pub(crate) unsafe fn ack_async_event(p: *mut ibv_cq) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let cq = unsafe { Cq::from_c(p) }?;
    let acks = cq.acks.as_ref().ok_or(Errno::EINVAL)?;
    acks.ack_async_events(1).map_err(|e| errno::of(&e))?;
    cq.c.async_events_completed.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Acknowledges `n` completion events of the CQ (`ibv_ack_cq_events`),
/// from any thread, which a waiting destroy may be waiting for.
///
/// # Safety
/// `p` is NULL or a CQ of this library not yet destroyed.
pub(crate) unsafe fn ack_events(p: *mut ibv_cq, n: u32) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let cq = unsafe { Cq::from_c(p) }?;
    let acks = cq.acks.as_ref().ok_or(Errno::EINVAL)?;
    acks.ack_events(n).map_err(|e| errno::of(&e))?;
    cq.c.comp_events_completed.fetch_add(n, Ordering::Relaxed);
    Ok(())
}

/// Acknowledges `nevents` completion events of `cq`, from any thread (a
/// waiting `ibv_destroy_cq` of it then proceeds).
///
/// # Safety
/// `cq` is NULL or a live CQ of this library.
#[export_name = "uverbs_ibv_ack_cq_events"]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: core::ffi::c_uint) {
    // SAFETY: the caller's contract. A NULL `cq` has nothing to count and
    // the function returns nothing.
    let _ = unsafe { ack_events(cq, nevents) };
}

/// What a CQ is created with (`ibv_create_cq`'s arguments, and
/// `ibv_create_cq_ex`'s `wc_flags`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CqCreate {
    pub(crate) cqe: c_int,
    pub(crate) cq_context: *mut c_void,
    pub(crate) channel: *mut ibv_comp_channel,
    pub(crate) comp_vector: c_int,
    pub(crate) wc_flags: WcExFlags,
    /// `ibv_create_cq_ex`'s `parent_domain` (`IBV_CQ_INIT_ATTR_MASK_PD`),
    /// or NULL.
    pub(crate) parent_domain: *mut ibv_pd,
}

/// Creates a CQ: boxes the C object, lets `fill` set its `ibv_cq_ex` part
/// (the extended polling ops, [`crate::cq_ex::fill_ops`], for every CQ)
/// before anyone can see it, creates the uverbs
/// CQ with the C object's address as its context, and returns that
/// address.
///
/// # Safety
/// `context` is NULL or an open context of this library; `attr.channel` is
/// NULL or a live channel of it.
pub(crate) unsafe fn create(
    context: *mut ibv_context,
    attr: &CqCreate,
    fill: impl FnOnce(&mut ibv_cq_ex),
) -> Result<*mut Cq, Errno> {
    // SAFETY: the caller's contract.
    unsafe {
        create_with(context, attr, fill, |ctx, cqe, opts| {
            ctx.create_cq(cqe, opts)
        })
    }
}

/// [`create`], the uverbs CQ made by `make` (`mlx5dv_create_cq`'s, with
/// mlx5 attributes).
///
/// # Safety
/// As for [`create`].
pub(crate) unsafe fn create_with(
    context: *mut ibv_context,
    attr: &CqCreate,
    fill: impl FnOnce(&mut ibv_cq_ex),
    make: impl FnOnce(&uverbs::Context, u32, CqOptions<'_>) -> uverbs::Result<CompletionQueue>,
) -> Result<*mut Cq, Errno> {
    // SAFETY: the caller's contract.
    let ctx = unsafe { Context::from_c(context) }?;
    let (Ok(cqe), Ok(comp_vector)) = (u32::try_from(attr.cqe), u32::try_from(attr.comp_vector))
    else {
        return Err(Errno::EINVAL);
    };
    let channel = if attr.channel.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        let ch = unsafe { CompChannel::from_c(attr.channel) }?;
        ch.attach()?;
        Some(ch)
    };
    let none: AnyFn = None;
    let mut boxed = Box::new(Cq {
        c: ibv_cq_ex {
            context,
            channel: attr.channel,
            cq_context: attr.cq_context,
            handle: 0,
            cqe: 0.into(),
            mutex: pthread_mutex_t([0; 40]),
            cond: pthread_cond_t([0; 48]),
            comp_events_completed: 0.into(),
            async_events_completed: 0.into(),
            comp_mask: 0,
            status: 0.into(),
            wr_id: 0.into(),
            start_poll: none,
            next_poll: none,
            end_poll: none,
            read_opcode: none,
            read_vendor_err: none,
            read_byte_len: none,
            read_imm_data: none,
            read_qp_num: none,
            read_src_qp: none,
            read_wc_flags: none,
            read_slid: none,
            read_sl: none,
            read_dlid_path_bits: none,
            read_completion_ts: none,
            read_cvlan: none,
            read_flow_tag: none,
            read_tm_info: none,
            read_completion_wallclock_ns: none,
        },
        cq: RwLock::new(None),
        acks: None,
        wc_flags: ctx.uv.wc_flags_numbering(),
        session: crate::cq_ex::Session::default(),
    });
    fill(&mut boxed.c);
    let raw = Box::into_raw(boxed);
    let opts = CqOptions::new()
        .channel(channel.map(CompChannel::channel))
        .comp_vector(comp_vector)
        .context(raw as u64)
        .wc_flags(attr.wc_flags);
    let made = if attr.parent_domain.is_null() {
        Ok(make(&ctx.uv, cqe, opts))
    } else {
        // SAFETY: the caller's contract: a live PD of this library.
        unsafe { Pd::from_c(attr.parent_domain) }
            .and_then(|pd| pd.with(|pd| make(&ctx.uv, cqe, opts.parent_domain(pd))))
    };
    match made.and_then(|r| r.map_err(|e| errno::of(&e))) {
        Ok(q) => {
            // SAFETY: `raw` is the allocation just made; nothing else has
            // its address yet (the uverbs CQ keeps it as a number).
            let cq = unsafe { &mut *raw };
            cq.c.handle = q.handle();
            cq.c.cqe = c_int::try_from(q.cqe()).unwrap_or(c_int::MAX).into();
            cq.acks = Some(q.event_acks());
            *cq.cq.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(q);
            Ok(raw)
        }
        Err(e) => {
            // SAFETY: as above; the failed create kept no copy.
            drop(unsafe { Box::from_raw(raw) });
            if let Some(ch) = channel {
                ch.detach();
            }
            Err(e)
        }
    }
}

/// Creates a CQ of at least `cqe` entries; NULL and `errno` on failure
/// (`EINVAL` for a `comp_vector` the device does not have, or `cqe` above
/// its `max_cqe`).
///
/// # Safety
/// `context` is NULL or an open context of this library; `channel` is NULL
/// or a live completion channel of it.
#[export_name = "uverbs_ibv_create_cq"]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let attr = CqCreate {
        cqe,
        cq_context,
        channel,
        comp_vector,
        wc_flags: WcExFlags::STANDARD,
        parent_domain: core::ptr::null_mut(),
    };
    // SAFETY: the caller's contract.
    match unsafe { create(context, &attr, crate::cq_ex::fill_ops) } {
        Ok(cq) => cq.cast(),
        Err(e) => errno::null(e),
    }
}

/// Destroys a CQ: 0 or the positive errno (`EBUSY` while QPs use it).
/// Waits, as libibverbs does, until every completion and async event
/// handed out for it is acknowledged.
///
/// # Safety
/// `cq` is NULL or a live CQ of this library; nothing uses it after a
/// successful return.
#[export_name = "uverbs_ibv_destroy_cq"]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: the caller's contract.
    let c = match unsafe { Cq::from_c(cq) } {
        Ok(c) => c,
        Err(e) => return errno::positive(e),
    };
    let Some(q) = c.cq.write().unwrap_or_else(PoisonError::into_inner).take() else {
        return errno::positive(Errno::EINVAL);
    };
    // Not locked while it waits: polls and arms of other threads find the
    // CQ gone (EINVAL); acknowledgements take no lock.
    if let Err(e) = q.destroy_awaiting_acks() {
        let no = errno::of(e.error());
        *c.cq.write().unwrap_or_else(PoisonError::into_inner) = Some(e.into_inner());
        return errno::positive(no);
    }
    if !c.c.channel.is_null() {
        // SAFETY: a channel outlives its CQs (its destroy fails while
        // they are attached).
        if let Ok(ch) = unsafe { CompChannel::from_c(c.c.channel) } {
            ch.detach();
        }
    }
    // SAFETY: `cq` came from `into_c` in `create` and the program
    // gives it up with this call.
    unsafe { Cq::free(cq) };
    0
}

/// Resizes a CQ to at least `cqe` entries, as libibverbs' `ibv_resize_cq`
/// through rdma-core's rxe provider: 0 and `cq->cqe` set to the size the
/// kernel granted, or the positive errno: the kernel's `EINVAL` for a
/// `cqe` of 0 or less, above the device's `max_cqe`, or below the
/// completions waiting in the CQ (the CQ is then unchanged); `EOPNOTSUPP`
/// on mlx5, whose resize uverbs does not have yet. The CQ is held
/// exclusively meanwhile, so no poll runs during the resize; completions
/// waiting are polled after it.
///
/// # Safety
/// `cq` is NULL or a live CQ of this library.
#[export_name = "uverbs_ibv_resize_cq"]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: the caller's contract.
    let c = match unsafe { Cq::from_c(cq) } {
        Ok(c) => c,
        Err(e) => return errno::positive(e),
    };
    let mut g = c.cq.write().unwrap_or_else(PoisonError::into_inner);
    let Some(q) = g.as_mut() else {
        return errno::positive(Errno::EINVAL);
    };
    // The bits libibverbs puts in the command's `__u32 cqe`: the kernel
    // reads them back as an `int` and refuses a negative one.
    let asked = cqe as u32;
    match q.resize(asked) {
        Ok(()) => {
            c.c.cqe.store(
                c_int::try_from(q.cqe()).unwrap_or(c_int::MAX),
                Ordering::Relaxed,
            );
            0
        }
        Err(e) => errno::positive(errno::of(&e)),
    }
}

/// A uverbs completion as the program's `struct ibv_wc`: `imm_data` back in
/// network order (uverbs keeps it in host order), the invalidated rkey as
/// it is.
pub(crate) fn to_c(w: &WorkCompletion, wc_flags: WcFlagsNumbering) -> ibv_wc {
    ibv_wc {
        wr_id: w.wr_id,
        status: w.status.0,
        opcode: w.opcode.0,
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        imm_data: if w.wc_flags.contains(WcFlags::WITH_INVALIDATE) {
            w.imm_data
        } else {
            w.imm_data.to_be()
        },
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: wc_flags.encode(w.wc_flags),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
    }
}

/// Completions taken from uverbs per round of a poll.
const POLL_CHUNK: usize = 16;

/// `ibv_context_ops.poll_cq`: up to `num` completions into `wc`; the
/// number written, or a negative errno.
///
/// # Safety
/// `cq` is NULL or a live CQ of this library; `wc` has room for `num`
/// entries.
unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, num: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: the caller's contract.
    let c = match unsafe { Cq::from_c(cq) } {
        Ok(c) => c,
        Err(e) => return -errno::positive(e),
    };
    let Ok(want) = usize::try_from(num) else {
        return 0;
    };
    if want == 0 {
        return 0;
    }
    if wc.is_null() {
        return -errno::positive(Errno::EINVAL);
    }
    let mut g = c.cq.write().unwrap_or_else(PoisonError::into_inner);
    let Some(q) = g.as_mut() else {
        return -errno::positive(Errno::EINVAL);
    };
    let mut buf = [WorkCompletion::default(); POLL_CHUNK];
    let mut done = 0;
    while done < want {
        let room = (want - done).min(POLL_CHUNK);
        let got = q.poll(&mut buf[..room]);
        for (i, w) in buf[..got].iter().enumerate() {
            // SAFETY: `done + i < want = num`, inside the program's array.
            unsafe { wc.add(done + i).write(to_c(w, c.wc_flags)) };
        }
        done += got;
        if got < room {
            break;
        }
    }
    // `done <= num`, a c_int.
    done as c_int
}

/// `ibv_context_ops.req_notify_cq`: arms the CQ; 0 or the positive errno.
///
/// # Safety
/// `cq` is NULL or a live CQ of this library.
unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: the caller's contract.
    let c = match unsafe { Cq::from_c(cq) } {
        Ok(c) => c,
        Err(e) => return errno::positive(e),
    };
    let g = read(&c.cq);
    let Some(q) = g.as_ref() else {
        return errno::positive(Errno::EINVAL);
    };
    match q.req_notify(solicited_only != 0) {
        Ok(()) => 0,
        Err(e) => errno::positive(errno::of(&e)),
    }
}

type PollCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
type ReqNotifyCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;

/// `ibv_context_ops.poll_cq`.
pub(crate) const POLL_CQ: AnyFn = Some(
    // SAFETY: a function pointer cast to another function pointer type of
    // the same size; programs call it with verbs.h's `poll_cq` signature,
    // which is `PollCqFn`.
    unsafe { core::mem::transmute::<PollCqFn, unsafe extern "C" fn()>(poll_cq) },
);
/// `ibv_context_ops.req_notify_cq`.
pub(crate) const REQ_NOTIFY_CQ: AnyFn = Some(
    // SAFETY: as for POLL_CQ, with verbs.h's `req_notify_cq` signature.
    unsafe { core::mem::transmute::<ReqNotifyCqFn, unsafe extern "C" fn()>(req_notify_cq) },
);

/// The uverbs objects behind the C ones may be used from any thread (the
/// `unsafe impl`s of Send and Sync above and in `pd.rs`/`comp_channel.rs`
/// rest on it).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<CompletionQueue>();
    send_sync::<uverbs::ProtectionDomain>();
    send_sync::<uverbs::MemoryRegion>();
    send_sync::<uverbs::CompletionChannel>();
};

#[cfg(test)]
pub(crate) mod tests;
