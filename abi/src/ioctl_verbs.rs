//! Values and structs of `<rdma/ib_user_ioctl_verbs.h>`: access flags, QP/SRQ/WQ types, create
//! flags, CQ flags, GID types, `enum rdma_driver_id`, flow actions, and the ioctl-only structs
//! (`ib_uverbs_query_port_resp_ex`, `ib_uverbs_gid_entry`, `ib_uverbs_qp_cap`, ...).

use crate::layout::{abi_consts, abi_structs};
use crate::write::IbUverbsQueryPortResp;

abi_consts! {
    // enum ib_uverbs_core_support
    pub const IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS: u32 = 1;

    // enum ib_uverbs_access_flags
    pub const IB_UVERBS_ACCESS_LOCAL_WRITE: u32 = 1;
    pub const IB_UVERBS_ACCESS_REMOTE_WRITE: u32 = 2;
    pub const IB_UVERBS_ACCESS_REMOTE_READ: u32 = 4;
    pub const IB_UVERBS_ACCESS_REMOTE_ATOMIC: u32 = 8;
    pub const IB_UVERBS_ACCESS_MW_BIND: u32 = 0x10;
    pub const IB_UVERBS_ACCESS_ZERO_BASED: u32 = 0x20;
    pub const IB_UVERBS_ACCESS_ON_DEMAND: u32 = 0x40;
    pub const IB_UVERBS_ACCESS_HUGETLB: u32 = 0x80;
    pub const IB_UVERBS_ACCESS_RELAXED_ORDERING: u32 = 0x100000;
    pub const IB_UVERBS_ACCESS_OPTIONAL_RANGE: u32 = 0x3ff00000;

    // enum ib_uverbs_srq_type
    pub const IB_UVERBS_SRQT_BASIC: u32 = 0;
    pub const IB_UVERBS_SRQT_XRC: u32 = 1;
    pub const IB_UVERBS_SRQT_TM: u32 = 2;

    // enum ib_uverbs_wq_type
    pub const IB_UVERBS_WQT_RQ: u32 = 0;

    // enum ib_uverbs_wq_flags
    pub const IB_UVERBS_WQ_FLAGS_CVLAN_STRIPPING: u32 = 1;
    pub const IB_UVERBS_WQ_FLAGS_SCATTER_FCS: u32 = 2;
    pub const IB_UVERBS_WQ_FLAGS_DELAY_DROP: u32 = 4;
    pub const IB_UVERBS_WQ_FLAGS_PCI_WRITE_END_PADDING: u32 = 8;

    // enum ib_uverbs_qp_type
    pub const IB_UVERBS_QPT_RC: u32 = 2;
    pub const IB_UVERBS_QPT_UC: u32 = 3;
    pub const IB_UVERBS_QPT_UD: u32 = 4;
    pub const IB_UVERBS_QPT_RAW_PACKET: u32 = 8;
    pub const IB_UVERBS_QPT_XRC_INI: u32 = 9;
    pub const IB_UVERBS_QPT_XRC_TGT: u32 = 10;
    pub const IB_UVERBS_QPT_DRIVER: u32 = 255;

    // enum ib_uverbs_qp_create_flags
    pub const IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK: u32 = 2;
    pub const IB_UVERBS_QP_CREATE_SCATTER_FCS: u32 = 0x100;
    pub const IB_UVERBS_QP_CREATE_CVLAN_STRIPPING: u32 = 0x200;
    pub const IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING: u32 = 0x800;
    pub const IB_UVERBS_QP_CREATE_SQ_SIG_ALL: u32 = 0x1000;

    // enum ib_uverbs_query_port_cap_flags
    pub const IB_UVERBS_PCF_SM: u32 = 2;
    pub const IB_UVERBS_PCF_NOTICE_SUP: u32 = 4;
    pub const IB_UVERBS_PCF_TRAP_SUP: u32 = 8;
    pub const IB_UVERBS_PCF_OPT_IPD_SUP: u32 = 0x10;
    pub const IB_UVERBS_PCF_AUTO_MIGR_SUP: u32 = 0x20;
    pub const IB_UVERBS_PCF_SL_MAP_SUP: u32 = 0x40;
    pub const IB_UVERBS_PCF_MKEY_NVRAM: u32 = 0x80;
    pub const IB_UVERBS_PCF_PKEY_NVRAM: u32 = 0x100;
    pub const IB_UVERBS_PCF_LED_INFO_SUP: u32 = 0x200;
    pub const IB_UVERBS_PCF_SM_DISABLED: u32 = 0x400;
    pub const IB_UVERBS_PCF_SYS_IMAGE_GUID_SUP: u32 = 0x800;
    pub const IB_UVERBS_PCF_PKEY_SW_EXT_PORT_TRAP_SUP: u32 = 0x1000;
    pub const IB_UVERBS_PCF_EXTENDED_SPEEDS_SUP: u32 = 0x4000;
    pub const IB_UVERBS_PCF_CM_SUP: u32 = 0x10000;
    pub const IB_UVERBS_PCF_SNMP_TUNNEL_SUP: u32 = 0x20000;
    pub const IB_UVERBS_PCF_REINIT_SUP: u32 = 0x40000;
    pub const IB_UVERBS_PCF_DEVICE_MGMT_SUP: u32 = 0x80000;
    pub const IB_UVERBS_PCF_VENDOR_CLASS_SUP: u32 = 0x100000;
    pub const IB_UVERBS_PCF_DR_NOTICE_SUP: u32 = 0x200000;
    pub const IB_UVERBS_PCF_CAP_MASK_NOTICE_SUP: u32 = 0x400000;
    pub const IB_UVERBS_PCF_BOOT_MGMT_SUP: u32 = 0x800000;
    pub const IB_UVERBS_PCF_LINK_LATENCY_SUP: u32 = 0x1000000;
    pub const IB_UVERBS_PCF_CLIENT_REG_SUP: u32 = 0x2000000;
    pub const IB_UVERBS_PCF_LINK_SPEED_WIDTH_TABLE_SUP: u32 = 0x8000000;
    pub const IB_UVERBS_PCF_VENDOR_SPECIFIC_MADS_TABLE_SUP: u32 = 0x10000000;
    pub const IB_UVERBS_PCF_MCAST_PKEY_TRAP_SUPPRESSION_SUP: u32 = 0x20000000;
    pub const IB_UVERBS_PCF_MCAST_FDB_TOP_SUP: u32 = 0x40000000;
    pub const IB_UVERBS_PCF_HIERARCHY_INFO_SUP: u32 = 0x80000000;
    pub const IB_UVERBS_PCF_IP_BASED_GIDS: u32 = 0x4000000;

    // enum ib_uverbs_query_port_flags
    pub const IB_UVERBS_QPF_GRH_REQUIRED: u32 = 1;

    // enum ib_uverbs_flow_action_esp_keymat
    pub const IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM: u32 = 0;

    // enum ib_uverbs_flow_action_esp_keymat_aes_gcm_iv_algo
    pub const IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ: u32 = 0;

    // enum ib_uverbs_flow_action_esp_replay
    pub const IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE: u32 = 0;
    pub const IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP: u32 = 1;

    // enum ib_uverbs_flow_action_esp_flags
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO: u32 = 0;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD: u32 = 1;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL: u32 = 0;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT: u32 = 2;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT: u32 = 0;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT: u32 = 4;
    pub const IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW: u32 = 8;

    // enum ib_uverbs_read_counters_flags
    pub const IB_UVERBS_READ_COUNTERS_PREFER_CACHED: u32 = 1;

    // enum ib_uverbs_advise_mr_advice
    pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH: u32 = 0;
    pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE: u32 = 1;
    pub const IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT: u32 = 2;

    // enum ib_uverbs_advise_mr_flag
    pub const IB_UVERBS_ADVISE_MR_FLAG_FLUSH: u32 = 1;

    // enum rdma_driver_id
    pub const RDMA_DRIVER_UNKNOWN: u32 = 0;
    pub const RDMA_DRIVER_MLX5: u32 = 1;
    pub const RDMA_DRIVER_MLX4: u32 = 2;
    pub const RDMA_DRIVER_CXGB3: u32 = 3;
    pub const RDMA_DRIVER_CXGB4: u32 = 4;
    pub const RDMA_DRIVER_MTHCA: u32 = 5;
    pub const RDMA_DRIVER_BNXT_RE: u32 = 6;
    pub const RDMA_DRIVER_OCRDMA: u32 = 7;
    pub const RDMA_DRIVER_NES: u32 = 8;
    pub const RDMA_DRIVER_I40IW: u32 = 9;
    pub const RDMA_DRIVER_IRDMA: u32 = 9;
    pub const RDMA_DRIVER_VMW_PVRDMA: u32 = 10;
    pub const RDMA_DRIVER_QEDR: u32 = 11;
    pub const RDMA_DRIVER_HNS: u32 = 12;
    pub const RDMA_DRIVER_USNIC: u32 = 13;
    pub const RDMA_DRIVER_RXE: u32 = 14;
    pub const RDMA_DRIVER_HFI1: u32 = 15;
    pub const RDMA_DRIVER_QIB: u32 = 0x10;
    pub const RDMA_DRIVER_EFA: u32 = 17;
    pub const RDMA_DRIVER_SIW: u32 = 18;
    pub const RDMA_DRIVER_ERDMA: u32 = 19;

    // enum ib_uverbs_gid_type
    pub const IB_UVERBS_GID_TYPE_IB: u32 = 0;
    pub const IB_UVERBS_GID_TYPE_ROCE_V1: u32 = 1;
    pub const IB_UVERBS_GID_TYPE_ROCE_V2: u32 = 2;
    pub const IB_UVERBS_ACCESS_OPTIONAL_FIRST: u32 = 0x100000;
    pub const IB_UVERBS_ACCESS_OPTIONAL_LAST: u32 = 0x20000000;
}

abi_structs! {
    /// `struct ib_uverbs_flow_action_esp_keymat_aes_gcm` (`<rdma/ib_user_ioctl_verbs.h>`).
    pub struct IbUverbsFlowActionEspKeymatAesGcm: "struct ib_uverbs_flow_action_esp_keymat_aes_gcm" {
        pub iv: u64,
        pub iv_algo: u32,
        pub salt: u32,
        pub icv_len: u32,
        pub key_len: u32,
        pub aes_key: [u32; 8],
    }

    /// `struct ib_uverbs_flow_action_esp_replay_bmp` (`<rdma/ib_user_ioctl_verbs.h>`).
    pub struct IbUverbsFlowActionEspReplayBmp: "struct ib_uverbs_flow_action_esp_replay_bmp" {
        pub size: u32,
    }

    /// `struct ib_uverbs_flow_action_esp_encap` (`<rdma/ib_user_ioctl_verbs.h>`).
    pub struct IbUverbsFlowActionEspEncap: "struct ib_uverbs_flow_action_esp_encap" {
        pub val_ptr: u64,
        pub next_ptr: u64,
        pub len: u16,
        pub type_: u16 = "type",
        /// Implicit C tail padding, made explicit.
        pub _pad20: [u8; 4] = "",
    }

    /// `struct ib_uverbs_flow_action_esp` (`<rdma/ib_user_ioctl_verbs.h>`).
    pub struct IbUverbsFlowActionEsp: "struct ib_uverbs_flow_action_esp" {
        pub spi: u32,
        pub seq: u32,
        pub tfc_pad: u32,
        pub flags: u32,
        pub hard_limit_pkts: u64,
    }

    /// `struct ib_uverbs_query_port_resp_ex` (`<rdma/ib_user_ioctl_verbs.h>`).
    ///
    /// Output of `UVERBS_METHOD_QUERY_PORT` (attr `UVERBS_ATTR_QUERY_PORT_RESP`).
    pub struct IbUverbsQueryPortRespEx: "struct ib_uverbs_query_port_resp_ex" {
        pub legacy_resp: IbUverbsQueryPortResp,
        pub port_cap_flags2: u16,
        pub reserved: [u8; 6],
    }

    /// `struct ib_uverbs_qp_cap` (`<rdma/ib_user_ioctl_verbs.h>`).
    ///
    /// QP capabilities: `UVERBS_ATTR_CREATE_QP_CAP` / `UVERBS_ATTR_CREATE_QP_RESP_CAP` of `UVERBS_METHOD_QP_CREATE`.
    pub struct IbUverbsQpCap: "struct ib_uverbs_qp_cap" {
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
    }

    /// `struct ib_uverbs_gid_entry` (`<rdma/ib_user_ioctl_verbs.h>`).
    ///
    /// One GID table entry: output of `UVERBS_METHOD_QUERY_GID_ENTRY` / `UVERBS_METHOD_QUERY_GID_TABLE`.
    pub struct IbUverbsGidEntry: "struct ib_uverbs_gid_entry" {
        pub gid: [u64; 2],
        pub gid_index: u32,
        pub port_num: u32,
        pub gid_type: u32,
        pub netdev_ifindex: u32,
    }
}
