//! rdma_cm: the responses of `/dev/infiniband/rdma_cm` (events, address and
//! route queries, QP attributes), read through the library's real command
//! and event paths from a fake kernel that answers with the input.

use std::{
    mem::offset_of,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use uverbs::{
    abi,
    cm::{CmEventKind, CmId, EventChannel, PortSpace},
    sys::{fake::FakeKernel, Errno, Readiness},
    QpState,
};

/// What the fake ucma answers the next response-carrying command with.
#[derive(Debug, Default)]
struct Answer {
    /// The response bytes (copied into the response buffer, which the
    /// library zeroed; longer answers are cut to the buffer).
    bytes: Vec<u8>,
    /// Whether a `GET_EVENT` finds an event (one per input).
    event: bool,
}

/// A channel on the fake ucma, with an RC (TCP port space) and a UD (UDP
/// port space) id.
struct Cm {
    kernel: Arc<FakeKernel>,
    answer: Arc<Mutex<Answer>>,
    channel: EventChannel,
    tcp: CmId,
    udp: CmId,
}

impl Cm {
    fn new() -> Self {
        let kernel = Arc::new(FakeKernel::new());
        let answer = Arc::new(Mutex::new(Answer::default()));
        let a = answer.clone();
        let mut next_id = 100u32;
        kernel.on_ucma(move |framed, resp| {
            let cmd = u32::from_ne_bytes(
                framed
                    .get(..4)
                    .ok_or(Errno::EINVAL)?
                    .try_into()
                    .unwrap_or_default(),
            );
            let mut a = a.lock().unwrap_or_else(|p| p.into_inner());
            let fill = |resp: &mut [u8], bytes: &[u8]| {
                let n = resp.len().min(bytes.len());
                resp[..n].copy_from_slice(&bytes[..n]);
            };
            match cmd {
                abi::RDMA_USER_CM_CMD_CREATE_ID => {
                    next_id += 1;
                    fill(resp, &next_id.to_ne_bytes());
                }
                // DESTROY_ID answers `events_reported` 0: the ids' events
                // are acknowledged before they go.
                abi::RDMA_USER_CM_CMD_DESTROY_ID => fill(resp, &[0; 4]),
                abi::RDMA_USER_CM_CMD_GET_EVENT => {
                    if !std::mem::take(&mut a.event) {
                        return Err(Errno::EAGAIN);
                    }
                    fill(resp, &a.bytes);
                }
                _ => fill(resp, &a.bytes),
            }
            Ok(())
        });
        // The channel polls its fd before it reads, as ucma's fd is polled:
        // readable while an event is answered.
        let pending = answer.clone();
        kernel.on_wait_readable(move |_| {
            let a = pending.lock().unwrap_or_else(|p| p.into_inner());
            Ok(if a.event {
                Readiness::Readable
            } else {
                Readiness::TimedOut
            })
        });
        let channel = EventChannel::open_with(kernel.clone()).expect("open the fake rdma_cm");
        let tcp = channel.create_id(PortSpace::Tcp).expect("create a TCP id");
        let udp = channel.create_id(PortSpace::Udp).expect("create a UDP id");
        Cm {
            kernel,
            answer,
            channel,
            tcp,
            udp,
        }
    }

    fn answer(&self, bytes: &[u8], event: bool) {
        let mut a = self.answer.lock().unwrap_or_else(|p| p.into_inner());
        a.bytes = bytes.to_vec();
        a.event = event;
    }
}

/// The fixture, kept for the life of the process (a static is never
/// dropped: no teardown of fake-kernel objects at exit).
static CM: Mutex<Option<Cm>> = Mutex::new(None);

fn with_cm(f: impl FnOnce(&Cm)) {
    {
        let mut cell = CM.lock().unwrap_or_else(|p| p.into_inner());
        let cm = cell.get_or_insert_with(Cm::new);
        cm.kernel.clear_calls();
        f(cm);
    }
}

/// `rdma_ucm_event_resp` offsets.
const EVENT_AT: usize = offset_of!(abi::RdmaUcmEventResp, event);
const STATUS_AT: usize = offset_of!(abi::RdmaUcmEventResp, status);
/// Offset of the param union (`conn` or `ud`).
const PARAM_AT: usize = offset_of!(abi::RdmaUcmEventResp, param);
/// `private_data` and `private_data_len` in the `conn` and `ud` members.
const CONN_DATA: usize = PARAM_AT + offset_of!(abi::RdmaUcmConnParam, private_data);
const CONN_LEN: usize = PARAM_AT + offset_of!(abi::RdmaUcmConnParam, private_data_len);
const UD_DATA: usize = PARAM_AT + offset_of!(abi::RdmaUcmUdParam, private_data);
const UD_LEN: usize = PARAM_AT + offset_of!(abi::RdmaUcmUdParam, private_data_len);
const EVENT_LEN: usize = size_of::<abi::RdmaUcmEventResp>();

/// The `u32` at `at` of a response the kernel wrote `b` of (the rest of
/// the buffer stays zero).
fn u32_at(b: &[u8], at: usize) -> u32 {
    let f = field(b, at, 4);
    u32::from_ne_bytes([f[0], f[1], f[2], f[3]])
}

/// One `GET_EVENT` answer (`struct rdma_ucm_event_resp`, 336 bytes; shorter
/// inputs leave the rest zero). The first input byte aims the event's
/// `uid` at the RC id, the UD id, or leaves it as it is (unknown ids'
/// events are acknowledged and dropped; CONNECT_REQUEST brings a new id).
pub fn cm_event(data: &[u8]) {
    let Some((&mode, resp)) = data.split_first() else {
        return;
    };
    with_cm(|cm| {
        let mut resp = resp.to_vec();
        let aimed = match mode % 3 {
            1 => Some(&cm.tcp),
            2 => Some(&cm.udp),
            _ => None,
        };
        if let Some(id) = aimed {
            if resp.len() < 8 {
                resp.resize(8, 0);
            }
            resp[..8].copy_from_slice(&id.uid().to_ne_bytes());
        }
        cm.answer(&resp, true);
        let got = cm
            .channel
            .try_get_event()
            .expect("the fake answers GET_EVENT");
        let uid = {
            let f = field(&resp, 0, 8);
            u64::from_ne_bytes([f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]])
        };
        let Some(mut ev) = got else {
            assert!(
                aimed.is_none() && uid != cm.tcp.uid() && uid != cm.udp.uid(),
                "the event of a live id was dropped"
            );
            return;
        };
        let id = if ev.is_for(&cm.tcp) {
            &cm.tcp
        } else {
            assert!(ev.is_for(&cm.udp), "an event for an id that is not ours");
            &cm.udp
        };
        assert_eq!(ev.uid(), uid);
        assert_eq!(id.uid(), uid);
        let event = u32_at(&resp, EVENT_AT);
        assert_eq!(ev.kind(), CmEventKind::from_raw(event));
        assert_eq!(ev.status(), u32_at(&resp, STATUS_AT) as i32);
        let private = ev.private_data();
        assert!(private.len() <= 256);
        let len_at = if id.port_space() == PortSpace::Tcp {
            CONN_LEN
        } else {
            UD_LEN
        };
        let declared = usize::from(resp.get(len_at).copied().unwrap_or(0));
        assert_eq!(private.len(), declared.min(256), "private data length");
        match id.port_space() {
            PortSpace::Tcp => {
                let c = ev.conn_param().expect("an RC id's event has conn params");
                assert!(ev.ud_param().is_none());
                assert_eq!(c.private_data, private);
                assert_eq!(c.qp_num, u32_at(&resp, PARAM_AT));
            }
            _ => {
                let u = ev.ud_param().expect("a UD id's event has UD params");
                assert!(ev.conn_param().is_none());
                assert_eq!(u.private_data, private);
                assert_eq!(u.qkey, u32_at(&resp, PARAM_AT + 4));
                let _ = u.ah_attr.is_global();
            }
        }
        let _ = (
            ev.ece(),
            ev.kernel_id(),
            format!("{ev:?}"),
            ev.kind().to_string(),
        );
        let new_id = ev.take_new_id();
        assert_eq!(new_id.is_some(), ev.kind() == CmEventKind::ConnectRequest);
        assert!(ev.take_new_id().is_none(), "the new id is handed out once");
        drop(new_id);
        ev.ack();
    });
}

pub fn cm_event_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let event = |mode: u8, kind: u32, status: i32, private: &[u8], tcp: bool| {
        let mut v = vec![0u8; EVENT_LEN];
        v[8..12].copy_from_slice(&7u32.to_ne_bytes());
        v[EVENT_AT..EVENT_AT + 4].copy_from_slice(&kind.to_ne_bytes());
        v[STATUS_AT..STATUS_AT + 4].copy_from_slice(&status.to_ne_bytes());
        v[PARAM_AT..PARAM_AT + 4].copy_from_slice(&0x11u32.to_ne_bytes());
        let (at, len_at) = if tcp {
            (CONN_DATA, CONN_LEN)
        } else {
            (UD_DATA, UD_LEN)
        };
        v[at..at + private.len()].copy_from_slice(private);
        v[len_at] = private.len() as u8;
        let mut out = vec![mode];
        out.extend(v);
        out
    };
    vec![
        ("addr-resolved", event(1, 0, 0, b"", true)),
        ("connect-request", event(1, 4, 0, b"hello", true)),
        ("rejected-consumer", event(1, 8, 28, b"no", true)),
        ("established-ud", event(2, 9, 0, b"ud-private", false)),
        ("disconnected", event(1, 10, 0, b"", true)),
        ("unknown-id", event(0, 0, -110, b"", true)),
        ("short", vec![1, 0, 0, 0]),
    ]
}

/// The answers of `QUERY` (address), `QUERY_ROUTE` and `INIT_QP_ATTR`: the
/// first input byte picks the command (and the QP state asked for), the
/// rest is the response.
pub fn cm_query(data: &[u8]) {
    let Some((&sel, resp)) = data.split_first() else {
        return;
    };
    with_cm(|cm| {
        cm.answer(resp, false);
        let id = if sel & 0x80 != 0 { &cm.udp } else { &cm.tcp };
        match sel % 3 {
            0 => {
                let a = id.query_addr().expect("the fake answers QUERY");
                check_addr(a.src, field(resp, ADDR_SRC, 128));
                check_addr(a.dst, field(resp, ADDR_DST, 128));
            }
            1 => {
                let r = id.query_route().expect("the fake answers QUERY_ROUTE");
                let n = u32_at(resp, ROUTE_NUM_PATHS) as usize;
                assert_eq!(r.paths.len(), n.min(2));
                check_addr(r.src, field(resp, ROUTE_SRC, 28));
                check_addr(r.dst, field(resp, ROUTE_DST, 28));
            }
            _ => {
                let state = QpState::from_raw((sel >> 2) % 8);
                let (attr, mask) = id
                    .init_qp_attr(state)
                    .expect("the fake answers INIT_QP_ATTR");
                assert_eq!(mask.bits(), u32_at(resp, QP_ATTR_MASK));
                let state = u8::try_from(u32_at(resp, QP_ATTR_STATE)).unwrap_or(u8::MAX);
                assert_eq!(attr.qp_state.raw(), state);
                let _ = format!("{attr:?}");
            }
        }
    });
}

const ADDR_SRC: usize = offset_of!(abi::RdmaUcmQueryAddrResp, src_addr);
const ADDR_DST: usize = offset_of!(abi::RdmaUcmQueryAddrResp, dst_addr);
const ROUTE_SRC: usize = offset_of!(abi::RdmaUcmQueryRouteResp, src_addr);
const ROUTE_DST: usize = offset_of!(abi::RdmaUcmQueryRouteResp, dst_addr);
const ROUTE_NUM_PATHS: usize = offset_of!(abi::RdmaUcmQueryRouteResp, num_paths);
const QP_ATTR_MASK: usize = offset_of!(abi::IbUverbsQpAttr, qp_attr_mask);
const QP_ATTR_STATE: usize = offset_of!(abi::IbUverbsQpAttr, qp_state);

/// `len` bytes of a response at `at`, zero-filled past its end (the
/// library's response buffers start zeroed).
fn field(resp: &[u8], at: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let src = resp.get(at..).unwrap_or(&[]);
    let n = src.len().min(len);
    out[..n].copy_from_slice(&src[..n]);
    out
}

/// A decoded sockaddr against its raw bytes.
fn check_addr(addr: Option<SocketAddr>, raw: Vec<u8>) {
    let family = u16::from_ne_bytes([raw[0], raw[1]]);
    match addr {
        None => {}
        Some(SocketAddr::V4(a)) => {
            assert_eq!(family, 2);
            assert_eq!(raw[2..4], a.port().to_be_bytes());
            assert_eq!(raw[4..8], a.ip().octets());
        }
        Some(SocketAddr::V6(a)) => {
            assert_eq!(family, 10);
            assert_eq!(raw[2..4], a.port().to_be_bytes());
            assert_eq!(raw[4..8], a.flowinfo().to_be_bytes());
            assert_eq!(raw[8..24], a.ip().octets());
            assert_eq!(raw[24..28], a.scope_id().to_ne_bytes());
        }
    }
}

pub fn cm_query_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut addr = vec![0u8; 1 + size_of::<abi::RdmaUcmQueryAddrResp>()];
    addr[1..9].copy_from_slice(&0x5054_00ff_fe12_3456u64.to_be_bytes());
    addr[9] = 1;
    let src = 1 + ADDR_SRC;
    addr[src..src + 2].copy_from_slice(&2u16.to_ne_bytes());
    addr[src + 2..src + 4].copy_from_slice(&7174u16.to_be_bytes());
    addr[src + 4..src + 8].copy_from_slice(&[192, 0, 2, 1]);
    let dst = 1 + ADDR_DST;
    addr[dst..dst + 2].copy_from_slice(&10u16.to_ne_bytes());
    addr[dst + 8] = 0xfe;
    addr[dst + 9] = 0x80;
    let mut route = vec![0u8; 1 + size_of::<abi::RdmaUcmQueryRouteResp>()];
    route[0] = 1;
    let n = 1 + ROUTE_NUM_PATHS;
    route[n..n + 4].copy_from_slice(&1u32.to_ne_bytes());
    let mut init = vec![0u8; 1 + size_of::<abi::IbUverbsQpAttr>()];
    init[0] = 2 | (3 << 2);
    let m = 1 + QP_ATTR_MASK;
    init[m..m + 4].copy_from_slice(&0x1e1u32.to_ne_bytes());
    let st = 1 + QP_ATTR_STATE;
    init[st..st + 4].copy_from_slice(&3u32.to_ne_bytes());
    vec![
        ("query-addr", addr),
        ("query-route", route),
        ("init-qp-attr-rtr", init),
    ]
}
