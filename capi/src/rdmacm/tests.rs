//! The C entry points on a fake ucma (uverbs' `FakeKernel` answering
//! rdma_cm commands as the kernel's `ucma_write` does): ids, events and
//! their memory, connection requests, non-blocking channels, synchronous
//! ids. No device: the fake reports no node GUID, so `id->verbs` stays
//! NULL (what librdmacm has before an id is on a device).

#![allow(unsafe_code)]

use core::{
    ffi::{c_int, c_void},
    ptr::null_mut,
};
use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use uverbs::{
    abi,
    sys::{fake::FakeKernel, Errno, Kernel, Readiness},
};

use super::{
    channel::{rdma_create_event_channel, rdma_destroy_event_channel},
    event::{rdma_ack_cm_event, rdma_get_cm_event},
    id::{rdma_create_id, rdma_destroy_id, rdma_resolve_addr, rdma_resolve_route},
    RDMA_PS_TCP, RDMA_PS_UDP,
};
use crate::{
    device::test_kernel,
    layout::rdmacm::{rdma_cm_event, rdma_cm_id, rdma_event_channel},
};

const CREATE_ID: u32 = 0;
const DESTROY_ID: u32 = 1;
const GET_EVENT: u32 = 12;
const RESOLVE_ADDR: u32 = 21;
const RESOLVE_ROUTE: u32 = 4;

const EV_ADDR_RESOLVED: u32 = 0;
const EV_ROUTE_ERROR: u32 = 3;
const EV_CONNECT_REQUEST: u32 = 4;
const EV_ESTABLISHED: u32 = 9;

#[derive(Default)]
struct State {
    next_id: u32,
    /// The uid each kernel id was created with.
    uids: HashMap<u32, u64>,
    events: VecDeque<abi::RdmaUcmEventResp>,
    /// Events handed out per kernel id (`events_reported`).
    reported: HashMap<u32, u32>,
    /// Events to queue when a command arrives (command → event kind, status).
    answer: HashMap<u32, (u32, i32)>,
}

/// A ucma that creates ids, hands out queued events, and answers the
/// commands of `answer` with an event for the id.
struct Ucma {
    kernel: Arc<FakeKernel>,
    state: Arc<Mutex<State>>,
}

fn zeroed_event() -> abi::RdmaUcmEventResp {
    // SAFETY: a plain-data kernel struct: all zero is valid.
    unsafe { core::mem::zeroed() }
}

impl Ucma {
    fn new() -> Self {
        let kernel = Arc::new(FakeKernel::new());
        let state = Arc::new(Mutex::new(State {
            next_id: 40,
            ..State::default()
        }));
        let st = state.clone();
        kernel.on_ucma(move |buf, resp| {
            let cmd = u32::from_ne_bytes(buf[0..4].try_into().unwrap());
            let body = &buf[8..];
            let mut s = st.lock().unwrap();
            match cmd {
                CREATE_ID => {
                    s.next_id += 1;
                    let id = s.next_id;
                    let uid = u64::from_ne_bytes(body[0..8].try_into().unwrap());
                    s.uids.insert(id, uid);
                    resp[..4].copy_from_slice(&id.to_ne_bytes());
                }
                DESTROY_ID => {
                    let id = u32::from_ne_bytes(body[8..12].try_into().unwrap());
                    let n = s.reported.remove(&id).unwrap_or(0);
                    resp[..4].copy_from_slice(&n.to_ne_bytes());
                }
                GET_EVENT => {
                    let Some(ev) = s.events.pop_front() else {
                        return Err(Errno::EAGAIN);
                    };
                    // CONNECT_REQUEST counts against the listener (the
                    // uid's id), other events against their id.
                    let counted = s
                        .uids
                        .iter()
                        .find(|(_, u)| **u == ev.uid)
                        .map(|(k, _)| *k)
                        .unwrap_or(ev.id);
                    *s.reported.entry(counted).or_default() += 1;
                    // SAFETY: plain data, read as its bytes.
                    let bytes = unsafe {
                        core::slice::from_raw_parts(
                            (&raw const ev).cast::<u8>(),
                            size_of::<abi::RdmaUcmEventResp>(),
                        )
                    };
                    resp.copy_from_slice(&bytes[..resp.len()]);
                }
                _ => {
                    if let Some(&(kind, status)) = s.answer.get(&cmd) {
                        // The commands answered here start with the id.
                        let id = u32::from_ne_bytes(body[0..4].try_into().unwrap());
                        let mut ev = zeroed_event();
                        ev.uid = s.uids[&id];
                        ev.id = id;
                        ev.event = kind;
                        ev.status = status as u32;
                        s.events.push_back(ev);
                    }
                    resp.fill(0);
                }
            }
            Ok(())
        });
        let st = state.clone();
        kernel.on_wait_readable(move |timeout| {
            let deadline = timeout.map(|t| Instant::now() + t);
            loop {
                if !st.lock().unwrap().events.is_empty() {
                    return Ok(Readiness::Readable);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(Readiness::TimedOut);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Ucma { kernel, state }
    }

    fn dyn_kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }

    /// Queues an event for the kernel id `id`, reported to `uid`.
    fn push(&self, ev: abi::RdmaUcmEventResp) {
        self.state.lock().unwrap().events.push_back(ev);
    }

    fn uid_of(&self, kernel_id: u32) -> u64 {
        self.state.lock().unwrap().uids[&kernel_id]
    }

    fn last_id(&self) -> u32 {
        self.state.lock().unwrap().next_id
    }
}

/// Writes connection parameters into the event's `param` union (whose
/// `conn` member is a prefix of the `ud` member the struct declares).
fn set_conn(ev: &mut abi::RdmaUcmEventResp, qp_num: u32, data: &[u8]) {
    // SAFETY: a plain-data kernel struct: all zero is valid.
    let mut c: abi::RdmaUcmConnParam = unsafe { core::mem::zeroed() };
    c.qp_num = qp_num;
    c.private_data[..data.len()].copy_from_slice(data);
    c.private_data_len = data.len() as u8;
    const { assert!(size_of::<abi::RdmaUcmConnParam>() <= size_of::<abi::RdmaUcmUdParam>()) };
    // SAFETY: `conn` is a prefix of the union's bytes (checked above);
    // both are plain data.
    unsafe {
        (&raw mut ev.param)
            .cast::<abi::RdmaUcmConnParam>()
            .write_unaligned(c)
    };
}

fn errno() -> Errno {
    Errno::last()
}

/// A new id on `ch` (NULL: synchronous) with `context`.
fn create(ch: *mut rdma_event_channel, context: *mut c_void, ps: c_int) -> *mut rdma_cm_id {
    let mut id = null_mut();
    // SAFETY: a live channel (or NULL) and a writable pointer.
    let rc = unsafe { rdma_create_id(ch, &mut id, context, ps) };
    assert_eq!(rc, 0, "{}", errno());
    id
}

fn get(ch: *mut rdma_event_channel) -> *mut rdma_cm_event {
    let mut ev = null_mut();
    // SAFETY: a live channel and a writable pointer.
    assert_eq!(unsafe { rdma_get_cm_event(ch, &mut ev) }, 0, "{}", errno());
    ev
}

#[test]
fn a_connection_request_brings_a_new_id_and_its_private_data() {
    let u = Ucma::new();
    test_kernel::with(u.dyn_kernel(), || {
        let ch = rdma_create_event_channel_checked();
        let ctx = 0x5eed as *mut c_void;
        let listener = create(ch, ctx, RDMA_PS_TCP);
        let lid = u.last_id();
        // SAFETY: the id just made.
        unsafe {
            assert_eq!((*listener).channel, ch);
            assert_eq!((*listener).context, ctx);
            assert_eq!((*listener).ps, RDMA_PS_TCP);
            assert_eq!((*listener).qp_type, super::IBV_QPT_RC);
            assert!((*listener).verbs.is_null() && (*listener).qp.is_null());
        }
        let mut ev = zeroed_event();
        ev.uid = u.uid_of(lid);
        ev.id = 77; // the kernel's new id
        ev.event = EV_CONNECT_REQUEST;
        set_conn(&mut ev, 0x1234, b"hello");
        u.push(ev);
        let e = get(ch);
        // SAFETY: the event and the ids it names are live until acked.
        unsafe {
            assert_eq!((*e).event, EV_CONNECT_REQUEST as c_int);
            assert_eq!((*e).status, 0);
            assert_eq!((*e).listen_id, listener);
            let new = (*e).id;
            assert!(!new.is_null() && new != listener);
            assert_eq!((*new).channel, ch, "on the listener's channel");
            assert_eq!((*new).context, ctx, "with the listener's context");
            assert_eq!((*new).ps, RDMA_PS_TCP);
            let conn = (*e).param.conn;
            assert_eq!(conn.qp_num, 0x1234);
            assert_eq!(conn.private_data_len, 5);
            let data = core::slice::from_raw_parts(conn.private_data.cast::<u8>(), 5);
            assert_eq!(data, b"hello");
            // The listener's event is held by this thread: its destroy
            // refuses (librdmacm would wait forever) and leaves it.
            assert_eq!(rdma_destroy_id(listener), -1);
            assert_eq!(errno(), Errno::EBUSY);
            assert_eq!((*listener).context, ctx);
            assert_eq!(rdma_ack_cm_event(e), 0);
            assert_eq!(rdma_destroy_id(new), 0, "{}", errno());
            assert_eq!(rdma_destroy_id(listener), 0, "{}", errno());
            rdma_destroy_event_channel(ch);
        }
    });
}

fn rdma_create_event_channel_checked() -> *mut rdma_event_channel {
    // SAFETY: no arguments.
    let ch = unsafe { rdma_create_event_channel() };
    assert!(!ch.is_null(), "{}", errno());
    ch
}

#[test]
fn a_nonblocking_channel_answers_eagain_and_ud_events_carry_ud_params() {
    let u = Ucma::new();
    test_kernel::with(u.dyn_kernel(), || {
        let ch = rdma_create_event_channel_checked();
        // SAFETY: the channel's fd, made non-blocking as programs do.
        unsafe {
            let fd = (*ch).fd;
            let fl = libc::fcntl(fd, libc::F_GETFL);
            assert_eq!(libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK), 0);
        }
        let mut ev = null_mut();
        // SAFETY: a live channel and a writable pointer.
        assert_eq!(unsafe { rdma_get_cm_event(ch, &mut ev) }, -1);
        assert_eq!(errno(), Errno::EAGAIN);
        let id = create(ch, null_mut(), RDMA_PS_UDP);
        // SAFETY: the id just made.
        assert_eq!(unsafe { (*id).qp_type }, super::IBV_QPT_UD);
        let mut r = zeroed_event();
        r.uid = u.uid_of(u.last_id());
        r.id = u.last_id();
        r.event = EV_ESTABLISHED;
        r.param.qp_num = 0x42;
        r.param.qkey = uverbs::cm::RDMA_UDP_QKEY;
        r.param.private_data[..3].copy_from_slice(b"abc");
        r.param.private_data_len = 3;
        u.push(r);
        let e = get(ch);
        // SAFETY: the event is live until acked.
        unsafe {
            assert_eq!((*e).event, EV_ESTABLISHED as c_int);
            assert_eq!((*e).id, id);
            assert!((*e).listen_id.is_null());
            let ud = (*e).param.ud;
            assert_eq!(ud.qp_num, 0x42);
            assert_eq!(ud.qkey, uverbs::cm::RDMA_UDP_QKEY);
            assert_eq!(ud.private_data_len, 3);
            assert_eq!(
                core::slice::from_raw_parts(ud.private_data.cast::<u8>(), 3),
                b"abc"
            );
            assert_eq!(rdma_ack_cm_event(e), 0);
            assert_eq!(rdma_ack_cm_event(null_mut()), -1);
            assert_eq!(rdma_destroy_id(id), 0, "{}", errno());
            rdma_destroy_event_channel(ch);
        }
    });
}

#[test]
fn a_synchronous_id_waits_and_keeps_its_event() {
    let u = Ucma::new();
    u.state.lock().unwrap().answer.extend([
        (RESOLVE_ADDR, (EV_ADDR_RESOLVED, 0)),
        (RESOLVE_ROUTE, (EV_ROUTE_ERROR, -110)),
    ]);
    test_kernel::with(u.dyn_kernel(), || {
        let id = create(null_mut(), null_mut(), RDMA_PS_TCP);
        // SAFETY: the id just made, and its own channel.
        unsafe {
            let ch = (*id).channel;
            assert!(!ch.is_null(), "a synchronous id has a channel of its own");
            assert!(libc::fcntl((*ch).fd, libc::F_GETFD) >= 0);
            assert!((*id).event.is_null());
            let dst = super::addr::to_storage(Some("192.0.2.9:7471".parse().unwrap()));
            let rc = rdma_resolve_addr(id, null_mut(), (&raw const dst).cast_mut().cast(), 2000);
            assert_eq!(rc, 0, "{}", errno());
            assert!(!(*id).event.is_null(), "the answer stays in id->event");
            assert_eq!((*(*id).event).event, EV_ADDR_RESOLVED as c_int);
            assert_eq!((*(*id).event).id, id);
            // The route fails: -1 with the status's errno, the event kept.
            assert_eq!(rdma_resolve_route(id, 2000), -1);
            assert_eq!(errno(), Errno::ETIMEDOUT);
            assert_eq!((*(*id).event).event, EV_ROUTE_ERROR as c_int);
            assert_eq!((*(*id).event).status, -110);
            // Its events were acknowledged as read: destroy does not wait.
            assert_eq!(rdma_destroy_id(id), 0, "{}", errno());
        }
    });
}
