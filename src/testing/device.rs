//! The device, port and GID answers both device doubles give: the limits
//! and port 1 of soft-RoCE as the rxe test guest (Linux 6.1) reports them,
//! which the rxe fake answers as they are and the mlx5 model starts from
//! (it overrides the device limits `mlx5_ib_query_device` reports
//! differently), the GID entries of a RoCE v2 port and their sysfs text.

use zerocopy::FromZeros;

use crate::abi;

/// The device attributes rxe reports (`EX_QUERY_DEVICE`), with the node
/// and system image GUID `node_guid` (host order).
pub(super) fn device_attr(node_guid: u64) -> abi::IbUverbsExQueryDeviceResp {
    let mut r = abi::IbUverbsExQueryDeviceResp::new_zeroed();
    let b = &mut r.base;
    b.fw_ver = 0;
    b.node_guid = node_guid.to_be();
    b.sys_image_guid = node_guid.to_be();
    b.max_mr_size = u64::MAX;
    b.page_size_cap = 0xffff_f000;
    b.vendor_id = 0xffffff;
    b.max_qp = 1_048_560;
    b.max_qp_wr = 1_048_576;
    b.device_cap_flags = 0x0122_3c76;
    b.max_sge = 32;
    b.max_sge_rd = 32;
    b.max_cq = 1_048_576;
    b.max_cqe = 32767;
    b.max_mr = 524_287;
    b.max_pd = 1_048_576;
    b.max_qp_rd_atom = 128;
    b.max_res_rd_atom = 258_048;
    b.max_qp_init_rd_atom = 128;
    b.atomic_cap = 1;
    b.max_mw = 524_287;
    b.max_srq = 917_503;
    b.max_srq_wr = 1_048_576;
    b.max_srq_sge = 27;
    b.max_pkeys = 64;
    b.local_ca_ack_delay = 15;
    b.phys_port_cnt = 1;
    r.device_cap_flags_ex = 0x0122_3c76;
    r.response_length = size_of::<abi::IbUverbsExQueryDeviceResp>() as u32;
    r
}

/// Port 1's attributes (`QUERY_PORT`).
pub fn port_attr() -> abi::IbUverbsQueryPortResp {
    let mut p = abi::IbUverbsQueryPortResp::new_zeroed();
    p.port_cap_flags = 0x0001_0000;
    p.max_msg_sz = 0x80_0000;
    p.gid_tbl_len = 1024;
    p.pkey_tbl_len = 1;
    p.state = 4;
    p.max_mtu = 5;
    p.active_mtu = 3;
    p.max_vl_num = 1;
    p.active_width = 1;
    p.active_speed = 1;
    p.phys_state = 5;
    p.link_layer = 2;
    p
}

/// GID table entry `index` of port 1: RoCE v2, on netdev ifindex 2.
pub(super) fn gid_entry(index: u32, gid: [u8; 16]) -> abi::IbUverbsGidEntry {
    let mut e = abi::IbUverbsGidEntry::new_zeroed();
    e.gid = [
        u64::from_ne_bytes(gid[..8].try_into().unwrap()),
        u64::from_ne_bytes(gid[8..].try_into().unwrap()),
    ];
    e.gid_index = index;
    e.port_num = 1;
    e.gid_type = 2; // RoCE v2
    e.netdev_ifindex = 2;
    e
}

/// A GID as sysfs shows it (`ports/1/gids/N`).
pub(super) fn sysfs_gid(gid: &[u8; 16]) -> String {
    let groups: Vec<String> = gid
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect();
    format!("{}\n", groups.join(":"))
}
