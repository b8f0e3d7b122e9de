//! TEMP(wt-qp): wt-obj's CQ layouts, as far as wt-qp needs them to build;
//! the merge takes wt-obj's file instead.

use core::ffi::{c_int, c_uint, c_void};

use super::{context::ibv_context, pthread_cond_t, pthread_mutex_t, AnyFn, Layout};
use crate::c_layout;

/// `struct ibv_comp_channel`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_cq_ex`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq_ex {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
    pub comp_mask: u32,
    /// `enum ibv_wc_status`.
    pub status: c_int,
    pub wr_id: u64,
    pub start_poll: AnyFn,
    pub next_poll: AnyFn,
    pub end_poll: AnyFn,
    pub read_opcode: AnyFn,
    pub read_vendor_err: AnyFn,
    pub read_byte_len: AnyFn,
    pub read_imm_data: AnyFn,
    pub read_qp_num: AnyFn,
    pub read_src_qp: AnyFn,
    pub read_wc_flags: AnyFn,
    pub read_slid: AnyFn,
    pub read_sl: AnyFn,
    pub read_dlid_path_bits: AnyFn,
    pub read_completion_ts: AnyFn,
    pub read_cvlan: AnyFn,
    pub read_flow_tag: AnyFn,
    pub read_tm_info: AnyFn,
    pub read_completion_wallclock_ns: AnyFn,
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_wc {
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: c_int,
    /// `enum ibv_wc_opcode`.
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// C's anonymous union of `imm_data` (`__be32`) and `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

c_layout!(IBV_COMP_CHANNEL: "struct ibv_comp_channel" = ibv_comp_channel, 16,
    [context, fd, refcnt]);
c_layout!(IBV_CQ: "struct ibv_cq" = ibv_cq, 128,
    [context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
     async_events_completed]);
c_layout!(IBV_CQ_EX: "struct ibv_cq_ex" = ibv_cq_ex, 288,
    [context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
     async_events_completed, comp_mask, status, wr_id, start_poll, next_poll, end_poll,
     read_opcode, read_vendor_err, read_byte_len, read_imm_data, read_qp_num, read_src_qp,
     read_wc_flags, read_slid, read_sl, read_dlid_path_bits, read_completion_ts, read_cvlan,
     read_flow_tag, read_tm_info, read_completion_wallclock_ns]);
c_layout!(IBV_WC: "struct ibv_wc" = ibv_wc, 48,
    [wr_id, status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp, wc_flags,
     pkey_index, slid, sl, dlid_path_bits]);

/// This module's layouts.
pub const LAYOUTS: &[Layout] = &[IBV_COMP_CHANNEL, IBV_CQ, IBV_CQ_EX, IBV_WC];
