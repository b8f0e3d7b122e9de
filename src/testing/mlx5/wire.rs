//! The fabric's packets (`fabric.rs`): what one model HCA sends another
//! over the local switch, and their byte format.
//!
//! A packet plays the transport headers of RoCE v2 without the Ethernet,
//! IP and UDP layers (the switch routes by GID, `fabric.rs`): the BTH's
//! destination QP and PSN, the RETH of RDMA requests (virtual address,
//! rkey, length), the AtomicETH (address, rkey, swap/add and compare
//! data), the ImmDt and IETH, the AETH of acknowledgements (ACK, RNR NAK
//! with its timer, the NAK codes of IBA 9.7.5.2.5: PSN sequence error,
//! invalid request, remote access error, remote operational error), the
//! AtomicAckETH, and for UD the DETH's Q_Key and source QP with the 40
//! bytes of GRH the receiver's CQE and buffer get. A message longer than
//! [`SEGMENT`] bytes travels as several packets, each with its own PSN,
//! as a message longer than the path MTU does on a real link (the model's
//! packets are larger than any MTU, to keep the number of system calls
//! down; both ends are the model, so only they need to agree on the
//! count).
//!
//! Layout (all integers big-endian): a 4-byte magic `UVF1`, the body's
//! kind (1 byte), then the header: source GID (16), destination GID (16),
//! source QP (4), destination QP (4), PSN (4); then the body's fields in
//! the order of the structs below, byte vectors as a u32 length and the
//! bytes. A packet that does not decode (short, bad magic or kind, a
//! length past the end, bytes left over) is dropped by the receiver.

/// The largest payload of one packet; longer messages are segmented.
pub(crate) const SEGMENT: usize = 32 * 1024;

const MAGIC: [u8; 4] = *b"UVF1";

/// How many packets (PSNs) a message of `len` bytes takes.
pub(crate) fn packets(len: u64) -> u32 {
    len.div_ceil(SEGMENT as u64).max(1) as u32
}

/// PSNs are 24 bits wide.
pub(crate) const PSN_MASK: u32 = 0xff_ffff;

/// `a - b` in PSN space, as a signed distance (IBA 9.7.1: the window is
/// half the 24-bit space).
pub(crate) fn psn_diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) & PSN_MASK) << 8) as i32 >> 8
}

/// The addressing of every packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) src_gid: [u8; 16],
    pub(crate) dst_gid: [u8; 16],
    pub(crate) src_qpn: u32,
    pub(crate) dst_qpn: u32,
    /// The BTH PSN (24 bits); for an acknowledgement, the last PSN it
    /// acknowledges (or, for a NAK, the PSN it refers to).
    pub(crate) psn: u32,
}

/// A request's operation (the BTH opcode's operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReqOp {
    Send,
    SendImm,
    SendInv,
    Write,
    WriteImm,
    Read,
    CmpSwap,
    FetchAdd,
}

/// Connected service (RC or UC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    Rc,
    Uc,
}

/// One packet of an RC or UC request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) service: Service,
    pub(crate) op: ReqOp,
    /// The BTH solicited event bit (last packet only).
    pub(crate) solicited: bool,
    /// Immediate data, or the rkey a SEND with invalidate names.
    pub(crate) imm: [u8; 4],
    /// The message's length (a read's: the bytes asked for).
    pub(crate) total: u32,
    /// Where this packet's payload starts in the message.
    pub(crate) offset: u32,
    /// RETH / AtomicETH: the remote address and key.
    pub(crate) raddr: u64,
    pub(crate) rkey: u32,
    /// AtomicETH: swap (or add) and compare data.
    pub(crate) swap_add: u64,
    pub(crate) compare: u64,
    pub(crate) data: Vec<u8>,
}

impl Request {
    /// The message's first packet.
    pub(crate) fn first(&self) -> bool {
        self.offset == 0
    }

    /// The message's last packet.
    pub(crate) fn last(&self) -> bool {
        matches!(self.op, ReqOp::Read | ReqOp::CmpSwap | ReqOp::FetchAdd)
            || self.offset as usize + self.data.len() >= self.total as usize
    }
}

/// The AETH of an acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Aeth {
    Ack,
    /// Receiver not ready; the responder's minimal RNR NAK timer code.
    RnrNak(u8),
    /// PSN sequence error: the responder expects the header's PSN.
    NakSequence,
    NakInvalidRequest,
    NakRemoteAccess,
    NakRemoteOperational,
}

/// A UD message (one packet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Datagram {
    pub(crate) qkey: u32,
    pub(crate) solicited: bool,
    pub(crate) imm: Option<[u8; 4]>,
    /// The GRH the receiver scatters ahead of the payload, and its RoCE
    /// L3 type (the CQE's `l3_hdr_type`).
    pub(crate) grh: [u8; 40],
    pub(crate) l3: u8,
    pub(crate) data: Vec<u8>,
}

/// What a packet carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    Request(Request),
    Ack(Aeth),
    /// One packet of an RDMA read response: `offset` into the read.
    ReadResponse {
        offset: u32,
        data: Vec<u8>,
    },
    /// The original value at the atomic's address.
    AtomicResponse(u64),
    Datagram(Datagram),
}

/// A packet: its header and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Packet {
    pub(crate) header: Header,
    pub(crate) body: Body,
}

fn op_code(op: ReqOp) -> u8 {
    match op {
        ReqOp::Send => 0,
        ReqOp::SendImm => 1,
        ReqOp::SendInv => 2,
        ReqOp::Write => 3,
        ReqOp::WriteImm => 4,
        ReqOp::Read => 5,
        ReqOp::CmpSwap => 6,
        ReqOp::FetchAdd => 7,
    }
}

fn op_of(code: u8) -> Option<ReqOp> {
    Some(match code {
        0 => ReqOp::Send,
        1 => ReqOp::SendImm,
        2 => ReqOp::SendInv,
        3 => ReqOp::Write,
        4 => ReqOp::WriteImm,
        5 => ReqOp::Read,
        6 => ReqOp::CmpSwap,
        7 => ReqOp::FetchAdd,
        _ => return None,
    })
}

fn aeth_code(a: Aeth) -> [u8; 2] {
    match a {
        Aeth::Ack => [0, 0],
        Aeth::RnrNak(t) => [1, t],
        Aeth::NakSequence => [2, 0],
        Aeth::NakInvalidRequest => [3, 0],
        Aeth::NakRemoteAccess => [4, 0],
        Aeth::NakRemoteOperational => [5, 0],
    }
}

fn aeth_of(c: [u8; 2]) -> Option<Aeth> {
    Some(match c {
        [0, 0] => Aeth::Ack,
        [1, t] if t < 32 => Aeth::RnrNak(t),
        [2, 0] => Aeth::NakSequence,
        [3, 0] => Aeth::NakInvalidRequest,
        [4, 0] => Aeth::NakRemoteAccess,
        [5, 0] => Aeth::NakRemoteOperational,
        _ => return None,
    })
}

struct Out(Vec<u8>);

impl Out {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    fn vec(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32).bytes(b)
    }
}

struct In<'a>(&'a [u8]);

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn vec(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        Some(self.take(n)?.to_vec())
    }
}

impl Packet {
    /// The packet's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut o = Out(Vec::with_capacity(128));
        o.bytes(&MAGIC);
        let kind = match &self.body {
            Body::Request(_) => 1,
            Body::Ack(_) => 2,
            Body::ReadResponse { .. } => 3,
            Body::AtomicResponse(_) => 4,
            Body::Datagram(_) => 5,
        };
        let h = &self.header;
        o.u8(kind)
            .bytes(&h.src_gid)
            .bytes(&h.dst_gid)
            .u32(h.src_qpn)
            .u32(h.dst_qpn)
            .u32(h.psn);
        match &self.body {
            Body::Request(r) => {
                o.u8(match r.service {
                    Service::Rc => 0,
                    Service::Uc => 1,
                })
                .u8(op_code(r.op))
                .u8(u8::from(r.solicited))
                .bytes(&r.imm)
                .u32(r.total)
                .u32(r.offset)
                .u64(r.raddr)
                .u32(r.rkey)
                .u64(r.swap_add)
                .u64(r.compare)
                .vec(&r.data);
            }
            Body::Ack(a) => {
                o.bytes(&aeth_code(*a));
            }
            Body::ReadResponse { offset, data } => {
                o.u32(*offset).vec(data);
            }
            Body::AtomicResponse(v) => {
                o.u64(*v);
            }
            Body::Datagram(d) => {
                o.u32(d.qkey)
                    .u8(u8::from(d.solicited))
                    .u8(u8::from(d.imm.is_some()))
                    .bytes(&d.imm.unwrap_or_default())
                    .bytes(&d.grh)
                    .u8(d.l3)
                    .vec(&d.data);
            }
        }
        o.0
    }

    /// Decodes a packet; `None` for anything malformed.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Packet> {
        let mut i = In(bytes);
        if i.array::<4>()? != MAGIC {
            return None;
        }
        let kind = i.u8()?;
        let header = Header {
            src_gid: i.array()?,
            dst_gid: i.array()?,
            src_qpn: i.u32()?,
            dst_qpn: i.u32()?,
            psn: i.u32()?,
        };
        if header.psn > PSN_MASK || header.src_qpn > 0xff_ffff || header.dst_qpn > 0xff_ffff {
            return None;
        }
        let body = match kind {
            1 => {
                let service = match i.u8()? {
                    0 => Service::Rc,
                    1 => Service::Uc,
                    _ => return None,
                };
                let op = op_of(i.u8()?)?;
                let solicited = match i.u8()? {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                let r = Request {
                    service,
                    op,
                    solicited,
                    imm: i.array()?,
                    total: i.u32()?,
                    offset: i.u32()?,
                    raddr: i.u64()?,
                    rkey: i.u32()?,
                    swap_add: i.u64()?,
                    compare: i.u64()?,
                    data: i.vec()?,
                };
                if r.data.len() > SEGMENT
                    || u64::from(r.offset) + r.data.len() as u64 > u64::from(r.total)
                        && !matches!(r.op, ReqOp::Read | ReqOp::CmpSwap | ReqOp::FetchAdd)
                {
                    return None;
                }
                Body::Request(r)
            }
            2 => Body::Ack(aeth_of(i.array()?)?),
            3 => Body::ReadResponse {
                offset: i.u32()?,
                data: i.vec()?,
            },
            4 => Body::AtomicResponse(i.u64()?),
            5 => {
                let qkey = i.u32()?;
                let solicited = i.u8()? != 0;
                let has_imm = i.u8()?;
                let imm: [u8; 4] = i.array()?;
                let d = Datagram {
                    qkey,
                    solicited,
                    imm: match has_imm {
                        0 => None,
                        1 => Some(imm),
                        _ => return None,
                    },
                    grh: i.array()?,
                    l3: i.u8()?,
                    data: i.vec()?,
                };
                Body::Datagram(d)
            }
            _ => return None,
        };
        if !i.0.is_empty() {
            return None;
        }
        Some(Packet { header, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            src_gid: [1; 16],
            dst_gid: [2; 16],
            src_qpn: 0x12,
            dst_qpn: 0xab_cdef,
            psn: 0xff_fffe,
        }
    }

    fn samples() -> Vec<Packet> {
        let req = Request {
            service: Service::Rc,
            op: ReqOp::WriteImm,
            solicited: true,
            imm: [9, 8, 7, 6],
            total: 5,
            offset: 0,
            raddr: 0x1122_3344_5566_7788,
            rkey: 0xdead_beef,
            swap_add: 0,
            compare: 0,
            data: b"hello".to_vec(),
        };
        let bodies = vec![
            Body::Request(req.clone()),
            Body::Request(Request {
                service: Service::Uc,
                op: ReqOp::Send,
                ..req.clone()
            }),
            Body::Request(Request {
                op: ReqOp::CmpSwap,
                total: 8,
                swap_add: u64::MAX,
                compare: 3,
                data: Vec::new(),
                ..req
            }),
            Body::Ack(Aeth::Ack),
            Body::Ack(Aeth::RnrNak(12)),
            Body::Ack(Aeth::NakSequence),
            Body::Ack(Aeth::NakInvalidRequest),
            Body::Ack(Aeth::NakRemoteAccess),
            Body::Ack(Aeth::NakRemoteOperational),
            Body::ReadResponse {
                offset: 32768,
                data: vec![0x5a; 100],
            },
            Body::AtomicResponse(0x0102_0304_0506_0708),
            Body::Datagram(Datagram {
                qkey: 0x1111_1111,
                solicited: false,
                imm: Some([1, 2, 3, 4]),
                grh: [7; 40],
                l3: 2,
                data: vec![3; 64],
            }),
            Body::Datagram(Datagram {
                qkey: 0,
                solicited: true,
                imm: None,
                grh: [0; 40],
                l3: 1,
                data: Vec::new(),
            }),
        ];
        bodies
            .into_iter()
            .map(|body| Packet {
                header: header(),
                body,
            })
            .collect()
    }

    #[test]
    fn every_kind_round_trips() {
        for p in samples() {
            let b = p.encode();
            assert_eq!(Packet::decode(&b).as_ref(), Some(&p), "{p:?}");
        }
    }

    #[test]
    fn fixed_layout_of_an_ack() {
        let p = Packet {
            header: header(),
            body: Body::Ack(Aeth::RnrNak(14)),
        };
        let b = p.encode();
        let mut want = b"UVF1".to_vec();
        want.push(2);
        want.extend_from_slice(&[1; 16]);
        want.extend_from_slice(&[2; 16]);
        want.extend_from_slice(&[0, 0, 0, 0x12, 0, 0xab, 0xcd, 0xef, 0, 0xff, 0xff, 0xfe]);
        want.extend_from_slice(&[1, 14]);
        assert_eq!(b, want);
    }

    #[test]
    fn malformed_packets_are_refused() {
        for p in samples() {
            let b = p.encode();
            // Every truncation, and one byte too many.
            for n in 0..b.len() {
                assert_eq!(Packet::decode(&b[..n]), None, "{p:?} cut at {n}");
            }
            let mut long = b.clone();
            long.push(0);
            assert_eq!(Packet::decode(&long), None);
            let mut bad = b.clone();
            bad[0] = b'X';
            assert_eq!(Packet::decode(&bad), None);
            let mut kind = b;
            kind[4] = 9;
            assert_eq!(Packet::decode(&kind), None);
        }
        // A PSN past 24 bits, an unknown AETH, a payload past the message.
        let mut p = samples().remove(3).encode();
        p[45] = 1;
        assert_eq!(Packet::decode(&p), None);
        let mut p = samples().remove(4).encode();
        p[49] = 7;
        assert_eq!(Packet::decode(&p), None);
        let mut req = samples().remove(0);
        if let Body::Request(r) = &mut req.body {
            r.total = 4;
        }
        assert_eq!(Packet::decode(&req.encode()), None);
    }

    #[test]
    fn segmentation_and_psn_arithmetic() {
        assert_eq!(packets(0), 1);
        assert_eq!(packets(1), 1);
        assert_eq!(packets(SEGMENT as u64), 1);
        assert_eq!(packets(SEGMENT as u64 + 1), 2);
        assert_eq!(packets(1 << 20), (1 << 20) / SEGMENT as u32);
        assert_eq!(psn_diff(5, 3), 2);
        assert_eq!(psn_diff(3, 5), -2);
        assert_eq!(psn_diff(1, PSN_MASK), 2);
        assert_eq!(psn_diff(PSN_MASK, 1), -2);
    }
}
