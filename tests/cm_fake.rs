//! rdma_cm on the fake kernel: the bytes of every command as the kernel's
//! `ucma_write` parses them, event decoding from exact response bytes, and the
//! acknowledge/destroy accounting.

use std::{
    collections::{HashMap, VecDeque},
    net::SocketAddr,
    os::fd::AsRawFd,
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc, Mutex,
    },
    thread,
    time::{Duration, Instant},
};

use uverbs::{
    cm::{CmEventKind, CmId, ConnParam, EventChannel, PortSpace},
    sys::{fake::FakeKernel, Errno, Kernel, Readiness},
    QpAttrMask, QpState,
};

use uverbs_test_support::bounded::{DESTROY_WAITS, PATIENCE};

/// One command as the kernel sees it: number, `in`, `out`, and the body with
/// the response address (checked non-zero) replaced by zero.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    cmd: u32,
    in_: u16,
    out: u16,
    body: Vec<u8>,
}

/// Where each command's `u64 response` sits in its body.
fn response_at(cmd: u32) -> Option<usize> {
    match cmd {
        0 => Some(8), // CREATE_ID
        // DESTROY_ID, QUERY_ROUTE, INIT_QP_ATTR, GET_EVENT, LEAVE_MCAST,
        // MIGRATE_ID, QUERY, JOIN_MCAST
        1 | 5 | 11 | 12 | 17 | 18 | 19 | 22 => Some(0),
        _ => None,
    }
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    next_id: u32,
    events: VecDeque<Vec<u8>>,
    /// Events handed out per kernel id (the kernel's `events_reported`).
    reported: HashMap<u32, u32>,
    /// Canned responses by command.
    answers: HashMap<u32, Vec<u8>>,
    fail: HashMap<u32, Errno>,
}

/// A kernel that answers rdma_cm commands like ucma does.
struct Ucma {
    kernel: Arc<FakeKernel>,
    state: Arc<Mutex<State>>,
}

impl Ucma {
    fn new() -> Self {
        let kernel = Arc::new(FakeKernel::new());
        let state = Arc::new(Mutex::new(State {
            next_id: 100,
            ..State::default()
        }));
        let st = state.clone();
        kernel.on_ucma(move |buf, resp| {
            let cmd = u32::from_ne_bytes(buf[0..4].try_into().unwrap());
            let in_ = u16::from_ne_bytes(buf[4..6].try_into().unwrap());
            let out = u16::from_ne_bytes(buf[6..8].try_into().unwrap());
            assert_eq!(
                usize::from(in_),
                buf.len() - 8,
                "`in` counts the body bytes"
            );
            assert_eq!(usize::from(out), resp.len());
            let mut body = buf[8..].to_vec();
            if let Some(at) = response_at(cmd) {
                let addr = u64::from_ne_bytes(body[at..at + 8].try_into().unwrap());
                assert_eq!(
                    addr,
                    resp.as_ptr() as u64,
                    "the response field points at the buffer"
                );
                body[at..at + 8].fill(0);
            }
            let mut s = st.lock().unwrap();
            s.seen.push(Seen {
                cmd,
                in_,
                out,
                body: body.clone(),
            });
            if let Some(e) = s.fail.get(&cmd) {
                return Err(*e);
            }
            match cmd {
                0 => {
                    s.next_id += 1;
                    resp.copy_from_slice(&s.next_id.to_ne_bytes());
                }
                1 => {
                    let id = u32::from_ne_bytes(body[8..12].try_into().unwrap());
                    let n = s.reported.remove(&id).unwrap_or(0);
                    resp.copy_from_slice(&n.to_ne_bytes());
                }
                12 => {
                    let Some(ev) = s.events.pop_front() else {
                        return Err(Errno::EAGAIN);
                    };
                    let id = u32::from_ne_bytes(ev[8..12].try_into().unwrap());
                    let event = u32::from_ne_bytes(ev[12..16].try_into().unwrap());
                    // CONNECT_REQUEST counts against the listener, which the
                    // test names in the upper bytes of `uid` (see `event_for`).
                    let counted = if event == 4 {
                        u32::from_ne_bytes(ev[332..336].try_into().unwrap())
                    } else {
                        id
                    };
                    *s.reported.entry(counted).or_default() += 1;
                    let mut ev = ev;
                    ev[328..336].fill(0);
                    resp.copy_from_slice(&ev[..resp.len()]);
                }
                _ => {
                    if let Some(a) = s.answers.get(&cmd) {
                        resp.copy_from_slice(&a[..resp.len()]);
                    }
                }
            }
            Ok(())
        });
        // The channel polls before it reads, as ucma's fd is polled: readable
        // while the fake's queue holds an event.
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

    fn channel(&self) -> EventChannel {
        let k: Arc<dyn Kernel> = self.kernel.clone();
        EventChannel::open_with(k).unwrap()
    }

    fn last(&self) -> Seen {
        self.state.lock().unwrap().seen.last().cloned().unwrap()
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    fn push_event(&self, ev: Vec<u8>) {
        self.state.lock().unwrap().events.push_back(ev);
    }

    fn answer(&self, cmd: u32, resp: Vec<u8>) {
        self.state.lock().unwrap().answers.insert(cmd, resp);
    }

    fn fail(&self, cmd: u32, e: Errno) {
        self.state.lock().unwrap().fail.insert(cmd, e);
    }
}

fn u32b(v: u32) -> [u8; 4] {
    v.to_ne_bytes()
}

/// A 336-byte `rdma_ucm_event_resp` for `id`. (The fake uses the `ece`
/// bytes to know which id a CONNECT_REQUEST counts against; it clears them.)
fn event_for(id: &CmId, event: u32, status: i32) -> Vec<u8> {
    let mut ev = vec![0u8; 336];
    ev[0..8].copy_from_slice(&id.uid().to_ne_bytes());
    ev[8..12].copy_from_slice(&u32b(id.kernel_id()));
    ev[12..16].copy_from_slice(&u32b(event));
    ev[16..20].copy_from_slice(&status.to_ne_bytes());
    ev[332..336].copy_from_slice(&u32b(id.kernel_id()));
    ev
}

fn sockaddr_in(addr: [u8; 4], port: u16) -> Vec<u8> {
    let mut s = vec![0u8; 128];
    s[0..2].copy_from_slice(&2u16.to_ne_bytes());
    s[2..4].copy_from_slice(&port.to_be_bytes());
    s[4..8].copy_from_slice(&addr);
    s
}

#[test]
fn create_id_frames_uid_port_space_and_qp_type() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let mut body = id.uid().to_ne_bytes().to_vec();
    body.extend_from_slice(&[0; 8]); // response
    body.extend_from_slice(&0x0106u16.to_ne_bytes());
    body.push(2); // IB_QPT_RC
    body.extend_from_slice(&[0; 5]);
    assert_eq!(
        k.last(),
        Seen {
            cmd: 0,
            in_: 24,
            out: 4,
            body
        }
    );
    assert_eq!(id.kernel_id(), 101);
    assert_ne!(id.uid(), 0);

    let ud = ch.create_id(PortSpace::Udp).unwrap();
    let b = k.last().body;
    assert_eq!(&b[16..19], &[0x11, 0x01, 4]); // RDMA_PS_UDP, IB_QPT_UD
    assert_ne!(ud.uid(), id.uid());
}

#[test]
fn address_and_connection_commands_are_framed_as_the_kernel_parses_them() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let kid = u32b(id.kernel_id());
    let ip: SocketAddr = "192.0.2.1:7174".parse().unwrap();

    id.bind(ip).unwrap();
    let mut body = kid.to_vec();
    body.extend_from_slice(&16u16.to_ne_bytes());
    body.extend_from_slice(&[0, 0]);
    body.extend_from_slice(&sockaddr_in([192, 0, 2, 1], 7174));
    assert_eq!(
        k.last(),
        Seen {
            cmd: 20,
            in_: 136,
            out: 0,
            body
        }
    );

    id.resolve_addr(None, ip, Duration::from_millis(2000))
        .unwrap();
    let mut body = kid.to_vec();
    body.extend_from_slice(&u32b(2000));
    body.extend_from_slice(&0u16.to_ne_bytes());
    body.extend_from_slice(&16u16.to_ne_bytes());
    body.extend_from_slice(&[0; 4]);
    body.extend_from_slice(&[0; 128]);
    body.extend_from_slice(&sockaddr_in([192, 0, 2, 1], 7174));
    assert_eq!(
        k.last(),
        Seen {
            cmd: 21,
            in_: 272,
            out: 0,
            body
        }
    );

    let src: SocketAddr = "[fe80::1]:0".parse().unwrap();
    id.resolve_addr(Some(src), ip, Duration::from_secs(1))
        .unwrap();
    let b = k.last().body;
    assert_eq!(&b[8..10], &28u16.to_ne_bytes());
    assert_eq!(&b[16..18], &10u16.to_ne_bytes()); // AF_INET6
    assert_eq!(b[24], 0xfe);

    id.resolve_route(Duration::from_millis(1500)).unwrap();
    let mut body = kid.to_vec();
    body.extend_from_slice(&u32b(1500));
    assert_eq!(
        k.last(),
        Seen {
            cmd: 4,
            in_: 8,
            out: 0,
            body
        }
    );

    id.listen(3).unwrap();
    let mut body = kid.to_vec();
    body.extend_from_slice(&u32b(3));
    assert_eq!(
        k.last(),
        Seen {
            cmd: 7,
            in_: 8,
            out: 0,
            body
        }
    );

    let param = ConnParam::new()
        .private_data(b"hello")
        .responder_resources(1)
        .initiator_depth(2)
        .flow_control(1)
        .retry_count(7)
        .rnr_retry_count(6)
        .qp_num(0x11);
    id.connect(&param).unwrap();
    let mut conn = vec![0u8; 272];
    conn[0..4].copy_from_slice(&u32b(0x11));
    conn[8..13].copy_from_slice(b"hello");
    conn[264] = 5;
    conn[265] = 0;
    conn[266] = 1;
    conn[267] = 2;
    conn[268] = 1;
    conn[269] = 7;
    conn[270] = 6;
    conn[271] = 1; // valid
    let mut body = conn.clone();
    body.extend_from_slice(&kid);
    body.extend_from_slice(&[0; 12]); // reserved, ece
    assert_eq!(
        k.last(),
        Seen {
            cmd: 6,
            in_: 288,
            out: 0,
            body
        }
    );

    id.accept(&param).unwrap();
    let mut body = id.uid().to_ne_bytes().to_vec();
    body.extend_from_slice(&conn);
    body.extend_from_slice(&kid);
    body.extend_from_slice(&[0; 12]);
    assert_eq!(
        k.last(),
        Seen {
            cmd: 8,
            in_: 296,
            out: 0,
            body
        }
    );

    // rdma_establish: ACCEPT without uid and with valid = 0.
    id.establish().unwrap();
    let mut body = vec![0u8; 280];
    body.extend_from_slice(&kid);
    body.extend_from_slice(&[0; 12]);
    assert_eq!(k.last().body, body);

    id.reject(b"no thanks").unwrap();
    let mut body = kid.to_vec();
    body.push(9);
    body.extend_from_slice(&[0, 0, 0]);
    let mut pd = [0u8; 256];
    pd[..9].copy_from_slice(b"no thanks");
    body.extend_from_slice(&pd);
    assert_eq!(
        k.last(),
        Seen {
            cmd: 9,
            in_: 264,
            out: 0,
            body
        }
    );

    id.disconnect().unwrap();
    assert_eq!(
        k.last(),
        Seen {
            cmd: 10,
            in_: 4,
            out: 0,
            body: kid.to_vec()
        }
    );

    id.notify(uverbs::AsyncEventType::COMM_EST).unwrap();
    let mut body = kid.to_vec();
    body.extend_from_slice(&u32b(4));
    assert_eq!(
        k.last(),
        Seen {
            cmd: 15,
            in_: 8,
            out: 0,
            body
        }
    );
}

#[test]
fn private_data_over_256_bytes_is_refused_before_the_kernel() {
    let k = Ucma::new();
    let id = k.channel().create_id(PortSpace::Tcp).unwrap();
    let n = k.seen().len();
    let big = ConnParam::new().private_data(vec![0; 257]);
    assert!(id.connect(&big).is_err());
    assert!(id.reject(&[0; 257]).is_err());
    assert_eq!(k.seen().len(), n);
}

#[test]
fn init_qp_attr_is_framed_and_decoded() {
    let k = Ucma::new();
    let id = k.channel().create_id(PortSpace::Tcp).unwrap();
    // ib_uverbs_qp_attr: mask @0, state @4, path_mtu @12, rq_psn @24,
    // dest_qp_num @32, ah_attr @40 (ib_uverbs_ah_attr: is_global @29, port_num @30).
    let mut a = vec![0u8; 144];
    let mask = QpAttrMask::STATE
        | QpAttrMask::AV
        | QpAttrMask::PATH_MTU
        | QpAttrMask::DEST_QPN
        | QpAttrMask::RQ_PSN
        | QpAttrMask::MAX_DEST_RD_ATOMIC
        | QpAttrMask::MIN_RNR_TIMER;
    a[0..4].copy_from_slice(&u32b(mask.bits()));
    a[4..8].copy_from_slice(&u32b(2)); // RTR
    a[12..16].copy_from_slice(&u32b(3)); // path_mtu 1024
    a[24..28].copy_from_slice(&u32b(0x123)); // rq_psn
    a[32..36].copy_from_slice(&u32b(0x42)); // dest_qp_num
    a[40] = 0xfe; // ah_attr.grh.dgid[0]
    a[40 + 29] = 1; // is_global
    a[40 + 30] = 1; // port_num
    k.answer(11, a);
    let (attr, got) = id.init_qp_attr(QpState::Rtr).unwrap();
    let mut body = vec![0u8; 8];
    body.extend_from_slice(&u32b(id.kernel_id()));
    body.extend_from_slice(&u32b(2));
    assert_eq!(
        k.last(),
        Seen {
            cmd: 11,
            in_: 16,
            out: 144,
            body
        }
    );
    assert_eq!(got, mask);
    assert_eq!(attr.qp_state, QpState::Rtr);
    assert_eq!(attr.dest_qp_num, 0x42);
    assert_eq!(attr.rq_psn, 0x123);
    assert_eq!(attr.ah_attr.port_num, 1);
    assert_eq!(attr.ah_attr.grh.unwrap().dgid.0[0], 0xfe);
}

#[test]
fn query_addr_and_route_decode_the_kernels_answer() {
    let k = Ucma::new();
    let id = k.channel().create_id(PortSpace::Tcp).unwrap();
    let mut r = vec![0u8; 280];
    r[0..8].copy_from_slice(&0x0011_2233_4455_6677u64.to_be_bytes());
    r[8] = 1;
    r[10..12].copy_from_slice(&0xffffu16.to_be_bytes());
    r[12..14].copy_from_slice(&16u16.to_ne_bytes());
    r[14..16].copy_from_slice(&16u16.to_ne_bytes());
    r[16..144].copy_from_slice(&sockaddr_in([192, 0, 2, 1], 7174));
    r[144..272].copy_from_slice(&sockaddr_in([192, 0, 2, 2], 9));
    r[272..276].copy_from_slice(&u32b(3));
    k.answer(19, r);
    let a = id.query_addr().unwrap();
    let mut body = vec![0u8; 8];
    body.extend_from_slice(&u32b(id.kernel_id()));
    body.extend_from_slice(&u32b(0)); // RDMA_USER_CM_QUERY_ADDR
    assert_eq!(
        k.last(),
        Seen {
            cmd: 19,
            in_: 16,
            out: 280,
            body
        }
    );
    assert_eq!(a.node_guid, 0x0011_2233_4455_6677);
    assert_eq!(a.port_num, 1);
    assert_eq!(a.pkey, 0xffff);
    assert_eq!(a.src, Some("192.0.2.1:7174".parse().unwrap()));
    assert_eq!(a.dst, Some("192.0.2.2:9".parse().unwrap()));
    assert_eq!(a.ibdev_index, 3);

    let mut r = vec![0u8; 208];
    r[0..8].copy_from_slice(&7u64.to_be_bytes());
    r[8] = 0xaa; // ib_route[0].dgid[0]
    r[8 + 48..8 + 52].copy_from_slice(&u32b(3)); // mtu
    r[192..196].copy_from_slice(&u32b(1));
    r[196] = 1;
    k.answer(5, r);
    let route = id.query_route().unwrap();
    assert_eq!(k.last().cmd, 5);
    assert_eq!((k.last().in_, k.last().out), (16, 208));
    assert_eq!(route.node_guid, 7);
    assert_eq!(route.paths.len(), 1);
    assert_eq!(route.paths[0].dgid.0[0], 0xaa);
    assert_eq!(route.paths[0].mtu, 3);
    assert_eq!(route.port_num, 1);
}

#[test]
fn every_event_kind_decodes_with_status_and_unknown_numbers_are_kept() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let kinds = [
        (0, CmEventKind::AddrResolved, "RDMA_CM_EVENT_ADDR_RESOLVED"),
        (1, CmEventKind::AddrError, "RDMA_CM_EVENT_ADDR_ERROR"),
        (
            2,
            CmEventKind::RouteResolved,
            "RDMA_CM_EVENT_ROUTE_RESOLVED",
        ),
        (3, CmEventKind::RouteError, "RDMA_CM_EVENT_ROUTE_ERROR"),
        (
            5,
            CmEventKind::ConnectResponse,
            "RDMA_CM_EVENT_CONNECT_RESPONSE",
        ),
        (6, CmEventKind::ConnectError, "RDMA_CM_EVENT_CONNECT_ERROR"),
        (7, CmEventKind::Unreachable, "RDMA_CM_EVENT_UNREACHABLE"),
        (8, CmEventKind::Rejected, "RDMA_CM_EVENT_REJECTED"),
        (9, CmEventKind::Established, "RDMA_CM_EVENT_ESTABLISHED"),
        (10, CmEventKind::Disconnected, "RDMA_CM_EVENT_DISCONNECTED"),
        (
            11,
            CmEventKind::DeviceRemoval,
            "RDMA_CM_EVENT_DEVICE_REMOVAL",
        ),
        (
            12,
            CmEventKind::MulticastJoin,
            "RDMA_CM_EVENT_MULTICAST_JOIN",
        ),
        (
            13,
            CmEventKind::MulticastError,
            "RDMA_CM_EVENT_MULTICAST_ERROR",
        ),
        (14, CmEventKind::AddrChange, "RDMA_CM_EVENT_ADDR_CHANGE"),
        (15, CmEventKind::TimewaitExit, "RDMA_CM_EVENT_TIMEWAIT_EXIT"),
        (99, CmEventKind::Unknown(99), "UNKNOWN EVENT"),
    ];
    for (i, (raw, kind, name)) in kinds.iter().enumerate() {
        let status = -(i as i32);
        k.push_event(event_for(&id, *raw, status));
        let ev = ch.try_get_event().unwrap().expect("an event is queued");
        assert_eq!(ev.kind(), *kind);
        assert_eq!(ev.kind().raw(), *raw);
        assert_eq!(ev.kind().as_str(), *name);
        assert_eq!(ev.status(), status);
        assert!(ev.is_for(&id));
        assert_eq!(ev.uid(), id.uid());
        assert_eq!(ev.kernel_id(), id.kernel_id());
        assert!(ev.ud_param().is_none());
    }
    let get = k.last();
    assert_eq!((get.cmd, get.in_, get.out), (12, 8, 336));
    assert_eq!(get.body, vec![0u8; 8]);
    assert!(ch.try_get_event().unwrap().is_none(), "EAGAIN: no event");
    PATIENCE
        .destroy(
            "the id after one event of every kind, acknowledged",
            id,
            CmId::destroy,
        )
        .unwrap();
}

#[test]
fn connection_parameters_and_private_data_are_decoded() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let mut ev = event_for(&id, 8, 28);
    let p = 20;
    ev[p..p + 4].copy_from_slice(&u32b(0xabcdef));
    ev[p + 8..p + 8 + 148].fill(0x5a);
    ev[p + 8..p + 8 + 6].copy_from_slice(b"go-way");
    ev[p + 264] = 148;
    ev[p + 265] = 1;
    ev[p + 266] = 3;
    ev[p + 267] = 4;
    ev[p + 268] = 1;
    ev[p + 269] = 5;
    ev[p + 270] = 6;
    ev[324..328].copy_from_slice(&u32b(0));
    k.push_event(ev);
    let ev = ch.try_get_event().unwrap().unwrap();
    assert_eq!(ev.kind(), CmEventKind::Rejected);
    assert_eq!(ev.status(), 28);
    let c = ev.conn_param().unwrap();
    assert_eq!(c.qp_num, 0xabcdef);
    assert_eq!(c.private_data.len(), 148);
    assert_eq!(&c.private_data[..6], b"go-way");
    assert!(c.srq);
    assert_eq!(
        (
            c.responder_resources,
            c.initiator_depth,
            c.flow_control,
            c.retry_count,
            c.rnr_retry_count
        ),
        (3, 4, 1, 5, 6)
    );
    assert_eq!(&ev.private_data()[..6], b"go-way");
}

#[test]
fn ud_events_carry_the_address_vector_qpn_and_qkey() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Udp).unwrap();
    let mut ev = event_for(&id, 9, 0);
    let p = 20;
    ev[p..p + 4].copy_from_slice(&u32b(0x77));
    ev[p + 4..p + 8].copy_from_slice(&u32b(0x0123_4567));
    let ah = p + 8;
    ev[ah..ah + 16].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1]);
    ev[ah + 16..ah + 20].copy_from_slice(&u32b(0x12345)); // flow_label
    ev[ah + 20] = 1; // sgid_index
    ev[ah + 21] = 64; // hop_limit
    ev[ah + 22] = 0x10; // traffic_class
    ev[ah + 24..ah + 26].copy_from_slice(&0u16.to_ne_bytes()); // dlid
    ev[ah + 26] = 2; // sl
    ev[ah + 29] = 1; // is_global
    ev[ah + 30] = 1; // port_num
    ev[p + 40..p + 43].copy_from_slice(b"abc");
    ev[p + 296] = 3;
    k.push_event(ev);
    let ev = ch.try_get_event().unwrap().unwrap();
    assert!(ev.conn_param().is_none());
    let ud = ev.ud_param().unwrap();
    assert_eq!(ud.qp_num, 0x77);
    assert_eq!(ud.qkey, 0x0123_4567);
    let grh = ud.ah_attr.grh.unwrap();
    assert_eq!(grh.dgid.0[12..], [192, 0, 2, 1]);
    assert_eq!(
        (
            grh.flow_label,
            grh.sgid_index,
            grh.hop_limit,
            grh.traffic_class
        ),
        (0x12345, 1, 64, 0x10)
    );
    assert_eq!((ud.ah_attr.sl, ud.ah_attr.port_num), (2, 1));
    assert_eq!(ud.private_data, b"abc");
    assert_eq!(ev.private_data(), b"abc");
}

#[test]
fn a_connect_request_carries_a_new_id_that_accept_names() {
    let k = Ucma::new();
    let ch = k.channel();
    let listener = ch.create_id(PortSpace::Tcp).unwrap();
    let mut ev = event_for(&listener, 4, 0);
    ev[8..12].copy_from_slice(&u32b(777)); // the new kernel id
    ev[20 + 8..20 + 8 + 4].copy_from_slice(b"req!");
    ev[20 + 264] = 56;
    k.push_event(ev);
    let mut ev = ch.try_get_event().unwrap().unwrap();
    assert_eq!(ev.kind(), CmEventKind::ConnectRequest);
    assert!(ev.is_for(&listener), "counted against the listener");
    assert_eq!(ev.kernel_id(), 777);
    assert_eq!(&ev.private_data()[..4], b"req!");
    let conn = ev.take_new_id().expect("the new id");
    assert!(ev.take_new_id().is_none());
    drop(ev);
    assert_eq!(conn.kernel_id(), 777);
    assert_ne!(conn.uid(), listener.uid());
    conn.accept(&ConnParam::default()).unwrap();
    let b = k.last().body;
    assert_eq!(&b[0..8], &conn.uid().to_ne_bytes());
    assert_eq!(&b[280..284], &u32b(777));
    // Its events now find it.
    k.push_event(event_for(&conn, 9, 0));
    let est = ch.try_get_event().unwrap().unwrap();
    assert!(est.is_for(&conn));
    drop(est);
    PATIENCE
        .destroy(
            "the accepted id after its ESTABLISHED event",
            conn,
            CmId::destroy,
        )
        .unwrap();
    let d = k.last();
    assert_eq!((d.cmd, d.in_, d.out), (1, 16, 4));
    assert_eq!(&d.body[8..12], &u32b(777));
    PATIENCE
        .destroy(
            "the listener after its CONNECT_REQUEST event",
            listener,
            CmId::destroy,
        )
        .unwrap();
}

#[test]
fn an_unaccepted_connection_request_id_is_destroyed_with_its_event() {
    let k = Ucma::new();
    let ch = k.channel();
    let listener = ch.create_id(PortSpace::Tcp).unwrap();
    let mut ev = event_for(&listener, 4, 0);
    ev[8..12].copy_from_slice(&u32b(555));
    k.push_event(ev);
    drop(ch.try_get_event().unwrap().unwrap());
    let d = k.last();
    assert_eq!(d.cmd, 1);
    assert_eq!(&d.body[8..12], &u32b(555));
}

#[test]
fn destroy_id_frames_and_migrate_names_the_old_fd() {
    let k = Ucma::new();
    let a = k.channel();
    let b = k.channel();
    let id = a.create_id(PortSpace::Tcp).unwrap();
    id.migrate(&b).unwrap();
    let m = k.last();
    let mut body = vec![0u8; 8];
    body.extend_from_slice(&u32b(id.kernel_id()));
    body.extend_from_slice(&u32b(a.as_fd_raw()));
    assert_eq!(
        m,
        Seen {
            cmd: 18,
            in_: 16,
            out: 4,
            body
        }
    );
    // Events read from the new channel still find the id.
    k.push_event(event_for(&id, 10, 0));
    let ev = b.try_get_event().unwrap().unwrap();
    assert!(ev.is_for(&id));
    drop(ev);
    let kid = id.kernel_id();
    PATIENCE
        .destroy(
            "the migrated id after one event read on its new channel",
            id,
            CmId::destroy,
        )
        .unwrap();
    let mut body = vec![0u8; 8];
    body.extend_from_slice(&u32b(kid));
    body.extend_from_slice(&[0; 4]);
    assert_eq!(
        k.last(),
        Seen {
            cmd: 1,
            in_: 16,
            out: 4,
            body
        }
    );
}

trait RawFd {
    fn as_fd_raw(&self) -> u32;
}

impl RawFd for EventChannel {
    fn as_fd_raw(&self) -> u32 {
        use std::os::fd::AsFd;
        self.as_fd().as_raw_fd() as u32
    }
}

#[test]
fn destroy_from_the_thread_holding_an_event_is_ebusy() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let kid = id.kernel_id();
    k.push_event(event_for(&id, 0, 0));
    let ev = ch.try_get_event().unwrap().unwrap();
    let err = id.destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY);
    assert!(err.to_string().contains("rdma_destroy_id"), "{err}");
    assert!(
        !k.seen().iter().any(|s| s.cmd == 1),
        "no DESTROY_ID while the event is held"
    );
    // The id comes back; dropped, it lives on in the event, whose
    // acknowledgement then destroys it.
    let id = err.into_inner();
    assert_eq!(id.kernel_id(), kid);
    drop(id);
    assert!(!k.seen().iter().any(|s| s.cmd == 1));
    ev.ack();
    let d = k.last();
    assert_eq!(d.cmd, 1);
    assert_eq!(&d.body[8..12], &u32b(kid));
}

#[test]
fn try_destroy_refuses_to_wait_and_gives_the_id_back() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    k.push_event(event_for(&id, 0, 0));
    let ch2 = ch.clone();
    let (got_tx, got_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let holder = thread::spawn(move || {
        let ev = ch2.try_get_event().unwrap().unwrap();
        got_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        drop(ev);
    });
    PATIENCE.recv("the holder's event", &got_rx);
    let err = id.try_destroy().unwrap_err();
    assert_eq!(err.errno(), Errno::EAGAIN, "{err}");
    assert!(!k.seen().iter().any(|s| s.cmd == 1), "no DESTROY_ID yet");
    go_tx.send(()).unwrap();
    PATIENCE.join("the holder dropping its event", holder);
    err.into_inner().try_destroy().unwrap();
    assert_eq!(k.last().cmd, 1);
}

#[test]
fn destroy_waits_until_another_thread_acknowledges() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    k.push_event(event_for(&id, 9, 0));
    let acked = Arc::new(AtomicBool::new(false));
    let (got_tx, got_rx) = mpsc::channel();
    let ch2 = ch.clone();
    let acked2 = acked.clone();
    let holder = thread::spawn(move || {
        let ev = ch2.try_get_event().unwrap().unwrap();
        got_tx.send(()).unwrap();
        thread::sleep(Duration::from_millis(300));
        acked2.store(true, Ordering::SeqCst);
        drop(ev);
    });
    PATIENCE.recv("the holder's event", &got_rx);
    let start = Instant::now();
    let (done_tx, done_rx) = mpsc::channel();
    let destroyer = thread::spawn(move || {
        let r = id.destroy();
        done_tx.send(r.is_ok()).unwrap();
    });
    let ok = PATIENCE.recv(
        format_args!(
            "the destroy, once the holder dropped the one event it read ({DESTROY_WAITS})"
        ),
        &done_rx,
    );
    assert!(ok);
    assert!(
        acked.load(Ordering::SeqCst),
        "destroy returned before the ack"
    );
    assert!(start.elapsed() >= Duration::from_millis(200));
    PATIENCE.join("the holder", holder);
    PATIENCE.join("the destroyer", destroyer);
    // The kernel reported one event and one was acknowledged.
    assert_eq!(k.last().cmd, 1);
}

#[test]
fn errors_name_the_command_and_the_errno() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    k.fail(6, Errno::EINVAL);
    let e = id.connect(&ConnParam::default()).unwrap_err();
    assert_eq!(e.to_string(), "RDMA_USER_CM_CMD_CONNECT failed");
    assert_eq!(
        (e.op(), e.errno()),
        ("RDMA_USER_CM_CMD_CONNECT", Errno::EINVAL)
    );
    let io = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .expect("the kernel's errno as the source");
    assert_eq!(io.raw_os_error(), Some(Errno::EINVAL as i32));
    assert!(format!("{e:#}").starts_with("RDMA_USER_CM_CMD_CONNECT failed: EINVAL"));
    k.fail(20, Errno::EADDRINUSE);
    let e = id.bind("192.0.2.1:7174".parse().unwrap()).unwrap_err();
    assert_eq!(e.op(), "RDMA_USER_CM_CMD_BIND");
    assert!(e.to_string().contains("already bound"), "{e}");
    // A readable channel whose read fails.
    k.push_event(event_for(&id, 9, 0));
    k.fail(12, Errno::EBADF);
    let e = ch.try_get_event().unwrap_err();
    assert_eq!(e.op(), "RDMA_USER_CM_CMD_GET_EVENT");
    k.fail(0, Errno::ENODEV);
    let e = ch.create_id(PortSpace::Tcp).unwrap_err();
    assert_eq!(e.op(), "RDMA_USER_CM_CMD_CREATE_ID");
}

#[test]
fn events_of_unknown_ids_are_skipped() {
    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let mut stray = event_for(&id, 9, 0);
    stray[0..8].copy_from_slice(&u64::MAX.to_ne_bytes());
    // Another process's id (the kernel would never send it here): not counted.
    stray[8..12].copy_from_slice(&u32b(9999));
    stray[332..336].copy_from_slice(&u32b(9999));
    k.push_event(stray);
    k.push_event(event_for(&id, 10, 0));
    let ev = ch.try_get_event().unwrap().unwrap();
    assert_eq!(ev.kind(), CmEventKind::Disconnected);
}

#[test]
fn opening_the_channel_names_the_device_and_the_module() {
    let k = FakeKernel::new();
    k.fail_open(Errno::ENOENT);
    let k: Arc<dyn Kernel> = Arc::new(k);
    let e = EventChannel::open_with(k).unwrap_err();
    assert!(e.to_string().contains("/dev/infiniband/rdma_cm"), "{e}");
    assert!(e.to_string().contains("rdma_ucm"), "{e}");
}

#[test]
fn set_option_frames_level_name_length_and_a_value_pointer() {
    use uverbs::cm::CmOption;
    let k = Ucma::new();
    let id = k.channel().create_id(PortSpace::Tcp).unwrap();
    for (opt, name, len) in [
        (CmOption::Tos(0x20), 0u32, 1u32),
        (CmOption::ReuseAddr(true), 1, 4),
        (CmOption::AfOnly(false), 2, 4),
        (CmOption::AckTimeout(18), 3, 1),
    ] {
        id.set_option(opt).unwrap();
        let s = k.seen().pop().unwrap();
        assert_eq!((s.cmd, s.in_, s.out), (14, 24, 0), "{opt:?}");
        let field = |at: usize| u32::from_ne_bytes(s.body[at..at + 4].try_into().unwrap());
        let optval = u64::from_ne_bytes(s.body[0..8].try_into().unwrap());
        assert_ne!(optval, 0, "the kernel copies the value from this address");
        assert_eq!(field(8), id.kernel_id());
        assert_eq!((field(12), field(16), field(20)), (0, name, len), "{opt:?}");
    }
}

#[test]
fn multicast_join_and_leave_are_framed_with_the_ids_uid_and_the_joins_id() {
    let k = Ucma::new();
    let id = k.channel().create_id(PortSpace::Udp).unwrap();
    // The kernel answers JOIN_MCAST with the membership's id.
    k.state
        .lock()
        .unwrap()
        .answers
        .insert(22, 555u32.to_ne_bytes().to_vec());
    let group: SocketAddr = "239.1.2.3:0".parse().unwrap();
    id.join_multicast(group, true).unwrap();
    let s = k.seen().pop().unwrap();
    assert_eq!((s.cmd, s.out), (22, 4));
    let u64_at = |at: usize| u64::from_ne_bytes(s.body[at..at + 8].try_into().unwrap());
    let u32_at = |at: usize| u32::from_ne_bytes(s.body[at..at + 4].try_into().unwrap());
    let u16_at = |at: usize| u16::from_ne_bytes(s.body[at..at + 2].try_into().unwrap());
    // rdma_ucm_join_mcast: response, uid, id, addr_size, join_flags, addr.
    assert_eq!(u64_at(8), id.uid(), "group events carry the id's uid");
    assert_eq!(u32_at(16), id.kernel_id());
    assert_eq!(u16_at(20), 16, "sockaddr_in");
    assert_eq!(u16_at(22), 1, "send-only full member");
    assert_eq!(
        u16::from_ne_bytes([s.body[24], s.body[25]]),
        libc::AF_INET as u16
    );
    assert_eq!(&s.body[28..32], &[239, 1, 2, 3]);
    // A second join of the same group never reaches the kernel.
    let n = k.seen().len();
    assert!(id.join_multicast(group, false).is_err());
    assert_eq!(k.seen().len(), n);
    // LEAVE_MCAST names the membership, not the id.
    id.leave_multicast(group).unwrap();
    let s = k.seen().pop().unwrap();
    assert_eq!((s.cmd, s.out), (17, 4));
    assert_eq!(u32::from_ne_bytes(s.body[8..12].try_into().unwrap()), 555);
    assert!(id.leave_multicast(group).is_err());
}

/// `rdma_notify`'s refusals name the fix; the forwarding helper passes on
/// only COMM_EST and PATH_MIG of the id's own QP.
#[test]
fn notify_errors_explain_and_only_cm_events_of_the_qp_are_forwarded() {
    use uverbs::{testing::rxe, AsyncEventType as T, Context, CqOptions, QpCap, QpInitAttr};

    let k = Ucma::new();
    let ch = k.channel();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    k.fail(15, Errno::EINVAL);
    let err = id.notify(T::SQ_DRAINED).unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL);
    let text = err.to_string();
    assert!(text.contains("RDMA_USER_CM_CMD_NOTIFY"), "{text}");
    assert!(
        text.contains("COMM_EST") && text.contains("SQ_DRAINED"),
        "{text}"
    );
    k.fail(15, Errno::EISCONN);
    let err = id.notify(T::COMM_EST).unwrap_err();
    assert!(err.to_string().contains("already established"), "{err}");

    // A verbs context with a QP, on the rxe fake.
    let fake = rxe::fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(rxe::DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(4, CqOptions::default()).unwrap();
    let cap = QpCap::new(4, 4, 1, 1);
    let init = QpInitAttr::rc(&cq, &cq).cap(cap);
    let (qp, other) = (pd.create_qp(&init).unwrap(), pd.create_qp(&init).unwrap());
    let uh = fake.user_handle(rxe::Kind::Qp, qp.handle());
    let other_uh = fake.user_handle(rxe::Kind::Qp, other.handle());

    k.state.lock().unwrap().fail.clear();
    let notifies = |k: &Ucma| k.seen().iter().filter(|s| s.cmd == 15).count();
    let before = notifies(&k);
    for (ty, element, forwarded) in [
        (T::COMM_EST, uh, true),
        (T::PATH_MIG, uh, true),
        (T::SQ_DRAINED, uh, false),
        (T::COMM_EST, other_uh, false),
    ] {
        fake.push_event(ty.0, element);
        let ev = ctx.try_get_async_event().unwrap().unwrap();
        assert_eq!(id.forward_event(&ev, &qp).unwrap(), forwarded, "{ty:?}");
        if forwarded {
            let mut body = u32b(id.kernel_id()).to_vec();
            body.extend_from_slice(&u32b(ty.0));
            assert_eq!(k.last().body, body);
        }
    }
    assert_eq!(notifies(&k) - before, 2);
    // COMM_EST after the RTU already established it: forwarded all the same.
    k.fail(15, Errno::EISCONN);
    fake.push_event(T::COMM_EST.0, uh);
    let ev = ctx.try_get_async_event().unwrap().unwrap();
    assert!(id.forward_event(&ev, &qp).unwrap());
}
