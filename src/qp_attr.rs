//! Typed QP attributes: what `ibv_modify_qp` takes and `ibv_query_qp` returns
//! (`struct ibv_qp_attr`, `enum ibv_qp_attr_mask`, `struct ibv_ah_attr`,
//! `struct ibv_global_route`), and (in `codec`) their encoding into the
//! uverbs `write()` ABI (`ib_uverbs_modify_qp`, `ib_uverbs_ex_modify_qp`,
//! `ib_uverbs_query_qp_resp`).
//!
//! Field names follow libibverbs so code written for rdma-core carries over.
//! Values the kernel may extend (states, QP types, migration states) are enums
//! with an `Other` variant, so nothing the kernel reports is lost.
//!
//! The kernel carries an address vector in two layouts with the same fields in
//! different orders: `ib_uverbs_ah_attr` (CREATE_AH, rdma_cm's INIT_QP_ATTR)
//! and `ib_uverbs_qp_dest` (MODIFY_QP, QUERY_QP). [`AhAttr`] converts to and
//! from both explicitly.

use std::fmt;

use bitflags::bitflags;

use crate::{abi, AccessFlags, Gid, Mtu};

/// A QP transport type (`enum ibv_qp_type`, the kernel's `IB_UVERBS_QPT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected (`IBV_QPT_RC`, 2).
    Rc,
    /// Unreliable connected (`IBV_QPT_UC`, 3).
    Uc,
    /// Unreliable datagram (`IBV_QPT_UD`, 4).
    Ud,
    /// Raw Ethernet packets (`IBV_QPT_RAW_PACKET`, 8).
    RawPacket,
    /// XRC initiator (`IBV_QPT_XRC_SEND`, 9).
    XrcIni,
    /// XRC target (`IBV_QPT_XRC_RECV`, 10).
    XrcTgt,
    /// A driver-specific type (`IBV_QPT_DRIVER`, 0xFF), e.g. mlx5 DCI/DCT.
    Driver,
    /// A value this crate does not know.
    Other(u8),
}

impl QpType {
    /// The kernel's value (`IB_UVERBS_QPT_*`).
    pub fn raw(self) -> u8 {
        match self {
            QpType::Rc => 2,
            QpType::Uc => 3,
            QpType::Ud => 4,
            QpType::RawPacket => 8,
            QpType::XrcIni => 9,
            QpType::XrcTgt => 10,
            QpType::Driver => 0xFF,
            QpType::Other(v) => v,
        }
    }

    /// From the kernel's value.
    pub fn from_raw(v: u8) -> Self {
        match v {
            2 => QpType::Rc,
            3 => QpType::Uc,
            4 => QpType::Ud,
            8 => QpType::RawPacket,
            9 => QpType::XrcIni,
            10 => QpType::XrcTgt,
            0xFF => QpType::Driver,
            other => QpType::Other(other),
        }
    }
}

impl fmt::Display for QpType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QpType::Rc => f.write_str("RC"),
            QpType::Uc => f.write_str("UC"),
            QpType::Ud => f.write_str("UD"),
            QpType::RawPacket => f.write_str("RAW_PACKET"),
            QpType::XrcIni => f.write_str("XRC_INI"),
            QpType::XrcTgt => f.write_str("XRC_TGT"),
            QpType::Driver => f.write_str("DRIVER"),
            QpType::Other(v) => write!(f, "type {v}"),
        }
    }
}

/// A QP state (`enum ibv_qp_state`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum QpState {
    /// `IBV_QPS_RESET` (0): the state after creation.
    #[default]
    Reset,
    /// `IBV_QPS_INIT` (1): receives may be posted.
    Init,
    /// `IBV_QPS_RTR` (2): ready to receive.
    Rtr,
    /// `IBV_QPS_RTS` (3): ready to send.
    Rts,
    /// `IBV_QPS_SQD` (4): send queue drained.
    Sqd,
    /// `IBV_QPS_SQE` (5): send queue error (UC, UD).
    Sqe,
    /// `IBV_QPS_ERR` (6): error; outstanding requests complete with flush errors.
    Err,
    /// A value this crate does not know (`IBV_QPS_UNKNOWN` is 7).
    Other(u8),
}

impl QpState {
    /// Every state the kernel knows, in numeric order.
    pub const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    /// The kernel's value (`IB_QPS_*`).
    pub fn raw(self) -> u8 {
        match self {
            QpState::Reset => 0,
            QpState::Init => 1,
            QpState::Rtr => 2,
            QpState::Rts => 3,
            QpState::Sqd => 4,
            QpState::Sqe => 5,
            QpState::Err => 6,
            QpState::Other(v) => v,
        }
    }

    /// From the kernel's value.
    #[inline]
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            other => QpState::Other(other),
        }
    }
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QpState::Reset => f.write_str("RESET"),
            QpState::Init => f.write_str("INIT"),
            QpState::Rtr => f.write_str("RTR"),
            QpState::Rts => f.write_str("RTS"),
            QpState::Sqd => f.write_str("SQD"),
            QpState::Sqe => f.write_str("SQE"),
            QpState::Err => f.write_str("ERR"),
            QpState::Other(v) => write!(f, "state {v}"),
        }
    }
}

/// Automatic path migration state (`enum ibv_mig_state`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PathMigState {
    /// `IBV_MIG_MIGRATED` (0).
    #[default]
    Migrated,
    /// `IBV_MIG_REARM` (1).
    Rearm,
    /// `IBV_MIG_ARMED` (2).
    Armed,
    /// A value this crate does not know.
    Other(u8),
}

impl PathMigState {
    /// The kernel's value.
    pub fn raw(self) -> u8 {
        match self {
            PathMigState::Migrated => 0,
            PathMigState::Rearm => 1,
            PathMigState::Armed => 2,
            PathMigState::Other(v) => v,
        }
    }

    /// From the kernel's value.
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => PathMigState::Migrated,
            1 => PathMigState::Rearm,
            2 => PathMigState::Armed,
            other => PathMigState::Other(other),
        }
    }
}

bitflags! {
    /// Which [`QpAttr`] fields a modify (or query) concerns (`enum ibv_qp_attr_mask`).
    ///
    /// Bits 21..=24 are the kernel's reserved (legacy RoCE) bits; the kernel
    /// rejects them, and [`crate::check_modify`] does too.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct QpAttrMask: u32 {
        /// `qp_state`: move the QP to that state.
        const STATE = 1 << 0;
        /// `cur_qp_state`: what the caller asserts the current state is.
        const CUR_STATE = 1 << 1;
        /// `en_sqd_async_notify`.
        const EN_SQD_ASYNC_NOTIFY = 1 << 2;
        /// `qp_access_flags`.
        const ACCESS_FLAGS = 1 << 3;
        /// `pkey_index`.
        const PKEY_INDEX = 1 << 4;
        /// `port_num`.
        const PORT = 1 << 5;
        /// `qkey`.
        const QKEY = 1 << 6;
        /// `ah_attr`: the primary path's address vector.
        const AV = 1 << 7;
        /// `path_mtu`.
        const PATH_MTU = 1 << 8;
        /// `timeout`.
        const TIMEOUT = 1 << 9;
        /// `retry_cnt`.
        const RETRY_CNT = 1 << 10;
        /// `rnr_retry`.
        const RNR_RETRY = 1 << 11;
        /// `rq_psn`.
        const RQ_PSN = 1 << 12;
        /// `max_rd_atomic`.
        const MAX_QP_RD_ATOMIC = 1 << 13;
        /// `alt_ah_attr`, `alt_pkey_index`, `alt_port_num`, `alt_timeout`.
        const ALT_PATH = 1 << 14;
        /// `min_rnr_timer`.
        const MIN_RNR_TIMER = 1 << 15;
        /// `sq_psn`.
        const SQ_PSN = 1 << 16;
        /// `max_dest_rd_atomic`.
        const MAX_DEST_RD_ATOMIC = 1 << 17;
        /// `path_mig_state`.
        const PATH_MIG_STATE = 1 << 18;
        /// `cap` (no transition accepts it; query only).
        const CAP = 1 << 19;
        /// `dest_qp_num`.
        const DEST_QPN = 1 << 20;
        /// `rate_limit` (only through the extended modify command).
        const RATE_LIMIT = 1 << 25;
    }
}

impl QpAttrMask {
    /// The libibverbs names (`IBV_QP_*`) of the set bits, lowest first;
    /// unknown bits appear as hexadecimal values.
    pub fn names(self) -> Vec<String> {
        self.list().map(|n| format!("IBV_QP_{n}")).collect()
    }

    /// The short names (as the constants here are named) of the set bits,
    /// unknown bits as hexadecimal values.
    pub(crate) fn list(self) -> impl Iterator<Item = String> {
        let unknown = self.bits() & !Self::all().bits();
        self.iter_names().map(|(n, _)| n.to_string()).chain(
            (0..32)
                .map(|b| 1u32 << b)
                .filter(move |bit| unknown & bit != 0)
                .map(|bit| format!("{bit:#x}")),
        )
    }

    /// The set bits as `A, B, C` (short names), or `none`.
    pub(crate) fn joined(self) -> String {
        let v: Vec<String> = self.list().collect();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    }

    /// Whether the mask needs the extended modify command
    /// (`IB_USER_VERBS_EX_CMD_MODIFY_QP`): it has `RATE_LIMIT`.
    pub fn needs_ex(self) -> bool {
        self.contains(QpAttrMask::RATE_LIMIT)
    }
}

/// The global routing header of an address vector (`struct ibv_global_route`).
///
/// `GlobalRoute::new(dgid, sgid_index)` and the setters
/// (`.hop_limit(64).traffic_class(0)`); the rest is zero, as `Default`.
#[doc(alias = "ibv_global_route")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct GlobalRoute {
    /// Destination GID (for RoCE, the peer's IP address as a GID).
    pub dgid: Gid,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// Index of the source GID in the port's GID table.
    pub sgid_index: u8,
    /// Hop limit (IPv6) / TTL.
    pub hop_limit: u8,
    /// Traffic class (IPv6) / DSCP+ECN.
    pub traffic_class: u8,
}

/// An address vector: where a QP's packets go (`struct ibv_ah_attr`).
///
/// `AhAttr::new(port_num)` and the setters: `.dlid(lid)` on InfiniBand,
/// `.grh(GlobalRoute::new(dgid, sgid_index))` on RoCE; the rest is zero, as
/// `Default`.
#[doc(alias = "ibv_ah_attr")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct AhAttr {
    /// The global route; `Some` sets `is_global` (required on RoCE ports).
    pub grh: Option<GlobalRoute>,
    /// Destination LID (InfiniBand; 0 on RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits (LMC).
    pub src_path_bits: u8,
    /// Static rate (`enum ibv_rate`, 0 = port's rate).
    pub static_rate: u8,
    /// Local port number (from 1).
    pub port_num: u8,
}

impl GlobalRoute {
    /// A route to `dgid` from the source GID at `sgid_index`; flow label,
    /// hop limit and traffic class zero.
    #[inline]
    pub const fn new(dgid: Gid, sgid_index: u8) -> Self {
        GlobalRoute {
            dgid,
            flow_label: 0,
            sgid_index,
            hop_limit: 0,
            traffic_class: 0,
        }
    }

    crate::setters::setters! {
        /// Sets the destination GID.
        dgid: Gid,
        /// Sets the IPv6 flow label (20 bits).
        flow_label: u32,
        /// Sets the source GID index.
        sgid_index: u8,
        /// Sets the hop limit (IPv6) / TTL.
        hop_limit: u8,
        /// Sets the traffic class (IPv6) / DSCP+ECN.
        traffic_class: u8,
    }
}

impl AhAttr {
    /// An address vector out of local port `port_num` (from 1), with no
    /// global route and everything else zero; add `.dlid(..)` or
    /// `.grh(..)`.
    #[inline]
    pub const fn new(port_num: u8) -> Self {
        AhAttr {
            grh: None,
            dlid: 0,
            sl: 0,
            src_path_bits: 0,
            static_rate: 0,
            port_num,
        }
    }

    /// Sets the global route (`is_global`; required on RoCE ports): a
    /// [`GlobalRoute`], or an `Option` (`None` removes it).
    #[inline]
    #[must_use]
    pub fn grh(mut self, grh: impl Into<Option<GlobalRoute>>) -> Self {
        self.grh = grh.into();
        self
    }

    crate::setters::setters! {
        /// Sets the destination LID (InfiniBand).
        dlid: u16,
        /// Sets the service level.
        sl: u8,
        /// Sets the source path bits.
        src_path_bits: u8,
        /// Sets the static rate (`enum ibv_rate`).
        static_rate: u8,
        /// Sets the local port (from 1).
        port_num: u8,
    }

    /// Whether the address vector has a global route (`is_global`).
    pub fn is_global(&self) -> bool {
        self.grh.is_some()
    }

    /// As `ib_uverbs_ah_attr` (CREATE_AH, rdma_cm). Without a GRH the GRH
    /// fields are zero.
    pub(crate) fn to_abi(self) -> abi::IbUverbsAhAttr {
        let g = self.grh.unwrap_or_default();
        abi::IbUverbsAhAttr {
            grh: abi::IbUverbsGlobalRoute {
                dgid: g.dgid.0,
                flow_label: g.flow_label,
                sgid_index: g.sgid_index,
                hop_limit: g.hop_limit,
                traffic_class: g.traffic_class,
                reserved: 0,
            },
            dlid: self.dlid,
            sl: self.sl,
            src_path_bits: self.src_path_bits,
            static_rate: self.static_rate,
            is_global: u8::from(self.grh.is_some()),
            port_num: self.port_num,
            reserved: 0,
        }
    }

    /// From `ib_uverbs_ah_attr`; the GRH fields count only when `is_global`.
    #[allow(dead_code)] // for rdma_cm (INIT_QP_ATTR) and AH queries
    pub(crate) fn from_abi(a: &abi::IbUverbsAhAttr) -> Self {
        AhAttr {
            grh: (a.is_global != 0).then_some(GlobalRoute {
                dgid: Gid(a.grh.dgid),
                flow_label: a.grh.flow_label,
                sgid_index: a.grh.sgid_index,
                hop_limit: a.grh.hop_limit,
                traffic_class: a.grh.traffic_class,
            }),
            dlid: a.dlid,
            sl: a.sl,
            src_path_bits: a.src_path_bits,
            static_rate: a.static_rate,
            port_num: a.port_num,
        }
    }

    /// As `ib_uverbs_qp_dest` (MODIFY_QP). Without a GRH the GRH fields are zero.
    pub(crate) fn to_qp_dest(self) -> abi::IbUverbsQpDest {
        let g = self.grh.unwrap_or_default();
        abi::IbUverbsQpDest {
            dgid: g.dgid.0,
            flow_label: g.flow_label,
            dlid: self.dlid,
            reserved: 0,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
            sl: self.sl,
            src_path_bits: self.src_path_bits,
            static_rate: self.static_rate,
            is_global: u8::from(self.grh.is_some()),
            port_num: self.port_num,
        }
    }

    /// From `ib_uverbs_qp_dest` (QUERY_QP); the GRH fields count only when
    /// `is_global` (the kernel fills them only then).
    pub(crate) fn from_qp_dest(d: &abi::IbUverbsQpDest) -> Self {
        AhAttr {
            grh: (d.is_global != 0).then_some(GlobalRoute {
                dgid: Gid(d.dgid),
                flow_label: d.flow_label,
                sgid_index: d.sgid_index,
                hop_limit: d.hop_limit,
                traffic_class: d.traffic_class,
            }),
            dlid: d.dlid,
            sl: d.sl,
            src_path_bits: d.src_path_bits,
            static_rate: d.static_rate,
            port_num: d.port_num,
        }
    }
}

/// Queue sizes of a QP (`struct ibv_qp_cap`).
///
/// `QpCap::new(max_send_wr, max_recv_wr, max_send_sge, max_recv_sge)`, and
/// `.max_inline_data(n)` for inline sends.
#[doc(alias = "ibv_qp_cap")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct QpCap {
    /// Send queue depth (work requests).
    pub max_send_wr: u32,
    /// Receive queue depth (work requests).
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send work request.
    pub max_inline_data: u32,
}

/// QP attributes (`struct ibv_qp_attr`), as far as the uverbs modify and
/// query commands carry them. Which fields a modify uses is said by a
/// [`QpAttrMask`]; [`crate::required_attrs`] lists what each transition needs.
///
/// Built with [`QpAttr::new`] (or [`QpAttr::with_state`]) and one setter per
/// field: `QpAttr::new().qp_state(QpState::Init).port_num(1)`.
///
/// `Default` is all zeros: state RESET, MTU 0 (invalid: set `path_mtu`
/// whenever `PATH_MTU` is in the mask).
#[doc(alias = "ibv_qp_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QpAttr {
    /// Next state (`STATE`); in a query, the current state.
    pub qp_state: QpState,
    /// Asserted current state (`CUR_STATE`); in a query, the current state.
    pub cur_qp_state: QpState,
    /// Path MTU (`PATH_MTU`), at most the port's active MTU.
    pub path_mtu: Mtu,
    /// Path migration state (`PATH_MIG_STATE`).
    pub path_mig_state: PathMigState,
    /// Q_Key (`QKEY`, UD). Values with the high bit set are privileged.
    pub qkey: u32,
    /// Receive queue start PSN (`RQ_PSN`, 24 bits).
    pub rq_psn: u32,
    /// Send queue start PSN (`SQ_PSN`, 24 bits).
    pub sq_psn: u32,
    /// Remote QP number (`DEST_QPN`, connected QPs).
    pub dest_qp_num: u32,
    /// What remote peers may do (`ACCESS_FLAGS`): `REMOTE_WRITE`,
    /// `REMOTE_READ`, `REMOTE_ATOMIC`.
    pub qp_access_flags: AccessFlags,
    /// Queue sizes (query only: `CAP` is accepted by no transition).
    pub cap: QpCap,
    /// Primary path (`AV`).
    pub ah_attr: AhAttr,
    /// Alternate path (`ALT_PATH`, with `alt_pkey_index`, `alt_port_num`, `alt_timeout`).
    pub alt_ah_attr: AhAttr,
    /// P_Key table index (`PKEY_INDEX`).
    pub pkey_index: u16,
    /// Alternate path P_Key index (`ALT_PATH`).
    pub alt_pkey_index: u16,
    /// Ask for the SQ-drained async event (`EN_SQD_ASYNC_NOTIFY`, RTS→SQD).
    pub en_sqd_async_notify: bool,
    /// Query only: whether the send queue is still draining (in SQD).
    pub sq_draining: bool,
    /// Outstanding RDMA reads/atomics as initiator (`MAX_QP_RD_ATOMIC`).
    pub max_rd_atomic: u8,
    /// Outstanding RDMA reads/atomics as responder (`MAX_DEST_RD_ATOMIC`).
    pub max_dest_rd_atomic: u8,
    /// Minimum RNR NAK timer (`MIN_RNR_TIMER`, encoded 0..=31).
    pub min_rnr_timer: u8,
    /// Local port (`PORT`), from 1.
    pub port_num: u8,
    /// Local ACK timeout (`TIMEOUT`, 4.096 µs × 2^timeout; 0 = infinite).
    pub timeout: u8,
    /// Retries on timeout (`RETRY_CNT`, 0..=7).
    pub retry_cnt: u8,
    /// Retries on RNR NAK (`RNR_RETRY`, 0..=7; 7 = infinite).
    pub rnr_retry: u8,
    /// Alternate path port (`ALT_PATH`); must equal `alt_ah_attr.port_num`.
    pub alt_port_num: u8,
    /// Alternate path ACK timeout (`ALT_PATH`).
    pub alt_timeout: u8,
    /// Packet pacing rate in kbps (`RATE_LIMIT`, raw packet QPs; extended command).
    pub rate_limit: u32,
}

impl QpCap {
    /// Queue sizes: work requests and scatter/gather entries per request of
    /// each queue; no inline data.
    #[inline]
    pub const fn new(
        max_send_wr: u32,
        max_recv_wr: u32,
        max_send_sge: u32,
        max_recv_sge: u32,
    ) -> Self {
        QpCap {
            max_send_wr,
            max_recv_wr,
            max_send_sge,
            max_recv_sge,
            max_inline_data: 0,
        }
    }

    crate::setters::setters! {
        /// Sets the send queue depth.
        max_send_wr: u32,
        /// Sets the receive queue depth.
        max_recv_wr: u32,
        /// Sets the scatter/gather entries per send.
        max_send_sge: u32,
        /// Sets the scatter/gather entries per receive.
        max_recv_sge: u32,
        /// Sets the inline bytes per send.
        max_inline_data: u32,
    }
}

impl Default for QpAttr {
    fn default() -> Self {
        Self::new()
    }
}

impl QpAttr {
    /// All zeros (as [`Default`]): state RESET, nothing else set.
    #[inline]
    pub const fn new() -> Self {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            path_mtu: Mtu(0),
            path_mig_state: PathMigState::Migrated,
            qkey: 0,
            rq_psn: 0,
            sq_psn: 0,
            dest_qp_num: 0,
            qp_access_flags: AccessFlags::empty(),
            cap: QpCap::new(0, 0, 0, 0),
            ah_attr: AhAttr::new(0),
            alt_ah_attr: AhAttr::new(0),
            pkey_index: 0,
            alt_pkey_index: 0,
            en_sqd_async_notify: false,
            sq_draining: false,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            port_num: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            alt_port_num: 0,
            alt_timeout: 0,
            rate_limit: 0,
        }
    }

    /// Attributes with `qp_state` set to `state`.
    #[inline]
    pub const fn with_state(state: QpState) -> Self {
        Self::new().qp_state(state)
    }

    crate::setters::setters! {
        /// Sets the next state (`STATE`).
        qp_state: QpState,
        /// Sets the asserted current state (`CUR_STATE`).
        cur_qp_state: QpState,
        /// Sets the path MTU (`PATH_MTU`).
        path_mtu: Mtu,
        /// Sets the path migration state (`PATH_MIG_STATE`).
        path_mig_state: PathMigState,
        /// Sets the Q_Key (`QKEY`).
        qkey: u32,
        /// Sets the receive queue start PSN (`RQ_PSN`).
        rq_psn: u32,
        /// Sets the send queue start PSN (`SQ_PSN`).
        sq_psn: u32,
        /// Sets the remote QP number (`DEST_QPN`).
        dest_qp_num: u32,
        /// Sets what remote peers may do (`ACCESS_FLAGS`).
        qp_access_flags: AccessFlags,
        /// Sets the queue sizes (a query's field; no transition takes `CAP`).
        cap: QpCap,
        /// Sets the primary path (`AV`).
        ah_attr: AhAttr,
        /// Sets the alternate path (`ALT_PATH`).
        alt_ah_attr: AhAttr,
        /// Sets the P_Key index (`PKEY_INDEX`).
        pkey_index: u16,
        /// Sets the alternate path's P_Key index (`ALT_PATH`).
        alt_pkey_index: u16,
        /// Sets whether to ask for the SQ-drained event (`EN_SQD_ASYNC_NOTIFY`).
        en_sqd_async_notify: bool,
        /// Sets the query-only draining flag.
        sq_draining: bool,
        /// Sets the outstanding reads/atomics as initiator (`MAX_QP_RD_ATOMIC`).
        max_rd_atomic: u8,
        /// Sets the outstanding reads/atomics as responder (`MAX_DEST_RD_ATOMIC`).
        max_dest_rd_atomic: u8,
        /// Sets the minimum RNR NAK timer (`MIN_RNR_TIMER`).
        min_rnr_timer: u8,
        /// Sets the local port (`PORT`).
        port_num: u8,
        /// Sets the local ACK timeout (`TIMEOUT`).
        timeout: u8,
        /// Sets the retries on timeout (`RETRY_CNT`).
        retry_cnt: u8,
        /// Sets the retries on RNR NAK (`RNR_RETRY`).
        rnr_retry: u8,
        /// Sets the alternate path's port (`ALT_PATH`).
        alt_port_num: u8,
        /// Sets the alternate path's ACK timeout (`ALT_PATH`).
        alt_timeout: u8,
        /// Sets the packet pacing rate in kbps (`RATE_LIMIT`).
        rate_limit: u32,
    }
}

/// What a query reports about how the QP was created (the `ibv_qp_init_attr`
/// part of `ibv_query_qp`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct QpInitInfo {
    /// The queue sizes.
    pub cap: QpCap,
    /// Whether every send work request generates a completion.
    pub sq_sig_all: bool,
}

mod codec;
#[allow(unused_imports)] // for rdma_cm's INIT_QP_ATTR (the `cm` feature) and fuzzing
pub(crate) use codec::decode_init_qp_attr;
pub(crate) use codec::{decode_query, encode_ex_modify, encode_modify};

#[cfg(test)]
mod tests;
