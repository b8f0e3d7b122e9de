//! The attribute kinds of every uverbs ioctl method Linux 6.1 serves on an
//! mlx5 device, and the definitions (core request and response sizes,
//! response pointer, driver data) of the write commands that
//! `UVERBS_METHOD_INVOKE_WRITE` and a plain `write()` check.
//!
//! Transcribed from the kernel sources, not from uverbs (a test oracle
//! must not be the code under test): the methods from the
//! `DECLARE_UVERBS_NAMED_METHOD[_DESTROY]` and `ADD_UVERBS_ATTRIBUTES_SIMPLE`
//! specs of Linux 6.1 (Debian linux-source-6.1 6.1.192), each entry naming
//! its file under `drivers/infiniband/`; the ids resolved by compiling
//! against that tree's `include/uapi/rdma/{ib,mlx5}_user_ioctl_cmds.h`.
//! `UVERBS_ATTR_UHW()` is its two optional attributes `UVERBS_ATTR_UHW_IN`
//! (`PTR_IN`) and `UVERBS_ATTR_UHW_OUT` (`PTR_OUT`), as
//! `include/rdma/uverbs_ioctl.h` defines it. A method may appear twice
//! (a driver adding attributes to a core method); the decoder unites them.

/// How the kernel reads an attribute (`enum uverbs_attr_type` plus the
/// access of `IDR`/`FD` attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `UVERBS_ATTR_PTR_IN`: inline when `len <= 8`, else a pointer.
    PtrIn,
    /// `UVERBS_ATTR_PTR_OUT`: a pointer to `len` bytes the kernel writes.
    PtrOut,
    /// `UVERBS_ATTR_CONST_IN`: a value in `data`.
    ConstIn,
    /// `UVERBS_ATTR_FLAGS_IN`: a value in `data`.
    FlagsIn,
    /// `UVERBS_ATTR_ENUM_IN`: the element in `attr_data`, its value inline.
    EnumIn,
    /// `UVERBS_ATTR_IDR` read or write access: a handle in `data`.
    Idr,
    /// `UVERBS_ATTR_IDR` with `UVERBS_ACCESS_NEW`: the kernel writes the handle.
    IdrNew,
    /// `UVERBS_ATTR_IDR` with `UVERBS_ACCESS_DESTROY`: a handle in `data`.
    IdrDestroy,
    /// `UVERBS_ATTR_FD` read access: an fd in `data`.
    Fd,
    /// `UVERBS_ATTR_FD` with `UVERBS_ACCESS_NEW`: the kernel writes the fd.
    FdNew,
    /// `UVERBS_ATTR_RAW_FD`: an fd number as a value.
    RawFd,
}

/// One attribute of a method spec.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub(crate) id: u16,
    pub(crate) kind: Kind,
    /// `UA_MANDATORY` in the spec: the kernel fails a call without it (EINVAL).
    pub(crate) mandatory: bool,
}

/// One method spec.
#[derive(Debug)]
pub(crate) struct Method {
    pub(crate) object: u16,
    pub(crate) method: u16,
    pub(crate) attrs: &'static [Spec],
}

/// `UVERBS_OBJECT_DEVICE`, `UVERBS_METHOD_INVOKE_WRITE` and its attributes
/// (`include/uapi/rdma/ib_user_ioctl_cmds.h`).
pub(crate) const OBJECT_DEVICE: u16 = 0;
pub(crate) const METHOD_INVOKE_WRITE: u16 = 0;
pub(crate) const ATTR_CORE_IN: u16 = 0;
pub(crate) const ATTR_CORE_OUT: u16 = 1;
pub(crate) const ATTR_WRITE_CMD: u16 = 2;
pub(crate) const ATTR_UHW_IN: u16 = 0x1000;
pub(crate) const ATTR_UHW_OUT: u16 = 0x1001;

/// `IB_USER_VERBS_CMD_FLAG_EXTENDED` (`include/uapi/rdma/ib_user_verbs.h`).
pub(crate) const EXTENDED: u32 = 0x8000_0000;

#[rustfmt::skip]
pub(crate) static METHODS: &[Method] = &[
    // core/uverbs_std_types_device.c: UVERBS_METHOD_INVOKE_WRITE
    Method { object: 0, method: 0, attrs: &[
        Spec { id: 0x2, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_WRITE_CMD
        Spec { id: 0, kind: Kind::PtrIn, mandatory: false }, // UVERBS_ATTR_CORE_IN
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_CORE_OUT
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: false }, // UVERBS_ATTR_UHW_IN
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_UHW_OUT
    ] },
    // core/uverbs_std_types_device.c: UVERBS_METHOD_GET_CONTEXT
    Method { object: 0, method: 0x3, attrs: &[
        Spec { id: 0, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: false }, // UVERBS_ATTR_UHW_IN
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_UHW_OUT
    ] },
    // core/uverbs_std_types_device.c: UVERBS_METHOD_QUERY_CONTEXT
    Method { object: 0, method: 0x4, attrs: &[
        Spec { id: 0, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT
    ] },
    // core/uverbs_std_types_device.c: UVERBS_METHOD_INFO_HANDLES
    Method { object: 0, method: 0x1, attrs: &[
        Spec { id: 0, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_INFO_OBJECT_ID
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_INFO_TOTAL_HANDLES
        Spec { id: 0x2, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_INFO_HANDLES_LIST
    ] },
    // core/uverbs_std_types_device.c: UVERBS_METHOD_QUERY_PORT
    Method { object: 0, method: 0x2, attrs: &[
        Spec { id: 0, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_QUERY_PORT_PORT_NUM
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_QUERY_PORT_RESP
    ] },
    // core/uverbs_std_types_device.c: UVERBS_METHOD_QUERY_GID_TABLE
    Method { object: 0, method: 0x5, attrs: &[
        Spec { id: 0, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE
        Spec { id: 0x1, kind: Kind::FlagsIn, mandatory: false }, // UVERBS_ATTR_QUERY_GID_TABLE_FLAGS
        Spec { id: 0x2, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES
        Spec { id: 0x3, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES
    ] },
    // core/uverbs_std_types_device.c: UVERBS_METHOD_QUERY_GID_ENTRY
    Method { object: 0, method: 0x6, attrs: &[
        Spec { id: 0, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_QUERY_GID_ENTRY_PORT
        Spec { id: 0x1, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX
        Spec { id: 0x2, kind: Kind::FlagsIn, mandatory: true }, // UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS
        Spec { id: 0x3, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY
    ] },
    // core/uverbs_std_types_cq.c: UVERBS_METHOD_CQ_CREATE
    Method { object: 0x3, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrNew, mandatory: true }, // UVERBS_ATTR_CREATE_CQ_HANDLE
        Spec { id: 0x1, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_CQ_CQE
        Spec { id: 0x2, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_CQ_USER_HANDLE
        Spec { id: 0x3, kind: Kind::Fd, mandatory: false }, // UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL
        Spec { id: 0x4, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_CQ_COMP_VECTOR
        Spec { id: 0x5, kind: Kind::FlagsIn, mandatory: false }, // UVERBS_ATTR_CREATE_CQ_FLAGS
        Spec { id: 0x6, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_CREATE_CQ_RESP_CQE
        Spec { id: 0x7, kind: Kind::Fd, mandatory: false }, // UVERBS_ATTR_CREATE_CQ_EVENT_FD
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: false }, // UVERBS_ATTR_UHW_IN
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_UHW_OUT
    ] },
    // core/uverbs_std_types_cq.c: UVERBS_METHOD_CQ_DESTROY
    Method { object: 0x3, method: 0x1, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_CQ_HANDLE
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_DESTROY_CQ_RESP
    ] },
    // core/uverbs_std_types_qp.c: UVERBS_METHOD_QP_CREATE
    Method { object: 0x4, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrNew, mandatory: true }, // UVERBS_ATTR_CREATE_QP_HANDLE
        Spec { id: 0x1, kind: Kind::Idr, mandatory: false }, // UVERBS_ATTR_CREATE_QP_XRCD_HANDLE
        Spec { id: 0x2, kind: Kind::Idr, mandatory: false }, // UVERBS_ATTR_CREATE_QP_PD_HANDLE
        Spec { id: 0x3, kind: Kind::Idr, mandatory: false }, // UVERBS_ATTR_CREATE_QP_SRQ_HANDLE
        Spec { id: 0x4, kind: Kind::Idr, mandatory: false }, // UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE
        Spec { id: 0x5, kind: Kind::Idr, mandatory: false }, // UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE
        Spec { id: 0x6, kind: Kind::Idr, mandatory: false }, // UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE
        Spec { id: 0x7, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_QP_USER_HANDLE
        Spec { id: 0x8, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_QP_CAP
        Spec { id: 0x9, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_CREATE_QP_TYPE
        Spec { id: 0xa, kind: Kind::FlagsIn, mandatory: false }, // UVERBS_ATTR_CREATE_QP_FLAGS
        Spec { id: 0xb, kind: Kind::PtrIn, mandatory: false }, // UVERBS_ATTR_CREATE_QP_SOURCE_QPN
        Spec { id: 0xc, kind: Kind::Fd, mandatory: false }, // UVERBS_ATTR_CREATE_QP_EVENT_FD
        Spec { id: 0xd, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_CREATE_QP_RESP_CAP
        Spec { id: 0xe, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_CREATE_QP_RESP_QP_NUM
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: false }, // UVERBS_ATTR_UHW_IN
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_UHW_OUT
    ] },
    // core/uverbs_std_types_qp.c: UVERBS_METHOD_QP_DESTROY
    Method { object: 0x4, method: 0x1, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_QP_HANDLE
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_DESTROY_QP_RESP
    ] },
    // core/uverbs_std_types.c: UVERBS_METHOD_MW_DESTROY
    Method { object: 0x8, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_MW_HANDLE
    ] },
    // core/uverbs_std_types.c: UVERBS_METHOD_AH_DESTROY
    Method { object: 0x6, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_AH_HANDLE
    ] },
    // core/uverbs_std_types.c: UVERBS_METHOD_FLOW_DESTROY
    Method { object: 0x9, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_FLOW_HANDLE
    ] },
    // core/uverbs_std_types.c: UVERBS_METHOD_RWQ_IND_TBL_DESTROY
    Method { object: 0xb, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE
    ] },
    // core/uverbs_std_types.c: UVERBS_METHOD_XRCD_DESTROY
    Method { object: 0xa, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_XRCD_HANDLE
    ] },
    // core/uverbs_std_types.c: UVERBS_METHOD_PD_DESTROY
    Method { object: 0x1, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_PD_HANDLE
    ] },
    // core/uverbs_std_types_mr.c: UVERBS_METHOD_ADVISE_MR
    Method { object: 0x7, method: 0x2, attrs: &[
        Spec { id: 0, kind: Kind::Idr, mandatory: true }, // UVERBS_ATTR_ADVISE_MR_PD_HANDLE
        Spec { id: 0x1, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_ADVISE_MR_ADVICE
        Spec { id: 0x2, kind: Kind::FlagsIn, mandatory: true }, // UVERBS_ATTR_ADVISE_MR_FLAGS
        Spec { id: 0x3, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_ADVISE_MR_SGE_LIST
    ] },
    // core/uverbs_std_types_mr.c: UVERBS_METHOD_QUERY_MR
    Method { object: 0x7, method: 0x3, attrs: &[
        Spec { id: 0, kind: Kind::Idr, mandatory: true }, // UVERBS_ATTR_QUERY_MR_HANDLE
        Spec { id: 0x2, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_QUERY_MR_RESP_RKEY
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_QUERY_MR_RESP_LKEY
        Spec { id: 0x3, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_QUERY_MR_RESP_LENGTH
        Spec { id: 0x4, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_QUERY_MR_RESP_IOVA
    ] },
    // core/uverbs_std_types_mr.c: UVERBS_METHOD_DM_MR_REG
    Method { object: 0x7, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrNew, mandatory: true }, // UVERBS_ATTR_REG_DM_MR_HANDLE
        Spec { id: 0x1, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_REG_DM_MR_OFFSET
        Spec { id: 0x2, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_REG_DM_MR_LENGTH
        Spec { id: 0x3, kind: Kind::Idr, mandatory: true }, // UVERBS_ATTR_REG_DM_MR_PD_HANDLE
        Spec { id: 0x4, kind: Kind::FlagsIn, mandatory: false }, // UVERBS_ATTR_REG_DM_MR_ACCESS_FLAGS
        Spec { id: 0x5, kind: Kind::Idr, mandatory: true }, // UVERBS_ATTR_REG_DM_MR_DM_HANDLE
        Spec { id: 0x6, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_REG_DM_MR_RESP_LKEY
        Spec { id: 0x7, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_REG_DM_MR_RESP_RKEY
    ] },
    // core/uverbs_std_types_mr.c: UVERBS_METHOD_REG_DMABUF_MR
    Method { object: 0x7, method: 0x4, attrs: &[
        Spec { id: 0, kind: Kind::IdrNew, mandatory: true }, // UVERBS_ATTR_REG_DMABUF_MR_HANDLE
        Spec { id: 0x1, kind: Kind::Idr, mandatory: true }, // UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE
        Spec { id: 0x2, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_REG_DMABUF_MR_OFFSET
        Spec { id: 0x3, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_REG_DMABUF_MR_LENGTH
        Spec { id: 0x4, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_REG_DMABUF_MR_IOVA
        Spec { id: 0x5, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_REG_DMABUF_MR_FD
        Spec { id: 0x6, kind: Kind::FlagsIn, mandatory: false }, // UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS
        Spec { id: 0x7, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY
        Spec { id: 0x8, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY
    ] },
    // core/uverbs_std_types_mr.c: UVERBS_METHOD_MR_DESTROY
    Method { object: 0x7, method: 0x1, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_MR_HANDLE
    ] },
    // core/uverbs_std_types_async_fd.c: UVERBS_METHOD_ASYNC_EVENT_ALLOC
    Method { object: 0x10, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::FdNew, mandatory: true }, // UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE
    ] },
    // core/uverbs_std_types_srq.c: UVERBS_METHOD_SRQ_CREATE
    Method { object: 0x5, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrNew, mandatory: true }, // UVERBS_ATTR_CREATE_SRQ_HANDLE
        Spec { id: 0x1, kind: Kind::Idr, mandatory: true }, // UVERBS_ATTR_CREATE_SRQ_PD_HANDLE
        Spec { id: 0x9, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_CREATE_SRQ_TYPE
        Spec { id: 0x4, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_SRQ_USER_HANDLE
        Spec { id: 0x5, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_SRQ_MAX_WR
        Spec { id: 0x6, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_SRQ_MAX_SGE
        Spec { id: 0x7, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_SRQ_LIMIT
        Spec { id: 0x2, kind: Kind::Idr, mandatory: false }, // UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE
        Spec { id: 0x3, kind: Kind::Idr, mandatory: false }, // UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE
        Spec { id: 0x8, kind: Kind::PtrIn, mandatory: false }, // UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS
        Spec { id: 0xa, kind: Kind::Fd, mandatory: false }, // UVERBS_ATTR_CREATE_SRQ_EVENT_FD
        Spec { id: 0xb, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR
        Spec { id: 0xc, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE
        Spec { id: 0xd, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: false }, // UVERBS_ATTR_UHW_IN
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_UHW_OUT
    ] },
    // core/uverbs_std_types_srq.c: UVERBS_METHOD_SRQ_DESTROY
    Method { object: 0x5, method: 0x1, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_SRQ_HANDLE
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_DESTROY_SRQ_RESP
    ] },
    // core/uverbs_std_types_counters.c: UVERBS_METHOD_COUNTERS_CREATE
    Method { object: 0xf, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrNew, mandatory: true }, // UVERBS_ATTR_CREATE_COUNTERS_HANDLE
    ] },
    // core/uverbs_std_types_counters.c: UVERBS_METHOD_COUNTERS_DESTROY
    Method { object: 0xf, method: 0x1, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_COUNTERS_HANDLE
    ] },
    // core/uverbs_std_types_counters.c: UVERBS_METHOD_COUNTERS_READ
    Method { object: 0xf, method: 0x2, attrs: &[
        Spec { id: 0, kind: Kind::Idr, mandatory: true }, // UVERBS_ATTR_READ_COUNTERS_HANDLE
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_READ_COUNTERS_BUFF
        Spec { id: 0x2, kind: Kind::FlagsIn, mandatory: false }, // UVERBS_ATTR_READ_COUNTERS_FLAGS
    ] },
    // core/uverbs_std_types_dm.c: UVERBS_METHOD_DM_ALLOC
    Method { object: 0xe, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrNew, mandatory: true }, // UVERBS_ATTR_ALLOC_DM_HANDLE
        Spec { id: 0x1, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_ALLOC_DM_LENGTH
        Spec { id: 0x2, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_ALLOC_DM_ALIGNMENT
    ] },
    // core/uverbs_std_types_dm.c: UVERBS_METHOD_DM_FREE
    Method { object: 0xe, method: 0x1, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_FREE_DM_HANDLE
    ] },
    // core/uverbs_std_types_wq.c: UVERBS_METHOD_WQ_CREATE
    Method { object: 0xc, method: 0, attrs: &[
        Spec { id: 0, kind: Kind::IdrNew, mandatory: true }, // UVERBS_ATTR_CREATE_WQ_HANDLE
        Spec { id: 0x1, kind: Kind::Idr, mandatory: true }, // UVERBS_ATTR_CREATE_WQ_PD_HANDLE
        Spec { id: 0x4, kind: Kind::ConstIn, mandatory: true }, // UVERBS_ATTR_CREATE_WQ_TYPE
        Spec { id: 0x3, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_WQ_USER_HANDLE
        Spec { id: 0x6, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_WQ_MAX_WR
        Spec { id: 0x7, kind: Kind::PtrIn, mandatory: true }, // UVERBS_ATTR_CREATE_WQ_MAX_SGE
        Spec { id: 0x8, kind: Kind::FlagsIn, mandatory: true }, // UVERBS_ATTR_CREATE_WQ_FLAGS
        Spec { id: 0x2, kind: Kind::Idr, mandatory: false }, // UVERBS_ATTR_CREATE_WQ_CQ_HANDLE
        Spec { id: 0x5, kind: Kind::Fd, mandatory: false }, // UVERBS_ATTR_CREATE_WQ_EVENT_FD
        Spec { id: 0x9, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_CREATE_WQ_RESP_MAX_WR
        Spec { id: 0xa, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_CREATE_WQ_RESP_MAX_SGE
        Spec { id: 0xb, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_CREATE_WQ_RESP_WQ_NUM
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: false }, // UVERBS_ATTR_UHW_IN
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: false }, // UVERBS_ATTR_UHW_OUT
    ] },
    // core/uverbs_std_types_wq.c: UVERBS_METHOD_WQ_DESTROY
    Method { object: 0xc, method: 0x1, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_WQ_HANDLE
        Spec { id: 0x1, kind: Kind::PtrOut, mandatory: true }, // UVERBS_ATTR_DESTROY_WQ_RESP
    ] },
    // core/uverbs_std_types_flow_action.c: UVERBS_METHOD_FLOW_ACTION_DESTROY
    Method { object: 0xd, method: 0x1, attrs: &[
        Spec { id: 0, kind: Kind::IdrDestroy, mandatory: true }, // UVERBS_ATTR_DESTROY_FLOW_ACTION_HANDLE
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_UMEM_REG
    Method { object: 0x1002, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR
        Spec { id: 0x1002, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_UMEM_REG_LEN
        Spec { id: 0x1006, kind: Kind::RawFd, mandatory: false }, // MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD
        Spec { id: 0x1003, kind: Kind::FlagsIn, mandatory: false }, // MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS
        Spec { id: 0x1005, kind: Kind::ConstIn, mandatory: false }, // MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP
        Spec { id: 0x1004, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_UMEM_DEREG
    Method { object: 0x1002, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrDestroy, mandatory: true }, // MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_QUERY_EQN
    Method { object: 0x1000, method: 0x1002, attrs: &[
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_QUERY_UAR
    Method { object: 0x1000, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_OTHER
    Method { object: 0x1000, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_OTHER_CMD_IN
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_OBJ_CREATE
    Method { object: 0x1001, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN
        Spec { id: 0x1002, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_OBJ_DESTROY
    Method { object: 0x1001, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrDestroy, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_OBJ_MODIFY
    Method { object: 0x1001, method: 0x1002, attrs: &[
        Spec { id: 0x1000, kind: Kind::Idr, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN
        Spec { id: 0x1002, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_OBJ_QUERY
    Method { object: 0x1001, method: 0x1003, attrs: &[
        Spec { id: 0x1000, kind: Kind::Idr, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN
        Spec { id: 0x1002, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY
    Method { object: 0x1001, method: 0x1004, attrs: &[
        Spec { id: 0x1000, kind: Kind::Idr, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN
        Spec { id: 0x1004, kind: Kind::ConstIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN
        Spec { id: 0x1002, kind: Kind::Fd, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD
        Spec { id: 0x1003, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT
    Method { object: 0x1000, method: 0x1003, attrs: &[
        Spec { id: 0x1000, kind: Kind::Fd, mandatory: true }, // MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE
        Spec { id: 0x1001, kind: Kind::Idr, mandatory: false }, // MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE
        Spec { id: 0x1002, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST
        Spec { id: 0x1004, kind: Kind::PtrIn, mandatory: false }, // MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE
        Spec { id: 0x1003, kind: Kind::PtrIn, mandatory: false }, // MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC
    Method { object: 0x1004, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::FdNew, mandatory: true }, // MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE
    ] },
    // hw/mlx5/devx.c: MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC
    Method { object: 0x1005, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::FdNew, mandatory: true }, // MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE
        Spec { id: 0x1001, kind: Kind::FlagsIn, mandatory: true }, // MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS
    ] },
    // hw/mlx5/main.c: MLX5_IB_METHOD_VAR_OBJ_ALLOC
    Method { object: 0x1006, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_VAR_OBJ_ALLOC_HANDLE
        Spec { id: 0x1003, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_VAR_OBJ_ALLOC_PAGE_ID
        Spec { id: 0x1002, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_VAR_OBJ_ALLOC_MMAP_LENGTH
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_VAR_OBJ_ALLOC_MMAP_OFFSET
    ] },
    // hw/mlx5/main.c: MLX5_IB_METHOD_VAR_OBJ_DESTROY
    Method { object: 0x1006, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrDestroy, mandatory: true }, // MLX5_IB_ATTR_VAR_OBJ_DESTROY_HANDLE
    ] },
    // hw/mlx5/main.c: MLX5_IB_METHOD_UAR_OBJ_ALLOC
    Method { object: 0x1008, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE
        Spec { id: 0x1001, kind: Kind::ConstIn, mandatory: true }, // MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE
        Spec { id: 0x1004, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID
        Spec { id: 0x1003, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH
        Spec { id: 0x1002, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET
    ] },
    // hw/mlx5/main.c: MLX5_IB_METHOD_UAR_OBJ_DESTROY
    Method { object: 0x1008, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrDestroy, mandatory: true }, // MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE
    ] },
    // hw/mlx5/main.c: UVERBS_METHOD_QUERY_CONTEXT (added attributes)
    Method { object: 0, method: 0x4, attrs: &[
        Spec { id: 0x1000, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX
    ] },
    // hw/mlx5/std_types.c: MLX5_IB_METHOD_QUERY_PORT
    Method { object: 0, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_QUERY_PORT_PORT_NUM
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_QUERY_PORT
    ] },
    // hw/mlx5/std_types.c: MLX5_IB_METHOD_PD_QUERY
    Method { object: 0x1, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::Idr, mandatory: true }, // MLX5_IB_ATTR_QUERY_PD_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_QUERY_PD_RESP_PDN
    ] },
    // hw/mlx5/dm.c: MLX5_IB_METHOD_DM_QUERY
    Method { object: 0xe, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::Idr, mandatory: true }, // MLX5_IB_ATTR_QUERY_DM_REQ_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_QUERY_DM_RESP_START_OFFSET
        Spec { id: 0x1002, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_QUERY_DM_RESP_PAGE_INDEX
        Spec { id: 0x1003, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_QUERY_DM_RESP_LENGTH
    ] },
    // hw/mlx5/dm.c: UVERBS_METHOD_DM_ALLOC (added attributes)
    Method { object: 0xe, method: 0, attrs: &[
        Spec { id: 0x1000, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_ALLOC_DM_RESP_START_OFFSET
        Spec { id: 0x1001, kind: Kind::PtrOut, mandatory: false }, // MLX5_IB_ATTR_ALLOC_DM_RESP_PAGE_INDEX
        Spec { id: 0x1002, kind: Kind::ConstIn, mandatory: false }, // MLX5_IB_ATTR_ALLOC_DM_REQ_TYPE
    ] },
    // hw/mlx5/dm.c: MLX5_IB_METHOD_DM_MAP_OP_ADDR
    Method { object: 0xe, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::Idr, mandatory: true }, // MLX5_IB_ATTR_DM_MAP_OP_ADDR_REQ_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_DM_MAP_OP_ADDR_REQ_OP
        Spec { id: 0x1002, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_DM_MAP_OP_ADDR_RESP_START_OFFSET
        Spec { id: 0x1003, kind: Kind::PtrOut, mandatory: false }, // MLX5_IB_ATTR_DM_MAP_OP_ADDR_RESP_PAGE_INDEX
    ] },
    // hw/mlx5/qos.c: MLX5_IB_METHOD_PP_OBJ_ALLOC
    Method { object: 0x1007, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_PP_OBJ_ALLOC_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_PP_OBJ_ALLOC_CTX
        Spec { id: 0x1002, kind: Kind::FlagsIn, mandatory: true }, // MLX5_IB_ATTR_PP_OBJ_ALLOC_FLAGS
        Spec { id: 0x1003, kind: Kind::PtrOut, mandatory: true }, // MLX5_IB_ATTR_PP_OBJ_ALLOC_INDEX
    ] },
    // hw/mlx5/qos.c: MLX5_IB_METHOD_PP_OBJ_DESTROY
    Method { object: 0x1007, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrDestroy, mandatory: true }, // MLX5_IB_ATTR_PP_OBJ_DESTROY_HANDLE
    ] },
    // hw/mlx5/fs.c: MLX5_IB_METHOD_CREATE_FLOW
    Method { object: 0x9, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_CREATE_FLOW_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_CREATE_FLOW_MATCH_VALUE
        Spec { id: 0x1004, kind: Kind::Idr, mandatory: true }, // MLX5_IB_ATTR_CREATE_FLOW_MATCHER
        Spec { id: 0x1002, kind: Kind::Idr, mandatory: false }, // MLX5_IB_ATTR_CREATE_FLOW_DEST_QP
        Spec { id: 0x1003, kind: Kind::Idr, mandatory: false }, // MLX5_IB_ATTR_CREATE_FLOW_DEST_DEVX
        Spec { id: 0x1006, kind: Kind::PtrIn, mandatory: false }, // MLX5_IB_ATTR_CREATE_FLOW_TAG
        Spec { id: 0x1008, kind: Kind::PtrIn, mandatory: false }, // MLX5_IB_ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX_OFFSET
        Spec { id: 0x1009, kind: Kind::FlagsIn, mandatory: false }, // MLX5_IB_ATTR_CREATE_FLOW_FLAGS
    ] },
    // hw/mlx5/fs.c: MLX5_IB_METHOD_DESTROY_FLOW
    Method { object: 0x9, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrDestroy, mandatory: true }, // MLX5_IB_ATTR_CREATE_FLOW_HANDLE
    ] },
    // hw/mlx5/fs.c: MLX5_IB_METHOD_FLOW_ACTION_CREATE_MODIFY_HEADER
    Method { object: 0xd, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_CREATE_MODIFY_HEADER_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_CREATE_MODIFY_HEADER_ACTIONS_PRM
        Spec { id: 0x1002, kind: Kind::ConstIn, mandatory: true }, // MLX5_IB_ATTR_CREATE_MODIFY_HEADER_FT_TYPE
    ] },
    // hw/mlx5/fs.c: MLX5_IB_METHOD_FLOW_ACTION_CREATE_PACKET_REFORMAT
    Method { object: 0xd, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_HANDLE
        Spec { id: 0x1003, kind: Kind::PtrIn, mandatory: false }, // MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_DATA_BUF
        Spec { id: 0x1001, kind: Kind::ConstIn, mandatory: true }, // MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_TYPE
        Spec { id: 0x1002, kind: Kind::ConstIn, mandatory: true }, // MLX5_IB_ATTR_CREATE_PACKET_REFORMAT_FT_TYPE
    ] },
    // hw/mlx5/fs.c: MLX5_IB_METHOD_FLOW_MATCHER_CREATE
    Method { object: 0x1003, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_FLOW_MATCHER_CREATE_HANDLE
        Spec { id: 0x1001, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_FLOW_MATCHER_MATCH_MASK
        Spec { id: 0x1002, kind: Kind::EnumIn, mandatory: true }, // MLX5_IB_ATTR_FLOW_MATCHER_FLOW_TYPE
        Spec { id: 0x1003, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_FLOW_MATCHER_MATCH_CRITERIA
        Spec { id: 0x1004, kind: Kind::FlagsIn, mandatory: false }, // MLX5_IB_ATTR_FLOW_MATCHER_FLOW_FLAGS
        Spec { id: 0x1005, kind: Kind::ConstIn, mandatory: false }, // MLX5_IB_ATTR_FLOW_MATCHER_FT_TYPE
    ] },
    // hw/mlx5/fs.c: MLX5_IB_METHOD_FLOW_MATCHER_DESTROY
    Method { object: 0x1003, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrDestroy, mandatory: true }, // MLX5_IB_ATTR_FLOW_MATCHER_DESTROY_HANDLE
    ] },
    // hw/mlx5/fs.c: MLX5_IB_METHOD_STEERING_ANCHOR_CREATE
    Method { object: 0x1009, method: 0x1000, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrNew, mandatory: true }, // MLX5_IB_ATTR_STEERING_ANCHOR_CREATE_HANDLE
        Spec { id: 0x1001, kind: Kind::ConstIn, mandatory: true }, // MLX5_IB_ATTR_STEERING_ANCHOR_FT_TYPE
        Spec { id: 0x1002, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_STEERING_ANCHOR_PRIORITY
        Spec { id: 0x1003, kind: Kind::PtrIn, mandatory: true }, // MLX5_IB_ATTR_STEERING_ANCHOR_FT_ID
    ] },
    // hw/mlx5/fs.c: MLX5_IB_METHOD_STEERING_ANCHOR_DESTROY
    Method { object: 0x1009, method: 0x1001, attrs: &[
        Spec { id: 0x1000, kind: Kind::IdrDestroy, mandatory: true }, // MLX5_IB_ATTR_STEERING_ANCHOR_DESTROY_HANDLE
    ] },
];

/// How a write command's method is defined in Linux 6.1
/// (`drivers/infiniband/core/uverbs_cmd.c:3708-3742`): which of the
/// `uverbs_api_write_method` flags `has_resp` and `has_udata` it sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Def {
    /// `UAPI_DEF_WRITE_IO`: `has_resp` (the request starts with
    /// `__aligned_u64 response`), no driver data.
    Io,
    /// `UAPI_DEF_WRITE_I`: no response, no driver data.
    I,
    /// `UAPI_DEF_WRITE_UDATA_IO`: `has_resp` and `has_udata` (driver data
    /// follows the core request and the core response).
    UdataIo,
    /// `UAPI_DEF_WRITE_UDATA_I`: `has_udata`, no response.
    UdataI,
    /// `UAPI_DEF_WRITE_IO_EX`: `has_resp`, sizes up to a named member.
    IoEx,
    /// `UAPI_DEF_WRITE_I_EX`: no response, size up to a named member.
    IEx,
}

impl Def {
    /// `uverbs_api_write_method.has_resp`.
    pub(crate) fn has_resp(self) -> bool {
        matches!(self, Def::Io | Def::UdataIo | Def::IoEx)
    }

    /// `uverbs_api_write_method.has_udata`.
    pub(crate) fn has_udata(self) -> bool {
        matches!(self, Def::UdataIo | Def::UdataI)
    }
}

/// The write commands of Linux 6.1 (`drivers/infiniband/core/uverbs_cmd.c`,
/// `uverbs_def_write_intf`): `(command, def, req_size, resp_size)`. The
/// sizes are what `UVERBS_METHOD_INVOKE_WRITE` requires of `CORE_IN` and
/// `CORE_OUT` (`uverbs_std_types_device.c`: shorter is `ENOSPC`) and what
/// a plain `write()` is checked against (`uverbs_main.c:500-557`,
/// `verify_hdr`). `UAPI_DEF_WRITE_IO` and `_I` take `sizeof` the structs,
/// the `_EX` forms `offsetofend` of the named member; resolved by compiling
/// against the 6.1 uapi headers. A command with `EXTENDED` is declared with
/// `DECLARE_UVERBS_WRITE_EX` (`is_ex`), the others with `DECLARE_UVERBS_WRITE`.
#[rustfmt::skip]
pub(crate) static WRITE_SIZES: &[(u32, Def, usize, usize)] = &[
    (5, Def::UdataIo, 56, 4), // IB_USER_VERBS_CMD_CREATE_AH: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_create_ah, struct ib_uverbs_create_ah_resp)
    (8, Def::I, 4, 0), // IB_USER_VERBS_CMD_DESTROY_AH: UAPI_DEF_WRITE_I(struct ib_uverbs_destroy_ah)
    (17, Def::Io, 8, 4), // IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: UAPI_DEF_WRITE_IO(struct ib_uverbs_create_comp_channel, struct ib_uverbs_create_comp_channel_resp)
    (18, Def::UdataIo, 32, 8), // IB_USER_VERBS_CMD_CREATE_CQ: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_create_cq, struct ib_uverbs_create_cq_resp)
    (20, Def::Io, 16, 8), // IB_USER_VERBS_CMD_DESTROY_CQ: UAPI_DEF_WRITE_IO(struct ib_uverbs_destroy_cq, struct ib_uverbs_destroy_cq_resp)
    (21, Def::Io, 16, 8), // IB_USER_VERBS_CMD_POLL_CQ: UAPI_DEF_WRITE_IO(struct ib_uverbs_poll_cq, struct ib_uverbs_poll_cq_resp)
    (23, Def::I, 8, 0), // IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: UAPI_DEF_WRITE_I(struct ib_uverbs_req_notify_cq)
    (19, Def::UdataIo, 16, 8), // IB_USER_VERBS_CMD_RESIZE_CQ: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_resize_cq, struct ib_uverbs_resize_cq_resp)
    (EXTENDED | 18, Def::IoEx, 32, 16), // IB_USER_VERBS_EX_CMD_CREATE_CQ: UAPI_DEF_WRITE_IO_EX(struct ib_uverbs_ex_create_cq, reserved, struct ib_uverbs_ex_create_cq_resp, response_length)
    (EXTENDED | 57, Def::I, 16, 0), // IB_USER_VERBS_EX_CMD_MODIFY_CQ: UAPI_DEF_WRITE_I(struct ib_uverbs_ex_modify_cq)
    (0, Def::UdataIo, 8, 8), // IB_USER_VERBS_CMD_GET_CONTEXT: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_get_context, struct ib_uverbs_get_context_resp)
    (1, Def::Io, 8, 176), // IB_USER_VERBS_CMD_QUERY_DEVICE: UAPI_DEF_WRITE_IO(struct ib_uverbs_query_device, struct ib_uverbs_query_device_resp)
    (2, Def::Io, 16, 40), // IB_USER_VERBS_CMD_QUERY_PORT: UAPI_DEF_WRITE_IO(struct ib_uverbs_query_port, struct ib_uverbs_query_port_resp)
    (EXTENDED | 1, Def::IoEx, 8, 184), // IB_USER_VERBS_EX_CMD_QUERY_DEVICE: UAPI_DEF_WRITE_IO_EX(struct ib_uverbs_ex_query_device, reserved, struct ib_uverbs_ex_query_device_resp, response_length)
    (EXTENDED | 50, Def::IoEx, 24, 8), // IB_USER_VERBS_EX_CMD_CREATE_FLOW: UAPI_DEF_WRITE_IO_EX(struct ib_uverbs_create_flow, flow_attr, struct ib_uverbs_create_flow_resp, flow_handle)
    (EXTENDED | 51, Def::I, 8, 0), // IB_USER_VERBS_EX_CMD_DESTROY_FLOW: UAPI_DEF_WRITE_I(struct ib_uverbs_destroy_flow)
    (13, Def::I, 4, 0), // IB_USER_VERBS_CMD_DEREG_MR: UAPI_DEF_WRITE_I(struct ib_uverbs_dereg_mr)
    (9, Def::UdataIo, 40, 12), // IB_USER_VERBS_CMD_REG_MR: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_reg_mr, struct ib_uverbs_reg_mr_resp)
    (11, Def::UdataIo, 48, 8), // IB_USER_VERBS_CMD_REREG_MR: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_rereg_mr, struct ib_uverbs_rereg_mr_resp)
    (14, Def::UdataIo, 16, 8), // IB_USER_VERBS_CMD_ALLOC_MW: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_alloc_mw, struct ib_uverbs_alloc_mw_resp)
    (16, Def::I, 4, 0), // IB_USER_VERBS_CMD_DEALLOC_MW: UAPI_DEF_WRITE_I(struct ib_uverbs_dealloc_mw)
    (3, Def::UdataIo, 8, 4), // IB_USER_VERBS_CMD_ALLOC_PD: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_alloc_pd, struct ib_uverbs_alloc_pd_resp)
    (4, Def::I, 4, 0), // IB_USER_VERBS_CMD_DEALLOC_PD: UAPI_DEF_WRITE_I(struct ib_uverbs_dealloc_pd)
    (30, Def::I, 24, 0), // IB_USER_VERBS_CMD_ATTACH_MCAST: UAPI_DEF_WRITE_I(struct ib_uverbs_attach_mcast)
    (24, Def::UdataIo, 56, 32), // IB_USER_VERBS_CMD_CREATE_QP: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_create_qp, struct ib_uverbs_create_qp_resp)
    (27, Def::Io, 16, 4), // IB_USER_VERBS_CMD_DESTROY_QP: UAPI_DEF_WRITE_IO(struct ib_uverbs_destroy_qp, struct ib_uverbs_destroy_qp_resp)
    (31, Def::I, 24, 0), // IB_USER_VERBS_CMD_DETACH_MCAST: UAPI_DEF_WRITE_I(struct ib_uverbs_detach_mcast)
    (26, Def::I, 112, 0), // IB_USER_VERBS_CMD_MODIFY_QP: UAPI_DEF_WRITE_I(struct ib_uverbs_modify_qp)
    (29, Def::Io, 24, 4), // IB_USER_VERBS_CMD_POST_RECV: UAPI_DEF_WRITE_IO(struct ib_uverbs_post_recv, struct ib_uverbs_post_recv_resp)
    (28, Def::Io, 24, 4), // IB_USER_VERBS_CMD_POST_SEND: UAPI_DEF_WRITE_IO(struct ib_uverbs_post_send, struct ib_uverbs_post_send_resp)
    (25, Def::Io, 16, 128), // IB_USER_VERBS_CMD_QUERY_QP: UAPI_DEF_WRITE_IO(struct ib_uverbs_query_qp, struct ib_uverbs_query_qp_resp)
    (EXTENDED | 24, Def::IoEx, 52, 40), // IB_USER_VERBS_EX_CMD_CREATE_QP: UAPI_DEF_WRITE_IO_EX(struct ib_uverbs_ex_create_qp, comp_mask, struct ib_uverbs_ex_create_qp_resp, response_length)
    (EXTENDED | 26, Def::IoEx, 112, 8), // IB_USER_VERBS_EX_CMD_MODIFY_QP: UAPI_DEF_WRITE_IO_EX(struct ib_uverbs_ex_modify_qp, base, struct ib_uverbs_ex_modify_qp_resp, response_length)
    (EXTENDED | 55, Def::IoEx, 8, 16), // IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL: UAPI_DEF_WRITE_IO_EX(struct ib_uverbs_ex_create_rwq_ind_table, log_ind_tbl_size, struct ib_uverbs_ex_create_rwq_ind_table_resp, ind_tbl_num)
    (EXTENDED | 56, Def::I, 8, 0), // IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL: UAPI_DEF_WRITE_I(struct ib_uverbs_ex_destroy_rwq_ind_table)
    (EXTENDED | 52, Def::IoEx, 32, 24), // IB_USER_VERBS_EX_CMD_CREATE_WQ: UAPI_DEF_WRITE_IO_EX(struct ib_uverbs_ex_create_wq, max_sge, struct ib_uverbs_ex_create_wq_resp, wqn)
    (EXTENDED | 54, Def::IoEx, 8, 16), // IB_USER_VERBS_EX_CMD_DESTROY_WQ: UAPI_DEF_WRITE_IO_EX(struct ib_uverbs_ex_destroy_wq, wq_handle, struct ib_uverbs_ex_destroy_wq_resp, reserved)
    (EXTENDED | 53, Def::IEx, 16, 0), // IB_USER_VERBS_EX_CMD_MODIFY_WQ: UAPI_DEF_WRITE_I_EX(struct ib_uverbs_ex_modify_wq, curr_wq_state)
    (32, Def::UdataIo, 32, 16), // IB_USER_VERBS_CMD_CREATE_SRQ: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_create_srq, struct ib_uverbs_create_srq_resp)
    (39, Def::UdataIo, 48, 16), // IB_USER_VERBS_CMD_CREATE_XSRQ: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_create_xsrq, struct ib_uverbs_create_srq_resp)
    (35, Def::Io, 16, 4), // IB_USER_VERBS_CMD_DESTROY_SRQ: UAPI_DEF_WRITE_IO(struct ib_uverbs_destroy_srq, struct ib_uverbs_destroy_srq_resp)
    (33, Def::UdataI, 16, 0), // IB_USER_VERBS_CMD_MODIFY_SRQ: UAPI_DEF_WRITE_UDATA_I(struct ib_uverbs_modify_srq)
    (36, Def::Io, 24, 4), // IB_USER_VERBS_CMD_POST_SRQ_RECV: UAPI_DEF_WRITE_IO(struct ib_uverbs_post_srq_recv, struct ib_uverbs_post_srq_recv_resp)
    (34, Def::Io, 16, 16), // IB_USER_VERBS_CMD_QUERY_SRQ: UAPI_DEF_WRITE_IO(struct ib_uverbs_query_srq, struct ib_uverbs_query_srq_resp)
    (38, Def::I, 4, 0), // IB_USER_VERBS_CMD_CLOSE_XRCD: UAPI_DEF_WRITE_I(struct ib_uverbs_close_xrcd)
    (40, Def::UdataIo, 32, 32), // IB_USER_VERBS_CMD_OPEN_QP: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_open_qp, struct ib_uverbs_create_qp_resp)
    (37, Def::UdataIo, 16, 4), // IB_USER_VERBS_CMD_OPEN_XRCD: UAPI_DEF_WRITE_UDATA_IO(struct ib_uverbs_open_xrcd, struct ib_uverbs_open_xrcd_resp)
];
