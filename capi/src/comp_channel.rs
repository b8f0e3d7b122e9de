//! TEMP(wt-qp): completion channels and `ibv_get_cq_event` /
//! `ibv_ack_cq_events`, minimal, so the pingpongs' `-e` runs in the guest
//! before wt-obj's module lands; the merge takes wt-obj's module instead.

#![allow(unsafe_code)]

use core::ffi::{c_int, c_void};
use std::os::fd::{AsFd, AsRawFd};

use uverbs::{sys::Errno, CompletionChannel};

use crate::{
    cq::Cq,
    ctx::Context,
    errno,
    layout::{
        context::ibv_context,
        cq::{ibv_comp_channel, ibv_cq},
    },
};

/// A completion channel.
#[repr(C)]
#[derive(Debug)]
pub struct CompChannel {
    /// The C part.
    pub c: ibv_comp_channel,
    /// The uverbs channel.
    pub ch: CompletionChannel,
}

impl CompChannel {
    /// The channel behind a program's pointer.
    ///
    /// # Safety
    /// `p` is NULL or a live channel of this library.
    pub(crate) unsafe fn from_c<'a>(p: *mut ibv_comp_channel) -> Result<&'a CompChannel, Errno> {
        // SAFETY: the caller's contract.
        unsafe { p.cast::<CompChannel>().as_ref() }.ok_or(Errno::EINVAL)
    }
}

/// `ibv_create_comp_channel` (TEMP).
///
/// # Safety
/// `context` live.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::null(e),
    };
    match ctx.uv.create_comp_channel() {
        Ok(ch) => {
            let fd = ch.as_fd().as_raw_fd();
            let b = Box::new(CompChannel {
                c: ibv_comp_channel {
                    context,
                    fd,
                    refcnt: 0,
                },
                ch,
            });
            Box::into_raw(b).cast()
        }
        Err(e) => errno::null(errno::of(&e)),
    }
}

/// `ibv_destroy_comp_channel` (TEMP).
///
/// # Safety
/// `channel` live, unused after.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    if channel.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    // SAFETY: made by Box::into_raw above.
    drop(unsafe { Box::from_raw(channel.cast::<CompChannel>()) });
    0
}

/// `ibv_get_cq_event` (TEMP): 0, or -1.
///
/// # Safety
/// `channel` live; `cq`, `cq_context` writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    let ch = match unsafe { CompChannel::from_c(channel) } {
        Ok(c) => c,
        Err(e) => return errno::minus_one(e),
    };
    match ch.ch.get_event() {
        Ok(ev) => {
            let p = ev.cq_context() as usize as *mut ibv_cq;
            ev.defer_ack();
            // SAFETY: the event's context is the address of a live CQ of
            // this library; the out pointers are the caller's.
            unsafe {
                cq.write(p);
                cq_context.write((*p).cq_context);
            }
            0
        }
        Err(e) => errno::minus_one(errno::of(&e)),
    }
}

/// `ibv_ack_cq_events` (TEMP).
///
/// # Safety
/// `cq` live.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: u32) {
    // SAFETY: the caller's contract.
    if let Ok(c) = unsafe { Cq::from_c(cq) } {
        let _ = c.with(|q| q.ack_events(nevents));
    }
}
