//! What librdmacm's convenience layer needs from `uverbs::cm`, on the fake
//! kernel: synchronous ids (`rdma_create_id` with no channel), `get_request`,
//! `create_ep` with the QP and CQs librdmacm makes, the CONNECT_RESPONSE
//! processing for ids with a QP, and ECE.
//!
//! The fake answers rdma_cm commands as `drivers/infiniband/core/ucma.c`
//! frames them; in `auto` mode it also queues the event the real CM would
//! send next (ADDR_RESOLVED after RESOLVE_ADDR, ROUTE_RESOLVED after
//! RESOLVE_ROUTE, CONNECT_RESPONSE after CONNECT, ESTABLISHED after ACCEPT).

use std::{
    collections::{HashMap, VecDeque},
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use zerocopy::{FromZeros, IntoBytes};

use uverbs::{
    abi,
    cm::{
        create_ep_with, getaddrinfo, AddrHints, AiFlags, CmEventKind, CmId, ConnParam, Ece, EpQp,
        EpQpInit, EventChannel, PortSpace, RdmaAddrInfo,
    },
    sys::{fake::FakeKernel, Errno, Kernel, Readiness},
    testing::rxe,
    QpCap, QpState, QpType,
};

const CONNECT: u32 = 6;
const ACCEPT: u32 = 8;
const REJECT: u32 = 9;
const INIT_QP_ATTR: u32 = 11;
const MIGRATE_ID: u32 = 18;
const BIND: u32 = 20;
const RESOLVE_ADDR: u32 = 21;

const EV_ADDR_RESOLVED: u32 = 0;
const EV_ROUTE_RESOLVED: u32 = 2;
const EV_ROUTE_ERROR: u32 = 3;
const EV_CONNECT_REQUEST: u32 = 4;
const EV_CONNECT_RESPONSE: u32 = 5;
const EV_REJECTED: u32 = 8;
const EV_ESTABLISHED: u32 = 9;
const EV_DISCONNECTED: u32 = 10;
const EV_ADDR_CHANGE: u32 = 14;

#[derive(Default)]
struct State {
    /// Every command: number and body (the response address zeroed).
    seen: Vec<(u32, Vec<u8>)>,
    next_id: u32,
    events: VecDeque<Vec<u8>>,
    reported: HashMap<u32, u32>,
    /// uid of each kernel id (CREATE_ID), for the events `auto` queues.
    uids: HashMap<u32, u64>,
    /// Port space of each kernel id (CREATE_ID).
    ps: HashMap<u32, u16>,
    fail: HashMap<u32, Errno>,
    auto: bool,
}

/// A 336-byte `rdma_ucm_event_resp`; `counted` is the kernel id the fake
/// counts it against (the listener for CONNECT_REQUEST), kept in the
/// `reserved` word, which the fake clears.
fn event(uid: u64, id: u32, event: u32, status: i32, counted: u32) -> Vec<u8> {
    let mut ev = vec![0u8; 336];
    ev[0..8].copy_from_slice(&uid.to_ne_bytes());
    ev[8..12].copy_from_slice(&id.to_ne_bytes());
    ev[12..16].copy_from_slice(&event.to_ne_bytes());
    ev[16..20].copy_from_slice(&status.to_ne_bytes());
    ev[324..328].copy_from_slice(&counted.to_ne_bytes());
    ev
}

fn event_for(id: &CmId, kind: u32, status: i32) -> Vec<u8> {
    event(id.uid(), id.kernel_id(), kind, status, id.kernel_id())
}

/// Sets the private data of a connected-port-space event.
fn with_private_data(mut ev: Vec<u8>, data: &[u8]) -> Vec<u8> {
    // param.conn at 20: qp_num(4) qkey(4) private_data[256] len(1) ...
    ev[28..28 + data.len()].copy_from_slice(data);
    ev[20 + 264] = data.len() as u8;
    ev
}

/// Sets the ECE options of an event.
fn with_ece(mut ev: Vec<u8>, vendor: u32, attr_mod: u32) -> Vec<u8> {
    ev[328..332].copy_from_slice(&vendor.to_ne_bytes());
    ev[332..336].copy_from_slice(&attr_mod.to_ne_bytes());
    ev
}

struct Cm {
    kernel: Arc<FakeKernel>,
    state: Arc<Mutex<State>>,
}

impl Cm {
    /// The rdma_cm device on `kernel` (a fresh fake, or the rxe fake's).
    fn on(kernel: Arc<FakeKernel>) -> Self {
        let state = Arc::new(Mutex::new(State {
            next_id: 100,
            ..State::default()
        }));
        let st = state.clone();
        kernel.on_ucma(move |buf, resp| {
            let cmd = u32::from_ne_bytes(buf[0..4].try_into().unwrap());
            let mut body = buf[8..].to_vec();
            let response_at = match cmd {
                0 => Some(8),
                1 | 5 | 11 | 12 | 17 | 18 | 19 | 22 => Some(0),
                _ => None,
            };
            if let Some(at) = response_at {
                body[at..at + 8].fill(0);
            }
            let mut s = st.lock().unwrap();
            s.seen.push((cmd, body.clone()));
            if let Some(e) = s.fail.get(&cmd) {
                return Err(*e);
            }
            let id_at = |off: usize| u32::from_ne_bytes(body[off..off + 4].try_into().unwrap());
            match cmd {
                0 => {
                    s.next_id += 1;
                    let id = s.next_id;
                    let uid = u64::from_ne_bytes(body[0..8].try_into().unwrap());
                    s.uids.insert(id, uid);
                    let ps = u16::from_ne_bytes(body[16..18].try_into().unwrap());
                    s.ps.insert(id, ps);
                    resp.copy_from_slice(&id.to_ne_bytes());
                }
                1 => {
                    let n = s.reported.remove(&id_at(8)).unwrap_or(0);
                    resp.copy_from_slice(&n.to_ne_bytes());
                }
                12 => {
                    let Some(ev) = s.events.pop_front() else {
                        return Err(Errno::EAGAIN);
                    };
                    let counted = u32::from_ne_bytes(ev[324..328].try_into().unwrap());
                    *s.reported.entry(counted).or_default() += 1;
                    let mut ev = ev;
                    ev[324..328].fill(0);
                    resp.copy_from_slice(&ev[..resp.len()]);
                }
                // QUERY (address): the rxe fake's device.
                19 => {
                    let mut a = vec![0u8; resp.len()];
                    a[0..8].copy_from_slice(&rxe::NODE_GUID.to_be_bytes());
                    a[8] = 1;
                    a[resp.len() - 8..resp.len() - 4].copy_from_slice(&u32::MAX.to_ne_bytes());
                    resp.copy_from_slice(&a);
                }
                // JOIN_MCAST: the join's own kernel id.
                22 => {
                    s.next_id += 1;
                    resp.fill(0);
                    resp[0..4].copy_from_slice(&s.next_id.to_ne_bytes());
                }
                // INIT_QP_ATTR: what the kernel's CM gives an RC QP of a
                // RoCE port (cma.c `rdma_init_qp_attr`, cm.c
                // `cm_init_qp_{init,rtr,rts}_attr`).
                11 => {
                    let mut a = abi::IbUverbsQpAttr::new_zeroed();
                    a.qp_state = id_at(12);
                    let udp = s.ps.get(&id_at(8)) == Some(&0x0111);
                    a.qp_attr_mask = match a.qp_state {
                        // UD: STATE | PKEY_INDEX | PORT | QKEY
                        1 if udp => 1 | 16 | 32 | 64,
                        // STATE | ACCESS_FLAGS | PKEY_INDEX | PORT
                        1 => 1 | 8 | 16 | 32,
                        // STATE | AV | PATH_MTU | RQ_PSN | MIN_RNR_TIMER
                        // | MAX_DEST_RD_ATOMIC | DEST_QPN
                        2 => 1 | 128 | 256 | 4096 | 32768 | 131072 | (1 << 20),
                        // STATE | TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN
                        // | MAX_QP_RD_ATOMIC
                        _ => 1 | 512 | 1024 | 2048 | 65536 | 8192,
                    };
                    a.port_num = 1;
                    a.path_mtu = 3;
                    a.dest_qp_num = 0x42;
                    a.ah_attr.port_num = 1;
                    a.ah_attr.is_global = 1;
                    a.ah_attr.grh.hop_limit = 1;
                    a.ah_attr.grh.dgid = rxe::IPV4_GID;
                    a.timeout = 14;
                    a.retry_cnt = 7;
                    a.rnr_retry = 7;
                    a.max_rd_atomic = 1;
                    a.max_dest_rd_atomic = 1;
                    a.min_rnr_timer = 12;
                    a.qkey = uverbs::cm::RDMA_UDP_QKEY;
                    resp.copy_from_slice(a.as_bytes());
                }
                _ => resp.fill(0),
            }
            if cmd == ACCEPT && body[0..8] != [0; 8] {
                // The kernel takes the accepting id's uid from ACCEPT.
                let uid = u64::from_ne_bytes(body[0..8].try_into().unwrap());
                s.uids.insert(id_at(280), uid);
            }
            if s.auto {
                let (id, ev) = match cmd {
                    RESOLVE_ADDR => (id_at(0), Some(EV_ADDR_RESOLVED)),
                    4 => (id_at(0), Some(EV_ROUTE_RESOLVED)),
                    CONNECT => (id_at(272), Some(EV_CONNECT_RESPONSE)),
                    // An ACCEPT with a uid is the passive side's.
                    ACCEPT if body[0..8] != [0; 8] => (id_at(280), Some(EV_ESTABLISHED)),
                    _ => (0, None),
                };
                if let (Some(ev), Some(&uid)) = (ev, s.uids.get(&id)) {
                    s.events.push_back(event(uid, id, ev, 0, id));
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
        Cm { kernel, state }
    }

    fn new() -> Self {
        Self::on(Arc::new(FakeKernel::new()))
    }

    fn dyn_kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }

    fn push(&self, ev: Vec<u8>) {
        self.state.lock().unwrap().events.push_back(ev);
    }

    fn seen(&self, cmd: u32) -> Vec<Vec<u8>> {
        let s = self.state.lock().unwrap();
        s.seen
            .iter()
            .filter(|(c, _)| *c == cmd)
            .map(|(_, b)| b.clone())
            .collect()
    }

    fn fail(&self, cmd: u32, e: Errno) {
        self.state.lock().unwrap().fail.insert(cmd, e);
    }

    fn auto(&self) {
        self.state.lock().unwrap().auto = true;
    }
}

#[test]
fn a_sync_id_has_a_channel_of_its_own_and_waits_for_each_answer() {
    let k = Cm::new();
    let opens = || {
        k.kernel
            .calls()
            .iter()
            .filter(|c| format!("{c:?}").contains("rdma_cm"))
            .count()
    };
    let before = opens();
    let id = CmId::create_sync_with(k.dyn_kernel(), PortSpace::Tcp).unwrap();
    let other = CmId::create_sync_with(k.dyn_kernel(), PortSpace::Tcp).unwrap();
    assert_eq!(opens() - before, 2, "one rdma_cm fd per synchronous id");
    assert!(id.is_sync() && other.is_sync());
    assert!(id.sync_event().is_none());

    let dst: SocketAddr = "192.0.2.1:7471".parse().unwrap();
    k.push(event_for(&id, EV_ADDR_RESOLVED, 0));
    id.resolve_addr(None, dst, Duration::from_secs(2)).unwrap();
    assert_eq!(id.sync_event().unwrap().kind(), CmEventKind::AddrResolved);

    // ROUTE_ERROR with -ETIMEDOUT: that errno, and the event is kept.
    k.push(event_for(&id, EV_ROUTE_ERROR, -110));
    let e = id.resolve_route(Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.errno(), Errno::ETIMEDOUT);
    assert_eq!(e.op(), "rdma_resolve_route");
    let kept = id.sync_event().unwrap();
    assert_eq!(
        (kept.kind(), kept.status()),
        (CmEventKind::RouteError, -110)
    );

    // REJECTED: ECONNREFUSED, with the peer's private data kept.
    k.push(with_private_data(event_for(&id, EV_REJECTED, 28), b"busy"));
    let e = id.connect(&ConnParam::new()).unwrap_err();
    assert_eq!(e.errno(), Errno::ECONNREFUSED);
    let kept = id.sync_event().unwrap();
    assert_eq!(kept.kind(), CmEventKind::Rejected);
    assert_eq!(kept.private_data(), b"busy");
    assert_eq!(kept.conn_param().unwrap().private_data, b"busy");

    // A positive status of another event is its own errno.
    k.push(event_for(&id, EV_DISCONNECTED, 5));
    assert_eq!(id.disconnect().unwrap_err().errno(), Errno::EIO);

    // Every event was acknowledged as it was read: destroy does not wait.
    id.destroy().unwrap();
    other.destroy().unwrap();
}

#[test]
fn async_ids_do_not_wait_and_ud_accept_never_does() {
    let k = Cm::new();
    let ch = EventChannel::open_with(k.dyn_kernel()).unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    assert!(!id.is_sync());
    id.resolve_addr(None, "192.0.2.1:1".parse().unwrap(), Duration::from_secs(1))
        .unwrap();
    assert!(id.sync_event().is_none());
    // Nothing queued: a waiting accept would hang.
    let ud = CmId::create_sync_with(k.dyn_kernel(), PortSpace::Udp).unwrap();
    ud.accept(&ConnParam::new()).unwrap();
    assert!(ud.sync_event().is_none());
    // The connected accept waits for ESTABLISHED.
    let rc = CmId::create_sync_with(k.dyn_kernel(), PortSpace::Tcp).unwrap();
    k.push(event_for(&rc, EV_ESTABLISHED, 0));
    rc.accept(&ConnParam::new()).unwrap();
    assert_eq!(rc.sync_event().unwrap().kind(), CmEventKind::Established);
}

#[test]
fn get_request_gives_a_sync_id_with_its_request_and_refuses_the_rest() {
    let k = Cm::new();
    let ch = EventChannel::open_with(k.dyn_kernel()).unwrap();
    let not_sync = ch.create_id(PortSpace::Tcp).unwrap();
    assert_eq!(
        not_sync.get_request().unwrap_err().errno(),
        Errno::EINVAL,
        "librdmacm: EINVAL for an id with a channel"
    );

    let listen = CmId::create_sync_with(k.dyn_kernel(), PortSpace::Tcp).unwrap();
    let req = |new_kid: u32| {
        with_private_data(
            event(
                listen.uid(),
                new_kid,
                EV_CONNECT_REQUEST,
                0,
                listen.kernel_id(),
            ),
            b"hi",
        )
    };
    k.push(req(777));
    let ep = listen.get_request().unwrap();
    assert!(ep.qp.is_none(), "no QP attributes were given");
    assert_eq!(ep.id.kernel_id(), 777);
    assert!(ep.id.is_sync());
    let kept = ep.id.sync_event().unwrap();
    assert_eq!(kept.kind(), CmEventKind::ConnectRequest);
    assert_eq!(kept.private_data(), b"hi");
    assert!(
        listen.sync_event().is_none(),
        "the new id keeps the request"
    );
    // The new id moved to an fd of its own: MIGRATE_ID names it.
    let migrations = k.seen(MIGRATE_ID);
    assert_eq!(migrations.len(), 1);
    assert_eq!(&migrations[0][8..12], &777u32.to_ne_bytes());

    // Another event: EINVAL, the listener keeps it.
    k.push(event_for(&listen, EV_ADDR_CHANGE, 0));
    assert_eq!(listen.get_request().unwrap_err().errno(), Errno::EINVAL);
    assert_eq!(listen.sync_event().unwrap().kind(), CmEventKind::AddrChange);
    k.push(event_for(&listen, EV_REJECTED, 28));
    assert_eq!(
        listen.get_request().unwrap_err().errno(),
        Errno::ECONNREFUSED
    );
    ep.id.destroy().unwrap();
    listen.destroy().unwrap();
}

#[test]
fn migrate_to_none_makes_an_id_sync_and_a_channel_makes_it_async() {
    let k = Cm::new();
    let ch = EventChannel::open_with(k.dyn_kernel()).unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.migrate_to(None).unwrap();
    assert!(id.is_sync());
    assert_eq!(id.migrate_to(None).unwrap_err().errno(), Errno::EINVAL);
    k.push(event_for(&id, EV_ADDR_RESOLVED, 0));
    id.resolve_addr(None, "192.0.2.1:1".parse().unwrap(), Duration::from_secs(1))
        .unwrap();
    assert!(id.sync_event().is_some());
    id.migrate_to(Some(&ch)).unwrap();
    assert!(!id.is_sync());
    assert!(
        id.sync_event().is_none(),
        "the kept event goes with the sync"
    );
    assert_eq!(k.seen(MIGRATE_ID).len(), 2);
}

#[test]
fn ece_goes_out_with_connect_and_accept_and_is_read_from_events() {
    let k = Cm::new();
    let ch = EventChannel::open_with(k.dyn_kernel()).unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    assert_eq!(
        id.set_local_ece(Ece::new(0, 1)).unwrap_err().errno(),
        Errno::EINVAL
    );
    id.set_local_ece(Ece::new(0x15b3, 5)).unwrap();
    assert_eq!(id.local_ece(), Ece::new(0x15b3, 5));
    id.connect(&ConnParam::new()).unwrap();
    let body = k.seen(CONNECT).pop().unwrap();
    // conn_param (272), id, reserved, then rdma_ucm_ece.
    assert_eq!(&body[280..284], &0x15b3u32.to_ne_bytes());
    assert_eq!(&body[284..288], &5u32.to_ne_bytes());

    // CONNECT_RESPONSE carries the peer's options.
    k.push(with_ece(event_for(&id, EV_CONNECT_RESPONSE, 0), 0x15b3, 9));
    let ev = ch.get_event().unwrap();
    assert_eq!(ev.kind(), CmEventKind::ConnectResponse);
    drop(ev);
    assert_eq!(id.remote_ece(), Ece::new(0x15b3, 9));

    // A request's options go to the new id; accept answers the peer's
    // vendor with the local options.
    let listen = ch.create_id(PortSpace::Tcp).unwrap();
    k.push(with_ece(
        event(listen.uid(), 555, EV_CONNECT_REQUEST, 0, listen.kernel_id()),
        0x15b3,
        3,
    ));
    let mut ev = ch.get_event().unwrap();
    let new = ev.take_new_id().unwrap();
    drop(ev);
    assert_eq!(new.remote_ece(), Ece::new(0x15b3, 3));
    new.accept(&ConnParam::new()).unwrap();
    let body = k.seen(ACCEPT).pop().unwrap();
    // uid, conn_param, id, reserved, then rdma_ucm_ece.
    assert_eq!(&body[288..292], &0x15b3u32.to_ne_bytes());
    assert_eq!(&body[292..296], &0u32.to_ne_bytes());

    new.reject_ece(b"no").unwrap();
    let body = k.seen(REJECT).pop().unwrap();
    assert_eq!((body[4], body[5]), (2, 35), "length 2, reason 35");
    id.reject(b"").unwrap();
    assert_eq!(k.seen(REJECT).pop().unwrap()[5], 0);
}

/// `id`'s QP as `rdma_create_qp` makes it with no PD or CQs given: four
/// sends and receives of one SGE, CQs and channels of its own.
fn small_ep(id: &CmId) -> EpQp {
    id.create_ep_qp(
        None,
        &EpQpInit::new(QpCap::new(4, 4, 1, 1)),
        None,
        None,
        None,
    )
    .unwrap()
}

/// The rdma_cm fake on the rxe fake's kernel: ids resolve to its device.
fn on_rxe() -> (Arc<rxe::FakeRxe>, Cm) {
    let fake = rxe::fake_rxe();
    let cm = Cm::on(fake.kernel.clone());
    (fake, cm)
}

#[test]
fn complete_connect_turns_a_response_into_established_or_connect_error() {
    let (_fake, k) = on_rxe();
    let ch = EventChannel::open_with(k.dyn_kernel()).unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let ep = small_ep(&id);
    let qp = &ep.qp;
    assert_eq!(qp.state(), QpState::Init);

    k.push(event_for(&id, EV_CONNECT_RESPONSE, 0));
    let mut ev = ch.get_event().unwrap();
    let accepts = k.seen(ACCEPT).len();
    ev.complete_connect(qp).unwrap();
    assert_eq!((ev.kind(), ev.status()), (CmEventKind::Established, 0));
    assert_eq!(ev.to_sync_event().kind(), CmEventKind::Established);
    assert_eq!(qp.state(), QpState::Rts);
    assert_eq!(k.seen(ACCEPT).len(), accepts + 1, "the RTU was asked for");
    // Other events are left alone.
    drop(ev);
    k.push(event_for(&id, EV_DISCONNECTED, 0));
    let mut ev = ch.get_event().unwrap();
    ev.complete_connect(qp).unwrap();
    assert_eq!(ev.kind(), CmEventKind::Disconnected);
    drop(ev);

    // A failure: CONNECT_ERROR with the errno, QP in ERR, and what the
    // peer's CM reports afterwards is dropped.
    let id2 = ch.create_id(PortSpace::Tcp).unwrap();
    let ep2 = small_ep(&id2);
    k.fail(INIT_QP_ATTR, Errno::EINVAL);
    k.push(event_for(&id2, EV_CONNECT_RESPONSE, 0));
    let mut ev = ch.get_event().unwrap();
    let e = ev.complete_connect(&ep2.qp).unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
    assert_eq!((ev.kind(), ev.status()), (CmEventKind::ConnectError, -22));
    assert_eq!(ep2.qp.state(), QpState::Err);
    drop(ev);
    k.state.lock().unwrap().fail.clear();
    k.push(event_for(&id2, EV_REJECTED, 28));
    k.push(event_for(&id2, EV_DISCONNECTED, 0));
    k.push(event_for(&id, EV_ADDR_CHANGE, 0));
    let mut got = Vec::new();
    while let Some(ev) = ch
        .get_event_timeout(Some(Duration::from_millis(50)))
        .unwrap()
    {
        got.push(ev.kind());
    }
    // The dropped ones read as "nothing" once; the loop reads on.
    let _ = ch.get_event_timeout(Some(Duration::from_millis(50)));
    assert!(!got.contains(&CmEventKind::Rejected), "{got:?}");

    // process_qp: REJECTED moves the id's QP to ERR (librdmacm's
    // ucma_modify_qp_err in rdma_get_cm_event), the event stays as it is.
    let id4 = ch.create_id(PortSpace::Tcp).unwrap();
    let ep4 = small_ep(&id4);
    k.push(event_for(&id4, EV_REJECTED, 28));
    let mut ev = loop {
        let ev = ch.get_event().unwrap();
        if ev.is_for(&id4) {
            break ev;
        }
    };
    ev.process_qp(&ep4.qp).unwrap();
    assert_eq!((ev.kind(), ev.status()), (CmEventKind::Rejected, 28));
    assert_eq!(ep4.qp.state(), QpState::Err);
    drop(ev);

    // An ECE vendor other than the local one: EINVAL.
    let id3 = ch.create_id(PortSpace::Tcp).unwrap();
    let ep3 = small_ep(&id3);
    k.push(with_ece(event_for(&id3, EV_CONNECT_RESPONSE, 0), 0x1234, 0));
    let mut ev = loop {
        let ev = ch.get_event().unwrap();
        if ev.is_for(&id3) {
            break ev;
        }
    };
    assert_eq!(
        ev.complete_connect(&ep3.qp).unwrap_err().errno(),
        Errno::EINVAL
    );
    assert_eq!(ev.kind(), CmEventKind::ConnectError);
}

#[test]
fn create_ep_qp_makes_the_cqs_not_given_and_shares_the_device_pd() {
    let (_fake, k) = on_rxe();
    let ch = EventChannel::open_with(k.dyn_kernel()).unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let init = EpQpInit::new(QpCap::new(8, 16, 1, 1)).cq_context(0xc0ffee);
    let ep = id.create_ep_qp(None, &init, None, None, None).unwrap();
    let (send, recv) = (ep.send_cq.as_ref().unwrap(), ep.recv_cq.as_ref().unwrap());
    assert!(send.cqe() >= 8 && recv.cqe() >= 16);
    assert_eq!((send.context(), recv.context()), (0xc0ffee, 0xc0ffee));
    assert!(ep.send_channel.is_some() && ep.recv_channel.is_some());
    assert_eq!(ep.qp.qp_type(), QpType::Rc);

    // A given CQ is used and nothing is made for its side.
    let other = ch.create_id(PortSpace::Tcp).unwrap();
    let ep2 = other
        .create_ep_qp(None, &init, Some(send), None, None)
        .unwrap();
    assert!(ep2.send_cq.is_none() && ep2.send_channel.is_none());
    assert!(ep2.recv_cq.is_some());
    // Both ids use one device PD.
    assert_eq!(
        id.device_pd().unwrap().handle(),
        other.device_pd().unwrap().handle()
    );
    // Nothing to size a CQ by: EINVAL.
    let e = other
        .create_ep_qp(
            None,
            &EpQpInit::new(QpCap::new(0, 1, 1, 1)),
            None,
            None,
            None,
        )
        .unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
}

#[test]
fn create_ep_active_resolves_and_connects_passive_binds_and_gets_requests() {
    let (_fake, k) = on_rxe();
    k.auto();
    let info = getaddrinfo(Some("192.0.2.1"), Some("7471"), None).unwrap();
    let init = EpQpInit::new(QpCap::new(4, 4, 1, 1));
    let ep = create_ep_with(k.dyn_kernel(), &info[0], None, Some(&init)).unwrap();
    assert!(ep.id.is_sync());
    // RESOLVE_ADDR with librdmacm's 2000 ms, then the route.
    let resolve = k.seen(RESOLVE_ADDR).pop().unwrap();
    assert_eq!(&resolve[4..8], &2000u32.to_ne_bytes());
    assert_eq!(
        ep.id.sync_event().unwrap().kind(),
        CmEventKind::RouteResolved
    );
    let qp = ep.qp.as_ref().unwrap();
    assert_eq!(qp.qp.state(), QpState::Init);
    // A synchronous connect with the QP completes the response.
    ep.id.connect_qp(&qp.qp, &ConnParam::new()).unwrap();
    assert_eq!(ep.id.sync_event().unwrap().kind(), CmEventKind::Established);
    assert_eq!(qp.qp.state(), QpState::Rts);

    // Passive: bound to the entry's source; each request gets a QP.
    let hints = AddrHints::new().flags(AiFlags::PASSIVE);
    let info = getaddrinfo(Some("192.0.2.1"), Some("7471"), Some(&hints)).unwrap();
    let server = create_ep_with(k.dyn_kernel(), &info[0], None, Some(&init)).unwrap();
    assert!(server.qp.is_none());
    let bind = k.seen(BIND).pop().unwrap();
    assert_eq!(&bind[8..12], &[2, 0, 0x1d, 0x2f]); // AF_INET, port 7471
    k.push(event(
        server.id.uid(),
        900,
        EV_CONNECT_REQUEST,
        0,
        server.id.kernel_id(),
    ));
    let conn = server.id.get_request().unwrap();
    let cqp = conn.qp.as_ref().unwrap();
    assert_eq!(cqp.qp.state(), QpState::Init);
    conn.id.accept_qp(&cqp.qp, &ConnParam::new()).unwrap();
    assert_eq!(
        conn.id.sync_event().unwrap().kind(),
        CmEventKind::Established
    );

    // No address to use: EINVAL before anything is resolved.
    let bare = RdmaAddrInfo::new(AiFlags::empty(), PortSpace::Tcp, None, None);
    let e = create_ep_with(k.dyn_kernel(), &bare, None, None).unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
}

#[test]
fn max_resources_mean_the_devices_limits_on_connect_and_the_requests_on_accept() {
    let (_fake, k) = on_rxe();
    let ch = EventChannel::open_with(k.dyn_kernel()).unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    // rdma_connect(id, NULL): the device's 128 / 128, 7 retries.
    id.connect(&ConnParam::max_resources()).unwrap();
    let body = k.seen(CONNECT).pop().unwrap();
    // rdma_ucm_conn_param: responder_resources at 266, initiator_depth
    // 267, retry_count 269, rnr_retry_count 270.
    assert_eq!((body[266], body[267]), (128, 128));
    assert_eq!((body[269], body[270]), (7, 7));
    // Explicit values go as they are.
    id.connect(&ConnParam::new().responder_resources(2).initiator_depth(3))
        .unwrap();
    let body = k.seen(CONNECT).pop().unwrap();
    assert_eq!((body[266], body[267]), (2, 3));
    // Above the device's 128: EINVAL before the kernel (ucma_valid_param).
    let connects = k.seen(CONNECT).len();
    let e = id
        .connect(&ConnParam::new().responder_resources(200))
        .unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
    assert_eq!(k.seen(CONNECT).len(), connects);

    // A request asking for 4 / 200: accept(NULL) takes them, capped by the
    // device (200 -> 128), and the QP gets what was accepted.
    let listen = ch.create_id(PortSpace::Tcp).unwrap();
    let mut req = event(listen.uid(), 640, EV_CONNECT_REQUEST, 0, listen.kernel_id());
    req[20 + 266] = 4;
    req[20 + 267] = 200;
    k.push(req);
    let mut ev = ch.get_event().unwrap();
    let new = ev.take_new_id().unwrap();
    drop(ev);
    let ep = small_ep(&new);
    new.accept_qp(&ep.qp, &ConnParam::max_resources()).unwrap();
    let body = k.seen(ACCEPT).pop().unwrap();
    assert_eq!((body[8 + 266], body[8 + 267]), (4, 128));
    assert_eq!(ep.qp.state(), QpState::Rts);
}

#[test]
fn multicast_events_name_their_group_and_process_qp_attaches_unless_send_only() {
    let (_fake, k) = on_rxe();
    let ch = EventChannel::open_with(k.dyn_kernel()).unwrap();
    let id = ch.create_id(PortSpace::Udp).unwrap();
    let ep = small_ep(&id);
    assert_eq!(ep.qp.qp_type(), QpType::Ud);
    let (a, b): (SocketAddr, SocketAddr) = (
        "239.0.0.1:0".parse().unwrap(),
        "239.0.0.2:0".parse().unwrap(),
    );
    id.join_multicast(a, false).unwrap();
    id.join_multicast(b, true).unwrap();
    // Each JOIN_MCAST was answered with the next id the fake handed out.
    assert_eq!(k.seen(22).len(), 2);
    let mb = k.state.lock().unwrap().next_id;
    let ma = mb - 1;
    let join_event = |mc: u32| {
        let mut ev = event(id.uid(), mc, 12, 0, id.kernel_id());
        // param.ud at 20: qp_num, qkey, ah_attr { grh { dgid ... } ... dlid }.
        ev[28..44].copy_from_slice(&[0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 0, 0, 1]);
        ev[52..54].copy_from_slice(&0xc001u16.to_ne_bytes());
        ev[57] = 1; // is_global
        ev
    };
    // The send-only group: no attach, the event stays a join.
    k.push(join_event(mb));
    let mut ev = ch.get_event().unwrap();
    assert_eq!(ev.multicast_group(), Some(b));
    ev.process_qp(&ep.qp).unwrap();
    assert_eq!(ev.kind(), CmEventKind::MulticastJoin);
    drop(ev);
    // The full member: attached (the rxe fake has no ATTACH_MCAST, so it
    // fails), and the event turns into MULTICAST_ERROR with that errno.
    k.push(join_event(ma));
    let mut ev = ch.get_event().unwrap();
    assert_eq!(ev.multicast_group(), Some(a));
    let e = ev.process_qp(&ep.qp).unwrap_err();
    assert_eq!(e.errno(), Errno::EOPNOTSUPP);
    assert_eq!(
        (ev.kind(), ev.status()),
        (CmEventKind::MulticastError, -(Errno::EOPNOTSUPP as i32))
    );
    drop(ev);
    // Not a multicast event: no group.
    k.push(event_for(&id, EV_ADDR_CHANGE, 0));
    assert_eq!(ch.get_event().unwrap().multicast_group(), None);

    id.leave_multicast_qp(&ep.qp, a).unwrap();
    id.leave_multicast(b).unwrap();
    assert_eq!(
        id.leave_multicast(b).unwrap_err().errno(),
        Errno::EADDRNOTAVAIL,
        "librdmacm: a group not joined"
    );
    let leaves = k.seen(17);
    assert_eq!(&leaves[0][8..12], &ma.to_ne_bytes());
    assert_eq!(&leaves[1][8..12], &mb.to_ne_bytes());
}
