//! Completion channels and completion events: `ibv_create_comp_channel`,
//! `ibv_destroy_comp_channel`, `ibv_get_cq_event` and `ibv_wc_status_str`
//! (`ibv_ack_cq_events`, which acts on a CQ, is in `cq.rs`: this file
//! reads the CQ's `cq_context` from its C struct and needs nothing else of
//! `cq.rs`).
//!
//! `ibv_get_cq_event` is one blocking read of the channel's fd, as in
//! libibverbs; on a channel the program made `O_NONBLOCK` (`fcntl` on
//! `channel->fd`) it fails with `EAGAIN` when nothing is queued (uverbs
//! honours the flag). The CQ it returns is the uverbs event's context,
//! which is the C object's address (see `cq.rs`); the event stays deferred
//! in uverbs until `ibv_ack_cq_events` acknowledges it, from any thread.

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{
    ffi::{c_char, c_int, c_void},
    sync::atomic::Ordering,
};
use std::os::fd::{AsFd, AsRawFd};

use uverbs::{sys::Errno, CompletionChannel};

use crate::{
    context::Context,
    errno,
    layout::{
        context::ibv_context,
        cq::{ibv_comp_channel, ibv_cq},
    },
};

/// A completion channel: what `ibv_create_comp_channel` returns a pointer
/// to.
#[repr(C)]
#[derive(Debug)]
pub struct CompChannel {
    /// The C part (`ibv_comp_channel *` is this object's address). Its
    /// `refcnt` counts the CQs attached; -1 once the channel is being
    /// destroyed.
    pub c: ibv_comp_channel,
    channel: CompletionChannel,
}

// SAFETY: the C part is written once before the object is handed out
// (`refcnt` is atomic); its pointer names this library's context. The
// uverbs channel is Send + Sync.
unsafe impl Send for CompChannel {}
// SAFETY: as for Send.
unsafe impl Sync for CompChannel {}

crate::handle!(CompChannel: ibv_comp_channel = c);

impl CompChannel {
    /// The uverbs channel.
    pub(crate) fn channel(&self) -> &CompletionChannel {
        &self.channel
    }

    /// Counts one more CQ attached (before its creation; [`detach`] if
    /// that fails); `EINVAL` when the channel is being destroyed.
    ///
    /// [`detach`]: CompChannel::detach
    pub(crate) fn attach(&self) -> Result<(), Errno> {
        self.c
            .refcnt
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n >= 0).then(|| n.saturating_add(1))
            })
            .map(drop)
            .map_err(|_| Errno::EINVAL)
    }

    /// Counts one CQ less (destroyed, or its creation failed).
    pub(crate) fn detach(&self) {
        self.c.refcnt.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Creates a completion channel; NULL and `errno` on failure.
///
/// # Safety
/// `context` is NULL or an open context of this library.
#[export_name = "uverbs_ibv_create_comp_channel"]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::null(e),
    };
    let channel = match ctx.uv.create_comp_channel() {
        Ok(ch) => ch,
        Err(e) => return errno::null(errno::of(&e)),
    };
    let ch = Box::new(CompChannel {
        c: ibv_comp_channel {
            context,
            fd: channel.as_fd().as_raw_fd(),
            refcnt: 0.into(),
        },
        channel,
    });
    ch.into_c()
}

/// Destroys a completion channel and closes its fd: 0, or the positive
/// errno (`EBUSY` while CQs use it).
///
/// # Safety
/// `channel` is NULL or a live channel of this library.
#[export_name = "uverbs_ibv_destroy_comp_channel"]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    // SAFETY: the caller's contract.
    let ch = match unsafe { CompChannel::from_c(channel) } {
        Ok(ch) => ch,
        Err(e) => return errno::positive(e),
    };
    if ch
        .c
        .refcnt
        .compare_exchange(0, -1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return errno::positive(Errno::EBUSY);
    }
    // SAFETY: `channel` came from `into_c` in
    // `ibv_create_comp_channel` and the program gives it up with this call.
    unsafe { CompChannel::free(channel) };
    0
}

/// `ibv_get_cq_event`'s body.
///
/// # Safety
/// As [`ibv_get_cq_event`].
unsafe fn get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let ch = unsafe { CompChannel::from_c(channel) }?;
    if cq.is_null() || cq_context.is_null() {
        return Err(Errno::EINVAL);
    }
    let ev = ch.channel.get_event().map_err(|e| errno::of(&e))?;
    let p = ev.cq_context() as usize as *mut ibv_cq;
    if p.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: the event's context is the address of the C object its CQ
    // was created with (`cq::create`), which lives while the event is
    // held; `cq_context` is written once, before the program has the CQ.
    let context = unsafe { (*p).cq_context };
    // Counted by the CQ in uverbs until `ibv_ack_cq_events` acknowledges
    // it; the CQ's destroy waits for that.
    ev.defer_ack();
    // SAFETY: the program's out-parameters, checked non-NULL.
    unsafe {
        cq.write(p);
        cq_context.write(context);
    }
    Ok(())
}

/// Waits for the next completion event on `channel`: 0 with `*cq` and
/// `*cq_context` set, or -1 and `errno` (`EAGAIN` on an `O_NONBLOCK`
/// channel with nothing queued, `EINTR` when a signal interrupts it).
///
/// # Safety
/// `channel` is NULL or a live channel of this library; `cq` and
/// `cq_context` are NULL or writable.
#[export_name = "uverbs_ibv_get_cq_event"]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { get_cq_event(channel, cq, cq_context) } {
        Ok(()) => 0,
        Err(e) => errno::minus_one(e),
    }
}

/// libibverbs' `enum_strs.c` texts, by `enum ibv_wc_status`.
const WC_STATUS: [&str; 24] = [
    "success\0",
    "local length error\0",
    "local QP operation error\0",
    "local EE context operation error\0",
    "local protection error\0",
    "Work Request Flushed Error\0",
    "memory management operation error\0",
    "bad response error\0",
    "local access error\0",
    "remote invalid request error\0",
    "remote access error\0",
    "remote operation error\0",
    "transport retry counter exceeded\0",
    "RNR retry counter exceeded\0",
    "local RDD violation error\0",
    "remote invalid RD request\0",
    "aborted error\0",
    "invalid EE context number\0",
    "invalid EE context state\0",
    "fatal error\0",
    "response timeout error\0",
    "general error\0",
    "TM error\0",
    "TM software rendezvous\0",
];

/// The text of a completion status, as libibverbs gives it ("unknown" for
/// a value it does not know).
#[export_name = "uverbs_ibv_wc_status_str"]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    let s = usize::try_from(status)
        .ok()
        .and_then(|i| WC_STATUS.get(i))
        .copied()
        .unwrap_or("unknown\0");
    s.as_ptr().cast()
}
