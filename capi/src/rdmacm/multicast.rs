//! Multicast: `rdma_join_multicast`, `rdma_join_multicast_ex`,
//! `rdma_leave_multicast`, and the MULTICAST_JOIN / MULTICAST_ERROR
//! processing of `event.rs`.
//!
//! As librdmacm: each join keeps the program's `context`, which the
//! group's events carry in `param.ud.private_data`; a MULTICAST_JOIN
//! records the group's MGID and MLID and attaches the id's QP to the group
//! (not for a send-only join); a leave detaches it first. uverbs names a
//! group's events by the id, so an event is matched to its join by the
//! group address embedded in the MGID it reports (the low bytes of the
//! IPv4 address, the whole IPv6 address on RoCE), or by being the id's
//! only join.

#![allow(unsafe_code)]

use core::ffi::{c_int, c_void};
use std::net::SocketAddr;

use uverbs::{
    cm::{CmEventKind, UdParam},
    sys::Errno,
};

use super::{addr, id::Id, ret};
use crate::{
    handle::Handle,
    layout::{device::ibv_gid, rdmacm::rdma_cm_id, rdmacm::rdma_cm_join_mc_attr_ex},
};

/// One group the id joined (librdmacm's `struct cma_multicast`).
#[derive(Debug)]
pub(crate) struct Join {
    addr: SocketAddr,
    context: *mut c_void,
    send_only: bool,
    /// From the MULTICAST_JOIN event.
    joined: Option<(ibv_gid, u16)>,
}

/// `RDMA_CM_JOIN_MC_ATTR_ADDRESS`, `RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS`.
const ATTR_ADDRESS: u32 = 1 << 0;
const ATTR_JOIN_FLAGS: u32 = 1 << 1;
/// `RDMA_MC_JOIN_FLAG_FULLMEMBER`, `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`.
const FULLMEMBER: u32 = 0;
const SENDONLY_FULLMEMBER: u32 = 1;

/// Whether `mgid` is the group `a`'s (see the module documentation).
fn mgid_matches(mgid: &[u8; 16], a: &SocketAddr) -> bool {
    match a {
        SocketAddr::V4(v4) => mgid[13..] == v4.ip().octets()[1..],
        SocketAddr::V6(v6) => *mgid == v6.ip().octets(),
    }
}

/// The join a group event is about, its MGID and MLID recorded and the
/// QP attached for a MULTICAST_JOIN; returns the join's context.
pub(crate) fn on_event(
    i: &Id,
    ud: Option<&UdParam>,
    kind: CmEventKind,
) -> Result<*mut c_void, Errno> {
    let mut st = i.state();
    let mgid = ud.and_then(|u| u.ah_attr.grh).map(|g| g.dgid.0);
    let n = st.joins.len();
    let join = match mgid {
        Some(g) => st.joins.iter_mut().find(|j| mgid_matches(&g, &j.addr)),
        None => None,
    };
    let join = match join {
        Some(j) => j,
        None if n == 1 => &mut st.joins[0],
        None => return Err(Errno::EINVAL),
    };
    if kind != CmEventKind::MulticastJoin {
        return Ok(join.context);
    }
    let Some(ud) = ud else {
        return Err(Errno::EINVAL);
    };
    let Some(grh) = ud.ah_attr.grh else {
        return Err(Errno::EINVAL);
    };
    let gid = crate::qp::attr::c_gid(grh.dgid);
    join.joined = Some((gid, ud.ah_attr.dlid));
    let context = join.context;
    let qp = i.qp();
    if qp.is_null() || join.send_only {
        return Ok(context);
    }
    // SAFETY: the id's QP is a live QP of this library; the GID is ours.
    let rc = unsafe { crate::qp::ibv_attach_mcast(qp, &gid, ud.ah_attr.dlid) };
    if rc != 0 {
        return Err(Errno::from_raw(rc));
    }
    Ok(context)
}

/// Joins `group` for the id at `id`. A synchronous id waits for the
/// answer, which is then processed as a MULTICAST_JOIN read from a channel
/// is, and kept in `id->event`.
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
    let (r, kept) = {
        let mut st = i.state();
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        let r = uv.join_multicast(group, send_only);
        let kept = if uv.is_sync() { uv.sync_event() } else { None };
        let joined = match &r {
            Ok(()) => true,
            // A synchronous join that got its answer is a join (librdmacm
            // keeps it until left); one refused by the kernel is not.
            Err(_) => kept.is_some(),
        };
        if joined {
            st.joins.push(Join {
                addr: group,
                context,
                send_only,
                joined: None,
            });
        }
        (r.map_err(|e| super::of(&e)), kept)
    };
    if let Some(ev) = kept {
        let e = super::event::from_sync(i.as_c(), &ev);
        let mut kind = ev.kind();
        let mut status = ev.status();
        if matches!(
            kind,
            CmEventKind::MulticastJoin | CmEventKind::MulticastError
        ) {
            match on_event(i, ev.ud_param().as_ref(), kind) {
                // SAFETY: the event just made, not yet the program's.
                Ok(ctx) => unsafe { (*e).param.ud.private_data = ctx.cast_const() },
                Err(_) => {
                    kind = CmEventKind::MulticastError;
                    status = -1;
                }
            }
        }
        // SAFETY: as above.
        unsafe {
            (*e).event = kind.raw() as c_int;
            (*e).status = status;
        }
        i.set_event(Some(e));
        if status != 0 && r.is_ok() {
            return Err(Errno::EINVAL);
        }
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
        let mut st = i.state();
        let at = st
            .joins
            .iter()
            .position(|j| j.addr == group)
            .ok_or(Errno::EADDRNOTAVAIL)?;
        let qp = i.qp();
        if let (false, Some((gid, lid))) = (qp.is_null(), st.joins[at].joined) {
            if !st.joins[at].send_only {
                // SAFETY: the id's QP is a live QP of this library.
                unsafe { crate::qp::ibv_detach_mcast(qp, &gid, lid) };
            }
        }
        let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
        uv.leave_multicast(group).map_err(|e| super::of(&e))?;
        st.joins.remove(at);
        Ok(())
    })())
}
