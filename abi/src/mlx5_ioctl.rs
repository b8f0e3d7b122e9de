//! mlx5 driver ioctl namespace: every `MLX5_IB_OBJECT_*`, `MLX5_IB_METHOD_*` and `MLX5_IB_ATTR_*` id
//! of `<rdma/mlx5_user_ioctl_cmds.h>` (DEVX, UMEM, async cmd/event fds, UAR, VAR, PP, DM, flow
//! matcher, ...), and the enums and structs of `<rdma/mlx5_user_ioctl_verbs.h>`.

use crate::layout::{abi_consts, abi_structs};

abi_consts! {
    // enum mlx5_ib_create_flow_action_attrs
    pub const MLX5_IB_ATTR_CREATE_FLOW_ACTION_FLAGS: u16 = 0x1000;

    // enum mlx5_ib_dm_methods
    pub const MLX5_IB_METHOD_DM_MAP_OP_ADDR: u16 = 0x1000;
    pub const MLX5_IB_METHOD_DM_QUERY: u16 = 0x1001;

    // enum mlx5_ib_dm_map_op_addr_attrs
    pub const MLX5_IB_ATTR_DM_MAP_OP_ADDR_REQ_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DM_MAP_OP_ADDR_REQ_OP: u16 = 0x1001;
    pub const MLX5_IB_ATTR_DM_MAP_OP_ADDR_RESP_START_OFFSET: u16 = 0x1002;
    pub const MLX5_IB_ATTR_DM_MAP_OP_ADDR_RESP_PAGE_INDEX: u16 = 0x1003;

    // enum mlx5_ib_query_dm_attrs
    pub const MLX5_IB_ATTR_QUERY_DM_REQ_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_QUERY_DM_RESP_START_OFFSET: u16 = 0x1001;
    pub const MLX5_IB_ATTR_QUERY_DM_RESP_PAGE_INDEX: u16 = 0x1002;
    pub const MLX5_IB_ATTR_QUERY_DM_RESP_LENGTH: u16 = 0x1003;

    // enum mlx5_ib_alloc_dm_attrs
    pub const MLX5_IB_ATTR_ALLOC_DM_RESP_START_OFFSET: u16 = 0x1000;
    pub const MLX5_IB_ATTR_ALLOC_DM_RESP_PAGE_INDEX: u16 = 0x1001;
    pub const MLX5_IB_ATTR_ALLOC_DM_REQ_TYPE: u16 = 0x1002;

    // enum mlx5_ib_devx_methods
    pub const MLX5_IB_METHOD_DEVX_OTHER: u16 = 0x1000;
    pub const MLX5_IB_METHOD_DEVX_QUERY_UAR: u16 = 0x1001;
    pub const MLX5_IB_METHOD_DEVX_QUERY_EQN: u16 = 0x1002;
    pub const MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT: u16 = 0x1003;

    // enum mlx5_ib_devx_other_attrs
    pub const MLX5_IB_ATTR_DEVX_OTHER_CMD_IN: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT: u16 = 0x1001;

    // enum mlx5_ib_devx_obj_create_attrs
    pub const MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN: u16 = 0x1001;
    pub const MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT: u16 = 0x1002;

    // enum mlx5_ib_devx_query_uar_attrs
    pub const MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX: u16 = 0x1001;

    // enum mlx5_ib_devx_obj_destroy_attrs
    pub const MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE: u16 = 0x1000;

    // enum mlx5_ib_devx_obj_modify_attrs
    pub const MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN: u16 = 0x1001;
    pub const MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT: u16 = 0x1002;

    // enum mlx5_ib_devx_obj_query_attrs
    pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN: u16 = 0x1001;
    pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT: u16 = 0x1002;

    // enum mlx5_ib_devx_obj_query_async_attrs
    pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN: u16 = 0x1001;
    pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD: u16 = 0x1002;
    pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID: u16 = 0x1003;
    pub const MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN: u16 = 0x1004;

    // enum mlx5_ib_devx_subscribe_event_attrs
    pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE: u16 = 0x1001;
    pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST: u16 = 0x1002;
    pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM: u16 = 0x1003;
    pub const MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE: u16 = 0x1004;

    // enum mlx5_ib_devx_query_eqn_attrs
    pub const MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN: u16 = 0x1001;

    // enum mlx5_ib_devx_obj_methods
    pub const MLX5_IB_METHOD_DEVX_OBJ_CREATE: u16 = 0x1000;
    pub const MLX5_IB_METHOD_DEVX_OBJ_DESTROY: u16 = 0x1001;
    pub const MLX5_IB_METHOD_DEVX_OBJ_MODIFY: u16 = 0x1002;
    pub const MLX5_IB_METHOD_DEVX_OBJ_QUERY: u16 = 0x1003;
    pub const MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY: u16 = 0x1004;

    // enum mlx5_ib_var_alloc_attrs
    pub const MLX5_IB_ATTR_VAR_OBJ_ALLOC_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_VAR_OBJ_ALLOC_MMAP_OFFSET: u16 = 0x1001;
    pub const MLX5_IB_ATTR_VAR_OBJ_ALLOC_MMAP_LENGTH: u16 = 0x1002;
    pub const MLX5_IB_ATTR_VAR_OBJ_ALLOC_PAGE_ID: u16 = 0x1003;

    // enum mlx5_ib_var_obj_destroy_attrs
    pub const MLX5_IB_ATTR_VAR_OBJ_DESTROY_HANDLE: u16 = 0x1000;

    // enum mlx5_ib_var_obj_methods
    pub const MLX5_IB_METHOD_VAR_OBJ_ALLOC: u16 = 0x1000;
    pub const MLX5_IB_METHOD_VAR_OBJ_DESTROY: u16 = 0x1001;

    // enum mlx5_ib_uar_alloc_attrs
    pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE: u16 = 0x1001;
    pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET: u16 = 0x1002;
    pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH: u16 = 0x1003;
    pub const MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID: u16 = 0x1004;

    // enum mlx5_ib_uar_obj_destroy_attrs
    pub const MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE: u16 = 0x1000;

    // enum mlx5_ib_uar_obj_methods
    pub const MLX5_IB_METHOD_UAR_OBJ_ALLOC: u16 = 0x1000;
    pub const MLX5_IB_METHOD_UAR_OBJ_DESTROY: u16 = 0x1001;

    // enum mlx5_ib_devx_umem_reg_attrs
    pub const MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR: u16 = 0x1001;
    pub const MLX5_IB_ATTR_DEVX_UMEM_REG_LEN: u16 = 0x1002;
    pub const MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS: u16 = 0x1003;
    pub const MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID: u16 = 0x1004;
    pub const MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP: u16 = 0x1005;
    pub const MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD: u16 = 0x1006;

    // enum mlx5_ib_devx_umem_dereg_attrs
    pub const MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE: u16 = 0x1000;

    // enum mlx5_ib_pp_obj_methods
    pub const MLX5_IB_METHOD_PP_OBJ_ALLOC: u16 = 0x1000;
    pub const MLX5_IB_METHOD_PP_OBJ_DESTROY: u16 = 0x1001;

    // enum mlx5_ib_pp_alloc_attrs
    pub const MLX5_IB_ATTR_PP_OBJ_ALLOC_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_PP_OBJ_ALLOC_CTX: u16 = 0x1001;
    pub const MLX5_IB_ATTR_PP_OBJ_ALLOC_FLAGS: u16 = 0x1002;
    pub const MLX5_IB_ATTR_PP_OBJ_ALLOC_INDEX: u16 = 0x1003;

    // enum mlx5_ib_pp_obj_destroy_attrs
    pub const MLX5_IB_ATTR_PP_OBJ_DESTROY_HANDLE: u16 = 0x1000;

    // enum mlx5_ib_devx_umem_methods
    pub const MLX5_IB_METHOD_DEVX_UMEM_REG: u16 = 0x1000;
    pub const MLX5_IB_METHOD_DEVX_UMEM_DEREG: u16 = 0x1001;

    // enum mlx5_ib_devx_async_cmd_fd_alloc_attrs
    pub const MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE: u16 = 0x1000;

    // enum mlx5_ib_devx_async_event_fd_alloc_attrs
    pub const MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS: u16 = 0x1001;

    // enum mlx5_ib_devx_async_cmd_fd_methods
    pub const MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC: u16 = 0x1000;

    // enum mlx5_ib_devx_async_event_fd_methods
    pub const MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC: u16 = 0x1000;

    // enum mlx5_ib_objects
    pub const MLX5_IB_OBJECT_DEVX: u16 = 0x1000;
    pub const MLX5_IB_OBJECT_DEVX_OBJ: u16 = 0x1001;
    pub const MLX5_IB_OBJECT_DEVX_UMEM: u16 = 0x1002;
    pub const MLX5_IB_OBJECT_FLOW_MATCHER: u16 = 0x1003;
    pub const MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD: u16 = 0x1004;
    pub const MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD: u16 = 0x1005;
    pub const MLX5_IB_OBJECT_VAR: u16 = 0x1006;
    pub const MLX5_IB_OBJECT_PP: u16 = 0x1007;
    pub const MLX5_IB_OBJECT_UAR: u16 = 0x1008;
    pub const MLX5_IB_OBJECT_STEERING_ANCHOR: u16 = 0x1009;

    // enum mlx5_ib_flow_matcher_create_attrs
    pub const MLX5_IB_ATTR_FLOW_MATCHER_CREATE_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_FLOW_MATCHER_MATCH_MASK: u16 = 0x1001;
    pub const MLX5_IB_ATTR_FLOW_MATCHER_FLOW_TYPE: u16 = 0x1002;
    pub const MLX5_IB_ATTR_FLOW_MATCHER_MATCH_CRITERIA: u16 = 0x1003;
    pub const MLX5_IB_ATTR_FLOW_MATCHER_FLOW_FLAGS: u16 = 0x1004;
    pub const MLX5_IB_ATTR_FLOW_MATCHER_FT_TYPE: u16 = 0x1005;

    // enum mlx5_ib_flow_matcher_destroy_attrs
    pub const MLX5_IB_ATTR_FLOW_MATCHER_DESTROY_HANDLE: u16 = 0x1000;

    // enum mlx5_ib_flow_matcher_methods
    pub const MLX5_IB_METHOD_FLOW_MATCHER_CREATE: u16 = 0x1000;
    pub const MLX5_IB_METHOD_FLOW_MATCHER_DESTROY: u16 = 0x1001;

    // enum mlx5_ib_flow_steering_anchor_create_attrs
    pub const MLX5_IB_ATTR_STEERING_ANCHOR_CREATE_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_STEERING_ANCHOR_FT_TYPE: u16 = 0x1001;
    pub const MLX5_IB_ATTR_STEERING_ANCHOR_PRIORITY: u16 = 0x1002;
    pub const MLX5_IB_ATTR_STEERING_ANCHOR_FT_ID: u16 = 0x1003;

    // enum mlx5_ib_flow_steering_anchor_destroy_attrs
    pub const MLX5_IB_ATTR_STEERING_ANCHOR_DESTROY_HANDLE: u16 = 0x1000;

    // enum mlx5_ib_steering_anchor_methods
    pub const MLX5_IB_METHOD_STEERING_ANCHOR_CREATE: u16 = 0x1000;
    pub const MLX5_IB_METHOD_STEERING_ANCHOR_DESTROY: u16 = 0x1001;

    // enum mlx5_ib_device_query_context_attrs
    pub const MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX: u16 = 0x1000;

    // enum mlx5_ib_flow_type
    pub const MLX5_IB_FLOW_TYPE_NORMAL: u16 = 0;
    pub const MLX5_IB_FLOW_TYPE_SNIFFER: u16 = 1;
    pub const MLX5_IB_FLOW_TYPE_ALL_DEFAULT: u16 = 2;
    pub const MLX5_IB_FLOW_TYPE_MC_DEFAULT: u16 = 3;

    // enum mlx5_ib_create_flow_flags
    pub const MLX5_IB_ATTR_CREATE_FLOW_FLAGS_DEFAULT_MISS: u16 = 1;
    pub const MLX5_IB_ATTR_CREATE_FLOW_FLAGS_DROP: u16 = 2;

    // enum mlx5_ib_create_flow_attrs
    pub const MLX5_IB_ATTR_CREATE_FLOW_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_CREATE_FLOW_MATCH_VALUE: u16 = 0x1001;
    pub const MLX5_IB_ATTR_CREATE_FLOW_DEST_QP: u16 = 0x1002;
    pub const MLX5_IB_ATTR_CREATE_FLOW_DEST_DEVX: u16 = 0x1003;
    pub const MLX5_IB_ATTR_CREATE_FLOW_MATCHER: u16 = 0x1004;
    pub const MLX5_IB_ATTR_CREATE_FLOW_ARR_FLOW_ACTIONS: u16 = 0x1005;
    pub const MLX5_IB_ATTR_CREATE_FLOW_TAG: u16 = 0x1006;
    pub const MLX5_IB_ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX: u16 = 0x1007;
    pub const MLX5_IB_ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX_OFFSET: u16 = 0x1008;
    pub const MLX5_IB_ATTR_CREATE_FLOW_FLAGS: u16 = 0x1009;

    // enum mlx5_ib_destroy_flow_attrs
    pub const MLX5_IB_ATTR_DESTROY_FLOW_HANDLE: u16 = 0x1000;

    // enum mlx5_ib_flow_methods
    pub const MLX5_IB_METHOD_CREATE_FLOW: u16 = 0x1000;
    pub const MLX5_IB_METHOD_DESTROY_FLOW: u16 = 0x1001;

    // enum mlx5_ib_flow_action_methods
    pub const MLX5_IB_METHOD_FLOW_ACTION_CREATE_MODIFY_HEADER: u16 = 0x1000;
    pub const MLX5_IB_METHOD_FLOW_ACTION_CREATE_PACKET_REFORMAT: u16 = 0x1001;

    // enum mlx5_ib_create_flow_action_create_modify_header_attrs
    pub const MLX5_IB_ATTR_CREATE_MODIFY_HEADER_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_CREATE_MODIFY_HEADER_ACTIONS_PRM: u16 = 0x1001;
    pub const MLX5_IB_ATTR_CREATE_MODIFY_HEADER_FT_TYPE: u16 = 0x1002;

    // enum mlx5_ib_create_flow_action_create_packet_reformat_attrs
    pub const MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_TYPE: u16 = 0x1001;
    pub const MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_FT_TYPE: u16 = 0x1002;
    pub const MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_DATA_BUF: u16 = 0x1003;

    // enum mlx5_ib_query_pd_attrs
    pub const MLX5_IB_ATTR_QUERY_PD_HANDLE: u16 = 0x1000;
    pub const MLX5_IB_ATTR_QUERY_PD_RESP_PDN: u16 = 0x1001;

    // enum mlx5_ib_pd_methods
    pub const MLX5_IB_METHOD_PD_QUERY: u16 = 0x1000;

    // enum mlx5_ib_device_methods
    pub const MLX5_IB_METHOD_QUERY_PORT: u16 = 0x1000;

    // enum mlx5_ib_query_port_attrs
    pub const MLX5_IB_ATTR_QUERY_PORT_PORT_NUM: u16 = 0x1000;
    pub const MLX5_IB_ATTR_QUERY_PORT: u16 = 0x1001;

    // enum mlx5_ib_uapi_flow_action_flags
    pub const MLX5_IB_UAPI_FLOW_ACTION_FLAGS_REQUIRE_METADATA: u32 = 1;

    // enum mlx5_ib_uapi_flow_table_type
    pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_NIC_RX: u32 = 0;
    pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_NIC_TX: u32 = 1;
    pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_FDB: u32 = 2;
    pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_RDMA_RX: u32 = 3;
    pub const MLX5_IB_UAPI_FLOW_TABLE_TYPE_RDMA_TX: u32 = 4;

    // enum mlx5_ib_uapi_flow_action_packet_reformat_type
    pub const MLX5_IB_UAPI_FLOW_ACTION_PACKET_REFORMAT_TYPE_L2_TUNNEL_TO_L2: u32 = 0;
    pub const MLX5_IB_UAPI_FLOW_ACTION_PACKET_REFORMAT_TYPE_L2_TO_L2_TUNNEL: u32 = 1;
    pub const MLX5_IB_UAPI_FLOW_ACTION_PACKET_REFORMAT_TYPE_L3_TUNNEL_TO_L2: u32 = 2;
    pub const MLX5_IB_UAPI_FLOW_ACTION_PACKET_REFORMAT_TYPE_L2_TO_L3_TUNNEL: u32 = 3;

    // enum mlx5_ib_uapi_dm_type
    pub const MLX5_IB_UAPI_DM_TYPE_MEMIC: u32 = 0;
    pub const MLX5_IB_UAPI_DM_TYPE_STEERING_SW_ICM: u32 = 1;
    pub const MLX5_IB_UAPI_DM_TYPE_HEADER_MODIFY_SW_ICM: u32 = 2;
    pub const MLX5_IB_UAPI_DM_TYPE_HEADER_MODIFY_PATTERN_SW_ICM: u32 = 3;

    // enum mlx5_ib_uapi_devx_create_event_channel_flags
    pub const MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA: u32 = 1;

    // enum mlx5_ib_uapi_pp_alloc_flags
    pub const MLX5_IB_UAPI_PP_ALLOC_FLAGS_DEDICATED_INDEX: u32 = 1;

    // enum mlx5_ib_uapi_uar_alloc_type
    pub const MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF: u32 = 0;
    pub const MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC: u32 = 1;

    // enum mlx5_ib_uapi_query_port_flags
    pub const MLX5_IB_UAPI_QUERY_PORT_VPORT: u32 = 1;
    pub const MLX5_IB_UAPI_QUERY_PORT_VPORT_VHCA_ID: u32 = 2;
    pub const MLX5_IB_UAPI_QUERY_PORT_VPORT_STEERING_ICM_RX: u32 = 4;
    pub const MLX5_IB_UAPI_QUERY_PORT_VPORT_STEERING_ICM_TX: u32 = 8;
    pub const MLX5_IB_UAPI_QUERY_PORT_VPORT_REG_C0: u32 = 0x10;
    pub const MLX5_IB_UAPI_QUERY_PORT_ESW_OWNER_VHCA_ID: u32 = 0x20;
    pub const MLX5_IB_DW_MATCH_PARAM: u32 = 160;
}

abi_structs! {
    /// `struct mlx5_ib_match_params` (`<rdma/mlx5_user_ioctl_cmds.h>`).
    pub struct Mlx5IbMatchParams: "struct mlx5_ib_match_params" {
        pub match_params: [u32; 160],
    }

    /// `struct mlx5_ib_uapi_devx_async_cmd_hdr` (`<rdma/mlx5_user_ioctl_verbs.h>`).
    ///
    /// Followed in the same buffer by the flexible array `out_data[]` (`__u8`), not part of this struct.
    pub struct Mlx5IbUapiDevxAsyncCmdHdr: "struct mlx5_ib_uapi_devx_async_cmd_hdr" {
        pub wr_id: u64,
    }

    /// `struct mlx5_ib_uapi_devx_async_event_hdr` (`<rdma/mlx5_user_ioctl_verbs.h>`).
    ///
    /// Followed in the same buffer by the flexible array `out_data[]` (`__u8`), not part of this struct.
    pub struct Mlx5IbUapiDevxAsyncEventHdr: "struct mlx5_ib_uapi_devx_async_event_hdr" {
        pub cookie: u64,
    }

    /// `struct mlx5_ib_uapi_reg` (`<rdma/mlx5_user_ioctl_verbs.h>`).
    pub struct Mlx5IbUapiReg: "struct mlx5_ib_uapi_reg" {
        pub value: u32,
        pub mask: u32,
    }

    /// `struct mlx5_ib_uapi_query_port` (`<rdma/mlx5_user_ioctl_verbs.h>`).
    pub struct Mlx5IbUapiQueryPort: "struct mlx5_ib_uapi_query_port" {
        pub flags: u64,
        pub vport: u16,
        pub vport_vhca_id: u16,
        pub esw_owner_vhca_id: u16,
        pub rsvd0: u16,
        pub vport_steering_icm_rx: u64,
        pub vport_steering_icm_tx: u64,
        pub reg_c0: Mlx5IbUapiReg,
    }
}
