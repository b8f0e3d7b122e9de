//! The firmware side of the DevX objects the model executes: CQs and QPs
//! made by PRM commands on UMEMs, and the QP state transitions, on DevX QPs
//! and on verbs QPs alike.
//!
//! A `CREATE_CQ` with `cq_umem_valid` and a `CREATE_QP` with
//! `wq_umem_valid` become CQs and QPs of the model's HCA: their doorbells
//! on the UAR page they name run their WQEs, their CQEs go to the UMEM,
//! and a CQ overrun raises a CQ_ERROR EQE (syndrome 1) to the DevX event
//! subscriptions instead of an async event. Other creates are booked only
//! (`devx.rs`).
//!
//! The mailboxes are decoded here with this module's own bit reader, from
//! the layouts of `mlx5_ifc.h` (`create_cq_in`, `cqc`, `create_qp_in`,
//! `qpc`, `ads`, `rst2init_qp_in` and the other modify commands), not with
//! the library's `devx_get`, and each field a wrong offset would garble is
//! checked as firmware checks it: a failure is `BAD_PARAM` (or
//! `BAD_QP_STATE`) with a syndrome naming the field.
//!
//! The UMEMs a create command names ([`umem_ids`]) are the firmware's
//! references: `DESTROY_UMEM` of one an object still names is refused
//! (`devx.rs`, `UMEM_DEREG`).

use super::{
    devx::{op, EQN},
    hca::{Cq, Hca, Qp, Transport, ERR, RESET, RTR, RTS},
};

/// `MLX5_CMD_STAT_BAD_PARAM_ERR`, `MLX5_CMD_STAT_BAD_QP_STATE_ERR`.
pub(crate) const BAD_PARAM: u8 = 0x03;
pub(crate) const BAD_QP_STATE: u8 = 0x10;
/// `MLX5_CMD_STAT_BAD_RES_STATE_ERR`: the model's answer to a
/// `DESTROY_UMEM` of a UMEM an object still names. No public source gives
/// the status ConnectX firmware uses there (the public PRM predates UMEMs;
/// `RES_BUSY`, 0x06, would read as `EBUSY` instead of `EINVAL`); the
/// hardware suite's `tests/support/src/devx_umem.rs` reports the real one.
pub(crate) const BAD_RES_STATE: u8 = 0x09;
/// `IB_QPS_INIT` (the model keeps IB state numbers).
const INIT: u8 = 1;

/// A firmware failure: status and a syndrome naming what was wrong (the
/// model's syndromes: `0xdf00_0000 | field`).
pub(crate) type Fail = (u8, u32);

fn bad(field: u32) -> Fail {
    (BAD_PARAM, 0xdf00_0000 | field)
}

/// `width` bits (at most 32) at bit `bit` of a big-endian PRM mailbox, as
/// `MLX5_GET` reads them; 0 past the end.
pub(crate) fn get(buf: &[u8], bit: usize, width: u32) -> u32 {
    let mut v: u64 = 0;
    for i in 0..width as usize {
        let b = bit + i;
        let byte = buf.get(b / 8).copied().unwrap_or(0);
        v = v << 1 | u64::from(byte >> (7 - b % 8) & 1);
    }
    v as u32
}

/// Bit offsets (`mlx5_ifc.h`).
///
/// A QP context holds two address paths (`ads`, 0x160 bits each: the
/// 128-bit `rgid_rip` sits before `vhca_port_num`), so `create_qp_in` and
/// the QP modify commands are 0x880 bits, their QP context at 0xc0..0x800,
/// the WQ UMEM fields after it (`wq_umem_id` at 0x840, as rdma-core's
/// `mlx5_ifc.h` and `tests/mlx5_prm_structs.py` `CreateQpIn` place it).
mod at {
    /// `create_cq_in`: the CQ context, the CQ's UMEM.
    pub(super) const CQC: usize = 0x80;
    pub(super) const CQ_UMEM_ID: usize = 0x2c0;
    pub(super) const CQ_UMEM_VALID: usize = 0x2e0;
    /// `cqc`.
    pub(super) const CQC_DBR_UMEM_VALID: usize = 0x06;
    pub(super) const CQC_CQE_SZ: usize = 0x08;
    pub(super) const CQC_DBR_UMEM_ID: usize = 0x20;
    pub(super) const CQC_LOG_CQ_SIZE: usize = 0x63;
    pub(super) const CQC_UAR_PAGE: usize = 0x68;
    pub(super) const CQC_C_EQN: usize = 0xb8;
    /// `create_qp_in` and the modify commands: the QP context; the WQ UMEM.
    pub(super) const QPC: usize = 0xc0;
    pub(super) const WQ_UMEM_ID: usize = 0x840;
    pub(super) const WQ_UMEM_VALID: usize = 0x860;
    /// `qpc`.
    pub(super) const ST: usize = 0x08;
    pub(super) const PM_STATE: usize = 0x13;
    pub(super) const PD: usize = 0x28;
    pub(super) const MTU: usize = 0x40;
    pub(super) const LOG_RQ_SIZE: usize = 0x49;
    pub(super) const LOG_RQ_STRIDE: usize = 0x4d;
    pub(super) const NO_SQ: usize = 0x50;
    pub(super) const LOG_SQ_SIZE: usize = 0x51;
    pub(super) const UAR_PAGE: usize = 0x68;
    pub(super) const REMOTE_QPN: usize = 0xa8;
    /// `ads` (the primary address path at 0xc0 of `qpc`, 0x160 bits).
    pub(super) const ADS: usize = 0xc0;
    pub(super) const PKEY_INDEX: usize = ADS + 0x10;
    pub(super) const GRH: usize = ADS + 0x28;
    pub(super) const ACK_TIMEOUT: usize = ADS + 0x40;
    pub(super) const SRC_ADDR_INDEX: usize = ADS + 0x48;
    pub(super) const RGID_RIP: usize = ADS + 0x80;
    pub(super) const VHCA_PORT_NUM: usize = ADS + 0x128;
    /// After the address paths: the retry counts, the PSNs, the RNR timer.
    pub(super) const RETRY_COUNT: usize = 0x38d;
    pub(super) const RNR_RETRY: usize = 0x390;
    pub(super) const NEXT_SEND_PSN: usize = 0x3c8;
    pub(super) const MIN_RNR_NAK: usize = 0x4a3;
    pub(super) const NEXT_RCV_PSN: usize = 0x4a8;
    /// After both address paths (0xc0 + 2 * 0x160 = 0x380).
    pub(super) const CQN_SND: usize = 0x3e8;
    pub(super) const RRE: usize = 0x490;
    pub(super) const CQN_RCV: usize = 0x4e8;
    pub(super) const Q_KEY: usize = 0x540;
    pub(super) const RQ_TYPE: usize = 0x565;
    pub(super) const DBR_UMEM_VALID: usize = 0x683;
    pub(super) const DBR_UMEM_ID: usize = 0x720;
}

/// Whether the model runs the object a create command makes: a CQ or a QP
/// whose buffer is a UMEM.
pub(crate) fn executes(opcode: u16, cmd: &[u8]) -> bool {
    match opcode {
        op::CREATE_CQ => get(cmd, at::CQ_UMEM_VALID, 1) == 1,
        op::CREATE_QP => get(cmd, at::WQ_UMEM_VALID, 1) == 1,
        _ => false,
    }
}

/// The UMEM ids a create command names, as firmware reads them: a CQ's
/// buffer and doorbell record (`cq_umem_id`, `cqc.dbr_umem_id`), a QP's
/// work queue and doorbell record (`wq_umem_id`, `qpc.dbr_umem_id`). The
/// kernel sets the matching `*_umem_valid` bits of these commands itself
/// (`devx.c` `devx_set_umem_valid`, called by `OBJ_CREATE`), so firmware
/// reads the ids whatever the caller set; ids naming no UMEM are the
/// caller's to filter out.
pub(crate) fn umem_ids(opcode: u16, cmd: &[u8]) -> Vec<u32> {
    match opcode {
        op::CREATE_CQ => vec![
            get(cmd, at::CQ_UMEM_ID, 32),
            get(cmd, at::CQC + at::CQC_DBR_UMEM_ID, 32),
        ],
        op::CREATE_QP => vec![
            get(cmd, at::WQ_UMEM_ID, 32),
            get(cmd, at::QPC + at::DBR_UMEM_ID, 32),
        ],
        _ => Vec::new(),
    }
}

/// A UMEM by id: its address and length.
pub(crate) type UmemOf<'a> = &'a dyn Fn(u32) -> Option<(u64, u64)>;

/// A `CREATE_CQ` the model executes (`cq_umem_valid`): the CQ, checked.
pub(crate) fn create_cq(h: &Hca, cmd: &[u8], handle: u32, umem: UmemOf<'_>) -> Result<Cq, Fail> {
    let cqc = |bit, width| get(cmd, at::CQC + bit, width);
    let log = cqc(at::CQC_LOG_CQ_SIZE, 5);
    if log > 22 {
        return Err(bad(at::CQC_LOG_CQ_SIZE as u32));
    }
    let cqe_size = match cqc(at::CQC_CQE_SZ, 3) {
        0 => 64,
        1 => 128,
        _ => return Err(bad(at::CQC_CQE_SZ as u32)),
    };
    let ncqe = 1u32 << log;
    let (buf, len) = umem(get(cmd, at::CQ_UMEM_ID, 32)).ok_or(bad(at::CQ_UMEM_ID as u32))?;
    if len < u64::from(ncqe * cqe_size) {
        return Err(bad(at::CQ_UMEM_ID as u32));
    }
    if cqc(at::CQC_DBR_UMEM_VALID, 1) != 1 {
        return Err(bad(at::CQC_DBR_UMEM_VALID as u32));
    }
    let (db, dlen) =
        umem(cqc(at::CQC_DBR_UMEM_ID, 32)).ok_or(bad((at::CQC + at::CQC_DBR_UMEM_ID) as u32))?;
    if dlen < 8 {
        return Err(bad((at::CQC + at::CQC_DBR_UMEM_ID) as u32));
    }
    let uar = cqc(at::CQC_UAR_PAGE, 24);
    if !h.has_uar(uar) {
        return Err(bad((at::CQC + at::CQC_UAR_PAGE) as u32));
    }
    if cqc(at::CQC_C_EQN, 8) != EQN {
        return Err(bad((at::CQC + at::CQC_C_EQN) as u32));
    }
    Ok(Cq {
        devx: true,
        ..Cq::new(handle, buf, db, ncqe, cqe_size, uar)
    })
}

/// A `CREATE_QP` the model executes (`wq_umem_valid`): the QP, checked.
/// `pdns` are the PD numbers the context has.
pub(crate) fn create_qp(
    h: &Hca,
    cmd: &[u8],
    handle: u32,
    pdns: &[u32],
    umem: UmemOf<'_>,
) -> Result<Qp, Fail> {
    let qpc = |bit, width| get(cmd, at::QPC + bit, width);
    let field = |bit: usize| (at::QPC + bit) as u32;
    let transport = match qpc(at::ST, 8) {
        0 => Transport::Rc,
        1 => Transport::Uc,
        2 => Transport::Ud,
        _ => return Err(bad(field(at::ST))),
    };
    // mlx5_ib and rdma-core create every QP migrated.
    if qpc(at::PM_STATE, 2) != 3 {
        return Err(bad(field(at::PM_STATE)));
    }
    if !pdns.contains(&qpc(at::PD, 24)) {
        return Err(bad(field(at::PD)));
    }
    let uar = qpc(at::UAR_PAGE, 24);
    if !h.has_uar(uar) {
        return Err(bad(field(at::UAR_PAGE)));
    }
    let (send_cq, recv_cq) = (qpc(at::CQN_SND, 24), qpc(at::CQN_RCV, 24));
    for (cqn, bit) in [(send_cq, at::CQN_SND), (recv_cq, at::CQN_RCV)] {
        if !h.cqs.contains_key(&cqn) {
            return Err(bad(field(bit)));
        }
    }
    // The RQ: regular (first in the buffer) or none (zero size).
    let (rq_cnt, rq_shift) = match qpc(at::RQ_TYPE, 3) {
        0 => (
            1u32 << qpc(at::LOG_RQ_SIZE, 4),
            qpc(at::LOG_RQ_STRIDE, 3) + 4,
        ),
        3 => (0, 4),
        _ => return Err(bad(field(at::RQ_TYPE))),
    };
    let sq_cnt = if qpc(at::NO_SQ, 1) == 1 {
        0
    } else {
        1u32 << qpc(at::LOG_SQ_SIZE, 4)
    };
    let sq_offset = u64::from(rq_cnt) << rq_shift;
    let (buf, len) = umem(get(cmd, at::WQ_UMEM_ID, 32)).ok_or(bad(at::WQ_UMEM_ID as u32))?;
    if len < sq_offset + u64::from(sq_cnt) * 64 {
        return Err(bad(at::WQ_UMEM_ID as u32));
    }
    if qpc(at::DBR_UMEM_VALID, 1) != 1 {
        return Err(bad(field(at::DBR_UMEM_VALID)));
    }
    let (db, dlen) = umem(qpc(at::DBR_UMEM_ID, 32)).ok_or(bad(field(at::DBR_UMEM_ID)))?;
    if dlen < 8 {
        return Err(bad(field(at::DBR_UMEM_ID)));
    }
    Ok(Qp {
        buf,
        db,
        sq_cnt,
        sq_offset,
        rq_cnt,
        rq_shift,
        send_cq,
        recv_cq,
        ..Qp::new(handle, transport, uar)
    })
}

/// A QP state transition (`RST2INIT_QP`, `INIT2RTR_QP`, `RTR2RTS_QP`,
/// `2ERR_QP` by opcode) applied to QP `qpn`, checked as firmware checks
/// it: the state it starts from, the port of `RST2INIT` (the model's
/// device has port 1 and P_Key index 0), the MTU of a connected QP's
/// `INIT2RTR`.
pub(crate) fn modify_qp(h: &mut Hca, qpn: u32, opcode: u16, cmd: &[u8]) -> Result<(), Fail> {
    let qpc = |bit, width| get(cmd, at::QPC + bit, width);
    let field = |bit: usize| (at::QPC + bit) as u32;
    let Some(qp) = h.qps.get_mut(&qpn) else {
        return Err(bad(0x48));
    };
    let (from, to) = match opcode {
        op::RST2INIT_QP => (RESET, INIT),
        op::INIT2RTR_QP => (INIT, RTR),
        op::RTR2RTS_QP => (RTR, RTS),
        op::QP_2ERR => (qp.state, ERR),
        _ => return Err(bad(0)),
    };
    if qp.state != from {
        return Err((BAD_QP_STATE, 0xdf10_0000 | u32::from(qp.state)));
    }
    match to {
        INIT => {
            if qpc(at::VHCA_PORT_NUM, 8) != 1 {
                return Err(bad(field(at::VHCA_PORT_NUM)));
            }
            if qpc(at::PKEY_INDEX, 16) != 0 {
                return Err(bad(field(at::PKEY_INDEX)));
            }
            if qp.transport == Transport::Ud {
                qp.qkey = qpc(at::Q_KEY, 32);
            } else {
                // rre, rwe, rae: IB_ACCESS_REMOTE_READ, _WRITE, _ATOMIC.
                let bits = qpc(at::RRE, 3);
                qp.access = (bits >> 2 & 1) << 2 | (bits >> 1 & 1) << 1 | (bits & 1) << 3;
            }
        }
        RTR if qp.transport != Transport::Ud => {
            if qpc(at::MTU, 3) == 0 {
                return Err(bad(field(at::MTU)));
            }
            qp.dest_qpn = qpc(at::REMOTE_QPN, 24);
            // The primary address path (a peer on another HCA of the
            // fabric, `remote.rs`), the receive PSN and the RNR timer.
            let d = &mut qp.attrs.dest;
            d.is_global = qpc(at::GRH, 1) as u8;
            d.sgid_index = qpc(at::SRC_ADDR_INDEX, 8) as u8;
            for (i, b) in d.dgid.iter_mut().enumerate() {
                *b = qpc(at::RGID_RIP + 8 * i, 8) as u8;
            }
            qp.attrs.dest_qp_num = qp.dest_qpn;
            qp.attrs.min_rnr_timer = qpc(at::MIN_RNR_NAK, 5) as u8;
            qp.wire.expected = qpc(at::NEXT_RCV_PSN, 24);
        }
        RTS if qp.transport != Transport::Ud => {
            qp.attrs.timeout = qpc(at::ACK_TIMEOUT, 5) as u8;
            qp.attrs.retry_cnt = qpc(at::RETRY_COUNT, 3) as u8;
            qp.rnr_retry = qpc(at::RNR_RETRY, 3) as u8;
            qp.wire.next_psn = qpc(at::NEXT_SEND_PSN, 24);
        }
        _ => {}
    }
    if to == ERR {
        h.enter_error(qpn);
    } else {
        qp.state = to;
    }
    Ok(())
}

/// The completion EQE of an armed DevX CQ (`struct mlx5_eqe`, type
/// `MLX5_EVENT_TYPE_COMP` 0 at byte 1, `mlx5_eqe_comp.cqn` at data byte 24,
/// byte 56 of the EQE).
pub(crate) fn comp_eqe(cqn: u32) -> [u8; 64] {
    let mut e = [0u8; 64];
    e[56..60].copy_from_slice(&(cqn & 0x00ff_ffff).to_be_bytes());
    e
}

/// The CQ_ERROR EQE of an overrun of CQ `cqn` (`struct mlx5_eqe` with a
/// `mlx5_eqe_cq_err`: type at byte 1, CQN at data byte 0, syndrome 1 at
/// data byte 11).
pub(crate) fn cq_overrun_eqe(cqn: u32) -> [u8; 64] {
    let mut e = [0u8; 64];
    e[1] = 0x04;
    e[32..36].copy_from_slice(&(cqn & 0x00ff_ffff).to_be_bytes());
    e[43] = 1;
    e
}

#[cfg(test)]
mod tests {
    use super::get;

    /// The QP offsets against the layout arithmetic of `mlx5_ifc.h`: two
    /// address paths of 0x160 bits (`ads` with its 128-bit `rgid_rip`)
    /// between `remote_qpn`'s word and `next_send_psn`'s, and the WQ UMEM
    /// after the 0x740-bit QP context.
    #[test]
    fn qp_offsets_follow_the_ifc_layout() {
        use super::at::*;
        const ADS_BITS: usize = 0x160;
        assert_eq!(
            ADS_BITS,
            0x20 * 4 + 0x80 + 0x20 * 3,
            "4 words, rgid_rip, 3 words"
        );
        assert_eq!(VHCA_PORT_NUM - ADS, 0x80 + 0x80 + 0x20 + 0x08);
        let after_paths = ADS + 2 * ADS_BITS;
        assert_eq!(after_paths, 0x380);
        // The retry counts' word, a reserved one, next_send_psn's, then
        // cqn_snd's.
        assert_eq!(CQN_SND, after_paths + 0x60 + 0x08);
        assert_eq!(QPC + 0x740, 0x800, "the QP context ends at 0x800");
        assert_eq!(WQ_UMEM_ID, 0x800 + 0x40, "after wq_umem_offset");
        assert_eq!(WQ_UMEM_VALID, WQ_UMEM_ID + 0x20);
    }

    /// The UMEM ids of a CQ and a QP command, where their layouts put them.
    #[test]
    fn umem_ids_are_read_where_the_layouts_put_them() {
        use super::{at, umem_ids};
        use crate::testing::mlx5::devx::op;
        let put = |b: &mut [u8], bit: usize, v: u32| {
            b[bit / 8..bit / 8 + 4].copy_from_slice(&v.to_be_bytes());
        };
        let mut cq = vec![0u8; 0x110];
        put(&mut cq, at::CQ_UMEM_ID, 0x201);
        put(&mut cq, at::CQC + at::CQC_DBR_UMEM_ID, 0x202);
        assert_eq!(umem_ids(op::CREATE_CQ, &cq), [0x201, 0x202]);
        let mut qp = vec![0u8; 0x880 / 8];
        put(&mut qp, at::WQ_UMEM_ID, 0x203);
        put(&mut qp, at::QPC + at::DBR_UMEM_ID, 0x204);
        assert_eq!(umem_ids(op::CREATE_QP, &qp), [0x203, 0x204]);
        assert!(umem_ids(op::ALLOC_PD, &qp).is_empty());
    }

    /// The reader against fields set by hand (byte and bit positions from
    /// the layouts, big-endian, bit 0 the most significant).
    #[test]
    fn get_reads_big_endian_bit_fields() {
        let mut b = [0u8; 16];
        b[0] = 0x04; // bit 5
        b[8] = 0x12;
        b[9] = 0x34;
        b[10] = 0x56;
        b[11] = 0x78;
        assert_eq!(get(&b, 5, 1), 1);
        assert_eq!(get(&b, 4, 1), 0);
        assert_eq!(get(&b, 0x40, 32), 0x1234_5678);
        assert_eq!(get(&b, 0x48, 24), 0x34_5678);
        assert_eq!(get(&b, 0x44, 8), 0x23);
        assert_eq!(get(&b, 0x78, 16), 0, "past the end reads 0");
    }
}
