//! `struct ibv_pd` and `struct ibv_mr` (verbs.h lines 627-671 at v44).
//!
//! Programs read `mr->lkey` and `mr->rkey` for every work request and
//! `mr->addr`/`mr->length` to describe buffers; `pd->context` and
//! `pd->handle` are read by pyverbs and by libraries built on libibverbs
//! (librdmacm). The library writes every field once, before it hands the
//! object out, and never again.

use core::ffi::c_void;

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

c_layout!(IBV_PD: "struct ibv_pd" = ibv_pd, 16, [context, handle]);
c_layout!(IBV_MR: "struct ibv_mr" = ibv_mr, 48,
    [context, pd, addr, length, handle, lkey, rkey]);

/// This module's layouts.
pub const LAYOUTS: &[Layout] = &[IBV_PD, IBV_MR];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_are_where_programs_read_them() {
        assert_eq!(core::mem::offset_of!(ibv_mr, lkey), 36);
        assert_eq!(core::mem::offset_of!(ibv_mr, rkey), 40);
    }
}
