//! The context's async events: `ibv_get_async_event`,
//! `ibv_ack_async_event`, `ibv_event_type_str`.
//!
//! An event of a CQ, QP or SRQ names the C object (`event.element.cq`...),
//! which uverbs gives back as the event's context (the object's address,
//! set when it was created); the event stays counted by its object
//! (`AsyncEvent::defer_ack`) until the program hands the copied struct to
//! `ibv_ack_async_event`, from any thread, which acknowledges one event of
//! that object (its destroy waits for that, as in libibverbs). Port and
//! device events need no acknowledgement.

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::ffi::{c_char, c_int, c_void, CStr};

use uverbs::{AsyncElement, AsyncEventType, EventAffiliation};

use crate::{
    context::Context,
    errno,
    layout::{
        context::ibv_context,
        device::{ibv_async_event, ibv_async_event_element},
    },
};

/// The `element` of one event, or `None` for an event of an object whose
/// destroy is already under way (uverbs acknowledged it; libibverbs would
/// never see it: the kernel drops a destroyed object's events).
fn element(ev: &uverbs::AsyncEvent) -> Option<ibv_async_event_element> {
    let object = |addr: u64| ibv_async_event_element {
        cq: core::ptr::with_exposed_provenance_mut::<c_void>(addr as usize),
    };
    Some(match *ev.element() {
        AsyncElement::Cq(_) | AsyncElement::Qp(_) | AsyncElement::Srq(_) => object(ev.context()?),
        // No WQ is ever created through this library: the kernel's
        // `user_handle`, as libibverbs passes it on.
        AsyncElement::Wq(handle) => object(handle),
        AsyncElement::Port(port) => ibv_async_event_element {
            port_num: c_int::from(port),
        },
        AsyncElement::Device => ibv_async_event_element { port_num: 0 },
        AsyncElement::Gone(_) => return None,
    })
}

/// `ibv_get_async_event`: waits for the context's next async event (or
/// fails with `EAGAIN` at once when the program made `ctx->async_fd`
/// `O_NONBLOCK` and none is queued); 0, or -1 and `errno`.
///
/// # Safety
/// `context` is an open context of this library (or NULL), `event` a
/// writable `struct ibv_async_event` (or NULL).
#[export_name = "uverbs_ibv_get_async_event"]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::minus_one(e),
    };
    if event.is_null() {
        return errno::minus_one(uverbs::sys::Errno::EINVAL);
    }
    loop {
        let ev = match ctx.uv.get_async_event() {
            Ok(ev) => ev,
            Err(e) => return errno::minus_one(errno::of(&e)),
        };
        let Some(element) = element(&ev) else {
            continue;
        };
        let event_type = c_int::try_from(ev.event_type().0).unwrap_or(c_int::MAX);
        // Counted by its object until `ibv_ack_async_event`.
        ev.defer_ack();
        // SAFETY: `event` is writable (the caller's contract).
        unsafe {
            event.write_unaligned(ibv_async_event {
                element,
                event_type,
            })
        };
        return 0;
    }
}

/// `ibv_ack_async_event`: acknowledges one event of the CQ, QP or SRQ the
/// copied event names (an event nobody may acknowledge twice); nothing to
/// do for port and device events.
///
/// # Safety
/// `event` is NULL or an event `ibv_get_async_event` filled, whose object
/// is not destroyed.
#[export_name = "uverbs_ibv_ack_async_event"]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    if event.is_null() {
        return;
    }
    // SAFETY: `event` is readable (the caller's contract).
    let ev = unsafe { event.read_unaligned() };
    let Ok(t) = u32::try_from(ev.event_type) else {
        return;
    };
    // SAFETY: the element of an object event is the object's pointer,
    // which `ibv_get_async_event` stored (the caller's contract).
    let object = unsafe { ev.element.cq };
    // SAFETY: `object` is the live C object of that type (the caller's
    // contract). The function returns nothing, so a failure (an object
    // this library does not know) is dropped, as libibverbs has no way to
    // report it either.
    let _ = unsafe {
        match AsyncEventType(t).affiliation() {
            EventAffiliation::Cq => crate::cq::ack_async_event(object.cast()),
            EventAffiliation::Qp => crate::qp::ack_async_event(object.cast()),
            EventAffiliation::Srq => crate::srq::ack_async_event(object.cast()),
            _ => Ok(()),
        }
    };
}

/// `ibv_event_type_str`: libibverbs' text for an `enum ibv_event_type`.
///
/// # Safety
/// None: the strings are static.
#[export_name = "uverbs_ibv_event_type_str"]
pub unsafe extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    const TEXT: [&CStr; 20] = [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
    ];
    usize::try_from(event)
        .ok()
        .and_then(|i| TEXT.get(i))
        .map_or(c"unknown".as_ptr(), |s| s.as_ptr())
}

#[cfg(test)]
mod tests;
