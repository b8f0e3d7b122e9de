//! Typed results of the device, port and GID queries.
//!
//! Field names follow libibverbs' `ibv_device_attr_ex`, `ibv_port_attr` and
//! `ibv_gid_entry`, so code and documentation written for rdma-core carry over.
//! Values the kernel may extend keep what the crate does not know: capability
//! flags are bitflags that retain unnamed bits (`query_types/flags.rs`), MTUs
//! and states are integers with named constants or enums with an `Other`
//! variant. Nothing the kernel reports is lost.

use std::{fmt, net::Ipv4Addr};

use crate::abi;

mod flags;
pub use flags::{DeviceCapFlags, DeviceCapFlagsEx, PortCapFlags, PortCapFlags2};

/// The device's real-time values ([`Context::query_rt_values`], `struct
/// ibv_values_ex`).
///
/// [`Context::query_rt_values`]: crate::Context::query_rt_values
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RtValues {
    /// The device's free-running clock, in device ticks (libibverbs puts it
    /// in `raw_clock.tv_nsec`, with `tv_sec` 0).
    pub raw_clock: u64,
}

/// Device attributes (`struct ibv_device_attr_ex`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(missing_docs)] // the fields are ibv_device_attr's, documented there
#[non_exhaustive]
pub struct DeviceAttr {
    /// Firmware version, formatted by the provider as rdma-core does.
    pub fw_ver: String,
    /// Node GUID, host byte order.
    pub node_guid: u64,
    /// System image GUID, host byte order.
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    /// `IBV_DEVICE_*` bits (the low 32 bits of the kernel's capability flags).
    pub device_cap_flags: DeviceCapFlags,
    pub max_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_ee_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_ee_init_rd_atom: u32,
    /// `IBV_ATOMIC_NONE` (0), `IBV_ATOMIC_HCA` (1) or `IBV_ATOMIC_GLOB` (2).
    pub atomic_cap: u32,
    pub max_ee: u32,
    pub max_rdd: u32,
    pub max_mw: u32,
    pub max_raw_ipv6_qp: u32,
    pub max_raw_ethy_qp: u32,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_ah: u32,
    pub max_fmr: u32,
    pub max_map_per_fmr: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
    /// On-demand paging capabilities.
    pub odp_caps: OdpCaps,
    pub completion_timestamp_mask: u64,
    /// Core clock in kHz.
    pub hca_core_clock: u64,
    /// The full 64-bit capability flags (`IBV_DEVICE_RAW_SCATTER_FCS` and up live above bit 31).
    pub device_cap_flags_ex: DeviceCapFlagsEx,
    pub rss_caps: RssCaps,
    pub max_wq_type_rq: u32,
    pub raw_packet_caps: u32,
    pub tm_caps: TmCaps,
    pub cq_mod_caps: CqModerationCaps,
    pub max_dm_size: u64,
    pub xrc_odp_caps: u32,
}

/// `struct ibv_odp_caps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
#[non_exhaustive]
pub struct OdpCaps {
    pub general_caps: u64,
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

/// `struct ibv_rss_caps` (the parts the core kernel reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
#[non_exhaustive]
pub struct RssCaps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
}

/// `struct ibv_tm_caps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
#[non_exhaustive]
pub struct TmCaps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}

/// `struct ibv_cq_moderation_caps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
#[non_exhaustive]
pub struct CqModerationCaps {
    pub max_cq_count: u16,
    pub max_cq_period: u16,
}

impl DeviceAttr {
    pub(crate) fn from_abi(r: &abi::IbUverbsExQueryDeviceResp, fw_ver: String) -> Self {
        let b = &r.base;
        DeviceAttr {
            fw_ver,
            node_guid: u64::from_be(b.node_guid),
            sys_image_guid: u64::from_be(b.sys_image_guid),
            max_mr_size: b.max_mr_size,
            page_size_cap: b.page_size_cap,
            vendor_id: b.vendor_id,
            vendor_part_id: b.vendor_part_id,
            hw_ver: b.hw_ver,
            max_qp: b.max_qp,
            max_qp_wr: b.max_qp_wr,
            device_cap_flags: DeviceCapFlags::from_bits_retain(b.device_cap_flags),
            max_sge: b.max_sge,
            max_sge_rd: b.max_sge_rd,
            max_cq: b.max_cq,
            max_cqe: b.max_cqe,
            max_mr: b.max_mr,
            max_pd: b.max_pd,
            max_qp_rd_atom: b.max_qp_rd_atom,
            max_ee_rd_atom: b.max_ee_rd_atom,
            max_res_rd_atom: b.max_res_rd_atom,
            max_qp_init_rd_atom: b.max_qp_init_rd_atom,
            max_ee_init_rd_atom: b.max_ee_init_rd_atom,
            atomic_cap: b.atomic_cap,
            max_ee: b.max_ee,
            max_rdd: b.max_rdd,
            max_mw: b.max_mw,
            max_raw_ipv6_qp: b.max_raw_ipv6_qp,
            max_raw_ethy_qp: b.max_raw_ethy_qp,
            max_mcast_grp: b.max_mcast_grp,
            max_mcast_qp_attach: b.max_mcast_qp_attach,
            max_total_mcast_qp_attach: b.max_total_mcast_qp_attach,
            max_ah: b.max_ah,
            max_fmr: b.max_fmr,
            max_map_per_fmr: b.max_map_per_fmr,
            max_srq: b.max_srq,
            max_srq_wr: b.max_srq_wr,
            max_srq_sge: b.max_srq_sge,
            max_pkeys: b.max_pkeys,
            local_ca_ack_delay: b.local_ca_ack_delay,
            phys_port_cnt: b.phys_port_cnt,
            odp_caps: OdpCaps {
                general_caps: r.odp_caps.general_caps,
                rc_odp_caps: r.odp_caps.per_transport_caps.rc_odp_caps,
                uc_odp_caps: r.odp_caps.per_transport_caps.uc_odp_caps,
                ud_odp_caps: r.odp_caps.per_transport_caps.ud_odp_caps,
            },
            completion_timestamp_mask: r.timestamp_mask,
            hca_core_clock: r.hca_core_clock,
            // As libibverbs: the kernel's extended field as it is (0 when only
            // the legacy QUERY_DEVICE answered).
            device_cap_flags_ex: DeviceCapFlagsEx::from_bits_retain(r.device_cap_flags_ex),
            rss_caps: RssCaps {
                supported_qpts: r.rss_caps.supported_qpts,
                max_rwq_indirection_tables: r.rss_caps.max_rwq_indirection_tables,
                max_rwq_indirection_table_size: r.rss_caps.max_rwq_indirection_table_size,
            },
            max_wq_type_rq: r.max_wq_type_rq,
            raw_packet_caps: r.raw_packet_caps,
            tm_caps: TmCaps {
                max_rndv_hdr_size: r.tm_caps.max_rndv_hdr_size,
                max_num_tags: r.tm_caps.max_num_tags,
                flags: r.tm_caps.flags,
                max_ops: r.tm_caps.max_ops,
                max_sge: r.tm_caps.max_sge,
            },
            cq_mod_caps: CqModerationCaps {
                max_cq_count: r.cq_moderation_caps.max_cq_moderation_count,
                max_cq_period: r.cq_moderation_caps.max_cq_moderation_period,
            },
            max_dm_size: r.max_dm_size,
            xrc_odp_caps: r.xrc_odp_caps,
        }
    }
}

/// Logical port state (`enum ibv_port_state`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PortState {
    /// No state change (`IBV_PORT_NOP`).
    #[default]
    Nop,
    /// Link down.
    Down,
    /// Link up, not yet configured by the subnet manager.
    Init,
    /// Configured, not yet active.
    Armed,
    /// Active: traffic flows.
    Active,
    /// Active, deferring (rarely reported).
    ActiveDefer,
    /// A value this crate does not know.
    Other(u8),
}

impl PortState {
    /// From the kernel's value.
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => PortState::Nop,
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            5 => PortState::ActiveDefer,
            other => PortState::Other(other),
        }
    }

    /// The kernel's value.
    pub fn raw(self) -> u8 {
        match self {
            PortState::Nop => 0,
            PortState::Down => 1,
            PortState::Init => 2,
            PortState::Armed => 3,
            PortState::Active => 4,
            PortState::ActiveDefer => 5,
            PortState::Other(v) => v,
        }
    }
}

/// Path MTU (`enum ibv_mtu`): [`Mtu::BYTES_256`] … [`Mtu::BYTES_4096`].
///
/// The kernel's value as it is (1 = 256 … 5 = 4096), so one the crate does
/// not know survives; `Debug` shows the name (`BYTES_1024`), or `Mtu(n)`.
/// `Default` is `Mtu(0)`, no valid MTU (a zeroed `ibv_port_attr`'s).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mtu(pub u8);

impl Mtu {
    /// 256 bytes (`IBV_MTU_256`).
    #[doc(alias = "IBV_MTU_256")]
    pub const BYTES_256: Self = Self(1);
    /// 512 bytes (`IBV_MTU_512`).
    #[doc(alias = "IBV_MTU_512")]
    pub const BYTES_512: Self = Self(2);
    /// 1024 bytes (`IBV_MTU_1024`).
    #[doc(alias = "IBV_MTU_1024")]
    pub const BYTES_1024: Self = Self(3);
    /// 2048 bytes (`IBV_MTU_2048`).
    #[doc(alias = "IBV_MTU_2048")]
    pub const BYTES_2048: Self = Self(4);
    /// 4096 bytes (`IBV_MTU_4096`).
    #[doc(alias = "IBV_MTU_4096")]
    pub const BYTES_4096: Self = Self(5);

    /// [`Mtu::BYTES_256`] under its name before issue 42.
    #[deprecated(since = "0.1.0", note = "use Mtu::BYTES_256")]
    pub const MTU_256: Self = Self::BYTES_256;
    /// [`Mtu::BYTES_512`] under its name before issue 42.
    #[deprecated(since = "0.1.0", note = "use Mtu::BYTES_512")]
    pub const MTU_512: Self = Self::BYTES_512;
    /// [`Mtu::BYTES_1024`] under its name before issue 42.
    #[deprecated(since = "0.1.0", note = "use Mtu::BYTES_1024")]
    pub const MTU_1024: Self = Self::BYTES_1024;
    /// [`Mtu::BYTES_2048`] under its name before issue 42.
    #[deprecated(since = "0.1.0", note = "use Mtu::BYTES_2048")]
    pub const MTU_2048: Self = Self::BYTES_2048;
    /// [`Mtu::BYTES_4096`] under its name before issue 42.
    #[deprecated(since = "0.1.0", note = "use Mtu::BYTES_4096")]
    pub const MTU_4096: Self = Self::BYTES_4096;

    /// The MTU in bytes, if the value is a valid `ibv_mtu`.
    pub fn bytes(self) -> Option<u32> {
        (1..=5).contains(&self.0).then(|| 128u32 << self.0)
    }

    /// From a size in bytes (256, 512, 1024, 2048 or 4096).
    pub fn from_bytes(bytes: u32) -> Option<Self> {
        match bytes {
            256 => Some(Mtu::BYTES_256),
            512 => Some(Mtu::BYTES_512),
            1024 => Some(Mtu::BYTES_1024),
            2048 => Some(Mtu::BYTES_2048),
            4096 => Some(Mtu::BYTES_4096),
            _ => None,
        }
    }

    /// The constant's name (`"BYTES_1024"`), if the value has one.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 5] = [
            "BYTES_256",
            "BYTES_512",
            "BYTES_1024",
            "BYTES_2048",
            "BYTES_4096",
        ];
        NAMES.get(usize::from(self.0).wrapping_sub(1)).copied()
    }
}

impl fmt::Debug for Mtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Mtu({})", self.0),
        }
    }
}

/// Link layer of a port (`IBV_LINK_LAYER_*`).
///
/// `IBV_LINK_LAYER_*` in libibverbs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkLayer {
    /// Not reported (treated as InfiniBand by libibverbs).
    #[default]
    Unspecified,
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE).
    Ethernet,
    /// A value this crate does not know.
    Other(u8),
}

impl LinkLayer {
    /// From the kernel's value.
    pub fn from_raw(v: u8) -> Self {
        match v {
            0 => LinkLayer::Unspecified,
            1 => LinkLayer::InfiniBand,
            2 => LinkLayer::Ethernet,
            other => LinkLayer::Other(other),
        }
    }
}

/// Port attributes (`struct ibv_port_attr`); `Default` is all zeros.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(missing_docs)]
#[non_exhaustive]
pub struct PortAttr {
    pub state: PortState,
    pub max_mtu: Mtu,
    pub active_mtu: Mtu,
    pub gid_tbl_len: u32,
    /// `IBV_PORT_*` capability bits (`enum ibv_port_cap_flags`).
    pub port_cap_flags: PortCapFlags,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: LinkLayer,
    /// `IB_UVERBS_QPF_GRH_REQUIRED` and friends.
    pub flags: u8,
    /// More `IBV_PORT_*` capability bits (`enum ibv_port_cap_flags2`; 0
    /// where only the legacy `QUERY_PORT` answered).
    pub port_cap_flags2: PortCapFlags2,
}

impl PortAttr {
    pub(crate) fn from_abi(r: &abi::IbUverbsQueryPortResp, port_cap_flags2: u16) -> Self {
        PortAttr {
            state: PortState::from_raw(r.state),
            max_mtu: Mtu(r.max_mtu),
            active_mtu: Mtu(r.active_mtu),
            gid_tbl_len: r.gid_tbl_len,
            port_cap_flags: PortCapFlags::from_bits_retain(r.port_cap_flags),
            max_msg_sz: r.max_msg_sz,
            bad_pkey_cntr: r.bad_pkey_cntr,
            qkey_viol_cntr: r.qkey_viol_cntr,
            pkey_tbl_len: r.pkey_tbl_len,
            lid: r.lid,
            sm_lid: r.sm_lid,
            lmc: r.lmc,
            max_vl_num: r.max_vl_num,
            sm_sl: r.sm_sl,
            subnet_timeout: r.subnet_timeout,
            init_type_reply: r.init_type_reply,
            active_width: r.active_width,
            active_speed: r.active_speed,
            phys_state: r.phys_state,
            link_layer: LinkLayer::from_raw(r.link_layer),
            flags: r.flags,
            port_cap_flags2: PortCapFlags2::from_bits_retain(port_cap_flags2),
        }
    }
}

/// A 128-bit GID in network byte order.
///
/// `union ibv_gid` in libibverbs.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// Whether the interface-id half is zero (how `ibv_devinfo` skips empty slots).
    pub fn is_null(&self) -> bool {
        self.0[8..].iter().all(|&b| b == 0)
    }

    /// The subnet prefix (first 8 bytes) as a host-order integer.
    pub fn subnet_prefix(&self) -> u64 {
        u64::from_be_bytes(self.0[..8].try_into().unwrap_or_default())
    }

    /// The interface id (last 8 bytes) as a host-order integer.
    pub fn interface_id(&self) -> u64 {
        u64::from_be_bytes(self.0[8..].try_into().unwrap_or_default())
    }
}

impl fmt::Display for Gid {
    /// Formats exactly like glibc's `inet_ntop(AF_INET6)` (what `ibv_devinfo`
    /// prints): the longest run of two or more zero groups becomes `::`, and
    /// IPv4-mapped (`::ffff:a.b.c.d`) and IPv4-compatible (`::a.b.c.d`)
    /// addresses end in dotted quads. (`Ipv6Addr`'s Display differs for the
    /// IPv4-compatible form.)
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = &self.0;
        let words: [u16; 8] =
            std::array::from_fn(|i| u16::from_be_bytes([raw[2 * i], raw[2 * i + 1]]));
        // The longest run of zero words (the first one on ties), if >= 2.
        let (mut best, mut run) = ((0usize, 0usize), None::<(usize, usize)>);
        for (i, &w) in words.iter().enumerate() {
            run = if w == 0 {
                let r = run.map_or((i, 1), |(start, len)| (start, len + 1));
                if r.1 > best.1 {
                    best = r;
                }
                Some(r)
            } else {
                None
            };
        }
        let (zero_at, zero_len) = if best.1 >= 2 { best } else { (usize::MAX, 0) };
        let mut i = 0;
        while i < 8 {
            if i == zero_at {
                f.write_str("::")?;
                i += zero_len;
                continue;
            }
            if i != 0 && i != zero_at + zero_len {
                f.write_str(":")?;
            }
            let v4_tail = zero_at == 0 && (zero_len == 6 || (zero_len == 5 && words[5] == 0xffff));
            if i == 6 && v4_tail {
                return write!(f, "{}", Ipv4Addr::new(raw[12], raw[13], raw[14], raw[15]));
            }
            write!(f, "{:x}", words[i])?;
            i += 1;
        }
        Ok(())
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

/// GID type (`enum ibv_gid_type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum GidType {
    /// InfiniBand.
    #[default]
    Ib,
    /// RoCE v1 (Ethernet, GRH over EtherType 0x8915).
    RoceV1,
    /// RoCE v2 (UDP/IP).
    RoceV2,
    /// A value this crate does not know.
    Other(u32),
}

impl GidType {
    /// From the kernel's `IB_UVERBS_GID_TYPE_*` value.
    pub fn from_raw(v: u32) -> Self {
        match v {
            0 => GidType::Ib,
            1 => GidType::RoceV1,
            2 => GidType::RoceV2,
            other => GidType::Other(other),
        }
    }
}

/// One GID table entry (`struct ibv_gid_entry`); `Default` is all zeros.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GidEntry {
    /// The GID.
    pub gid: Gid,
    /// Index in the port's GID table.
    pub index: u32,
    /// Port number.
    pub port: u32,
    /// GID type.
    pub gid_type: GidType,
    /// Interface index of the netdev behind a RoCE GID (0: none).
    pub netdev_ifindex: u32,
}

impl GidEntry {
    pub(crate) fn from_abi(e: &abi::IbUverbsGidEntry) -> Self {
        // `gid` is two __aligned_u64 holding the raw 16 bytes in memory order.
        let mut raw = [0u8; 16];
        raw[..8].copy_from_slice(&e.gid[0].to_ne_bytes());
        raw[8..].copy_from_slice(&e.gid[1].to_ne_bytes());
        GidEntry {
            gid: Gid(raw),
            index: e.gid_index,
            port: e.port_num,
            gid_type: GidType::from_raw(e.gid_type),
            netdev_ifindex: e.netdev_ifindex,
        }
    }
}

#[cfg(test)]
mod tests;
