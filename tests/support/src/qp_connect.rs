//! Moving a QP from RESET to RTS towards a peer, as every test that needs a
//! connected (or ready UD) QP does: the device suite on a real kernel
//! (`tests/device/support.rs`) and the mlx5 device-model tests
//! ([`crate::mlx5_pair`]).

use uverbs::{
    AccessFlags, AhAttr, BringUp, Endpoint, Gid, GlobalRoute, Mtu, QpAttr, QpState, QueuePair,
};

/// The Q_Key every test QP uses (UD destinations name it).
pub const QKEY: u32 = 0x1111_1111;

/// Moves `qp` from RESET to RTS towards `remote_qpn` at `dgid` (through GID
/// `sgid_index` of port 1) with [`QueuePair::bring_up`], so every test that
/// connects a QP this way also runs the library's bring-up: PSNs 0, path
/// MTU 1024, Q_Key [`QKEY`], four reads or atomics in flight each way, RNR
/// timer 1, `rnr_retry` retries on RNR.
pub fn to_rts(
    qp: &QueuePair,
    remote_qpn: u32,
    dgid: Gid,
    sgid_index: u8,
    access: AccessFlags,
    rnr_retry: u8,
) {
    let mut link = BringUp::new(1)
        .gid_index(sgid_index)
        .psn(0)
        .mtu(Mtu(3))
        .access(access)
        .qkey(QKEY);
    link.rnr_retry = rnr_retry;
    link.max_rd_atomic = 4;
    link.max_dest_rd_atomic = 4;
    link.min_rnr_timer = 1;
    let peer = Endpoint::new(remote_qpn, 0, dgid);
    qp.bring_up(&link, &peer)
        .unwrap_or_else(|e| panic!("bring up (the QP reached {}): {e:#}", qp.state()));
}

/// [`to_rts`]'s first two steps: INIT and RTR, no RTS. Returns the
/// attributes it set, for the next step.
pub fn to_rtr(
    qp: &QueuePair,
    remote_qpn: u32,
    dgid: Gid,
    sgid_index: u8,
    access: AccessFlags,
) -> QpAttr {
    let mut attr = QpAttr::new()
        .qp_state(QpState::Init)
        .port_num(1)
        .qp_access_flags(access)
        .qkey(QKEY);
    qp.modify_to(&attr).unwrap_or_else(|e| panic!("INIT: {e}"));

    attr.qp_state = QpState::Rtr;
    attr.path_mtu = Mtu(3);
    attr.dest_qp_num = remote_qpn;
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 4;
    attr.min_rnr_timer = 1;
    attr.ah_attr = AhAttr::new(1).grh(GlobalRoute::new(dgid, sgid_index).hop_limit(1));
    qp.modify_to(&attr).unwrap_or_else(|e| panic!("RTR: {e}"));
    attr
}
