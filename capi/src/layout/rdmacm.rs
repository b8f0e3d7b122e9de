//! The structs of rdma-core 44's `<rdma/rdma_cma.h>` (librdmacm-dev 44):
//! the id, the event channel, the event with its connection and UD
//! parameters, the route and address, `rdma_addrinfo` and the multicast
//! join attributes. Programs read their fields directly (`id->verbs`,
//! `event->param.conn.private_data`, `id->route.addr.src_addr`), and
//! `rdma_verbs.h`'s inline helpers read `id->qp`, `id->pd`, `id->send_cq`
//! and friends, so the offsets are the header's (checked by the probe,
//! `probe.rs`, against Debian's header).
//!
//! rdma_cma.h is dual-licensed GPL-2.0 or BSD (Linux-OpenIB); these
//! declarations restate its layout under the BSD option.

use core::ffi::{c_char, c_int, c_void};

use super::{
    context::ibv_context,
    cq::{ibv_comp_channel, ibv_cq},
    device::ibv_gid,
    pd::ibv_pd,
    qp::{ibv_ah_attr, ibv_qp, ibv_srq},
    unsupported::ibv_sa_path_rec,
    Layout,
};
use crate::c_layout;

/// `struct sockaddr_storage` (128 bytes, 8-aligned on Linux, glibc and
/// musl): the two address unions of [`rdma_addr`] are this size.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct sockaddr_storage(pub [u8; 128]);

impl Default for sockaddr_storage {
    fn default() -> Self {
        sockaddr_storage([0; 128])
    }
}

/// `struct rdma_ib_addr`: the GIDs and P_Key of a route.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    /// `__be16`.
    pub pkey: u16,
}

/// `struct rdma_addr`: the source and destination socket addresses (each a
/// union whose largest member is `sockaddr_storage`) and the IB address.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_addr {
    /// The `src_addr` / `src_sin` / `src_sin6` / `src_storage` union.
    pub src_addr: sockaddr_storage,
    /// The `dst_addr` / `dst_sin` / `dst_sin6` / `dst_storage` union.
    pub dst_addr: sockaddr_storage,
    /// `union { struct rdma_ib_addr ibaddr; } addr`.
    pub addr: rdma_ib_addr,
}

/// `struct rdma_route`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

/// `struct rdma_event_channel`: only the fd.
#[repr(C)]
#[derive(Debug)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

/// `struct rdma_cm_id`.
#[repr(C)]
#[derive(Debug)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    /// `enum rdma_port_space`.
    pub ps: c_int,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    /// `enum ibv_qp_type`.
    pub qp_type: c_int,
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The `param` union of [`rdma_cm_event`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
}

impl core::fmt::Debug for rdma_cm_event_param {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("rdma_cm_event_param { .. }")
    }
}

/// `struct rdma_cm_event`.
#[repr(C)]
#[derive(Debug)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    /// `enum rdma_cm_event_type`.
    pub event: c_int,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

/// `struct rdma_addrinfo`.
#[repr(C)]
#[derive(Debug)]
pub struct rdma_addrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    /// `socklen_t`.
    pub ai_src_len: u32,
    pub ai_dst_len: u32,
    pub ai_src_addr: *mut c_void,
    pub ai_dst_addr: *mut c_void,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut rdma_addrinfo,
}

/// `struct rdma_cm_join_mc_attr_ex`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rdma_cm_join_mc_attr_ex {
    pub comp_mask: u32,
    pub join_flags: u32,
    pub addr: *mut c_void,
}

c_layout!(RDMA_IB_ADDR: "struct rdma_ib_addr" = rdma_ib_addr, 40, [sgid, dgid, pkey]);
c_layout!(RDMA_ADDR: "struct rdma_addr" = rdma_addr, 296, [src_addr, dst_addr, addr]);
c_layout!(RDMA_ROUTE: "struct rdma_route" = rdma_route, 312, [addr, path_rec, num_paths]);
c_layout!(RDMA_EVENT_CHANNEL: "struct rdma_event_channel" = rdma_event_channel, 4, [fd]);
c_layout!(RDMA_CM_ID: "struct rdma_cm_id" = rdma_cm_id, 416,
    [verbs, channel, context, qp, route, ps, port_num, event, send_cq_channel, send_cq,
     recv_cq_channel, recv_cq, srq, pd, qp_type]);
c_layout!(RDMA_CONN_PARAM: "struct rdma_conn_param" = rdma_conn_param, 24,
    [private_data, private_data_len, responder_resources, initiator_depth, flow_control,
     retry_count, rnr_retry_count, srq, qp_num]);
c_layout!(RDMA_UD_PARAM: "struct rdma_ud_param" = rdma_ud_param, 56,
    [private_data, private_data_len, ah_attr, qp_num, qkey]);
c_layout!(RDMA_CM_EVENT_PARAM: "__typeof__(((struct rdma_cm_event *)0)->param)" =
    rdma_cm_event_param, 56, [conn, ud]);
c_layout!(RDMA_CM_EVENT: "struct rdma_cm_event" = rdma_cm_event, 80,
    [id, listen_id, event, status, param]);
c_layout!(RDMA_ADDRINFO: "struct rdma_addrinfo" = rdma_addrinfo, 96,
    [ai_flags, ai_family, ai_qp_type, ai_port_space, ai_src_len, ai_dst_len, ai_src_addr,
     ai_dst_addr, ai_src_canonname, ai_dst_canonname, ai_route_len, ai_route, ai_connect_len,
     ai_connect, ai_next]);
c_layout!(RDMA_CM_JOIN_MC_ATTR_EX: "struct rdma_cm_join_mc_attr_ex" = rdma_cm_join_mc_attr_ex,
    16, [comp_mask, join_flags, addr]);

/// This module's layouts (the probe includes `<rdma/rdma_cma.h>`).
pub const LAYOUTS: &[Layout] = &[
    RDMA_IB_ADDR,
    RDMA_ADDR,
    RDMA_ROUTE,
    RDMA_EVENT_CHANNEL,
    RDMA_CM_ID,
    RDMA_CONN_PARAM,
    RDMA_UD_PARAM,
    RDMA_CM_EVENT_PARAM,
    RDMA_CM_EVENT,
    RDMA_ADDRINFO,
    RDMA_CM_JOIN_MC_ATTR_EX,
];
