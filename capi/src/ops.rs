//! The op tables a context hands the program: `ibv_context_ops` (what
//! verbs.h's inline functions call through `ctx->ops`: polls, posts, arms,
//! windows) and the `verbs_context` extension ops (found at negative
//! offsets from the context: `create_cq_ex`, `create_qp_ex`,
//! `query_device_ex`, ...), one slot per op, NULL where this library has
//! none (libibverbs then answers `EOPNOTSUPP` itself).
//!
//! The one file that names every object module's entry points: the context
//! (`context.rs`) and its openers (`device.rs`, `mlx5/context.rs`) take the
//! tables from here, so no object module is imported back by the context
//! they all use.

use core::ptr::null_mut;

use crate::layout::{
    context::{ibv_context, ibv_context_ops, ibv_device, verbs_context, VERBS_ABI_IS_EXTENDED},
    pthread_mutex_t, AnyFn,
};

/// `struct ibv_context_ops`.
const CONTEXT_OPS: ibv_context_ops = ibv_context_ops {
    _compat_query_device: crate::query::QUERY_DEVICE_COMPAT,
    _compat_query_port: crate::query::QUERY_PORT_COMPAT,
    _compat_alloc_pd: None,
    _compat_dealloc_pd: None,
    _compat_reg_mr: None,
    _compat_rereg_mr: None,
    _compat_dereg_mr: None,
    alloc_mw: crate::mw::ALLOC_MW,
    bind_mw: crate::mw::BIND_MW,
    dealloc_mw: crate::mw::DEALLOC_MW,
    _compat_create_cq: None,
    poll_cq: crate::cq::POLL_CQ,
    req_notify_cq: crate::cq::REQ_NOTIFY_CQ,
    _compat_cq_event: None,
    _compat_resize_cq: None,
    _compat_destroy_cq: None,
    _compat_create_srq: None,
    _compat_modify_srq: None,
    _compat_query_srq: None,
    _compat_destroy_srq: None,
    post_srq_recv: crate::srq::POST_SRQ_RECV,
    _compat_create_qp: None,
    _compat_query_qp: None,
    _compat_modify_qp: None,
    _compat_destroy_qp: None,
    post_send: crate::qp::POST_SEND,
    post_recv: crate::qp::POST_RECV,
    _compat_create_ah: None,
    _compat_destroy_ah: None,
    _compat_attach_mcast: None,
    _compat_detach_mcast: None,
    _compat_async_event: None,
};

/// The C part of a new context of `device`, with both op tables: what
/// [`Context::boxed`](crate::context::Context::boxed) boxes. `cmd_fd` and
/// `async_fd` are the uverbs fds the C struct exposes.
pub(crate) fn verbs_context(
    device: *mut ibv_device,
    cmd_fd: i32,
    async_fd: i32,
    num_comp_vectors: u32,
) -> verbs_context {
    let num_comp_vectors = i32::try_from(num_comp_vectors).unwrap_or(i32::MAX);
    let none: AnyFn = None;
    verbs_context {
        query_port: crate::query::QUERY_PORT,
        advise_mr: none,
        alloc_null_mr: none,
        read_counters: none,
        attach_counters_point_flow: none,
        create_counters: none,
        destroy_counters: none,
        reg_dm_mr: none,
        alloc_dm: none,
        free_dm: none,
        modify_flow_action_esp: none,
        destroy_flow_action: none,
        create_flow_action_esp: none,
        modify_qp_rate_limit: none,
        alloc_parent_domain: crate::parent_domain::ALLOC_PARENT_DOMAIN,
        dealloc_td: crate::parent_domain::DEALLOC_TD,
        alloc_td: crate::parent_domain::ALLOC_TD,
        modify_cq: none,
        post_srq_ops: none,
        destroy_rwq_ind_table: none,
        create_rwq_ind_table: none,
        destroy_wq: none,
        modify_wq: none,
        create_wq: none,
        query_rt_values: crate::query::QUERY_RT_VALUES,
        create_cq_ex: crate::cq_ex::CREATE_CQ_EX,
        r#priv: null_mut(),
        query_device_ex: crate::query::QUERY_DEVICE_EX,
        ibv_destroy_flow: none,
        ABI_placeholder2: none,
        ibv_create_flow: none,
        ABI_placeholder1: none,
        open_qp: none,
        create_qp_ex: crate::qp::CREATE_QP_EX,
        get_srq_num: crate::srq::GET_SRQ_NUM,
        create_srq_ex: crate::srq::CREATE_SRQ_EX,
        open_xrcd: none,
        close_xrcd: none,
        _ABI_placeholder3: 0,
        sz: core::mem::size_of::<verbs_context>(),
        context: ibv_context {
            device,
            ops: CONTEXT_OPS,
            cmd_fd,
            async_fd,
            num_comp_vectors,
            mutex: pthread_mutex_t([0; 40]),
            abi_compat: VERBS_ABI_IS_EXTENDED,
        },
    }
}

/// A context of `device` with this library's op tables, as the openers
/// make it, for the tests (which make contexts on fake kernels).
#[cfg(test)]
impl crate::context::Context {
    pub(crate) fn create(
        uv: uverbs::Context,
        device: *mut ibv_device,
        cmd_fd: i32,
        async_fd: i32,
    ) -> *mut ibv_context {
        let vctx = verbs_context(device, cmd_fd, async_fd, uv.num_comp_vectors());
        crate::context::Context::boxed(uv, vctx)
    }
}
