//! The transport between HCAs of the fabric (`fabric.rs`, `wire.rs`): what
//! a QP whose peer is on another HCA does as requester and as responder.
//!
//! A QP's peer is on another HCA when its address vector names a GID that
//! is not one of this HCA's own (a connected QP's primary path from
//! MODIFY_QP; a UD WQE's AV). Such a message never reaches a QP of this
//! HCA, whatever its QP number: it leaves through the fabric port, or is
//! lost when there is none (and an RC requester then times out).
//!
//! RC follows the IBA reliable service (IBA 9.7): the requester numbers
//! packets from the QP's `sq_psn`, keeps what it sent until acknowledged,
//! and completes WQEs in order when ACKs (cumulative), read responses and
//! atomic responses arrive; it retransmits from the oldest unacknowledged
//! packet after the local ACK timeout (4.096 µs · 2^`timeout`, at least
//! [`MIN_TIMEOUT`] here, as the model's HCAs are threads of busy
//! processes; `timeout` 0 waits forever) and after `retry_cnt`
//! retransmissions without progress completes the WQE with
//! `RETRY_EXC_ERR` (what a ConnectX reports, `IBV_WC_RETRY_EXC_ERR`),
//! moves the QP to ERR and flushes the rest. An RNR NAK makes it wait the
//! responder's RNR timer (its `min_rnr_timer`, IBA table 45) and resend,
//! `rnr_retry` times (7: forever), then `RNR_RETRY_EXC_ERR`. A PSN
//! sequence NAK makes it resend from the PSN the responder expects.
//! Remote access, invalid request and remote operational NAKs complete the
//! WQE with the matching error and move the QP to ERR.
//!
//! The responder accepts only the PSN it expects (from `rq_psn`): a later
//! one is answered with one PSN sequence NAK until the expected one comes;
//! an earlier one is a duplicate, acknowledged again (sends and writes,
//! which are not executed twice), executed again (reads, which change
//! nothing) or answered from the responder's record of recent atomics
//! (atomics, which must not execute twice). So a dropped, duplicated or
//! reordered packet never writes memory twice or out of order. The
//! responder checks rkeys, ranges and access for the whole message when
//! its first packet arrives, and translates each packet's range through the
//! MR table again when it writes it. A packet for a QP that does not exist,
//! or not in RTR/RTS, or of another service, is dropped.
//!
//! UC: packets in order from the expected PSN; a gap loses the message in
//! progress (the next message's first packet starts again), nothing is
//! acknowledged and the requester completes a WQE once sent. UD: one
//! packet per message, checked against the receiver's Q_Key; the sender
//! puts the GRH (its own GID as source) in the packet.

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use super::{
    exec::{Done, Executed, Message, Recv},
    hca::{Fail, Hca, Qp, Transport, RTR, RTS},
    layout::{self, cqe_op, op, synd, Av, Ctrl, Data, InCqe},
    memory::{self, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE},
    wire::{self, psn_diff, Aeth, Body, Datagram, Header, Packet, ReqOp, Request, Service},
};

/// The shortest ACK timeout the model waits (see the module docs).
pub(crate) const MIN_TIMEOUT: Duration = Duration::from_millis(10);

/// Atomic results a responder remembers for duplicate requests.
const ATOMIC_RECORD: usize = 16;

/// What a WQE for another HCA sends.
pub(crate) enum Outgoing {
    /// A send or write.
    Message {
        op: ReqOp,
        data: Vec<u8>,
        raddr: u64,
        rkey: u32,
    },
    Read {
        raddr: u64,
        rkey: u32,
        sges: Vec<Data>,
        len: u32,
    },
    Atomic {
        raddr: u64,
        rkey: u32,
        sges: Vec<Data>,
        compare: Option<u64>,
        swap_add: u64,
    },
    Datagram {
        av: Av,
        data: Vec<u8>,
    },
}

/// A QP's transport state towards another HCA.
#[derive(Debug, Default)]
pub(crate) struct Wire {
    /// Requester: the next PSN to send.
    pub(crate) next_psn: u32,
    /// Requester: WQEs sent and not completed, oldest first.
    pub(crate) outstanding: VecDeque<Pending>,
    /// Retransmissions (timeouts) since the last progress.
    retries: u8,
    /// RNR NAKs since the last progress.
    rnr_naks: u8,
    /// When the oldest outstanding packet times out.
    deadline: Option<Instant>,
    /// Resend from this PSN at this time (after an RNR NAK).
    rnr_resend: Option<(Instant, u32)>,
    /// The next WQE is fenced behind an outstanding read or atomic.
    pub(crate) fence_wait: bool,
    /// Responder: the PSN it expects.
    pub(crate) expected: u32,
    /// Responder: a PSN sequence NAK was sent and the expected PSN has not
    /// come since.
    nak_sent: bool,
    /// Responder: the message whose first packets arrived.
    incoming: Option<Incoming>,
    /// Responder: recent atomics' PSN and original value.
    atomics: VecDeque<(u32, u64)>,
}

impl Wire {
    /// Whether a read or an atomic is outstanding.
    pub(crate) fn response_pending(&self) -> bool {
        self.outstanding
            .iter()
            .any(|p| matches!(p.kind, Kind::Read { .. } | Kind::Atomic { .. }))
    }
}

/// A WQE sent and not completed.
#[derive(Debug)]
pub(crate) struct Pending {
    ctrl: Ctrl,
    first_psn: u32,
    npsn: u32,
    packets: Vec<Packet>,
    kind: Kind,
}

impl Pending {
    fn last_psn(&self) -> u32 {
        self.first_psn.wrapping_add(self.npsn.max(1) - 1) & wire::PSN_MASK
    }
}

#[derive(Debug)]
enum Kind {
    /// A send or write, done when acknowledged.
    Acked {
        bytes: u32,
    },
    /// A read: the response packets and bytes so far.
    Read {
        sges: Vec<Data>,
        len: u32,
        got: Vec<u8>,
        packets: u32,
    },
    Atomic {
        sges: Vec<Data>,
    },
    /// A WQE done locally, its CQE behind the ones outstanding.
    Local(Done),
}

/// The message a responder is receiving.
#[derive(Debug)]
struct Incoming {
    recv: Option<Recv>,
    /// The payload so far (sends).
    buf: Vec<u8>,
    /// UC: the message is being dropped (no receive, bad key).
    dropping: bool,
}

/// The RNR timer of IBA table 45, in microseconds, by code.
const RNR_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & wire::PSN_MASK
}

/// `UVERBS_FABRIC_TRACE=1`: retransmissions and NAKs on stderr.
pub(crate) fn trace() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("UVERBS_FABRIC_TRACE").is_some_and(|v| v == "1"))
}

/// The local ACK timeout of a QP (`None`: infinite).
fn ack_timeout(qp: &Qp) -> Option<Duration> {
    match qp.attrs.timeout {
        0 => None,
        t => Some(Duration::from_nanos(4096u64 << t.min(31)).max(MIN_TIMEOUT)),
    }
}

impl Hca {
    /// Whether `gid` is another HCA's (not zero, not one of ours).
    pub(crate) fn is_foreign(&self, gid: &[u8; 16]) -> bool {
        *gid != [0; 16] && !self.gids.contains(gid)
    }

    /// The GID of a connected QP's peer when it is on another HCA.
    pub(crate) fn fabric_gid(&self, qp: &Qp) -> Option<[u8; 16]> {
        let d = &qp.attrs.dest;
        (d.is_global != 0 && self.is_foreign(&d.dgid)).then_some(d.dgid)
    }

    fn own_gid(&self, index: u8) -> [u8; 16] {
        self.gids
            .get(usize::from(index))
            .or(self.gids.last())
            .copied()
            .unwrap_or_default()
    }

    fn send_packet(&mut self, p: &Packet) {
        if let Some(port) = self.fabric.as_mut() {
            port.send(p);
        }
    }

    /// Sends a WQE's message to another HCA: UC and UD complete now, RC
    /// when the responder answers.
    pub(crate) fn send_to_fabric(
        &mut self,
        qpn: u32,
        c: &Ctrl,
        gid: [u8; 16],
        out: Outgoing,
    ) -> Result<Executed, Fail> {
        let qp = &self.qps[&qpn];
        let solicited = c.fm_ce_se & layout::SOLICITED != 0;
        if let Outgoing::Datagram { av, data } = out {
            let qkey = if av.qkey & 0x8000_0000 != 0 {
                qp.qkey
            } else {
                av.qkey
            };
            let (grh, l3) = self.grh(&av, data.len());
            let bytes = data.len() as u32;
            let p = Packet {
                header: Header {
                    src_gid: self.own_gid(av.sgid_index),
                    dst_gid: gid,
                    src_qpn: qpn,
                    dst_qpn: av.dqpn,
                    psn: 0,
                },
                body: Body::Datagram(Datagram {
                    qkey,
                    solicited,
                    imm: (c.opcode == op::SEND_IMM).then_some(c.imm),
                    grh,
                    l3,
                    data,
                }),
            };
            self.send_packet(&p);
            return Ok(Executed::Done(Done::bytes(bytes)));
        }
        let service = if qp.transport == Transport::Rc {
            Service::Rc
        } else {
            Service::Uc
        };
        let first = qp.wire.next_psn;
        let header = Header {
            src_gid: self.own_gid(qp.attrs.dest.sgid_index),
            dst_gid: gid,
            src_qpn: qpn,
            dst_qpn: qp.dest_qpn,
            psn: first,
        };
        let request = |op, total: u32| Request {
            service,
            op,
            solicited,
            imm: c.imm,
            total,
            offset: 0,
            raddr: 0,
            rkey: 0,
            swap_add: 0,
            compare: 0,
            data: Vec::new(),
        };
        let (packets, kind, npsn) = match out {
            Outgoing::Message {
                op,
                data,
                raddr,
                rkey,
            } => {
                let total = data.len() as u32;
                let n = wire::packets(u64::from(total));
                let mut v = Vec::with_capacity(n as usize);
                for i in 0..n {
                    let off = i as usize * wire::SEGMENT;
                    let end = (off + wire::SEGMENT).min(data.len());
                    v.push(Packet {
                        header: Header {
                            psn: psn_add(first, i),
                            ..header
                        },
                        body: Body::Request(Request {
                            solicited: solicited && i + 1 == n,
                            offset: off as u32,
                            raddr,
                            rkey,
                            data: data[off..end].to_vec(),
                            ..request(op, total)
                        }),
                    });
                }
                (v, Kind::Acked { bytes: total }, n)
            }
            Outgoing::Read {
                raddr,
                rkey,
                sges,
                len,
            } => {
                let p = Packet {
                    header,
                    body: Body::Request(Request {
                        raddr,
                        rkey,
                        ..request(ReqOp::Read, len)
                    }),
                };
                let kind = Kind::Read {
                    sges,
                    len,
                    got: Vec::new(),
                    packets: 0,
                };
                (vec![p], kind, wire::packets(u64::from(len)))
            }
            Outgoing::Atomic {
                raddr,
                rkey,
                sges,
                compare,
                swap_add,
            } => {
                let op = if compare.is_some() {
                    ReqOp::CmpSwap
                } else {
                    ReqOp::FetchAdd
                };
                let p = Packet {
                    header,
                    body: Body::Request(Request {
                        raddr,
                        rkey,
                        swap_add,
                        compare: compare.unwrap_or(0),
                        ..request(op, 8)
                    }),
                };
                (vec![p], Kind::Atomic { sges }, 1)
            }
            Outgoing::Datagram { .. } => unreachable!("handled above"),
        };
        let timeout = ack_timeout(qp);
        let uc = service == Service::Uc;
        for p in &packets {
            self.send_packet(p);
        }
        let q = self
            .qps
            .get_mut(&qpn)
            .ok_or(Fail::Req(synd::LOCAL_QP_OP_ERR))?;
        q.wire.next_psn = psn_add(first, npsn);
        if uc {
            let Kind::Acked { bytes } = kind else {
                return Err(Fail::Violation("a read or atomic on a UC QP".into()));
            };
            return Ok(Executed::Done(Done::bytes(bytes)));
        }
        if q.wire.outstanding.is_empty() {
            q.wire.deadline = timeout.map(|t| Instant::now() + t);
        }
        q.wire.outstanding.push_back(Pending {
            ctrl: *c,
            first_psn: first,
            npsn,
            packets,
            kind,
        });
        Ok(Executed::Posted)
    }

    /// Holds a locally completed WQE's CQE behind the outstanding ones;
    /// false when nothing is outstanding (write it now).
    pub(crate) fn hold_behind_outstanding(&mut self, qpn: u32, c: &Ctrl, done: Done) -> bool {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return false;
        };
        if q.wire.outstanding.is_empty() {
            return false;
        }
        let psn = q.wire.outstanding.back().map_or(0, Pending::last_psn);
        q.wire.outstanding.push_back(Pending {
            ctrl: *c,
            first_psn: psn,
            npsn: 1,
            packets: Vec::new(),
            kind: Kind::Local(done),
        });
        true
    }

    /// Flushes the outstanding WQEs of a QP entering ERR, oldest first.
    pub(crate) fn flush_outstanding(&mut self, qpn: u32) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        let gone = std::mem::take(&mut q.wire.outstanding);
        q.wire.deadline = None;
        q.wire.rnr_resend = None;
        q.wire.fence_wait = false;
        for p in gone {
            self.req_cqe(qpn, &p.ctrl, Err(synd::WR_FLUSH_ERR), 0);
        }
    }

    /// Receives and handles the packets waiting at the port, runs the
    /// transport timers and sends what waits. Returns the work done.
    pub(crate) fn fabric_poll(&mut self) -> usize {
        let mut did = 0;
        for _ in 0..256 {
            let Some(p) = self.fabric.as_mut().and_then(|f| f.recv()) else {
                break;
            };
            self.on_packet(p);
            did += 1;
        }
        did += self.fabric_timers();
        if let Some(f) = self.fabric.as_mut() {
            f.flush();
        }
        did
    }

    fn fabric_timers(&mut self) -> usize {
        let now = Instant::now();
        let due: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| {
                !q.wire.outstanding.is_empty()
                    && (q.wire.deadline.is_some_and(|d| d <= now)
                        || q.wire.rnr_resend.is_some_and(|(t, _)| t <= now))
            })
            .map(|(n, _)| *n)
            .collect();
        for &qpn in &due {
            let q = &self.qps[&qpn];
            if let Some((t, psn)) = q.wire.rnr_resend {
                if t <= now {
                    if let Some(q) = self.qps.get_mut(&qpn) {
                        q.wire.rnr_resend = None;
                    }
                    self.resend_from(qpn, psn);
                }
                continue;
            }
            // What the peer has not even read yet is not lost: its process
            // is not running (a loaded host); the timer starts again.
            if self.fabric.as_ref().is_some_and(|f| f.undelivered()) {
                if let Some(q) = self.qps.get_mut(&qpn) {
                    q.wire.deadline = ack_timeout(q).map(|t| now + t);
                }
                continue;
            }
            if q.wire.retries >= q.attrs.retry_cnt {
                self.fail_head(qpn, synd::RETRY_EXC_ERR);
                continue;
            }
            let psn = q.wire.outstanding[0].first_psn;
            if trace() {
                eprintln!(
                    "fabric: QP {qpn:#x} timed out, resending from PSN {psn:#x} (retry {} of {}, {} outstanding, next {:#x})",
                    q.wire.retries + 1,
                    q.attrs.retry_cnt,
                    q.wire.outstanding.len(),
                    q.wire.next_psn
                );
            }
            if let Some(q) = self.qps.get_mut(&qpn) {
                q.wire.retries += 1;
            }
            self.resend_from(qpn, psn);
        }
        due.len()
    }

    /// Sends again every outstanding packet from `psn` on (a read or an
    /// atomic whole, from its request).
    fn resend_from(&mut self, qpn: u32, psn: u32) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        let mut again = Vec::new();
        for p in q.wire.outstanding.iter_mut() {
            if psn_diff(p.last_psn(), psn) < 0 {
                continue;
            }
            match &mut p.kind {
                Kind::Read { got, packets, .. } => {
                    got.clear();
                    *packets = 0;
                    again.extend(p.packets.iter().cloned());
                }
                Kind::Atomic { .. } => again.extend(p.packets.iter().cloned()),
                _ => again.extend(
                    p.packets
                        .iter()
                        .filter(|k| psn_diff(k.header.psn, psn) >= 0)
                        .cloned(),
                ),
            }
        }
        q.wire.deadline = ack_timeout(q).map(|t| Instant::now() + t);
        for p in &again {
            self.send_packet(p);
        }
    }

    /// Completes the oldest outstanding WQE with error `syndrome`, moves
    /// the QP to ERR and flushes the rest.
    fn fail_head(&mut self, qpn: u32, syndrome: u8) {
        let Some(head) = self
            .qps
            .get_mut(&qpn)
            .and_then(|q| q.wire.outstanding.pop_front())
        else {
            return;
        };
        self.req_cqe(qpn, &head.ctrl, Err(syndrome), 0);
        self.enter_error(qpn);
        self.run_sq(qpn, None);
    }

    fn on_packet(&mut self, p: Packet) {
        let h = p.header;
        match p.body {
            Body::Request(r) => self.on_request(&h, r),
            Body::Datagram(d) => self.on_datagram(&h, d),
            body => self.on_response(&h, body),
        }
    }

    /// Sends a packet back to where `h` came from.
    fn reply(&mut self, h: &Header, psn: u32, body: Body) {
        let p = Packet {
            header: Header {
                src_gid: h.dst_gid,
                dst_gid: h.src_gid,
                src_qpn: h.dst_qpn,
                dst_qpn: h.src_qpn,
                psn,
            },
            body,
        };
        self.send_packet(&p);
    }

    fn on_datagram(&mut self, h: &Header, d: Datagram) {
        let ok = self.qps.get(&h.dst_qpn).is_some_and(|q| {
            q.transport == Transport::Ud && (q.state == RTR || q.state == RTS) && q.qkey == d.qkey
        });
        if !ok {
            return;
        }
        let Some(r) = self.pop_recv(h.dst_qpn) else {
            return;
        };
        let msg = Message {
            src: h.src_qpn,
            src_transport: Transport::Ud,
            data: Some(&d.data),
            byte_cnt: d.data.len() as u32,
            opcode: if d.imm.is_some() {
                cqe_op::RESP_SEND_IMM
            } else {
                cqe_op::RESP_SEND
            },
            imm: d.imm.unwrap_or_default(),
            solicited: d.solicited,
            grh: Some((d.grh, d.l3)),
        };
        let _ = self.complete_recv(h.dst_qpn, r, &msg);
    }

    fn on_request(&mut self, h: &Header, r: Request) {
        let qpn = h.dst_qpn;
        let Some(q) = self.qps.get_mut(&qpn) else {
            return; // no such QP (destroyed): dropped
        };
        let want = match r.service {
            Service::Rc => Transport::Rc,
            Service::Uc => Transport::Uc,
        };
        if q.transport != want || !(q.state == RTR || q.state == RTS) {
            return;
        }
        let rc = want == Transport::Rc;
        let d = psn_diff(h.psn, q.wire.expected);
        if rc {
            if d < 0 {
                if trace() {
                    eprintln!(
                        "fabric: QP {qpn:#x} got PSN {:#x} again (expects {:#x})",
                        h.psn, q.wire.expected
                    );
                }
                self.duplicate(h, &r);
                return;
            }
            if d > 0 {
                if trace() {
                    eprintln!(
                        "fabric: QP {qpn:#x} got PSN {:#x}, expects {:#x}{}",
                        h.psn,
                        q.wire.expected,
                        if q.wire.nak_sent { "" } else { ": NAK" }
                    );
                }
                if !q.wire.nak_sent {
                    q.wire.nak_sent = true;
                    let e = q.wire.expected;
                    self.reply(h, e, Body::Ack(Aeth::NakSequence));
                }
                return;
            }
            q.wire.nak_sent = false;
        } else if d != 0 {
            // UC: the message in progress is lost; a first packet starts
            // the next one there.
            q.wire.incoming = None;
            if !r.first() {
                return;
            }
            q.wire.expected = h.psn;
        }
        let last = r.last();
        match self.respond_to(qpn, h, &r) {
            Ok(n) => {
                if let Some(q) = self.qps.get_mut(&qpn) {
                    q.wire.expected = psn_add(h.psn, n);
                }
                if rc && last && !matches!(r.op, ReqOp::Read | ReqOp::CmpSwap | ReqOp::FetchAdd) {
                    self.reply(h, h.psn, Body::Ack(Aeth::Ack));
                }
            }
            Err(nak) => {
                if rc {
                    self.reply(h, h.psn, Body::Ack(nak));
                } else if let Some(q) = self.qps.get_mut(&qpn) {
                    // UC: the rest of the message is dropped.
                    q.wire.expected = psn_add(h.psn, 1);
                    q.wire.incoming = (!last).then_some(Incoming {
                        recv: None,
                        buf: Vec::new(),
                        dropping: true,
                    });
                }
            }
        }
    }

    /// A duplicate RC request (its PSN is before the expected one).
    fn duplicate(&mut self, h: &Header, r: &Request) {
        match r.op {
            ReqOp::Read => {
                let _ = self.read_response(h.dst_qpn, h, r);
            }
            ReqOp::CmpSwap | ReqOp::FetchAdd => {
                let old = self.qps[&h.dst_qpn]
                    .wire
                    .atomics
                    .iter()
                    .find(|(p, _)| *p == h.psn)
                    .map(|(_, v)| *v);
                if let Some(v) = old {
                    self.reply(h, h.psn, Body::AtomicResponse(v));
                }
            }
            _ => {
                let e = self.qps[&h.dst_qpn].wire.expected;
                self.reply(h, psn_add(e, wire::PSN_MASK), Body::Ack(Aeth::Ack));
            }
        }
    }

    /// Executes an in-sequence request packet; returns the PSNs it takes.
    fn respond_to(&mut self, qpn: u32, h: &Header, r: &Request) -> Result<u32, Aeth> {
        let rnr = Aeth::RnrNak(self.qps[&qpn].attrs.min_rnr_timer & 31);
        let transport = self.qps[&qpn].transport;
        match r.op {
            ReqOp::Send | ReqOp::SendImm | ReqOp::SendInv | ReqOp::Write | ReqOp::WriteImm => {
                let write = matches!(r.op, ReqOp::Write | ReqOp::WriteImm);
                if r.first() {
                    if write {
                        self.remote(qpn, r.rkey, r.raddr, u64::from(r.total), REMOTE_WRITE)
                            .map_err(|_| Aeth::NakRemoteAccess)?;
                    }
                    let recv = if r.op == ReqOp::Write {
                        None
                    } else {
                        Some(self.pop_recv(qpn).ok_or(rnr)?)
                    };
                    if let Some(q) = self.qps.get_mut(&qpn) {
                        q.wire.incoming = Some(Incoming {
                            recv,
                            buf: Vec::new(),
                            dropping: false,
                        });
                    }
                }
                let Some(mut inc) = self.qps.get_mut(&qpn).and_then(|q| q.wire.incoming.take())
                else {
                    return Err(Aeth::NakInvalidRequest);
                };
                if inc.dropping {
                    if !r.last() {
                        if let Some(q) = self.qps.get_mut(&qpn) {
                            q.wire.incoming = Some(inc);
                        }
                    }
                    return Ok(1);
                }
                if write {
                    let at = r.raddr.wrapping_add(u64::from(r.offset));
                    let len = r.data.len() as u64;
                    match self.remote(qpn, r.rkey, at, len, REMOTE_WRITE) {
                        // SAFETY: translated through the MR table (range,
                        // rkey, REMOTE_WRITE) just above.
                        Ok(Some(t)) => unsafe { memory::write(t, &r.data) },
                        Ok(None) => {}
                        Err(_) => return Err(Aeth::NakRemoteAccess),
                    }
                } else {
                    inc.buf.extend_from_slice(&r.data);
                }
                if !r.last() {
                    if let Some(q) = self.qps.get_mut(&qpn) {
                        q.wire.incoming = Some(inc);
                    }
                    return Ok(1);
                }
                let Some(recv) = inc.recv else {
                    return Ok(1);
                };
                let (opcode, imm) = match r.op {
                    ReqOp::Send => (cqe_op::RESP_SEND, [0; 4]),
                    ReqOp::SendImm => (cqe_op::RESP_SEND_IMM, r.imm),
                    ReqOp::SendInv => (cqe_op::RESP_SEND_INV, r.imm),
                    _ => (cqe_op::RESP_WR_IMM, r.imm),
                };
                let msg = Message {
                    src: h.src_qpn,
                    src_transport: transport,
                    data: (!write).then_some(&inc.buf[..]),
                    byte_cnt: r.total,
                    opcode,
                    imm,
                    solicited: r.solicited,
                    grh: None,
                };
                match self.complete_recv(qpn, recv, &msg) {
                    Ok(()) => Ok(1),
                    Err(Fail::Req(synd::REMOTE_INVAL_REQ_ERR)) => Err(Aeth::NakInvalidRequest),
                    Err(_) => Err(Aeth::NakRemoteOperational),
                }
            }
            ReqOp::Read => self.read_response(qpn, h, r),
            ReqOp::CmpSwap | ReqOp::FetchAdd => {
                if r.raddr % 8 != 0 {
                    return Err(Aeth::NakInvalidRequest);
                }
                let target = match self.remote(qpn, r.rkey, r.raddr, 8, REMOTE_ATOMIC) {
                    Ok(Some(t)) => t,
                    _ => return Err(Aeth::NakRemoteAccess),
                };
                let compare = (r.op == ReqOp::CmpSwap).then_some(r.compare);
                // SAFETY: 8 bytes checked for REMOTE_ATOMIC just above,
                // 8-aligned.
                let old = unsafe { memory::atomic(target, compare, r.swap_add) };
                if let Some(q) = self.qps.get_mut(&qpn) {
                    if q.wire.atomics.len() == ATOMIC_RECORD {
                        q.wire.atomics.pop_front();
                    }
                    q.wire.atomics.push_back((h.psn, old));
                }
                self.reply(h, h.psn, Body::AtomicResponse(old));
                Ok(1)
            }
        }
    }

    /// Answers a read request: its response packets, from `h.psn` on.
    fn read_response(&mut self, qpn: u32, h: &Header, r: &Request) -> Result<u32, Aeth> {
        let len = u64::from(r.total);
        let src = self
            .remote(qpn, r.rkey, r.raddr, len, REMOTE_READ)
            .map_err(|_| Aeth::NakRemoteAccess)?;
        let n = wire::packets(len);
        for i in 0..n {
            let off = i as usize * wire::SEGMENT;
            let end = (off + wire::SEGMENT).min(len as usize);
            let data = match src {
                // SAFETY: `len` bytes from `src` checked for REMOTE_READ
                // just above; this is a part of them.
                Some(s) => unsafe { memory::read(s + off as u64, end - off) },
                None => Vec::new(),
            };
            self.reply(
                h,
                psn_add(h.psn, i),
                Body::ReadResponse {
                    offset: off as u32,
                    data,
                },
            );
        }
        Ok(n)
    }

    fn on_response(&mut self, h: &Header, body: Body) {
        let qpn = h.dst_qpn;
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        if q.transport != Transport::Rc || q.state != RTS || q.wire.outstanding.is_empty() {
            if trace() {
                eprintln!(
                    "fabric: QP {qpn:#x} ignores a response (PSN {:#x}, state {}, {} outstanding): {body:?}",
                    h.psn,
                    q.state,
                    q.wire.outstanding.len()
                );
            }
            return;
        }
        let before = psn_add(h.psn, wire::PSN_MASK);
        match body {
            Body::Ack(Aeth::Ack) => self.complete_acked(qpn, h.psn),
            Body::Ack(Aeth::RnrNak(t)) => {
                if trace() {
                    eprintln!("fabric: QP {qpn:#x} RNR NAK at PSN {:#x}", h.psn);
                }
                self.complete_acked(qpn, before);
                let Some(q) = self.qps.get_mut(&qpn) else {
                    return;
                };
                if q.wire.outstanding.is_empty() {
                    return;
                }
                if q.rnr_retry != 7 && q.wire.rnr_naks >= q.rnr_retry {
                    self.fail_head(qpn, synd::RNR_RETRY_EXC_ERR);
                    return;
                }
                q.wire.rnr_naks = q.wire.rnr_naks.saturating_add(1);
                let wait = Duration::from_micros(u64::from(RNR_US[usize::from(t & 31)]));
                q.wire.deadline = None;
                q.wire.rnr_resend = Some((Instant::now() + wait, h.psn));
            }
            Body::Ack(Aeth::NakSequence) => {
                self.complete_acked(qpn, before);
                let waiting_rnr = self
                    .qps
                    .get(&qpn)
                    .is_some_and(|q| q.wire.rnr_resend.is_some());
                if !waiting_rnr {
                    self.resend_from(qpn, h.psn);
                }
            }
            Body::Ack(nak) => {
                self.complete_acked(qpn, before);
                let s = match nak {
                    Aeth::NakRemoteAccess => synd::REMOTE_ACCESS_ERR,
                    Aeth::NakInvalidRequest => synd::REMOTE_INVAL_REQ_ERR,
                    _ => synd::REMOTE_OP_ERR,
                };
                self.fail_head(qpn, s);
            }
            Body::ReadResponse { offset, data } => {
                self.complete_acked(qpn, before);
                let Some(q) = self.qps.get_mut(&qpn) else {
                    return;
                };
                let Some(head) = q.wire.outstanding.front_mut() else {
                    return;
                };
                let first = head.first_psn;
                let npsn = head.npsn;
                let Kind::Read {
                    got, packets, len, ..
                } = &mut head.kind
                else {
                    return;
                };
                if h.psn != psn_add(first, *packets) || offset as usize != got.len() {
                    return; // a duplicate or out of order: the retry resends
                }
                if got.len() + data.len() > *len as usize {
                    return;
                }
                got.extend_from_slice(&data);
                *packets += 1;
                if *packets == npsn {
                    self.progress(qpn);
                    self.land_head(qpn);
                }
            }
            Body::AtomicResponse(v) => {
                self.complete_acked(qpn, before);
                let Some(head) = self
                    .qps
                    .get_mut(&qpn)
                    .and_then(|q| q.wire.outstanding.front_mut())
                else {
                    return;
                };
                if head.first_psn != h.psn {
                    return;
                }
                let Kind::Atomic { sges } = &mut head.kind else {
                    return;
                };
                let sges = std::mem::take(sges);
                head.kind = Kind::Read {
                    sges,
                    len: 8,
                    got: v.to_ne_bytes().to_vec(),
                    packets: 1,
                };
                self.progress(qpn);
                self.land_head(qpn);
            }
            Body::Request(_) | Body::Datagram(_) => {}
        }
    }

    /// The requester made progress: its retry counters start again.
    fn progress(&mut self, qpn: u32) {
        if let Some(q) = self.qps.get_mut(&qpn) {
            q.wire.retries = 0;
            q.wire.rnr_naks = 0;
            q.wire.rnr_resend = None;
            q.wire.deadline = ack_timeout(q).map(|t| Instant::now() + t);
        }
    }

    /// Completes the sends and writes acknowledged up to `psn`, and the
    /// local WQEs behind them.
    fn complete_acked(&mut self, qpn: u32, psn: u32) {
        let mut any = false;
        loop {
            let Some(q) = self.qps.get_mut(&qpn) else {
                return;
            };
            let Some(head) = q.wire.outstanding.front() else {
                break;
            };
            let ready = match head.kind {
                Kind::Acked { .. } => psn_diff(head.last_psn(), psn) <= 0,
                Kind::Local(_) => true,
                _ => false,
            };
            if !ready {
                break;
            }
            let Some(p) = q.wire.outstanding.pop_front() else {
                break;
            };
            any = true;
            let signaled = p.ctrl.fm_ce_se & layout::CQ_UPDATE != 0;
            match p.kind {
                Kind::Acked { bytes } if signaled => {
                    self.req_cqe(qpn, &p.ctrl, Ok(None), bytes);
                }
                Kind::Local(done) if signaled => {
                    self.req_cqe(qpn, &p.ctrl, Ok(done.in_cqe), done.bytes);
                }
                _ => {}
            }
        }
        if any {
            self.progress(qpn);
            if let Some(q) = self.qps.get_mut(&qpn) {
                if q.wire.outstanding.is_empty() {
                    q.wire.deadline = None;
                }
            }
        }
    }

    /// Lands the head read's (or atomic's) bytes and completes it, then
    /// what follows it that is done.
    fn land_head(&mut self, qpn: u32) {
        let Some(p) = self
            .qps
            .get_mut(&qpn)
            .and_then(|q| q.wire.outstanding.pop_front())
        else {
            return;
        };
        let last = p.last_psn();
        let Kind::Read { sges, got, .. } = p.kind else {
            return;
        };
        let signaled = p.ctrl.fm_ce_se & layout::CQ_UPDATE != 0;
        let room = self.qps[&qpn].scatter_req;
        if signaled && InCqe::fits(room, got.len()) {
            self.req_cqe(qpn, &p.ctrl, Ok(InCqe::of(room, &got)), got.len() as u32);
        } else {
            // The scatter list is translated again now: the MR table may
            // have changed since the WQE was sent.
            let Ok(ranges) = self.scatter_ranges(&sges, got.len()) else {
                self.req_cqe(qpn, &p.ctrl, Err(synd::LOCAL_PROT_ERR), 0);
                self.enter_error(qpn);
                self.run_sq(qpn, None);
                return;
            };
            let mut off = 0;
            for (dst, n) in ranges {
                // SAFETY: `n` bytes checked for LOCAL_WRITE just above.
                unsafe { memory::write(dst, &got[off..off + n]) };
                off += n;
            }
            if signaled {
                self.req_cqe(qpn, &p.ctrl, Ok(None), got.len() as u32);
            }
        }
        self.complete_acked(qpn, last);
        if let Some(q) = self.qps.get_mut(&qpn) {
            if q.wire.outstanding.is_empty() {
                q.wire.deadline = None;
            }
        }
    }
}
