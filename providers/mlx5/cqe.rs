//! mlx5 CQE decoding (`struct mlx5_cqe64`, `struct mlx5_err_cqe`; first
//! version by the lead, to be completed and proven by the golden tests).
#![allow(dead_code)]

use crate::wc::WcStatus;

pub(crate) const CQE_SIZE: usize = 64;

pub(crate) mod cqe_opcode {
    pub(crate) const REQ: u8 = 0;
    pub(crate) const RESP_WR_IMM: u8 = 1;
    pub(crate) const RESP_SEND: u8 = 2;
    pub(crate) const RESP_SEND_IMM: u8 = 3;
    pub(crate) const RESP_SEND_INV: u8 = 4;
    pub(crate) const RESIZE_CQ: u8 = 5;
    pub(crate) const NO_PACKET: u8 = 6;
    pub(crate) const SIG_ERR: u8 = 12;
    pub(crate) const REQ_ERR: u8 = 13;
    pub(crate) const RESP_ERR: u8 = 14;
    pub(crate) const INVALID: u8 = 15;
}

pub(crate) mod syndrome {
    pub(crate) const LOCAL_LENGTH_ERR: u8 = 0x01;
    pub(crate) const LOCAL_QP_OP_ERR: u8 = 0x02;
    pub(crate) const LOCAL_PROT_ERR: u8 = 0x04;
    pub(crate) const WR_FLUSH_ERR: u8 = 0x05;
    pub(crate) const MW_BIND_ERR: u8 = 0x06;
    pub(crate) const BAD_RESP_ERR: u8 = 0x10;
    pub(crate) const LOCAL_ACCESS_ERR: u8 = 0x11;
    pub(crate) const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
    pub(crate) const REMOTE_ACCESS_ERR: u8 = 0x13;
    pub(crate) const REMOTE_OP_ERR: u8 = 0x14;
    pub(crate) const TRANSPORT_RETRY_EXC_ERR: u8 = 0x15;
    pub(crate) const RNR_RETRY_EXC_ERR: u8 = 0x16;
    pub(crate) const REMOTE_ABORTED_ERR: u8 = 0x22;
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Cqe64(pub(crate) [u8; 64]);

impl Cqe64 {
    #[inline(always)]
    fn be32(&self, at: usize) -> u32 {
        u32::from_be_bytes([self.0[at], self.0[at + 1], self.0[at + 2], self.0[at + 3]])
    }
    #[inline(always)]
    pub(crate) fn owner(&self) -> u8 {
        self.op_own() & 1
    }
    #[inline(always)]
    pub(crate) fn se(&self) -> bool {
        (self.op_own() >> 1) & 1 != 0
    }
    #[inline(always)]
    pub(crate) fn format(&self) -> u8 {
        (self.op_own() >> 2) & 3
    }
    #[inline(always)]
    pub(crate) fn imm_raw(&self) -> [u8; 4] {
        [self.0[36], self.0[37], self.0[38], self.0[39]]
    }
    #[inline(always)]
    pub(crate) fn syndrome(&self) -> u8 {
        self.0[55]
    }
    #[inline(always)]
    pub(crate) fn vendor_err_synd(&self) -> u8 {
        self.0[54]
    }
    /// `timestamp` (bytes 48..56, big-endian) of a CQE that is not an
    /// error CQE (`struct mlx5_err_cqe` has syndromes there).
    #[inline(always)]
    pub(crate) fn timestamp(&self) -> u64 {
        (u64::from(self.be32(48)) << 32) | u64::from(self.be32(52))
    }
}

/// The fields of bytes 32..64 of a `struct mlx5_cqe64` that both views of
/// a CQE read ([`Cqe64`], the whole CQE; [`CqeTail`], the poll loop's
/// requester view), at their offsets written once here.
pub(crate) trait CqeView {
    /// The big-endian 32-bit field at byte `at` (16 <= at < 64, 4-aligned).
    fn be32(&self, at: usize) -> u32;

    /// `op_own` (byte 63).
    #[inline(always)]
    fn op_own(&self) -> u8 {
        self.be32(60) as u8
    }
    #[inline(always)]
    fn opcode(&self) -> u8 {
        self.op_own() >> 4
    }
    #[inline(always)]
    fn srqn_uidx(&self) -> u32 {
        self.be32(32) & 0x00ff_ffff
    }
    #[inline(always)]
    fn byte_cnt(&self) -> u32 {
        self.be32(44)
    }
    #[inline(always)]
    fn qpn(&self) -> u32 {
        self.be32(56) & 0x00ff_ffff
    }
    #[inline(always)]
    fn wqe_opcode(&self) -> u8 {
        (self.be32(56) >> 24) as u8
    }
    #[inline(always)]
    fn wqe_counter(&self) -> u16 {
        (self.be32(60) >> 16) as u16
    }
    // A responder's fields.
    /// `ml_path` (byte 17), the path bits.
    #[inline(always)]
    fn ml_path(&self) -> u8 {
        (self.be32(16) >> 16) as u8 & 0x7f
    }
    /// `slid` (bytes 22..24).
    #[inline(always)]
    fn slid(&self) -> u16 {
        self.be32(20) as u16
    }
    #[inline(always)]
    fn sl(&self) -> u8 {
        ((self.be32(24) >> 24) & 0xf) as u8
    }
    #[inline(always)]
    fn src_qp(&self) -> u32 {
        self.be32(24) & 0x00ff_ffff
    }
    #[inline(always)]
    fn grh(&self) -> bool {
        (self.be32(24) >> 28) & 3 != 0
    }
    #[inline(always)]
    fn imm_inval_pkey(&self) -> u32 {
        self.be32(36)
    }
}

impl CqeView for Cqe64 {
    #[inline(always)]
    fn be32(&self, at: usize) -> u32 {
        Cqe64::be32(self, at)
    }
}

/// Bytes 16..64 of a CQE read in place, for the poll loop's fast paths:
/// word 7 (`sop_drop_qpn`, `wqe_counter`, `op_own`), which every CQE kind
/// needs, is loaded once here; the others when a field asks for them (a
/// requester completion needs word 4, `srqn_uidx`, with CQE v1 and word 5,
/// `byte_cnt`, for an RDMA read; a receive words 2 to 5). Words are 8
/// bytes, native byte order, numbered from the CQE's start. Its fields are
/// [`CqeView`]'s, as for [`Cqe64`]; the golden test checks both against
/// mlx5dv.h.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CqeTail<F> {
    w7: u64,
    word: F,
}

impl<F: Fn(usize) -> u64> CqeTail<F> {
    /// The tail of the CQE whose words `word` reads.
    #[inline(always)]
    pub(crate) fn new(word: F) -> Self {
        CqeTail { w7: word(7), word }
    }
}

/// The tail of a whole CQE (tests).
#[cfg(test)]
pub(crate) fn tail_of(cqe: &Cqe64) -> CqeTail<impl Fn(usize) -> u64 + '_> {
    CqeTail::new(|i| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&cqe.0[8 * i..8 * i + 8]);
        u64::from_ne_bytes(b)
    })
}

impl<F: Fn(usize) -> u64> CqeView for CqeTail<F> {
    #[inline(always)]
    fn be32(&self, at: usize) -> u32 {
        let i = at / 8 % 8;
        let w = if i == 7 { self.w7 } else { (self.word)(i) }.to_ne_bytes();
        let o = at % 8;
        u32::from_be_bytes([w[o], w[o + 1], w[o + 2], w[o + 3]])
    }
}

pub(crate) fn status_of_syndrome(s: u8) -> WcStatus {
    match s {
        syndrome::LOCAL_LENGTH_ERR => WcStatus::LOC_LEN_ERR,
        syndrome::LOCAL_QP_OP_ERR => WcStatus::LOC_QP_OP_ERR,
        syndrome::LOCAL_PROT_ERR => WcStatus::LOC_PROT_ERR,
        syndrome::WR_FLUSH_ERR => WcStatus::WR_FLUSH_ERR,
        syndrome::MW_BIND_ERR => WcStatus::MW_BIND_ERR,
        syndrome::BAD_RESP_ERR => WcStatus::BAD_RESP_ERR,
        syndrome::LOCAL_ACCESS_ERR => WcStatus::LOC_ACCESS_ERR,
        syndrome::REMOTE_INVAL_REQ_ERR => WcStatus::REM_INV_REQ_ERR,
        syndrome::REMOTE_ACCESS_ERR => WcStatus::REM_ACCESS_ERR,
        syndrome::REMOTE_OP_ERR => WcStatus::REM_OP_ERR,
        syndrome::TRANSPORT_RETRY_EXC_ERR => WcStatus::RETRY_EXC_ERR,
        syndrome::RNR_RETRY_EXC_ERR => WcStatus::RNR_RETRY_EXC_ERR,
        syndrome::REMOTE_ABORTED_ERR => WcStatus::REM_ABORT_ERR,
        _ => WcStatus::GENERAL_ERR,
    }
}
