//! The legacy `write()` ABI of `<rdma/ib_user_verbs.h>`: command headers, command numbers and the
//! other `IB_USER_VERBS_*`/`IB_UVERBS_*` constants, and the context, device, port, PD, MR, MW and
//! XRCD command structs. CQ, QP, SRQ/WQ and flow structs are in the sibling `write_*` modules.
//!
//! A legacy command is `IbUverbsCmdHdr` + core request (+ driver data); an extended command
//! (`IB_USER_VERBS_CMD_FLAG_EXTENDED`) is `IbUverbsCmdHdr` + `IbUverbsExCmdHdr` + core request.

use crate::layout::{abi_consts, abi_structs};

abi_consts! {
    // enum ib_uverbs_write_cmds
    pub const IB_USER_VERBS_CMD_GET_CONTEXT: u32 = 0;
    pub const IB_USER_VERBS_CMD_QUERY_DEVICE: u32 = 1;
    pub const IB_USER_VERBS_CMD_QUERY_PORT: u32 = 2;
    pub const IB_USER_VERBS_CMD_ALLOC_PD: u32 = 3;
    pub const IB_USER_VERBS_CMD_DEALLOC_PD: u32 = 4;
    pub const IB_USER_VERBS_CMD_CREATE_AH: u32 = 5;
    pub const IB_USER_VERBS_CMD_MODIFY_AH: u32 = 6;
    pub const IB_USER_VERBS_CMD_QUERY_AH: u32 = 7;
    pub const IB_USER_VERBS_CMD_DESTROY_AH: u32 = 8;
    pub const IB_USER_VERBS_CMD_REG_MR: u32 = 9;
    pub const IB_USER_VERBS_CMD_REG_SMR: u32 = 10;
    pub const IB_USER_VERBS_CMD_REREG_MR: u32 = 11;
    pub const IB_USER_VERBS_CMD_QUERY_MR: u32 = 12;
    pub const IB_USER_VERBS_CMD_DEREG_MR: u32 = 13;
    pub const IB_USER_VERBS_CMD_ALLOC_MW: u32 = 14;
    pub const IB_USER_VERBS_CMD_BIND_MW: u32 = 15;
    pub const IB_USER_VERBS_CMD_DEALLOC_MW: u32 = 0x10;
    pub const IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: u32 = 17;
    pub const IB_USER_VERBS_CMD_CREATE_CQ: u32 = 18;
    pub const IB_USER_VERBS_CMD_RESIZE_CQ: u32 = 19;
    pub const IB_USER_VERBS_CMD_DESTROY_CQ: u32 = 20;
    pub const IB_USER_VERBS_CMD_POLL_CQ: u32 = 21;
    pub const IB_USER_VERBS_CMD_PEEK_CQ: u32 = 22;
    pub const IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: u32 = 23;
    pub const IB_USER_VERBS_CMD_CREATE_QP: u32 = 24;
    pub const IB_USER_VERBS_CMD_QUERY_QP: u32 = 25;
    pub const IB_USER_VERBS_CMD_MODIFY_QP: u32 = 26;
    pub const IB_USER_VERBS_CMD_DESTROY_QP: u32 = 27;
    pub const IB_USER_VERBS_CMD_POST_SEND: u32 = 28;
    pub const IB_USER_VERBS_CMD_POST_RECV: u32 = 29;
    pub const IB_USER_VERBS_CMD_ATTACH_MCAST: u32 = 30;
    pub const IB_USER_VERBS_CMD_DETACH_MCAST: u32 = 31;
    pub const IB_USER_VERBS_CMD_CREATE_SRQ: u32 = 0x20;
    pub const IB_USER_VERBS_CMD_MODIFY_SRQ: u32 = 33;
    pub const IB_USER_VERBS_CMD_QUERY_SRQ: u32 = 34;
    pub const IB_USER_VERBS_CMD_DESTROY_SRQ: u32 = 35;
    pub const IB_USER_VERBS_CMD_POST_SRQ_RECV: u32 = 36;
    pub const IB_USER_VERBS_CMD_OPEN_XRCD: u32 = 37;
    pub const IB_USER_VERBS_CMD_CLOSE_XRCD: u32 = 38;
    pub const IB_USER_VERBS_CMD_CREATE_XSRQ: u32 = 39;
    pub const IB_USER_VERBS_CMD_OPEN_QP: u32 = 40;

    // anonymous enum
    pub const IB_USER_VERBS_EX_CMD_QUERY_DEVICE: u32 = 1;
    pub const IB_USER_VERBS_EX_CMD_CREATE_CQ: u32 = 18;
    pub const IB_USER_VERBS_EX_CMD_CREATE_QP: u32 = 24;
    pub const IB_USER_VERBS_EX_CMD_MODIFY_QP: u32 = 26;
    pub const IB_USER_VERBS_EX_CMD_CREATE_FLOW: u32 = 50;
    pub const IB_USER_VERBS_EX_CMD_DESTROY_FLOW: u32 = 51;
    pub const IB_USER_VERBS_EX_CMD_CREATE_WQ: u32 = 52;
    pub const IB_USER_VERBS_EX_CMD_MODIFY_WQ: u32 = 53;
    pub const IB_USER_VERBS_EX_CMD_DESTROY_WQ: u32 = 54;
    pub const IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL: u32 = 55;
    pub const IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL: u32 = 56;
    pub const IB_USER_VERBS_EX_CMD_MODIFY_CQ: u32 = 57;

    // enum ib_uverbs_ex_create_cq_flags
    pub const IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION: u32 = 1;
    pub const IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN: u32 = 2;

    // enum ib_uverbs_wc_opcode
    pub const IB_UVERBS_WC_SEND: u32 = 0;
    pub const IB_UVERBS_WC_RDMA_WRITE: u32 = 1;
    pub const IB_UVERBS_WC_RDMA_READ: u32 = 2;
    pub const IB_UVERBS_WC_COMP_SWAP: u32 = 3;
    pub const IB_UVERBS_WC_FETCH_ADD: u32 = 4;
    pub const IB_UVERBS_WC_BIND_MW: u32 = 5;
    pub const IB_UVERBS_WC_LOCAL_INV: u32 = 6;
    pub const IB_UVERBS_WC_TSO: u32 = 7;

    // enum ib_uverbs_create_qp_mask
    pub const IB_UVERBS_CREATE_QP_MASK_IND_TABLE: u32 = 1;

    // anonymous enum
    pub const IB_UVERBS_CREATE_QP_SUP_COMP_MASK: u32 = 1;

    // enum ib_uverbs_wr_opcode
    pub const IB_UVERBS_WR_RDMA_WRITE: u32 = 0;
    pub const IB_UVERBS_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const IB_UVERBS_WR_SEND: u32 = 2;
    pub const IB_UVERBS_WR_SEND_WITH_IMM: u32 = 3;
    pub const IB_UVERBS_WR_RDMA_READ: u32 = 4;
    pub const IB_UVERBS_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
    pub const IB_UVERBS_WR_LOCAL_INV: u32 = 7;
    pub const IB_UVERBS_WR_BIND_MW: u32 = 8;
    pub const IB_UVERBS_WR_SEND_WITH_INV: u32 = 9;
    pub const IB_UVERBS_WR_TSO: u32 = 10;
    pub const IB_UVERBS_WR_RDMA_READ_WITH_INV: u32 = 11;
    pub const IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP: u32 = 12;
    pub const IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD: u32 = 13;

    // enum ib_uverbs_device_cap_flags
    pub const IB_UVERBS_DEVICE_RESIZE_MAX_WR: u64 = 1;
    pub const IB_UVERBS_DEVICE_BAD_PKEY_CNTR: u64 = 2;
    pub const IB_UVERBS_DEVICE_BAD_QKEY_CNTR: u64 = 4;
    pub const IB_UVERBS_DEVICE_RAW_MULTI: u64 = 8;
    pub const IB_UVERBS_DEVICE_AUTO_PATH_MIG: u64 = 0x10;
    pub const IB_UVERBS_DEVICE_CHANGE_PHY_PORT: u64 = 0x20;
    pub const IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE: u64 = 0x40;
    pub const IB_UVERBS_DEVICE_CURR_QP_STATE_MOD: u64 = 0x80;
    pub const IB_UVERBS_DEVICE_SHUTDOWN_PORT: u64 = 0x100;
    pub const IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT: u64 = 0x400;
    pub const IB_UVERBS_DEVICE_SYS_IMAGE_GUID: u64 = 0x800;
    pub const IB_UVERBS_DEVICE_RC_RNR_NAK_GEN: u64 = 0x1000;
    pub const IB_UVERBS_DEVICE_SRQ_RESIZE: u64 = 0x2000;
    pub const IB_UVERBS_DEVICE_N_NOTIFY_CQ: u64 = 0x4000;
    pub const IB_UVERBS_DEVICE_MEM_WINDOW: u64 = 0x20000;
    pub const IB_UVERBS_DEVICE_UD_IP_CSUM: u64 = 0x40000;
    pub const IB_UVERBS_DEVICE_XRC: u64 = 0x100000;
    pub const IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS: u64 = 0x200000;
    pub const IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A: u64 = 0x800000;
    pub const IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B: u64 = 0x1000000;
    pub const IB_UVERBS_DEVICE_RC_IP_CSUM: u64 = 0x2000000;
    pub const IB_UVERBS_DEVICE_RAW_IP_CSUM: u64 = 0x4000000;
    pub const IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING: u64 = 0x20000000;
    pub const IB_UVERBS_DEVICE_RAW_SCATTER_FCS: u64 = 0x400000000;
    pub const IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING: u64 = 0x1000000000;

    // enum ib_uverbs_raw_packet_caps
    pub const IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING: u32 = 1;
    pub const IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS: u32 = 2;
    pub const IB_UVERBS_RAW_PACKET_CAP_IP_CSUM: u32 = 4;
    pub const IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP: u32 = 8;
    pub const IB_USER_VERBS_ABI_VERSION: u32 = 6;
    pub const IB_USER_VERBS_CMD_THRESHOLD: u32 = 50;
    pub const IB_USER_VERBS_CMD_COMMAND_MASK: u32 = 255;
    pub const IB_USER_VERBS_CMD_FLAG_EXTENDED: u32 = 0x80000000;
    pub const IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE: u32 = 13;
    pub const IB_DEVICE_NAME_MAX: u32 = 0x40;
}

abi_structs! {
    /// `struct ib_uverbs_cq_moderation_caps` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsCqModerationCaps: "struct ib_uverbs_cq_moderation_caps" {
        pub max_cq_moderation_count: u16,
        pub max_cq_moderation_period: u16,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_cmd_hdr` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsCmdHdr: "struct ib_uverbs_cmd_hdr" {
        pub command: u32,
        pub in_words: u16,
        pub out_words: u16,
    }

    /// `struct ib_uverbs_ex_cmd_hdr` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsExCmdHdr: "struct ib_uverbs_ex_cmd_hdr" {
        pub response: u64,
        pub provider_in_words: u16,
        pub provider_out_words: u16,
        pub cmd_hdr_reserved: u32,
    }

    /// `struct ib_uverbs_get_context` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_GET_CONTEXT` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsGetContext: "struct ib_uverbs_get_context" {
        pub response: u64,
    }

    /// `struct ib_uverbs_get_context_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_GET_CONTEXT` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsGetContextResp: "struct ib_uverbs_get_context_resp" {
        pub async_fd: u32,
        pub num_comp_vectors: u32,
    }

    /// `struct ib_uverbs_query_device` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_QUERY_DEVICE` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsQueryDevice: "struct ib_uverbs_query_device" {
        pub response: u64,
    }

    /// `struct ib_uverbs_query_device_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_QUERY_DEVICE` write command.
    pub struct IbUverbsQueryDeviceResp: "struct ib_uverbs_query_device_resp" {
        pub fw_ver: u64,
        /// Big-endian (`__be64`).
        pub node_guid: u64,
        /// Big-endian (`__be64`).
        pub sys_image_guid: u64,
        pub max_mr_size: u64,
        pub page_size_cap: u64,
        pub vendor_id: u32,
        pub vendor_part_id: u32,
        pub hw_ver: u32,
        pub max_qp: u32,
        pub max_qp_wr: u32,
        pub device_cap_flags: u32,
        pub max_sge: u32,
        pub max_sge_rd: u32,
        pub max_cq: u32,
        pub max_cqe: u32,
        pub max_mr: u32,
        pub max_pd: u32,
        pub max_qp_rd_atom: u32,
        pub max_ee_rd_atom: u32,
        pub max_res_rd_atom: u32,
        pub max_qp_init_rd_atom: u32,
        pub max_ee_init_rd_atom: u32,
        pub atomic_cap: u32,
        pub max_ee: u32,
        pub max_rdd: u32,
        pub max_mw: u32,
        pub max_raw_ipv6_qp: u32,
        pub max_raw_ethy_qp: u32,
        pub max_mcast_grp: u32,
        pub max_mcast_qp_attach: u32,
        pub max_total_mcast_qp_attach: u32,
        pub max_ah: u32,
        pub max_fmr: u32,
        pub max_map_per_fmr: u32,
        pub max_srq: u32,
        pub max_srq_wr: u32,
        pub max_srq_sge: u32,
        pub max_pkeys: u16,
        pub local_ca_ack_delay: u8,
        pub phys_port_cnt: u8,
        pub reserved: [u8; 4],
    }

    /// `struct ib_uverbs_ex_query_device` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` write command.
    pub struct IbUverbsExQueryDevice: "struct ib_uverbs_ex_query_device" {
        pub comp_mask: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_odp_caps` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsOdpCaps: "struct ib_uverbs_odp_caps" {
        pub general_caps: u64,
        /// Nested anonymous C struct `per_transport_caps`.
        pub per_transport_caps: IbUverbsOdpCapsPerTransportCaps,
        pub reserved: u32,
    }

    /// Member `per_transport_caps` of `struct ib_uverbs_odp_caps` (anonymous in C; checked through `__typeof__`).
    pub struct IbUverbsOdpCapsPerTransportCaps: "__typeof__(((struct ib_uverbs_odp_caps *)0)->per_transport_caps)" {
        pub rc_odp_caps: u32,
        pub uc_odp_caps: u32,
        pub ud_odp_caps: u32,
    }

    /// `struct ib_uverbs_rss_caps` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsRssCaps: "struct ib_uverbs_rss_caps" {
        pub supported_qpts: u32,
        pub max_rwq_indirection_tables: u32,
        pub max_rwq_indirection_table_size: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_tm_caps` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsTmCaps: "struct ib_uverbs_tm_caps" {
        pub max_rndv_hdr_size: u32,
        pub max_num_tags: u32,
        pub flags: u32,
        pub max_ops: u32,
        pub max_sge: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_ex_query_device_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` write command.
    pub struct IbUverbsExQueryDeviceResp: "struct ib_uverbs_ex_query_device_resp" {
        pub base: IbUverbsQueryDeviceResp,
        pub comp_mask: u32,
        pub response_length: u32,
        pub odp_caps: IbUverbsOdpCaps,
        pub timestamp_mask: u64,
        pub hca_core_clock: u64,
        pub device_cap_flags_ex: u64,
        pub rss_caps: IbUverbsRssCaps,
        pub max_wq_type_rq: u32,
        pub raw_packet_caps: u32,
        pub tm_caps: IbUverbsTmCaps,
        pub cq_moderation_caps: IbUverbsCqModerationCaps,
        pub max_dm_size: u64,
        pub xrc_odp_caps: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_query_port` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_QUERY_PORT` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsQueryPort: "struct ib_uverbs_query_port" {
        pub response: u64,
        pub port_num: u8,
        pub reserved: [u8; 7],
    }

    /// `struct ib_uverbs_query_port_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_QUERY_PORT` write command.
    pub struct IbUverbsQueryPortResp: "struct ib_uverbs_query_port_resp" {
        pub port_cap_flags: u32,
        pub max_msg_sz: u32,
        pub bad_pkey_cntr: u32,
        pub qkey_viol_cntr: u32,
        pub gid_tbl_len: u32,
        pub pkey_tbl_len: u16,
        pub lid: u16,
        pub sm_lid: u16,
        pub state: u8,
        pub max_mtu: u8,
        pub active_mtu: u8,
        pub lmc: u8,
        pub max_vl_num: u8,
        pub sm_sl: u8,
        pub subnet_timeout: u8,
        pub init_type_reply: u8,
        pub active_width: u8,
        pub active_speed: u8,
        pub phys_state: u8,
        pub link_layer: u8,
        pub flags: u8,
        pub reserved: u8,
    }

    /// `struct ib_uverbs_alloc_pd` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_ALLOC_PD` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsAllocPd: "struct ib_uverbs_alloc_pd" {
        pub response: u64,
    }

    /// `struct ib_uverbs_alloc_pd_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_ALLOC_PD` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__u32`), not part of this struct.
    pub struct IbUverbsAllocPdResp: "struct ib_uverbs_alloc_pd_resp" {
        pub pd_handle: u32,
    }

    /// `struct ib_uverbs_dealloc_pd` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_DEALLOC_PD` write command.
    pub struct IbUverbsDeallocPd: "struct ib_uverbs_dealloc_pd" {
        pub pd_handle: u32,
    }

    /// `struct ib_uverbs_open_xrcd` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_OPEN_XRCD` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsOpenXrcd: "struct ib_uverbs_open_xrcd" {
        pub response: u64,
        pub fd: u32,
        pub oflags: u32,
    }

    /// `struct ib_uverbs_open_xrcd_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_OPEN_XRCD` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__u32`), not part of this struct.
    pub struct IbUverbsOpenXrcdResp: "struct ib_uverbs_open_xrcd_resp" {
        pub xrcd_handle: u32,
    }

    /// `struct ib_uverbs_close_xrcd` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_CLOSE_XRCD` write command.
    pub struct IbUverbsCloseXrcd: "struct ib_uverbs_close_xrcd" {
        pub xrcd_handle: u32,
    }

    /// `struct ib_uverbs_reg_mr` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_REG_MR` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsRegMr: "struct ib_uverbs_reg_mr" {
        pub response: u64,
        pub start: u64,
        pub length: u64,
        pub hca_va: u64,
        pub pd_handle: u32,
        pub access_flags: u32,
    }

    /// `struct ib_uverbs_reg_mr_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_REG_MR` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__u32`), not part of this struct.
    pub struct IbUverbsRegMrResp: "struct ib_uverbs_reg_mr_resp" {
        pub mr_handle: u32,
        pub lkey: u32,
        pub rkey: u32,
    }

    /// `struct ib_uverbs_rereg_mr` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_REREG_MR` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsReregMr: "struct ib_uverbs_rereg_mr" {
        pub response: u64,
        pub mr_handle: u32,
        pub flags: u32,
        pub start: u64,
        pub length: u64,
        pub hca_va: u64,
        pub pd_handle: u32,
        pub access_flags: u32,
    }

    /// `struct ib_uverbs_rereg_mr_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_REREG_MR` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsReregMrResp: "struct ib_uverbs_rereg_mr_resp" {
        pub lkey: u32,
        pub rkey: u32,
    }

    /// `struct ib_uverbs_dereg_mr` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_DEREG_MR` write command.
    pub struct IbUverbsDeregMr: "struct ib_uverbs_dereg_mr" {
        pub mr_handle: u32,
    }

    /// `struct ib_uverbs_alloc_mw` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_ALLOC_MW` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsAllocMw: "struct ib_uverbs_alloc_mw" {
        pub response: u64,
        pub pd_handle: u32,
        pub mw_type: u8,
        pub reserved: [u8; 3],
    }

    /// `struct ib_uverbs_alloc_mw_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_ALLOC_MW` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsAllocMwResp: "struct ib_uverbs_alloc_mw_resp" {
        pub mw_handle: u32,
        pub rkey: u32,
    }

    /// `struct ib_uverbs_dealloc_mw` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_DEALLOC_MW` write command.
    pub struct IbUverbsDeallocMw: "struct ib_uverbs_dealloc_mw" {
        pub mw_handle: u32,
    }
}
