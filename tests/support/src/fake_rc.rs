//! An RC QP on the fake rxe kernel moved to RTS (the fake accepts any
//! modify the state machine lets through), for tests of what posting
//! writes into the send ring.

use uverbs::{CompletionQueue, ProtectionDomain, QpAttr, QpCap, QpInitAttr, QpState, QueuePair};

/// An RC QP of `pd` on `cq` (8 deep, one SGE, 16 bytes inline), in RTS.
pub fn rc_in_rts(pd: &ProtectionDomain, cq: &CompletionQueue) -> QueuePair {
    let qp = pd
        .create_qp(&QpInitAttr::rc(cq, cq).cap(QpCap::new(8, 8, 1, 1).max_inline_data(16)))
        .unwrap();
    let mut attr = QpAttr::with_state(QpState::Init);
    attr.port_num = 1;
    qp.modify_to(&attr).unwrap();
    attr.qp_state = QpState::Rtr;
    attr.path_mtu = uverbs::Mtu(3);
    attr.ah_attr.port_num = 1;
    qp.modify_to(&attr).unwrap();
    attr.qp_state = QpState::Rts;
    qp.modify_to(&attr).unwrap();
    qp
}
