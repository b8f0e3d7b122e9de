//! The device model's own view of the WQE and CQE formats, written from the
//! structs of rdma-core's public `infiniband/mlx5dv.h` (Debian
//! libibverbs-dev 44) and not from the library's encoders
//! (`providers/mlx5/wqe.rs`, `cqe.rs`): a wrong encoder there and a wrong
//! decoder here would have to agree by accident.
//!
//! | struct (mlx5dv.h) | bytes | fields used |
//! |---|---|---|
//! | `mlx5_wqe_ctrl_seg` | 16 | `opmod_idx_opcode` BE32 @0, `qpn_ds` BE32 @4, `signature` @8, `fm_ce_se` @11, `imm` @12 |
//! | `mlx5_wqe_datagram_seg` (`mlx5_wqe_av`) | 48 | `key.qkey.qkey` BE32 @0, `dqp_dct` BE32 @8 (`MLX5_EXTENDED_UD_AV` bit 31), `grh_gid_fl` BE32 @28 (sgid index in bits 20..27), `rgid` @32 |
//! | `mlx5_wqe_raddr_seg` | 16 | `raddr` BE64 @0, `rkey` BE32 @8 |
//! | `mlx5_wqe_atomic_seg` | 16 | `swap_add` BE64 @0, `compare` BE64 @8 |
//! | `mlx5_wqe_data_seg` | 16 | `byte_count` BE32 @0, `lkey` BE32 @4, `addr` BE64 @8 |
//! | `mlx5_wqe_inl_data_seg` | 4 | `byte_count` BE32 @0 with `MLX5_INLINE_SEG` (bit 31) |
//! | `mlx5_wqe_srq_next_seg` | 16 | `next_wqe_index` BE16 @2 |
//! | `mlx5_cqe64` | 64 | `flags_rqpn` BE32 @24, `l4_hdr_type_etc` @29 (L3 type in bits 2..3), `srqn_uidx` BE32 @32, `imm_inval_pkey` @36, `byte_cnt` BE32 @44, `timestamp` BE64 @48 (written by `cq.rs`), `sop_drop_qpn` BE32 @56, `wqe_counter` BE16 @60, `op_own` @63 |
//! | `mlx5_err_cqe` | 64 | `vendor_err_synd` @54, `syndrome` @55, `s_wqe_opcode_qpn` BE32 @56, `wqe_counter` BE16 @60, `op_own` @63 |

/// `MLX5_OPCODE_*` the model executes.
pub(crate) mod op {
    pub(crate) const NOP: u8 = 0x00;
    pub(crate) const SEND_INVAL: u8 = 0x01;
    pub(crate) const RDMA_WRITE: u8 = 0x08;
    pub(crate) const RDMA_WRITE_IMM: u8 = 0x09;
    pub(crate) const SEND: u8 = 0x0a;
    pub(crate) const SEND_IMM: u8 = 0x0b;
    pub(crate) const RDMA_READ: u8 = 0x10;
    pub(crate) const ATOMIC_CS: u8 = 0x11;
    pub(crate) const ATOMIC_FA: u8 = 0x12;
}

/// `MLX5_CQE_*` opcodes the model writes.
pub(crate) mod cqe_op {
    pub(crate) const REQ: u8 = 0;
    pub(crate) const RESP_WR_IMM: u8 = 1;
    pub(crate) const RESP_SEND: u8 = 2;
    pub(crate) const RESP_SEND_IMM: u8 = 3;
    pub(crate) const RESP_SEND_INV: u8 = 4;
    pub(crate) const REQ_ERR: u8 = 13;
    pub(crate) const RESP_ERR: u8 = 14;
}

/// `MLX5_CQE_SYNDROME_*` the model reports.
pub(crate) mod synd {
    pub(crate) const LOCAL_LENGTH_ERR: u8 = 0x01;
    pub(crate) const LOCAL_QP_OP_ERR: u8 = 0x02;
    pub(crate) const LOCAL_PROT_ERR: u8 = 0x04;
    pub(crate) const WR_FLUSH_ERR: u8 = 0x05;
    pub(crate) const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
    pub(crate) const REMOTE_ACCESS_ERR: u8 = 0x13;
    pub(crate) const REMOTE_OP_ERR: u8 = 0x14;
    pub(crate) const RETRY_EXC_ERR: u8 = 0x15;
    pub(crate) const RNR_RETRY_EXC_ERR: u8 = 0x16;
}

/// `fm_ce_se` bits: `MLX5_WQE_CTRL_CQ_UPDATE`, `MLX5_WQE_CTRL_SOLICITED`.
pub(crate) const CQ_UPDATE: u8 = 0x08;
pub(crate) const SOLICITED: u8 = 0x02;
/// `MLX5_INLINE_SEG`.
pub(crate) const INLINE: u32 = 0x8000_0000;
/// `MLX5_INVALID_LKEY`: ends a receive scatter list.
pub(crate) const INVALID_LKEY: u32 = 0x100;
/// `MLX5_EXTENDED_UD_AV`: the AV in a UD WQE is the 48-byte one.
pub(crate) const EXTENDED_UD_AV: u32 = 0x8000_0000;
/// `MLX5_CQE_L3_HDR_TYPE_*` (in `l4_hdr_type_etc` bits 2..3) and
/// `MLX5_CQE_ROCE_L3_HEADER_TYPE_*` (in `flags_rqpn` bits 24..25, kernel
/// `include/linux/mlx5/device.h`): the same values.
pub(crate) const L3_IPV6: u8 = 1;
pub(crate) const L3_IPV4: u8 = 2;

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}

/// A decoded control segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctrl {
    pub(crate) opcode: u8,
    pub(crate) wqe_index: u16,
    pub(crate) qpn: u32,
    pub(crate) ds: u32,
    pub(crate) fm_ce_se: u8,
    pub(crate) imm: [u8; 4],
}

pub(crate) fn ctrl(seg: &[u8]) -> Ctrl {
    let w0 = be32(seg, 0);
    let w1 = be32(seg, 4);
    Ctrl {
        opcode: (w0 & 0xff) as u8,
        wqe_index: ((w0 >> 8) & 0xffff) as u16,
        qpn: w1 >> 8,
        ds: w1 & 0x3f,
        fm_ce_se: seg[11],
        imm: [seg[12], seg[13], seg[14], seg[15]],
    }
}

/// A gather/scatter entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Data {
    pub(crate) len: u32,
    pub(crate) lkey: u32,
    pub(crate) addr: u64,
}

pub(crate) fn data(seg: &[u8]) -> Data {
    Data {
        len: be32(seg, 0),
        lkey: be32(seg, 4),
        addr: be64(seg, 8),
    }
}

/// A decoded address vector (UD).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Av {
    pub(crate) qkey: u32,
    pub(crate) dqpn: u32,
    pub(crate) extended: bool,
    pub(crate) sgid_index: u8,
    pub(crate) rgid: [u8; 16],
}

/// Decodes the 48 bytes of a `mlx5_wqe_av`.
pub(crate) fn av(b: &[u8]) -> Av {
    let dqp = be32(b, 8);
    let mut rgid = [0u8; 16];
    rgid.copy_from_slice(&b[32..48]);
    Av {
        qkey: be32(b, 0),
        dqpn: dqp & 0xff_ffff,
        extended: dqp & EXTENDED_UD_AV != 0,
        sgid_index: (be32(b, 28) >> 20) as u8,
        rgid,
    }
}

/// Message data the device puts in a CQE instead of memory
/// (scatter-to-CQE, `cs_res`/`cs_req` of the QP context): up to 32 bytes at
/// the start of the 64-byte CQE, flagged `MLX5_INLINE_SCATTER_32` in
/// `op_own`, or up to 64 bytes in the 64 bytes before it (the first half of
/// a 128-byte CQE), flagged `MLX5_INLINE_SCATTER_64`. rdma-core copies it
/// out on poll (`providers/mlx5/cq.c` `handle_responder`: `cqe` for 32,
/// `cqe - 1` for 64; `mlx5_copy_to_recv_wqe`, `mlx5_copy_to_send_wqe`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct InCqe {
    /// 64: the bytes go into the slot's first half; 32: into the CQE64.
    pub(crate) room: u8,
    /// The data, zero-padded.
    pub(crate) bytes: [u8; 64],
}

/// `MLX5_INLINE_SCATTER_32` and `MLX5_INLINE_SCATTER_64` (mlx5dv.h), in
/// `op_own`.
pub(crate) const INLINE_SCATTER_32: u8 = 0x04;
pub(crate) const INLINE_SCATTER_64: u8 = 0x08;

impl InCqe {
    /// `data` in a CQE with `room` (32 or 64) bytes for it, if it fits.
    pub(crate) fn of(room: u8, data: &[u8]) -> Option<InCqe> {
        if !InCqe::fits(room, data.len()) {
            return None;
        }
        let mut bytes = [0u8; 64];
        bytes[..data.len()].copy_from_slice(data);
        Some(InCqe { room, bytes })
    }

    /// Whether `len` bytes go in a CQE with `room` bytes for data.
    pub(crate) fn fits(room: u8, len: usize) -> bool {
        room != 0 && len <= usize::from(room)
    }

    /// The 64 bytes that precede the CQE64 in its slot (128-byte CQEs).
    pub(crate) fn front(&self) -> Option<&[u8; 64]> {
        (self.room == 64).then_some(&self.bytes)
    }
}

/// What a CQE says, before encoding.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cqe {
    pub(crate) opcode: u8,
    pub(crate) solicited: bool,
    pub(crate) wqe_counter: u16,
    pub(crate) qpn: u32,
    /// The WQE opcode (requester CQEs) in `sop_drop_qpn`'s top byte.
    pub(crate) wqe_opcode: u8,
    pub(crate) byte_cnt: u32,
    pub(crate) imm: [u8; 4],
    pub(crate) srqn_uidx: u32,
    /// `flags_rqpn`: source QP (UD) and the GRH/l3 bits.
    pub(crate) flags_rqpn: u32,
    /// `l4_hdr_type_etc`: the L3 header type of a received packet.
    pub(crate) l3_type: u8,
    pub(crate) syndrome: u8,
    pub(crate) vendor_syndrome: u8,
    /// Data scattered to the CQE.
    pub(crate) in_cqe: Option<InCqe>,
}

impl Cqe {
    /// The 64 bytes of a `struct mlx5_cqe64` / `mlx5_err_cqe`, the last byte
    /// (`op_own`) without its owner bit: the writer adds it, last.
    pub(crate) fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[24..28].copy_from_slice(&self.flags_rqpn.to_be_bytes());
        b[29] = self.l3_type << 2;
        b[32..36].copy_from_slice(&(self.srqn_uidx & 0xff_ffff).to_be_bytes());
        b[36..40].copy_from_slice(&self.imm);
        b[44..48].copy_from_slice(&self.byte_cnt.to_be_bytes());
        if matches!(self.opcode, cqe_op::REQ_ERR | cqe_op::RESP_ERR) {
            b[54] = self.vendor_syndrome;
            b[55] = self.syndrome;
        }
        let sop = u32::from(self.wqe_opcode) << 24 | (self.qpn & 0xff_ffff);
        b[56..60].copy_from_slice(&sop.to_be_bytes());
        b[60..62].copy_from_slice(&self.wqe_counter.to_be_bytes());
        b[63] = self.opcode << 4 | u8::from(self.solicited) << 1;
        match self.in_cqe {
            // The data takes the CQE64's first 32 bytes, fields included.
            Some(d) if d.room == 32 => {
                b[..32].copy_from_slice(&d.bytes[..32]);
                b[63] |= INLINE_SCATTER_32;
            }
            Some(_) => b[63] |= INLINE_SCATTER_64,
            None => {}
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_fields_come_from_the_documented_offsets() {
        let mut s = [0u8; 16];
        s[0..4].copy_from_slice(&0x0012_340a_u32.to_be_bytes());
        s[4..8].copy_from_slice(&(0xabcdefu32 << 8 | 5).to_be_bytes());
        s[11] = 0x0a;
        s[12..16].copy_from_slice(&[1, 2, 3, 4]);
        let c = ctrl(&s);
        assert_eq!(
            (c.opcode, c.wqe_index, c.qpn, c.ds, c.fm_ce_se, c.imm),
            (0x0a, 0x1234, 0xabcdef, 5, 0x0a, [1, 2, 3, 4])
        );
    }

    #[test]
    fn cqe_fields_land_at_the_documented_offsets() {
        let c = Cqe {
            opcode: cqe_op::RESP_SEND_IMM,
            solicited: true,
            wqe_counter: 0x0102,
            qpn: 0x030405,
            wqe_opcode: 0,
            byte_cnt: 0x0607_0809,
            imm: [0xa, 0xb, 0xc, 0xd],
            srqn_uidx: 0x0e0f10,
            flags_rqpn: 0x1112_1314,
            ..Cqe::default()
        };
        let b = c.encode();
        assert_eq!(be32(&b, 24), 0x1112_1314);
        assert_eq!(be32(&b, 32), 0x0e0f10);
        assert_eq!(&b[36..40], &[0xa, 0xb, 0xc, 0xd]);
        assert_eq!(be32(&b, 44), 0x0607_0809);
        assert_eq!(be32(&b, 56), 0x030405);
        assert_eq!(be16(&b, 60), 0x0102);
        assert_eq!(b[63], 3 << 4 | 2);
    }
}
