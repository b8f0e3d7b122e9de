//! The rdma_cm write ABI of `/dev/infiniband/rdma_cm`, `<rdma/rdma_user_cm.h>`, plus the
//! `<rdma/ib_user_sa.h>` path records it carries.
//!
//! Socket addresses are raw bytes: `sockaddr_in6` fields are `[u8; 28]`, `__kernel_sockaddr_storage`
//! is `KernelSockaddrStorage`. The event numbers `RDMA_CM_EVENT_*` are kernel-internal
//! (include/rdma/rdma_cm.h) and are listed as not header-checked in the layout test.

use crate::layout::{abi_consts, abi_structs};
use crate::write_qp::IbUverbsAhAttr;

abi_consts! {
    // anonymous enum
    pub const RDMA_USER_CM_CMD_CREATE_ID: u32 = 0;
    pub const RDMA_USER_CM_CMD_DESTROY_ID: u32 = 1;
    pub const RDMA_USER_CM_CMD_BIND_IP: u32 = 2;
    pub const RDMA_USER_CM_CMD_RESOLVE_IP: u32 = 3;
    pub const RDMA_USER_CM_CMD_RESOLVE_ROUTE: u32 = 4;
    pub const RDMA_USER_CM_CMD_QUERY_ROUTE: u32 = 5;
    pub const RDMA_USER_CM_CMD_CONNECT: u32 = 6;
    pub const RDMA_USER_CM_CMD_LISTEN: u32 = 7;
    pub const RDMA_USER_CM_CMD_ACCEPT: u32 = 8;
    pub const RDMA_USER_CM_CMD_REJECT: u32 = 9;
    pub const RDMA_USER_CM_CMD_DISCONNECT: u32 = 10;
    pub const RDMA_USER_CM_CMD_INIT_QP_ATTR: u32 = 11;
    pub const RDMA_USER_CM_CMD_GET_EVENT: u32 = 12;
    pub const RDMA_USER_CM_CMD_GET_OPTION: u32 = 13;
    pub const RDMA_USER_CM_CMD_SET_OPTION: u32 = 14;
    pub const RDMA_USER_CM_CMD_NOTIFY: u32 = 15;
    pub const RDMA_USER_CM_CMD_JOIN_IP_MCAST: u32 = 0x10;
    pub const RDMA_USER_CM_CMD_LEAVE_MCAST: u32 = 17;
    pub const RDMA_USER_CM_CMD_MIGRATE_ID: u32 = 18;
    pub const RDMA_USER_CM_CMD_QUERY: u32 = 19;
    pub const RDMA_USER_CM_CMD_BIND: u32 = 20;
    pub const RDMA_USER_CM_CMD_RESOLVE_ADDR: u32 = 21;
    pub const RDMA_USER_CM_CMD_JOIN_MCAST: u32 = 22;

    // enum rdma_ucm_port_space
    pub const RDMA_PS_IPOIB: u32 = 2;
    pub const RDMA_PS_IB: u32 = 319;
    pub const RDMA_PS_TCP: u32 = 262;
    pub const RDMA_PS_UDP: u32 = 273;

    // anonymous enum
    pub const RDMA_USER_CM_QUERY_ADDR: u32 = 0;
    pub const RDMA_USER_CM_QUERY_PATH: u32 = 1;
    pub const RDMA_USER_CM_QUERY_GID: u32 = 2;

    // anonymous enum
    pub const RDMA_MC_JOIN_FLAG_FULLMEMBER: u32 = 0;
    pub const RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: u32 = 1;
    pub const RDMA_MC_JOIN_FLAG_RESERVED: u32 = 2;

    // anonymous enum
    pub const RDMA_OPTION_ID: u32 = 0;
    pub const RDMA_OPTION_IB: u32 = 1;

    // anonymous enum
    pub const RDMA_OPTION_ID_TOS: u32 = 0;
    pub const RDMA_OPTION_ID_REUSEADDR: u32 = 1;
    pub const RDMA_OPTION_ID_AFONLY: u32 = 2;
    pub const RDMA_OPTION_ID_ACK_TIMEOUT: u32 = 3;

    // anonymous enum
    pub const RDMA_OPTION_IB_PATH: u32 = 1;

    // anonymous enum
    pub const IB_PATH_GMP: u32 = 1;
    pub const IB_PATH_PRIMARY: u32 = 2;
    pub const IB_PATH_ALTERNATE: u32 = 4;
    pub const IB_PATH_OUTBOUND: u32 = 8;
    pub const IB_PATH_INBOUND: u32 = 0x10;
    pub const IB_PATH_INBOUND_REVERSE: u32 = 0x20;
    pub const IB_PATH_BIDIRECTIONAL: u32 = 40;
    pub const RDMA_USER_CM_ABI_VERSION: u32 = 4;
    pub const RDMA_MAX_PRIVATE_DATA: u32 = 0x100;

    // enum rdma_cm_event_type (include/rdma/rdma_cm.h; kernel-internal, not in the UAPI)
    pub const RDMA_CM_EVENT_ADDR_RESOLVED: u32 = 0;
    pub const RDMA_CM_EVENT_ADDR_ERROR: u32 = 1;
    pub const RDMA_CM_EVENT_ROUTE_RESOLVED: u32 = 2;
    pub const RDMA_CM_EVENT_ROUTE_ERROR: u32 = 3;
    pub const RDMA_CM_EVENT_CONNECT_REQUEST: u32 = 4;
    pub const RDMA_CM_EVENT_CONNECT_RESPONSE: u32 = 5;
    pub const RDMA_CM_EVENT_CONNECT_ERROR: u32 = 6;
    pub const RDMA_CM_EVENT_UNREACHABLE: u32 = 7;
    pub const RDMA_CM_EVENT_REJECTED: u32 = 8;
    pub const RDMA_CM_EVENT_ESTABLISHED: u32 = 9;
    pub const RDMA_CM_EVENT_DISCONNECTED: u32 = 10;
    pub const RDMA_CM_EVENT_DEVICE_REMOVAL: u32 = 11;
    pub const RDMA_CM_EVENT_MULTICAST_JOIN: u32 = 12;
    pub const RDMA_CM_EVENT_MULTICAST_ERROR: u32 = 13;
    pub const RDMA_CM_EVENT_ADDR_CHANGE: u32 = 14;
    pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: u32 = 15;
}

abi_structs! {
    /// `struct __kernel_sockaddr_storage` (`<linux/socket.h>`): 128 bytes, 8-byte aligned.
    ///
    /// Holds a `sockaddr_in`, `sockaddr_in6` or `sockaddr_ib` as raw bytes.
    #[repr(align(8))]
    pub struct KernelSockaddrStorage: "struct __kernel_sockaddr_storage" {
        /// Address family (`AF_INET`, `AF_INET6`, `AF_IB`), native endian.
        pub ss_family: u16,
        /// The rest of the address.
        pub data: [u8; 126] = "__data",
    }

    /// `struct rdma_ucm_cmd_hdr` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Header of every `write()` to `/dev/infiniband/rdma_cm`; `in`/`out` are byte counts.
    pub struct RdmaUcmCmdHdr: "struct rdma_ucm_cmd_hdr" {
        pub cmd: u32,
        pub in_: u16 = "in",
        pub out: u16,
    }

    /// `struct rdma_ucm_create_id` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_CREATE_ID` write command.
    pub struct RdmaUcmCreateId: "struct rdma_ucm_create_id" {
        pub uid: u64,
        pub response: u64,
        pub ps: u16,
        pub qp_type: u8,
        pub reserved: [u8; 5],
    }

    /// `struct rdma_ucm_create_id_resp` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Response of the `RDMA_USER_CM_CMD_CREATE_ID` write command.
    pub struct RdmaUcmCreateIdResp: "struct rdma_ucm_create_id_resp" {
        pub id: u32,
    }

    /// `struct rdma_ucm_destroy_id` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_DESTROY_ID` write command.
    pub struct RdmaUcmDestroyId: "struct rdma_ucm_destroy_id" {
        pub response: u64,
        pub id: u32,
        pub reserved: u32,
    }

    /// `struct rdma_ucm_destroy_id_resp` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Response of the `RDMA_USER_CM_CMD_DESTROY_ID` write command.
    pub struct RdmaUcmDestroyIdResp: "struct rdma_ucm_destroy_id_resp" {
        pub events_reported: u32,
    }

    /// `struct rdma_ucm_bind_ip` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_BIND_IP` write command.
    pub struct RdmaUcmBindIp: "struct rdma_ucm_bind_ip" {
        pub response: u64,
        /// Raw bytes of a `struct sockaddr_in6`.
        pub addr: [u8; 28],
        pub id: u32,
    }

    /// `struct rdma_ucm_bind` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_BIND` write command.
    pub struct RdmaUcmBind: "struct rdma_ucm_bind" {
        pub id: u32,
        pub addr_size: u16,
        pub reserved: u16,
        pub addr: KernelSockaddrStorage,
    }

    /// `struct rdma_ucm_resolve_ip` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_RESOLVE_IP` write command.
    pub struct RdmaUcmResolveIp: "struct rdma_ucm_resolve_ip" {
        /// Raw bytes of a `struct sockaddr_in6`.
        pub src_addr: [u8; 28],
        /// Raw bytes of a `struct sockaddr_in6`.
        pub dst_addr: [u8; 28],
        pub id: u32,
        pub timeout_ms: u32,
    }

    /// `struct rdma_ucm_resolve_addr` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_RESOLVE_ADDR` write command.
    pub struct RdmaUcmResolveAddr: "struct rdma_ucm_resolve_addr" {
        pub id: u32,
        pub timeout_ms: u32,
        pub src_size: u16,
        pub dst_size: u16,
        pub reserved: u32,
        pub src_addr: KernelSockaddrStorage,
        pub dst_addr: KernelSockaddrStorage,
    }

    /// `struct rdma_ucm_resolve_route` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_RESOLVE_ROUTE` write command.
    pub struct RdmaUcmResolveRoute: "struct rdma_ucm_resolve_route" {
        pub id: u32,
        pub timeout_ms: u32,
    }

    /// `struct rdma_ucm_query` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_QUERY` write command.
    pub struct RdmaUcmQuery: "struct rdma_ucm_query" {
        pub response: u64,
        pub id: u32,
        pub option: u32,
    }

    /// `struct rdma_ucm_query_route_resp` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Response of the `RDMA_USER_CM_CMD_QUERY_ROUTE` write command.
    pub struct RdmaUcmQueryRouteResp: "struct rdma_ucm_query_route_resp" {
        pub node_guid: u64,
        pub ib_route: [IbUserPathRec; 2],
        /// Raw bytes of a `struct sockaddr_in6`.
        pub src_addr: [u8; 28],
        /// Raw bytes of a `struct sockaddr_in6`.
        pub dst_addr: [u8; 28],
        pub num_paths: u32,
        pub port_num: u8,
        pub reserved: [u8; 3],
        pub ibdev_index: u32,
        pub reserved1: u32,
    }

    /// `struct rdma_ucm_query_addr_resp` (`<rdma/rdma_user_cm.h>`).
    pub struct RdmaUcmQueryAddrResp: "struct rdma_ucm_query_addr_resp" {
        pub node_guid: u64,
        pub port_num: u8,
        pub reserved: u8,
        pub pkey: u16,
        pub src_size: u16,
        pub dst_size: u16,
        pub src_addr: KernelSockaddrStorage,
        pub dst_addr: KernelSockaddrStorage,
        pub ibdev_index: u32,
        pub reserved1: u32,
    }

    /// `struct rdma_ucm_query_path_resp` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Followed in the same buffer by the flexible array `path_data[]` (`struct ib_path_rec_data`), not part of this struct.
    pub struct RdmaUcmQueryPathResp: "struct rdma_ucm_query_path_resp" {
        pub num_paths: u32,
        pub reserved: u32,
    }

    /// `struct rdma_ucm_conn_param` (`<rdma/rdma_user_cm.h>`).
    pub struct RdmaUcmConnParam: "struct rdma_ucm_conn_param" {
        pub qp_num: u32,
        pub qkey: u32,
        pub private_data: [u8; 256],
        pub private_data_len: u8,
        pub srq: u8,
        pub responder_resources: u8,
        pub initiator_depth: u8,
        pub flow_control: u8,
        pub retry_count: u8,
        pub rnr_retry_count: u8,
        pub valid: u8,
    }

    /// `struct rdma_ucm_ud_param` (`<rdma/rdma_user_cm.h>`).
    pub struct RdmaUcmUdParam: "struct rdma_ucm_ud_param" {
        pub qp_num: u32,
        pub qkey: u32,
        pub ah_attr: IbUverbsAhAttr,
        pub private_data: [u8; 256],
        pub private_data_len: u8,
        pub reserved: [u8; 7],
    }

    /// `struct rdma_ucm_ece` (`<rdma/rdma_user_cm.h>`).
    pub struct RdmaUcmEce: "struct rdma_ucm_ece" {
        pub vendor_id: u32,
        pub attr_mod: u32,
    }

    /// `struct rdma_ucm_connect` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_CONNECT` write command.
    pub struct RdmaUcmConnect: "struct rdma_ucm_connect" {
        pub conn_param: RdmaUcmConnParam,
        pub id: u32,
        pub reserved: u32,
        pub ece: RdmaUcmEce,
    }

    /// `struct rdma_ucm_listen` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_LISTEN` write command.
    pub struct RdmaUcmListen: "struct rdma_ucm_listen" {
        pub id: u32,
        pub backlog: u32,
    }

    /// `struct rdma_ucm_accept` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_ACCEPT` write command.
    pub struct RdmaUcmAccept: "struct rdma_ucm_accept" {
        pub uid: u64,
        pub conn_param: RdmaUcmConnParam,
        pub id: u32,
        pub reserved: u32,
        pub ece: RdmaUcmEce,
    }

    /// `struct rdma_ucm_reject` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_REJECT` write command.
    pub struct RdmaUcmReject: "struct rdma_ucm_reject" {
        pub id: u32,
        pub private_data_len: u8,
        pub reason: u8,
        pub reserved: [u8; 2],
        pub private_data: [u8; 256],
    }

    /// `struct rdma_ucm_disconnect` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_DISCONNECT` write command.
    pub struct RdmaUcmDisconnect: "struct rdma_ucm_disconnect" {
        pub id: u32,
    }

    /// `struct rdma_ucm_init_qp_attr` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_INIT_QP_ATTR` write command.
    pub struct RdmaUcmInitQpAttr: "struct rdma_ucm_init_qp_attr" {
        pub response: u64,
        pub id: u32,
        pub qp_state: u32,
    }

    /// `struct rdma_ucm_notify` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_NOTIFY` write command.
    pub struct RdmaUcmNotify: "struct rdma_ucm_notify" {
        pub id: u32,
        pub event: u32,
    }

    /// `struct rdma_ucm_join_ip_mcast` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_JOIN_IP_MCAST` write command.
    pub struct RdmaUcmJoinIpMcast: "struct rdma_ucm_join_ip_mcast" {
        pub response: u64,
        pub uid: u64,
        /// Raw bytes of a `struct sockaddr_in6`.
        pub addr: [u8; 28],
        pub id: u32,
    }

    /// `struct rdma_ucm_join_mcast` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_JOIN_MCAST` write command.
    pub struct RdmaUcmJoinMcast: "struct rdma_ucm_join_mcast" {
        pub response: u64,
        pub uid: u64,
        pub id: u32,
        pub addr_size: u16,
        pub join_flags: u16,
        pub addr: KernelSockaddrStorage,
    }

    /// `struct rdma_ucm_get_event` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_GET_EVENT` write command.
    pub struct RdmaUcmGetEvent: "struct rdma_ucm_get_event" {
        pub response: u64,
    }

    /// `struct rdma_ucm_event_resp` (`<rdma/rdma_user_cm.h>`).
    pub struct RdmaUcmEventResp: "struct rdma_ucm_event_resp" {
        pub uid: u64,
        pub id: u32,
        pub event: u32,
        pub status: u32,
        /// C union of `conn`, `ud`.
        /// Represented as its largest member `ud`; the other members are prefixes of the same bytes.
        pub param: RdmaUcmUdParam,
        pub reserved: u32,
        pub ece: RdmaUcmEce,
    }

    /// `struct rdma_ucm_set_option` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_SET_OPTION` write command.
    pub struct RdmaUcmSetOption: "struct rdma_ucm_set_option" {
        pub optval: u64,
        pub id: u32,
        pub level: u32,
        pub optname: u32,
        pub optlen: u32,
    }

    /// `struct rdma_ucm_migrate_id` (`<rdma/rdma_user_cm.h>`).
    ///
    /// Request of the `RDMA_USER_CM_CMD_MIGRATE_ID` write command.
    pub struct RdmaUcmMigrateId: "struct rdma_ucm_migrate_id" {
        pub response: u64,
        pub id: u32,
        pub fd: u32,
    }

    /// `struct rdma_ucm_migrate_resp` (`<rdma/rdma_user_cm.h>`).
    pub struct RdmaUcmMigrateResp: "struct rdma_ucm_migrate_resp" {
        pub events_reported: u32,
    }

    /// `struct ib_path_rec_data` (`<rdma/ib_user_sa.h>`).
    pub struct IbPathRecData: "struct ib_path_rec_data" {
        pub flags: u32,
        pub reserved: u32,
        pub path_rec: [u32; 16],
    }

    /// `struct ib_user_path_rec` (`<rdma/ib_user_sa.h>`).
    pub struct IbUserPathRec: "struct ib_user_path_rec" {
        pub dgid: [u8; 16],
        pub sgid: [u8; 16],
        /// Big-endian (`__be16`).
        pub dlid: u16,
        /// Big-endian (`__be16`).
        pub slid: u16,
        pub raw_traffic: u32,
        /// Big-endian (`__be32`).
        pub flow_label: u32,
        pub reversible: u32,
        pub mtu: u32,
        /// Big-endian (`__be16`).
        pub pkey: u16,
        pub hop_limit: u8,
        pub traffic_class: u8,
        pub numb_path: u8,
        pub sl: u8,
        pub mtu_selector: u8,
        pub rate_selector: u8,
        pub rate: u8,
        pub packet_life_time_selector: u8,
        pub packet_life_time: u8,
        pub preference: u8,
    }
}
