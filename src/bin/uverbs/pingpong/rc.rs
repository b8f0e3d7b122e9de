//! RC: the QP transitions of `rc_pingpong.c` (also used per QP by
//! `srq_pingpong.c`, which has the same attributes).

use uverbs::{AccessFlags, QpAttr, QpState, QueuePair};

use super::{ah_attr, Peer};

/// RESET -> INIT: pkey index 0, the port, no remote access.
pub fn init(qp: &QueuePair, ib_port: u8) -> uverbs::Result<()> {
    let attr = QpAttr {
        qp_state: QpState::Init,
        pkey_index: 0,
        port_num: ib_port,
        qp_access_flags: AccessFlags::empty(),
        ..QpAttr::default()
    };
    // `modify_to` sends exactly the attributes the kernel requires for the
    // transition, which are the ones rc_pingpong.c sets.
    qp.modify_to(&attr)
}

/// INIT -> RTR -> RTS towards `p.dest`: max_dest_rd_atomic 1,
/// min_rnr_timer 12, timeout 14, retry_cnt 7, rnr_retry 7, max_rd_atomic 1.
/// The error says which transition failed (`"RTR"` or `"RTS"`).
pub fn connect(qp: &QueuePair, p: &Peer) -> Result<(), (&'static str, uverbs::Error)> {
    let mut attr = QpAttr {
        qp_state: QpState::Rtr,
        path_mtu: p.mtu,
        dest_qp_num: p.dest.qpn,
        rq_psn: p.dest.psn,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ah_attr: ah_attr(p),
        ..QpAttr::default()
    };
    qp.modify_to(&attr).map_err(|e| ("RTR", e))?;
    attr.qp_state = QpState::Rts;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.sq_psn = p.my_psn;
    attr.max_rd_atomic = 1;
    qp.modify_to(&attr).map_err(|e| ("RTS", e))
}
