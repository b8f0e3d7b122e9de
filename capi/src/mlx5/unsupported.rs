//! The `mlx5dv_*` functions uverbs does not provide: each fails with
//! `EOPNOTSUPP` in its own function's convention, as rdma-core 44's
//! libmlx5 answers when the device or firmware lacks the feature (its
//! `dvops` slot is NULL, or the capability bit is clear). pyverbs' tests
//! take that answer as "not supported here" and skip.
//!
//! Every parameter is ignored, so each function is declared without
//! parameters: on x86-64 and aarch64 the caller passes arguments in
//! registers (and cleans up any on the stack), so a callee that reads none
//! is called correctly whatever the C prototype. The return type is the
//! prototype's (a pointer, `int`, `ssize_t`, `bool`, `void`).

#![allow(unsafe_code)]

/// Defines `uverbs_<name>` for each name, failing by the convention
/// (`null`, `positive`, `negative`, `minus_one`, `minus_one_ssize`,
/// `void`).
macro_rules! unsupported {
    ($($conv:ident: [$($name:ident),* $(,)?]),* $(,)?) => {
        $($($crate::mlx5::unsupported::unsupported!(@one $conv $name);)*)*
    };
    (@one null $name:ident) => {
        #[doc = concat!("`", stringify!($name), "`: not supported (NULL, `errno` = `EOPNOTSUPP`).")]
        #[export_name = concat!("uverbs_", stringify!($name))]
        pub extern "C" fn $name() -> *mut ::core::ffi::c_void {
            $crate::errno::null(::uverbs::sys::Errno::EOPNOTSUPP)
        }
    };
    (@one positive $name:ident) => {
        #[doc = concat!("`", stringify!($name), "`: not supported (returns `EOPNOTSUPP`).")]
        #[export_name = concat!("uverbs_", stringify!($name))]
        pub extern "C" fn $name() -> ::core::ffi::c_int {
            $crate::errno::positive(::uverbs::sys::Errno::EOPNOTSUPP)
        }
    };
    (@one negative $name:ident) => {
        #[doc = concat!("`", stringify!($name), "`: not supported (returns `-EOPNOTSUPP`).")]
        #[export_name = concat!("uverbs_", stringify!($name))]
        pub extern "C" fn $name() -> ::core::ffi::c_int {
            -$crate::errno::positive(::uverbs::sys::Errno::EOPNOTSUPP)
        }
    };
    (@one minus_one $name:ident) => {
        #[doc = concat!("`", stringify!($name), "`: not supported (-1, `errno` = `EOPNOTSUPP`).")]
        #[export_name = concat!("uverbs_", stringify!($name))]
        pub extern "C" fn $name() -> ::core::ffi::c_int {
            $crate::errno::minus_one(::uverbs::sys::Errno::EOPNOTSUPP)
        }
    };
    (@one minus_one_ssize $name:ident) => {
        #[doc = concat!("`", stringify!($name), "`: not supported (-1 as `ssize_t`, `errno` = `EOPNOTSUPP`).")]
        #[export_name = concat!("uverbs_", stringify!($name))]
        pub extern "C" fn $name() -> isize {
            $crate::errno::minus_one(::uverbs::sys::Errno::EOPNOTSUPP) as isize
        }
    };
    (@one void $name:ident) => {
        #[doc = concat!("`", stringify!($name), "`: not supported; nothing to do (no such object exists).")]
        #[export_name = concat!("uverbs_", stringify!($name))]
        pub extern "C" fn $name() {}
    };
}

pub(crate) use unsupported;

unsupported! {
    minus_one: [mlx5dv_vfio_get_events_fd],
    void: [
        mlx5dv_dr_domain_allow_duplicate_rules,
        mlx5dv_dr_domain_set_reclaim_device_memory,
        mlx5dv_free_var,
        mlx5dv_pp_free,
    ],
    null: [
        mlx5dv_alloc_dm,
        mlx5dv_alloc_var,
        mlx5dv_create_flow,
        mlx5dv_create_flow_action_esp,
        mlx5dv_create_flow_action_modify_header,
        mlx5dv_create_flow_action_packet_reformat,
        mlx5dv_create_flow_matcher,
        mlx5dv_create_mkey,
        mlx5dv_create_steering_anchor,
        mlx5dv_create_wq,
        mlx5dv_crypto_login_create,
        mlx5dv_dek_create,
        mlx5dv_devx_alloc_msi_vector,
        mlx5dv_devx_create_eq,
        mlx5dv_dm_map_op_addr,
        mlx5dv_dr_action_create_aso,
        mlx5dv_dr_action_create_default_miss,
        mlx5dv_dr_action_create_dest_array,
        mlx5dv_dr_action_create_dest_devx_tir,
        mlx5dv_dr_action_create_dest_ib_port,
        mlx5dv_dr_action_create_dest_ibv_qp,
        mlx5dv_dr_action_create_dest_root_table,
        mlx5dv_dr_action_create_dest_table,
        mlx5dv_dr_action_create_dest_vport,
        mlx5dv_dr_action_create_drop,
        mlx5dv_dr_action_create_flow_counter,
        mlx5dv_dr_action_create_flow_meter,
        mlx5dv_dr_action_create_flow_sampler,
        mlx5dv_dr_action_create_modify_header,
        mlx5dv_dr_action_create_packet_reformat,
        mlx5dv_dr_action_create_pop_vlan,
        mlx5dv_dr_action_create_push_vlan,
        mlx5dv_dr_action_create_tag,
        mlx5dv_dr_domain_create,
        mlx5dv_dr_matcher_create,
        mlx5dv_dr_rule_create,
        mlx5dv_dr_table_create,
        mlx5dv_get_vfio_device_list,
        mlx5dv_pp_alloc,
        mlx5dv_sched_leaf_create,
        mlx5dv_sched_node_create,
    ],
    positive: [
        _mlx5dv_mkey_check,
        _mlx5dv_query_port,
        mlx5dv_crypto_login,
        mlx5dv_crypto_login_destroy,
        mlx5dv_crypto_login_query,
        mlx5dv_crypto_login_query_state,
        mlx5dv_crypto_logout,
        mlx5dv_dci_stream_id_reset,
        mlx5dv_dek_destroy,
        mlx5dv_dek_query,
        mlx5dv_destroy_flow_matcher,
        mlx5dv_destroy_mkey,
        mlx5dv_destroy_steering_anchor,
        mlx5dv_devx_destroy_eq,
        mlx5dv_devx_free_msi_vector,
        mlx5dv_devx_ind_tbl_modify,
        mlx5dv_devx_ind_tbl_query,
        mlx5dv_devx_wq_modify,
        mlx5dv_devx_wq_query,
        mlx5dv_dr_action_destroy,
        mlx5dv_dr_action_modify_aso,
        mlx5dv_dr_action_modify_flow_meter,
        mlx5dv_dr_aso_other_domain_link,
        mlx5dv_dr_aso_other_domain_unlink,
        mlx5dv_dr_domain_destroy,
        mlx5dv_dr_domain_sync,
        mlx5dv_dr_matcher_destroy,
        mlx5dv_dr_matcher_set_layout,
        mlx5dv_dr_rule_destroy,
        mlx5dv_dr_table_destroy,
        mlx5dv_map_ah_to_qp,
        mlx5dv_modify_qp_lag_port,
        mlx5dv_modify_qp_sched_elem,
        mlx5dv_modify_qp_udp_sport,
        mlx5dv_query_qp_lag_port,
        mlx5dv_reserved_qpn_alloc,
        mlx5dv_reserved_qpn_dealloc,
        mlx5dv_sched_leaf_destroy,
        mlx5dv_sched_leaf_modify,
        mlx5dv_sched_node_destroy,
        mlx5dv_sched_node_modify,
        mlx5dv_vfio_process_events,
    ],
    negative: [
        mlx5dv_dump_dr_domain,
        mlx5dv_dump_dr_matcher,
        mlx5dv_dump_dr_rule,
        mlx5dv_dump_dr_table,
        mlx5dv_qp_cancel_posted_send_wrs,
    ],
}
