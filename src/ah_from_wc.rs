//! Address vectors for replying to a UD sender (`ibv_init_ah_from_wc`,
//! `ibv_create_ah_from_wc`).
//!
//! A UD receive buffer starts with 40 bytes of routing header: an IPv6-style
//! GRH for InfiniBand, RoCE v1 and RoCE v2 over IPv6, or, for RoCE v2 over
//! IPv4, the 20-byte IPv4 header placed in its last 20 bytes. The version is
//! told apart as libibverbs does (`libibverbs/verbs.c`,
//! `get_grh_header_version`): an IPv6 version nibble, unless bytes 20..40
//! are an IPv4 header with a valid checksum. The reply goes back to the
//! header's source; the local GID is the one whose address the header's
//! destination names.

use crate::{
    error::{Error, ErrorKind, Result},
    qp_attr::{AhAttr, GlobalRoute},
    wc::{WcFlags, WorkCompletion},
    AddressHandle, Context, Gid, GidType, ProtectionDomain,
};

/// `0x1b`: the next header of an InfiniBand / RoCE v1 GRH.
const IB_NEXT_HDR: u8 = 0x1b;
/// `IPPROTO_UDP`: the next header of a RoCE v2 IPv6 header.
const IPPROTO_UDP: u8 = 17;

/// The routing header as the receive buffer holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Header {
    /// RoCE v2 over IPv4: source and destination addresses, TTL, TOS.
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        ttl: u8,
        tos: u8,
    },
    /// A GRH (InfiniBand, RoCE v1, RoCE v2 over IPv6).
    V6 {
        flow: u32,
        next_hdr: u8,
        hop_limit: u8,
        sgid: [u8; 16],
        dgid: [u8; 16],
    },
}

fn ipv4_checksum_ok(h: &[u8]) -> bool {
    let mut sum: u32 = h
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

fn parse(grh: &[u8; 40]) -> Option<Header> {
    let flow = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
    let ip4 = &grh[20..40];
    let ip4_ok = ip4[0] == 0x45 && ipv4_checksum_ok(ip4);
    let v4 = || Header::V4 {
        src: [ip4[12], ip4[13], ip4[14], ip4[15]],
        dst: [ip4[16], ip4[17], ip4[18], ip4[19]],
        ttl: ip4[8],
        tos: ip4[1],
    };
    if flow >> 28 != 6 {
        return (ip4[0] >> 4 == 4).then(v4);
    }
    if ip4_ok {
        return Some(v4());
    }
    let mut sgid = [0u8; 16];
    let mut dgid = [0u8; 16];
    sgid.copy_from_slice(&grh[8..24]);
    dgid.copy_from_slice(&grh[24..40]);
    Some(Header::V6 {
        flow,
        next_hdr: grh[6],
        hop_limit: grh[7],
        sgid,
        dgid,
    })
}

fn mapped(v4: [u8; 4]) -> Gid {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&v4);
    Gid(g)
}

impl Context {
    /// The address vector that replies to the sender of a UD receive, like
    /// `ibv_init_ah_from_wc`: `grh` is the first 40 bytes of the receive
    /// buffer, `port` the port that received it.
    #[doc(alias = "ibv_init_ah_from_wc")]
    pub fn init_ah_from_wc(&self, port: u8, wc: &WorkCompletion, grh: &[u8; 40]) -> Result<AhAttr> {
        let op = "ibv_init_ah_from_wc";
        let invalid = |why: &str| Error::new(op, ErrorKind::InvalidArgument, why.to_string());
        let mut attr = AhAttr {
            grh: None,
            dlid: wc.slid,
            sl: wc.sl,
            src_path_bits: wc.dlid_path_bits,
            static_rate: 0,
            port_num: port,
        };
        if !wc.wc_flags.contains(WcFlags::GRH) {
            return Ok(attr);
        }
        let header = parse(grh).ok_or_else(|| {
            invalid("the receive buffer does not start with an IPv4 or IPv6/GRH header")
        })?;
        let (local, want_type, route) = match header {
            Header::V4 { src, dst, ttl, tos } => {
                if dst[0] & 0xf0 == 0xe0 {
                    return Err(invalid(
                        "a multicast destination has no local GID to reply from",
                    ));
                }
                let route = GlobalRoute {
                    dgid: mapped(src),
                    flow_label: 0,
                    sgid_index: 0,
                    hop_limit: ttl,
                    traffic_class: tos,
                };
                (mapped(dst), GidType::RoceV2, route)
            }
            Header::V6 {
                flow,
                next_hdr,
                hop_limit,
                sgid,
                dgid,
            } => {
                if dgid[0] == 0xff {
                    return Err(invalid(
                        "a multicast destination has no local GID to reply from",
                    ));
                }
                let want = match next_hdr {
                    IPPROTO_UDP => GidType::RoceV2,
                    IB_NEXT_HDR => GidType::RoceV1,
                    _ => return Err(invalid("the GRH's next header is neither UDP nor IB")),
                };
                let route = GlobalRoute {
                    dgid: Gid(sgid),
                    flow_label: flow & 0xf_ffff,
                    sgid_index: 0,
                    hop_limit,
                    traffic_class: ((flow >> 20) & 0xff) as u8,
                };
                (Gid(dgid), want, route)
            }
        };
        let table = self.query_gid_table()?;
        let entry = table
            .iter()
            .find(|e| {
                e.port == u32::from(port)
                    && e.gid == local
                    && (e.gid_type == want_type
                        // InfiniBand ports report IB GIDs for RoCE v1's GRH form.
                        || (want_type == GidType::RoceV1 && e.gid_type == GidType::Ib))
            })
            .ok_or_else(|| {
                Error::new(
                    op,
                    ErrorKind::InvalidArgument,
                    format!("no {want_type:?} GID {local} on port {port} to reply from"),
                )
            })?;
        attr.grh = Some(GlobalRoute {
            sgid_index: u8::try_from(entry.index).map_err(|_| invalid("GID index above 255"))?,
            ..route
        });
        Ok(attr)
    }
}

impl ProtectionDomain {
    /// An address handle that replies to the sender of a UD receive, like
    /// `ibv_create_ah_from_wc`.
    #[doc(alias = "ibv_create_ah_from_wc")]
    pub fn create_ah_from_wc(
        &self,
        port: u8,
        wc: &WorkCompletion,
        grh: &[u8; 40],
    ) -> Result<AddressHandle> {
        let attr = self.context().init_ah_from_wc(port, wc, grh)?;
        self.create_ah(&attr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_header(src: [u8; 4], dst: [u8; 4], ttl: u8, tos: u8) -> [u8; 20] {
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[1] = tos;
        h[8] = ttl;
        h[9] = IPPROTO_UDP;
        h[12..16].copy_from_slice(&src);
        h[16..20].copy_from_slice(&dst);
        let mut sum: u32 = h
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        h
    }

    #[test]
    fn roce_v2_ipv4_headers_sit_in_the_last_20_bytes() {
        let mut grh = [0u8; 40];
        grh[20..].copy_from_slice(&ipv4_header([192, 0, 2, 9], [192, 0, 2, 1], 64, 0x20));
        assert_eq!(
            parse(&grh),
            Some(Header::V4 {
                src: [192, 0, 2, 9],
                dst: [192, 0, 2, 1],
                ttl: 64,
                tos: 0x20
            })
        );
        assert_eq!(mapped([192, 0, 2, 9]).to_string(), "::ffff:192.0.2.9");
    }

    #[test]
    fn an_ipv6_grh_is_kept_when_bytes_20_to_40_are_no_ipv4_header() {
        let mut grh = [0u8; 40];
        grh[0..4].copy_from_slice(&((6u32 << 28) | (0x12 << 20) | 0xabcde).to_be_bytes());
        grh[6] = IPPROTO_UDP;
        grh[7] = 9;
        grh[8] = 0xfe;
        grh[24] = 0xfe;
        grh[39] = 1;
        match parse(&grh) {
            Some(Header::V6 {
                flow,
                next_hdr,
                hop_limit,
                sgid,
                dgid,
            }) => {
                assert_eq!((flow & 0xf_ffff, (flow >> 20) & 0xff), (0xabcde, 0x12));
                assert_eq!(
                    (next_hdr, hop_limit, sgid[0], dgid[39 - 24]),
                    (17, 9, 0xfe, 1)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_is_not_a_header() {
        assert_eq!(parse(&[0u8; 40]), None);
        let mut bad_sum = [0u8; 40];
        bad_sum[0] = 0x60;
        bad_sum[20..].copy_from_slice(&ipv4_header([1, 2, 3, 4], [5, 6, 7, 8], 1, 0));
        bad_sum[30] ^= 1; // checksum broken: read as the IPv6 GRH it claims to be
        assert!(matches!(parse(&bad_sum), Some(Header::V6 { .. })));
    }
}
