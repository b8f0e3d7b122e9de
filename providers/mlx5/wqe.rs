//! mlx5 WQE segment encoders: the `mlx5dv.h` layouts (`mlx5_wqe_ctrl_seg`,
//! `_data_seg`, `_raddr_seg`, `_atomic_seg`, `_inl_data_seg`,
//! `_srq_next_seg`, `mlx5_wqe_av`), all fields big-endian. `golden.rs`
//! checks them byte for byte against the header's own helpers and structs.
#![allow(dead_code)]

/// `MLX5_SEND_WQE_BB`.
pub(crate) const SEND_WQE_BB: usize = 64;
/// One 16-byte segment unit ("ds").
pub(crate) const DS: usize = 16;

/// `MLX5_OPCODE_*`.
pub(crate) mod opcode {
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

pub(crate) const CTRL_FENCE: u8 = 4 << 5;
pub(crate) const CTRL_INITIATOR_SMALL_FENCE: u8 = 1 << 5;
pub(crate) const CTRL_CQ_UPDATE: u8 = 2 << 2;
pub(crate) const CTRL_SOLICITED: u8 = 1 << 1;
pub(crate) const INLINE_SEG: u32 = 0x8000_0000;
pub(crate) const INVALID_LKEY: u32 = 0x100;
pub(crate) const EXTENDED_UD_AV: u32 = 0x8000_0000;

/// A 16-byte WQE segment as the two 64-bit words it is stored as, each in
/// memory order (`to_ne_bytes` gives the bytes the device reads). Building
/// segments as words lets the send path store them with two 8-byte stores
/// instead of assembling byte arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg(pub(crate) [u64; 2]);

impl Seg {
    /// The segment's bytes, as the device reads them.
    pub(crate) fn bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.0[0].to_ne_bytes());
        b[8..].copy_from_slice(&self.0[1].to_ne_bytes());
        b
    }

    /// The first 8 bytes (of a ctrl segment: what an 8-byte doorbell rings).
    pub(crate) fn head(self) -> [u8; 8] {
        self.0[0].to_ne_bytes()
    }
}

/// `mlx5_wqe_ctrl_seg`, as `mlx5dv_set_ctrl_seg` fills it (bytes 8..10,
/// signature and reserved, are zero): `opmod_idx_opcode` =
/// `opmod << 24 | pi << 8 | opcode`, `qpn_ds` = `qpn << 8 | ds`,
/// `fm_ce_se` at byte 11, and the immediate (big-endian bytes as the
/// header's `__be32 imm`) at 12..16.
#[inline(always)]
pub(crate) fn ctrl(
    pi: u16,
    opcode: u8,
    opmod: u8,
    qpn: u32,
    ds: u8,
    fm_ce_se: u8,
    imm: [u8; 4],
) -> Seg {
    let opmod_idx_opcode = u32::from(opmod) << 24 | u32::from(pi) << 8 | u32::from(opcode);
    let qpn_ds = qpn << 8 | u32::from(ds);
    Seg([
        (u64::from(opmod_idx_opcode) << 32 | u64::from(qpn_ds)).to_be(),
        (u64::from(fm_ce_se) << 32 | u64::from(u32::from_be_bytes(imm))).to_be(),
    ])
}

/// `mlx5_wqe_data_seg` (`mlx5dv_set_data_seg`): byte count, lkey, address.
#[inline(always)]
pub(crate) fn data(byte_count: u32, lkey: u32, addr: u64) -> Seg {
    Seg([
        (u64::from(byte_count) << 32 | u64::from(lkey)).to_be(),
        addr.to_be(),
    ])
}

/// `mlx5_wqe_raddr_seg`: remote address, rkey, 4 reserved bytes.
#[inline(always)]
pub(crate) fn raddr(addr: u64, rkey: u32) -> Seg {
    Seg([addr.to_be(), (u64::from(rkey) << 32).to_be()])
}

/// `mlx5_wqe_atomic_seg`: swap (or add) value, compare value.
#[inline(always)]
pub(crate) fn atomic(swap_add: u64, compare: u64) -> Seg {
    Seg([swap_add.to_be(), compare.to_be()])
}

/// The 4-byte header of `mlx5_wqe_inl_data_seg`: the length with
/// `MLX5_INLINE_SEG` set.
#[inline(always)]
pub(crate) fn inline_header(len: u32) -> [u8; 4] {
    (len | INLINE_SEG).to_be_bytes()
}

/// `mlx5_wqe_srq_next_seg`: the next free WQE's index at bytes 2..4.
#[inline]
pub(crate) fn srq_next(next_wqe_index: u16) -> Seg {
    Seg([(u64::from(next_wqe_index) << 32).to_be(), 0])
}

/// The entry that ends a receive WQE's scatter list when it has fewer
/// entries than the queue's maximum (`MLX5_INVALID_LKEY`, no bytes).
#[inline]
pub(crate) fn recv_terminator() -> Seg {
    data(0, INVALID_LKEY, 0)
}

/// `struct mlx5_wqe_av`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Av {
    pub(crate) key: u64,
    pub(crate) dqp_dct: u32,
    pub(crate) ext: bool,
    pub(crate) stat_rate_sl: u8,
    pub(crate) fl_mlid: u8,
    pub(crate) rlid: u16,
    pub(crate) rmac: [u8; 6],
    pub(crate) tclass: u8,
    pub(crate) hop_limit: u8,
    pub(crate) grh_gid_fl: u32,
    pub(crate) rgid: [u8; 16],
}

impl Av {
    #[inline]
    pub(crate) fn encode(&self) -> [u8; 48] {
        let mut s = [0u8; 48];
        s[0..8].copy_from_slice(&self.key.to_be_bytes());
        s[8..12].copy_from_slice(&(u32::from(self.ext) << 31 | self.dqp_dct).to_be_bytes());
        s[12] = self.stat_rate_sl;
        s[13] = self.fl_mlid;
        s[14..16].copy_from_slice(&self.rlid.to_be_bytes());
        s[20..26].copy_from_slice(&self.rmac);
        s[26] = self.tclass;
        s[27] = self.hop_limit;
        s[28..32].copy_from_slice(&self.grh_gid_fl.to_be_bytes());
        s[32..48].copy_from_slice(&self.rgid);
        s
    }

    /// The address vector as the three segments a UD send WQE carries.
    #[inline]
    pub(crate) fn segs(&self) -> [Seg; 3] {
        let b = self.encode();
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[8 * i..8 * i + 8]);
            u64::from_ne_bytes(w)
        };
        [
            Seg([word(0), word(1)]),
            Seg([word(2), word(3)]),
            Seg([word(4), word(5)]),
        ]
    }
}
