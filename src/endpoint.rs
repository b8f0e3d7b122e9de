//! Bringing a QP up against a peer in one call: an [`Endpoint`] (what the
//! peer needs to reach a QP: its number, GID, LID, PSN, MTU and port) with
//! a stable, versioned byte encoding for any out-of-band channel, the local
//! settings ([`BringUp`]), and [`QueuePair::bring_up`], which takes an RC,
//! UC or UD QP from RESET (or any state before RTS) to RTS.
//!
//! libibverbs has no counterpart: every program writes the three
//! `ibv_modify_qp` calls and its own address exchange (rdma-core's
//! pingpongs: `pp_connect_ctx` and a text line per QP). The attributes used
//! are the pingpongs' (`rc_pingpong.c`: RTR with `max_dest_rd_atomic` 1,
//! `min_rnr_timer` 12; RTS with `timeout` 14, `retry_cnt` 7, `rnr_retry` 7,
//! `max_rd_atomic` 1; a global route with hop limit 1 when the peer has a
//! GID), each settable on [`BringUp`].
//!
//! ```no_run
//! # fn main() -> uverbs::Result<()> {
//! # let qp: uverbs::QueuePair = unimplemented!();
//! # let exchange = |b: &[u8]| b.to_vec();
//! let link = uverbs::BringUp::new(1).gid_index(1);
//! let mine = qp.endpoint(&link)?;
//! let theirs = uverbs::Endpoint::decode(&exchange(&mine.encode()))?;
//! qp.bring_up(&link, &theirs)?; // RESET -> INIT -> RTR -> RTS
//! # Ok(()) }
//! ```

use crate::{
    AccessFlags, AhAttr, Context, Error, ErrorKind, Gid, GlobalRoute, Mtu, QpAttr, QpState, QpType,
    QueuePair, Result,
};

/// What a peer needs to reach one QP, as sent out of band before the
/// connection exists (rust-ibverbs' `QueuePairEndpoint`, rdma-core's
/// `pingpong_dest`).
///
/// [`Endpoint::encode`] gives its bytes: version 1 is 36 bytes, big-endian
/// (byte 0 the version, 1 the encoding's length, 2..4 the LID, 4 the port,
/// 5 the MTU (`IBV_MTU_*`), 6..8 zero (ignored when read), 8..12 the QP
/// number, 12..16 the PSN, 16..20 the Q_Key, 20..36 the GID). Later
/// versions of this crate write the same first 36 bytes and may append
/// fields (a larger length byte) or use bytes 6..8, which a reader of
/// version 1 ignores; a different version byte means an encoding it cannot
/// read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Endpoint {
    /// The QP number (24 bits).
    pub qp_num: u32,
    /// The first PSN its send queue uses (24 bits): the peer's receive PSN.
    pub psn: u32,
    /// The port's LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// The GID packets are addressed to (all zeros: none, LID routing).
    pub gid: Gid,
    /// The QP's port.
    pub port: u8,
    /// The port's active MTU: the path MTU is the smaller of both sides'.
    pub mtu: Mtu,
    /// The Q_Key (UD: what senders put in their requests; 0 otherwise).
    pub qkey: u32,
}

/// Version 1's length in bytes.
const V1_LEN: usize = 36;

impl Endpoint {
    /// The version [`Endpoint::encode`] writes.
    pub const VERSION: u8 = 1;
    /// The length of [`Endpoint::encode`]'s bytes.
    pub const ENCODED_LEN: usize = V1_LEN;

    /// An endpoint from its parts (LID 0, port 1, MTU 1024, Q_Key 0: set
    /// the fields to change them).
    pub fn new(qp_num: u32, psn: u32, gid: Gid) -> Self {
        Endpoint {
            qp_num,
            psn,
            lid: 0,
            gid,
            port: 1,
            mtu: Mtu::BYTES_1024,
            qkey: 0,
        }
    }

    /// The version-1 bytes.
    pub fn encode(&self) -> [u8; V1_LEN] {
        let mut b = [0u8; V1_LEN];
        b[0] = Self::VERSION;
        b[1] = V1_LEN as u8;
        b[2..4].copy_from_slice(&self.lid.to_be_bytes());
        b[4] = self.port;
        b[5] = self.mtu.0;
        b[8..12].copy_from_slice(&self.qp_num.to_be_bytes());
        b[12..16].copy_from_slice(&self.psn.to_be_bytes());
        b[16..20].copy_from_slice(&self.qkey.to_be_bytes());
        b[20..36].copy_from_slice(&self.gid.0);
        b
    }

    /// Reads a peer's bytes (untrusted: anything malformed is an
    /// [`ErrorKind::InvalidArgument`] error saying what, never a panic).
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let bad = |why: String| Error::new("decode endpoint", ErrorKind::InvalidArgument, why);
        let (&version, &len) = match bytes {
            [v, l, ..] => (v, l),
            _ => return Err(bad(format!("{} bytes, no header", bytes.len()))),
        };
        if version != Self::VERSION {
            return Err(bad(format!(
                "version {version}: this uverbs reads version {}",
                Self::VERSION
            )));
        }
        let len = usize::from(len);
        if len < V1_LEN || bytes.len() < len {
            return Err(bad(format!(
                "length {len} in {} bytes: version 1 has {V1_LEN}",
                bytes.len()
            )));
        }
        let be32 = |at: usize| {
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let e = Endpoint {
            lid: u16::from_be_bytes([bytes[2], bytes[3]]),
            port: bytes[4],
            mtu: Mtu(bytes[5]),
            qp_num: be32(8),
            psn: be32(12),
            qkey: be32(16),
            gid: Gid(bytes[20..36].try_into().expect("16 bytes")),
        };
        if e.mtu.bytes().is_none() {
            return Err(bad(format!("MTU {} is not an IBV_MTU_* value", e.mtu.0)));
        }
        if e.qp_num > 0xff_ffff || e.psn > 0xff_ffff {
            return Err(bad(format!(
                "QP number {:#x} or PSN {:#x} is wider than 24 bits",
                e.qp_num, e.psn
            )));
        }
        Ok(e)
    }

    /// The address vector towards this endpoint from `link`'s port: a
    /// global route (hop limit 1, `link`'s GID index) when it has a GID,
    /// its LID, `link`'s service level. For a UD peer, give it to
    /// [`ProtectionDomain::create_ah`](crate::ProtectionDomain::create_ah).
    pub fn ah_attr(&self, link: &BringUp) -> AhAttr {
        let grh = (!self.gid.is_null()).then(|| GlobalRoute {
            dgid: self.gid,
            sgid_index: link.gid_index.unwrap_or(0),
            hop_limit: link.hop_limit,
            ..GlobalRoute::default()
        });
        AhAttr {
            grh,
            dlid: self.lid,
            sl: link.sl,
            port_num: link.port,
            ..AhAttr::default()
        }
    }
}

/// The local side of a bring-up: the port and GID to use, the first send
/// PSN, and the transport settings. [`BringUp::new`] gives rdma-core's
/// pingpong values; each setter changes one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BringUp {
    /// The local port (from 1).
    pub port: u8,
    /// The GID table index to send from (`None`: no GID, LID routing, as
    /// the pingpongs' default `-g -1` on InfiniBand).
    pub gid_index: Option<u8>,
    /// The first send PSN (24 bits): random from [`BringUp::new`].
    pub psn: u32,
    /// The path MTU (`None`: the smaller of the port's active MTU and the
    /// peer's).
    pub mtu: Option<Mtu>,
    /// What the peer may do to this QP's memory (RC, UC).
    pub access: AccessFlags,
    /// The Q_Key (UD).
    pub qkey: u32,
    /// P_Key table index.
    pub pkey_index: u16,
    /// Service level.
    pub sl: u8,
    /// Hop limit of the global route.
    pub hop_limit: u8,
    /// RC: local ACK timeout (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// RC: retries on timeout.
    pub retry_cnt: u8,
    /// RC: retries on RNR NAK (7: forever).
    pub rnr_retry: u8,
    /// RC: the RNR NAK timer this side asks for.
    pub min_rnr_timer: u8,
    /// RC: RDMA reads and atomics in flight, as initiator.
    pub max_rd_atomic: u8,
    /// RC: RDMA reads and atomics in flight, as responder.
    pub max_dest_rd_atomic: u8,
}

impl BringUp {
    /// For `port`: no GID, a random PSN, the peer's MTU, remote write, read
    /// and atomics allowed (RC; UC: write), Q_Key `0x11111111` (the
    /// pingpongs'), timeout 14, retries 7 and 7, RNR timer 12, one read
    /// or atomic in flight each way, hop limit 1.
    pub fn new(port: u8) -> Self {
        BringUp {
            port,
            gid_index: None,
            psn: random_psn(),
            mtu: None,
            access: AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            qkey: 0x1111_1111,
            pkey_index: 0,
            sl: 0,
            hop_limit: 1,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
        }
    }

    /// Sends from the GID at `index` of the port's table (needed on RoCE).
    pub fn gid_index(mut self, index: u8) -> Self {
        self.gid_index = Some(index);
        self
    }

    /// The first send PSN (the low 24 bits are used).
    pub fn psn(mut self, psn: u32) -> Self {
        self.psn = psn & 0xff_ffff;
        self
    }

    /// The path MTU, instead of the smaller of both ports'.
    pub fn mtu(mut self, mtu: Mtu) -> Self {
        self.mtu = Some(mtu);
        self
    }

    /// What the peer may do to this QP's memory.
    pub fn access(mut self, access: AccessFlags) -> Self {
        self.access = access;
        self
    }

    /// The Q_Key (UD).
    pub fn qkey(mut self, qkey: u32) -> Self {
        self.qkey = qkey;
        self
    }

    /// The service level.
    pub fn sl(mut self, sl: u8) -> Self {
        self.sl = sl;
        self
    }
}

/// A random 24-bit PSN, from the OS-seeded keys std's hash maps use.
fn random_psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() & 0xff_ffff) as u32
}

impl QueuePair {
    /// This QP's [`Endpoint`] for its peer: its number, `link`'s PSN and
    /// port, and the port's LID, active MTU and (with
    /// [`BringUp::gid_index`]) GID, queried from the device; the Q_Key is
    /// `link`'s for a UD QP, else 0.
    pub fn endpoint(&self, link: &BringUp) -> Result<Endpoint> {
        let ctx = Context {
            inner: self.inner.ctx.clone(),
        };
        let port = ctx.query_port(link.port)?;
        let gid = match link.gid_index {
            Some(i) => ctx
                .query_gid(link.port, u32::from(i))?
                .map(|e| e.gid)
                .ok_or_else(|| {
                    Error::new(
                        "endpoint",
                        ErrorKind::InvalidArgument,
                        format!("port {} has no GID at index {i}", link.port),
                    )
                })?,
            None => Gid::default(),
        };
        Ok(Endpoint {
            qp_num: self.qp_num(),
            psn: link.psn,
            lid: port.lid,
            gid,
            port: link.port,
            mtu: port.active_mtu,
            qkey: if self.qp_type() == QpType::Ud {
                link.qkey
            } else {
                0
            },
        })
    }

    /// RESET → INIT with `link`'s port, P_Key index and access flags (UD:
    /// Q_Key), as [`QueuePair::bring_up`]'s first step: for a program that
    /// posts receives before it knows its peer (the pingpongs do).
    pub fn init(&self, link: &BringUp) -> Result<()> {
        let attr = QpAttr {
            qp_state: QpState::Init,
            pkey_index: link.pkey_index,
            port_num: link.port,
            qp_access_flags: if self.qp_type() == QpType::Uc {
                link.access & AccessFlags::REMOTE_WRITE
            } else {
                link.access
            },
            qkey: link.qkey,
            ..QpAttr::default()
        };
        self.modify_to(&attr)
    }

    /// Takes an RC, UC or UD QP to RTS against `remote`, from whatever state
    /// before RTS it is in: RESET → INIT ([`QueuePair::init`]) → RTR (the
    /// peer's QP number and PSN, the path MTU, the address vector
    /// [`Endpoint::ah_attr`]; UD needs none of them) → RTS (`link`'s PSN and
    /// retry settings). On an error the QP is in the last state reached
    /// ([`QueuePair::state`]), so the failed step is the one after it, and
    /// a second call continues from there. A QP already in RTS (or beyond)
    /// is an error: its peer is set.
    ///
    /// A UD QP sends through an address handle: make it from
    /// [`Endpoint::ah_attr`].
    pub fn bring_up(&self, link: &BringUp, remote: &Endpoint) -> Result<()> {
        let ud = match self.qp_type() {
            QpType::Rc | QpType::Uc => false,
            QpType::Ud => true,
            other => {
                return Err(Error::new(
                    "bring up QP",
                    ErrorKind::InvalidArgument,
                    format!("a {other} QP: bring_up takes RC, UC and UD"),
                ))
            }
        };
        let start = self.state();
        if !matches!(start, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(Error::new(
                "bring up QP",
                ErrorKind::InvalidArgument,
                format!("the QP is in {start}: bring_up starts from RESET, INIT or RTR"),
            ));
        }
        if start == QpState::Reset {
            self.init(link)?;
        }
        if self.state() == QpState::Init {
            let mut attr = QpAttr::with_state(QpState::Rtr);
            if !ud {
                attr.path_mtu = match link.mtu {
                    Some(m) => m,
                    None => {
                        let ctx = Context {
                            inner: self.inner.ctx.clone(),
                        };
                        ctx.query_port(link.port)?.active_mtu.min(remote.mtu)
                    }
                };
                attr.dest_qp_num = remote.qp_num;
                attr.rq_psn = remote.psn;
                attr.max_dest_rd_atomic = link.max_dest_rd_atomic;
                attr.min_rnr_timer = link.min_rnr_timer;
                attr.ah_attr = remote.ah_attr(link);
            }
            self.modify_to(&attr)?;
        }
        if self.state() == QpState::Rtr {
            let attr = QpAttr {
                qp_state: QpState::Rts,
                sq_psn: link.psn,
                timeout: link.timeout,
                retry_cnt: link.retry_cnt,
                rnr_retry: link.rnr_retry,
                max_rd_atomic: link.max_rd_atomic,
                ..QpAttr::default()
            };
            self.modify_to(&attr)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Endpoint {
        let mut e = Endpoint::new(0x12_3456, 0xab_cdef, Gid([0xfe; 16]));
        e.lid = 0x0102;
        e.port = 2;
        e.mtu = Mtu::BYTES_4096;
        e.qkey = 0x1111_1111;
        e
    }

    #[test]
    fn version_1_bytes_are_as_documented() {
        let b = sample().encode();
        assert_eq!(&b[..8], &[1, 36, 0x01, 0x02, 2, 5, 0, 0]);
        assert_eq!(
            &b[8..20],
            &[0, 0x12, 0x34, 0x56, 0, 0xab, 0xcd, 0xef, 0x11, 0x11, 0x11, 0x11]
        );
        assert_eq!(&b[20..], &[0xfe; 16]);
        assert_eq!(Endpoint::decode(&b), Ok(sample()));
    }

    #[test]
    fn a_longer_encoding_of_version_1_is_read_and_its_tail_ignored() {
        let mut b = sample().encode().to_vec();
        b[1] = 40;
        b.extend_from_slice(&[9, 9, 9, 9]);
        assert_eq!(Endpoint::decode(&b), Ok(sample()));
    }

    #[test]
    fn bytes_6_and_7_are_ignored_when_read() {
        let mut b = sample().encode();
        b[6..8].copy_from_slice(&[0xa5, 0x5a]);
        assert_eq!(Endpoint::decode(&b), Ok(sample()));
    }

    #[test]
    fn malformed_bytes_are_errors_that_say_why() {
        let good = sample().encode();
        let cases: [(&[u8], &str); 3] = [
            (&[], "no header"),
            (&good[..35], "length 36 in 35 bytes"),
            (&[2, 36], "version 2"),
        ];
        for (bytes, why) in cases {
            let e = Endpoint::decode(bytes).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.detail().unwrap().contains(why), "{e}");
        }
        let mut b = good;
        b[5] = 6;
        assert!(Endpoint::decode(&b)
            .unwrap_err()
            .detail()
            .unwrap()
            .contains("MTU 6"));
        let mut b = good;
        b[8] = 1;
        assert!(Endpoint::decode(&b)
            .unwrap_err()
            .detail()
            .unwrap()
            .contains("24 bits"));
        let mut b = good;
        b[1] = 35;
        assert!(Endpoint::decode(&b).is_err());
    }

    #[test]
    fn no_byte_string_panics_the_decoder() {
        // Every single-byte change and every truncation of a good encoding.
        let good = sample().encode();
        for at in 0..good.len() {
            for v in 0..=255u8 {
                let mut b = good;
                b[at] = v;
                let _ = Endpoint::decode(&b);
            }
            let _ = Endpoint::decode(&good[..at]);
        }
    }

    #[test]
    fn the_address_vector_routes_by_gid_when_the_peer_has_one() {
        let link = BringUp::new(1).gid_index(3).sl(2);
        let av = sample().ah_attr(&link);
        let grh = av.grh.expect("a global route");
        assert_eq!(
            (grh.dgid, grh.sgid_index, grh.hop_limit),
            (Gid([0xfe; 16]), 3, 1)
        );
        assert_eq!((av.dlid, av.sl, av.port_num), (0x0102, 2, 1));
        let mut lid_only = sample();
        lid_only.gid = Gid::default();
        assert!(lid_only.ah_attr(&link).grh.is_none());
    }

    #[test]
    fn the_psn_is_24_bits() {
        assert_eq!(BringUp::new(1).psn(0xffff_ffff).psn, 0xff_ffff);
        assert!(BringUp::new(1).psn <= 0xff_ffff);
    }
}
