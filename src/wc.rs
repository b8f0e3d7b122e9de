//! Work completions (`struct ibv_wc`).
//!
//! Kernel- and device-written values stay integers in the completion and are
//! interpreted through small newtypes, so a status or opcode this crate does
//! not know is kept, not dropped.

use std::fmt;

use bitflags::bitflags;

/// Completion status (`enum ibv_wc_status`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WcStatus(pub u32);

impl WcStatus {
    /// The operation succeeded.
    pub const SUCCESS: Self = Self(0);
    /// Local length error (e.g. a receive buffer too small).
    pub const LOC_LEN_ERR: Self = Self(1);
    /// Local QP operation error.
    pub const LOC_QP_OP_ERR: Self = Self(2);
    /// Local EE context operation error.
    pub const LOC_EEC_OP_ERR: Self = Self(3);
    /// Local protection error (bad lkey or access).
    pub const LOC_PROT_ERR: Self = Self(4);
    /// Flushed: the QP went to the error state.
    pub const WR_FLUSH_ERR: Self = Self(5);
    /// Memory window bind error.
    pub const MW_BIND_ERR: Self = Self(6);
    /// Bad response.
    pub const BAD_RESP_ERR: Self = Self(7);
    /// Local access error.
    pub const LOC_ACCESS_ERR: Self = Self(8);
    /// Remote invalid request.
    pub const REM_INV_REQ_ERR: Self = Self(9);
    /// Remote access error (bad rkey or rights).
    pub const REM_ACCESS_ERR: Self = Self(10);
    /// Remote operation error.
    pub const REM_OP_ERR: Self = Self(11);
    /// Transport retry counter exceeded.
    pub const RETRY_EXC_ERR: Self = Self(12);
    /// RNR retry counter exceeded (no receive posted at the peer).
    pub const RNR_RETRY_EXC_ERR: Self = Self(13);
    /// Local RDD violation.
    pub const LOC_RDD_VIOL_ERR: Self = Self(14);
    /// Remote invalid RD request.
    pub const REM_INV_RD_REQ_ERR: Self = Self(15);
    /// Remote aborted.
    pub const REM_ABORT_ERR: Self = Self(16);
    /// Invalid EE context number.
    pub const INV_EECN_ERR: Self = Self(17);
    /// Invalid EE context state.
    pub const INV_EEC_STATE_ERR: Self = Self(18);
    /// Fatal error.
    pub const FATAL_ERR: Self = Self(19);
    /// Response timeout.
    pub const RESP_TIMEOUT_ERR: Self = Self(20);
    /// General error.
    pub const GENERAL_ERR: Self = Self(21);

    /// Whether the status is `SUCCESS`.
    pub fn is_success(self) -> bool {
        self == Self::SUCCESS
    }

    /// The name `ibv_wc_status_str` gives it.
    #[doc(alias = "ibv_wc_status_str")]
    pub fn as_str(self) -> &'static str {
        const NAMES: [&str; 22] = [
            "success",
            "local length error",
            "local QP operation error",
            "local EE context operation error",
            "local protection error",
            "Work Request Flushed Error",
            "memory management operation error",
            "bad response error",
            "local access error",
            "remote invalid request error",
            "remote access error",
            "remote operation error",
            "transport retry counter exceeded",
            "RNR retry counter exceeded",
            "local RDD violation error",
            "remote invalid RD request",
            "operation aborted",
            "invalid EE context number",
            "invalid EE context state",
            "fatal error",
            "response timeout error",
            "general error",
        ];
        NAMES.get(self.0 as usize).copied().unwrap_or("unknown")
    }
}

impl fmt::Debug for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WcStatus({} {:?})", self.0, self.as_str())
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.as_str(), self.0)
    }
}

/// Completion opcode (`enum ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WcOpcode(pub u32);

impl WcOpcode {
    /// A send completed.
    pub const SEND: Self = Self(0);
    /// An RDMA write completed.
    pub const RDMA_WRITE: Self = Self(1);
    /// An RDMA read completed.
    pub const RDMA_READ: Self = Self(2);
    /// A compare-and-swap completed.
    pub const COMP_SWAP: Self = Self(3);
    /// A fetch-and-add completed.
    pub const FETCH_ADD: Self = Self(4);
    /// A memory window bind completed.
    pub const BIND_MW: Self = Self(5);
    /// A local invalidate completed.
    pub const LOCAL_INV: Self = Self(6);
    /// A receive completed.
    pub const RECV: Self = Self(128);
    /// A receive consumed by an RDMA write with immediate.
    pub const RECV_RDMA_WITH_IMM: Self = Self(129);

    /// Whether this is a receive-side completion.
    pub fn is_recv(self) -> bool {
        self.0 & 128 != 0
    }
}

bitflags! {
    /// Completion flags as the kernel writes them (`enum ib_wc_flags`): note
    /// that `WITH_INVALIDATE` and `IP_CSUM_OK` differ from libibverbs'
    /// `ibv_wc_flags` numbering.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct WcFlags: u32 {
        /// A GRH is present in the first 40 bytes of the receive buffer (UD):
        /// `IBV_WC_GRH`.
        #[doc(alias = "IBV_WC_GRH")]
        const GRH = 1;
        /// `imm_data` is valid: `IBV_WC_WITH_IMM`.
        #[doc(alias = "IBV_WC_WITH_IMM")]
        const WITH_IMM = 2;
        /// `invalidated_rkey` is valid: `IBV_WC_WITH_INV` (which is 8 in
        /// libibverbs' numbering).
        #[doc(alias = "IBV_WC_WITH_INV")]
        const WITH_INVALIDATE = 4;
        /// The IP checksum was verified: `IBV_WC_IP_CSUM_OK` (which is 4 in
        /// libibverbs' numbering).
        #[doc(alias = "IBV_WC_IP_CSUM_OK")]
        const IP_CSUM_OK = 8;
        const _ = !0;
    }
}

/// A work completion (`struct ibv_wc`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The `wr_id` of the work request.
    pub wr_id: u64,
    /// Status; the other fields except `wr_id`, `qp_num` and `opcode` are
    /// valid only on success.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Vendor-specific error syndrome.
    pub vendor_err: u32,
    /// Bytes received (receives), or transferred for reads and atomics.
    pub byte_len: u32,
    /// Immediate data in host order (with `WITH_IMM`), or the invalidated rkey.
    pub imm_data: u32,
    /// The local QP number.
    pub qp_num: u32,
    /// The remote QP number (UD receives).
    pub src_qp: u32,
    /// Flags.
    pub wc_flags: WcFlags,
    /// P_Key index (GSI QPs).
    pub pkey_index: u16,
    /// Source LID (UD receives on InfiniBand).
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// DLID path bits.
    pub dlid_path_bits: u8,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_survive() {
        assert_eq!(WcStatus(99).as_str(), "unknown");
        assert_eq!(
            WcStatus::REM_ACCESS_ERR.to_string(),
            "remote access error (10)"
        );
        assert_eq!(WcFlags::from_bits_retain(0x100).bits(), 0x100);
        assert!(WcOpcode::RECV_RDMA_WITH_IMM.is_recv());
        assert!(!WcOpcode::RDMA_READ.is_recv());
    }
}
