//! RDMA netlink (`NETLINK_RDMA`), `<rdma/rdma_netlink.h>`: client numbers (`RDMA_NL_*`), the nldev
//! commands (`RDMA_NLDEV_CMD_*`) and attributes (`RDMA_NLDEV_ATTR_*`), the local-service and iwpm
//! values, and the `RDMA_NL_GET_*` helpers as `const fn`s.

use crate::layout::{abi_consts, abi_structs};

abi_consts! {
    // anonymous enum
    pub const RDMA_NL_IWCM: u16 = 2;
    pub const RDMA_NL_RSVD: u16 = 3;
    pub const RDMA_NL_LS: u16 = 4;
    pub const RDMA_NL_NLDEV: u16 = 5;
    pub const RDMA_NL_NUM_CLIENTS: u16 = 6;

    // anonymous enum
    pub const RDMA_NL_GROUP_IWPM: u16 = 2;
    pub const RDMA_NL_GROUP_LS: u16 = 3;
    pub const RDMA_NL_NUM_GROUPS: u16 = 4;

    // anonymous enum
    pub const IWPM_FLAGS_NO_PORT_MAP: u32 = 1;

    // anonymous enum
    pub const RDMA_NL_IWPM_REG_PID: u16 = 0;
    pub const RDMA_NL_IWPM_ADD_MAPPING: u16 = 1;
    pub const RDMA_NL_IWPM_QUERY_MAPPING: u16 = 2;
    pub const RDMA_NL_IWPM_REMOVE_MAPPING: u16 = 3;
    pub const RDMA_NL_IWPM_REMOTE_INFO: u16 = 4;
    pub const RDMA_NL_IWPM_HANDLE_ERR: u16 = 5;
    pub const RDMA_NL_IWPM_MAPINFO: u16 = 6;
    pub const RDMA_NL_IWPM_MAPINFO_NUM: u16 = 7;
    pub const RDMA_NL_IWPM_HELLO: u16 = 8;
    pub const RDMA_NL_IWPM_NUM_OPS: u16 = 9;

    // anonymous enum
    pub const IWPM_NLA_REG_PID_UNSPEC: u32 = 0;
    pub const IWPM_NLA_REG_PID_SEQ: u32 = 1;
    pub const IWPM_NLA_REG_IF_NAME: u32 = 2;
    pub const IWPM_NLA_REG_IBDEV_NAME: u32 = 3;
    pub const IWPM_NLA_REG_ULIB_NAME: u32 = 4;
    pub const IWPM_NLA_REG_PID_MAX: u32 = 5;

    // anonymous enum
    pub const IWPM_NLA_RREG_PID_UNSPEC: u32 = 0;
    pub const IWPM_NLA_RREG_PID_SEQ: u32 = 1;
    pub const IWPM_NLA_RREG_IBDEV_NAME: u32 = 2;
    pub const IWPM_NLA_RREG_ULIB_NAME: u32 = 3;
    pub const IWPM_NLA_RREG_ULIB_VER: u32 = 4;
    pub const IWPM_NLA_RREG_PID_ERR: u32 = 5;
    pub const IWPM_NLA_RREG_PID_MAX: u32 = 6;

    // anonymous enum
    pub const IWPM_NLA_MANAGE_MAPPING_UNSPEC: u32 = 0;
    pub const IWPM_NLA_MANAGE_MAPPING_SEQ: u32 = 1;
    pub const IWPM_NLA_MANAGE_ADDR: u32 = 2;
    pub const IWPM_NLA_MANAGE_FLAGS: u32 = 3;
    pub const IWPM_NLA_MANAGE_MAPPING_MAX: u32 = 4;

    // anonymous enum
    pub const IWPM_NLA_RMANAGE_MAPPING_UNSPEC: u32 = 0;
    pub const IWPM_NLA_RMANAGE_MAPPING_SEQ: u32 = 1;
    pub const IWPM_NLA_RMANAGE_ADDR: u32 = 2;
    pub const IWPM_NLA_RMANAGE_MAPPED_LOC_ADDR: u32 = 3;
    pub const IWPM_NLA_MANAGE_MAPPED_LOC_ADDR: u32 = 3;
    pub const IWPM_NLA_RMANAGE_MAPPING_ERR: u32 = 4;
    pub const IWPM_NLA_RMANAGE_MAPPING_MAX: u32 = 5;

    // anonymous enum
    pub const IWPM_NLA_QUERY_MAPPING_UNSPEC: u32 = 0;
    pub const IWPM_NLA_QUERY_MAPPING_SEQ: u32 = 1;
    pub const IWPM_NLA_QUERY_LOCAL_ADDR: u32 = 2;
    pub const IWPM_NLA_QUERY_REMOTE_ADDR: u32 = 3;
    pub const IWPM_NLA_QUERY_FLAGS: u32 = 4;
    pub const IWPM_NLA_QUERY_MAPPING_MAX: u32 = 5;

    // anonymous enum
    pub const IWPM_NLA_RQUERY_MAPPING_UNSPEC: u32 = 0;
    pub const IWPM_NLA_RQUERY_MAPPING_SEQ: u32 = 1;
    pub const IWPM_NLA_RQUERY_LOCAL_ADDR: u32 = 2;
    pub const IWPM_NLA_RQUERY_REMOTE_ADDR: u32 = 3;
    pub const IWPM_NLA_RQUERY_MAPPED_LOC_ADDR: u32 = 4;
    pub const IWPM_NLA_RQUERY_MAPPED_REM_ADDR: u32 = 5;
    pub const IWPM_NLA_RQUERY_MAPPING_ERR: u32 = 6;
    pub const IWPM_NLA_RQUERY_MAPPING_MAX: u32 = 7;

    // anonymous enum
    pub const IWPM_NLA_MAPINFO_REQ_UNSPEC: u32 = 0;
    pub const IWPM_NLA_MAPINFO_ULIB_NAME: u32 = 1;
    pub const IWPM_NLA_MAPINFO_ULIB_VER: u32 = 2;
    pub const IWPM_NLA_MAPINFO_REQ_MAX: u32 = 3;

    // anonymous enum
    pub const IWPM_NLA_MAPINFO_UNSPEC: u32 = 0;
    pub const IWPM_NLA_MAPINFO_LOCAL_ADDR: u32 = 1;
    pub const IWPM_NLA_MAPINFO_MAPPED_ADDR: u32 = 2;
    pub const IWPM_NLA_MAPINFO_FLAGS: u32 = 3;
    pub const IWPM_NLA_MAPINFO_MAX: u32 = 4;

    // anonymous enum
    pub const IWPM_NLA_MAPINFO_NUM_UNSPEC: u32 = 0;
    pub const IWPM_NLA_MAPINFO_SEQ: u32 = 1;
    pub const IWPM_NLA_MAPINFO_SEND_NUM: u32 = 2;
    pub const IWPM_NLA_MAPINFO_ACK_NUM: u32 = 3;
    pub const IWPM_NLA_MAPINFO_NUM_MAX: u32 = 4;

    // anonymous enum
    pub const IWPM_NLA_ERR_UNSPEC: u32 = 0;
    pub const IWPM_NLA_ERR_SEQ: u32 = 1;
    pub const IWPM_NLA_ERR_CODE: u32 = 2;
    pub const IWPM_NLA_ERR_MAX: u32 = 3;

    // anonymous enum
    pub const IWPM_NLA_HELLO_UNSPEC: u32 = 0;
    pub const IWPM_NLA_HELLO_ABI_VERSION: u32 = 1;
    pub const IWPM_NLA_HELLO_MAX: u32 = 2;

    // anonymous enum
    pub const RDMA_NODE_IB_CA: u32 = 1;
    pub const RDMA_NODE_IB_SWITCH: u32 = 2;
    pub const RDMA_NODE_IB_ROUTER: u32 = 3;
    pub const RDMA_NODE_RNIC: u32 = 4;
    pub const RDMA_NODE_USNIC: u32 = 5;
    pub const RDMA_NODE_USNIC_UDP: u32 = 6;
    pub const RDMA_NODE_UNSPECIFIED: u32 = 7;

    // anonymous enum
    pub const RDMA_NL_LS_OP_RESOLVE: u16 = 0;
    pub const RDMA_NL_LS_OP_SET_TIMEOUT: u16 = 1;
    pub const RDMA_NL_LS_OP_IP_RESOLVE: u16 = 2;
    pub const RDMA_NL_LS_NUM_OPS: u16 = 3;

    // anonymous enum
    pub const LS_RESOLVE_PATH_USE_ALL: u32 = 0;
    pub const LS_RESOLVE_PATH_USE_UNIDIRECTIONAL: u32 = 1;
    pub const LS_RESOLVE_PATH_USE_GMP: u32 = 2;
    pub const LS_RESOLVE_PATH_USE_MAX: u32 = 3;

    // anonymous enum
    pub const LS_NLA_TYPE_UNSPEC: u32 = 0;
    pub const LS_NLA_TYPE_PATH_RECORD: u32 = 1;
    pub const LS_NLA_TYPE_TIMEOUT: u32 = 2;
    pub const LS_NLA_TYPE_SERVICE_ID: u32 = 3;
    pub const LS_NLA_TYPE_DGID: u32 = 4;
    pub const LS_NLA_TYPE_SGID: u32 = 5;
    pub const LS_NLA_TYPE_TCLASS: u32 = 6;
    pub const LS_NLA_TYPE_PKEY: u32 = 7;
    pub const LS_NLA_TYPE_QOS_CLASS: u32 = 8;
    pub const LS_NLA_TYPE_IPV4: u32 = 9;
    pub const LS_NLA_TYPE_IPV6: u32 = 10;
    pub const LS_NLA_TYPE_MAX: u32 = 11;

    // enum rdma_nldev_command
    pub const RDMA_NLDEV_CMD_UNSPEC: u16 = 0;
    pub const RDMA_NLDEV_CMD_GET: u16 = 1;
    pub const RDMA_NLDEV_CMD_SET: u16 = 2;
    pub const RDMA_NLDEV_CMD_NEWLINK: u16 = 3;
    pub const RDMA_NLDEV_CMD_DELLINK: u16 = 4;
    pub const RDMA_NLDEV_CMD_PORT_GET: u16 = 5;
    pub const RDMA_NLDEV_CMD_SYS_GET: u16 = 6;
    pub const RDMA_NLDEV_CMD_SYS_SET: u16 = 7;
    pub const RDMA_NLDEV_CMD_RES_GET: u16 = 9;
    pub const RDMA_NLDEV_CMD_RES_QP_GET: u16 = 10;
    pub const RDMA_NLDEV_CMD_RES_CM_ID_GET: u16 = 11;
    pub const RDMA_NLDEV_CMD_RES_CQ_GET: u16 = 12;
    pub const RDMA_NLDEV_CMD_RES_MR_GET: u16 = 13;
    pub const RDMA_NLDEV_CMD_RES_PD_GET: u16 = 14;
    pub const RDMA_NLDEV_CMD_GET_CHARDEV: u16 = 15;
    pub const RDMA_NLDEV_CMD_STAT_SET: u16 = 0x10;
    pub const RDMA_NLDEV_CMD_STAT_GET: u16 = 17;
    pub const RDMA_NLDEV_CMD_STAT_DEL: u16 = 18;
    pub const RDMA_NLDEV_CMD_RES_QP_GET_RAW: u16 = 19;
    pub const RDMA_NLDEV_CMD_RES_CQ_GET_RAW: u16 = 20;
    pub const RDMA_NLDEV_CMD_RES_MR_GET_RAW: u16 = 21;
    pub const RDMA_NLDEV_CMD_RES_CTX_GET: u16 = 22;
    pub const RDMA_NLDEV_CMD_RES_SRQ_GET: u16 = 23;
    pub const RDMA_NLDEV_CMD_STAT_GET_STATUS: u16 = 24;
    // RDMA_NLDEV_NUM_OPS is left out: it counts the commands, so it grows
    // with every kernel that adds one, and no message carries it.

    // enum rdma_nldev_print_type
    pub const RDMA_NLDEV_PRINT_TYPE_UNSPEC: u32 = 0;
    pub const RDMA_NLDEV_PRINT_TYPE_HEX: u32 = 1;

    // enum rdma_nldev_attr
    pub const RDMA_NLDEV_ATTR_UNSPEC: u16 = 0;
    pub const RDMA_NLDEV_ATTR_PAD: u16 = 0;
    pub const RDMA_NLDEV_ATTR_DEV_INDEX: u16 = 1;
    pub const RDMA_NLDEV_ATTR_DEV_NAME: u16 = 2;
    pub const RDMA_NLDEV_ATTR_PORT_INDEX: u16 = 3;
    pub const RDMA_NLDEV_ATTR_CAP_FLAGS: u16 = 4;
    pub const RDMA_NLDEV_ATTR_FW_VERSION: u16 = 5;
    pub const RDMA_NLDEV_ATTR_NODE_GUID: u16 = 6;
    pub const RDMA_NLDEV_ATTR_SYS_IMAGE_GUID: u16 = 7;
    pub const RDMA_NLDEV_ATTR_SUBNET_PREFIX: u16 = 8;
    pub const RDMA_NLDEV_ATTR_LID: u16 = 9;
    pub const RDMA_NLDEV_ATTR_SM_LID: u16 = 10;
    pub const RDMA_NLDEV_ATTR_LMC: u16 = 11;
    pub const RDMA_NLDEV_ATTR_PORT_STATE: u16 = 12;
    pub const RDMA_NLDEV_ATTR_PORT_PHYS_STATE: u16 = 13;
    pub const RDMA_NLDEV_ATTR_DEV_NODE_TYPE: u16 = 14;
    pub const RDMA_NLDEV_ATTR_RES_SUMMARY: u16 = 15;
    pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY: u16 = 0x10;
    pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME: u16 = 17;
    pub const RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR: u16 = 18;
    pub const RDMA_NLDEV_ATTR_RES_QP: u16 = 19;
    pub const RDMA_NLDEV_ATTR_RES_QP_ENTRY: u16 = 20;
    pub const RDMA_NLDEV_ATTR_RES_LQPN: u16 = 21;
    pub const RDMA_NLDEV_ATTR_RES_RQPN: u16 = 22;
    pub const RDMA_NLDEV_ATTR_RES_RQ_PSN: u16 = 23;
    pub const RDMA_NLDEV_ATTR_RES_SQ_PSN: u16 = 24;
    pub const RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE: u16 = 25;
    pub const RDMA_NLDEV_ATTR_RES_TYPE: u16 = 26;
    pub const RDMA_NLDEV_ATTR_RES_STATE: u16 = 27;
    pub const RDMA_NLDEV_ATTR_RES_PID: u16 = 28;
    pub const RDMA_NLDEV_ATTR_RES_KERN_NAME: u16 = 29;
    pub const RDMA_NLDEV_ATTR_RES_CM_ID: u16 = 30;
    pub const RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY: u16 = 31;
    pub const RDMA_NLDEV_ATTR_RES_PS: u16 = 0x20;
    pub const RDMA_NLDEV_ATTR_RES_SRC_ADDR: u16 = 33;
    pub const RDMA_NLDEV_ATTR_RES_DST_ADDR: u16 = 34;
    pub const RDMA_NLDEV_ATTR_RES_CQ: u16 = 35;
    pub const RDMA_NLDEV_ATTR_RES_CQ_ENTRY: u16 = 36;
    pub const RDMA_NLDEV_ATTR_RES_CQE: u16 = 37;
    pub const RDMA_NLDEV_ATTR_RES_USECNT: u16 = 38;
    pub const RDMA_NLDEV_ATTR_RES_POLL_CTX: u16 = 39;
    pub const RDMA_NLDEV_ATTR_RES_MR: u16 = 40;
    pub const RDMA_NLDEV_ATTR_RES_MR_ENTRY: u16 = 41;
    pub const RDMA_NLDEV_ATTR_RES_RKEY: u16 = 42;
    pub const RDMA_NLDEV_ATTR_RES_LKEY: u16 = 43;
    pub const RDMA_NLDEV_ATTR_RES_IOVA: u16 = 44;
    pub const RDMA_NLDEV_ATTR_RES_MRLEN: u16 = 45;
    pub const RDMA_NLDEV_ATTR_RES_PD: u16 = 46;
    pub const RDMA_NLDEV_ATTR_RES_PD_ENTRY: u16 = 47;
    pub const RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY: u16 = 48;
    pub const RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY: u16 = 49;
    pub const RDMA_NLDEV_ATTR_NDEV_INDEX: u16 = 50;
    pub const RDMA_NLDEV_ATTR_NDEV_NAME: u16 = 51;
    pub const RDMA_NLDEV_ATTR_DRIVER: u16 = 52;
    pub const RDMA_NLDEV_ATTR_DRIVER_ENTRY: u16 = 53;
    pub const RDMA_NLDEV_ATTR_DRIVER_STRING: u16 = 54;
    pub const RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE: u16 = 55;
    pub const RDMA_NLDEV_ATTR_DRIVER_S32: u16 = 56;
    pub const RDMA_NLDEV_ATTR_DRIVER_U32: u16 = 57;
    pub const RDMA_NLDEV_ATTR_DRIVER_S64: u16 = 58;
    pub const RDMA_NLDEV_ATTR_DRIVER_U64: u16 = 59;
    pub const RDMA_NLDEV_ATTR_RES_PDN: u16 = 60;
    pub const RDMA_NLDEV_ATTR_RES_CQN: u16 = 61;
    pub const RDMA_NLDEV_ATTR_RES_MRN: u16 = 62;
    pub const RDMA_NLDEV_ATTR_RES_CM_IDN: u16 = 63;
    pub const RDMA_NLDEV_ATTR_RES_CTXN: u16 = 0x40;
    pub const RDMA_NLDEV_ATTR_LINK_TYPE: u16 = 65;
    pub const RDMA_NLDEV_SYS_ATTR_NETNS_MODE: u16 = 66;
    pub const RDMA_NLDEV_ATTR_DEV_PROTOCOL: u16 = 67;
    pub const RDMA_NLDEV_NET_NS_FD: u16 = 68;
    pub const RDMA_NLDEV_ATTR_CHARDEV_TYPE: u16 = 69;
    pub const RDMA_NLDEV_ATTR_CHARDEV_NAME: u16 = 70;
    pub const RDMA_NLDEV_ATTR_CHARDEV_ABI: u16 = 71;
    pub const RDMA_NLDEV_ATTR_CHARDEV: u16 = 72;
    pub const RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID: u16 = 73;
    pub const RDMA_NLDEV_ATTR_STAT_MODE: u16 = 74;
    pub const RDMA_NLDEV_ATTR_STAT_RES: u16 = 75;
    pub const RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK: u16 = 76;
    pub const RDMA_NLDEV_ATTR_STAT_COUNTER: u16 = 77;
    pub const RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY: u16 = 78;
    pub const RDMA_NLDEV_ATTR_STAT_COUNTER_ID: u16 = 79;
    pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTERS: u16 = 80;
    pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY: u16 = 81;
    pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME: u16 = 82;
    pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE: u16 = 83;
    pub const RDMA_NLDEV_ATTR_DEV_DIM: u16 = 84;
    pub const RDMA_NLDEV_ATTR_RES_RAW: u16 = 85;
    pub const RDMA_NLDEV_ATTR_RES_CTX: u16 = 86;
    pub const RDMA_NLDEV_ATTR_RES_CTX_ENTRY: u16 = 87;
    pub const RDMA_NLDEV_ATTR_RES_SRQ: u16 = 88;
    pub const RDMA_NLDEV_ATTR_RES_SRQ_ENTRY: u16 = 89;
    pub const RDMA_NLDEV_ATTR_RES_SRQN: u16 = 90;
    pub const RDMA_NLDEV_ATTR_MIN_RANGE: u16 = 91;
    pub const RDMA_NLDEV_ATTR_MAX_RANGE: u16 = 92;
    pub const RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK: u16 = 93;
    pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX: u16 = 94;
    pub const RDMA_NLDEV_ATTR_STAT_HWCOUNTER_DYNAMIC: u16 = 95;
    // RDMA_NLDEV_ATTR_MAX is left out: it is one past the last attribute, so
    // it changes whenever a kernel adds one (Debian's 6.1.192 headers add
    // three and make it 99; 6.1.187's say 96). Attribute parsers skip ids they
    // do not know instead.

    // enum rdma_nl_counter_mode
    pub const RDMA_COUNTER_MODE_NONE: u32 = 0;
    pub const RDMA_COUNTER_MODE_AUTO: u32 = 1;
    pub const RDMA_COUNTER_MODE_MANUAL: u32 = 2;
    pub const RDMA_COUNTER_MODE_MAX: u32 = 3;

    // enum rdma_nl_counter_mask
    pub const RDMA_COUNTER_MASK_QP_TYPE: u32 = 1;
    pub const RDMA_COUNTER_MASK_PID: u32 = 2;
    pub const IWPM_UABI_VERSION_MIN: u32 = 3;
    pub const IWPM_UABI_VERSION: u32 = 4;
    pub const IWPM_NLA_MAPINFO_SEND_MAX: u32 = 3;
    pub const IWPM_NLA_REMOVE_MAPPING_MAX: u32 = 3;
    pub const RDMA_NL_LS_F_ERR: u16 = 0x100;
    pub const LS_DEVICE_NAME_MAX: u32 = 0x40;
    pub const RDMA_NLA_F_MANDATORY: u16 = 0x2000;
}

abi_structs! {
    /// `struct rdma_ls_resolve_header` (`<rdma/rdma_netlink.h>`).
    pub struct RdmaLsResolveHeader: "struct rdma_ls_resolve_header" {
        pub device_name: [u8; 64],
        pub port_num: u8,
        pub path_use: u8,
    }

    /// `struct rdma_ls_ip_resolve_header` (`<rdma/rdma_netlink.h>`).
    pub struct RdmaLsIpResolveHeader: "struct rdma_ls_ip_resolve_header" {
        pub ifindex: u32,
    }

    /// `struct rdma_nla_ls_gid` (`<rdma/rdma_netlink.h>`).
    pub struct RdmaNlaLsGid: "struct rdma_nla_ls_gid" {
        pub gid: [u8; 16],
    }
}

/// `RDMA_NL_GET_CLIENT(type)`: the client part of a netlink message type.
pub const fn rdma_nl_get_client(nlmsg_type: u16) -> u16 {
    (nlmsg_type & (((1 << 6) - 1) << 10)) >> 10
}

/// `RDMA_NL_GET_OP(type)`: the operation part of a netlink message type.
pub const fn rdma_nl_get_op(nlmsg_type: u16) -> u16 {
    nlmsg_type & ((1 << 10) - 1)
}

/// `RDMA_NL_GET_TYPE(client, op)`: the netlink message type for `op` of `client`.
pub const fn rdma_nl_get_type(client: u16, op: u16) -> u16 {
    (client << 10) + op
}

/// Derived values checked against the C macros by the layout test.
pub(crate) const EXPRS: &[crate::layout::ExprLayout] = &[
    crate::layout::ExprLayout {
        c: "RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET)",
        value: rdma_nl_get_type(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET) as i128,
    },
    crate::layout::ExprLayout {
        c: "RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_QP_GET)",
        value: rdma_nl_get_type(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_QP_GET) as i128,
    },
    crate::layout::ExprLayout {
        c: "RDMA_NL_GET_CLIENT(RDMA_NL_GET_TYPE(RDMA_NL_LS, 7))",
        value: rdma_nl_get_client(rdma_nl_get_type(RDMA_NL_LS, 7)) as i128,
    },
    crate::layout::ExprLayout {
        c: "RDMA_NL_GET_OP(RDMA_NL_GET_TYPE(RDMA_NL_LS, 7))",
        value: rdma_nl_get_op(rdma_nl_get_type(RDMA_NL_LS, 7)) as i128,
    },
];
