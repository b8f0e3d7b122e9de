//! Endpoints: `rdma_create_ep`, `rdma_destroy_ep`, `rdma_get_request`.
//!
//! As librdmacm composes them of its own calls (`librdmacm/cma.c`): an
//! endpoint is a synchronous id (`uverbs::cm::CmId::create_sync`) made
//! from an `rdma_addrinfo`; a passive one is bound to the source address
//! and keeps the PD and QP attributes for the ids `rdma_get_request`
//! returns (each gets its QP as `rdma_create_qp` makes it); an active one
//! resolves the address and the route (2000 ms each) and gets its QP now.
//! `rdma_get_request` is `uverbs::cm::CmId::get_request`: the new id is
//! synchronous, keeps its CONNECT_REQUEST in `id->event` (`listen_id` the
//! listener), and is on the listener's device (`verbs`, `route` filled).

#![allow(unsafe_code)]

use core::{ffi::c_int, ptr::null_mut};

use uverbs::sys::Errno;

use super::{fail, id, id::Id, qp};
use crate::{
    handle::Handle,
    layout::{
        pd::ibv_pd,
        qp::ibv_qp_init_attr,
        rdmacm::{rdma_addrinfo, rdma_cm_id},
    },
};

/// `RAI_PASSIVE`.
const RAI_PASSIVE: c_int = 1;
/// librdmacm's timeout for an active endpoint's resolutions.
const EP_TIMEOUT_MS: c_int = 2000;

/// -1 and `errno` unless `rc` is 0.
fn check(rc: c_int) -> Result<(), Errno> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

/// The steps of `rdma_create_ep` after the id exists.
///
/// # Safety
/// As [`rdma_create_ep`]; `p` is the new id.
unsafe fn setup(
    p: *mut rdma_cm_id,
    r: &rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> Result<(), Errno> {
    // SAFETY: `p` is the new id, ours alone.
    let i = unsafe { Id::from_c(p) }?;
    if r.ai_flags & RAI_PASSIVE != 0 {
        // SAFETY: the caller's contract for the address.
        check(unsafe { id::rdma_bind_addr(p, r.ai_src_addr) })?;
        if !pd.is_null() {
            // SAFETY: the id's field; it is not yet the program's.
            unsafe { (*i.c()).pd = pd };
        }
        // SAFETY: the caller's contract.
        if let Some(a) = unsafe { qp_init_attr.as_ref() } {
            let mut a = *a;
            a.qp_type = r.ai_qp_type;
            i.state().ep_qp = Some(a);
        }
        return Ok(());
    }
    let src = if r.ai_src_len > 0 {
        r.ai_src_addr
    } else {
        null_mut()
    };
    // SAFETY: the caller's contract for the addresses.
    check(unsafe { id::rdma_resolve_addr(p, src, r.ai_dst_addr, EP_TIMEOUT_MS) })?;
    // SAFETY: `p` is live.
    check(unsafe { id::rdma_resolve_route(p, EP_TIMEOUT_MS) })?;
    // SAFETY: the caller's contract.
    if let Some(a) = unsafe { qp_init_attr.as_mut() } {
        a.qp_type = r.ai_qp_type;
        // SAFETY: the caller's contract for the PD and attributes.
        check(unsafe { qp::rdma_create_qp(p, pd, a) })?;
    }
    Ok(())
}

/// `rdma_create_ep`: see the module documentation. 0 and `*id` set, or -1
/// and `errno` (nothing left behind).
///
/// # Safety
/// `id` is writable; `res` a readable `rdma_addrinfo` (its addresses
/// socket addresses); `pd` NULL or a live PD; `qp_init_attr` NULL or
/// writable, naming live objects of this library.
#[export_name = "uverbs_rdma_create_ep"]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(r) = (unsafe { res.as_ref() }) else {
        return fail(Errno::EINVAL);
    };
    if id.is_null() {
        return fail(Errno::EINVAL);
    }
    // SAFETY: NULL channel: a synchronous id.
    let p = match unsafe {
        id::create_with_type(null_mut(), null_mut(), r.ai_port_space, r.ai_qp_type)
    } {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    // SAFETY: the caller's contract.
    match unsafe { setup(p, r, pd, qp_init_attr) } {
        Ok(()) => {
            // SAFETY: the caller's contract.
            unsafe { id.write(p) };
            0
        }
        Err(e) => {
            // SAFETY: the new id is ours alone.
            unsafe { rdma_destroy_ep(p) };
            fail(e)
        }
    }
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

/// `rdma_get_request`: the next connection request of a synchronous
/// listener (see the module documentation). `EINVAL` for a listener that
/// is not synchronous, or another event (which the listener then keeps in
/// `listen->event`), `ECONNREFUSED` for REJECTED, the status's errno.
///
/// # Safety
/// `listen` is NULL or a live id; `id` writable.
#[export_name = "uverbs_rdma_get_request"]
pub unsafe extern "C" fn rdma_get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
) -> c_int {
    let run = || -> Result<*mut rdma_cm_id, Errno> {
        // SAFETY: the caller's contract.
        let l = unsafe { Id::from_c(listen) }?;
        if id.is_null() {
            return Err(Errno::EINVAL);
        }
        let (got, ep_qp) = {
            let st = l.state();
            let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
            let got = uv.get_request();
            if uv.is_sync() {
                l.set_event(
                    uv.sync_event()
                        .map(|ev| super::event::from_sync(l.as_c(), &ev)),
                );
            }
            (got.map_err(|e| super::of(&e))?, st.ep_qp)
        };
        // SAFETY: plain reads of the listener's fields.
        let (context, pd) = unsafe { ((*l.c()).context, (*l.c()).pd) };
        let p = Id::make(got.id, null_mut(), context);
        // SAFETY: just made, ours alone until returned.
        let n = unsafe { Id::from_c(p) }?;
        let made = (|| {
            {
                let st = n.state();
                let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
                n.fill_route(uv)?;
                let ev = uv.sync_event().map(|ev| super::event::from_sync(p, &ev));
                if let Some(e) = ev {
                    // SAFETY: the event just made.
                    unsafe { (*e).listen_id = listen };
                }
                n.set_event(ev);
            }
            if let Some(mut a) = ep_qp {
                // SAFETY: the listener's PD (or NULL: the device's) and
                // the attributes it kept.
                check(unsafe { qp::rdma_create_qp(p, pd, &mut a) })?;
            }
            Ok(())
        })();
        if let Err(e) = made {
            // SAFETY: the new id is ours alone.
            unsafe { id::rdma_destroy_id(p) };
            return Err(e);
        }
        Ok(p)
    };
    match run() {
        Ok(p) => {
            // SAFETY: the caller's contract.
            unsafe { id.write(p) };
            0
        }
        Err(e) => fail(e),
    }
}
