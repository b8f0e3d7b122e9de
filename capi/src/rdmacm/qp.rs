//! QPs and SRQs for ids: `rdma_create_qp`, `rdma_create_qp_ex`,
//! `rdma_destroy_qp`, `rdma_init_qp_attr`, `rdma_create_srq`,
//! `rdma_create_srq_ex`, `rdma_destroy_srq`; and ECE (`rdma_set_local_ece`,
//! `rdma_get_remote_ece`, `rdma_reject_ece`) over `uverbs::cm`'s.
//!
//! As librdmacm: the QP is made with this library's `ibv_create_qp_ex` on
//! `id->verbs` (the PD given, or `id->pd`), with CQs and completion
//! channels made for it when the attributes name none (`id->send_cq`,
//! `recv_cq` and their channels, destroyed again with the QP), and moved
//! to the state the CM gives (`uverbs::cm::CmId::init_qp`: INIT for
//! connected QPs; INIT, RTR, RTS for UD, where the Q_Key is the CM's).
//! `id->qp` and `id->pd` are set.

#![allow(unsafe_code)]

use core::{ffi::c_int, ptr::null_mut};

use uverbs::{cm::Ece, sys::Errno, QpState};

use super::{id::Id, ret};
use crate::{
    handle::Handle,
    layout::{
        pd::ibv_pd,
        qp::{
            ibv_qp_attr, ibv_qp_init_attr, ibv_qp_init_attr_ex, ibv_srq_init_attr,
            ibv_srq_init_attr_ex,
        },
        rdmacm::rdma_cm_id,
        unsupported::ibv_ece,
    },
    qp::Qp,
};

const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;
/// `IBV_SRQT_BASIC`, `IBV_SRQT_XRC`.
const IBV_SRQT_BASIC: c_int = 0;
const IBV_SRQT_XRC: c_int = 1;

/// `ucma_destroy_cqs`: the CQs and channels `rdma_create_qp` made.
fn destroy_cqs(c: *mut rdma_cm_id) {
    // SAFETY: `c` is a live id; its CQ and channel fields are NULL or
    // objects this layer made (a program's CQs are never stored there).
    unsafe {
        if !(*c).recv_cq.is_null() {
            crate::cq::ibv_destroy_cq((*c).recv_cq);
            if !(*c).send_cq.is_null() && (*c).send_cq != (*c).recv_cq {
                crate::cq::ibv_destroy_cq((*c).send_cq);
            }
            (*c).recv_cq = null_mut();
        }
        (*c).send_cq = null_mut();
        if !(*c).recv_cq_channel.is_null() {
            crate::comp_channel::ibv_destroy_comp_channel((*c).recv_cq_channel);
            if !(*c).send_cq_channel.is_null() && (*c).send_cq_channel != (*c).recv_cq_channel {
                crate::comp_channel::ibv_destroy_comp_channel((*c).send_cq_channel);
            }
            (*c).recv_cq_channel = null_mut();
        }
        (*c).send_cq_channel = null_mut();
    }
}

/// `ucma_create_cqs`: a CQ (with its completion channel, the id as CQ
/// context) of `recv` and of `send` entries, for each that is non-zero.
fn create_cqs(c: *mut rdma_cm_id, send: u32, recv: u32) -> Result<(), Errno> {
    let made = (|| {
        // SAFETY: `c` is a live id whose `verbs` is this library's context.
        unsafe {
            let verbs = (*c).verbs;
            for (size, chan, cq) in [
                (recv, &raw mut (*c).recv_cq_channel, &raw mut (*c).recv_cq),
                (send, &raw mut (*c).send_cq_channel, &raw mut (*c).send_cq),
            ] {
                if size == 0 {
                    continue;
                }
                let ch = crate::comp_channel::ibv_create_comp_channel(verbs);
                if ch.is_null() {
                    return Err(Errno::last());
                }
                *chan = ch;
                let n = c_int::try_from(size).map_err(|_| Errno::EINVAL)?;
                let q = crate::cq::ibv_create_cq(verbs, n, c.cast(), ch, 0);
                if q.is_null() {
                    return Err(Errno::last());
                }
                *cq = q;
            }
        }
        Ok(())
    })();
    if made.is_err() {
        destroy_cqs(c);
    }
    made
}

/// `rdma_create_qp_ex`: see the module documentation. `EINVAL` when the
/// id has a QP, the PD is on another context, or the attributes name CQs
/// other than the id's.
///
/// # Safety
/// `id` is NULL or a live id; `attr` NULL or a writable
/// `ibv_qp_init_attr_ex` naming live objects of this library.
#[export_name = "uverbs_rdma_create_qp_ex"]
pub unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_init_attr_ex,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        // SAFETY: the caller's contract.
        let a = unsafe { attr.as_mut() }.ok_or(Errno::EINVAL)?;
        let c = i.c();
        // SAFETY: the id's fields, plain reads and writes (the program
        // does not create two QPs for one id at once, as with librdmacm).
        unsafe {
            if !(*c).qp.is_null() {
                return Err(Errno::EINVAL);
            }
            if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
                a.comp_mask |= IBV_QP_INIT_ATTR_PD;
                a.pd = (*c).pd;
            } else if (*a.pd).context != (*c).verbs {
                return Err(Errno::EINVAL);
            }
            if (!(*c).recv_cq.is_null() && !a.recv_cq.is_null() && (*c).recv_cq != a.recv_cq)
                || (!(*c).send_cq.is_null() && !a.send_cq.is_null() && (*c).send_cq != a.send_cq)
            {
                return Err(Errno::EINVAL);
            }
            let send = if a.send_cq.is_null() && (*c).send_cq.is_null() {
                a.cap.max_send_wr
            } else {
                0
            };
            let recv = if a.recv_cq.is_null() && (*c).recv_cq.is_null() {
                a.cap.max_recv_wr
            } else {
                0
            };
            create_cqs(c, send, recv)?;
            if a.send_cq.is_null() {
                a.send_cq = (*c).send_cq;
            }
            if a.recv_cq.is_null() {
                a.recv_cq = (*c).recv_cq;
            }
            if !(*c).srq.is_null() && a.srq.is_null() {
                a.srq = (*c).srq;
            }
            let qp = crate::qp::create_qp_ex((*c).verbs, a);
            if qp.is_null() {
                let e = Errno::last();
                destroy_cqs(c);
                return Err(e);
            }
            let moved = Qp::from_c(qp).and_then(|q| {
                let st = i.state();
                let uv = st.uv.as_ref().ok_or(Errno::EINVAL)?;
                q.qp.with(|q| uv.init_qp(q))?.map_err(|e| super::of(&e))
            });
            if let Err(e) = moved {
                crate::qp::ibv_destroy_qp(qp);
                destroy_cqs(c);
                return Err(e);
            }
            (*c).pd = (*qp).pd;
            (*c).qp = qp;
        }
        Ok(())
    })())
}

/// `rdma_create_qp`: [`rdma_create_qp_ex`] with `pd` (NULL: `id->pd`);
/// the attributes are written back (the CQs used, the capacities got).
///
/// # Safety
/// `id` is NULL or a live id; `pd` NULL or a live PD; `qp_init_attr` NULL
/// or writable, naming live objects of this library.
#[export_name = "uverbs_rdma_create_qp"]
pub unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { qp_init_attr.as_mut() }) else {
        return super::fail(Errno::EINVAL);
    };
    let id_pd = if id.is_null() {
        null_mut()
    } else {
        // SAFETY: the caller's contract.
        unsafe { (*id).pd }
    };
    let mut ex = ibv_qp_init_attr_ex {
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
        comp_mask: IBV_QP_INIT_ATTR_PD,
        pd: if pd.is_null() { id_pd } else { pd },
        // SAFETY: the remaining fields are plain data and pointers, all
        // zero as rdma_create_qp's memcpy leaves them unset beyond the mask.
        ..unsafe { core::mem::zeroed() }
    };
    // SAFETY: the caller's contract.
    let r = unsafe { rdma_create_qp_ex(id, &mut ex) };
    a.qp_context = ex.qp_context;
    a.send_cq = ex.send_cq;
    a.recv_cq = ex.recv_cq;
    a.srq = ex.srq;
    a.cap = ex.cap;
    a.qp_type = ex.qp_type;
    a.sq_sig_all = ex.sq_sig_all;
    r
}

/// `rdma_destroy_qp`: destroys the id's QP (and the CQs made for it);
/// `id->qp` is NULL after.
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_destroy_qp"]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    // SAFETY: the caller's contract.
    let Ok(i) = (unsafe { Id::from_c(id) }) else {
        return;
    };
    let c = i.c();
    // SAFETY: the id's fields; the QP is this library's.
    unsafe {
        if !(*c).qp.is_null() {
            crate::qp::ibv_destroy_qp((*c).qp);
            (*c).qp = null_mut();
        }
    }
    destroy_cqs(c);
}

/// `rdma_init_qp_attr`: the attributes and mask to move a QP of the id to
/// `qp_attr->qp_state`, from the CM.
///
/// # Safety
/// `id` is NULL or a live id; `qp_attr` and `qp_attr_mask` NULL or
/// writable.
#[export_name = "uverbs_rdma_init_qp_attr"]
pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    qp_attr: *mut ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        // SAFETY: the caller's contract.
        let out = unsafe { qp_attr.as_mut() }.ok_or(Errno::EINVAL)?;
        if qp_attr_mask.is_null() {
            return Err(Errno::EINVAL);
        }
        let state = u8::try_from(out.qp_state).map_err(|_| Errno::EINVAL)?;
        let (attr, mask) = i.with(|uv| uv.init_qp_attr(QpState::from_raw(state)))?;
        crate::qp::attr::write_query(&attr, out);
        // SAFETY: the caller's contract.
        unsafe { qp_attr_mask.write(mask.bits() as c_int) };
        Ok(())
    })())
}

/// `rdma_create_srq_ex`: a basic SRQ on the PD given (or `id->pd`), set as
/// `id->srq`; `EINVAL` without `IBV_SRQ_INIT_ATTR_TYPE`, `EOPNOTSUPP` for
/// XRC (no XRC domains here).
///
/// # Safety
/// `id` is NULL or a live id; `attr` NULL or writable, naming live objects.
#[export_name = "uverbs_rdma_create_srq_ex"]
pub unsafe extern "C" fn rdma_create_srq_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_srq_init_attr_ex,
) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        // SAFETY: the caller's contract.
        let a = unsafe { attr.as_mut() }.ok_or(Errno::EINVAL)?;
        if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 {
            return Err(Errno::EINVAL);
        }
        if a.srq_type == IBV_SRQT_XRC {
            return Err(Errno::EOPNOTSUPP);
        }
        let c = i.c();
        // SAFETY: the id's fields; the objects are this library's.
        unsafe {
            if a.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 || a.pd.is_null() {
                a.pd = (*c).pd;
                a.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
            }
            let srq = crate::srq::create_srq_ex((*c).verbs, a);
            if srq.is_null() {
                return Err(Errno::last());
            }
            if (*c).pd.is_null() {
                (*c).pd = a.pd;
            }
            (*c).srq = srq;
        }
        Ok(())
    })())
}

/// `rdma_create_srq`: [`rdma_create_srq_ex`] of a basic SRQ on `pd`.
///
/// # Safety
/// As [`rdma_create_srq_ex`]; `pd` NULL or a live PD.
#[export_name = "uverbs_rdma_create_srq"]
pub unsafe extern "C" fn rdma_create_srq(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { attr.as_mut() }) else {
        return super::fail(Errno::EINVAL);
    };
    let mut ex = ibv_srq_init_attr_ex {
        srq_context: a.srq_context,
        attr: a.attr,
        comp_mask: IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
        srq_type: IBV_SRQT_BASIC,
        pd,
        // SAFETY: plain data and pointers, zero as unset.
        ..unsafe { core::mem::zeroed() }
    };
    // SAFETY: the caller's contract.
    let r = unsafe { rdma_create_srq_ex(id, &mut ex) };
    a.srq_context = ex.srq_context;
    a.attr = ex.attr;
    r
}

/// `rdma_destroy_srq`: destroys `id->srq` (and CQs made for the id).
///
/// # Safety
/// `id` is NULL or a live id.
#[export_name = "uverbs_rdma_destroy_srq"]
pub unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    // SAFETY: the caller's contract.
    let Ok(i) = (unsafe { Id::from_c(id) }) else {
        return;
    };
    let c = i.c();
    // SAFETY: the id's fields; the SRQ is this library's.
    unsafe {
        if !(*c).srq.is_null() {
            crate::srq::ibv_destroy_srq((*c).srq);
            (*c).srq = null_mut();
        }
    }
    destroy_cqs(c);
}

/// `rdma_set_local_ece`: the ECE options the id's connect or accept
/// offers (`uverbs::cm::CmId::set_local_ece`; `EINVAL` for an id with a
/// QP, a zero vendor or a `comp_mask`, as librdmacm).
///
/// # Safety
/// `id` is NULL or a live id; `ece` NULL or readable.
#[export_name = "uverbs_rdma_set_local_ece"]
pub unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        // SAFETY: the caller's contract.
        let e = unsafe { ece.as_ref() }.ok_or(Errno::EINVAL)?;
        if !i.qp().is_null() || e.vendor_id == 0 || e.comp_mask != 0 {
            return Err(Errno::EINVAL);
        }
        i.with(|uv| uv.set_local_ece(Ece::new(e.vendor_id, e.options)))
    })())
}

/// `rdma_get_remote_ece`: the ECE options the peer's request or response
/// carried (zero when none), as librdmacm (`EINVAL` for an id with a QP).
///
/// # Safety
/// `id` is NULL or a live id; `ece` NULL or writable.
#[export_name = "uverbs_rdma_get_remote_ece"]
pub unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    ret((|| {
        // SAFETY: the caller's contract.
        let i = unsafe { Id::from_c(id) }?;
        // SAFETY: the caller's contract.
        let e = unsafe { ece.as_mut() }.ok_or(Errno::EINVAL)?;
        if !i.qp().is_null() {
            return Err(Errno::EINVAL);
        }
        let r = i.with(|uv| Ok(uv.remote_ece()))?;
        *e = ibv_ece {
            vendor_id: r.vendor_id,
            options: r.options,
            comp_mask: 0,
        };
        Ok(())
    })())
}

/// `rdma_reject_ece`: rejects a connection request with IBTA's reason
/// "vendor option not supported" (`uverbs::cm::CmId::reject_ece`).
///
/// # Safety
/// `id` is NULL or a live id; `private_data` readable for its length.
#[export_name = "uverbs_rdma_reject_ece"]
pub unsafe extern "C" fn rdma_reject_ece(
    id: *mut rdma_cm_id,
    private_data: *const core::ffi::c_void,
    private_data_len: u8,
) -> c_int {
    // SAFETY: the caller's contract.
    let data = unsafe { super::conn::bytes(private_data, private_data_len) };
    // SAFETY: the caller's contract.
    ret(unsafe { Id::from_c(id) }.and_then(|i| i.with(|uv| uv.reject_ece(data))))
}
