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
    /// The operation succeeded (`IBV_WC_SUCCESS`).
    #[doc(alias = "IBV_WC_SUCCESS")]
    pub const SUCCESS: Self = Self(0);
    /// Local length error (e.g. a receive buffer too small) (`IBV_WC_LOC_LEN_ERR`).
    #[doc(alias = "IBV_WC_LOC_LEN_ERR")]
    pub const LOC_LEN_ERR: Self = Self(1);
    /// Local QP operation error (`IBV_WC_LOC_QP_OP_ERR`).
    #[doc(alias = "IBV_WC_LOC_QP_OP_ERR")]
    pub const LOC_QP_OP_ERR: Self = Self(2);
    /// Local EE context operation error (`IBV_WC_LOC_EEC_OP_ERR`).
    #[doc(alias = "IBV_WC_LOC_EEC_OP_ERR")]
    pub const LOC_EEC_OP_ERR: Self = Self(3);
    /// Local protection error (bad lkey or access) (`IBV_WC_LOC_PROT_ERR`).
    #[doc(alias = "IBV_WC_LOC_PROT_ERR")]
    pub const LOC_PROT_ERR: Self = Self(4);
    /// Flushed: the QP went to the error state (`IBV_WC_WR_FLUSH_ERR`).
    #[doc(alias = "IBV_WC_WR_FLUSH_ERR")]
    pub const WR_FLUSH_ERR: Self = Self(5);
    /// Memory window bind error (`IBV_WC_MW_BIND_ERR`).
    #[doc(alias = "IBV_WC_MW_BIND_ERR")]
    pub const MW_BIND_ERR: Self = Self(6);
    /// Bad response (`IBV_WC_BAD_RESP_ERR`).
    #[doc(alias = "IBV_WC_BAD_RESP_ERR")]
    pub const BAD_RESP_ERR: Self = Self(7);
    /// Local access error (`IBV_WC_LOC_ACCESS_ERR`).
    #[doc(alias = "IBV_WC_LOC_ACCESS_ERR")]
    pub const LOC_ACCESS_ERR: Self = Self(8);
    /// Remote invalid request (`IBV_WC_REM_INV_REQ_ERR`).
    #[doc(alias = "IBV_WC_REM_INV_REQ_ERR")]
    pub const REM_INV_REQ_ERR: Self = Self(9);
    /// Remote access error (bad rkey or rights) (`IBV_WC_REM_ACCESS_ERR`).
    #[doc(alias = "IBV_WC_REM_ACCESS_ERR")]
    pub const REM_ACCESS_ERR: Self = Self(10);
    /// Remote operation error (`IBV_WC_REM_OP_ERR`).
    #[doc(alias = "IBV_WC_REM_OP_ERR")]
    pub const REM_OP_ERR: Self = Self(11);
    /// Transport retry counter exceeded (`IBV_WC_RETRY_EXC_ERR`).
    #[doc(alias = "IBV_WC_RETRY_EXC_ERR")]
    pub const RETRY_EXC_ERR: Self = Self(12);
    /// RNR retry counter exceeded (no receive posted at the peer) (`IBV_WC_RNR_RETRY_EXC_ERR`).
    #[doc(alias = "IBV_WC_RNR_RETRY_EXC_ERR")]
    pub const RNR_RETRY_EXC_ERR: Self = Self(13);
    /// Local RDD violation (`IBV_WC_LOC_RDD_VIOL_ERR`).
    #[doc(alias = "IBV_WC_LOC_RDD_VIOL_ERR")]
    pub const LOC_RDD_VIOL_ERR: Self = Self(14);
    /// Remote invalid RD request (`IBV_WC_REM_INV_RD_REQ_ERR`).
    #[doc(alias = "IBV_WC_REM_INV_RD_REQ_ERR")]
    pub const REM_INV_RD_REQ_ERR: Self = Self(15);
    /// Remote aborted (`IBV_WC_REM_ABORT_ERR`).
    #[doc(alias = "IBV_WC_REM_ABORT_ERR")]
    pub const REM_ABORT_ERR: Self = Self(16);
    /// Invalid EE context number (`IBV_WC_INV_EECN_ERR`).
    #[doc(alias = "IBV_WC_INV_EECN_ERR")]
    pub const INV_EECN_ERR: Self = Self(17);
    /// Invalid EE context state (`IBV_WC_INV_EEC_STATE_ERR`).
    #[doc(alias = "IBV_WC_INV_EEC_STATE_ERR")]
    pub const INV_EEC_STATE_ERR: Self = Self(18);
    /// Fatal error (`IBV_WC_FATAL_ERR`).
    #[doc(alias = "IBV_WC_FATAL_ERR")]
    pub const FATAL_ERR: Self = Self(19);
    /// Response timeout (`IBV_WC_RESP_TIMEOUT_ERR`).
    #[doc(alias = "IBV_WC_RESP_TIMEOUT_ERR")]
    pub const RESP_TIMEOUT_ERR: Self = Self(20);
    /// General error (`IBV_WC_GENERAL_ERR`).
    #[doc(alias = "IBV_WC_GENERAL_ERR")]
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
    /// A send completed (`IBV_WC_SEND`).
    #[doc(alias = "IBV_WC_SEND")]
    pub const SEND: Self = Self(0);
    /// An RDMA write completed (`IBV_WC_RDMA_WRITE`).
    #[doc(alias = "IBV_WC_RDMA_WRITE")]
    pub const RDMA_WRITE: Self = Self(1);
    /// An RDMA read completed (`IBV_WC_RDMA_READ`).
    #[doc(alias = "IBV_WC_RDMA_READ")]
    pub const RDMA_READ: Self = Self(2);
    /// A compare-and-swap completed (`IBV_WC_COMP_SWAP`).
    #[doc(alias = "IBV_WC_COMP_SWAP")]
    pub const COMP_SWAP: Self = Self(3);
    /// A fetch-and-add completed (`IBV_WC_FETCH_ADD`).
    #[doc(alias = "IBV_WC_FETCH_ADD")]
    pub const FETCH_ADD: Self = Self(4);
    /// A memory window bind completed (`IBV_WC_BIND_MW`).
    #[doc(alias = "IBV_WC_BIND_MW")]
    pub const BIND_MW: Self = Self(5);
    /// A local invalidate completed (`IBV_WC_LOCAL_INV`).
    #[doc(alias = "IBV_WC_LOCAL_INV")]
    pub const LOCAL_INV: Self = Self(6);
    /// An atomic write completed (`IB_UVERBS_WC_ATOMIC_WRITE`, Linux 6.2's
    /// ib_user_verbs.h; `IBV_WC_ATOMIC_WRITE` in rdma-core's verbs.h).
    #[doc(alias = "IBV_WC_ATOMIC_WRITE")]
    pub const ATOMIC_WRITE: Self = Self(9);
    /// A receive completed (`IBV_WC_RECV`).
    #[doc(alias = "IBV_WC_RECV")]
    pub const RECV: Self = Self(128);
    /// A receive consumed by an RDMA write with immediate (`IBV_WC_RECV_RDMA_WITH_IMM`).
    #[doc(alias = "IBV_WC_RECV_RDMA_WITH_IMM")]
    pub const RECV_RDMA_WITH_IMM: Self = Self(129);
    /// A WQE the program wrote itself completed (mlx5's raw WQEs,
    /// `mlx5dv_wr_raw_wqe`: `IBV_WC_DRIVER2`, alias `MLX5DV_WC_RAW_WQE`).
    /// Its value has the receive bit set, as in libibverbs: test it before
    /// [`WcOpcode::is_recv`].
    #[doc(alias = "IBV_WC_DRIVER2")]
    #[doc(alias = "MLX5DV_WC_RAW_WQE")]
    pub const DRIVER2: Self = Self(136);

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

/// How `struct ibv_wc`'s `wc_flags` are numbered by rdma-core's provider for
/// a device ([`Context::wc_flags_numbering`](crate::Context::wc_flags_numbering)):
/// the one place the C ABI's completion flags differ by provider, given as
/// data so that a C library over this crate reports them as the provider
/// it replaces does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcFlagsNumbering {
    /// The kernel's `enum ib_wc_flags`, as the device wrote them ([`WcFlags`]
    /// as it is): rdma-core 44's rxe copies the kernel's completion into
    /// `struct ibv_wc` (`providers/rxe/rxe.c`, `rxe_poll_cq`, and
    /// `cq_read_wc_flags` returning `wc->wc_flags`).
    Kernel,
    /// libibverbs' `enum ibv_wc_flags` (`verbs.h`): `IBV_WC_IP_CSUM_OK` is bit
    /// 2 and `IBV_WC_WITH_INV` bit 3, where the kernel has them the other way
    /// round; libmlx5 builds its flags in this numbering from the CQE.
    Verbs,
}

impl WcFlagsNumbering {
    /// `flags` (the kernel's numbering) as this numbering gives them.
    pub fn encode(self, flags: WcFlags) -> u32 {
        let k = flags.bits();
        match self {
            WcFlagsNumbering::Kernel => k,
            WcFlagsNumbering::Verbs => {
                let swapped = WcFlags::WITH_INVALIDATE.bits() | WcFlags::IP_CSUM_OK.bits();
                let inv = u32::from(flags.contains(WcFlags::WITH_INVALIDATE)) << 3;
                let csum = u32::from(flags.contains(WcFlags::IP_CSUM_OK)) << 2;
                (k & !swapped) | inv | csum
            }
        }
    }
}

bitflags! {
    /// The completion fields an extended CQ reports (`enum
    /// ibv_create_cq_wc_flags`, the `IBV_WC_EX_WITH_*` bits of `struct
    /// ibv_cq_init_attr_ex`'s `wc_flags`), chosen when the CQ is created
    /// ([`CqOptions::wc_flags`](crate::CqOptions::wc_flags)) and read in a
    /// [`CqPoll`](crate::CqPoll) session.
    ///
    /// The default is [`WcExFlags::STANDARD`] (`IBV_WC_STANDARD_FLAGS`):
    /// every field of `struct ibv_wc`. uverbs decodes those fields for every
    /// completion whatever was chosen, so the standard bits only say what
    /// the program means to read (libibverbs leaves a field not chosen
    /// undefined; here its accessor returns it anyway). What the bits
    /// change:
    ///
    /// | flag | rxe | mlx5 |
    /// |---|---|---|
    /// | the standard seven | yes | yes |
    /// | `COMPLETION_TIMESTAMP` | refused: rxe has no completion clock (rdma-core's `rxe_create_cq_ex` answers `EOPNOTSUPP`) | the CQE's timestamp, raw device ticks ([`CqPoll::completion_ts`](crate::CqPoll::completion_ts)) |
    /// | `COMPLETION_TIMESTAMP_WALLCLOCK` | refused, as above | the CQE's timestamp converted to the kernel's real time, ns ([`CqPoll::completion_wallclock_ns`](crate::CqPoll::completion_wallclock_ns)) with the kernel's clock info page (`mlx5dv_ts_to_ns`); refused when the kernel maps none |
    /// | `CVLAN`, `FLOW_TAG`, `TM_INFO` | refused (rxe refuses them) | refused: uverbs does not decode them |
    ///
    /// A refused flag fails [`Context::create_cq`](crate::Context::create_cq)
    /// with [`ErrorKind::UnsupportedProvider`](crate::ErrorKind::UnsupportedProvider)
    /// (`EOPNOTSUPP`, as rdma-core), a bit libibverbs does not define with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    #[doc(alias = "ibv_create_cq_wc_flags")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct WcExFlags: u64 {
        /// `IBV_WC_EX_WITH_BYTE_LEN`: [`CqPoll::byte_len`](crate::CqPoll::byte_len).
        #[doc(alias = "IBV_WC_EX_WITH_BYTE_LEN")]
        const BYTE_LEN = 1 << 0;
        /// `IBV_WC_EX_WITH_IMM`: [`CqPoll::imm_data`](crate::CqPoll::imm_data)
        /// (and [`CqPoll::invalidated_rkey`](crate::CqPoll::invalidated_rkey)).
        #[doc(alias = "IBV_WC_EX_WITH_IMM")]
        const IMM = 1 << 1;
        /// `IBV_WC_EX_WITH_QP_NUM`: [`CqPoll::qp_num`](crate::CqPoll::qp_num).
        #[doc(alias = "IBV_WC_EX_WITH_QP_NUM")]
        const QP_NUM = 1 << 2;
        /// `IBV_WC_EX_WITH_SRC_QP`: [`CqPoll::src_qp`](crate::CqPoll::src_qp).
        #[doc(alias = "IBV_WC_EX_WITH_SRC_QP")]
        const SRC_QP = 1 << 3;
        /// `IBV_WC_EX_WITH_SLID`: [`CqPoll::slid`](crate::CqPoll::slid).
        #[doc(alias = "IBV_WC_EX_WITH_SLID")]
        const SLID = 1 << 4;
        /// `IBV_WC_EX_WITH_SL`: [`CqPoll::sl`](crate::CqPoll::sl).
        #[doc(alias = "IBV_WC_EX_WITH_SL")]
        const SL = 1 << 5;
        /// `IBV_WC_EX_WITH_DLID_PATH_BITS`:
        /// [`CqPoll::dlid_path_bits`](crate::CqPoll::dlid_path_bits).
        #[doc(alias = "IBV_WC_EX_WITH_DLID_PATH_BITS")]
        const DLID_PATH_BITS = 1 << 6;
        /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`: the device's timestamp of
        /// each completion, in its own clock's ticks
        /// ([`CqPoll::completion_ts`](crate::CqPoll::completion_ts)); mlx5 only.
        #[doc(alias = "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP")]
        const COMPLETION_TIMESTAMP = 1 << 7;
        /// `IBV_WC_EX_WITH_CVLAN` (not supported).
        #[doc(alias = "IBV_WC_EX_WITH_CVLAN")]
        const CVLAN = 1 << 8;
        /// `IBV_WC_EX_WITH_FLOW_TAG` (not supported).
        #[doc(alias = "IBV_WC_EX_WITH_FLOW_TAG")]
        const FLOW_TAG = 1 << 9;
        /// `IBV_WC_EX_WITH_TM_INFO` (not supported).
        #[doc(alias = "IBV_WC_EX_WITH_TM_INFO")]
        const TM_INFO = 1 << 10;
        /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK`: each completion's
        /// device timestamp in nanoseconds of the kernel's real-time clock
        /// ([`CqPoll::completion_wallclock_ns`](crate::CqPoll::completion_wallclock_ns));
        /// mlx5 with the kernel's clock info page only (see the table above).
        #[doc(alias = "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK")]
        const COMPLETION_TIMESTAMP_WALLCLOCK = 1 << 11;
        /// `IBV_WC_STANDARD_FLAGS`: the seven fields of `struct ibv_wc` above
        /// (the default).
        #[doc(alias = "IBV_WC_STANDARD_FLAGS")]
        const STANDARD = Self::BYTE_LEN.bits()
            | Self::IMM.bits()
            | Self::QP_NUM.bits()
            | Self::SRC_QP.bits()
            | Self::SLID.bits()
            | Self::SL.bits()
            | Self::DLID_PATH_BITS.bits();
        const _ = !0;
    }
}

impl Default for WcExFlags {
    /// [`WcExFlags::STANDARD`], as `ibv_create_cq` reports.
    fn default() -> Self {
        WcExFlags::STANDARD
    }
}

impl WcExFlags {
    /// Every bit libibverbs defines (`IBV_CREATE_CQ_SUP_WC_FLAGS`).
    pub(crate) const KNOWN: Self = Self::from_bits_retain((1 << 12) - 1);
    /// Either timestamp: the CQ is created with the kernel's
    /// `IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION` (libibverbs
    /// `ibv_cmd_create_cq_ex`).
    pub(crate) const TIMESTAMPS: Self = Self::from_bits_retain(
        Self::COMPLETION_TIMESTAMP.bits() | Self::COMPLETION_TIMESTAMP_WALLCLOCK.bits(),
    );
}

/// A work completion (`struct ibv_wc`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
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

    /// Each flag in libibverbs' numbering, against rdma-core 44's verbs.h
    /// (`enum ibv_wc_flags`: `IBV_WC_GRH = 1 << 0`, `IBV_WC_WITH_IMM = 1 <<
    /// 1`, `IBV_WC_IP_CSUM_OK = 1 << IBV_WC_IP_CSUM_OK_SHIFT` (2),
    /// `IBV_WC_WITH_INV = 1 << 3`), and the kernel's kept as it is
    /// (`enum ib_wc_flags` of Linux' ib_verbs.h: `IB_WC_WITH_INVALIDATE = 1 <<
    /// 2`, `IB_WC_IP_CSUM_OK = 1 << 3`); bits neither names pass through.
    #[test]
    fn wc_flags_numberings() {
        let cases = [
            (WcFlags::GRH, 1, 1),
            (WcFlags::WITH_IMM, 1 << 1, 1 << 1),
            (WcFlags::IP_CSUM_OK, 1 << 2, 1 << 3),
            (WcFlags::WITH_INVALIDATE, 1 << 3, 1 << 2),
            (WcFlags::from_bits_retain(1 << 6), 1 << 6, 1 << 6),
        ];
        for (flag, verbs, kernel) in cases {
            assert_eq!(WcFlagsNumbering::Verbs.encode(flag), verbs, "{flag:?}");
            assert_eq!(WcFlagsNumbering::Kernel.encode(flag), kernel, "{flag:?}");
        }
        let all = WcFlags::GRH | WcFlags::WITH_IMM | WcFlags::WITH_INVALIDATE | WcFlags::IP_CSUM_OK;
        assert_eq!(WcFlagsNumbering::Verbs.encode(all), 0b1111);
        assert_eq!(
            WcFlagsNumbering::Verbs.encode(WcFlags::WITH_IMM | WcFlags::WITH_INVALIDATE),
            (1 << 1) | (1 << 3)
        );
    }
}
