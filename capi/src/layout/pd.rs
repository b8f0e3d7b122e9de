//! `struct ibv_pd`, `struct ibv_mr` and `struct ibv_mw` (verbs.h at v44),
//! and what parent domains are made of: `struct ibv_td`,
//! `struct ibv_td_init_attr`, `struct ibv_parent_domain_init_attr`.
//!
//! Programs read `mr->lkey` and `mr->rkey` for every work request and
//! `mr->addr`/`mr->length` to describe buffers; `pd->context` and
//! `pd->handle` are read by pyverbs and by libraries built on libibverbs
//! (librdmacm). The library writes every field once, before it hands the
//! object out, and never again.

use core::{
    ffi::{c_int, c_void},
    sync::atomic::AtomicU32,
};

use super::{context::ibv_context, Layout};
use crate::c_layout;

/// `struct ibv_pd`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    /// The kernel's handle of the PD.
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    /// The registered address (`ibv_reg_dmabuf_mr`: the dma-buf offset, as
    /// libibverbs sets it).
    pub addr: *mut c_void,
    pub length: usize,
    /// The kernel's handle of the MR.
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_mw`. `rkey` changes when a type 1 window is bound through
/// `ibv_bind_mw` (rdma-core's providers store the new key at post time),
/// while other threads may read it: an atomic of `uint32_t`'s layout.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: AtomicU32,
    /// The kernel's handle of the MW.
    pub handle: u32,
    /// `enum ibv_mw_type`.
    pub r#type: c_int,
}

/// `struct ibv_td`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_td {
    pub context: *mut ibv_context,
}

/// `struct ibv_td_init_attr` (`ibv_alloc_td`'s argument).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_td_init_attr {
    pub comp_mask: u32,
}

/// A parent domain's `alloc` callback: memory, NULL, or
/// `IBV_ALLOCATOR_USE_DEFAULT`.
pub type AllocFn = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    pd_context: *mut c_void,
    size: usize,
    alignment: usize,
    resource_type: u64,
) -> *mut c_void;

/// A parent domain's `free` callback.
pub type FreeFn = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    pd_context: *mut c_void,
    ptr: *mut c_void,
    resource_type: u64,
);

/// `struct ibv_parent_domain_init_attr` (`ibv_alloc_parent_domain`'s
/// argument).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_parent_domain_init_attr {
    pub pd: *mut ibv_pd,
    pub td: *mut ibv_td,
    pub comp_mask: u32,
    pub alloc: Option<AllocFn>,
    pub free: Option<FreeFn>,
    pub pd_context: *mut c_void,
}

c_layout!(IBV_PD: "struct ibv_pd" = ibv_pd, 16, [context, handle]);
c_layout!(IBV_TD: "struct ibv_td" = ibv_td, 8, [context]);
c_layout!(IBV_TD_INIT_ATTR: "struct ibv_td_init_attr" = ibv_td_init_attr, 4, [comp_mask]);
c_layout!(IBV_PARENT_DOMAIN_INIT_ATTR: "struct ibv_parent_domain_init_attr" =
    ibv_parent_domain_init_attr, 48, [pd, td, comp_mask, alloc, free, pd_context]);
c_layout!(IBV_MW: "struct ibv_mw" = ibv_mw, 32, [context, pd, rkey, handle, r#type]);
c_layout!(IBV_MR: "struct ibv_mr" = ibv_mr, 48,
    [context, pd, addr, length, handle, lkey, rkey]);

/// This module's layouts.
pub const LAYOUTS: &[Layout] = &[
    IBV_PD,
    IBV_MR,
    IBV_MW,
    IBV_TD,
    IBV_TD_INIT_ATTR,
    IBV_PARENT_DOMAIN_INIT_ATTR,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_are_where_programs_read_them() {
        assert_eq!(core::mem::offset_of!(ibv_mr, lkey), 36);
        assert_eq!(core::mem::offset_of!(ibv_mr, rkey), 40);
    }
}
