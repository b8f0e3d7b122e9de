//! libibverbs' marshall.c: the conversions from the kernel's structs that
//! librdmacm imports (`ibv_copy_ah_attr_from_kern`,
//! `ibv_copy_qp_attr_from_kern`, `ibv_copy_path_rec_from_kern`), field by
//! field from uverbs-abi's declarations of `<rdma/ib_user_verbs.h>` and
//! `<rdma/ib_user_sa.h>` (capi/tests/marshall.rs checks them from C).

#![allow(unsafe_code)]

use core::{ffi::c_int, ptr::addr_of_mut};

use uverbs::abi::{IbUserPathRec, IbUverbsAhAttr, IbUverbsQpAttr};

use crate::layout::qp::{ibv_ah_attr, ibv_qp_attr};
use crate::layout::unsupported::ibv_sa_path_rec;

/// Stores `v` in a 4-byte C field whatever integer type declares it:
/// verbs.h's enum fields (`enum ibv_mtu path_mtu`) are int-sized, and the
/// module owning the struct may declare them `c_int` or `u32`.
///
/// # Safety
/// `field` is valid for a write of `T`.
unsafe fn put_u32<T>(field: *mut T, v: u32) {
    const { assert!(size_of::<T>() == 4) };
    // SAFETY: the caller's contract; `T` is 4 bytes (checked above).
    unsafe { field.cast::<u32>().write_unaligned(v) }
}

/// Writes the kernel's address vector into a program's `ibv_ah_attr`.
///
/// # Safety
/// `dst` is valid for writes of an `ibv_ah_attr`.
unsafe fn ah_attr_from_kern(dst: *mut ibv_ah_attr, src: &IbUverbsAhAttr) {
    // SAFETY: the projections stay inside `*dst` (the caller's contract);
    // `dgid` is the 16 bytes of `union ibv_gid`, whatever its Rust members.
    unsafe {
        addr_of_mut!((*dst).grh.dgid)
            .cast::<[u8; 16]>()
            .write_unaligned(src.grh.dgid);
        (*dst).grh.flow_label = src.grh.flow_label;
        (*dst).grh.sgid_index = src.grh.sgid_index;
        (*dst).grh.hop_limit = src.grh.hop_limit;
        (*dst).grh.traffic_class = src.grh.traffic_class;
        (*dst).dlid = src.dlid;
        (*dst).sl = src.sl;
        (*dst).src_path_bits = src.src_path_bits;
        (*dst).static_rate = src.static_rate;
        (*dst).is_global = src.is_global;
        (*dst).port_num = src.port_num;
    }
}

/// `ibv_copy_ah_attr_from_kern`: the kernel's `struct ib_uverbs_ah_attr`
/// into an `ibv_ah_attr` (librdmacm, for UD and multicast address
/// handles). NULL pointers: nothing is written.
///
/// # Safety
/// `dst` and `src` are NULL or valid for a write / read of their structs.
#[export_name = "uverbs_ibv_copy_ah_attr_from_kern"]
pub unsafe extern "C" fn ibv_copy_ah_attr_from_kern(
    dst: *mut ibv_ah_attr,
    src: *const IbUverbsAhAttr,
) {
    if dst.is_null() || src.is_null() {
        return;
    }
    // SAFETY: `src` is readable (the caller's contract); C gives no
    // alignment promise beyond its own, so read it unaligned.
    let src = unsafe { src.read_unaligned() };
    // SAFETY: `dst` is writable (the caller's contract).
    unsafe { ah_attr_from_kern(dst, &src) }
}

/// `ibv_copy_qp_attr_from_kern`: the kernel's `struct ib_uverbs_qp_attr`
/// (the answer to `RDMA_USER_CM_CMD_INIT_QP_ATTR`) into an `ibv_qp_attr`.
/// As libibverbs does, `qp_state` and `rate_limit` keep the caller's
/// values (librdmacm sets the state it asks for). NULL pointers: nothing
/// is written.
///
/// # Safety
/// `dst` and `src` are NULL or valid for a write / read of their structs.
#[export_name = "uverbs_ibv_copy_qp_attr_from_kern"]
pub unsafe extern "C" fn ibv_copy_qp_attr_from_kern(
    dst: *mut ibv_qp_attr,
    src: *const IbUverbsQpAttr,
) {
    if dst.is_null() || src.is_null() {
        return;
    }
    // SAFETY: as in `ibv_copy_ah_attr_from_kern`.
    let s = unsafe { src.read_unaligned() };
    // SAFETY: every projection stays inside `*dst`, which the caller
    // promises is writable.
    unsafe {
        put_u32(addr_of_mut!((*dst).cur_qp_state), s.cur_qp_state);
        put_u32(addr_of_mut!((*dst).path_mtu), s.path_mtu);
        put_u32(addr_of_mut!((*dst).path_mig_state), s.path_mig_state);
        (*dst).qkey = s.qkey;
        (*dst).rq_psn = s.rq_psn;
        (*dst).sq_psn = s.sq_psn;
        (*dst).dest_qp_num = s.dest_qp_num;
        put_u32(addr_of_mut!((*dst).qp_access_flags), s.qp_access_flags);
        (*dst).cap.max_send_wr = s.max_send_wr;
        (*dst).cap.max_recv_wr = s.max_recv_wr;
        (*dst).cap.max_send_sge = s.max_send_sge;
        (*dst).cap.max_recv_sge = s.max_recv_sge;
        (*dst).cap.max_inline_data = s.max_inline_data;
        ah_attr_from_kern(addr_of_mut!((*dst).ah_attr), &s.ah_attr);
        ah_attr_from_kern(addr_of_mut!((*dst).alt_ah_attr), &s.alt_ah_attr);
        (*dst).pkey_index = s.pkey_index;
        (*dst).alt_pkey_index = s.alt_pkey_index;
        (*dst).en_sqd_async_notify = s.en_sqd_async_notify;
        (*dst).sq_draining = s.sq_draining;
        (*dst).max_rd_atomic = s.max_rd_atomic;
        (*dst).max_dest_rd_atomic = s.max_dest_rd_atomic;
        (*dst).min_rnr_timer = s.min_rnr_timer;
        (*dst).port_num = s.port_num;
        (*dst).timeout = s.timeout;
        (*dst).retry_cnt = s.retry_cnt;
        (*dst).rnr_retry = s.rnr_retry;
        (*dst).alt_port_num = s.alt_port_num;
        (*dst).alt_timeout = s.alt_timeout;
    }
}

/// `ibv_copy_path_rec_from_kern`: the kernel's `struct ib_user_path_rec`
/// (route resolution) into an `ibv_sa_path_rec`. Big-endian fields stay
/// big-endian; the kernel's `__u32 raw_traffic`, `reversible` and `mtu`
/// narrow to sa.h's `int`, `int` and `uint8_t` as C's assignments do. NULL
/// pointers: nothing is written.
///
/// # Safety
/// `dst` and `src` are NULL or valid for a write / read of their structs.
#[export_name = "uverbs_ibv_copy_path_rec_from_kern"]
pub unsafe extern "C" fn ibv_copy_path_rec_from_kern(
    dst: *mut ibv_sa_path_rec,
    src: *const IbUserPathRec,
) {
    if dst.is_null() || src.is_null() {
        return;
    }
    // SAFETY: as in `ibv_copy_ah_attr_from_kern`.
    let s = unsafe { src.read_unaligned() };
    // SAFETY: every projection stays inside `*dst`, which the caller
    // promises is writable; field by field, so padding is left alone as
    // C's assignments leave it.
    unsafe {
        (*dst).dgid = s.dgid;
        (*dst).sgid = s.sgid;
        (*dst).dlid = s.dlid;
        (*dst).slid = s.slid;
        (*dst).raw_traffic = s.raw_traffic as c_int;
        (*dst).flow_label = s.flow_label;
        (*dst).hop_limit = s.hop_limit;
        (*dst).traffic_class = s.traffic_class;
        (*dst).reversible = s.reversible as c_int;
        (*dst).numb_path = s.numb_path;
        (*dst).pkey = s.pkey;
        (*dst).sl = s.sl;
        (*dst).mtu_selector = s.mtu_selector;
        (*dst).mtu = s.mtu as u8;
        (*dst).rate_selector = s.rate_selector;
        (*dst).rate = s.rate;
        (*dst).packet_life_time_selector = s.packet_life_time_selector;
        (*dst).packet_life_time = s.packet_life_time;
        (*dst).preference = s.preference;
    }
}

#[cfg(test)]
mod tests;
