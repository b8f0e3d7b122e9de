//! QP, address handle, multicast and post-send/recv structs of the `write()` ABI
//! (`<rdma/ib_user_verbs.h>`), including the typed members of the `ib_uverbs_send_wr` union.

use crate::layout::abi_structs;

abi_structs! {
    /// `struct ib_uverbs_global_route` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsGlobalRoute: "struct ib_uverbs_global_route" {
        pub dgid: [u8; 16],
        pub flow_label: u32,
        pub sgid_index: u8,
        pub hop_limit: u8,
        pub traffic_class: u8,
        pub reserved: u8,
    }

    /// `struct ib_uverbs_ah_attr` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsAhAttr: "struct ib_uverbs_ah_attr" {
        pub grh: IbUverbsGlobalRoute,
        pub dlid: u16,
        pub sl: u8,
        pub src_path_bits: u8,
        pub static_rate: u8,
        pub is_global: u8,
        pub port_num: u8,
        pub reserved: u8,
    }

    /// `struct ib_uverbs_qp_attr` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsQpAttr: "struct ib_uverbs_qp_attr" {
        pub qp_attr_mask: u32,
        pub qp_state: u32,
        pub cur_qp_state: u32,
        pub path_mtu: u32,
        pub path_mig_state: u32,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        pub qp_access_flags: u32,
        pub ah_attr: IbUverbsAhAttr,
        pub alt_ah_attr: IbUverbsAhAttr,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub pkey_index: u16,
        pub alt_pkey_index: u16,
        pub en_sqd_async_notify: u8,
        pub sq_draining: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub reserved: [u8; 5],
    }

    /// `struct ib_uverbs_create_qp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_CREATE_QP` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsCreateQp: "struct ib_uverbs_create_qp" {
        pub response: u64,
        pub user_handle: u64,
        pub pd_handle: u32,
        pub send_cq_handle: u32,
        pub recv_cq_handle: u32,
        pub srq_handle: u32,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub sq_sig_all: u8,
        pub qp_type: u8,
        pub is_srq: u8,
        pub reserved: u8,
    }

    /// `struct ib_uverbs_ex_create_qp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_EX_CMD_CREATE_QP` write command.
    pub struct IbUverbsExCreateQp: "struct ib_uverbs_ex_create_qp" {
        pub user_handle: u64,
        pub pd_handle: u32,
        pub send_cq_handle: u32,
        pub recv_cq_handle: u32,
        pub srq_handle: u32,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub sq_sig_all: u8,
        pub qp_type: u8,
        pub is_srq: u8,
        pub reserved: u8,
        pub comp_mask: u32,
        pub create_flags: u32,
        pub rwq_ind_tbl_handle: u32,
        pub source_qpn: u32,
    }

    /// `struct ib_uverbs_open_qp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_OPEN_QP` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsOpenQp: "struct ib_uverbs_open_qp" {
        pub response: u64,
        pub user_handle: u64,
        pub pd_handle: u32,
        pub qpn: u32,
        pub qp_type: u8,
        pub reserved: [u8; 7],
    }

    /// `struct ib_uverbs_create_qp_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_CREATE_QP` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__u32`), not part of this struct.
    pub struct IbUverbsCreateQpResp: "struct ib_uverbs_create_qp_resp" {
        pub qp_handle: u32,
        pub qpn: u32,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_ex_create_qp_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_EX_CMD_CREATE_QP` write command.
    pub struct IbUverbsExCreateQpResp: "struct ib_uverbs_ex_create_qp_resp" {
        pub base: IbUverbsCreateQpResp,
        pub comp_mask: u32,
        pub response_length: u32,
    }

    /// `struct ib_uverbs_qp_dest` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsQpDest: "struct ib_uverbs_qp_dest" {
        pub dgid: [u8; 16],
        pub flow_label: u32,
        pub dlid: u16,
        pub reserved: u16,
        pub sgid_index: u8,
        pub hop_limit: u8,
        pub traffic_class: u8,
        pub sl: u8,
        pub src_path_bits: u8,
        pub static_rate: u8,
        pub is_global: u8,
        pub port_num: u8,
    }

    /// `struct ib_uverbs_query_qp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_QUERY_QP` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsQueryQp: "struct ib_uverbs_query_qp" {
        pub response: u64,
        pub qp_handle: u32,
        pub attr_mask: u32,
    }

    /// `struct ib_uverbs_query_qp_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_QUERY_QP` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsQueryQpResp: "struct ib_uverbs_query_qp_resp" {
        pub dest: IbUverbsQpDest,
        pub alt_dest: IbUverbsQpDest,
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        pub qp_access_flags: u32,
        pub pkey_index: u16,
        pub alt_pkey_index: u16,
        pub qp_state: u8,
        pub cur_qp_state: u8,
        pub path_mtu: u8,
        pub path_mig_state: u8,
        pub sq_draining: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub sq_sig_all: u8,
        pub reserved: [u8; 5],
    }

    /// `struct ib_uverbs_modify_qp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_MODIFY_QP` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsModifyQp: "struct ib_uverbs_modify_qp" {
        pub dest: IbUverbsQpDest,
        pub alt_dest: IbUverbsQpDest,
        pub qp_handle: u32,
        pub attr_mask: u32,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        pub qp_access_flags: u32,
        pub pkey_index: u16,
        pub alt_pkey_index: u16,
        pub qp_state: u8,
        pub cur_qp_state: u8,
        pub path_mtu: u8,
        pub path_mig_state: u8,
        pub en_sqd_async_notify: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub reserved: [u8; 2],
    }

    /// `struct ib_uverbs_ex_modify_qp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_EX_CMD_MODIFY_QP` write command.
    pub struct IbUverbsExModifyQp: "struct ib_uverbs_ex_modify_qp" {
        pub base: IbUverbsModifyQp,
        pub rate_limit: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_ex_modify_qp_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_EX_CMD_MODIFY_QP` write command.
    pub struct IbUverbsExModifyQpResp: "struct ib_uverbs_ex_modify_qp_resp" {
        pub comp_mask: u32,
        pub response_length: u32,
    }

    /// `struct ib_uverbs_destroy_qp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_DESTROY_QP` write command.
    pub struct IbUverbsDestroyQp: "struct ib_uverbs_destroy_qp" {
        pub response: u64,
        pub qp_handle: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_destroy_qp_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_DESTROY_QP` write command.
    pub struct IbUverbsDestroyQpResp: "struct ib_uverbs_destroy_qp_resp" {
        pub events_reported: u32,
    }

    /// `struct ib_uverbs_sge` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsSge: "struct ib_uverbs_sge" {
        pub addr: u64,
        pub length: u32,
        pub lkey: u32,
    }

    /// `struct ib_uverbs_send_wr` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsSendWr: "struct ib_uverbs_send_wr" {
        pub wr_id: u64,
        pub num_sge: u32,
        pub opcode: u32,
        pub send_flags: u32,
        /// C union of `imm_data`, `invalidate_rkey`.
        /// Represented as its member `imm_data` (`__be32`).
        pub ex: u32,
        /// C union of `rdma`, `atomic`, `ud`.
        /// Kept as raw storage of the union size; reinterpret with zerocopy as the member selected by the opcode/type.
        pub wr: [u8; 32],
    }

    /// Member `wr.rdma` of `struct ib_uverbs_send_wr` (anonymous in C; checked through `__typeof__`).
    pub struct IbUverbsSendWrRdma: "__typeof__(((struct ib_uverbs_send_wr *)0)->wr.rdma)" {
        pub remote_addr: u64,
        pub rkey: u32,
        pub reserved: u32,
    }

    /// Member `wr.atomic` of `struct ib_uverbs_send_wr` (anonymous in C; checked through `__typeof__`).
    pub struct IbUverbsSendWrAtomic: "__typeof__(((struct ib_uverbs_send_wr *)0)->wr.atomic)" {
        pub remote_addr: u64,
        pub compare_add: u64,
        pub swap: u64,
        pub rkey: u32,
        pub reserved: u32,
    }

    /// Member `wr.ud` of `struct ib_uverbs_send_wr` (anonymous in C; checked through `__typeof__`).
    pub struct IbUverbsSendWrUd: "__typeof__(((struct ib_uverbs_send_wr *)0)->wr.ud)" {
        pub ah: u32,
        pub remote_qpn: u32,
        pub remote_qkey: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_post_send` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_POST_SEND` write command.
    ///
    /// Followed in the same buffer by the flexible array `send_wr[]` (`struct ib_uverbs_send_wr`), not part of this struct.
    pub struct IbUverbsPostSend: "struct ib_uverbs_post_send" {
        pub response: u64,
        pub qp_handle: u32,
        pub wr_count: u32,
        pub sge_count: u32,
        pub wqe_size: u32,
    }

    /// `struct ib_uverbs_post_send_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_POST_SEND` write command.
    pub struct IbUverbsPostSendResp: "struct ib_uverbs_post_send_resp" {
        pub bad_wr: u32,
    }

    /// `struct ib_uverbs_recv_wr` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsRecvWr: "struct ib_uverbs_recv_wr" {
        pub wr_id: u64,
        pub num_sge: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_post_recv` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_POST_RECV` write command.
    ///
    /// Followed in the same buffer by the flexible array `recv_wr[]` (`struct ib_uverbs_recv_wr`), not part of this struct.
    pub struct IbUverbsPostRecv: "struct ib_uverbs_post_recv" {
        pub response: u64,
        pub qp_handle: u32,
        pub wr_count: u32,
        pub sge_count: u32,
        pub wqe_size: u32,
    }

    /// `struct ib_uverbs_post_recv_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_POST_RECV` write command.
    pub struct IbUverbsPostRecvResp: "struct ib_uverbs_post_recv_resp" {
        pub bad_wr: u32,
    }

    /// `struct ib_uverbs_post_srq_recv` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_POST_SRQ_RECV` write command.
    ///
    /// Followed in the same buffer by the flexible array `recv[]` (`struct ib_uverbs_recv_wr`), not part of this struct.
    pub struct IbUverbsPostSrqRecv: "struct ib_uverbs_post_srq_recv" {
        pub response: u64,
        pub srq_handle: u32,
        pub wr_count: u32,
        pub sge_count: u32,
        pub wqe_size: u32,
    }

    /// `struct ib_uverbs_post_srq_recv_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_POST_SRQ_RECV` write command.
    pub struct IbUverbsPostSrqRecvResp: "struct ib_uverbs_post_srq_recv_resp" {
        pub bad_wr: u32,
    }

    /// `struct ib_uverbs_create_ah` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_CREATE_AH` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsCreateAh: "struct ib_uverbs_create_ah" {
        pub response: u64,
        pub user_handle: u64,
        pub pd_handle: u32,
        pub reserved: u32,
        pub attr: IbUverbsAhAttr,
    }

    /// `struct ib_uverbs_create_ah_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_CREATE_AH` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__u32`), not part of this struct.
    pub struct IbUverbsCreateAhResp: "struct ib_uverbs_create_ah_resp" {
        pub ah_handle: u32,
    }

    /// `struct ib_uverbs_destroy_ah` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_DESTROY_AH` write command.
    pub struct IbUverbsDestroyAh: "struct ib_uverbs_destroy_ah" {
        pub ah_handle: u32,
    }

    /// `struct ib_uverbs_attach_mcast` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_ATTACH_MCAST` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsAttachMcast: "struct ib_uverbs_attach_mcast" {
        pub gid: [u8; 16],
        pub qp_handle: u32,
        pub mlid: u16,
        pub reserved: u16,
    }

    /// `struct ib_uverbs_detach_mcast` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_DETACH_MCAST` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsDetachMcast: "struct ib_uverbs_detach_mcast" {
        pub gid: [u8; 16],
        pub qp_handle: u32,
        pub mlid: u16,
        pub reserved: u16,
    }
}
