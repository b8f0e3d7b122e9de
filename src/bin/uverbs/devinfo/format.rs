//! `uverbs devinfo` output: flag names, value names and the sections of
//! `ibv_devinfo`, written into any `Write`.
#![allow(unused_imports)]

use std::io::{self, Write};

use uverbs::{
    Context, DeviceAttr, DeviceInfo, Gid, GidEntry, GidType, LinkLayer, NodeType, PortAttr,
    PortState,
};

use super::*;

/// Attributes rdma-core fills from provider driver data (mlx5's
/// `mlx5_query_device_ex`), not from the kernel's core response. The library
/// does not report them yet, so they are zero: that prints what rdma-core
/// prints for a provider without them (rxe, siw).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ProviderCaps {
    pub(super) max_tso: u32,
    pub(super) tso_supported_qpts: u32,
    pub(super) rx_hash_function: u32,
    pub(super) rx_hash_fields_mask: u64,
    pub(super) qp_rate_limit_min: u32,
    pub(super) qp_rate_limit_max: u32,
    pub(super) packet_pacing_supported_qpts: u32,
}

/// What identifies the device in the header, besides the queried attributes.
pub(super) struct HcaId<'a> {
    pub(super) name: &'a str,
    pub(super) node_type: NodeType,
    pub(super) board_id: Option<&'a str>,
}

/// A flag bit and the name `ibv_devinfo` prints for it.
pub(super) type FlagName = (u64, &'static str);

/// `IBV_DEVICE_*` (the 32-bit `device_cap_flags`).
pub(super) const DEVICE_CAP_FLAGS: &[FlagName] = &[
    (1 << 0, "RESIZE_MAX_WR"),
    (1 << 1, "BAD_PKEY_CNTR"),
    (1 << 2, "BAD_QKEY_CNTR"),
    (1 << 3, "RAW_MULTI"),
    (1 << 4, "AUTO_PATH_MIG"),
    (1 << 5, "CHANGE_PHY_PORT"),
    (1 << 6, "UD_AV_PORT_ENFORCE"),
    (1 << 7, "CURR_QP_STATE_MOD"),
    (1 << 8, "SHUTDOWN_PORT"),
    (1 << 9, "INIT_TYPE"),
    (1 << 10, "PORT_ACTIVE_EVENT"),
    (1 << 11, "SYS_IMAGE_GUID"),
    (1 << 12, "RC_RNR_NAK_GEN"),
    (1 << 13, "SRQ_RESIZE"),
    (1 << 14, "N_NOTIFY_CQ"),
    (1 << 17, "MEM_WINDOW"),
    (1 << 18, "UD_IP_CSUM"),
    (1 << 20, "XRC"),
    (1 << 21, "MEM_MGT_EXTENSIONS"),
    (1 << 23, "MEM_WINDOW_TYPE_2A"),
    (1 << 24, "MEM_WINDOW_TYPE_2B"),
    (1 << 25, "RC_IP_CSUM"),
    (1 << 26, "RAW_IP_CSUM"),
    (1 << 29, "MANAGED_FLOW_STEERING"),
];

/// The bits above 31 of `device_cap_flags_ex` that have names.
pub(super) const DEVICE_CAP_FLAGS_EX: &[FlagName] = &[
    (1 << 34, "RAW_SCATTER_FCS"),
    (1 << 36, "PCI_WRITE_END_PADDING"),
];

/// `IBV_ODP_SUPPORT*` (general ODP caps).
pub(super) const ODP_GENERAL_CAPS: &[FlagName] =
    &[(1 << 0, "ODP_SUPPORT"), (1 << 1, "ODP_SUPPORT_IMPLICIT")];

/// `IBV_ODP_SUPPORT_*` (per-transport ODP caps).
pub(super) const ODP_TRANSPORT_CAPS: &[FlagName] = &[
    (1 << 0, "SUPPORT_SEND"),
    (1 << 1, "SUPPORT_RECV"),
    (1 << 2, "SUPPORT_WRITE"),
    (1 << 3, "SUPPORT_READ"),
    (1 << 4, "SUPPORT_ATOMIC"),
    (1 << 5, "SUPPORT_SRQ"),
];

/// `IBV_RAW_PACKET_CAP_*` (no "Unknown flags" line for these).
pub(super) const RAW_PACKET_CAPS: &[FlagName] = &[
    (1 << 0, "C-VLAN stripping offload"),
    (1 << 1, "Scatter FCS offload"),
    (1 << 2, "IP csum offload"),
    (1 << 3, "Delay drop"),
];

/// QP types as bits of a `supported_qpts` mask (`1 << IBV_QPT_*`).
pub(super) const SUPPORTED_QPTS: &[FlagName] =
    &[(1 << 8, "SUPPORT_RAW_PACKET"), (1 << 4, "SUPPORT_UD")];

/// The indentation of flag-name lines.
pub(super) const FLAG_INDENT: &str = "\t\t\t\t\t";

/// Prints the name of every set bit of `table`, in table order, then an
/// `Unknown flags` line for the set bits the table does not name.
pub(super) fn write_flags(
    out: &mut dyn Write,
    value: u64,
    table: &[FlagName],
    report_unknown: bool,
) -> io::Result<()> {
    for &(bit, name) in table {
        if value & bit != 0 {
            writeln!(out, "{FLAG_INDENT}{name}")?;
        }
    }
    let known = table.iter().fold(0, |m, &(bit, _)| m | bit);
    let unknown = value & !known;
    if report_unknown && unknown != 0 {
        writeln!(out, "{FLAG_INDENT}Unknown flags: 0x{unknown:X}")?;
    }
    Ok(())
}

/// `%04x:%04x:%04x:%04x` of a host-order GUID.
pub(super) fn guid_str(guid: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        (guid >> 48) & 0xffff,
        (guid >> 32) & 0xffff,
        (guid >> 16) & 0xffff,
        guid & 0xffff
    )
}

pub(super) fn atomic_cap_str(cap: u32) -> &'static str {
    match cap {
        0 => "ATOMIC_NONE",
        1 => "ATOMIC_HCA",
        2 => "ATOMIC_GLOB",
        _ => "invalid atomic capability",
    }
}

pub(super) fn port_state_str(state: PortState) -> &'static str {
    match state {
        PortState::Down => "PORT_DOWN",
        PortState::Init => "PORT_INIT",
        PortState::Armed => "PORT_ARMED",
        PortState::Active => "PORT_ACTIVE",
        _ => "invalid state",
    }
}

pub(super) fn phys_state_str(state: u8) -> &'static str {
    match state {
        1 => "SLEEP",
        2 => "POLLING",
        3 => "DISABLED",
        4 => "PORT_CONFIGURATION TRAINNING",
        5 => "LINK_UP",
        6 => "LINK_ERROR_RECOVERY",
        7 => "PHY TEST",
        _ => "invalid physical state",
    }
}

pub(super) fn mtu_str(mtu: u8) -> &'static str {
    match mtu {
        1 => "256",
        2 => "512",
        3 => "1024",
        4 => "2048",
        5 => "4096",
        _ => "invalid MTU",
    }
}

pub(super) fn width_str(width: u8) -> &'static str {
    match width {
        1 => "1",
        2 => "4",
        4 => "8",
        8 => "12",
        16 => "2",
        _ => "invalid width",
    }
}

pub(super) fn speed_str(speed: u8) -> &'static str {
    match speed {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        _ => "invalid speed",
    }
}

pub(super) fn vl_str(vl: u8) -> &'static str {
    match vl {
        1 => "1",
        2 => "2",
        3 => "4",
        4 => "8",
        5 => "15",
        _ => "invalid value",
    }
}

pub(super) fn link_layer_str(ll: LinkLayer) -> &'static str {
    match ll {
        LinkLayer::Unspecified => "Unspecified",
        LinkLayer::InfiniBand => "InfiniBand",
        LinkLayer::Ethernet => "Ethernet",
        _ => "Unknown",
    }
}

/// The raw link-layer number, for the `IBV_LINK_LAYER_ETHERNET` test.
pub(super) fn is_ethernet(ll: LinkLayer) -> bool {
    ll == LinkLayer::Ethernet
}

/// glibc's `inet_ntop(AF_INET6)`: the longest run (first on ties) of two or
/// more zero groups becomes `::`, and `::a.b.c.d` / `::ffff:a.b.c.d` end in
/// dotted quad. (Rust's `Ipv6Addr` Display differs for `::a.b.c.d`.)
pub(super) fn inet_ntop6(raw: &[u8; 16]) -> String {
    // The library's GID Display is glibc's inet_ntop(AF_INET6).
    Gid(*raw).to_string()
}

/// One `GID[%3d]:` line. rdma-core knows two sysfs types: "IB/RoCE v1"
/// (printed as 8 hex groups) and "RoCE v2" (printed by inet_ntop); the
/// ", <type>" suffix appears only on Ethernet ports.
pub(super) fn write_gid(
    out: &mut dyn Write,
    index: u32,
    gid: &Gid,
    gid_type: GidType,
    ll: LinkLayer,
) -> io::Result<()> {
    let v2 = !matches!(gid_type, GidType::Ib | GidType::RoceV1);
    let suffix = match (is_ethernet(ll), v2) {
        (false, _) => "",
        (true, false) => ", RoCE v1",
        (true, true) => ", RoCE v2",
    };
    let text = if v2 {
        inet_ntop6(&gid.0)
    } else {
        let groups: Vec<String> = gid
            .0
            .chunks_exact(2)
            .map(|p| format!("{:02x}{:02x}", p[0], p[1]))
            .collect();
        groups.join(":")
    };
    // `%3d` of an int index.
    writeln!(out, "\t\t\tGID[{:3}]:\t\t{text}{suffix}", index as i32)
}

/// Everything before the port loop.
pub(super) fn write_device(
    out: &mut dyn Write,
    id: &HcaId<'_>,
    a: &DeviceAttr,
    extra: &ProviderCaps,
    num_comp_vectors: u32,
    verbose: bool,
) -> io::Result<()> {
    writeln!(out, "hca_id:\t{}", id.name)?;
    writeln!(
        out,
        "\ttransport:\t\t\t{} ({})",
        id.node_type.transport_name(),
        id.node_type.transport_number()
    )?;
    if !a.fw_ver.is_empty() {
        writeln!(out, "\tfw_ver:\t\t\t\t{}", a.fw_ver)?;
    }
    writeln!(out, "\tnode_guid:\t\t\t{}", guid_str(a.node_guid))?;
    writeln!(out, "\tsys_image_guid:\t\t\t{}", guid_str(a.sys_image_guid))?;
    writeln!(out, "\tvendor_id:\t\t\t0x{:04x}", a.vendor_id)?;
    writeln!(out, "\tvendor_part_id:\t\t\t{}", a.vendor_part_id as i32)?;
    writeln!(out, "\thw_ver:\t\t\t\t0x{:X}", a.hw_ver)?;
    if let Some(board_id) = id.board_id {
        writeln!(out, "\tboard_id:\t\t\t{board_id}")?;
    }
    writeln!(out, "\tphys_port_cnt:\t\t\t{}", a.phys_port_cnt)?;
    if verbose {
        write_device_verbose(out, a, extra, num_comp_vectors)?;
    }
    Ok(())
}

/// The `-v` device attributes. `%d` of the C tool is an `int`: u32 values
/// above `i32::MAX` print negative there, and here.
pub(super) fn write_device_verbose(
    out: &mut dyn Write,
    a: &DeviceAttr,
    extra: &ProviderCaps,
    num_comp_vectors: u32,
) -> io::Result<()> {
    let int = |v: u32| v as i32;
    writeln!(out, "\tmax_mr_size:\t\t\t0x{:x}", a.max_mr_size)?;
    writeln!(out, "\tpage_size_cap:\t\t\t0x{:x}", a.page_size_cap)?;
    writeln!(out, "\tmax_qp:\t\t\t\t{}", int(a.max_qp))?;
    writeln!(out, "\tmax_qp_wr:\t\t\t{}", int(a.max_qp_wr))?;
    writeln!(
        out,
        "\tdevice_cap_flags:\t\t0x{:08x}",
        a.device_cap_flags.bits()
    )?;
    write_flags(
        out,
        u64::from(a.device_cap_flags.bits()),
        DEVICE_CAP_FLAGS,
        true,
    )?;
    writeln!(out, "\tmax_sge:\t\t\t{}", int(a.max_sge))?;
    writeln!(out, "\tmax_sge_rd:\t\t\t{}", int(a.max_sge_rd))?;
    writeln!(out, "\tmax_cq:\t\t\t\t{}", int(a.max_cq))?;
    writeln!(out, "\tmax_cqe:\t\t\t{}", int(a.max_cqe))?;
    writeln!(out, "\tmax_mr:\t\t\t\t{}", int(a.max_mr))?;
    writeln!(out, "\tmax_pd:\t\t\t\t{}", int(a.max_pd))?;
    writeln!(out, "\tmax_qp_rd_atom:\t\t\t{}", int(a.max_qp_rd_atom))?;
    writeln!(out, "\tmax_ee_rd_atom:\t\t\t{}", int(a.max_ee_rd_atom))?;
    writeln!(out, "\tmax_res_rd_atom:\t\t{}", int(a.max_res_rd_atom))?;
    writeln!(
        out,
        "\tmax_qp_init_rd_atom:\t\t{}",
        int(a.max_qp_init_rd_atom)
    )?;
    writeln!(
        out,
        "\tmax_ee_init_rd_atom:\t\t{}",
        int(a.max_ee_init_rd_atom)
    )?;
    writeln!(
        out,
        "\tatomic_cap:\t\t\t{} ({})",
        atomic_cap_str(a.atomic_cap),
        int(a.atomic_cap)
    )?;
    writeln!(out, "\tmax_ee:\t\t\t\t{}", int(a.max_ee))?;
    writeln!(out, "\tmax_rdd:\t\t\t{}", int(a.max_rdd))?;
    writeln!(out, "\tmax_mw:\t\t\t\t{}", int(a.max_mw))?;
    writeln!(out, "\tmax_raw_ipv6_qp:\t\t{}", int(a.max_raw_ipv6_qp))?;
    writeln!(out, "\tmax_raw_ethy_qp:\t\t{}", int(a.max_raw_ethy_qp))?;
    writeln!(out, "\tmax_mcast_grp:\t\t\t{}", int(a.max_mcast_grp))?;
    writeln!(
        out,
        "\tmax_mcast_qp_attach:\t\t{}",
        int(a.max_mcast_qp_attach)
    )?;
    writeln!(
        out,
        "\tmax_total_mcast_qp_attach:\t{}",
        int(a.max_total_mcast_qp_attach)
    )?;
    writeln!(out, "\tmax_ah:\t\t\t\t{}", int(a.max_ah))?;
    writeln!(out, "\tmax_fmr:\t\t\t{}", int(a.max_fmr))?;
    if a.max_fmr != 0 {
        writeln!(out, "\tmax_map_per_fmr:\t\t{}", int(a.max_map_per_fmr))?;
    }
    writeln!(out, "\tmax_srq:\t\t\t{}", int(a.max_srq))?;
    if a.max_srq != 0 {
        writeln!(out, "\tmax_srq_wr:\t\t\t{}", int(a.max_srq_wr))?;
        writeln!(out, "\tmax_srq_sge:\t\t\t{}", int(a.max_srq_sge))?;
    }
    writeln!(out, "\tmax_pkeys:\t\t\t{}", a.max_pkeys)?;
    writeln!(out, "\tlocal_ca_ack_delay:\t\t{}", a.local_ca_ack_delay)?;

    write_odp_caps(out, a)?;
    if a.completion_timestamp_mask != 0 {
        writeln!(
            out,
            "\tcompletion timestamp_mask:\t\t\t0x{:016x}",
            a.completion_timestamp_mask
        )?;
    } else {
        writeln!(out, "\tcompletion_timestamp_mask not supported")?;
    }
    if a.hca_core_clock != 0 {
        writeln!(out, "\thca_core_clock:\t\t\t{}kHZ", a.hca_core_clock)?;
    } else {
        writeln!(out, "\tcore clock not supported")?;
    }
    if a.raw_packet_caps != 0 {
        writeln!(out, "\traw packet caps:")?;
        write_flags(out, u64::from(a.raw_packet_caps), RAW_PACKET_CAPS, false)?;
    }
    writeln!(
        out,
        "\tdevice_cap_flags_ex:\t\t0x{:X}",
        a.device_cap_flags_ex.bits()
    )?;
    write_flags(
        out,
        a.device_cap_flags_ex.bits() & 0xffff_ffff_0000_0000,
        DEVICE_CAP_FLAGS_EX,
        true,
    )?;

    writeln!(out, "\ttso_caps:")?;
    writeln!(out, "\t\tmax_tso:\t\t\t{}", extra.max_tso as i32)?;
    if extra.max_tso != 0 {
        writeln!(out, "\t\tsupported_qp:")?;
        write_flags(
            out,
            u64::from(extra.tso_supported_qpts),
            SUPPORTED_QPTS,
            true,
        )?;
    }

    let rss = &a.rss_caps;
    writeln!(out, "\trss_caps:")?;
    writeln!(
        out,
        "\t\tmax_rwq_indirection_tables:\t\t\t{}",
        rss.max_rwq_indirection_tables
    )?;
    writeln!(
        out,
        "\t\tmax_rwq_indirection_table_size:\t\t\t{}",
        rss.max_rwq_indirection_table_size
    )?;
    writeln!(
        out,
        "\t\trx_hash_function:\t\t\t\t0x{:x}",
        extra.rx_hash_function
    )?;
    writeln!(
        out,
        "\t\trx_hash_fields_mask:\t\t\t\t0x{:X}",
        extra.rx_hash_fields_mask
    )?;
    if rss.supported_qpts != 0 {
        writeln!(out, "\t\tsupported_qp:")?;
        write_flags(out, u64::from(rss.supported_qpts), SUPPORTED_QPTS, true)?;
    }
    writeln!(out, "\tmax_wq_type_rq:\t\t\t{}", a.max_wq_type_rq)?;

    writeln!(out, "\tpacket_pacing_caps:")?;
    writeln!(
        out,
        "\t\tqp_rate_limit_min:\t{}kbps",
        extra.qp_rate_limit_min
    )?;
    writeln!(
        out,
        "\t\tqp_rate_limit_max:\t{}kbps",
        extra.qp_rate_limit_max
    )?;
    if extra.qp_rate_limit_max != 0 {
        writeln!(out, "\t\tsupported_qp:")?;
        write_flags(
            out,
            u64::from(extra.packet_pacing_supported_qpts),
            SUPPORTED_QPTS,
            true,
        )?;
    }

    let tm = &a.tm_caps;
    if tm.max_num_tags != 0 {
        writeln!(out, "\tmax_rndv_hdr_size:\t\t{}", tm.max_rndv_hdr_size)?;
        writeln!(out, "\tmax_num_tags:\t\t\t{}", tm.max_num_tags)?;
        writeln!(out, "\tmax_ops:\t\t\t{}", tm.max_ops)?;
        writeln!(out, "\tmax_sge:\t\t\t{}", tm.max_sge)?;
        writeln!(out, "\tflags:")?;
        if tm.flags & 1 != 0 {
            writeln!(out, "{FLAG_INDENT}IBV_TM_CAP_RC")?;
        }
    } else {
        writeln!(out, "\ttag matching not supported")?;
    }

    let cqm = &a.cq_mod_caps;
    if cqm.max_cq_count != 0 && cqm.max_cq_period != 0 {
        writeln!(out, "\n\tcq moderation caps:")?;
        writeln!(out, "\t\tmax_cq_count:\t{}", cqm.max_cq_count)?;
        writeln!(out, "\t\tmax_cq_period:\t{} us\n", cqm.max_cq_period)?;
    }
    if a.max_dm_size != 0 {
        writeln!(
            out,
            "\tmaximum available device memory:\t{}Bytes\n",
            a.max_dm_size
        )?;
    }
    writeln!(out, "\tnum_comp_vectors:\t\t{}", num_comp_vectors as i32)
}

pub(super) fn write_odp_caps(out: &mut dyn Write, a: &DeviceAttr) -> io::Result<()> {
    writeln!(out, "\tgeneral_odp_caps:")?;
    write_flags(out, a.odp_caps.general_caps, ODP_GENERAL_CAPS, true)?;
    let per_transport = [
        ("rc", a.odp_caps.rc_odp_caps),
        ("uc", a.odp_caps.uc_odp_caps),
        ("ud", a.odp_caps.ud_odp_caps),
        ("xrc", a.xrc_odp_caps),
    ];
    for (name, caps) in per_transport {
        writeln!(out, "\t{name}_odp_caps:")?;
        if caps == 0 {
            writeln!(out, "{FLAG_INDENT}NO SUPPORT")?;
        } else {
            write_flags(out, u64::from(caps), ODP_TRANSPORT_CAPS, true)?;
        }
    }
    Ok(())
}

/// The lines of one port, without its GID table and the closing blank line.
pub(super) fn write_port(
    out: &mut dyn Write,
    port: u8,
    p: &PortAttr,
    transport_ib: bool,
    verbose: bool,
) -> io::Result<()> {
    writeln!(out, "\t\tport:\t{port}")?;
    writeln!(
        out,
        "\t\t\tstate:\t\t\t{} ({})",
        port_state_str(p.state),
        p.state.raw()
    )?;
    writeln!(
        out,
        "\t\t\tmax_mtu:\t\t{} ({})",
        mtu_str(p.max_mtu.0),
        p.max_mtu.0
    )?;
    writeln!(
        out,
        "\t\t\tactive_mtu:\t\t{} ({})",
        mtu_str(p.active_mtu.0),
        p.active_mtu.0
    )?;
    writeln!(out, "\t\t\tsm_lid:\t\t\t{}", p.sm_lid)?;
    writeln!(out, "\t\t\tport_lid:\t\t{}", p.lid)?;
    writeln!(out, "\t\t\tport_lmc:\t\t0x{:02x}", p.lmc)?;
    writeln!(out, "\t\t\tlink_layer:\t\t{}", link_layer_str(p.link_layer))?;
    if !verbose {
        return Ok(());
    }
    writeln!(out, "\t\t\tmax_msg_sz:\t\t0x{:x}", p.max_msg_sz)?;
    writeln!(
        out,
        "\t\t\tport_cap_flags:\t\t0x{:08x}",
        p.port_cap_flags.bits()
    )?;
    writeln!(
        out,
        "\t\t\tport_cap_flags2:\t0x{:04x}",
        p.port_cap_flags2.bits()
    )?;
    writeln!(
        out,
        "\t\t\tmax_vl_num:\t\t{} ({})",
        vl_str(p.max_vl_num),
        p.max_vl_num
    )?;
    writeln!(out, "\t\t\tbad_pkey_cntr:\t\t0x{:x}", p.bad_pkey_cntr)?;
    writeln!(out, "\t\t\tqkey_viol_cntr:\t\t0x{:x}", p.qkey_viol_cntr)?;
    writeln!(out, "\t\t\tsm_sl:\t\t\t{}", p.sm_sl)?;
    writeln!(out, "\t\t\tpkey_tbl_len:\t\t{}", p.pkey_tbl_len)?;
    writeln!(out, "\t\t\tgid_tbl_len:\t\t{}", p.gid_tbl_len as i32)?;
    writeln!(out, "\t\t\tsubnet_timeout:\t\t{}", p.subnet_timeout)?;
    writeln!(out, "\t\t\tinit_type_reply:\t{}", p.init_type_reply)?;
    writeln!(
        out,
        "\t\t\tactive_width:\t\t{}X ({})",
        width_str(p.active_width),
        p.active_width
    )?;
    writeln!(
        out,
        "\t\t\tactive_speed:\t\t{} ({})",
        speed_str(p.active_speed),
        p.active_speed
    )?;
    if transport_ib {
        writeln!(
            out,
            "\t\t\tphys_state:\t\t{} ({})",
            phys_state_str(p.phys_state),
            p.phys_state
        )?;
    }
    Ok(())
}

/// The C tool's `print_hca_cap`: returns its status (0, 2 query failed,
/// 4 bad port, an errno when a port query failed, -1 when a GID query failed).
pub(super) fn print_hca_cap(
    out: &mut dyn Write,
    err: &mut dyn Write,
    id: &HcaId<'_>,
    hca: &dyn Hca,
    port_wanted: u8,
    verbose: bool,
) -> io::Result<i32> {
    let attr = match hca.query_device() {
        Ok(a) => a,
        Err(e) => {
            writeln!(err, "Failed to query device props")?;
            writeln!(err, "{PROG}: {}: {e:#}", id.name)?;
            return Ok(2);
        }
    };
    if port_wanted != 0 && port_wanted > attr.phys_port_cnt {
        writeln!(err, "Invalid port requested for device")?;
        return Ok(4);
    }
    write_device(
        out,
        id,
        &attr,
        &hca.provider_caps(),
        hca.num_comp_vectors(),
        verbose,
    )?;

    let transport_ib = id.node_type.transport_number() == 0;
    for port in 1..=attr.phys_port_cnt {
        if port_wanted != 0 && port != port_wanted {
            continue;
        }
        let p = match hca.query_port(port) {
            Ok(p) => p,
            Err(e) => {
                writeln!(err, "Failed to query port {port} props")?;
                writeln!(err, "{PROG}: {}: {e:#}", id.name)?;
                return Ok(e.errno() as i32);
            }
        };
        write_port(out, port, &p, transport_ib, verbose)?;
        if verbose {
            for index in 0..p.gid_tbl_len {
                match hca.query_gid(port, index) {
                    Ok(Some(e)) if !e.gid.is_null() => {
                        write_gid(out, index, &e.gid, e.gid_type, p.link_layer)?;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        writeln!(err, "Failed to query gid to port {port}, index {index}")?;
                        writeln!(err, "{PROG}: {}: {e:#}", id.name)?;
                        return Ok(-1);
                    }
                }
            }
        }
        writeln!(out)?;
    }
    Ok(0)
}
