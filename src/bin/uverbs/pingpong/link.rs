//! `pp_connect_ctx` and the INIT step before it, through the library's
//! bring-up ([`uverbs::BringUp`], [`uverbs::QueuePair::bring_up`]): the
//! tools only say how their attributes differ from its defaults.
//!
//! The C tools' attributes: INIT with P_Key index 0, the port and no remote
//! access (UD: Q_Key `0x11111111`); RTR with `-m`'s path MTU, the peer's QP
//! number and PSN, an address vector with `-l`'s service level (global,
//! hop limit 1, `-g`'s index, when the peer sent a GID), and for RC
//! `max_dest_rd_atomic` 1, `min_rnr_timer` 12; RTS with the local PSN and
//! for RC `timeout` 14, `retry_cnt` 7, `rnr_retry` 7, `max_rd_atomic` 1,
//! which are [`uverbs::BringUp::new`]'s. UD then makes its address handle.
//!
//! One difference: with no `-g` and a peer that sent a GID, the C tools put
//! `-1` into the `uint8_t` GID index (255, which the kernel refuses); here
//! the address vector uses index 0.

use uverbs::{AccessFlags, AddressHandle, BringUp, Endpoint, ProtectionDomain, QpState, QueuePair};

use super::{args::Options, wire::Dest, Transport};

/// The Q_Key both UD sides use.
pub const QKEY: u32 = 0x1111_1111;

/// One QP's local settings: the tool's options over the library defaults,
/// with a fresh random PSN (`lrand48() & 0xffffff` in the C tools).
pub fn settings(t: Transport, o: &Options, port: u8) -> BringUp {
    let mut link = BringUp::new(port)
        .mtu(o.mtu)
        .sl(o.sl as u8)
        .access(AccessFlags::empty())
        .qkey(if t == Transport::Ud { QKEY } else { 0 });
    if o.gidx >= 0 {
        link = link.gid_index(o.gidx as u8);
    }
    link
}

/// The peer's address message as the library's endpoint.
pub fn endpoint(rem: &Dest, link: &BringUp) -> Endpoint {
    let mut e = Endpoint::new(rem.qpn, rem.psn, rem.gid);
    e.lid = rem.lid as u16;
    e.port = link.port;
    e
}

/// RESET -> INIT (the C tools' "Failed to modify QP to INIT").
pub fn init(qp: &QueuePair, link: &BringUp) -> uverbs::Result<()> {
    qp.init(link)
}

/// INIT -> RTR -> RTS towards `rem`, then (UD) the address handle. The error
/// names the step that failed, as the C tools' messages do: `"RTR"`,
/// `"RTS"` (read from the state the QP was left in) or `"AH"`.
pub fn connect(
    qp: &QueuePair,
    pd: &ProtectionDomain,
    link: &BringUp,
    rem: &Dest,
) -> Result<Option<AddressHandle>, (&'static str, uverbs::Error)> {
    let peer = endpoint(rem, link);
    qp.bring_up(link, &peer).map_err(|e| {
        let step = match qp.state() {
            QpState::Reset => "INIT",
            QpState::Init => "RTR",
            _ => "RTS",
        };
        (step, e)
    })?;
    if qp.qp_type() != uverbs::QpType::Ud {
        return Ok(None);
    }
    pd.create_ah(&peer.ah_attr(link))
        .map(Some)
        .map_err(|e| ("AH", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_the_c_tools_attributes() {
        let o = Options {
            mtu: uverbs::Mtu(3),
            sl: 2,
            gidx: 1,
            ..Options::defaults(Transport::Rc)
        };
        let rc = settings(Transport::Rc, &o, 1);
        assert_eq!(
            (rc.mtu, rc.sl, rc.gid_index, rc.access, rc.qkey),
            (Some(uverbs::Mtu(3)), 2, Some(1), AccessFlags::empty(), 0)
        );
        assert!(rc.psn <= 0xff_ffff);
        assert_eq!(settings(Transport::Ud, &o, 1).qkey, QKEY);
        let no_g = Options {
            gidx: -1,
            ..Options::defaults(Transport::Rc)
        };
        assert_eq!(settings(Transport::Uc, &no_g, 1).gid_index, None);
        // The address vector: global (hop limit 1, -g's index) only when
        // the peer sent a GID.
        let mut rem = Dest {
            lid: 7,
            ..Dest::default()
        };
        let av = endpoint(&rem, &rc).ah_attr(&rc);
        assert_eq!((av.grh, av.dlid, av.sl, av.port_num), (None, 7, 2, 1));
        rem.gid.0[15] = 1;
        let g = endpoint(&rem, &rc).ah_attr(&rc).grh.unwrap();
        assert_eq!((g.dgid, g.sgid_index, g.hop_limit), (rem.gid, 1, 1));
    }

    #[test]
    fn the_peer_message_becomes_an_endpoint_on_the_local_port() {
        let rem = Dest {
            lid: 7,
            qpn: 0x11,
            psn: 0x22,
            gid: uverbs::Gid([3; 16]),
        };
        let link = BringUp::new(2);
        let e = endpoint(&rem, &link);
        assert_eq!(
            (e.qp_num, e.psn, e.lid, e.gid, e.port),
            (0x11, 0x22, 7, rem.gid, 2)
        );
    }
}
