//! `mlx5dv_init_obj`: the direct-verbs view of verbs objects
//! (`uverbs::mlx5`'s `qp_view`, `cq_view`, `srq_view`, `ah_av`,
//! `pd_number`), written into the program's `mlx5dv_*` structs.
//!
//! As libmlx5 (`_mlx5dv_init_obj`, `mlx5.c`): the objects named in
//! `obj_type` are taken in the order QP, CQ, SRQ, RWQ, DM, AH, PD, and the
//! first failure stops; the context is the first named object's, and a
//! device that is not mlx5's is `EOPNOTSUPP`. A positive errno. This
//! library makes no `ibv_wq` and no `ibv_dm`, so naming one is `EINVAL`.
//! The `MLX5_1.0` entry point (`mlx5dv_init_obj@MLX5_1.0`) differs in one
//! field: a CQ's `cq_uar` is the address of a pointer to the UAR, not the
//! UAR itself (`__mlx5dv_init_obj_1_0`).

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::ffi::{c_int, c_void};
use std::sync::OnceLock;

use uverbs::sys::Errno;

use super::context::mlx5_of;
use crate::{
    ah::Ah,
    cq::{with_cqs, Cq},
    errno,
    layout::{
        context::ibv_context,
        mlx5::{mlx5dv_ah, mlx5dv_cq, mlx5dv_obj, mlx5dv_pd},
    },
    pd::Pd,
    qp::Qp,
    srq::Srq,
};

/// `enum mlx5dv_obj_type`.
const OBJ_QP: u64 = 1 << 0;
const OBJ_CQ: u64 = 1 << 1;
const OBJ_SRQ: u64 = 1 << 2;
const OBJ_RWQ: u64 = 1 << 3;
const OBJ_DM: u64 = 1 << 4;
const OBJ_AH: u64 = 1 << 5;
const OBJ_PD: u64 = 1 << 6;
/// `MLX5DV_QP_MASK_*`.
const QP_MASK_UAR_MMAP_OFFSET: u64 = 1 << 0;
const QP_MASK_RAW_QP_HANDLES: u64 = 1 << 1;
const QP_MASK_RAW_QP_TIR_ADDR: u64 = 1 << 2;
/// `MLX5DV_SRQ_MASK_SRQN`.
const SRQ_MASK_SRQN: u64 = 1 << 0;

/// The context of the first object `obj_type` names (libmlx5's
/// `get_context_from_obj`), or NULL.
///
/// # Safety
/// The named members of `obj` hold readable pointers to this library's
/// objects.
unsafe fn context_of(obj: &mlx5dv_obj, obj_type: u64) -> *mut ibv_context {
    // SAFETY: the caller's contract; each `in` is an object of ours whose
    // C part starts with its `context` pointer's struct.
    unsafe {
        if obj_type & OBJ_QP != 0 && !obj.qp.r#in.is_null() {
            return (*obj.qp.r#in).context;
        }
        if obj_type & OBJ_CQ != 0 && !obj.cq.r#in.is_null() {
            return (*obj.cq.r#in).context;
        }
        if obj_type & OBJ_SRQ != 0 && !obj.srq.r#in.is_null() {
            return (*obj.srq.r#in).context;
        }
        if obj_type & OBJ_AH != 0 && !obj.ah.r#in.is_null() {
            return (*obj.ah.r#in).context;
        }
        if obj_type & OBJ_PD != 0 && !obj.pd.r#in.is_null() {
            return (*obj.pd.r#in).context;
        }
    }
    core::ptr::null_mut()
}

/// Fills the views `obj_type` names; the errno of the first failure.
///
/// # Safety
/// As for [`mlx5dv_init_obj`].
unsafe fn init_obj(obj: *mut mlx5dv_obj, obj_type: u64) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let obj = unsafe { obj.as_ref() }.ok_or(Errno::EINVAL)?;
    // SAFETY: the caller's contract.
    let context = unsafe { context_of(obj, obj_type) };
    if context.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: `context` is the named object's context, open.
    let m = unsafe { mlx5_of(context) }?;
    let bad = |e: uverbs::Error| errno::of(&e);
    if obj_type & OBJ_QP != 0 {
        // SAFETY: the caller's contract.
        let qp = unsafe { Qp::from_c(obj.qp.r#in.cast()) }?;
        let v = qp.qp.with(|q| m.qp_view(q))?.map_err(bad)?;
        let out = obj.qp.out;
        if out.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: `out` is the program's writable `mlx5dv_qp`; fields are
        // written through the raw pointer.
        unsafe {
            let want = (*out).comp_mask;
            let mut got = 0;
            (*out).dbrec = v.dbrec;
            (*out).sq.buf = v.sq.buf.cast();
            (*out).sq.wqe_cnt = v.sq.wqe_cnt;
            (*out).sq.stride = v.sq.stride;
            (*out).rq.buf = v.rq.buf.cast();
            (*out).rq.wqe_cnt = v.rq.wqe_cnt;
            (*out).rq.stride = v.rq.stride;
            (*out).bf.reg = v.bf_reg.cast();
            (*out).bf.size = v.bf_size;
            if want & QP_MASK_UAR_MMAP_OFFSET != 0 {
                (*out).uar_mmap_offset = v.uar_mmap_offset as i64;
                got |= QP_MASK_UAR_MMAP_OFFSET;
            }
            // Only raw packet QPs have these objects (none here): zero,
            // as libmlx5 reports them for other QPs.
            if want & QP_MASK_RAW_QP_HANDLES != 0 {
                (*out).tirn = 0;
                (*out).tisn = 0;
                (*out).rqn = 0;
                (*out).sqn = 0;
                got |= QP_MASK_RAW_QP_HANDLES;
            }
            if want & QP_MASK_RAW_QP_TIR_ADDR != 0 {
                (*out).tir_icm_addr = 0;
                got |= QP_MASK_RAW_QP_TIR_ADDR;
            }
            (*out).comp_mask = got;
        }
    }
    if obj_type & OBJ_CQ != 0 {
        // SAFETY: the caller's contract.
        let cq = unsafe { Cq::from_c(obj.cq.r#in) }?;
        let v = with_cqs(cq, cq, |c, _| m.cq_view(c))?.map_err(bad)?;
        let out = obj.cq.out;
        if out.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: `out` is the program's writable `mlx5dv_cq`.
        unsafe {
            out.write(mlx5dv_cq {
                buf: v.buf.cast(),
                dbrec: v.dbrec,
                cqe_cnt: v.cqe_cnt,
                cqe_size: v.cqe_size,
                cq_uar: v.cq_uar.cast(),
                cqn: v.cqn,
                comp_mask: 0,
            })
        };
    }
    if obj_type & OBJ_SRQ != 0 {
        // SAFETY: the caller's contract.
        let srq = unsafe { Srq::from_c(obj.srq.r#in) }?;
        let v = srq.with(|s| m.srq_view(s))?.map_err(bad)?;
        let out = obj.srq.out;
        if out.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: `out` is the program's writable `mlx5dv_srq`.
        unsafe {
            let want = (*out).comp_mask;
            (*out).buf = v.buf.cast();
            (*out).dbrec = v.dbrec;
            (*out).stride = v.stride;
            (*out).head = v.head;
            (*out).tail = v.tail;
            (*out).comp_mask = 0;
            if want & SRQ_MASK_SRQN != 0 {
                (*out).srqn = v.srqn;
                (*out).comp_mask = SRQ_MASK_SRQN;
            }
        }
    }
    if obj_type & (OBJ_RWQ | OBJ_DM) != 0 {
        return Err(Errno::EINVAL);
    }
    if obj_type & OBJ_AH != 0 {
        // SAFETY: the caller's contract.
        let ah = unsafe { Ah::from_c(obj.ah.r#in) }?;
        let av = m.ah_av(ah.handle()).map_err(bad)?;
        let out = obj.ah.out;
        if out.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: `out` is the program's writable `mlx5dv_ah`.
        unsafe {
            out.write(mlx5dv_ah {
                av: av.cast_mut().cast(),
                comp_mask: 0,
            })
        };
    }
    if obj_type & OBJ_PD != 0 {
        // SAFETY: the caller's contract.
        let pd = unsafe { Pd::from_c(obj.pd.r#in) }?;
        let pdn = pd.with(|p| m.pd_number(p))?.map_err(bad)?;
        let out = obj.pd.out;
        if out.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: `out` is the program's writable `mlx5dv_pd`.
        unsafe { out.write(mlx5dv_pd { pdn, comp_mask: 0 }) };
    }
    Ok(())
}

/// `mlx5dv_init_obj` (`MLX5_1.2`): see the module doc.
///
/// # Safety
/// `obj` points to a readable `mlx5dv_obj` whose members named in
/// `obj_type` hold live objects of this library and writable outputs.
#[export_name = "uverbs_mlx5dv_init_obj"]
pub unsafe extern "C" fn mlx5dv_init_obj(obj: *mut mlx5dv_obj, obj_type: u64) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { init_obj(obj, obj_type) } {
        Ok(()) => 0,
        Err(e) => errno::positive(e),
    }
}

/// The UAR addresses `mlx5dv_init_obj@MLX5_1.0` hands out a pointer to,
/// one per distinct UAR, kept for the process (the 1.0 ABI returns
/// `void **`: libmlx5 points into its context, which lives as long).
static UAR_SLOTS: OnceLock<std::sync::Mutex<Vec<&'static usize>>> = OnceLock::new();

/// A stable address holding `uar`.
fn uar_slot(uar: *mut c_void) -> *mut c_void {
    let slots = UAR_SLOTS.get_or_init(Default::default);
    let mut v = slots.lock().unwrap_or_else(|p| p.into_inner());
    let addr = uar as usize;
    let slot = match v.iter().find(|s| ***s == addr) {
        Some(s) => *s,
        None => {
            let s: &'static usize = Box::leak(Box::new(addr));
            v.push(s);
            s
        }
    };
    (slot as *const usize).cast_mut().cast()
}

/// `mlx5dv_init_obj@MLX5_1.0`: as [`mlx5dv_init_obj`], with a CQ's
/// `cq_uar` the address of a pointer to the UAR (the 1.0 ABI).
///
/// # Safety
/// As for [`mlx5dv_init_obj`].
#[export_name = "uverbs_mlx5dv_init_obj_1_0"]
pub unsafe extern "C" fn mlx5dv_init_obj_1_0(obj: *mut mlx5dv_obj, obj_type: u64) -> c_int {
    // SAFETY: the caller's contract.
    let r = unsafe { mlx5dv_init_obj(obj, obj_type) };
    if r == 0 && obj_type & OBJ_CQ != 0 {
        // SAFETY: the call above wrote `obj.cq.out`, a writable
        // `mlx5dv_cq`.
        unsafe {
            let out = (*obj).cq.out;
            (*out).cq_uar = uar_slot((*out).cq_uar);
        }
    }
    r
}
