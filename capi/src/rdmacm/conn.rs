//! Connections of CM ids: `rdma_connect`, `rdma_accept`, `rdma_reject`,
//! `rdma_disconnect`, `rdma_establish` and `rdma_notify`, with the
//! translation of `struct rdma_conn_param` (librdmacm's
//! `ucma_copy_conn_param_to_kern`, `ucma_valid_param`). A connected id's
//! QP is moved through its states by `uverbs::cm` (`connect_qp`,
//! `accept_qp`, `disconnect_qp`).

#![allow(unsafe_code)]

use core::ffi::{c_int, c_void};

use uverbs::{
    cm::{CmId, ConnParam},
    sys::Errno,
    AsyncEventType,
};

use super::{fail, id::Id, ret};
use crate::{
    handle::Handle,
    layout::rdmacm::{rdma_cm_id, rdma_conn_param},
    qp::Qp,
};

/// The connection parameters of the program's `rdma_conn_param` (NULL:
/// librdmacm's defaults, `ConnParam::max_resources`); `uverbs::cm`
/// resolves `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH` (255) against the
/// device or the request. The QP number and SRQ use come from the id's
/// QP when it has one (`ucma_copy_conn_param_to_kern`).
///
/// # Safety
/// `p` is NULL or a readable `rdma_conn_param` whose private data is
/// readable.
unsafe fn to_conn_param(i: &Id, p: *const rdma_conn_param) -> ConnParam {
    // SAFETY: the caller's contract.
    let mut c = match unsafe { p.as_ref() } {
        None => ConnParam::max_resources(),
        Some(p) => {
            let mut c = ConnParam::new()
                .responder_resources(p.responder_resources)
                .initiator_depth(p.initiator_depth)
                .flow_control(p.flow_control)
                .retry_count(p.retry_count)
                .rnr_retry_count(p.rnr_retry_count)
                .qp_num(p.qp_num)
                .srq(p.srq != 0);
            if !p.private_data.is_null() && p.private_data_len > 0 {
                // SAFETY: the caller's contract.
                let d = unsafe {
                    core::slice::from_raw_parts(
                        p.private_data.cast::<u8>(),
                        usize::from(p.private_data_len),
                    )
                };
                c = c.private_data(d);
            }
            c
        }
    };
    let qp = i.qp();
    if !qp.is_null() {
        // SAFETY: `qp` is the id's live QP (this library's).
        let q = unsafe { &*qp };
        c = c.qp_num(q.qp_num).srq(!q.srq.is_null());
    }
    c
}

/// `ucma_valid_param`'s first rule: a connected id without a QP needs
/// parameters (its QP number is in them).
fn valid_param(i: &Id, p: *const rdma_conn_param) -> Result<(), Errno> {
    // SAFETY: a plain read of a field set at creation.
    let tcp = unsafe { (*i.c()).ps } == super::RDMA_PS_TCP;
    if tcp && p.is_null() && i.qp().is_null() {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Runs `f` with the uverbs QP of the id's QP, if it has one.
fn with_qp<R>(
    i: &Id,
    f: impl FnOnce(Option<&uverbs::QueuePair>) -> uverbs::Result<R>,
) -> Result<R, Errno> {
    let qp = i.qp();
    if qp.is_null() {
        return f(None).map_err(|e| super::of(&e));
    }
    // SAFETY: `qp` is the id's live QP (this library's).
    let q = unsafe { Qp::from_c(qp) }?;
    q.qp.with(|q| f(Some(q)))?.map_err(|e| super::of(&e))
}

/// What `rdma_connect` and `rdma_accept` share: the id, its parameters
/// checked (`ucma_valid_param`) and translated, then `f` with the uverbs
/// id and the id's QP (if any), a synchronous id's answer kept.
///
/// # Safety
/// `id` is NULL or a live id; `conn_param` NULL or readable.
unsafe fn with_param(
    id: *mut rdma_cm_id,
    conn_param: *const rdma_conn_param,
    f: impl FnOnce(&CmId, Option<&uverbs::QueuePair>, &ConnParam) -> uverbs::Result<()>,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let i = unsafe { Id::from_c(id) }?;
    valid_param(i, conn_param)?;
    // SAFETY: the caller's contract.
    let param = unsafe { to_conn_param(i, conn_param) };
    i.call(|i, uv| with_qp(i, |qp| f(uv, qp, &param)))
}

/// `rdma_connect`: sends the connection request (UD: the SIDR request);
/// with a QP on the id its number goes in the request, and its
/// CONNECT_RESPONSE is answered (RTR, RTS, the RTU) before the program
/// sees ESTABLISHED (`event.rs`; a synchronous id returns after it).
///
/// # Safety
/// `id` is NULL or a live id; `conn_param` NULL or readable.
#[export_name = "uverbs_rdma_connect"]
pub unsafe extern "C" fn rdma_connect(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    // SAFETY: the caller's contract.
    ret(unsafe {
        with_param(id, conn_param, |uv, qp, param| match qp {
            Some(q) => uv.connect_qp(q, param),
            None => uv.connect(param),
        })
    })
}

/// `rdma_accept`: accepts the connection request on the id of a
/// CONNECT_REQUEST; a connected id's QP goes to RTR and RTS first with
/// the accepted resources (`uverbs::cm::CmId::accept_qp`), and to ERR if
/// the accept fails.
///
/// # Safety
/// `id` is NULL or a live id; `conn_param` NULL or readable.
#[export_name = "uverbs_rdma_accept"]
pub unsafe extern "C" fn rdma_accept(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    // SAFETY: the caller's contract.
    ret(unsafe {
        with_param(id, conn_param, |uv, qp, param| match qp {
            Some(q) => uv.accept_qp(q, param),
            None => uv.accept(param),
        })
    })
}

/// `rdma_reject`: rejects a connection request, with private data.
///
/// # Safety
/// `id` is NULL or a live id; `private_data` readable for its length.
#[export_name = "uverbs_rdma_reject"]
pub unsafe extern "C" fn rdma_reject(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    // SAFETY: the caller's contract.
    let data = unsafe { bytes(private_data, private_data_len) };
    // SAFETY: the caller's contract.
    ret(unsafe { Id::from_c(id) }.and_then(|i| i.with(|uv| uv.reject(data))))
}

/// The program's private data (`len` bytes at `p`, or none).
///
/// # Safety
/// `p` is NULL or readable for `len` bytes.
pub(crate) unsafe fn bytes<'a>(p: *const c_void, len: u8) -> &'a [u8] {
    if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { core::slice::from_raw_parts(p.cast(), usize::from(len)) }
    }
}

/// `rdma_disconnect`: the id's QP (if any) goes to ERR, flushing its work
/// requests, then the disconnect is sent; both sides see DISCONNECTED (a
/// synchronous id waits for it).
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_disconnect"]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        i.call(|i, uv| {
            with_qp(i, |qp| match qp {
                Some(q) => uv.disconnect_qp(q),
                None => uv.disconnect(),
            })
        })
    })())
}

/// `rdma_establish`: for an id without a QP, after CONNECT_RESPONSE (the
/// program moved its own QP to RTS): the RTU. `EINVAL` with a QP on the
/// id (the library answers the response itself then).
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_establish"]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        if !i.qp().is_null() {
            return Err(Errno::EINVAL);
        }
        i.with(|uv| uv.establish())
    })())
}

/// `rdma_notify`: forwards a QP async event (`IBV_EVENT_COMM_EST`,
/// `IBV_EVENT_PATH_MIG`) to the CM.
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_notify"]
pub unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: c_int) -> c_int {
    let Ok(ev) = u32::try_from(event) else {
        return fail(Errno::EINVAL);
    };
    // SAFETY: the caller's contract.
    ret(unsafe { Id::from_c(id) }.and_then(|i| i.with(|uv| uv.notify(AsyncEventType(ev)))))
}
