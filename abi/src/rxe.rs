//! The soft-RoCE (rxe) user ABI, `<rdma/rdma_user_rxe.h>`: driver data of the create/modify
//! commands (`mminfo` for mmapping queues), the shared queue header `rxe_queue_buf`, and the
//! send/recv WQE formats written by userspace into the mmapped rings.

use crate::layout::{abi_consts, abi_structs};

abi_consts! {
    // anonymous enum
    pub const RXE_NETWORK_TYPE_IPV4: u32 = 1;
    pub const RXE_NETWORK_TYPE_IPV6: u32 = 2;
}

abi_structs! {
    /// `union rxe_gid` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    ///
    /// C union of `raw`, `global`; represented as its first member `raw`, the other members are views of the same bytes.
    #[repr(align(8))]
    pub struct RxeGid: "union rxe_gid" {
        pub raw: [u8; 16],
    }

    /// Member `global` of `union rxe_gid` (anonymous in C; checked through `__typeof__`).
    pub struct RxeGidGlobal: "__typeof__(((union rxe_gid *)0)->global)" {
        /// Big-endian (`__be64`).
        pub subnet_prefix: u64,
        /// Big-endian (`__be64`).
        pub interface_id: u64,
    }

    /// `struct rxe_global_route` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeGlobalRoute: "struct rxe_global_route" {
        pub dgid: RxeGid,
        pub flow_label: u32,
        pub sgid_index: u8,
        pub hop_limit: u8,
        pub traffic_class: u8,
        /// Implicit C tail padding, made explicit.
        pub _pad23: [u8; 1] = "",
    }

    /// `struct rxe_av` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeAv: "struct rxe_av" {
        pub port_num: u8,
        pub network_type: u8,
        pub dmac: [u8; 6],
        pub grh: RxeGlobalRoute,
        /// C union of `_sockaddr_in`, `_sockaddr_in6`.
        /// Represented as its largest member `_sockaddr_in6`; the other members are prefixes of the same bytes.
        pub sgid_addr: [u8; 28],
        /// C union of `_sockaddr_in`, `_sockaddr_in6`.
        /// Represented as its largest member `_sockaddr_in6`; the other members are prefixes of the same bytes.
        pub dgid_addr: [u8; 28],
    }

    /// `struct rxe_send_wr` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeSendWr: "struct rxe_send_wr" {
        pub wr_id: u64,
        pub reserved: u32,
        pub opcode: u32,
        pub send_flags: u32,
        /// C union of `imm_data`, `invalidate_rkey`.
        /// Represented as its member `imm_data` (`__be32`).
        pub ex: u32,
        /// C union of `rdma`, `atomic`, `ud`, `mw`.
        /// Kept as raw storage of the union size; reinterpret with zerocopy as the member selected by the opcode/type.
        pub wr: [u8; 120],
    }

    /// Member `wr.rdma` of `struct rxe_send_wr` (anonymous in C; checked through `__typeof__`).
    pub struct RxeSendWrRdma: "__typeof__(((struct rxe_send_wr *)0)->wr.rdma)" {
        pub remote_addr: u64,
        pub rkey: u32,
        pub reserved: u32,
    }

    /// Member `wr.atomic` of `struct rxe_send_wr` (anonymous in C; checked through `__typeof__`).
    pub struct RxeSendWrAtomic: "__typeof__(((struct rxe_send_wr *)0)->wr.atomic)" {
        pub remote_addr: u64,
        pub compare_add: u64,
        pub swap: u64,
        pub rkey: u32,
        pub reserved: u32,
    }

    /// Member `wr.ud` of `struct rxe_send_wr` (anonymous in C; checked through `__typeof__`).
    pub struct RxeSendWrUd: "__typeof__(((struct rxe_send_wr *)0)->wr.ud)" {
        pub remote_qpn: u32,
        pub remote_qkey: u32,
        pub pkey_index: u16,
        pub reserved: u16,
        pub ah_num: u32,
        pub pad: [u32; 4],
        pub av: RxeAv,
    }

    /// Member `wr.mw` of `struct rxe_send_wr` (anonymous in C; checked through `__typeof__`).
    pub struct RxeSendWrMw: "__typeof__(((struct rxe_send_wr *)0)->wr.mw)" {
        pub addr: u64,
        pub length: u64,
        pub mr_lkey: u32,
        pub mw_rkey: u32,
        pub rkey: u32,
        pub access: u32,
    }

    /// `struct rxe_sge` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeSge: "struct rxe_sge" {
        pub addr: u64,
        pub length: u32,
        pub lkey: u32,
    }

    /// `struct mminfo` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    ///
    /// mmap offset and size of an rxe queue, returned in the driver data of CQ/QP/SRQ
    /// creation and resize; map it with `mmap(fd, offset, size)` on the uverbs fd.
    pub struct Mminfo: "struct mminfo" {
        pub offset: u64,
        pub size: u32,
        pub pad: u32,
    }

    /// `struct rxe_dma_info` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    ///
    /// Followed in the same buffer by the flexible array `inline_data[]` (`__u8`), not part of this struct.
    ///
    /// Followed in the same buffer by the flexible array `sge[]` (`struct rxe_sge`), not part of this struct.
    /// The trailing `sge[]` (8-byte aligned `rxe_sge`) makes the struct 8-byte aligned.
    #[repr(align(8))]
    pub struct RxeDmaInfo: "struct rxe_dma_info" {
        pub length: u32,
        pub resid: u32,
        pub cur_sge: u32,
        pub num_sge: u32,
        pub sge_offset: u32,
        pub reserved: u32,
    }

    /// `struct rxe_send_wqe` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeSendWqe: "struct rxe_send_wqe" {
        pub wr: RxeSendWr,
        pub status: u32,
        pub state: u32,
        pub iova: u64,
        pub mask: u32,
        pub first_psn: u32,
        pub last_psn: u32,
        pub ack_length: u32,
        pub ssn: u32,
        pub has_rd_atomic: u32,
        pub dma: RxeDmaInfo,
    }

    /// `struct rxe_recv_wqe` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeRecvWqe: "struct rxe_recv_wqe" {
        pub wr_id: u64,
        pub reserved: u32,
        pub padding: u32,
        pub dma: RxeDmaInfo,
    }

    /// `struct rxe_create_ah_resp` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeCreateAhResp: "struct rxe_create_ah_resp" {
        pub ah_num: u32,
        pub reserved: u32,
    }

    /// `struct rxe_create_cq_resp` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeCreateCqResp: "struct rxe_create_cq_resp" {
        pub mi: Mminfo,
    }

    /// `struct rxe_resize_cq_resp` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeResizeCqResp: "struct rxe_resize_cq_resp" {
        pub mi: Mminfo,
    }

    /// `struct rxe_create_qp_resp` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeCreateQpResp: "struct rxe_create_qp_resp" {
        pub rq_mi: Mminfo,
        pub sq_mi: Mminfo,
    }

    /// `struct rxe_create_srq_resp` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeCreateSrqResp: "struct rxe_create_srq_resp" {
        pub mi: Mminfo,
        pub srq_num: u32,
        pub reserved: u32,
    }

    /// `struct rxe_modify_srq_cmd` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    pub struct RxeModifySrqCmd: "struct rxe_modify_srq_cmd" {
        pub mmap_info_addr: u64,
    }

    /// `struct rxe_queue_buf` (`<rdma/rdma_user_rxe.h>`).
    ///
    /// rxe (soft-RoCE) user ABI.
    ///
    /// Followed in the same buffer by the flexible array `data[]` (`__u8`), not part of this struct.
    ///
    /// Header of every mmapped rxe queue; the elements follow it (`data[]`).
    pub struct RxeQueueBuf: "struct rxe_queue_buf" {
        pub log2_elem_size: u32,
        pub index_mask: u32,
        pub pad_1: [u32; 30],
        pub producer_index: u32,
        pub pad_2: [u32; 31],
        pub consumer_index: u32,
        pub pad_3: [u32; 31],
    }
}
