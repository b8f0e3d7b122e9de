//! UD: the QP transitions and address handle of `ud_pingpong.c`. Sends
//! carry the payload from offset [`GRH_LEN`] of the buffer; receives land
//! at offset 0 with room for the 40-byte GRH the device puts first.

use uverbs::{AddressHandle, ProtectionDomain, QpAttr, QpState, QueuePair};

use super::{ah_attr, Peer};

/// Room for the Global Routing Header in front of each received message.
pub const GRH_LEN: u32 = 40;
/// The Q_Key both sides use.
pub const QKEY: u32 = 0x1111_1111;

/// RESET -> INIT: pkey index 0, the port, Q_Key 0x11111111.
pub fn init(qp: &QueuePair, ib_port: u8) -> uverbs::Result<()> {
    let attr = QpAttr {
        qp_state: QpState::Init,
        pkey_index: 0,
        port_num: ib_port,
        qkey: QKEY,
        ..QpAttr::default()
    };
    qp.modify_to(&attr)
}

/// INIT -> RTR -> RTS (SQ PSN), then the address handle towards `p.dest`.
/// The error names the step: `"RTR"`, `"RTS"` or `"AH"`.
pub fn connect(
    qp: &QueuePair,
    pd: &ProtectionDomain,
    p: &Peer,
) -> Result<AddressHandle, (&'static str, uverbs::Error)> {
    let mut attr = QpAttr::with_state(QpState::Rtr);
    qp.modify_to(&attr).map_err(|e| ("RTR", e))?;
    attr.qp_state = QpState::Rts;
    attr.sq_psn = p.my_psn;
    qp.modify_to(&attr).map_err(|e| ("RTS", e))?;
    pd.create_ah(&ah_attr(p)).map_err(|e| ("AH", e))
}
