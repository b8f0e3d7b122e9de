//! Events: `rdma_get_cm_event`, `rdma_ack_cm_event`, `rdma_event_str`.
//!
//! `rdma_get_cm_event` is one `uverbs::cm::EventChannel::get_event`
//! (blocking, or `EAGAIN` on a channel the program made `O_NONBLOCK`),
//! then what librdmacm does with the event before the program sees it:
//! the route and device after ADDR_RESOLVED / ROUTE_RESOLVED, the new id
//! of a CONNECT_REQUEST (on the listener's channel, with its context, its
//! `verbs` and route filled), a CONNECT_RESPONSE for an id with a QP
//! completed (`CmEvent::complete_connect`: RTR, RTS, the RTU) and reported
//! as ESTABLISHED, or CONNECT_ERROR (after which uverbs drops the kernel's
//! REJECTED or DISCONNECTED for that id, as librdmacm's `connect_error`);
//! a REJECTED id's QP moved to ERR; a MULTICAST_JOIN's QP attached to the group. The event's
//! memory (its private data too) lives until `rdma_ack_cm_event`, which
//! acknowledges the uverbs event; `rdma_destroy_id` waits for that.

#![allow(unsafe_code)]

use core::ffi::{c_char, c_int, CStr};

use uverbs::{
    cm::{CmEvent, CmEventKind, ConnParam, SyncEvent, UdParam},
    sys::Errno,
    QpAttr, QpAttrMask, QpState,
};

use super::{
    channel::Channel,
    fail,
    id::{self, Id},
};
use crate::{
    handle::Handle,
    layout::rdmacm::{
        rdma_cm_event, rdma_cm_event_param, rdma_cm_id, rdma_conn_param, rdma_event_channel,
        rdma_ud_param,
    },
    qp::Qp,
};

/// An event: what `rdma_get_cm_event` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Event {
    /// The C part (the program's pointer is its address).
    pub c: rdma_cm_event,
    /// The uverbs event, acknowledged when this is freed.
    uv: Option<CmEvent>,
    /// The private data `c.param.*.private_data` points at.
    private_data: [u8; 256],
}

crate::handle!(Event: rdma_cm_event = c);

/// A zeroed `param` union.
fn no_param() -> rdma_cm_event_param {
    rdma_cm_event_param {
        conn: rdma_conn_param {
            private_data: core::ptr::null(),
            private_data_len: 0,
            responder_resources: 0,
            initiator_depth: 0,
            flow_control: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            srq: 0,
            qp_num: 0,
        },
    }
}

impl Event {
    /// A new event for the id `id` with nothing filled but the kind and
    /// status.
    fn new(id: *mut rdma_cm_id, kind: c_int, status: c_int) -> Box<Event> {
        let mut e = Box::new(Event {
            c: rdma_cm_event {
                id,
                listen_id: core::ptr::null_mut(),
                event: kind,
                status,
                param: no_param(),
            },
            uv: None,
            private_data: [0; 256],
        });
        // The union's ud member is the larger: zero all of it.
        // SAFETY: writing a plain-data member of the union.
        unsafe {
            core::ptr::write_bytes(
                (&raw mut e.c.param).cast::<u8>(),
                0,
                size_of::<rdma_cm_event_param>(),
            )
        };
        e
    }

    /// Copies the connection parameters (`ucma_copy_conn_event`).
    fn set_conn(&mut self, p: &ConnParam) {
        let n = p.private_data.len().min(self.private_data.len());
        self.private_data[..n].copy_from_slice(&p.private_data[..n]);
        let data = if n > 0 {
            self.private_data.as_ptr().cast()
        } else {
            core::ptr::null()
        };
        self.c.param.conn = rdma_conn_param {
            private_data: data,
            private_data_len: n as u8,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            flow_control: p.flow_control,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            srq: u8::from(p.srq),
            qp_num: p.qp_num,
        };
    }

    /// Copies the UD parameters (`ucma_copy_ud_event`).
    fn set_ud(&mut self, p: &UdParam) {
        let n = p.private_data.len().min(self.private_data.len());
        self.private_data[..n].copy_from_slice(&p.private_data[..n]);
        let data = if n > 0 {
            self.private_data.as_ptr().cast()
        } else {
            core::ptr::null()
        };
        self.c.param.ud = rdma_ud_param {
            private_data: data,
            private_data_len: n as u8,
            ah_attr: crate::qp::attr::c_ah_attr(&p.ah_attr),
            qp_num: p.qp_num,
            qkey: p.qkey,
        };
    }

    /// The parameters the id's QP type reports.
    fn set_params(&mut self, ev: &CmEvent) {
        self.set_either(ev.ud_param(), ev.conn_param());
    }

    fn set_either(&mut self, ud: Option<UdParam>, conn: Option<ConnParam>) {
        if let Some(ud) = ud {
            self.set_ud(&ud);
        } else if let Some(c) = conn {
            self.set_conn(&c);
        }
    }
}

/// The C event of a synchronous id's kept event (its `id->event`), for
/// the id at `id`: freed by `rdma_ack_cm_event` (the library's, when the
/// next call replaces it or the id goes).
pub(crate) fn from_sync(id: *mut rdma_cm_id, ev: &SyncEvent) -> *mut rdma_cm_event {
    let mut e = Event::new(id, ev.kind().raw() as c_int, ev.status());
    e.set_either(ev.ud_param(), ev.conn_param());
    e.into_c()
}

/// Moves the id's QP to ERR (`ucma_modify_qp_err`), if it has one.
fn qp_to_err(i: &Id) {
    let qp = i.qp();
    if qp.is_null() {
        return;
    }
    // SAFETY: the id's QP is a live QP of this library while it is set.
    if let Ok(q) = unsafe { Qp::from_c(qp) } {
        let _ =
            q.qp.with(|q| q.modify(&QpAttr::with_state(QpState::Err), QpAttrMask::STATE));
    }
}

/// What to do with a read event.
enum Outcome {
    /// Hand it to the program.
    Deliver(Box<Event>),
    /// Acknowledge it unseen and read the next.
    Skip,
}

/// librdmacm's processing of one event (`rdma_get_cm_event`'s switch).
fn process(mut ev: CmEvent, i: &'static Id) -> Outcome {
    let kind = ev.kind();
    let mut e = Event::new(i.as_c(), kind.raw() as c_int, ev.status());
    match kind {
        CmEventKind::AddrResolved | CmEventKind::RouteResolved => {
            let st = i.state();
            let filled = match st.uv.as_ref() {
                Some(uv) => i.fill_route(uv),
                None => Err(Errno::EINVAL),
            };
            if filled.is_err() {
                e.c.status = -1;
                e.c.event = if kind == CmEventKind::AddrResolved {
                    CmEventKind::AddrError.raw() as c_int
                } else {
                    CmEventKind::RouteError.raw() as c_int
                };
            }
        }
        CmEventKind::ConnectRequest => {
            e.set_params(&ev);
            let Some(new) = ev.take_new_id() else {
                return Outcome::Skip;
            };
            // SAFETY: plain reads of the listener's fields.
            let (channel, context) = unsafe { ((*i.c()).channel, (*i.c()).context) };
            let p = Id::make(new, channel, context);
            // SAFETY: just made.
            let n = match unsafe { Id::from_c(p) } {
                Ok(n) => n,
                Err(_) => return Outcome::Skip,
            };
            let filled = {
                let st = n.state();
                match st.uv.as_ref() {
                    Some(uv) => n.fill_route(uv),
                    None => Err(Errno::EINVAL),
                }
            };
            if filled.is_err() {
                // As librdmacm: the new id is destroyed (the kernel then
                // rejects the request) and the event is not seen.
                // SAFETY: the new id is ours alone.
                unsafe { id::rdma_destroy_id(p) };
                return Outcome::Skip;
            }
            e.c.listen_id = i.as_c();
            e.c.id = p;
        }
        CmEventKind::ConnectResponse => {
            e.set_params(&ev);
            let qp = i.qp();
            if !qp.is_null() {
                // librdmacm's ucma_process_conn_resp: RTR, RTS and the RTU
                // (`CmEvent::complete_connect`); the event then reads
                // ESTABLISHED, or CONNECT_ERROR with status -1 (librdmacm's
                // `ERR()` value; uverbs keeps the errno in its own event).
                // SAFETY: the id's QP is a live QP of this library.
                let done = unsafe { Qp::from_c(qp) }
                    .and_then(|q| q.qp.with(|q| ev.complete_connect(q).is_ok()))
                    .unwrap_or(false);
                e.c.event = ev.kind().raw() as c_int;
                e.c.status = if done { 0 } else { -1 };
            }
        }
        CmEventKind::Rejected => {
            e.set_params(&ev);
            qp_to_err(i);
        }
        CmEventKind::MulticastJoin | CmEventKind::MulticastError => {
            if kind == CmEventKind::MulticastJoin {
                e.set_params(&ev);
            }
            let group = ev.ud_param();
            match super::multicast::on_event(i, group.as_ref(), kind) {
                Ok(context) => {
                    e.c.param.ud.private_data = context.cast_const();
                }
                Err(_) => {
                    e.c.status = -1;
                    e.c.event = CmEventKind::MulticastError.raw() as c_int;
                }
            }
        }
        _ => e.set_params(&ev),
    }
    e.uv = Some(ev);
    Outcome::Deliver(e)
}

/// `rdma_get_cm_event`: the next event on `channel`, processed as
/// librdmacm processes it; 0 and `*event` set, or -1 and `errno`
/// (`EAGAIN` on an `O_NONBLOCK` channel with nothing queued).
///
/// # Safety
/// `channel` is NULL or a live channel; `event` a writable pointer.
#[export_name = "uverbs_rdma_get_cm_event"]
pub unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    if event.is_null() {
        return fail(Errno::EINVAL);
    }
    // SAFETY: the caller's contract.
    let ch = match unsafe { Channel::from_c(channel) } {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    loop {
        let ev = match ch.uv.get_event() {
            Ok(ev) => ev,
            Err(e) => return fail(super::of(&e)),
        };
        let Some(i) = id::lookup(ev.uid()) else {
            // Not an id of this library's C layer: acknowledged unseen.
            continue;
        };
        if let Outcome::Deliver(e) = process(ev, i) {
            // SAFETY: the caller's contract.
            unsafe { event.write(e.into_c()) };
            return 0;
        }
    }
}

/// `rdma_ack_cm_event`: frees the event and acknowledges it (an
/// `rdma_destroy_id` waiting for it proceeds).
///
/// # Safety
/// `event` is NULL or an event `rdma_get_cm_event` returned, not yet
/// acknowledged; the program uses it no more.
#[export_name = "uverbs_rdma_ack_cm_event"]
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    if event.is_null() {
        return fail(Errno::EINVAL);
    }
    // SAFETY: the caller's contract: made by `into_c`, given up now.
    unsafe { Event::free(event) };
    0
}

/// `rdma_event_str`: the event type's name, `"UNKNOWN EVENT"` for a
/// number rdma_cma.h does not define.
///
/// # Safety
/// None.
#[export_name = "uverbs_rdma_event_str"]
pub unsafe extern "C" fn rdma_event_str(event: c_int) -> *const c_char {
    let kind = u32::try_from(event)
        .map(CmEventKind::from_raw)
        .unwrap_or(CmEventKind::Unknown(u32::MAX));
    event_name(kind).as_ptr()
}

/// The NUL-terminated name of an event kind.
fn event_name(kind: CmEventKind) -> &'static CStr {
    use CmEventKind::*;
    match kind {
        AddrResolved => c"RDMA_CM_EVENT_ADDR_RESOLVED",
        AddrError => c"RDMA_CM_EVENT_ADDR_ERROR",
        RouteResolved => c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        RouteError => c"RDMA_CM_EVENT_ROUTE_ERROR",
        ConnectRequest => c"RDMA_CM_EVENT_CONNECT_REQUEST",
        ConnectResponse => c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        ConnectError => c"RDMA_CM_EVENT_CONNECT_ERROR",
        Unreachable => c"RDMA_CM_EVENT_UNREACHABLE",
        Rejected => c"RDMA_CM_EVENT_REJECTED",
        Established => c"RDMA_CM_EVENT_ESTABLISHED",
        Disconnected => c"RDMA_CM_EVENT_DISCONNECTED",
        DeviceRemoval => c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        MulticastJoin => c"RDMA_CM_EVENT_MULTICAST_JOIN",
        MulticastError => c"RDMA_CM_EVENT_MULTICAST_ERROR",
        AddrChange => c"RDMA_CM_EVENT_ADDR_CHANGE",
        TimewaitExit => c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
        Unknown(_) => c"UNKNOWN EVENT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_are_the_kinds_names() {
        for v in 0..16 {
            let k = CmEventKind::from_raw(v);
            assert_eq!(event_name(k).to_str().unwrap(), k.as_str());
        }
        // SAFETY: no pointer argument.
        let s = unsafe { CStr::from_ptr(rdma_event_str(99)) };
        assert_eq!(s, c"UNKNOWN EVENT");
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(rdma_event_str(-1)) };
        assert_eq!(s, c"UNKNOWN EVENT");
    }
}
