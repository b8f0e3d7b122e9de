//! `mlx5dv_create_qp` and the mlx5 `wr_*` operations (`mlx5dv_qp_ex`),
//! over `uverbs::mlx5::Mlx5Context::create_qp` and the QP's send session.
//!
//! As libmlx5 44's `create_qp` with an mlx5 attribute: the verbs
//! attributes checked as `ibv_create_qp_ex` checks them (`crate::qp`); an
//! unknown `comp_mask` bit or creation flag is `EINVAL`, a DC kind other
//! than DCT or DCI `EINVAL`; the rest goes to uverbs, which checks in
//! libmlx5's order and refuses what it has not (a DC QP, UMR and MMO
//! operations) with `EOPNOTSUPP`, and sends the flags the kernel decides
//! on to it. The QP is extended (`ibv_qp_to_qp_ex`); its
//! `struct mlx5dv_qp_ex` (`mlx5dv_qp_ex_from_ibv_qp_ex`) is in the QP
//! object, its `wr_raw_wqe` slot filled when mlx5 send operations were
//! asked for (libmlx5's `mlx5_qp_fill_wr_pfns` fills it for any), the
//! others NULL: uverbs builds no UMR, MMO or DC WQE.

#![allow(unsafe_code)]

use core::{
    ffi::{c_int, c_void},
    mem::{offset_of, transmute},
    slice,
};

use uverbs::{
    mlx5::{self, DcType, Mlx5QpAttr, Mlx5QpCreateFlags, Mlx5SendOps},
    sys::Errno,
};

use super::context::mlx5_of;
use crate::{
    errno,
    layout::{
        context::ibv_context,
        mlx5::{mlx5dv_qp_ex, mlx5dv_qp_init_attr},
        qp::{ibv_qp, ibv_qp_ex, ibv_qp_init_attr_ex},
        AnyFn,
    },
    qp::{self, Make, Qp},
    qp_ex,
};

/// `enum mlx5dv_qp_init_attr_mask`.
const MASK_QP_CREATE_FLAGS: u64 = 1 << 0;
const MASK_DC: u64 = 1 << 1;
const MASK_SEND_OPS_FLAGS: u64 = 1 << 2;
const MASK_DCI_STREAMS: u64 = 1 << 3;
/// `enum mlx5dv_dc_type`.
const DCTYPE_DCT: u32 = 1;
const DCTYPE_DCI: u32 = 2;
/// `IBV_QPT_DRIVER`.
const QPT_DRIVER: c_int = 0xff;

/// The uverbs attributes of a program's `mlx5dv_qp_init_attr` for a QP
/// of type `qp_type` (libmlx5's own checks: the mask, the flags, the DC
/// kind).
fn dv_attr(a: &mlx5dv_qp_init_attr, qp_type: c_int) -> Result<Mlx5QpAttr, Errno> {
    let known = MASK_QP_CREATE_FLAGS | MASK_DC | MASK_SEND_OPS_FLAGS | MASK_DCI_STREAMS;
    if a.comp_mask & !known != 0 {
        return Err(Errno::EINVAL);
    }
    if a.comp_mask & MASK_DC != 0 && qp_type != QPT_DRIVER {
        return Err(Errno::EINVAL);
    }
    let mut attr = Mlx5QpAttr::default();
    if a.comp_mask & MASK_QP_CREATE_FLAGS != 0 {
        match Mlx5QpCreateFlags::from_bits(a.create_flags) {
            Some(f) => attr = attr.create_flags(f),
            None => return Err(Errno::EINVAL),
        }
    }
    if qp_type == QPT_DRIVER {
        if a.comp_mask & MASK_DC == 0 {
            return Err(Errno::EINVAL);
        }
        attr = attr.dc(match a.dc_init_attr.dc_type {
            DCTYPE_DCT => DcType::Dct,
            DCTYPE_DCI => DcType::Dci,
            _ => return Err(Errno::EINVAL),
        });
    }
    if a.comp_mask & MASK_SEND_OPS_FLAGS != 0 {
        attr = attr.send_ops(Mlx5SendOps::from_bits_retain(a.send_ops_flags));
    }
    Ok(attr)
}

/// `mlx5dv_create_qp`: see the module doc. NULL and `errno` on failure;
/// `EOPNOTSUPP` on a context that is not mlx5's.
///
/// # Safety
/// `context` is an open context of this library; `qp_attr` the program's
/// `ibv_qp_init_attr_ex` (written back: its `cap`), whose objects are
/// live objects of this library; `mlx5_qp_attr` NULL or a readable
/// `mlx5dv_qp_init_attr`.
#[export_name = "uverbs_mlx5dv_create_qp"]
pub unsafe extern "C" fn mlx5dv_create_qp(
    context: *mut ibv_context,
    qp_attr: *mut ibv_qp_init_attr_ex,
    mlx5_qp_attr: *mut mlx5dv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: the caller's contract.
    let m = match unsafe { mlx5_of(context) } {
        Ok(m) => m,
        Err(e) => return errno::null(e),
    };
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { qp_attr.as_mut() }) else {
        return errno::null(Errno::EINVAL);
    };
    // SAFETY: the caller's contract.
    let req = match unsafe { qp::ex_request(context, a) } {
        Ok(r) => r,
        Err(e) => return errno::null(e),
    };
    // SAFETY: the caller's contract.
    let dv = match unsafe { mlx5_qp_attr.as_ref() } {
        Some(d) => match dv_attr(d, req.qp_type) {
            Ok(dv) => dv,
            Err(e) => return errno::null(e),
        },
        // libmlx5: a driver QP without mlx5 attributes fails.
        None if req.qp_type == QPT_DRIVER => return errno::null(Errno::EINVAL),
        None => Mlx5QpAttr::default(),
    };
    let make: Make<'_> = &|pd, init, opts| m.create_qp(pd, init, opts, dv);
    // SAFETY: the caller's contract: the objects named are live.
    match unsafe { qp::create_with(&req, make) } {
        Ok((qp, cap)) => {
            a.cap = cap;
            if !dv.send_ops.is_empty() {
                // SAFETY: the QP just made, not yet the program's.
                let q = unsafe { &mut *qp.cast::<Qp>() };
                q.dv.wr_raw_wqe = WR_RAW_WQE;
            }
            qp
        }
        Err(e) => errno::null(e),
    }
}

/// `mlx5dv_qp_ex_from_ibv_qp_ex`: the `struct mlx5dv_qp_ex` in the QP
/// object (as libmlx5's `container_of`, no check; NULL for NULL).
///
/// # Safety
/// `qp` is NULL or the `ibv_qp_ex` of a live QP of this library.
#[export_name = "uverbs_mlx5dv_qp_ex_from_ibv_qp_ex"]
pub unsafe extern "C" fn mlx5dv_qp_ex_from_ibv_qp_ex(qp: *mut ibv_qp_ex) -> *mut mlx5dv_qp_ex {
    if qp.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: the caller's contract: `qp` is the address of a live `Qp`
    // (its first field), so the address of its `dv` field is in it.
    unsafe { &raw mut (*qp.cast::<Qp>()).dv }
}

/// The QP whose `struct mlx5dv_qp_ex` is at `dv`.
///
/// # Safety
/// `dv` is the `dv` field of a live QP of this library.
unsafe fn qp_of<'a>(dv: *mut mlx5dv_qp_ex) -> &'a Qp {
    // SAFETY: the caller's contract: `dv` lies `offset_of!(Qp, dv)` bytes
    // into a live `Qp`.
    unsafe { &*dv.byte_sub(offset_of!(Qp, dv)).cast::<Qp>() }
}

/// `mlx5dv_wr_raw_wqe`: the WQE at `wqe` (its size the ctrl segment's DS,
/// in 16-byte units) as the session's next request, with `qpx->wr_id`
/// (`uverbs::mlx5::push_raw_wqe`: its WQE index set, nothing else of it
/// checked, as libmlx5 copies it). A DS of 0, or more than the QP's WQEs
/// were sized for, fails the session (`EOPNOTSUPP`), as a full queue does
/// (`ENOSPC`).
///
/// # Safety
/// `dv` is the `mlx5dv_qp_ex` of a live QP of this library; `wqe` points
/// to a whole WQE (at least its 16-byte ctrl segment, and the DS units it
/// counts), as mlx5dv.h requires.
unsafe extern "C" fn wr_raw_wqe(dv: *mut mlx5dv_qp_ex, wqe: *const c_void) {
    if dv.is_null() || wqe.is_null() {
        return;
    }
    // SAFETY: the caller's contract.
    let q = unsafe { qp_of(dv) };
    // SAFETY: the caller's contract: the ctrl segment's 16 bytes.
    let ctrl = unsafe { slice::from_raw_parts(wqe.cast::<u8>(), 16) };
    let ds = usize::from(ctrl[7] & 0x3f).max(1);
    // SAFETY: the caller's contract: the DS units the ctrl segment counts.
    let bytes = unsafe { slice::from_raw_parts(wqe.cast::<u8>(), ds * 16) };
    qp_ex::push_own(q, |uv, wr_id| mlx5::push_raw_wqe(uv, wr_id, bytes));
}

type RawWqeFn = unsafe extern "C" fn(*mut mlx5dv_qp_ex, *const c_void);
// SAFETY: a function pointer as another function pointer type; programs
// call the slot with mlx5dv.h's signature, which is `RawWqeFn`.
const WR_RAW_WQE: AnyFn =
    Some(unsafe { transmute::<RawWqeFn, unsafe extern "C" fn()>(wr_raw_wqe) });

#[cfg(test)]
mod tests;
