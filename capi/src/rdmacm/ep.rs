//! Endpoints: `rdma_create_ep`, `rdma_destroy_ep`, `rdma_get_request`.
//!
//! `rdma_destroy_ep` is librdmacm's: the id's QP and SRQ, then the id.
//! Synchronous ids (a NULL channel, which `rdma_create_ep` makes) are not
//! there yet: `rdma_create_ep` fails with `ENOSYS`, and `rdma_get_request`
//! answers `EINVAL`, librdmacm's answer for a listener that is not
//! synchronous (every listener here).

#![allow(unsafe_code)]

use core::ffi::c_int;

use uverbs::sys::Errno;

use super::{fail, id, qp};
use crate::layout::{pd::ibv_pd, qp::ibv_qp_init_attr, rdmacm::{rdma_addrinfo, rdma_cm_id}};

/// `rdma_create_ep`: `ENOSYS` (see the module documentation).
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rdma_create_ep"]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    _pd: *mut ibv_pd,
    _qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    if id.is_null() || res.is_null() {
        return fail(Errno::EINVAL);
    }
    fail(Errno::ENOSYS)
}

/// `rdma_destroy_ep`: destroys the id's QP and SRQ (and the CQs made for
/// them), then the id.
///
/// # Safety
/// `id` is NULL or a live id, not used after.
#[export_name = "uverbs_rdma_destroy_ep"]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    if id.is_null() {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe {
        if !(*id).qp.is_null() {
            qp::rdma_destroy_qp(id);
        }
        if !(*id).srq.is_null() {
            qp::rdma_destroy_srq(id);
        }
        id::rdma_destroy_id(id);
    }
}

/// `rdma_get_request`: `EINVAL`, librdmacm's answer for a listener that
/// is not synchronous.
///
/// # Safety
/// None: nothing is dereferenced.
#[export_name = "uverbs_rdma_get_request"]
pub unsafe extern "C" fn rdma_get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
) -> c_int {
    let _ = (listen, id);
    fail(Errno::EINVAL)
}
