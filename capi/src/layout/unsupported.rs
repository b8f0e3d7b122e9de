//! The structs of the entry points in `crate::unsupported`: `struct ibv_ece`
//! and `struct ibv_dm` (verbs.h), and `struct ibv_sa_path_rec`
//! (`<infiniband/sa.h>`, which librdmacm fills through
//! `ibv_copy_path_rec_from_kern`).

use core::ffi::c_int;

use super::{AnyFn, Layout};
use crate::c_layout;

/// `struct ibv_ece`: the enhanced connection establishment data of a QP
/// (`ibv_query_ece`, `ibv_set_ece`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_ece {
    /// The IEEE OUI of the provider's vendor.
    pub vendor_id: u32,
    /// Provider-specific options.
    pub options: u32,
    pub comp_mask: u32,
}

/// `struct ibv_dm`: device memory (`ibv_alloc_dm`, `ibv_import_dm`).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_dm {
    pub context: *mut super::context::ibv_context,
    pub memcpy_to_dm: AnyFn,
    pub memcpy_from_dm: AnyFn,
    pub comp_mask: u32,
    pub handle: u32,
}

/// `struct ibv_sa_path_rec`: a path record as librdmacm hands it to
/// programs (`rdma_cm_id.route.path_rec`). The multi-byte fields marked
/// `__be` in sa.h are big-endian. It is 8-byte aligned: its GIDs are
/// `union ibv_gid`, whose `__be64`s align it; here they are the unions'
/// 16 raw bytes (`raw`), the only member this library writes.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_sa_path_rec {
    /// `union ibv_gid dgid`, its `raw` bytes.
    pub dgid: [u8; 16],
    /// `union ibv_gid sgid`, its `raw` bytes.
    pub sgid: [u8; 16],
    /// `__be16`.
    pub dlid: u16,
    /// `__be16`.
    pub slid: u16,
    pub raw_traffic: c_int,
    /// `__be32`.
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    /// `__be16`.
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

c_layout!(IBV_ECE: "struct ibv_ece" = ibv_ece, 12, [vendor_id, options, comp_mask]);
c_layout!(IBV_DM: "struct ibv_dm" = ibv_dm, 32,
    [context, memcpy_to_dm, memcpy_from_dm, comp_mask, handle]);
c_layout!(IBV_SA_PATH_REC: "struct ibv_sa_path_rec" = ibv_sa_path_rec, 64,
    [dgid, sgid, dlid, slid, raw_traffic, flow_label, hop_limit, traffic_class, reversible,
     numb_path, pkey, sl, mtu_selector, mtu, rate_selector, rate, packet_life_time_selector,
     packet_life_time, preference]);

/// This module's layouts (the probe includes `<infiniband/sa.h>` for the
/// path record).
pub const LAYOUTS: &[Layout] = &[IBV_ECE, IBV_DM, IBV_SA_PATH_REC];
