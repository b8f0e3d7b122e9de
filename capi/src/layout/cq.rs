//! Completion queues and channels: `struct ibv_comp_channel`, `struct
//! ibv_cq`, `struct ibv_cq_ex` (the object every CQ is allocated as),
//! `struct ibv_wc`, `struct ibv_wc_tm_info`, `struct ibv_cq_init_attr_ex`
//! and `struct ibv_poll_cq_attr` (verbs.h lines 586-606, 1464-1527 and
//! 2018-2042 at v44).
//!
//! # Fields the library changes while programs hold the object
//!
//! Most fields are written once, before the object is handed out. A few
//! change afterwards, while other threads may be reading the object through
//! shared references: the acknowledgement counters of `ibv_cq`/`ibv_cq_ex`
//! (`ibv_ack_cq_events`, `ibv_ack_async_event`), the channel's `refcnt`
//! (CQs attached and destroyed), and `ibv_cq_ex`'s `status` and `wr_id`
//! (written by the polling ops, read by the program as fields after
//! `ibv_start_poll`/`ibv_next_poll`). Those are atomics of the C field's
//! size and alignment, so the layout is C's and the writes are not data
//! races on the Rust side; the program reads them as the plain integers
//! verbs.h declares.

use core::{
    ffi::{c_int, c_void},
    sync::atomic::{AtomicI32, AtomicU32, AtomicU64},
};

use super::{context::ibv_context, pd::ibv_pd, pthread_cond_t, pthread_mutex_t, AnyFn, Layout};
use crate::c_layout;

/// `struct ibv_comp_channel`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    /// The channel's event fd (programs `poll` it and may set `O_NONBLOCK`).
    pub fd: c_int,
    /// The number of CQs attached (`ibv_destroy_comp_channel` fails with
    /// `EBUSY` while it is not 0).
    pub refcnt: AtomicI32,
}

/// `struct ibv_cq`: the first 128 bytes of every [`ibv_cq_ex`].
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    /// The program's `cq_context`, returned by `ibv_get_cq_event`.
    pub cq_context: *mut c_void,
    pub handle: u32,
    /// The number of entries the kernel granted.
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    /// Completion events acknowledged (`ibv_ack_cq_events`).
    pub comp_events_completed: AtomicU32,
    /// Async events acknowledged (`ibv_ack_async_event`).
    pub async_events_completed: AtomicU32,
}

/// `struct ibv_cq_ex`: [`ibv_cq`]'s fields, then the polling session's
/// state and ops (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll` and the
/// `ibv_wc_read_*` inline functions call these slots).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq_ex {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    /// `int cqe`: atomic because `ibv_resize_cq` changes it while other
    /// threads may use the CQ (a plain store to the program, as
    /// libibverbs' `ibv_cmd_resize_cq` makes).
    pub cqe: AtomicI32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: AtomicU32,
    pub async_events_completed: AtomicU32,
    pub comp_mask: u32,
    /// `enum ibv_wc_status` of the current completion of a polling session.
    pub status: AtomicU32,
    /// The current completion's `wr_id`.
    pub wr_id: AtomicU64,
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

/// `struct ibv_wc`. C's anonymous union of `imm_data` (`__be32`, with
/// `IBV_WC_WITH_IMM`) and `invalidated_rkey` (host order, with
/// `IBV_WC_WITH_INV`) is the one `u32` field [`ibv_wc::imm_data`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_wc {
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_wc_opcode`.
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` in network byte order, or `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_cq_init_attr_ex` (`ibv_create_cq_ex`'s argument).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    /// `IBV_WC_EX_WITH_*` bits.
    pub wc_flags: u64,
    /// `IBV_CQ_INIT_ATTR_MASK_*` bits.
    pub comp_mask: u32,
    /// `IBV_CREATE_CQ_ATTR_*` bits.
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

/// `struct ibv_wc_tm_info` (what `ibv_wc_read_tm_info` writes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_wc_tm_info {
    /// The tag of the tag-matching header.
    pub tag: u64,
    /// The header's opaque user data.
    pub r#priv: u32,
}

/// `struct ibv_poll_cq_attr` (`ibv_start_poll`'s argument).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
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
c_layout!(IBV_CQ_INIT_ATTR_EX: "struct ibv_cq_init_attr_ex" = ibv_cq_init_attr_ex, 56,
    [cqe, cq_context, channel, comp_vector, wc_flags, comp_mask, flags, parent_domain]);
c_layout!(IBV_WC_TM_INFO: "struct ibv_wc_tm_info" = ibv_wc_tm_info, 16, [tag, r#priv]);
c_layout!(IBV_POLL_CQ_ATTR: "struct ibv_poll_cq_attr" = ibv_poll_cq_attr, 4, [comp_mask]);

/// This module's layouts.
pub const LAYOUTS: &[Layout] = &[
    IBV_COMP_CHANNEL,
    IBV_CQ,
    IBV_CQ_EX,
    IBV_WC,
    IBV_CQ_INIT_ATTR_EX,
    IBV_WC_TM_INFO,
    IBV_POLL_CQ_ATTR,
];

#[cfg(test)]
mod tests {
    use core::mem::offset_of;

    use super::*;

    #[test]
    fn the_fields_programs_read_of_a_cq_ex() {
        assert_eq!(offset_of!(ibv_cq_ex, status), 132);
        assert_eq!(offset_of!(ibv_cq_ex, wr_id), 136);
        assert_eq!(offset_of!(ibv_cq_ex, start_poll), 144);
        // ibv_cq is ibv_cq_ex's prefix: one pointer serves both.
        assert_eq!(
            offset_of!(ibv_cq, async_events_completed),
            offset_of!(ibv_cq_ex, async_events_completed)
        );
    }
}
