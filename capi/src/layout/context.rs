//! `struct ibv_device`, `struct ibv_context` with its `ibv_context_ops`, and
//! `struct verbs_context`, the extended context that ends with the
//! `ibv_context` programs see (verbs.h lines 1926-2175 at v44).

use core::ffi::{c_char, c_int, c_void};

use super::{pthread_mutex_t, AnyFn, Layout};
use crate::c_layout;

/// `IBV_SYSFS_NAME_MAX`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `struct _ibv_device_ops`: two slots libibverbs 1.0 called.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct _ibv_device_ops {
    pub _dummy1: AnyFn,
    pub _dummy2: AnyFn,
}

/// `struct ibv_device`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    /// `enum ibv_node_type`.
    pub node_type: c_int,
    /// `enum ibv_transport_type`.
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// `struct ibv_context_ops`: the data path's four calls (and the memory
/// window calls) the inline functions make, and `_compat_*` slots kept for
/// binaries of libibverbs 1.0's time.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_context_ops {
    pub _compat_query_device: AnyFn,
    pub _compat_query_port: AnyFn,
    pub _compat_alloc_pd: AnyFn,
    pub _compat_dealloc_pd: AnyFn,
    pub _compat_reg_mr: AnyFn,
    pub _compat_rereg_mr: AnyFn,
    pub _compat_dereg_mr: AnyFn,
    pub alloc_mw: AnyFn,
    pub bind_mw: AnyFn,
    pub dealloc_mw: AnyFn,
    pub _compat_create_cq: AnyFn,
    pub poll_cq: AnyFn,
    pub req_notify_cq: AnyFn,
    pub _compat_cq_event: AnyFn,
    pub _compat_resize_cq: AnyFn,
    pub _compat_destroy_cq: AnyFn,
    pub _compat_create_srq: AnyFn,
    pub _compat_modify_srq: AnyFn,
    pub _compat_query_srq: AnyFn,
    pub _compat_destroy_srq: AnyFn,
    pub post_srq_recv: AnyFn,
    pub _compat_create_qp: AnyFn,
    pub _compat_query_qp: AnyFn,
    pub _compat_modify_qp: AnyFn,
    pub _compat_destroy_qp: AnyFn,
    pub post_send: AnyFn,
    pub post_recv: AnyFn,
    pub _compat_create_ah: AnyFn,
    pub _compat_destroy_ah: AnyFn,
    pub _compat_attach_mcast: AnyFn,
    pub _compat_detach_mcast: AnyFn,
    pub _compat_async_event: AnyFn,
}

/// `struct ibv_context`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    /// `__VERBS_ABI_IS_EXTENDED` (all ones): the context is the last field
    /// of a [`verbs_context`].
    pub abi_compat: *mut c_void,
}

/// `__VERBS_ABI_IS_EXTENDED`.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `struct verbs_context`: the extension ops, which grow towards lower
/// addresses (a newer verbs.h adds them at the front), `sz`, and the
/// context. An op is present for a program if it is not NULL and `sz`
/// reaches it (`verbs_get_ctx_op`); a NULL op makes its inline function
/// fail with `EOPNOTSUPP`.
#[repr(C)]
#[derive(Debug)]
pub struct verbs_context {
    pub query_port: AnyFn,
    pub advise_mr: AnyFn,
    pub alloc_null_mr: AnyFn,
    pub read_counters: AnyFn,
    pub attach_counters_point_flow: AnyFn,
    pub create_counters: AnyFn,
    pub destroy_counters: AnyFn,
    pub reg_dm_mr: AnyFn,
    pub alloc_dm: AnyFn,
    pub free_dm: AnyFn,
    pub modify_flow_action_esp: AnyFn,
    pub destroy_flow_action: AnyFn,
    pub create_flow_action_esp: AnyFn,
    pub modify_qp_rate_limit: AnyFn,
    pub alloc_parent_domain: AnyFn,
    pub dealloc_td: AnyFn,
    pub alloc_td: AnyFn,
    pub modify_cq: AnyFn,
    pub post_srq_ops: AnyFn,
    pub destroy_rwq_ind_table: AnyFn,
    pub create_rwq_ind_table: AnyFn,
    pub destroy_wq: AnyFn,
    pub modify_wq: AnyFn,
    pub create_wq: AnyFn,
    pub query_rt_values: AnyFn,
    pub create_cq_ex: AnyFn,
    pub r#priv: *mut c_void,
    pub query_device_ex: AnyFn,
    pub ibv_destroy_flow: AnyFn,
    pub ABI_placeholder2: AnyFn,
    pub ibv_create_flow: AnyFn,
    pub ABI_placeholder1: AnyFn,
    pub open_qp: AnyFn,
    pub create_qp_ex: AnyFn,
    pub get_srq_num: AnyFn,
    pub create_srq_ex: AnyFn,
    pub open_xrcd: AnyFn,
    pub close_xrcd: AnyFn,
    pub _ABI_placeholder3: u64,
    /// `sizeof(struct verbs_context)` of the newest layout the library
    /// fills.
    pub sz: usize,
    pub context: ibv_context,
}

c_layout!(IBV_DEVICE: "struct ibv_device" = ibv_device, 664,
    [_ops, node_type, transport_type, name, dev_name, dev_path, ibdev_path]);
c_layout!(IBV_CONTEXT_OPS: "struct ibv_context_ops" = ibv_context_ops, 256,
    [_compat_query_device, _compat_query_port, alloc_mw, bind_mw, dealloc_mw, poll_cq,
     req_notify_cq, post_srq_recv, post_send, post_recv, _compat_async_event]);
c_layout!(IBV_CONTEXT: "struct ibv_context" = ibv_context, 328,
    [device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat]);
c_layout!(VERBS_CONTEXT: "struct verbs_context" = verbs_context, 648,
    [query_port, advise_mr, alloc_null_mr, read_counters, attach_counters_point_flow,
     create_counters, destroy_counters, reg_dm_mr, alloc_dm, free_dm, modify_flow_action_esp,
     destroy_flow_action, create_flow_action_esp, modify_qp_rate_limit, alloc_parent_domain,
     dealloc_td, alloc_td, modify_cq, post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table,
     destroy_wq, modify_wq, create_wq, query_rt_values, create_cq_ex, r#priv, query_device_ex,
     ibv_destroy_flow, ABI_placeholder2, ibv_create_flow, ABI_placeholder1, open_qp,
     create_qp_ex, get_srq_num, create_srq_ex, open_xrcd, close_xrcd, _ABI_placeholder3, sz,
     context]);

/// This module's layouts.
pub const LAYOUTS: &[Layout] = &[IBV_DEVICE, IBV_CONTEXT_OPS, IBV_CONTEXT, VERBS_CONTEXT];
