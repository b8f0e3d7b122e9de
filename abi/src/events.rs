//! Records read from the async event fd and from completion channels (`<rdma/ib_user_verbs.h>`),
//! and the async event type numbers.
//!
//! Each `read()` returns exactly one `IbUverbsAsyncEventDesc` (16 bytes) or one
//! `IbUverbsCompEventDesc` (8 bytes). `event_type` is the kernel `enum ib_event_type`, which is not
//! part of the UAPI headers; the `IBV_EVENT_*` values below mirror include/rdma/ib_verbs.h (and
//! libibverbs `enum ibv_event_type`) and are the one set of constants not checked against a header.

use crate::layout::{abi_consts, abi_structs};

abi_consts! {
    // enum ib_event_type (include/rdma/ib_verbs.h; kernel-internal, not in the UAPI)
    pub const IBV_EVENT_CQ_ERR: u32 = 0;
    pub const IBV_EVENT_QP_FATAL: u32 = 1;
    pub const IBV_EVENT_QP_REQ_ERR: u32 = 2;
    pub const IBV_EVENT_QP_ACCESS_ERR: u32 = 3;
    pub const IBV_EVENT_COMM_EST: u32 = 4;
    pub const IBV_EVENT_SQ_DRAINED: u32 = 5;
    pub const IBV_EVENT_PATH_MIG: u32 = 6;
    pub const IBV_EVENT_PATH_MIG_ERR: u32 = 7;
    pub const IBV_EVENT_DEVICE_FATAL: u32 = 8;
    pub const IBV_EVENT_PORT_ACTIVE: u32 = 9;
    pub const IBV_EVENT_PORT_ERR: u32 = 10;
    pub const IBV_EVENT_LID_CHANGE: u32 = 11;
    pub const IBV_EVENT_PKEY_CHANGE: u32 = 12;
    pub const IBV_EVENT_SM_CHANGE: u32 = 13;
    pub const IBV_EVENT_SRQ_ERR: u32 = 14;
    pub const IBV_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
    pub const IBV_EVENT_QP_LAST_WQE_REACHED: u32 = 16;
    pub const IBV_EVENT_CLIENT_REREGISTER: u32 = 17;
    pub const IBV_EVENT_GID_CHANGE: u32 = 18;
    pub const IBV_EVENT_WQ_FATAL: u32 = 19;
}

abi_structs! {
    /// `struct ib_uverbs_async_event_desc` (`<rdma/ib_user_verbs.h>`).
    ///
    /// One record read from the async event fd (`UVERBS_METHOD_ASYNC_EVENT_ALLOC` or the
    /// `async_fd` of `IB_USER_VERBS_CMD_GET_CONTEXT`); `event_type` is an `IBV_EVENT_*` value.
    pub struct IbUverbsAsyncEventDesc: "struct ib_uverbs_async_event_desc" {
        pub element: u64,
        pub event_type: u32,
        pub reserved: u32,
    }

    /// `struct ib_uverbs_comp_event_desc` (`<rdma/ib_user_verbs.h>`).
    ///
    /// One record read from a completion channel (`IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`);
    /// `cq_handle` is the CQ's user handle.
    pub struct IbUverbsCompEventDesc: "struct ib_uverbs_comp_event_desc" {
        pub cq_handle: u64,
    }
}
