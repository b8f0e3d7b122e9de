//! mlx5 driver data, `<rdma/mlx5-abi.h>`: the structs carried as UHW / `driver_data` by
//! GET_CONTEXT, CREATE_CQ/QP/SRQ/WQ, MODIFY_QP and friends, their capability structs, enums and
//! mmap commands.

use crate::layout::{abi_consts, abi_structs};

abi_consts! {
    // anonymous enum
    pub const MLX5_QP_FLAG_SIGNATURE: u32 = 1;
    pub const MLX5_QP_FLAG_SCATTER_CQE: u32 = 2;
    pub const MLX5_QP_FLAG_TUNNEL_OFFLOADS: u32 = 4;
    pub const MLX5_QP_FLAG_BFREG_INDEX: u32 = 8;
    pub const MLX5_QP_FLAG_TYPE_DCT: u32 = 0x10;
    pub const MLX5_QP_FLAG_TYPE_DCI: u32 = 0x20;
    pub const MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_UC: u32 = 0x40;
    pub const MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_MC: u32 = 0x80;
    pub const MLX5_QP_FLAG_ALLOW_SCATTER_CQE: u32 = 0x100;
    pub const MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE: u32 = 0x200;
    pub const MLX5_QP_FLAG_UAR_PAGE_INDEX: u32 = 0x400;
    pub const MLX5_QP_FLAG_DCI_STREAM: u32 = 0x800;

    // anonymous enum
    pub const MLX5_SRQ_FLAG_SIGNATURE: u32 = 1;

    // anonymous enum
    pub const MLX5_WQ_FLAG_SIGNATURE: u32 = 1;

    // enum mlx5_lib_caps
    pub const MLX5_LIB_CAP_4K_UAR: u32 = 1;
    pub const MLX5_LIB_CAP_DYN_UAR: u32 = 2;

    // enum mlx5_ib_alloc_uctx_v2_flags
    pub const MLX5_IB_ALLOC_UCTX_DEVX: u32 = 1;

    // enum mlx5_ib_alloc_ucontext_resp_mask
    pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET: u32 = 1;
    pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY: u32 = 2;
    pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE: u32 = 4;
    pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS: u32 = 8;
    pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS: u32 = 0x10;
    pub const MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG: u32 = 0x20;

    // enum mlx5_user_cmds_supp_uhw
    pub const MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE: u32 = 1;
    pub const MLX5_USER_CMDS_SUPP_UHW_CREATE_AH: u32 = 2;

    // enum mlx5_user_inline_mode
    pub const MLX5_USER_INLINE_MODE_NA: u32 = 0;
    pub const MLX5_USER_INLINE_MODE_NONE: u32 = 1;
    pub const MLX5_USER_INLINE_MODE_L2: u32 = 2;
    pub const MLX5_USER_INLINE_MODE_IP: u32 = 3;
    pub const MLX5_USER_INLINE_MODE_TCP_UDP: u32 = 4;

    // anonymous enum
    pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM: u32 = 1;
    pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM_REQ_METADATA: u32 = 2;
    pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM_SPI_STEERING: u32 = 4;
    pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM_FULL_OFFLOAD: u32 = 8;
    pub const MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_ESP_AES_GCM_TX_IV_IS_ESN: u32 = 0x10;

    // enum mlx5_ib_cqe_comp_res_format
    pub const MLX5_IB_CQE_RES_FORMAT_HASH: u32 = 1;
    pub const MLX5_IB_CQE_RES_FORMAT_CSUM: u32 = 2;
    pub const MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX: u32 = 4;

    // enum mlx5_ib_packet_pacing_cap_flags
    pub const MLX5_IB_PP_SUPPORT_BURST: u32 = 1;

    // enum mlx5_ib_mpw_caps
    pub const MPW_RESERVED: u32 = 1;
    pub const MLX5_IB_ALLOW_MPW: u32 = 2;
    pub const MLX5_IB_SUPPORT_EMPW: u32 = 4;

    // enum mlx5_ib_sw_parsing_offloads
    pub const MLX5_IB_SW_PARSING: u32 = 1;
    pub const MLX5_IB_SW_PARSING_CSUM: u32 = 2;
    pub const MLX5_IB_SW_PARSING_LSO: u32 = 4;

    // enum mlx5_ib_query_dev_resp_flags
    pub const MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP: u32 = 1;
    pub const MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD: u32 = 2;
    pub const MLX5_IB_QUERY_DEV_RESP_PACKET_BASED_CREDIT_MODE: u32 = 4;
    pub const MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT: u32 = 8;

    // enum mlx5_ib_tunnel_offloads
    pub const MLX5_IB_TUNNELED_OFFLOADS_VXLAN: u32 = 1;
    pub const MLX5_IB_TUNNELED_OFFLOADS_GRE: u32 = 2;
    pub const MLX5_IB_TUNNELED_OFFLOADS_GENEVE: u32 = 4;
    pub const MLX5_IB_TUNNELED_OFFLOADS_MPLS_GRE: u32 = 8;
    pub const MLX5_IB_TUNNELED_OFFLOADS_MPLS_UDP: u32 = 0x10;

    // enum mlx5_ib_create_cq_flags
    pub const MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD: u32 = 1;
    pub const MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX: u32 = 2;
    pub const MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS: u32 = 4;

    // enum mlx5_rx_hash_function_flags
    pub const MLX5_RX_HASH_FUNC_TOEPLITZ: u32 = 1;

    // enum mlx5_rx_hash_fields
    pub const MLX5_RX_HASH_SRC_IPV4: u32 = 1;
    pub const MLX5_RX_HASH_DST_IPV4: u32 = 2;
    pub const MLX5_RX_HASH_SRC_IPV6: u32 = 4;
    pub const MLX5_RX_HASH_DST_IPV6: u32 = 8;
    pub const MLX5_RX_HASH_SRC_PORT_TCP: u32 = 0x10;
    pub const MLX5_RX_HASH_DST_PORT_TCP: u32 = 0x20;
    pub const MLX5_RX_HASH_SRC_PORT_UDP: u32 = 0x40;
    pub const MLX5_RX_HASH_DST_PORT_UDP: u32 = 0x80;
    pub const MLX5_RX_HASH_IPSEC_SPI: u32 = 0x100;
    pub const MLX5_RX_HASH_INNER: u32 = 0x80000000;

    // enum mlx5_ib_create_qp_resp_mask
    pub const MLX5_IB_CREATE_QP_RESP_MASK_TIRN: u32 = 1;
    pub const MLX5_IB_CREATE_QP_RESP_MASK_TISN: u32 = 2;
    pub const MLX5_IB_CREATE_QP_RESP_MASK_RQN: u32 = 4;
    pub const MLX5_IB_CREATE_QP_RESP_MASK_SQN: u32 = 8;
    pub const MLX5_IB_CREATE_QP_RESP_MASK_TIR_ICM_ADDR: u32 = 0x10;

    // enum mlx5_ib_create_wq_mask
    pub const MLX5_IB_CREATE_WQ_STRIDING_RQ: u32 = 1;

    // enum mlx5_ib_mmap_cmd
    pub const MLX5_IB_MMAP_REGULAR_PAGE: u32 = 0;
    pub const MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES: u32 = 1;
    pub const MLX5_IB_MMAP_WC_PAGE: u32 = 2;
    pub const MLX5_IB_MMAP_NC_PAGE: u32 = 3;
    pub const MLX5_IB_MMAP_CORE_CLOCK: u32 = 5;
    pub const MLX5_IB_MMAP_ALLOC_WC: u32 = 6;
    pub const MLX5_IB_MMAP_CLOCK_INFO: u32 = 7;
    pub const MLX5_IB_MMAP_DEVICE_MEM: u32 = 8;

    // anonymous enum
    pub const MLX5_IB_CLOCK_INFO_KERNEL_UPDATING: u32 = 1;

    // anonymous enum
    pub const MLX5_IB_CLOCK_INFO_V1: u32 = 0;
    pub const MLX5_IB_UVERBS_ABI_VERSION: u32 = 1;
}

abi_structs! {
    /// `struct mlx5_ib_alloc_ucontext_req` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbAllocUcontextReq: "struct mlx5_ib_alloc_ucontext_req" {
        pub total_num_bfregs: u32,
        pub num_low_latency_bfregs: u32,
    }

    /// `struct mlx5_ib_alloc_ucontext_req_v2` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    ///
    /// Driver input of `IB_USER_VERBS_CMD_GET_CONTEXT` / `UVERBS_METHOD_GET_CONTEXT` on mlx5.
    pub struct Mlx5IbAllocUcontextReqV2: "struct mlx5_ib_alloc_ucontext_req_v2" {
        pub total_num_bfregs: u32,
        pub num_low_latency_bfregs: u32,
        pub flags: u32,
        pub comp_mask: u32,
        pub max_cqe_version: u8,
        pub reserved0: u8,
        pub reserved1: u16,
        pub reserved2: u32,
        pub lib_caps: u64,
    }

    /// `struct mlx5_ib_alloc_ucontext_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    ///
    /// Driver output of `IB_USER_VERBS_CMD_GET_CONTEXT` / `UVERBS_METHOD_GET_CONTEXT` on mlx5.
    pub struct Mlx5IbAllocUcontextResp: "struct mlx5_ib_alloc_ucontext_resp" {
        pub qp_tab_size: u32,
        pub bf_reg_size: u32,
        pub tot_bfregs: u32,
        pub cache_line_size: u32,
        pub max_sq_desc_sz: u16,
        pub max_rq_desc_sz: u16,
        pub max_send_wqebb: u32,
        pub max_recv_wr: u32,
        pub max_srq_recv_wr: u32,
        pub num_ports: u16,
        pub flow_action_flags: u16,
        pub comp_mask: u32,
        pub response_length: u32,
        pub cqe_version: u8,
        pub cmds_supp_uhw: u8,
        pub eth_min_inline: u8,
        pub clock_info_versions: u8,
        pub hca_core_clock_offset: u64,
        pub log_uar_size: u32,
        pub num_uars_per_page: u32,
        pub num_dyn_bfregs: u32,
        pub dump_fill_mkey: u32,
    }

    /// `struct mlx5_ib_alloc_pd_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbAllocPdResp: "struct mlx5_ib_alloc_pd_resp" {
        pub pdn: u32,
    }

    /// `struct mlx5_ib_tso_caps` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbTsoCaps: "struct mlx5_ib_tso_caps" {
        pub max_tso: u32,
        pub supported_qpts: u32,
    }

    /// `struct mlx5_ib_rss_caps` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbRssCaps: "struct mlx5_ib_rss_caps" {
        pub rx_hash_fields_mask: u64,
        pub rx_hash_function: u8,
        pub reserved: [u8; 7],
    }

    /// `struct mlx5_ib_cqe_comp_caps` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCqeCompCaps: "struct mlx5_ib_cqe_comp_caps" {
        pub max_num: u32,
        pub supported_format: u32,
    }

    /// `struct mlx5_packet_pacing_caps` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5PacketPacingCaps: "struct mlx5_packet_pacing_caps" {
        pub qp_rate_limit_min: u32,
        pub qp_rate_limit_max: u32,
        pub supported_qpts: u32,
        pub cap_flags: u8,
        pub reserved: [u8; 3],
    }

    /// `struct mlx5_ib_sw_parsing_caps` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbSwParsingCaps: "struct mlx5_ib_sw_parsing_caps" {
        pub sw_parsing_offloads: u32,
        pub supported_qpts: u32,
    }

    /// `struct mlx5_ib_striding_rq_caps` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbStridingRqCaps: "struct mlx5_ib_striding_rq_caps" {
        pub min_single_stride_log_num_of_bytes: u32,
        pub max_single_stride_log_num_of_bytes: u32,
        pub min_single_wqe_log_num_of_strides: u32,
        pub max_single_wqe_log_num_of_strides: u32,
        pub supported_qpts: u32,
        pub reserved: u32,
    }

    /// `struct mlx5_ib_dci_streams_caps` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbDciStreamsCaps: "struct mlx5_ib_dci_streams_caps" {
        pub max_log_num_concurent: u8,
        pub max_log_num_errored: u8,
    }

    /// `struct mlx5_ib_query_device_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbQueryDeviceResp: "struct mlx5_ib_query_device_resp" {
        pub comp_mask: u32,
        pub response_length: u32,
        pub tso_caps: Mlx5IbTsoCaps,
        pub rss_caps: Mlx5IbRssCaps,
        pub cqe_comp_caps: Mlx5IbCqeCompCaps,
        pub packet_pacing_caps: Mlx5PacketPacingCaps,
        pub mlx5_ib_support_multi_pkt_send_wqes: u32,
        pub flags: u32,
        pub sw_parsing_caps: Mlx5IbSwParsingCaps,
        pub striding_rq_caps: Mlx5IbStridingRqCaps,
        pub tunnel_offloads_caps: u32,
        pub dci_streams_caps: Mlx5IbDciStreamsCaps,
        pub reserved: u16,
    }

    /// `struct mlx5_ib_create_cq` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    ///
    /// Driver input of CQ creation on mlx5 (`UVERBS_METHOD_CQ_CREATE` UHW_IN).
    pub struct Mlx5IbCreateCq: "struct mlx5_ib_create_cq" {
        pub buf_addr: u64,
        pub db_addr: u64,
        pub cqe_size: u32,
        pub cqe_comp_en: u8,
        pub cqe_comp_res_format: u8,
        pub flags: u16,
        pub uar_page_index: u16,
        pub reserved0: u16,
        pub reserved1: u32,
    }

    /// `struct mlx5_ib_create_cq_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateCqResp: "struct mlx5_ib_create_cq_resp" {
        pub cqn: u32,
        pub reserved: u32,
    }

    /// `struct mlx5_ib_resize_cq` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbResizeCq: "struct mlx5_ib_resize_cq" {
        pub buf_addr: u64,
        pub cqe_size: u16,
        pub reserved0: u16,
        pub reserved1: u32,
    }

    /// `struct mlx5_ib_create_srq` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateSrq: "struct mlx5_ib_create_srq" {
        pub buf_addr: u64,
        pub db_addr: u64,
        pub flags: u32,
        pub reserved0: u32,
        pub uidx: u32,
        pub reserved1: u32,
    }

    /// `struct mlx5_ib_create_srq_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateSrqResp: "struct mlx5_ib_create_srq_resp" {
        pub srqn: u32,
        pub reserved: u32,
    }

    /// `struct mlx5_ib_create_qp_dci_streams` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateQpDciStreams: "struct mlx5_ib_create_qp_dci_streams" {
        pub log_num_concurent: u8,
        pub log_num_errored: u8,
    }

    /// `struct mlx5_ib_create_qp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    ///
    /// Driver input of QP creation on mlx5 (`UVERBS_METHOD_QP_CREATE` UHW_IN).
    pub struct Mlx5IbCreateQp: "struct mlx5_ib_create_qp" {
        pub buf_addr: u64,
        pub db_addr: u64,
        pub sq_wqe_count: u32,
        pub rq_wqe_count: u32,
        pub rq_wqe_shift: u32,
        pub flags: u32,
        pub uidx: u32,
        pub bfreg_index: u32,
        /// C anonymous union of `sq_buf_addr`, `access_key`.
        /// Represented as its member `sq_buf_addr`.
        pub sq_buf_addr: u64,
        pub ece_options: u32,
        pub dci_streams: Mlx5IbCreateQpDciStreams,
        pub reserved: u16,
    }

    /// `struct mlx5_ib_create_qp_rss` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateQpRss: "struct mlx5_ib_create_qp_rss" {
        pub rx_hash_fields_mask: u64,
        pub rx_hash_function: u8,
        pub rx_key_len: u8,
        pub reserved: [u8; 6],
        pub rx_hash_key: [u8; 128],
        pub comp_mask: u32,
        pub flags: u32,
    }

    /// `struct mlx5_ib_create_qp_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateQpResp: "struct mlx5_ib_create_qp_resp" {
        pub bfreg_index: u32,
        pub ece_options: u32,
        pub comp_mask: u32,
        pub tirn: u32,
        pub tisn: u32,
        pub rqn: u32,
        pub sqn: u32,
        pub reserved1: u32,
        pub tir_icm_addr: u64,
    }

    /// `struct mlx5_ib_alloc_mw` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbAllocMw: "struct mlx5_ib_alloc_mw" {
        pub comp_mask: u32,
        pub num_klms: u8,
        pub reserved1: u8,
        pub reserved2: u16,
    }

    /// `struct mlx5_ib_create_wq` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateWq: "struct mlx5_ib_create_wq" {
        pub buf_addr: u64,
        pub db_addr: u64,
        pub rq_wqe_count: u32,
        pub rq_wqe_shift: u32,
        pub user_index: u32,
        pub flags: u32,
        pub comp_mask: u32,
        pub single_stride_log_num_of_bytes: u32,
        pub single_wqe_log_num_of_strides: u32,
        pub two_byte_shift_en: u32,
    }

    /// `struct mlx5_ib_create_ah_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateAhResp: "struct mlx5_ib_create_ah_resp" {
        pub response_length: u32,
        pub dmac: [u8; 6],
        pub reserved: [u8; 6],
    }

    /// `struct mlx5_ib_burst_info` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbBurstInfo: "struct mlx5_ib_burst_info" {
        pub max_burst_sz: u32,
        pub typical_pkt_sz: u16,
        pub reserved: u16,
    }

    /// `struct mlx5_ib_modify_qp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbModifyQp: "struct mlx5_ib_modify_qp" {
        pub comp_mask: u32,
        pub burst_info: Mlx5IbBurstInfo,
        pub ece_options: u32,
    }

    /// `struct mlx5_ib_modify_qp_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbModifyQpResp: "struct mlx5_ib_modify_qp_resp" {
        pub response_length: u32,
        pub dctn: u32,
        pub ece_options: u32,
        pub reserved: u32,
    }

    /// `struct mlx5_ib_create_wq_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateWqResp: "struct mlx5_ib_create_wq_resp" {
        pub response_length: u32,
        pub reserved: u32,
    }

    /// `struct mlx5_ib_create_rwq_ind_tbl_resp` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbCreateRwqIndTblResp: "struct mlx5_ib_create_rwq_ind_tbl_resp" {
        pub response_length: u32,
        pub reserved: u32,
    }

    /// `struct mlx5_ib_modify_wq` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbModifyWq: "struct mlx5_ib_modify_wq" {
        pub comp_mask: u32,
        pub reserved: u32,
    }

    /// `struct mlx5_ib_clock_info` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbClockInfo: "struct mlx5_ib_clock_info" {
        pub sign: u32,
        pub resv: u32,
        pub nsec: u64,
        pub cycles: u64,
        pub frac: u64,
        pub mult: u32,
        pub shift: u32,
        pub mask: u64,
        pub overflow_period: u64,
    }

    /// `struct mlx5_ib_flow_counters_desc` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbFlowCountersDesc: "struct mlx5_ib_flow_counters_desc" {
        pub description: u32,
        pub index: u32,
    }

    /// `struct mlx5_ib_flow_counters_data` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    pub struct Mlx5IbFlowCountersData: "struct mlx5_ib_flow_counters_data" {
        pub counters_data: u64,
        pub ncounters: u32,
        pub reserved: u32,
    }

    /// `struct mlx5_ib_create_flow` (`<rdma/mlx5-abi.h>`).
    ///
    /// mlx5 driver data (the UHW / `driver_data` part of a uverbs command).
    ///
    /// Followed in the same buffer by the flexible array `data[]` (`struct mlx5_ib_flow_counters_data`), not part of this struct.
    #[repr(align(8))]
    pub struct Mlx5IbCreateFlow: "struct mlx5_ib_create_flow" {
        pub ncounters_data: u32,
        pub reserved: u32,
    }
}
