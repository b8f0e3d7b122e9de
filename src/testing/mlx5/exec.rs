//! Executing one send WQE between the model's QPs: decoding its segments
//! with the model's own layout, checking keys, access rights and states,
//! moving the bytes in host memory and writing the responder's CQE.
//!
//! Transport rules the model applies (InfiniBand semantics as mlx5
//! hardware implements them): RC reports every remote failure to the
//! requester (no receive: RNR, retried forever with `rnr_retry` 7; a bad
//! rkey: remote access error; a responder that does not answer: transport
//! retries exceeded); UC and UD report nothing remote (the message is
//! dropped); UD checks the Q_Key (a Q_Key with bit 31 set means "the
//! sender's own") and delivers 40 bytes of GRH ahead of the payload.
#![allow(unsafe_code)]

use super::{
    hca::{Fail, Hca, Transport, RTR, RTS},
    layout::{self, be32, be64, cqe_op, op, synd, Cqe, Ctrl, Data, InCqe},
    memory::{self, dbrec, LOCAL_WRITE, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE},
    remote::Outgoing,
    wire::ReqOp,
};

/// What executing a WQE left to do.
pub(crate) enum Executed {
    /// It is done; its CQE reports this.
    Done(Done),
    /// A read or atomic, checked at both ends: its response is still to
    /// land ([`Hca::land`]), at once or late (`order.rs`).
    Response(Response),
    /// Sent over the fabric on an RC QP: it completes when the responder
    /// answers (`remote.rs`).
    Posted,
}

/// What an executed WQE's CQE reports.
#[derive(Debug, Clone)]
pub(crate) struct Done {
    /// The byte count.
    pub(crate) bytes: u32,
    /// A read or atomic response scattered to the CQE.
    pub(crate) in_cqe: Option<InCqe>,
}

impl Done {
    pub(crate) fn bytes(bytes: u32) -> Done {
        Done {
            bytes,
            in_cqe: None,
        }
    }
}

/// The response of an RDMA read or atomic, decided and checked when its
/// WQE executed (the rkey, range and access at the responder, the local
/// keys it scatters to) and not carried out yet: the responder's memory
/// access happens when it lands, and the answer goes where `to` says.
#[derive(Debug)]
pub(crate) struct Response {
    fetch: Fetch,
    to: Landing,
}

/// The responder's side of a [`Response`], at host addresses checked
/// against the MR table.
#[derive(Debug)]
enum Fetch {
    /// An RDMA read of `len` bytes at `src` (`None`: zero bytes, no key
    /// checked).
    Read { src: Option<u64>, len: usize },
    /// An atomic on the 8 bytes at `target` (`compare`: compare and swap).
    Atomic {
        target: u64,
        compare: Option<u64>,
        swap_add: u64,
    },
}

/// Where a [`Response`]'s bytes go at the requester.
#[derive(Debug)]
enum Landing {
    /// Into the CQE of the signaled WQE (the QP's `cs_req` room, 32 or 64
    /// bytes; the library copies them to the scatter list).
    Cqe(u8),
    /// Into the local scatter list: host addresses and lengths, checked
    /// for LOCAL_WRITE.
    Memory(Vec<(u64, usize)>),
}

/// A receive WQE taken by the responder.
#[derive(Debug)]
pub(crate) struct Recv {
    pub(crate) sges: Vec<Data>,
    pub(crate) wqe_counter: u16,
}

/// Where a message goes, once resolved.
enum Dest {
    /// Deliver to this QP.
    Qp(u32),
    /// Dropped on the way (UC/UD: nobody tells the requester).
    Dropped,
    /// To another HCA of the fabric, whose port has this GID (`remote.rs`).
    Fabric([u8; 16]),
}

/// What a responder delivers into a receive WQE.
pub(crate) struct Message<'a> {
    /// The requester's QP (on this HCA, or the packet's source QP).
    pub(crate) src: u32,
    pub(crate) src_transport: Transport,
    /// Bytes to scatter (`None`: RDMA write with immediate, nothing to scatter).
    pub(crate) data: Option<&'a [u8]>,
    pub(crate) byte_cnt: u32,
    pub(crate) opcode: u8,
    pub(crate) imm: [u8; 4],
    pub(crate) solicited: bool,
    /// UD: the GRH to put ahead of the data, and its L3 type.
    pub(crate) grh: Option<([u8; 40], u8)>,
}

impl Hca {
    /// Executes one WQE: returns what its CQE reports, or for a read or
    /// atomic the response still to land.
    pub(crate) fn execute(&mut self, qpn: u32, at: u32, c: &Ctrl) -> Result<Executed, Fail> {
        let transport = self.qps[&qpn].transport;
        if c.ds == 0 {
            return Err(Fail::Violation("a WQE with ds 0".into()));
        }
        if c.fm_ce_se >> 5 > super::order::FENCE_MODE_MAX {
            return Err(Fail::Violation(format!(
                "fence mode {} (fm_ce_se {:#04x}): the PRM defines 0 to 4",
                c.fm_ce_se >> 5,
                c.fm_ce_se
            )));
        }
        let end = (at * 4).wrapping_add(c.ds);
        let mut u = at * 4 + 1;
        let solicited = c.fm_ce_se & layout::SOLICITED != 0;
        let needs = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(Fail::Violation(format!(
                    "opcode {:#x} on a {transport:?} QP ({what})",
                    c.opcode
                )))
            }
        };
        match c.opcode {
            op::NOP => Ok(Executed::Done(Done::bytes(0))),
            op::SEND | op::SEND_IMM | op::SEND_INVAL => {
                let av = if transport == Transport::Ud {
                    let mut b = self.units(qpn, u, 3);
                    u = u.wrapping_add(3);
                    b.truncate(48);
                    Some(layout::av(&b))
                } else {
                    None
                };
                needs(
                    c.opcode != op::SEND_INVAL || transport == Transport::Rc,
                    "RC only",
                )?;
                let data = self.gather(qpn, u, end)?;
                let opcode = match c.opcode {
                    op::SEND => cqe_op::RESP_SEND,
                    op::SEND_IMM => cqe_op::RESP_SEND_IMM,
                    _ => cqe_op::RESP_SEND_INV,
                };
                let dest = match &av {
                    Some(av) => self.resolve_ud(qpn, av)?,
                    None => self.resolve(qpn)?,
                };
                if let Dest::Fabric(gid) = dest {
                    let op = match c.opcode {
                        op::SEND => ReqOp::Send,
                        op::SEND_IMM => ReqOp::SendImm,
                        _ => ReqOp::SendInv,
                    };
                    let out = match av {
                        Some(av) => Outgoing::Datagram { av, data },
                        None => Outgoing::Message {
                            op,
                            data,
                            raddr: 0,
                            rkey: 0,
                        },
                    };
                    return self.send_to_fabric(qpn, c, gid, out);
                }
                let Dest::Qp(peer) = dest else {
                    return Ok(Executed::Done(Done::bytes(data.len() as u32)));
                };
                let grh = av.map(|av| self.grh(&av, data.len()));
                let msg = Message {
                    src: qpn,
                    src_transport: transport,
                    data: Some(&data),
                    byte_cnt: data.len() as u32,
                    opcode,
                    imm: if c.opcode == op::SEND { [0; 4] } else { c.imm },
                    solicited,
                    grh,
                };
                self.deliver(peer, &msg)?;
                Ok(Executed::Done(Done::bytes(data.len() as u32)))
            }
            op::RDMA_WRITE | op::RDMA_WRITE_IMM => {
                needs(transport != Transport::Ud, "no RDMA on UD")?;
                let (raddr, rkey) = self.raddr(qpn, u);
                u = u.wrapping_add(1);
                let data = self.gather(qpn, u, end)?;
                let peer = match self.resolve(qpn)? {
                    Dest::Qp(peer) => peer,
                    Dest::Fabric(gid) => {
                        let op = if c.opcode == op::RDMA_WRITE {
                            ReqOp::Write
                        } else {
                            ReqOp::WriteImm
                        };
                        let out = Outgoing::Message {
                            op,
                            data,
                            raddr,
                            rkey,
                        };
                        return self.send_to_fabric(qpn, c, gid, out);
                    }
                    Dest::Dropped => return Ok(Executed::Done(Done::bytes(data.len() as u32))),
                };
                let len = data.len() as u64;
                let target = match self.remote(peer, rkey, raddr, len, REMOTE_WRITE) {
                    Ok(t) => t,
                    Err(_) if transport == Transport::Uc => {
                        return Ok(Executed::Done(Done::bytes(len as u32)))
                    }
                    Err(e) => return Err(e),
                };
                let recv = if c.opcode == op::RDMA_WRITE_IMM {
                    match self.take_recv(qpn, peer)? {
                        Some(r) => Some(r),
                        None => return Ok(Executed::Done(Done::bytes(len as u32))), // UC: dropped
                    }
                } else {
                    None
                };
                if let Some(t) = target {
                    // SAFETY: translated through the MR table (range, rkey,
                    // REMOTE_WRITE) just above.
                    unsafe { memory::write(t, &data) };
                }
                if let Some(r) = recv {
                    let msg = Message {
                        src: qpn,
                        src_transport: transport,
                        data: None,
                        byte_cnt: len as u32,
                        opcode: cqe_op::RESP_WR_IMM,
                        imm: c.imm,
                        solicited,
                        grh: None,
                    };
                    self.complete_recv(peer, r, &msg)?;
                }
                Ok(Executed::Done(Done::bytes(len as u32)))
            }
            op::RDMA_READ => {
                needs(transport == Transport::Rc, "RC only")?;
                let (raddr, rkey) = self.raddr(qpn, u);
                u = u.wrapping_add(1);
                let sges = self.local_sges(qpn, u, end)?;
                let len: u64 = sges.iter().map(|s| u64::from(s.len)).sum();
                let peer = match self.resolve(qpn)? {
                    Dest::Qp(peer) => peer,
                    Dest::Fabric(gid) => {
                        let out = Outgoing::Read {
                            raddr,
                            rkey,
                            sges,
                            len: len as u32,
                        };
                        return self.send_to_fabric(qpn, c, gid, out);
                    }
                    Dest::Dropped => return Ok(Executed::Done(Done::bytes(0))),
                };
                let src = self.remote(peer, rkey, raddr, len, REMOTE_READ)?;
                let fetch = Fetch::Read {
                    src,
                    len: len as usize,
                };
                self.response(qpn, c, &sges, fetch)
            }
            op::ATOMIC_CS | op::ATOMIC_FA => {
                needs(transport == Transport::Rc, "RC only")?;
                let (raddr, rkey) = self.raddr(qpn, u);
                let a = self.sq_unit(&self.qps[&qpn], u.wrapping_add(1));
                let (swap_add, compare) = (be64(&a, 0), be64(&a, 8));
                u = u.wrapping_add(2);
                let sges = self.local_sges(qpn, u, end)?;
                if sges.len() != 1 || sges[0].len != 8 {
                    return Err(Fail::Violation(
                        "an atomic's local SGE is not one of 8 bytes".into(),
                    ));
                }
                let peer = match self.resolve(qpn)? {
                    Dest::Qp(peer) => peer,
                    Dest::Fabric(gid) => {
                        let out = Outgoing::Atomic {
                            raddr,
                            rkey,
                            sges,
                            compare: (c.opcode == op::ATOMIC_CS).then_some(compare),
                            swap_add,
                        };
                        return self.send_to_fabric(qpn, c, gid, out);
                    }
                    Dest::Dropped => return Ok(Executed::Done(Done::bytes(8))),
                };
                if raddr % 8 != 0 {
                    return Err(Fail::Req(synd::REMOTE_INVAL_REQ_ERR));
                }
                let Some(target) = self.remote(peer, rkey, raddr, 8, REMOTE_ATOMIC)? else {
                    return Ok(Executed::Done(Done::bytes(8)));
                };
                let compare = (c.opcode == op::ATOMIC_CS).then_some(compare);
                let fetch = Fetch::Atomic {
                    target,
                    compare,
                    swap_add,
                };
                self.response(qpn, c, &sges, fetch)
            }
            other => Err(Fail::Violation(format!(
                "WQE opcode {other:#x}, which the model does not execute"
            ))),
        }
    }

    /// The response of a read or atomic whose responder side checked out:
    /// where its `fetch`'s bytes go, as the requester's QP context says
    /// (in the CQE of a signaled WQE when they fit the QP's `cs_req` room,
    /// and the library copies them to the WQE's scatter list; else into
    /// the local scatter list, whose keys are checked now).
    fn response(&self, qpn: u32, c: &Ctrl, sges: &[Data], fetch: Fetch) -> Result<Executed, Fail> {
        let len = match fetch {
            Fetch::Read { len, .. } => len,
            Fetch::Atomic { .. } => 8,
        };
        let room = self.qps[&qpn].scatter_req;
        let to = if c.fm_ce_se & layout::CQ_UPDATE != 0 && InCqe::fits(room, len) {
            Landing::Cqe(room)
        } else {
            Landing::Memory(self.scatter_ranges(sges, len)?)
        };
        Ok(Executed::Response(Response { fetch, to }))
    }

    /// Carries out a read's or atomic's response: the responder's memory
    /// access, then the answer into the CQE or the local scatter list.
    /// Returns what the WQE's CQE reports.
    pub(crate) fn land(&self, r: &Response) -> Done {
        // Every address here was translated through the MR table when the
        // WQE executed, in the same run of its send queue (`Hca::run_sq`,
        // under the HCA's lock: no command, which could deregister it, has
        // run since).
        let bytes = match r.fetch {
            Fetch::Read {
                src: Some(src),
                len,
            } => {
                // SAFETY: `len` bytes checked for REMOTE_READ (see above).
                unsafe { memory::read(src, len) }
            }
            Fetch::Read { src: None, .. } => Vec::new(),
            Fetch::Atomic {
                target,
                compare,
                swap_add,
            } => {
                // SAFETY: 8 bytes checked for REMOTE_ATOMIC (see above) and
                // 8-aligned (MRs start at a host address with the iova's
                // alignment in the model's use).
                let old = unsafe { memory::atomic(target, compare, swap_add) };
                old.to_ne_bytes().to_vec()
            }
        };
        match &r.to {
            Landing::Cqe(room) => Done {
                bytes: bytes.len() as u32,
                in_cqe: InCqe::of(*room, &bytes),
            },
            Landing::Memory(ranges) => {
                let mut off = 0;
                for &(dst, n) in ranges {
                    // SAFETY: `n` bytes checked for LOCAL_WRITE (see above).
                    unsafe { memory::write(dst, &bytes[off..off + n]) };
                    off += n;
                }
                Done::bytes(bytes.len() as u32)
            }
        }
    }

    /// `n` 16-byte units of the QP's send queue from unit `u`, wrapped.
    fn units(&self, qpn: u32, u: u32, n: u32) -> Vec<u8> {
        let qp = &self.qps[&qpn];
        (0..n)
            .flat_map(|k| self.sq_unit(qp, u.wrapping_add(k)))
            .collect()
    }

    fn raddr(&self, qpn: u32, u: u32) -> (u64, u32) {
        let r = self.sq_unit(&self.qps[&qpn], u);
        (be64(&r, 0), be32(&r, 8))
    }

    /// The responder of a connected QP's message.
    fn resolve(&self, qpn: u32) -> Result<Dest, Fail> {
        let qp = &self.qps[&qpn];
        if let Some(gid) = self.fabric_gid(qp) {
            return Ok(Dest::Fabric(gid));
        }
        let ok = match self.qps.get(&qp.dest_qpn) {
            Some(p) => {
                (p.state == RTR || p.state == RTS)
                    && p.transport == qp.transport
                    && p.dest_qpn == qpn
            }
            None => false,
        };
        match (ok, qp.transport) {
            (true, _) => Ok(Dest::Qp(qp.dest_qpn)),
            // Nobody answers: the requester's transport retries run out.
            (false, Transport::Rc) => Err(Fail::Req(synd::RETRY_EXC_ERR)),
            (false, _) => Ok(Dest::Dropped),
        }
    }

    /// The responder of a UD message: the AV's QP, if its Q_Key matches.
    fn resolve_ud(&self, qpn: u32, av: &layout::Av) -> Result<Dest, Fail> {
        if !av.extended {
            return Err(Fail::Violation(
                "a UD WQE without MLX5_EXTENDED_UD_AV (the model reads 48-byte AVs)".into(),
            ));
        }
        if self.is_foreign(&av.rgid) {
            return Ok(Dest::Fabric(av.rgid));
        }
        let own = self.qps[&qpn].qkey;
        let qkey = if av.qkey & 0x8000_0000 != 0 {
            own
        } else {
            av.qkey
        };
        Ok(match self.qps.get(&av.dqpn) {
            Some(p)
                if p.transport == Transport::Ud
                    && (p.state == RTR || p.state == RTS)
                    && p.qkey == qkey =>
            {
                Dest::Qp(av.dqpn)
            }
            _ => Dest::Dropped,
        })
    }

    /// Checks an rkey at the responder: `Ok(None)` for a zero-length access
    /// (no key is checked), else the host address.
    pub(crate) fn remote(
        &self,
        peer: u32,
        rkey: u32,
        va: u64,
        len: u64,
        access: u32,
    ) -> Result<Option<u64>, Fail> {
        if len == 0 {
            return Ok(None);
        }
        let qp_allows = self.qps[&peer].access & access == access;
        match self.mrs.translate(rkey, true, va, len, access) {
            Ok(a) if qp_allows => Ok(Some(a)),
            _ => Err(Fail::Req(synd::REMOTE_ACCESS_ERR)),
        }
    }

    /// Gathers a WQE's data segments (or inline data) from unit `u` to
    /// `end`; local keys are checked.
    pub(crate) fn gather(&self, qpn: u32, mut u: u32, end: u32) -> Result<Vec<u8>, Fail> {
        let qp = &self.qps[&qpn];
        let mut out = Vec::new();
        while u != end {
            let seg = self.sq_unit(qp, u);
            let w = be32(&seg, 0);
            if w & layout::INLINE != 0 {
                self.saw_inline.set(true);
                let len = (w & !layout::INLINE) as usize;
                let units = (4 + len as u32).div_ceil(16);
                if end.wrapping_sub(u) < units {
                    return Err(Fail::Violation(format!(
                        "an inline segment of {len} bytes runs past the WQE's ds"
                    )));
                }
                let mut bytes = seg[4..].to_vec();
                for k in 1..units {
                    bytes.extend_from_slice(&self.sq_unit(qp, u.wrapping_add(k)));
                }
                bytes.truncate(len);
                out.extend_from_slice(&bytes);
                u = u.wrapping_add(units);
                continue;
            }
            let d = layout::data(&seg);
            if d.len == 0 {
                return Err(Fail::Violation(
                    "a zero-length data segment (2 GiB to the device; rdma-core skips \
                     zero-length SGEs)"
                        .into(),
                ));
            }
            let Ok(src) = self
                .mrs
                .translate(d.lkey, false, d.addr, u64::from(d.len), 0)
            else {
                return Err(Fail::Req(synd::LOCAL_PROT_ERR));
            };
            // SAFETY: translated through the MR table just above.
            out.extend_from_slice(&unsafe { memory::read(src, d.len as usize) });
            u = u.wrapping_add(1);
        }
        Ok(out)
    }

    /// Local scatter entries of a READ/atomic (data segments only).
    pub(crate) fn local_sges(&self, qpn: u32, mut u: u32, end: u32) -> Result<Vec<Data>, Fail> {
        let qp = &self.qps[&qpn];
        let mut v = Vec::new();
        while u != end {
            let d = layout::data(&self.sq_unit(qp, u));
            if d.len & layout::INLINE != 0 || d.len == 0 {
                return Err(Fail::Violation(
                    "an inline or zero-length segment where the device scatters".into(),
                ));
            }
            v.push(d);
            u = u.wrapping_add(1);
        }
        Ok(v)
    }

    /// The host ranges of the first `len` bytes of a local scatter list
    /// (LOCAL_WRITE checked).
    pub(crate) fn scatter_ranges(
        &self,
        sges: &[Data],
        len: usize,
    ) -> Result<Vec<(u64, usize)>, Fail> {
        let mut ranges = Vec::with_capacity(sges.len());
        let mut off = 0usize;
        for s in sges {
            if off >= len {
                break;
            }
            let n = (s.len as usize).min(len - off);
            let Ok(dst) = self
                .mrs
                .translate(s.lkey, false, s.addr, n as u64, LOCAL_WRITE)
            else {
                return Err(Fail::Req(synd::LOCAL_PROT_ERR));
            };
            ranges.push((dst, n));
            off += n;
        }
        Ok(ranges)
    }

    /// Takes the responder's next receive WQE (its RQ or SRQ). No receive:
    /// RC waits (`rnr_retry` 7) or fails with RNR retries exceeded; UC and
    /// UD drop the message (`Ok(None)`).
    fn take_recv(&mut self, src: u32, peer: u32) -> Result<Option<Recv>, Fail> {
        let r = self.pop_recv(peer);
        if r.is_some() {
            return Ok(r);
        }
        let s = &self.qps[&src];
        match s.transport {
            Transport::Rc if s.rnr_retry == 7 => Err(Fail::Rnr),
            Transport::Rc => Err(Fail::Req(synd::RNR_RETRY_EXC_ERR)),
            _ => Ok(None),
        }
    }

    /// Takes `peer`'s next receive WQE (its RQ or SRQ), if one is posted.
    pub(crate) fn pop_recv(&mut self, peer: u32) -> Option<Recv> {
        let p = &self.qps[&peer];
        match p.srq {
            Some(srqn) => match self.srqs.get_mut(&srqn) {
                Some(srq) if dbrec(srq.db, 0) as u16 != srq.taken => {
                    let idx = srq.head;
                    let at = srq.buf + u64::from(idx * srq.stride);
                    // SAFETY: inside the SRQ buffer given at create.
                    let wqe = unsafe { memory::read(at, srq.stride as usize) };
                    srq.head = u32::from(layout::be16(&wqe, 2)) & (srq.wqe_cnt - 1);
                    srq.taken = srq.taken.wrapping_add(1);
                    Some(Recv {
                        sges: scatter_list(&wqe[16..]),
                        wqe_counter: idx as u16,
                    })
                }
                _ => None,
            },
            None => {
                let posted = dbrec(p.db, 0) & 0xffff;
                if p.rq_cnt == 0 || posted == p.rq_ci & 0xffff {
                    None
                } else {
                    let idx = p.rq_ci & (p.rq_cnt - 1);
                    let at = p.buf + (u64::from(idx) << p.rq_shift);
                    // SAFETY: inside the RQ (offset 0 of the QP buffer).
                    let wqe = unsafe { memory::read(at, 1 << p.rq_shift) };
                    let ctr = p.rq_ci as u16;
                    if let Some(p) = self.qps.get_mut(&peer) {
                        p.rq_ci = p.rq_ci.wrapping_add(1);
                    }
                    Some(Recv {
                        sges: scatter_list(&wqe),
                        wqe_counter: ctr,
                    })
                }
            }
        }
    }

    /// Delivers a message into `peer`'s next receive.
    fn deliver(&mut self, peer: u32, msg: &Message<'_>) -> Result<(), Fail> {
        match self.take_recv(msg.src, peer)? {
            Some(r) => self.complete_recv(peer, r, msg),
            None => Ok(()),
        }
    }

    /// Scatters the message into the receive and writes the responder's
    /// CQE; a receive too small or with a bad lkey completes in error at
    /// the responder (which moves to ERR, RC/UC) and, on RC, NAKs the
    /// requester.
    pub(crate) fn complete_recv(
        &mut self,
        peer: u32,
        r: Recv,
        msg: &Message<'_>,
    ) -> Result<(), Fail> {
        let mut byte_cnt = msg.byte_cnt;
        let mut failed = None;
        // A message that fits the responder's `cs_res` room goes in the
        // CQE, and the receive's buffers are not written (the library
        // copies it there when it polls, and checks the length).
        let room = self.qps[&peer].scatter_res;
        let in_cqe = match msg.data {
            Some(data) if msg.grh.is_none() => InCqe::of(room, data),
            _ => None,
        };
        if let (Some(data), None) = (msg.data, in_cqe) {
            let mut bytes = Vec::with_capacity(data.len() + 40);
            if let Some((grh, _)) = &msg.grh {
                bytes.extend_from_slice(grh);
            }
            bytes.extend_from_slice(data);
            byte_cnt = bytes.len() as u32;
            let room: u64 = r.sges.iter().map(|s| u64::from(s.len)).sum();
            if room < bytes.len() as u64 {
                failed = Some(synd::LOCAL_LENGTH_ERR);
            } else {
                let mut off = 0usize;
                let mut targets = Vec::new();
                for s in &r.sges {
                    if off >= bytes.len() {
                        break;
                    }
                    let n = (s.len as usize).min(bytes.len() - off);
                    match self
                        .mrs
                        .translate(s.lkey, false, s.addr, n as u64, LOCAL_WRITE)
                    {
                        Ok(dst) => targets.push((dst, off, n)),
                        Err(_) => {
                            failed = Some(synd::LOCAL_PROT_ERR);
                            break;
                        }
                    }
                    off += n;
                }
                if failed.is_none() {
                    for (dst, off, n) in targets {
                        // SAFETY: translated through the MR table above.
                        unsafe { memory::write(dst, &bytes[off..off + n]) };
                    }
                }
            }
        }
        let q = self.resp_fields(peer);
        let cqn = self.qps[&peer].recv_cq;
        if let Some(s) = failed {
            self.post_cqe(
                cqn,
                Cqe {
                    opcode: cqe_op::RESP_ERR,
                    wqe_counter: r.wqe_counter,
                    syndrome: s,
                    vendor_syndrome: super::hca::VENDOR_OTHER,
                    ..q
                },
            );
            let src_transport = msg.src_transport;
            if src_transport != Transport::Ud {
                self.enter_error(peer);
            }
            return match src_transport {
                Transport::Rc if s == synd::LOCAL_LENGTH_ERR => {
                    Err(Fail::Req(synd::REMOTE_INVAL_REQ_ERR))
                }
                Transport::Rc => Err(Fail::Req(synd::REMOTE_OP_ERR)),
                _ => Ok(()),
            };
        }
        let (flags_rqpn, l3_type) = match &msg.grh {
            // g = 1 (a GRH is present), the RoCE L3 header type, source QP.
            Some((_, l3)) => (1 << 28 | u32::from(*l3) << 24 | msg.src, *l3),
            None => (0, 0),
        };
        self.post_cqe(
            cqn,
            Cqe {
                opcode: msg.opcode,
                solicited: msg.solicited,
                wqe_counter: r.wqe_counter,
                byte_cnt,
                imm: msg.imm,
                flags_rqpn,
                l3_type,
                in_cqe,
                ..q
            },
        );
        Ok(())
    }

    /// The 40 bytes a RoCE v2 UD receive starts with: for an IPv4-mapped
    /// destination GID, 20 unspecified bytes (zero here) and the IPv4
    /// header; else the IPv6 header. Sources: the AV's GID index into the
    /// port's table and its destination GID.
    pub(crate) fn grh(&self, av: &layout::Av, payload: usize) -> ([u8; 40], u8) {
        let sgid = self
            .gids
            .get(usize::from(av.sgid_index))
            .copied()
            .unwrap_or([0; 16]);
        let dgid = av.rgid;
        // UDP 8 + BTH 12 + DETH 8 + payload + ICRC 4.
        let l4 = 8 + 12 + 8 + payload + 4;
        let mut g = [0u8; 40];
        let v4 = dgid[..10] == [0; 10] && dgid[10..12] == [0xff, 0xff];
        if v4 {
            let h = &mut g[20..];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&((20 + l4) as u16).to_be_bytes());
            h[6] = 0x40; // don't fragment
            h[8] = 64; // TTL
            h[9] = 17; // UDP
            h[12..16].copy_from_slice(&sgid[12..]);
            h[16..20].copy_from_slice(&dgid[12..]);
            let sum = h
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum::<u32>();
            let sum = (sum & 0xffff) + (sum >> 16);
            let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            (g, layout::L3_IPV4)
        } else {
            g[0] = 0x60;
            g[4..6].copy_from_slice(&(l4 as u16).to_be_bytes());
            g[6] = 17; // UDP
            g[7] = 64; // hop limit
            g[8..24].copy_from_slice(&sgid);
            g[24..40].copy_from_slice(&dgid);
            (g, layout::L3_IPV6)
        }
    }
}

/// The data segments of a receive WQE, up to the terminator.
fn scatter_list(bytes: &[u8]) -> Vec<Data> {
    bytes
        .chunks_exact(16)
        .map(layout::data)
        .take_while(|d| d.lkey != layout::INVALID_LKEY)
        .collect()
}
