//! TEMP(wt-qp): the part of wt-dev's layout/device.rs that wt-qp's layouts
//! need (`union ibv_gid`); the merge takes wt-dev's file instead.

#![allow(unsafe_code)]

use super::Layout;
use crate::c_layout;

/// `union ibv_gid`'s `global` view.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_gid_global {
    /// `__be64`.
    pub subnet_prefix: u64,
    /// `__be64`.
    pub interface_id: u64,
}

/// `union ibv_gid`: 16 bytes, 8-byte aligned (its `__be64` members).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

impl core::fmt::Debug for ibv_gid {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // SAFETY: every bit pattern is a valid `[u8; 16]`.
        let raw = unsafe { self.raw };
        write!(f, "ibv_gid {{ raw: {raw:02x?} }}")
    }
}

c_layout!(IBV_GID: "union ibv_gid" = ibv_gid, 16, [raw, global]);

/// This module's layouts.
pub const LAYOUTS: &[Layout] = &[IBV_GID];
