//! SRQ, XRC SRQ, WQ and RWQ indirection table structs of the `write()` ABI
//! (`<rdma/ib_user_verbs.h>`).

use crate::layout::abi_structs;

abi_structs! {
    /// `struct ib_uverbs_create_srq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_CREATE_SRQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsCreateSrq: "struct ib_uverbs_create_srq" {
        pub response: u64,
        pub user_handle: u64,
        pub pd_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub srq_limit: u32,
    }

    /// `struct ib_uverbs_create_xsrq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_CREATE_XSRQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsCreateXsrq: "struct ib_uverbs_create_xsrq" {
        pub response: u64,
        pub user_handle: u64,
        pub srq_type: u32,
        pub pd_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub srq_limit: u32,
        pub max_num_tags: u32,
        pub xrcd_handle: u32,
        pub cq_handle: u32,
    }

    /// `struct ib_uverbs_create_srq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_CREATE_SRQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__u32`), not part of this struct.
    pub struct IbUverbsCreateSrqResp: "struct ib_uverbs_create_srq_resp" {
        pub srq_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub srqn: u32,
    }

    /// `struct ib_uverbs_modify_srq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_MODIFY_SRQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsModifySrq: "struct ib_uverbs_modify_srq" {
        pub srq_handle: u32,
        pub attr_mask: u32,
        pub max_wr: u32,
        pub srq_limit: u32,
    }

    /// `struct ib_uverbs_query_srq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_QUERY_SRQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsQuerySrq: "struct ib_uverbs_query_srq" {
        pub response: u64,
        pub srq_handle: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_query_srq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_QUERY_SRQ` write command.
    pub struct IbUverbsQuerySrqResp: "struct ib_uverbs_query_srq_resp" {
        pub max_wr: u32,
        pub max_sge: u32,
        pub srq_limit: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_destroy_srq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_DESTROY_SRQ` write command.
    pub struct IbUverbsDestroySrq: "struct ib_uverbs_destroy_srq" {
        pub response: u64,
        pub srq_handle: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_destroy_srq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_DESTROY_SRQ` write command.
    pub struct IbUverbsDestroySrqResp: "struct ib_uverbs_destroy_srq_resp" {
        pub events_reported: u32,
    }

    /// `struct ib_uverbs_ex_create_wq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_EX_CMD_CREATE_WQ` write command.
    pub struct IbUverbsExCreateWq: "struct ib_uverbs_ex_create_wq" {
        pub comp_mask: u32,
        pub wq_type: u32,
        pub user_handle: u64,
        pub pd_handle: u32,
        pub cq_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub create_flags: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_ex_create_wq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_EX_CMD_CREATE_WQ` write command.
    pub struct IbUverbsExCreateWqResp: "struct ib_uverbs_ex_create_wq_resp" {
        pub comp_mask: u32,
        pub response_length: u32,
        pub wq_handle: u32,
        pub max_wr: u32,
        pub max_sge: u32,
        pub wqn: u32,
    }

    /// `struct ib_uverbs_ex_destroy_wq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_EX_CMD_DESTROY_WQ` write command.
    pub struct IbUverbsExDestroyWq: "struct ib_uverbs_ex_destroy_wq" {
        pub comp_mask: u32,
        pub wq_handle: u32,
    }

    /// `struct ib_uverbs_ex_destroy_wq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_EX_CMD_DESTROY_WQ` write command.
    pub struct IbUverbsExDestroyWqResp: "struct ib_uverbs_ex_destroy_wq_resp" {
        pub comp_mask: u32,
        pub response_length: u32,
        pub events_reported: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_ex_modify_wq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_EX_CMD_MODIFY_WQ` write command.
    pub struct IbUverbsExModifyWq: "struct ib_uverbs_ex_modify_wq" {
        pub attr_mask: u32,
        pub wq_handle: u32,
        pub wq_state: u32,
        pub curr_wq_state: u32,
        pub flags: u32,
        pub flags_mask: u32,
    }

    /// `struct ib_uverbs_ex_create_rwq_ind_table` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Followed in the same buffer by the flexible array `wq_handles[]` (`__u32`), not part of this struct.
    pub struct IbUverbsExCreateRwqIndTable: "struct ib_uverbs_ex_create_rwq_ind_table" {
        pub comp_mask: u32,
        pub log_ind_tbl_size: u32,
    }

    /// `struct ib_uverbs_ex_create_rwq_ind_table_resp` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsExCreateRwqIndTableResp: "struct ib_uverbs_ex_create_rwq_ind_table_resp" {
        pub comp_mask: u32,
        pub response_length: u32,
        pub ind_tbl_handle: u32,
        pub ind_tbl_num: u32,
    }

    /// `struct ib_uverbs_ex_destroy_rwq_ind_table` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsExDestroyRwqIndTable: "struct ib_uverbs_ex_destroy_rwq_ind_table" {
        pub comp_mask: u32,
        pub ind_tbl_handle: u32,
    }
}
