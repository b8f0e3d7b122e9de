//! The device half of verbs.h: `struct ibv_device_attr` and
//! `ibv_device_attr_ex` with its capability structs, `ibv_port_attr`,
//! `union ibv_gid`, `ibv_gid_entry` and `ibv_async_event` (verbs.h lines
//! 65-85 and 182-481 at v44).
//!
//! `__be64`/`__be16` fields are `u64`/`u16` holding the big-endian bytes;
//! enums are `c_int` (`enum ibv_*` is an `int` in C).

use core::ffi::{c_char, c_int, c_void};

use super::Layout;
use crate::c_layout;

/// The anonymous struct inside `union ibv_gid`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_gid_global {
    /// `__be64`.
    pub subnet_prefix: u64,
    /// `__be64`.
    pub interface_id: u64,
}

/// `union ibv_gid`: 16 bytes, 8-byte aligned (the `__be64` halves), which
/// makes every struct holding one 8-byte aligned too.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

impl core::fmt::Debug for ibv_gid {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // A union: which member is meant is the reader's business.
        f.debug_struct("ibv_gid").finish_non_exhaustive()
    }
}

/// `struct ibv_gid_entry` (`ibv_query_gid_ex`, `ibv_query_gid_table`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    /// `enum ibv_gid_type`.
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `struct ibv_device_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    /// `__be64`.
    pub node_guid: u64,
    /// `__be64`.
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    /// `enum ibv_atomic_cap`.
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_query_device_ex_input`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_query_device_ex_input {
    pub comp_mask: u32,
}

/// The anonymous `per_transport_caps` struct of `ibv_odp_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_odp_per_transport_caps {
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

/// `struct ibv_odp_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    pub per_transport_caps: ibv_odp_per_transport_caps,
}

/// `struct ibv_tso_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_tso_caps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}

/// `struct ibv_rss_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    /// `enum ibv_rx_hash_fields` bits.
    pub rx_hash_fields_mask: u64,
    /// `enum ibv_rx_hash_function_flags` bits.
    pub rx_hash_function: u8,
}

/// `struct ibv_packet_pacing_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_packet_pacing_caps {
    pub qp_rate_limit_min: u32,
    /// In kbps.
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
}

/// `struct ibv_tm_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_tm_caps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}

/// `struct ibv_cq_moderation_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_cq_moderation_caps {
    pub max_cq_count: u16,
    /// In microseconds.
    pub max_cq_period: u16,
}

/// `struct ibv_pci_atomic_caps` (`enum ibv_pci_atomic_op_size` bits).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_pci_atomic_caps {
    pub fetch_add: u16,
    pub swap: u16,
    pub compare_swap: u16,
}

/// `struct ibv_device_attr_ex`: [`ibv_device_attr`] and the extended
/// capabilities (`ibv_query_device_ex`). Programs pass its size, so a
/// library fills only the fields that fit in what they pass.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub tso_caps: ibv_tso_caps,
    pub rss_caps: ibv_rss_caps,
    pub max_wq_type_rq: u32,
    pub packet_pacing_caps: ibv_packet_pacing_caps,
    /// `enum ibv_raw_packet_caps` bits.
    pub raw_packet_caps: u32,
    pub tm_caps: ibv_tm_caps,
    pub cq_mod_caps: ibv_cq_moderation_caps,
    pub max_dm_size: u64,
    pub pci_atomic_caps: ibv_pci_atomic_caps,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

/// `struct ibv_port_attr` as verbs.h v44 declares it (52 bytes). Newer
/// rdma-core appends `uint32_t active_speed_ex` (56 bytes); the inline
/// `ibv_query_port` passes `sizeof`, so the library honours whatever size
/// the program was built with. The exported `ibv_query_port` of
/// IBVERBS_1.1 fills the first 48 bytes (`struct _compat_ibv_port_attr`,
/// without `port_cap_flags2`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_port_attr {
    /// `enum ibv_port_state`.
    pub state: c_int,
    /// `enum ibv_mtu`.
    pub max_mtu: c_int,
    /// `enum ibv_mtu`.
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
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
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `sizeof(struct _compat_ibv_port_attr)`: `ibv_port_attr` up to `flags`,
/// what the exported `ibv_query_port` fills.
pub const COMPAT_PORT_ATTR_SIZE: usize = 48;

/// The `element` union of `struct ibv_async_event`: the CQ, QP, SRQ or WQ
/// (`struct ibv_cq *`, `struct ibv_qp *`, ...) the event concerns, or the
/// port number.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_async_event_element {
    pub cq: *mut c_void,
    pub qp: *mut c_void,
    pub srq: *mut c_void,
    pub wq: *mut c_void,
    pub port_num: c_int,
}

impl core::fmt::Debug for ibv_async_event_element {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // A union: the event type says which member is meant.
        f.debug_struct("ibv_async_event_element")
            .finish_non_exhaustive()
    }
}

/// `struct ibv_async_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_async_event {
    pub element: ibv_async_event_element,
    /// `enum ibv_event_type`.
    pub event_type: c_int,
}

c_layout!(IBV_GID: "union ibv_gid" = ibv_gid, 16, [raw, global]);
c_layout!(IBV_GID_ENTRY: "struct ibv_gid_entry" = ibv_gid_entry, 32,
    [gid, gid_index, port_num, gid_type, ndev_ifindex]);
c_layout!(IBV_DEVICE_ATTR: "struct ibv_device_attr" = ibv_device_attr, 232,
    [fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id, vendor_part_id,
     hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd, max_cq, max_cqe, max_mr,
     max_pd, max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom, max_qp_init_rd_atom,
     max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp,
     max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach, max_ah, max_fmr,
     max_map_per_fmr, max_srq, max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay,
     phys_port_cnt]);
c_layout!(IBV_QUERY_DEVICE_EX_INPUT: "struct ibv_query_device_ex_input" =
    ibv_query_device_ex_input, 4, [comp_mask]);
c_layout!(IBV_ODP_CAPS: "struct ibv_odp_caps" = ibv_odp_caps, 24,
    [general_caps, per_transport_caps]);
c_layout!(IBV_TSO_CAPS: "struct ibv_tso_caps" = ibv_tso_caps, 8, [max_tso, supported_qpts]);
c_layout!(IBV_RSS_CAPS: "struct ibv_rss_caps" = ibv_rss_caps, 32,
    [supported_qpts, max_rwq_indirection_tables, max_rwq_indirection_table_size,
     rx_hash_fields_mask, rx_hash_function]);
c_layout!(IBV_PACKET_PACING_CAPS: "struct ibv_packet_pacing_caps" = ibv_packet_pacing_caps, 12,
    [qp_rate_limit_min, qp_rate_limit_max, supported_qpts]);
c_layout!(IBV_TM_CAPS: "struct ibv_tm_caps" = ibv_tm_caps, 20,
    [max_rndv_hdr_size, max_num_tags, flags, max_ops, max_sge]);
c_layout!(IBV_CQ_MODERATION_CAPS: "struct ibv_cq_moderation_caps" = ibv_cq_moderation_caps, 4,
    [max_cq_count, max_cq_period]);
c_layout!(IBV_PCI_ATOMIC_CAPS: "struct ibv_pci_atomic_caps" = ibv_pci_atomic_caps, 6,
    [fetch_add, swap, compare_swap]);
c_layout!(IBV_DEVICE_ATTR_EX: "struct ibv_device_attr_ex" = ibv_device_attr_ex, 400,
    [orig_attr, comp_mask, odp_caps, completion_timestamp_mask, hca_core_clock,
     device_cap_flags_ex, tso_caps, rss_caps, max_wq_type_rq, packet_pacing_caps,
     raw_packet_caps, tm_caps, cq_mod_caps, max_dm_size, pci_atomic_caps, xrc_odp_caps,
     phys_port_cnt_ex]);
c_layout!(IBV_PORT_ATTR: "struct ibv_port_attr" = ibv_port_attr, 52,
    [state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz, bad_pkey_cntr,
     qkey_viol_cntr, pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout,
     init_type_reply, active_width, active_speed, phys_state, link_layer, flags,
     port_cap_flags2]);
c_layout!(IBV_ASYNC_EVENT: "struct ibv_async_event" = ibv_async_event, 16,
    [element, event_type]);

// `_compat_ibv_port_attr` ends where `port_cap_flags2` begins.
const _: () =
    assert!(core::mem::offset_of!(ibv_port_attr, port_cap_flags2) == COMPAT_PORT_ATTR_SIZE);

/// This module's layouts.
/// `struct timespec` (x86-64 and aarch64: two 8-byte fields on glibc and
/// musl).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct timespec {
    pub tv_sec: i64,
    pub tv_nsec: i64,
}

/// `struct ibv_values_ex` (`ibv_query_rt_values_ex`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_values_ex {
    pub comp_mask: u32,
    pub raw_clock: timespec,
}
c_layout!(IBV_VALUES_EX: "struct ibv_values_ex" = ibv_values_ex, 24, [comp_mask, raw_clock]);

pub const LAYOUTS: &[Layout] = &[
    IBV_VALUES_EX,
    IBV_GID,
    IBV_GID_ENTRY,
    IBV_DEVICE_ATTR,
    IBV_QUERY_DEVICE_EX_INPUT,
    IBV_ODP_CAPS,
    IBV_TSO_CAPS,
    IBV_RSS_CAPS,
    IBV_PACKET_PACING_CAPS,
    IBV_TM_CAPS,
    IBV_CQ_MODERATION_CAPS,
    IBV_PCI_ATOMIC_CAPS,
    IBV_DEVICE_ATTR_EX,
    IBV_PORT_ATTR,
    IBV_ASYNC_EVENT,
];
