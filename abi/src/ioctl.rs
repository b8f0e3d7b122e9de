//! The uverbs ioctl framework: `RDMA_VERBS_IOCTL`, `struct ib_uverbs_ioctl_hdr` and
//! `struct ib_uverbs_attr` (`<rdma/rdma_user_ioctl_cmds.h>`), and every core object, method and
//! attribute id (`UVERBS_OBJECT_*`, `UVERBS_METHOD_*`, `UVERBS_ATTR_*`) of `<rdma/ib_user_ioctl_cmds.h>`.
//!
//! A request is one `IbUverbsIoctlHdr` immediately followed by `num_attrs` `IbUverbsAttr`s;
//! driver-specific ids live in the namespace above `UVERBS_ID_NS_SHIFT`.

use crate::layout::{abi_consts, abi_structs};

abi_consts! {
    // anonymous enum
    pub const UVERBS_ATTR_F_MANDATORY: u16 = 1;
    pub const UVERBS_ATTR_F_VALID_OUTPUT: u16 = 2;

    // enum uverbs_default_objects
    pub const UVERBS_OBJECT_DEVICE: u16 = 0;
    pub const UVERBS_OBJECT_PD: u16 = 1;
    pub const UVERBS_OBJECT_COMP_CHANNEL: u16 = 2;
    pub const UVERBS_OBJECT_CQ: u16 = 3;
    pub const UVERBS_OBJECT_QP: u16 = 4;
    pub const UVERBS_OBJECT_SRQ: u16 = 5;
    pub const UVERBS_OBJECT_AH: u16 = 6;
    pub const UVERBS_OBJECT_MR: u16 = 7;
    pub const UVERBS_OBJECT_MW: u16 = 8;
    pub const UVERBS_OBJECT_FLOW: u16 = 9;
    pub const UVERBS_OBJECT_XRCD: u16 = 10;
    pub const UVERBS_OBJECT_RWQ_IND_TBL: u16 = 11;
    pub const UVERBS_OBJECT_WQ: u16 = 12;
    pub const UVERBS_OBJECT_FLOW_ACTION: u16 = 13;
    pub const UVERBS_OBJECT_DM: u16 = 14;
    pub const UVERBS_OBJECT_COUNTERS: u16 = 15;
    pub const UVERBS_OBJECT_ASYNC_EVENT: u16 = 0x10;

    // anonymous enum
    pub const UVERBS_ATTR_UHW_IN: u16 = 0x1000;
    pub const UVERBS_ATTR_UHW_OUT: u16 = 0x1001;

    // enum uverbs_methods_device
    pub const UVERBS_METHOD_INVOKE_WRITE: u16 = 0;
    pub const UVERBS_METHOD_INFO_HANDLES: u16 = 1;
    pub const UVERBS_METHOD_QUERY_PORT: u16 = 2;
    pub const UVERBS_METHOD_GET_CONTEXT: u16 = 3;
    pub const UVERBS_METHOD_QUERY_CONTEXT: u16 = 4;
    pub const UVERBS_METHOD_QUERY_GID_TABLE: u16 = 5;
    pub const UVERBS_METHOD_QUERY_GID_ENTRY: u16 = 6;

    // enum uverbs_attrs_invoke_write_cmd_attr_ids
    pub const UVERBS_ATTR_CORE_IN: u16 = 0;
    pub const UVERBS_ATTR_CORE_OUT: u16 = 1;
    pub const UVERBS_ATTR_WRITE_CMD: u16 = 2;

    // enum uverbs_attrs_query_port_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_PORT_PORT_NUM: u16 = 0;
    pub const UVERBS_ATTR_QUERY_PORT_RESP: u16 = 1;

    // enum uverbs_attrs_get_context_attr_ids
    pub const UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS: u16 = 0;
    pub const UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT: u16 = 1;

    // enum uverbs_attrs_query_context_attr_ids
    pub const UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS: u16 = 0;
    pub const UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT: u16 = 1;

    // enum uverbs_attrs_create_cq_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_CQ_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_CREATE_CQ_CQE: u16 = 1;
    pub const UVERBS_ATTR_CREATE_CQ_USER_HANDLE: u16 = 2;
    pub const UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL: u16 = 3;
    pub const UVERBS_ATTR_CREATE_CQ_COMP_VECTOR: u16 = 4;
    pub const UVERBS_ATTR_CREATE_CQ_FLAGS: u16 = 5;
    pub const UVERBS_ATTR_CREATE_CQ_RESP_CQE: u16 = 6;
    pub const UVERBS_ATTR_CREATE_CQ_EVENT_FD: u16 = 7;

    // enum uverbs_attrs_destroy_cq_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_CQ_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_DESTROY_CQ_RESP: u16 = 1;

    // enum uverbs_attrs_create_flow_action_esp
    pub const UVERBS_ATTR_CREATE_FLOW_ACTION_ESP_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_ATTRS: u16 = 1;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_ESN: u16 = 2;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_KEYMAT: u16 = 3;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_REPLAY: u16 = 4;
    pub const UVERBS_ATTR_FLOW_ACTION_ESP_ENCAP: u16 = 5;

    // enum uverbs_attrs_modify_flow_action_esp
    pub const UVERBS_ATTR_MODIFY_FLOW_ACTION_ESP_HANDLE: u16 = 0;

    // enum uverbs_attrs_destroy_flow_action_esp
    pub const UVERBS_ATTR_DESTROY_FLOW_ACTION_HANDLE: u16 = 0;

    // enum uverbs_attrs_create_qp_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_QP_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_CREATE_QP_XRCD_HANDLE: u16 = 1;
    pub const UVERBS_ATTR_CREATE_QP_PD_HANDLE: u16 = 2;
    pub const UVERBS_ATTR_CREATE_QP_SRQ_HANDLE: u16 = 3;
    pub const UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE: u16 = 4;
    pub const UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE: u16 = 5;
    pub const UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE: u16 = 6;
    pub const UVERBS_ATTR_CREATE_QP_USER_HANDLE: u16 = 7;
    pub const UVERBS_ATTR_CREATE_QP_CAP: u16 = 8;
    pub const UVERBS_ATTR_CREATE_QP_TYPE: u16 = 9;
    pub const UVERBS_ATTR_CREATE_QP_FLAGS: u16 = 10;
    pub const UVERBS_ATTR_CREATE_QP_SOURCE_QPN: u16 = 11;
    pub const UVERBS_ATTR_CREATE_QP_EVENT_FD: u16 = 12;
    pub const UVERBS_ATTR_CREATE_QP_RESP_CAP: u16 = 13;
    pub const UVERBS_ATTR_CREATE_QP_RESP_QP_NUM: u16 = 14;

    // enum uverbs_attrs_destroy_qp_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_QP_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_DESTROY_QP_RESP: u16 = 1;

    // enum uverbs_methods_qp
    pub const UVERBS_METHOD_QP_CREATE: u16 = 0;
    pub const UVERBS_METHOD_QP_DESTROY: u16 = 1;

    // enum uverbs_attrs_create_srq_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_SRQ_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_CREATE_SRQ_PD_HANDLE: u16 = 1;
    pub const UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE: u16 = 2;
    pub const UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE: u16 = 3;
    pub const UVERBS_ATTR_CREATE_SRQ_USER_HANDLE: u16 = 4;
    pub const UVERBS_ATTR_CREATE_SRQ_MAX_WR: u16 = 5;
    pub const UVERBS_ATTR_CREATE_SRQ_MAX_SGE: u16 = 6;
    pub const UVERBS_ATTR_CREATE_SRQ_LIMIT: u16 = 7;
    pub const UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS: u16 = 8;
    pub const UVERBS_ATTR_CREATE_SRQ_TYPE: u16 = 9;
    pub const UVERBS_ATTR_CREATE_SRQ_EVENT_FD: u16 = 10;
    pub const UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR: u16 = 11;
    pub const UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE: u16 = 12;
    pub const UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM: u16 = 13;

    // enum uverbs_attrs_destroy_srq_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_SRQ_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_DESTROY_SRQ_RESP: u16 = 1;

    // enum uverbs_methods_srq
    pub const UVERBS_METHOD_SRQ_CREATE: u16 = 0;
    pub const UVERBS_METHOD_SRQ_DESTROY: u16 = 1;

    // enum uverbs_methods_cq
    pub const UVERBS_METHOD_CQ_CREATE: u16 = 0;
    pub const UVERBS_METHOD_CQ_DESTROY: u16 = 1;

    // enum uverbs_attrs_create_wq_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_WQ_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_CREATE_WQ_PD_HANDLE: u16 = 1;
    pub const UVERBS_ATTR_CREATE_WQ_CQ_HANDLE: u16 = 2;
    pub const UVERBS_ATTR_CREATE_WQ_USER_HANDLE: u16 = 3;
    pub const UVERBS_ATTR_CREATE_WQ_TYPE: u16 = 4;
    pub const UVERBS_ATTR_CREATE_WQ_EVENT_FD: u16 = 5;
    pub const UVERBS_ATTR_CREATE_WQ_MAX_WR: u16 = 6;
    pub const UVERBS_ATTR_CREATE_WQ_MAX_SGE: u16 = 7;
    pub const UVERBS_ATTR_CREATE_WQ_FLAGS: u16 = 8;
    pub const UVERBS_ATTR_CREATE_WQ_RESP_MAX_WR: u16 = 9;
    pub const UVERBS_ATTR_CREATE_WQ_RESP_MAX_SGE: u16 = 10;
    pub const UVERBS_ATTR_CREATE_WQ_RESP_WQ_NUM: u16 = 11;

    // enum uverbs_attrs_destroy_wq_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_WQ_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_DESTROY_WQ_RESP: u16 = 1;

    // enum uverbs_methods_wq
    pub const UVERBS_METHOD_WQ_CREATE: u16 = 0;
    pub const UVERBS_METHOD_WQ_DESTROY: u16 = 1;

    // enum uverbs_methods_actions_flow_action_ops
    pub const UVERBS_METHOD_FLOW_ACTION_ESP_CREATE: u16 = 0;
    pub const UVERBS_METHOD_FLOW_ACTION_DESTROY: u16 = 1;
    pub const UVERBS_METHOD_FLOW_ACTION_ESP_MODIFY: u16 = 2;

    // enum uverbs_attrs_alloc_dm_cmd_attr_ids
    pub const UVERBS_ATTR_ALLOC_DM_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_ALLOC_DM_LENGTH: u16 = 1;
    pub const UVERBS_ATTR_ALLOC_DM_ALIGNMENT: u16 = 2;

    // enum uverbs_attrs_free_dm_cmd_attr_ids
    pub const UVERBS_ATTR_FREE_DM_HANDLE: u16 = 0;

    // enum uverbs_methods_dm
    pub const UVERBS_METHOD_DM_ALLOC: u16 = 0;
    pub const UVERBS_METHOD_DM_FREE: u16 = 1;

    // enum uverbs_attrs_reg_dm_mr_cmd_attr_ids
    pub const UVERBS_ATTR_REG_DM_MR_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_REG_DM_MR_OFFSET: u16 = 1;
    pub const UVERBS_ATTR_REG_DM_MR_LENGTH: u16 = 2;
    pub const UVERBS_ATTR_REG_DM_MR_PD_HANDLE: u16 = 3;
    pub const UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS: u16 = 4;
    pub const UVERBS_ATTR_REG_DM_MR_DM_HANDLE: u16 = 5;
    pub const UVERBS_ATTR_REG_DM_MR_RESP_LKEY: u16 = 6;
    pub const UVERBS_ATTR_REG_DM_MR_RESP_RKEY: u16 = 7;

    // enum uverbs_methods_mr
    pub const UVERBS_METHOD_DM_MR_REG: u16 = 0;
    pub const UVERBS_METHOD_MR_DESTROY: u16 = 1;
    pub const UVERBS_METHOD_ADVISE_MR: u16 = 2;
    pub const UVERBS_METHOD_QUERY_MR: u16 = 3;
    pub const UVERBS_METHOD_REG_DMABUF_MR: u16 = 4;

    // enum uverbs_attrs_mr_destroy_ids
    pub const UVERBS_ATTR_DESTROY_MR_HANDLE: u16 = 0;

    // enum uverbs_attrs_advise_mr_cmd_attr_ids
    pub const UVERBS_ATTR_ADVISE_MR_PD_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_ADVISE_MR_ADVICE: u16 = 1;
    pub const UVERBS_ATTR_ADVISE_MR_FLAGS: u16 = 2;
    pub const UVERBS_ATTR_ADVISE_MR_SGE_LIST: u16 = 3;

    // enum uverbs_attrs_query_mr_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_MR_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_QUERY_MR_RESP_LKEY: u16 = 1;
    pub const UVERBS_ATTR_QUERY_MR_RESP_RKEY: u16 = 2;
    pub const UVERBS_ATTR_QUERY_MR_RESP_LENGTH: u16 = 3;
    pub const UVERBS_ATTR_QUERY_MR_RESP_IOVA: u16 = 4;

    // enum uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids
    pub const UVERBS_ATTR_REG_DMABUF_MR_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE: u16 = 1;
    pub const UVERBS_ATTR_REG_DMABUF_MR_OFFSET: u16 = 2;
    pub const UVERBS_ATTR_REG_DMABUF_MR_LENGTH: u16 = 3;
    pub const UVERBS_ATTR_REG_DMABUF_MR_IOVA: u16 = 4;
    pub const UVERBS_ATTR_REG_DMABUF_MR_FD: u16 = 5;
    pub const UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS: u16 = 6;
    pub const UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY: u16 = 7;
    pub const UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY: u16 = 8;

    // enum uverbs_attrs_create_counters_cmd_attr_ids
    pub const UVERBS_ATTR_CREATE_COUNTERS_HANDLE: u16 = 0;

    // enum uverbs_attrs_destroy_counters_cmd_attr_ids
    pub const UVERBS_ATTR_DESTROY_COUNTERS_HANDLE: u16 = 0;

    // enum uverbs_attrs_read_counters_cmd_attr_ids
    pub const UVERBS_ATTR_READ_COUNTERS_HANDLE: u16 = 0;
    pub const UVERBS_ATTR_READ_COUNTERS_BUFF: u16 = 1;
    pub const UVERBS_ATTR_READ_COUNTERS_FLAGS: u16 = 2;

    // enum uverbs_methods_actions_counters_ops
    pub const UVERBS_METHOD_COUNTERS_CREATE: u16 = 0;
    pub const UVERBS_METHOD_COUNTERS_DESTROY: u16 = 1;
    pub const UVERBS_METHOD_COUNTERS_READ: u16 = 2;

    // enum uverbs_attrs_info_handles_id
    pub const UVERBS_ATTR_INFO_OBJECT_ID: u16 = 0;
    pub const UVERBS_ATTR_INFO_TOTAL_HANDLES: u16 = 1;
    pub const UVERBS_ATTR_INFO_HANDLES_LIST: u16 = 2;

    // enum uverbs_methods_pd
    pub const UVERBS_METHOD_PD_DESTROY: u16 = 0;

    // enum uverbs_attrs_pd_destroy_ids
    pub const UVERBS_ATTR_DESTROY_PD_HANDLE: u16 = 0;

    // enum uverbs_methods_mw
    pub const UVERBS_METHOD_MW_DESTROY: u16 = 0;

    // enum uverbs_attrs_mw_destroy_ids
    pub const UVERBS_ATTR_DESTROY_MW_HANDLE: u16 = 0;

    // enum uverbs_methods_xrcd
    pub const UVERBS_METHOD_XRCD_DESTROY: u16 = 0;

    // enum uverbs_attrs_xrcd_destroy_ids
    pub const UVERBS_ATTR_DESTROY_XRCD_HANDLE: u16 = 0;

    // enum uverbs_methods_ah
    pub const UVERBS_METHOD_AH_DESTROY: u16 = 0;

    // enum uverbs_attrs_ah_destroy_ids
    pub const UVERBS_ATTR_DESTROY_AH_HANDLE: u16 = 0;

    // enum uverbs_methods_rwq_ind_tbl
    pub const UVERBS_METHOD_RWQ_IND_TBL_DESTROY: u16 = 0;

    // enum uverbs_attrs_rwq_ind_tbl_destroy_ids
    pub const UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE: u16 = 0;

    // enum uverbs_methods_flow
    pub const UVERBS_METHOD_FLOW_DESTROY: u16 = 0;

    // enum uverbs_attrs_flow_destroy_ids
    pub const UVERBS_ATTR_DESTROY_FLOW_HANDLE: u16 = 0;

    // enum uverbs_method_async_event
    pub const UVERBS_METHOD_ASYNC_EVENT_ALLOC: u16 = 0;

    // enum uverbs_attrs_async_event_create
    pub const UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE: u16 = 0;

    // enum uverbs_attrs_query_gid_table_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE: u16 = 0;
    pub const UVERBS_ATTR_QUERY_GID_TABLE_FLAGS: u16 = 1;
    pub const UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES: u16 = 2;
    pub const UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES: u16 = 3;

    // enum uverbs_attrs_query_gid_entry_cmd_attr_ids
    pub const UVERBS_ATTR_QUERY_GID_ENTRY_PORT: u16 = 0;
    pub const UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX: u16 = 1;
    pub const UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS: u16 = 2;
    pub const UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY: u16 = 3;
    pub const RDMA_IOCTL_MAGIC: u32 = 27;
    /// `_IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)`, the only uverbs ioctl request.
    pub const RDMA_VERBS_IOCTL: u32 = ioc(3, RDMA_IOCTL_MAGIC, 1, core::mem::size_of::<IbUverbsIoctlHdr>());
    pub const UVERBS_ID_NS_MASK: u16 = 0xf000;
    pub const UVERBS_ID_NS_SHIFT: u32 = 12;
    pub const UVERBS_UDATA_DRIVER_DATA_NS: u16 = 1;
    pub const UVERBS_UDATA_DRIVER_DATA_FLAG: u16 = 0x1000;
}

abi_structs! {
    /// `struct ib_uverbs_attr` (`<rdma/rdma_user_ioctl_cmds.h>`).
    ///
    /// One attribute of an ioctl method call (`UVERBS_ATTR_*` ids of the method).
    /// The kernel writes back `flags` (`UVERBS_ATTR_F_VALID_OUTPUT`) and `data` (new handles/fds).
    pub struct IbUverbsAttr: "struct ib_uverbs_attr" {
        pub attr_id: u16,
        pub len: u16,
        pub flags: u16,
        /// C union of `enum_data`, `reserved`.
        /// Represented as its largest member `reserved`; the other members are prefixes of the same bytes.
        pub attr_data: u16,
        /// C anonymous union of `data`, `data_s64`.
        /// Represented as its member `data`.
        pub data: u64,
    }

    /// Member `attr_data.enum_data` of `struct ib_uverbs_attr` (anonymous in C; checked through `__typeof__`).
    pub struct IbUverbsAttrEnumData: "__typeof__(((struct ib_uverbs_attr *)0)->attr_data.enum_data)" {
        pub elem_id: u8,
        pub reserved: u8,
    }

    /// `struct ib_uverbs_ioctl_hdr` (`<rdma/rdma_user_ioctl_cmds.h>`).
    ///
    /// Followed in the same buffer by the flexible array `attrs[]` (`struct ib_uverbs_attr`), not part of this struct.
    ///
    /// Header of every `RDMA_VERBS_IOCTL` call; followed by `num_attrs` [`IbUverbsAttr`]s.
    /// `length` must be exactly `24 + 16 * num_attrs`; `reserved1`/`reserved2` must be zero.
    pub struct IbUverbsIoctlHdr: "struct ib_uverbs_ioctl_hdr" {
        pub length: u16,
        pub object_id: u16,
        pub method_id: u16,
        pub num_attrs: u16,
        pub reserved1: u64,
        pub driver_id: u32,
        pub reserved2: u32,
    }
}

/// `_IOC(dir, type, nr, size)` with the asm-generic encoding (x86, arm, riscv, ...).
const fn ioc(dir: u32, ty: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (ty << 8) | nr
}
