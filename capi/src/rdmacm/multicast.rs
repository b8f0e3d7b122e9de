//! Multicast: `rdma_join_multicast`, `rdma_join_multicast_ex`,
//! `rdma_leave_multicast`, and the context of the MULTICAST_JOIN /
//! MULTICAST_ERROR events `event.rs` hands out.
//!
//! The joins are `uverbs::cm`'s (`CmId::join_multicast_qp` /
//! `leave_multicast_qp` with the id's QP: the QP is attached to the group
//! when the join completes, not for a send-only join, and detached before
//! the leave, as librdmacm's `ucma_process_join` and
//! `rdma_leave_multicast`). This layer keeps what librdmacm keeps of each
//! join for the program: its `context`, which the group's events carry in
//! `param.ud.private_data` (`CmEvent::multicast_group` names the group).

#![allow(unsafe_code)]

use core::ffi::{c_int, c_void};
use std::net::SocketAddr;

use uverbs::{cm::CmEventKind, sys::Errno};

use super::{addr, id::Id, ret};
use crate::{
    handle::Handle,
    layout::rdmacm::{rdma_cm_id, rdma_cm_join_mc_attr_ex},
    qp::Qp,
};

/// One group the id joined (librdmacm's `struct cma_multicast`, what the
/// program gave).
#[derive(Debug)]
pub(crate) struct Join {
    addr: SocketAddr,
    context: *mut c_void,
}

/// `RDMA_CM_JOIN_MC_ATTR_ADDRESS`, `RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS`.
const ATTR_ADDRESS: u32 = 1 << 0;
const ATTR_JOIN_FLAGS: u32 = 1 << 1;
/// `RDMA_MC_JOIN_FLAG_FULLMEMBER`, `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`.
const FULLMEMBER: u32 = 0;
const SENDONLY_FULLMEMBER: u32 = 1;

/// The program's context of the join of `group` (NULL when unknown).
pub(crate) fn context_of(i: &Id, group: Option<SocketAddr>) -> *mut c_void {
    let st = i.state();
    group
        .and_then(|g| st.joins.iter().find(|j| j.addr == g))
        .map_or(core::ptr::null_mut(), |j| j.context)
}

/// Joins `group` for the id at `id` (with its QP, if any). A synchronous
/// id waits for the answer, kept in `id->event` with the join's context.
///
/// # Safety
/// `id` is NULL or a live id.
unsafe fn join(
    id: *mut rdma_cm_id,
    group: SocketAddr,
    send_only: bool,
    context: *mut c_void,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let i = unsafe { Id::from_c(id) }?;
    let qp = i.qp();
    let (r, kept) = {
        let mut st = i.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        let r = if qp.is_null() {
            uv.join_multicast(group, send_only)
        } else {
            // SAFETY: the id's QP is a live QP of this library.
            let q = unsafe { Qp::from_c(qp) }?;
            q.qp.with(|q| uv.join_multicast_qp(q, group, send_only))?
        };
        let kept = if uv.is_sync() { uv.sync_event() } else { None };
        // A synchronous join that got its answer stays joined (librdmacm
        // keeps it until left); one the kernel refused does not.
        if r.is_ok() || kept.is_some() {
            st.joins.push(Join {
                addr: group,
                context,
            });
        }
        (r.map_err(|e| super::of(&e)), kept)
    };
    if let Some(ev) = kept {
        let e = super::event::from_sync(i.as_c(), &ev);
        if matches!(
            ev.kind(),
            CmEventKind::MulticastJoin | CmEventKind::MulticastError
        ) {
            // SAFETY: the event just made, not yet the program's.
            unsafe { (*e).param.ud.private_data = context.cast_const() };
        }
        i.set_event(Some(e));
    }
    r
}

/// `rdma_join_multicast`: joins the group at `addr` as a full member;
/// MULTICAST_JOIN (with `context` in `param.ud.private_data`) or
/// MULTICAST_ERROR follows.
///
/// # Safety
/// `id` is NULL or a live id; `addr` NULL or a socket address.
#[export_name = "uverbs_rdma_join_multicast"]
pub unsafe extern "C" fn rdma_join_multicast(
    id: *mut rdma_cm_id,
    addr: *mut c_void,
    context: *mut c_void,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let group = unsafe { addr::from_c(addr) }?;
        // SAFETY: the caller's contract.
        unsafe { join(id, group, false, context) }
    })())
}

/// `rdma_join_multicast_ex`: the join with `mc_join_attr`'s address and
/// flags (`RDMA_MC_JOIN_FLAG_FULLMEMBER` or
/// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`; both attributes required,
/// `EINVAL` otherwise; `ENOTSUP` for unknown `comp_mask` bits, as
/// librdmacm).
///
/// # Safety
/// `id` is NULL or a live id; `mc_join_attr` NULL or readable, its
/// address a socket address.
#[export_name = "uverbs_rdma_join_multicast_ex"]
pub unsafe extern "C" fn rdma_join_multicast_ex(
    id: *mut rdma_cm_id,
    mc_join_attr: *mut rdma_cm_join_mc_attr_ex,
    context: *mut c_void,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let a = unsafe { mc_join_attr.as_ref() }.ok_or(Errno::EINVAL)?;
        if a.comp_mask & !(ATTR_ADDRESS | ATTR_JOIN_FLAGS) != 0 {
            return Err(Errno::ENOTSUP);
        }
        if a.comp_mask & ATTR_ADDRESS == 0 || a.comp_mask & ATTR_JOIN_FLAGS == 0 {
            return Err(Errno::EINVAL);
        }
        let send_only = match a.join_flags {
            FULLMEMBER => false,
            SENDONLY_FULLMEMBER => true,
            _ => return Err(Errno::EINVAL),
        };
        // SAFETY: the caller's contract.
        let group = unsafe { addr::from_c(a.addr) }?;
        // SAFETY: the caller's contract.
        unsafe { join(id, group, send_only, context) }
    })())
}

/// `rdma_leave_multicast`: detaches the id's QP from the group (when
/// attached) and leaves it; `EADDRNOTAVAIL` for a group not joined, as
/// librdmacm.
///
/// # Safety
/// `id` is NULL or a live id; `addr` NULL or a socket address.
#[export_name = "uverbs_rdma_leave_multicast"]
pub unsafe extern "C" fn rdma_leave_multicast(id: *mut rdma_cm_id, addr: *mut c_void) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        // SAFETY: the caller's contract.
        let group = unsafe { addr::from_c(addr) }?;
        let qp = i.qp();
        let mut st = i.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        let r = if qp.is_null() {
            uv.leave_multicast(group)
        } else {
            // SAFETY: the id's QP is a live QP of this library.
            let q = unsafe { Qp::from_c(qp) }?;
            q.qp.with(|q| uv.leave_multicast_qp(q, group))?
        };
        r.map_err(|e| super::of(&e))?;
        st.joins.retain(|j| j.addr != group);
        Ok(())
    })())
}
