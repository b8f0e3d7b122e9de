//! TEMP(wt-qp): wt-obj's `struct ibv_pd` and `struct ibv_mr`, as far as
//! wt-qp needs them to build; the merge takes wt-obj's file instead.

use core::ffi::c_void;

use super::{context::ibv_context, Layout};
use crate::c_layout;

/// `struct ibv_pd`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

c_layout!(IBV_PD: "struct ibv_pd" = ibv_pd, 16, [context, handle]);
c_layout!(IBV_MR: "struct ibv_mr" = ibv_mr, 48, [context, pd, addr, length, handle, lkey, rkey]);

/// This module's layouts.
pub const LAYOUTS: &[Layout] = &[IBV_PD, IBV_MR];
