//! Completion channel and CQ structs of the `write()` ABI (`<rdma/ib_user_verbs.h>`),
//! including `struct ib_uverbs_wc` and the extended CQ create/modify commands.

use crate::layout::abi_structs;

abi_structs! {
    /// `struct ib_uverbs_create_comp_channel` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL` write command.
    pub struct IbUverbsCreateCompChannel: "struct ib_uverbs_create_comp_channel" {
        pub response: u64,
    }

    /// `struct ib_uverbs_create_comp_channel_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL` write command.
    pub struct IbUverbsCreateCompChannelResp: "struct ib_uverbs_create_comp_channel_resp" {
        pub fd: u32,
    }

    /// `struct ib_uverbs_create_cq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_CREATE_CQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsCreateCq: "struct ib_uverbs_create_cq" {
        pub response: u64,
        pub user_handle: u64,
        pub cqe: u32,
        pub comp_vector: u32,
        pub comp_channel: i32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_ex_create_cq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_EX_CMD_CREATE_CQ` write command.
    pub struct IbUverbsExCreateCq: "struct ib_uverbs_ex_create_cq" {
        pub user_handle: u64,
        pub cqe: u32,
        pub comp_vector: u32,
        pub comp_channel: i32,
        pub comp_mask: u32,
        pub flags: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_create_cq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_CREATE_CQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsCreateCqResp: "struct ib_uverbs_create_cq_resp" {
        pub cq_handle: u32,
        pub cqe: u32,
    }

    /// `struct ib_uverbs_ex_create_cq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_EX_CMD_CREATE_CQ` write command.
    pub struct IbUverbsExCreateCqResp: "struct ib_uverbs_ex_create_cq_resp" {
        pub base: IbUverbsCreateCqResp,
        pub comp_mask: u32,
        pub response_length: u32,
    }

    /// `struct ib_uverbs_resize_cq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_RESIZE_CQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    pub struct IbUverbsResizeCq: "struct ib_uverbs_resize_cq" {
        pub response: u64,
        pub cq_handle: u32,
        pub cqe: u32,
    }

    /// `struct ib_uverbs_resize_cq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_RESIZE_CQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `driver_data[]` (`__aligned_u64`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsResizeCqResp: "struct ib_uverbs_resize_cq_resp" {
        pub cqe: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_poll_cq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_POLL_CQ` write command.
    pub struct IbUverbsPollCq: "struct ib_uverbs_poll_cq" {
        pub response: u64,
        pub cq_handle: u32,
        pub ne: u32,
    }

    /// `struct ib_uverbs_wc` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsWc: "struct ib_uverbs_wc" {
        pub wr_id: u64,
        pub status: u32,
        pub opcode: u32,
        pub vendor_err: u32,
        pub byte_len: u32,
        /// C union of `imm_data`, `invalidate_rkey`.
        /// Represented as its member `imm_data` (`__be32`).
        pub ex: u32,
        pub qp_num: u32,
        pub src_qp: u32,
        pub wc_flags: u32,
        pub pkey_index: u16,
        pub slid: u16,
        pub sl: u8,
        pub dlid_path_bits: u8,
        pub port_num: u8,
        pub reserved: u8,
    }

    /// `struct ib_uverbs_poll_cq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_POLL_CQ` write command.
    ///
    /// Followed in the same buffer by the flexible array `wc[]` (`struct ib_uverbs_wc`), not part of this struct.
    #[repr(align(8))]
    pub struct IbUverbsPollCqResp: "struct ib_uverbs_poll_cq_resp" {
        pub count: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_req_notify_cq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ` write command.
    pub struct IbUverbsReqNotifyCq: "struct ib_uverbs_req_notify_cq" {
        pub cq_handle: u32,
        pub solicited_only: u32,
    }

    /// `struct ib_uverbs_destroy_cq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_CMD_DESTROY_CQ` write command.
    pub struct IbUverbsDestroyCq: "struct ib_uverbs_destroy_cq" {
        pub response: u64,
        pub cq_handle: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_destroy_cq_resp` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Response of the `IB_USER_VERBS_CMD_DESTROY_CQ` write command.
    pub struct IbUverbsDestroyCqResp: "struct ib_uverbs_destroy_cq_resp" {
        pub comp_events_reported: u32,
        pub async_events_reported: u32,
    }

    /// `struct ib_uverbs_cq_moderation` (`<rdma/ib_user_verbs.h>`).
    pub struct IbUverbsCqModeration: "struct ib_uverbs_cq_moderation" {
        pub cq_count: u16,
        pub cq_period: u16,
    }

    /// `struct ib_uverbs_ex_modify_cq` (`<rdma/ib_user_verbs.h>`).
    ///
    /// Request of the `IB_USER_VERBS_EX_CMD_MODIFY_CQ` write command.
    pub struct IbUverbsExModifyCq: "struct ib_uverbs_ex_modify_cq" {
        pub cq_handle: u32,
        pub attr_mask: u32,
        pub attr: IbUverbsCqModeration,
        pub reserved: u32,
    }
}
