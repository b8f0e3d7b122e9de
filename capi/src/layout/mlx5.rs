//! The structs of rdma-core 44's `<infiniband/mlx5dv.h>` (and the kernel's
//! `<rdma/mlx5_user_ioctl_verbs.h>` it includes) that `libmlx5.so.1`'s
//! functions read or fill: the direct-verbs views of the verbs objects
//! (`mlx5dv_init_obj`), the device attributes, the creation attributes of
//! mlx5 CQs and QPs, the `mlx5dv_qp_ex` operations, and the DevX structs.
//! Checked by the layout probe against Debian's header like the verbs.h
//! ones.

use core::ffi::{c_int, c_void};

use crate::c_layout;
use crate::layout::{
    cq::ibv_cq,
    pd::ibv_pd,
    qp::{ibv_ah, ibv_qp, ibv_srq},
    AnyFn, Layout,
};

// ------------------------------------------------------------ the context

/// `struct mlx5dv_cqe_comp_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_cqe_comp_caps {
    pub max_num: u32,
    pub supported_format: u32,
}
c_layout!(MLX5DV_CQE_COMP_CAPS: "struct mlx5dv_cqe_comp_caps" = mlx5dv_cqe_comp_caps, 8,
    [max_num, supported_format]);

/// `struct mlx5dv_sw_parsing_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_sw_parsing_caps {
    pub sw_parsing_offloads: u32,
    pub supported_qpts: u32,
}
c_layout!(MLX5DV_SW_PARSING_CAPS: "struct mlx5dv_sw_parsing_caps" = mlx5dv_sw_parsing_caps, 8,
    [sw_parsing_offloads, supported_qpts]);

/// `struct mlx5dv_striding_rq_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_striding_rq_caps {
    pub min_single_stride_log_num_of_bytes: u32,
    pub max_single_stride_log_num_of_bytes: u32,
    pub min_single_wqe_log_num_of_strides: u32,
    pub max_single_wqe_log_num_of_strides: u32,
    pub supported_qpts: u32,
}
c_layout!(MLX5DV_STRIDING_RQ_CAPS: "struct mlx5dv_striding_rq_caps" = mlx5dv_striding_rq_caps, 20,
    [min_single_stride_log_num_of_bytes, max_single_stride_log_num_of_bytes,
     min_single_wqe_log_num_of_strides, max_single_wqe_log_num_of_strides, supported_qpts]);

/// `struct mlx5dv_sig_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_sig_caps {
    pub block_size: u64,
    pub block_prot: u32,
    pub t10dif_bg: u16,
    pub crc_type: u16,
}
c_layout!(MLX5DV_SIG_CAPS: "struct mlx5dv_sig_caps" = mlx5dv_sig_caps, 16,
    [block_size, block_prot, t10dif_bg, crc_type]);

/// `struct mlx5dv_dci_streams_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_dci_streams_caps {
    pub max_log_num_concurent: u8,
    pub max_log_num_errored: u8,
}
c_layout!(MLX5DV_DCI_STREAMS_CAPS: "struct mlx5dv_dci_streams_caps" = mlx5dv_dci_streams_caps, 2,
    [max_log_num_concurent, max_log_num_errored]);

/// `struct mlx5dv_crypto_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_crypto_caps {
    pub failed_selftests: u16,
    pub crypto_engines: u8,
    pub wrapped_import_method: u8,
    pub log_max_num_deks: u8,
    pub flags: u32,
}
c_layout!(MLX5DV_CRYPTO_CAPS: "struct mlx5dv_crypto_caps" = mlx5dv_crypto_caps, 12,
    [failed_selftests, crypto_engines, wrapped_import_method, log_max_num_deks, flags]);

/// `struct mlx5dv_context`: what `mlx5dv_query_device` fills (the fields
/// `comp_mask` asks for; the program sets `comp_mask` to what it wants
/// and reads back what it got).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_context {
    pub version: u8,
    pub flags: u64,
    pub comp_mask: u64,
    pub cqe_comp_caps: mlx5dv_cqe_comp_caps,
    pub sw_parsing_caps: mlx5dv_sw_parsing_caps,
    pub striding_rq_caps: mlx5dv_striding_rq_caps,
    pub tunnel_offloads_caps: u32,
    pub max_dynamic_bfregs: u32,
    pub max_clock_info_update_nsec: u64,
    pub flow_action_flags: u32,
    pub dc_odp_caps: u32,
    pub hca_core_clock: *mut c_void,
    pub num_lag_ports: u8,
    pub sig_caps: mlx5dv_sig_caps,
    pub dci_streams_caps: mlx5dv_dci_streams_caps,
    pub max_wr_memcpy_length: usize,
    pub crypto_caps: mlx5dv_crypto_caps,
}
c_layout!(MLX5DV_CONTEXT: "struct mlx5dv_context" = mlx5dv_context, 152,
    [version, flags, comp_mask, cqe_comp_caps, sw_parsing_caps, striding_rq_caps,
     tunnel_offloads_caps, max_dynamic_bfregs, max_clock_info_update_nsec, flow_action_flags,
     dc_odp_caps, hca_core_clock, num_lag_ports, sig_caps, dci_streams_caps,
     max_wr_memcpy_length, crypto_caps]);

/// `struct mlx5dv_context_attr` (`mlx5dv_open_device`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_context_attr {
    pub flags: u32,
    pub comp_mask: u64,
}
c_layout!(MLX5DV_CONTEXT_ATTR: "struct mlx5dv_context_attr" = mlx5dv_context_attr, 16,
    [flags, comp_mask]);

/// `struct mlx5dv_clock_info` (`mlx5dv_get_clock_info`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_clock_info {
    pub nsec: u64,
    pub last_cycles: u64,
    pub frac: u64,
    pub mult: u32,
    pub shift: u32,
    pub mask: u64,
}
c_layout!(MLX5DV_CLOCK_INFO: "struct mlx5dv_clock_info" = mlx5dv_clock_info, 40,
    [nsec, last_cycles, frac, mult, shift, mask]);

/// `struct mlx5dv_ctx_allocators` (`mlx5dv_set_context_attr` with
/// `MLX5DV_CTX_ATTR_BUF_ALLOCATORS`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_ctx_allocators {
    pub alloc: Option<unsafe extern "C" fn(size: usize, priv_data: *mut c_void) -> *mut c_void>,
    pub free: Option<unsafe extern "C" fn(ptr: *mut c_void, priv_data: *mut c_void)>,
    pub data: *mut c_void,
}
c_layout!(MLX5DV_CTX_ALLOCATORS: "struct mlx5dv_ctx_allocators" = mlx5dv_ctx_allocators, 24,
    [alloc, free, data]);

// ------------------------------------------- mlx5dv_init_obj's outputs

/// The `sq` / `rq` members of `struct mlx5dv_qp`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_qp_wq {
    pub buf: *mut c_void,
    pub wqe_cnt: u32,
    pub stride: u32,
}

/// The `bf` member of `struct mlx5dv_qp`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_qp_bf {
    pub reg: *mut c_void,
    pub size: u32,
}

/// `struct mlx5dv_qp`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_qp {
    pub dbrec: *mut u32,
    pub sq: mlx5dv_qp_wq,
    pub rq: mlx5dv_qp_wq,
    pub bf: mlx5dv_qp_bf,
    pub comp_mask: u64,
    pub uar_mmap_offset: i64,
    pub tirn: u32,
    pub tisn: u32,
    pub rqn: u32,
    pub sqn: u32,
    pub tir_icm_addr: u64,
}
c_layout!(MLX5DV_QP: "struct mlx5dv_qp" = mlx5dv_qp, 96,
    [dbrec, sq, rq, bf, comp_mask, uar_mmap_offset, tirn, tisn, rqn, sqn, tir_icm_addr]);

/// `struct mlx5dv_cq`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_cq {
    pub buf: *mut c_void,
    pub dbrec: *mut u32,
    pub cqe_cnt: u32,
    pub cqe_size: u32,
    pub cq_uar: *mut c_void,
    pub cqn: u32,
    pub comp_mask: u64,
}
c_layout!(MLX5DV_CQ: "struct mlx5dv_cq" = mlx5dv_cq, 48,
    [buf, dbrec, cqe_cnt, cqe_size, cq_uar, cqn, comp_mask]);

/// `struct mlx5dv_srq`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_srq {
    pub buf: *mut c_void,
    pub dbrec: *mut u32,
    pub stride: u32,
    pub head: u32,
    pub tail: u32,
    pub comp_mask: u64,
    pub srqn: u32,
}
c_layout!(MLX5DV_SRQ: "struct mlx5dv_srq" = mlx5dv_srq, 48,
    [buf, dbrec, stride, head, tail, comp_mask, srqn]);

/// `struct mlx5dv_rwq`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_rwq {
    pub buf: *mut c_void,
    pub dbrec: *mut u32,
    pub wqe_cnt: u32,
    pub stride: u32,
    pub comp_mask: u64,
}
c_layout!(MLX5DV_RWQ: "struct mlx5dv_rwq" = mlx5dv_rwq, 32,
    [buf, dbrec, wqe_cnt, stride, comp_mask]);

/// `struct mlx5dv_dm`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_dm {
    pub buf: *mut c_void,
    pub length: u64,
    pub comp_mask: u64,
    pub remote_va: u64,
}
c_layout!(MLX5DV_DM: "struct mlx5dv_dm" = mlx5dv_dm, 32, [buf, length, comp_mask, remote_va]);

/// `struct mlx5dv_ah`: `av` points at the AH's 48-byte `mlx5_wqe_av`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_ah {
    pub av: *mut c_void,
    pub comp_mask: u64,
}
c_layout!(MLX5DV_AH: "struct mlx5dv_ah" = mlx5dv_ah, 16, [av, comp_mask]);

/// `struct mlx5dv_pd`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_pd {
    pub pdn: u32,
    pub comp_mask: u64,
}
c_layout!(MLX5DV_PD: "struct mlx5dv_pd" = mlx5dv_pd, 16, [pdn, comp_mask]);

/// One `{ in, out }` pair of `struct mlx5dv_obj`.
#[repr(C)]
#[derive(Debug)]
pub struct mlx5dv_obj_pair<I, O> {
    pub r#in: *mut I,
    pub out: *mut O,
}

/// `struct mlx5dv_obj` (`mlx5dv_init_obj`): the objects to look into and
/// where to write each one's view; only the members `obj_type` names are
/// read. The `rwq` and `dm` inputs (`ibv_wq`, `ibv_dm`) are objects this
/// library never creates.
#[repr(C)]
#[derive(Debug)]
pub struct mlx5dv_obj {
    pub qp: mlx5dv_obj_pair<ibv_qp, mlx5dv_qp>,
    pub cq: mlx5dv_obj_pair<ibv_cq, mlx5dv_cq>,
    pub srq: mlx5dv_obj_pair<ibv_srq, mlx5dv_srq>,
    pub rwq: mlx5dv_obj_pair<c_void, mlx5dv_rwq>,
    pub dm: mlx5dv_obj_pair<c_void, mlx5dv_dm>,
    pub ah: mlx5dv_obj_pair<ibv_ah, mlx5dv_ah>,
    pub pd: mlx5dv_obj_pair<ibv_pd, mlx5dv_pd>,
}
c_layout!(MLX5DV_OBJ: "struct mlx5dv_obj" = mlx5dv_obj, 112, [qp, cq, srq, rwq, dm, ah, pd]);

// --------------------------------------------- creation attributes

/// `struct mlx5dv_cq_init_attr` (`mlx5dv_create_cq`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_cq_init_attr {
    pub comp_mask: u64,
    pub cqe_comp_res_format: u8,
    pub flags: u32,
    pub cqe_size: u16,
}
c_layout!(MLX5DV_CQ_INIT_ATTR: "struct mlx5dv_cq_init_attr" = mlx5dv_cq_init_attr, 24,
    [comp_mask, cqe_comp_res_format, flags, cqe_size]);

/// `struct mlx5dv_dc_init_attr`: `dc_type`, then a union of the DCT access
/// key and the DCI streams (8 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_dc_init_attr {
    pub dc_type: u32,
    pub dct_access_key: u64,
}
c_layout!(MLX5DV_DC_INIT_ATTR: "struct mlx5dv_dc_init_attr" = mlx5dv_dc_init_attr, 16,
    [dc_type, dct_access_key]);

/// `struct mlx5dv_qp_init_attr` (`mlx5dv_create_qp`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_qp_init_attr {
    pub comp_mask: u64,
    pub create_flags: u32,
    pub dc_init_attr: mlx5dv_dc_init_attr,
    pub send_ops_flags: u64,
}
c_layout!(MLX5DV_QP_INIT_ATTR: "struct mlx5dv_qp_init_attr" = mlx5dv_qp_init_attr, 40,
    [comp_mask, create_flags, dc_init_attr, send_ops_flags]);

/// `struct mlx5dv_qp_ex`: the mlx5-only `wr_*` operations of a QP created
/// with `mlx5dv_create_qp`, found with `mlx5dv_qp_ex_from_ibv_qp_ex`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_qp_ex {
    pub comp_mask: u64,
    pub wr_set_dc_addr: AnyFn,
    pub wr_mr_interleaved: AnyFn,
    pub wr_mr_list: AnyFn,
    pub wr_mkey_configure: AnyFn,
    pub wr_set_mkey_access_flags: AnyFn,
    pub wr_set_mkey_layout_list: AnyFn,
    pub wr_set_mkey_layout_interleaved: AnyFn,
    pub wr_set_mkey_sig_block: AnyFn,
    pub wr_raw_wqe: AnyFn,
    pub wr_set_dc_addr_stream: AnyFn,
    pub wr_memcpy: AnyFn,
    pub wr_set_mkey_crypto: AnyFn,
}
c_layout!(MLX5DV_QP_EX: "struct mlx5dv_qp_ex" = mlx5dv_qp_ex, 104,
    [comp_mask, wr_set_dc_addr, wr_mr_interleaved, wr_mr_list, wr_mkey_configure,
     wr_set_mkey_access_flags, wr_set_mkey_layout_list, wr_set_mkey_layout_interleaved,
     wr_set_mkey_sig_block, wr_raw_wqe, wr_set_dc_addr_stream, wr_memcpy, wr_set_mkey_crypto]);

// ------------------------------------------------------------------ DevX

/// `struct mlx5dv_devx_umem`: the UMEM id PRM commands name the memory by.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mlx5dv_devx_umem {
    pub umem_id: u32,
}
c_layout!(MLX5DV_DEVX_UMEM: "struct mlx5dv_devx_umem" = mlx5dv_devx_umem, 4, [umem_id]);

/// `struct mlx5dv_devx_umem_in` (`mlx5dv_devx_umem_reg_ex`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_devx_umem_in {
    pub addr: *mut c_void,
    pub size: usize,
    pub access: u32,
    pub pgsz_bitmap: u64,
    pub comp_mask: u64,
    pub dmabuf_fd: c_int,
}
c_layout!(MLX5DV_DEVX_UMEM_IN: "struct mlx5dv_devx_umem_in" = mlx5dv_devx_umem_in, 48,
    [addr, size, access, pgsz_bitmap, comp_mask, dmabuf_fd]);

/// `struct mlx5dv_devx_uar` (`mlx5dv_devx_alloc_uar`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_devx_uar {
    pub reg_addr: *mut c_void,
    pub base_addr: *mut c_void,
    pub page_id: u32,
    pub mmap_off: i64,
    pub comp_mask: u64,
}
c_layout!(MLX5DV_DEVX_UAR: "struct mlx5dv_devx_uar" = mlx5dv_devx_uar, 40,
    [reg_addr, base_addr, page_id, mmap_off, comp_mask]);

/// `struct mlx5dv_devx_cmd_comp`: the async command fd.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_devx_cmd_comp {
    pub fd: c_int,
}
c_layout!(MLX5DV_DEVX_CMD_COMP: "struct mlx5dv_devx_cmd_comp" = mlx5dv_devx_cmd_comp, 4, [fd]);

/// `struct mlx5dv_devx_event_channel`: the DevX event fd.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_devx_event_channel {
    pub fd: c_int,
}
c_layout!(MLX5DV_DEVX_EVENT_CHANNEL: "struct mlx5dv_devx_event_channel" =
    mlx5dv_devx_event_channel, 4, [fd]);

/// `struct mlx5dv_devx_async_cmd_hdr` (the kernel's
/// `mlx5_ib_uapi_devx_async_cmd_hdr`): `wr_id`, then the command's output.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_devx_async_cmd_hdr {
    pub wr_id: u64,
    pub out_data: [u8; 0],
}
c_layout!(MLX5DV_DEVX_ASYNC_CMD_HDR: "struct mlx5dv_devx_async_cmd_hdr" =
    mlx5dv_devx_async_cmd_hdr, 8, [wr_id, out_data]);

/// `struct mlx5dv_devx_async_event_hdr` (the kernel's
/// `mlx5_ib_uapi_devx_async_event_hdr`): the subscription's cookie, then
/// the EQE (absent on a channel created with `OMIT_EV_DATA`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_devx_async_event_hdr {
    pub cookie: u64,
    pub out_data: [u8; 0],
}
c_layout!(MLX5DV_DEVX_ASYNC_EVENT_HDR: "struct mlx5dv_devx_async_event_hdr" =
    mlx5dv_devx_async_event_hdr, 8, [cookie, out_data]);

/// Every layout of this module, for the probe test.
pub const LAYOUTS: &[Layout] = &[
    MLX5DV_CQE_COMP_CAPS,
    MLX5DV_SW_PARSING_CAPS,
    MLX5DV_STRIDING_RQ_CAPS,
    MLX5DV_SIG_CAPS,
    MLX5DV_DCI_STREAMS_CAPS,
    MLX5DV_CRYPTO_CAPS,
    MLX5DV_CONTEXT,
    MLX5DV_CONTEXT_ATTR,
    MLX5DV_CLOCK_INFO,
    MLX5DV_CTX_ALLOCATORS,
    MLX5DV_QP,
    MLX5DV_CQ,
    MLX5DV_SRQ,
    MLX5DV_RWQ,
    MLX5DV_DM,
    MLX5DV_AH,
    MLX5DV_PD,
    MLX5DV_OBJ,
    MLX5DV_CQ_INIT_ATTR,
    MLX5DV_DC_INIT_ATTR,
    MLX5DV_QP_INIT_ATTR,
    MLX5DV_QP_EX,
    MLX5DV_DEVX_UMEM,
    MLX5DV_DEVX_UMEM_IN,
    MLX5DV_DEVX_UAR,
    MLX5DV_DEVX_CMD_COMP,
    MLX5DV_DEVX_EVENT_CHANNEL,
    MLX5DV_DEVX_ASYNC_CMD_HDR,
    MLX5DV_DEVX_ASYNC_EVENT_HDR,
];
