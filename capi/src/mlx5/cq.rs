//! `mlx5dv_create_cq`: an extended CQ (`ibv_cq_ex`) with mlx5's attributes
//! (`struct mlx5dv_cq_init_attr`), over `uverbs::mlx5::Mlx5Context::create_cq`.
//!
//! As libmlx5's `create_cq` with an mlx5 attribute: an unknown `comp_mask`
//! bit or flag is `EINVAL`; the attributes go to uverbs, which refuses
//! what the device lacks with `EINVAL`; the CQ is extended (polled with
//! `ibv_start_poll` or `ibv_poll_cq`). NULL and `errno` on failure;
//! `EOPNOTSUPP` on a context that is not mlx5's.

#![allow(unsafe_code)]

use uverbs::{mlx5::Mlx5CqAttr, sys::Errno};

use super::context::mlx5_of;
use crate::{
    cq, cq_ex, errno,
    layout::{
        context::ibv_context, cq::ibv_cq_ex, cq::ibv_cq_init_attr_ex, mlx5::mlx5dv_cq_init_attr,
    },
};

/// `enum mlx5dv_cq_init_attr_mask`.
const MASK_COMPRESSED_CQE: u64 = 1 << 0;
const MASK_FLAGS: u64 = 1 << 1;
const MASK_CQE_SIZE: u64 = 1 << 2;
/// `MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD`; flags from
/// `MLX5DV_CQ_INIT_ATTR_FLAGS_RESERVED` (1 << 1) up are refused.
const FLAGS_CQE_PAD: u32 = 1 << 0;
const FLAGS_RESERVED: u32 = 1 << 1;

/// The uverbs attributes of a program's `mlx5dv_cq_init_attr`.
fn dv_attr(a: &mlx5dv_cq_init_attr) -> Result<Mlx5CqAttr, Errno> {
    if a.comp_mask & !(MASK_COMPRESSED_CQE | MASK_FLAGS | MASK_CQE_SIZE) != 0 {
        return Err(Errno::EINVAL);
    }
    let mut attr = Mlx5CqAttr::default();
    if a.comp_mask & MASK_CQE_SIZE != 0 {
        attr = attr.cqe_size(a.cqe_size);
    }
    if a.comp_mask & MASK_COMPRESSED_CQE != 0 {
        attr = attr.compressed(a.cqe_comp_res_format);
    }
    if a.comp_mask & MASK_FLAGS != 0 {
        if a.flags & !(FLAGS_RESERVED - 1) != 0 {
            return Err(Errno::EINVAL);
        }
        if a.flags & FLAGS_CQE_PAD != 0 {
            attr = attr.padded();
        }
    }
    Ok(attr)
}

/// `mlx5dv_create_cq`: see the module doc.
///
/// # Safety
/// `context` is an open context of this library; `cq_attr` a readable
/// `ibv_cq_init_attr_ex` (its channel NULL or a live channel of the
/// context); `mlx5_cq_attr` NULL or a readable `mlx5dv_cq_init_attr`.
#[export_name = "uverbs_mlx5dv_create_cq"]
pub unsafe extern "C" fn mlx5dv_create_cq(
    context: *mut ibv_context,
    cq_attr: *mut ibv_cq_init_attr_ex,
    mlx5_cq_attr: *mut mlx5dv_cq_init_attr,
) -> *mut ibv_cq_ex {
    // SAFETY: the caller's contract.
    if let Err(e) = unsafe { mlx5_of(context) } {
        return errno::null(e);
    }
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { cq_attr.as_ref() }) else {
        return errno::null(Errno::EINVAL);
    };
    // SAFETY: the caller's contract.
    let dv = match unsafe { mlx5_cq_attr.as_ref() }.map(dv_attr).transpose() {
        Ok(dv) => dv.unwrap_or_default(),
        Err(e) => return errno::null(e),
    };
    let made = cq_ex::create_args(a).and_then(|args| {
        // SAFETY: the caller's contract.
        unsafe {
            cq::create_with(context, &args, cq_ex::fill_ops, |ctx, cqe, opts| {
                ctx.mlx5()?.create_cq(cqe, opts, dv)
            })
        }
    });
    match made {
        Ok(cq) => cq.cast(),
        Err(e) => errno::null(e),
    }
}
