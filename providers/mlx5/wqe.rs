//! mlx5 WQE segment encoders (`mlx5dv.h` layouts; first version by the
//! lead, to be completed and proven by the golden tests).
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

#[inline]
pub(crate) fn ctrl(
    pi: u16,
    opcode: u8,
    opmod: u8,
    qpn: u32,
    ds: u8,
    fm_ce_se: u8,
    imm: [u8; 4],
) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0..4].copy_from_slice(
        &(u32::from(opmod) << 24 | u32::from(pi) << 8 | u32::from(opcode)).to_be_bytes(),
    );
    s[4..8].copy_from_slice(&(qpn << 8 | u32::from(ds)).to_be_bytes());
    s[11] = fm_ce_se;
    s[12..16].copy_from_slice(&imm);
    s
}

#[inline]
pub(crate) fn data(byte_count: u32, lkey: u32, addr: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0..4].copy_from_slice(&byte_count.to_be_bytes());
    s[4..8].copy_from_slice(&lkey.to_be_bytes());
    s[8..16].copy_from_slice(&addr.to_be_bytes());
    s
}

#[inline]
pub(crate) fn raddr(addr: u64, rkey: u32) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0..8].copy_from_slice(&addr.to_be_bytes());
    s[8..12].copy_from_slice(&rkey.to_be_bytes());
    s
}

#[inline]
pub(crate) fn atomic(swap_add: u64, compare: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0..8].copy_from_slice(&swap_add.to_be_bytes());
    s[8..16].copy_from_slice(&compare.to_be_bytes());
    s
}

#[inline]
pub(crate) fn inline_header(len: u32) -> [u8; 4] {
    (len | INLINE_SEG).to_be_bytes()
}

#[inline]
pub(crate) fn srq_next(next_wqe_index: u16) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[2..4].copy_from_slice(&next_wqe_index.to_be_bytes());
    s
}

#[inline]
pub(crate) fn recv_terminator() -> [u8; 16] {
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
}
