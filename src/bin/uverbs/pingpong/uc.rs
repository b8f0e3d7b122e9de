//! UC: the QP transitions of `uc_pingpong.c` (INIT as RC; no RDMA-read or
//! retry attributes).

use uverbs::{QpAttr, QpState, QueuePair};

use super::{ah_attr, Peer};

pub use super::rc::init;

/// INIT -> RTR (path MTU, remote QPN and PSN, address vector) -> RTS (SQ PSN).
pub fn connect(qp: &QueuePair, p: &Peer) -> Result<(), (&'static str, uverbs::Error)> {
    let mut attr = QpAttr {
        qp_state: QpState::Rtr,
        path_mtu: p.mtu,
        dest_qp_num: p.dest.qpn,
        rq_psn: p.dest.psn,
        ah_attr: ah_attr(p),
        ..QpAttr::default()
    };
    qp.modify_to(&attr).map_err(|e| ("RTR", e))?;
    attr.qp_state = QpState::Rts;
    attr.sq_psn = p.my_psn;
    qp.modify_to(&attr).map_err(|e| ("RTS", e))
}
