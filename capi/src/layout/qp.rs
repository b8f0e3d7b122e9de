//! Queue pairs, shared receive queues, address handles and work requests:
//! `struct ibv_qp`, `ibv_qp_ex`, `ibv_qp_init_attr(_ex)`, `ibv_qp_attr`,
//! `ibv_ah_attr`, `ibv_send_wr`, `ibv_recv_wr`, `ibv_srq*` (verbs.h lines
//! 686-1330 and 1657 at v44).
//!
//! `union ibv_gid` holds `__be64`s, so `ibv_global_route`, `ibv_ah_attr`
//! and `ibv_qp_attr` are 8-byte aligned (`ibv_qp_attr` is 144 bytes, its
//! `ah_attr` at 56). The anonymous unions of `ibv_send_wr` are named here
//! after their first member (`imm_data`, `bind_mw`), which is also where C
//! puts that member; the anonymous structs inside them are checked through
//! `__typeof__` of the member in the probe.

use core::ffi::{c_int, c_uint, c_void};
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

use super::{
    context::ibv_context, cq::ibv_cq, device::ibv_gid, pd::ibv_pd, pthread_cond_t, pthread_mutex_t,
    AnyFn, Layout,
};
use crate::c_layout;

/// `Debug` for a C union: which union it is, not which member is live.
macro_rules! union_debug {
    ($($ty:ident),*) => {$(
        impl core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(concat!(stringify!($ty), " { .. }"))
            }
        }
    )*};
}

union_debug!(
    ibv_send_wr_wr,
    ibv_send_wr_qp_type,
    ibv_send_wr_imm,
    ibv_send_wr_ext
);

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_ah`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_grh`: the 40 bytes a UD receive buffer starts with.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_grh {
    /// `__be32`.
    pub version_tclass_flow: u32,
    /// `__be16`.
    pub paylen: u16,
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// `struct ibv_tm_cap`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

/// `struct ibv_srq_init_attr_ex`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    /// `enum ibv_srq_type`.
    pub srq_type: c_int,
    pub pd: *mut ibv_pd,
    /// `struct ibv_xrcd *`.
    pub xrcd: *mut c_void,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`.
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

/// `struct ibv_rx_hash_conf`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`: `ibv_qp_init_attr` and the extended
/// fields `comp_mask` says are set.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`.
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    /// `struct ibv_xrcd *`.
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    /// `struct ibv_rwq_ind_table *`.
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_qp_attr {
    /// `enum ibv_qp_state`.
    pub qp_state: c_int,
    /// `enum ibv_qp_state`.
    pub cur_qp_state: c_int,
    /// `enum ibv_mtu`.
    pub path_mtu: c_int,
    /// `enum ibv_mig_state`.
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_mw_bind_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_mw_bind_info {
    /// `struct ibv_mr *`.
    pub mr: *mut c_void,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

/// `struct ibv_mw_bind`: the request of `ibv_bind_mw`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_mw_bind {
    pub wr_id: u64,
    pub send_flags: c_uint,
    pub bind_info: ibv_mw_bind_info,
}

/// `ibv_send_wr.wr.rdma`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `ibv_send_wr.wr.atomic`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `ibv_send_wr.wr.ud`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// `ibv_send_wr.wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}

/// `ibv_send_wr.qp_type.xrc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_send_wr_xrc {
    pub remote_srqn: u32,
}

/// `ibv_send_wr.qp_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_qp_type {
    pub xrc: ibv_send_wr_xrc,
}

/// The anonymous union of `imm_data` and `invalidate_rkey`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_imm {
    /// `__be32`: network order in memory.
    pub imm_data: u32,
    pub invalidate_rkey: u32,
}

/// `ibv_send_wr.bind_mw`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_send_wr_bind_mw {
    /// `struct ibv_mw *`.
    pub mw: *mut c_void,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `ibv_send_wr.tso`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}

/// The anonymous union of `bind_mw` and `tso`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_ext {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

/// `struct ibv_send_wr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    /// `enum ibv_wr_opcode`.
    pub opcode: c_int,
    pub send_flags: c_uint,
    /// C's anonymous union (`imm_data`, `invalidate_rkey`), named after
    /// its first member.
    pub imm_data: ibv_send_wr_imm,
    pub wr: ibv_send_wr_wr,
    pub qp_type: ibv_send_wr_qp_type,
    /// C's anonymous union (`bind_mw`, `tso`), named after its first
    /// member.
    pub bind_mw: ibv_send_wr_ext,
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// `struct ibv_srq`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    /// `enum ibv_qp_state`: written after a modify or query of the state
    /// while other threads may read the QP (an atomic of `int`'s size and
    /// alignment, as libibverbs writes it behind the program's reads).
    pub state: AtomicI32,
    /// `enum ibv_qp_type`.
    pub qp_type: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_data_buf`: one piece of `ibv_wr_set_inline_data_list`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// `struct ibv_qp_ex` as rdma-core 44 lays it out (352 bytes). Newer
/// rdma-core appends `wr_flush`; the library allocates that slot too (the
/// QP object's field right after this struct, see `crate::qp::Qp`). The
/// program writes `wr_id` and `wr_flags` before each `ibv_wr_*` call and
/// calls the slots without NULL checks. `wr_id` and `wr_flags` are atomics
/// of `uint64_t`'s and `unsigned int`'s layout: the program writes them
/// through its pointer while other threads hold the QP (`crate::qp_ex`
/// reads them with relaxed loads, as a C provider reads the fields).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: AtomicU64,
    pub wr_flags: AtomicU32,
    pub wr_atomic_cmp_swp: AnyFn,
    pub wr_atomic_fetch_add: AnyFn,
    pub wr_bind_mw: AnyFn,
    pub wr_local_inv: AnyFn,
    pub wr_rdma_read: AnyFn,
    pub wr_rdma_write: AnyFn,
    pub wr_rdma_write_imm: AnyFn,
    pub wr_send: AnyFn,
    pub wr_send_imm: AnyFn,
    pub wr_send_inv: AnyFn,
    pub wr_send_tso: AnyFn,
    pub wr_set_ud_addr: AnyFn,
    pub wr_set_xrc_srqn: AnyFn,
    pub wr_set_inline_data: AnyFn,
    pub wr_set_inline_data_list: AnyFn,
    pub wr_set_sge: AnyFn,
    pub wr_set_sge_list: AnyFn,
    pub wr_start: AnyFn,
    pub wr_complete: AnyFn,
    pub wr_abort: AnyFn,
    pub wr_atomic_write: AnyFn,
}

c_layout!(IBV_GLOBAL_ROUTE: "struct ibv_global_route" = ibv_global_route, 24,
    [dgid, flow_label, sgid_index, hop_limit, traffic_class]);
c_layout!(IBV_AH_ATTR: "struct ibv_ah_attr" = ibv_ah_attr, 32,
    [grh, dlid, sl, src_path_bits, static_rate, is_global, port_num]);
c_layout!(IBV_AH: "struct ibv_ah" = ibv_ah, 24, [context, pd, handle]);
c_layout!(IBV_GRH: "struct ibv_grh" = ibv_grh, 40,
    [version_tclass_flow, paylen, next_hdr, hop_limit, sgid, dgid]);
c_layout!(IBV_SRQ_ATTR: "struct ibv_srq_attr" = ibv_srq_attr, 12, [max_wr, max_sge, srq_limit]);
c_layout!(IBV_SRQ_INIT_ATTR: "struct ibv_srq_init_attr" = ibv_srq_init_attr, 24,
    [srq_context, attr]);
c_layout!(IBV_TM_CAP: "struct ibv_tm_cap" = ibv_tm_cap, 8, [max_num_tags, max_ops]);
c_layout!(IBV_SRQ_INIT_ATTR_EX: "struct ibv_srq_init_attr_ex" = ibv_srq_init_attr_ex, 64,
    [srq_context, attr, comp_mask, srq_type, pd, xrcd, cq, tm_cap]);
c_layout!(IBV_QP_CAP: "struct ibv_qp_cap" = ibv_qp_cap, 20,
    [max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data]);
c_layout!(IBV_QP_INIT_ATTR: "struct ibv_qp_init_attr" = ibv_qp_init_attr, 64,
    [qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all]);
c_layout!(IBV_RX_HASH_CONF: "struct ibv_rx_hash_conf" = ibv_rx_hash_conf, 24,
    [rx_hash_function, rx_hash_key_len, rx_hash_key, rx_hash_fields_mask]);
c_layout!(IBV_QP_INIT_ATTR_EX: "struct ibv_qp_init_attr_ex" = ibv_qp_init_attr_ex, 136,
    [qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd, xrcd,
     create_flags, max_tso_header, rwq_ind_tbl, rx_hash_conf, source_qpn, send_ops_flags]);
c_layout!(IBV_QP_ATTR: "struct ibv_qp_attr" = ibv_qp_attr, 144,
    [qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num,
     qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index, alt_pkey_index,
     en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer,
     port_num, timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout, rate_limit]);
c_layout!(IBV_SGE: "struct ibv_sge" = ibv_sge, 16, [addr, length, lkey]);
c_layout!(IBV_MW_BIND_INFO: "struct ibv_mw_bind_info" = ibv_mw_bind_info, 32,
    [mr, addr, length, mw_access_flags]);
c_layout!(IBV_SEND_WR_RDMA: "__typeof__(((struct ibv_send_wr *)0)->wr.rdma)" = ibv_send_wr_rdma,
    16, [remote_addr, rkey]);
c_layout!(IBV_SEND_WR_ATOMIC: "__typeof__(((struct ibv_send_wr *)0)->wr.atomic)"
    = ibv_send_wr_atomic, 32, [remote_addr, compare_add, swap, rkey]);
c_layout!(IBV_SEND_WR_UD: "__typeof__(((struct ibv_send_wr *)0)->wr.ud)" = ibv_send_wr_ud, 16,
    [ah, remote_qpn, remote_qkey]);
c_layout!(IBV_SEND_WR_WR: "__typeof__(((struct ibv_send_wr *)0)->wr)" = ibv_send_wr_wr, 32,
    [rdma, atomic, ud]);
c_layout!(IBV_SEND_WR_XRC: "__typeof__(((struct ibv_send_wr *)0)->qp_type.xrc)"
    = ibv_send_wr_xrc, 4, [remote_srqn]);
c_layout!(IBV_SEND_WR_QP_TYPE: "__typeof__(((struct ibv_send_wr *)0)->qp_type)"
    = ibv_send_wr_qp_type, 4, [xrc]);
c_layout!(IBV_MW_BIND: "struct ibv_mw_bind" = ibv_mw_bind, 48, [wr_id, send_flags, bind_info]);
c_layout!(IBV_SEND_WR_BIND_MW: "__typeof__(((struct ibv_send_wr *)0)->bind_mw)"
    = ibv_send_wr_bind_mw, 48, [mw, rkey, bind_info]);
c_layout!(IBV_SEND_WR_TSO: "__typeof__(((struct ibv_send_wr *)0)->tso)" = ibv_send_wr_tso, 16,
    [hdr, hdr_sz, mss]);
c_layout!(IBV_SEND_WR: "struct ibv_send_wr" = ibv_send_wr, 128,
    [wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data, wr, qp_type, bind_mw]);
c_layout!(IBV_RECV_WR: "struct ibv_recv_wr" = ibv_recv_wr, 32, [wr_id, next, sg_list, num_sge]);
c_layout!(IBV_SRQ: "struct ibv_srq" = ibv_srq, 128,
    [context, srq_context, pd, handle, mutex, cond, events_completed]);
c_layout!(IBV_QP: "struct ibv_qp" = ibv_qp, 160,
    [context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type, mutex,
     cond, events_completed]);
c_layout!(IBV_DATA_BUF: "struct ibv_data_buf" = ibv_data_buf, 16, [addr, length]);
c_layout!(IBV_QP_EX: "struct ibv_qp_ex" = ibv_qp_ex, 352,
    [qp_base, comp_mask, wr_id, wr_flags, wr_atomic_cmp_swp, wr_atomic_fetch_add, wr_bind_mw,
     wr_local_inv, wr_rdma_read, wr_rdma_write, wr_rdma_write_imm, wr_send, wr_send_imm,
     wr_send_inv, wr_send_tso, wr_set_ud_addr, wr_set_xrc_srqn, wr_set_inline_data,
     wr_set_inline_data_list, wr_set_sge, wr_set_sge_list, wr_start, wr_complete, wr_abort,
     wr_atomic_write]);

/// This module's layouts.
pub const LAYOUTS: &[Layout] = &[
    IBV_GLOBAL_ROUTE,
    IBV_AH_ATTR,
    IBV_AH,
    IBV_GRH,
    IBV_SRQ_ATTR,
    IBV_SRQ_INIT_ATTR,
    IBV_TM_CAP,
    IBV_SRQ_INIT_ATTR_EX,
    IBV_QP_CAP,
    IBV_QP_INIT_ATTR,
    IBV_RX_HASH_CONF,
    IBV_QP_INIT_ATTR_EX,
    IBV_QP_ATTR,
    IBV_SGE,
    IBV_MW_BIND_INFO,
    IBV_MW_BIND,
    IBV_SEND_WR_RDMA,
    IBV_SEND_WR_ATOMIC,
    IBV_SEND_WR_UD,
    IBV_SEND_WR_WR,
    IBV_SEND_WR_XRC,
    IBV_SEND_WR_QP_TYPE,
    IBV_SEND_WR_BIND_MW,
    IBV_SEND_WR_TSO,
    IBV_SEND_WR,
    IBV_RECV_WR,
    IBV_SRQ,
    IBV_QP,
    IBV_DATA_BUF,
    IBV_QP_EX,
];
