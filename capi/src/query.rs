//! Device and port queries: `ibv_query_device(_ex)`, `ibv_query_port`, and
//! the ops the context tables hold (`verbs_context.query_device_ex` and
//! `.query_port`, `ibv_context_ops._compat_query_device` and
//! `._compat_query_port`), as libibverbs 44 has them (verbs.c,
//! cmd_device.c).
//!
//! The device and port queries return a positive errno. The GID and
//! P_Key queries are in `gid.rs` (-1 with `errno` for `ibv_query_gid`,
//! `ibv_query_gid_type` and `ibv_query_pkey`, the negative errno for
//! `_ibv_query_gid_table`).

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{
    ffi::c_int,
    mem::{offset_of, size_of},
    ptr,
};

use uverbs::{sys::Errno, DeviceAttr, PortAttr};

use crate::{
    context::Context,
    errno,
    layout::{
        context::ibv_context,
        device::{
            ibv_cq_moderation_caps, ibv_device_attr, ibv_device_attr_ex, ibv_odp_caps,
            ibv_odp_per_transport_caps, ibv_port_attr, ibv_query_device_ex_input, ibv_rss_caps,
            ibv_tm_caps, ibv_values_ex, COMPAT_PORT_ATTR_SIZE,
        },
        AnyFn,
    },
};

/// `int (*)(struct ibv_context *, struct ibv_device_attr *)`.
type QueryDeviceFn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int;
/// `int (*)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *)`.
type CompatQueryPortFn = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr) -> c_int;
/// `verbs_context.query_port`.
type QueryPortFn = unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int;
/// `verbs_context.query_device_ex`.
type QueryDeviceExFn = unsafe extern "C" fn(
    *mut ibv_context,
    *const ibv_query_device_ex_input,
    *mut ibv_device_attr_ex,
    usize,
) -> c_int;

/// `ibv_context_ops._compat_query_device`: the exported `ibv_query_device`,
/// as libibverbs' `set_lib_ops` sets it.
// SAFETY: a function pointer has the same size and ABI whatever its
// signature; programs call the slot with `QueryDeviceFn`'s signature.
pub(crate) const QUERY_DEVICE_COMPAT: AnyFn = Some(unsafe {
    core::mem::transmute::<QueryDeviceFn, unsafe extern "C" fn()>(ibv_query_device)
});
/// `ibv_context_ops._compat_query_port`: the exported `ibv_query_port`, as
/// libibverbs' `set_lib_ops` sets it.
// SAFETY: as for QUERY_DEVICE_COMPAT, with `CompatQueryPortFn`.
pub(crate) const QUERY_PORT_COMPAT: AnyFn = Some(unsafe {
    core::mem::transmute::<CompatQueryPortFn, unsafe extern "C" fn()>(ibv_query_port)
});
/// `verbs_context.query_port`: what the inline `ibv_query_port` calls.
// SAFETY: as for QUERY_DEVICE_COMPAT, with `QueryPortFn`.
pub(crate) const QUERY_PORT: AnyFn =
    Some(unsafe { core::mem::transmute::<QueryPortFn, unsafe extern "C" fn()>(query_port) });
/// `verbs_context.query_device_ex`: what the inline `ibv_query_device_ex` calls.
// SAFETY: as for QUERY_DEVICE_COMPAT, with `QueryDeviceExFn`.
pub(crate) const QUERY_DEVICE_EX: AnyFn = Some(unsafe {
    core::mem::transmute::<QueryDeviceExFn, unsafe extern "C" fn()>(query_device_ex)
});

/// `verbs_context.query_rt_values`: what the inline
/// `ibv_query_rt_values_ex` calls.
// SAFETY: as for QUERY_DEVICE_COMPAT, with `QueryRtValuesFn`.
pub(crate) const QUERY_RT_VALUES: AnyFn = Some(unsafe {
    core::mem::transmute::<QueryRtValuesFn, unsafe extern "C" fn()>(query_rt_values)
});
type QueryRtValuesFn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_values_ex) -> c_int;

/// `IBV_VALUES_MASK_RAW_CLOCK`.
const VALUES_MASK_RAW_CLOCK: u32 = 1;

/// `ibv_query_rt_values_ex`: the device's raw clock (`raw_clock.tv_nsec`,
/// `tv_sec` 0) when asked for; `comp_mask` says what was filled. A
/// positive errno: `EINVAL` for an unknown `comp_mask` bit, `EOPNOTSUPP`
/// where the device has no readable clock (rxe, as rdma-core's), as
/// libmlx5's `mlx5_query_rt_values`.
///
/// # Safety
/// `context` is an open context of this library, `values` NULL or a
/// writable `ibv_values_ex`.
unsafe extern "C" fn query_rt_values(
    context: *mut ibv_context,
    values: *mut ibv_values_ex,
) -> c_int {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::positive(e),
    };
    // SAFETY: the caller's contract.
    let Some(values) = (unsafe { values.as_mut() }) else {
        return errno::positive(Errno::EINVAL);
    };
    if values.comp_mask & !VALUES_MASK_RAW_CLOCK != 0 {
        return errno::positive(Errno::EINVAL);
    }
    let mut filled = 0;
    let mut status = 0;
    if values.comp_mask & VALUES_MASK_RAW_CLOCK != 0 {
        match ctx.uv.query_rt_values() {
            Ok(v) => {
                values.raw_clock.tv_sec = 0;
                values.raw_clock.tv_nsec = v.raw_clock as i64;
                filled |= VALUES_MASK_RAW_CLOCK;
            }
            Err(e) => status = errno::positive(errno::of(&e)),
        }
    }
    values.comp_mask = filled;
    status
}

/// `(offset, size)` of an `ibv_device_attr_ex` field.
macro_rules! span {
    ($field:ident: $ty:ty) => {
        (offset_of!(ibv_device_attr_ex, $field), size_of::<$ty>())
    };
}

/// The extended fields filled when the size the program passes holds them
/// whole (libibverbs' `CAN_COPY` in `ibv_cmd_query_device_any`). The
/// others (`comp_mask`, `tso_caps`, `packet_pacing_caps`,
/// `pci_atomic_caps`) come from no core kernel answer and stay zero, as
/// rdma-core's rxe provider leaves them.
const EXTENDED: [(usize, usize); 12] = [
    span!(odp_caps: ibv_odp_caps),
    span!(completion_timestamp_mask: u64),
    span!(hca_core_clock: u64),
    span!(device_cap_flags_ex: u64),
    span!(rss_caps: ibv_rss_caps),
    span!(max_wq_type_rq: u32),
    span!(raw_packet_caps: u32),
    span!(tm_caps: ibv_tm_caps),
    span!(cq_mod_caps: ibv_cq_moderation_caps),
    span!(max_dm_size: u64),
    span!(xrc_odp_caps: u32),
    span!(phys_port_cnt_ex: u32),
];

/// A `u32` count as C's `int` (the kernel's values fit; saturate otherwise).
fn int(v: u32) -> c_int {
    c_int::try_from(v).unwrap_or(c_int::MAX)
}

/// `ibv_device_attr_ex` of uverbs' answer; `ports` is `phys_port_cnt_ex`.
fn device_attr_ex(a: &DeviceAttr, ports: u32) -> ibv_device_attr_ex {
    // SAFETY: the struct is integers and arrays of integers, for which all
    // zero bytes are valid.
    let mut x: ibv_device_attr_ex = unsafe { core::mem::zeroed() };
    let o = &mut x.orig_attr;
    // snprintf into `char fw_ver[64]`: truncated, NUL-terminated.
    for (d, &b) in o.fw_ver.iter_mut().zip(a.fw_ver.as_bytes().iter().take(63)) {
        *d = b as core::ffi::c_char;
    }
    o.node_guid = a.node_guid.to_be();
    o.sys_image_guid = a.sys_image_guid.to_be();
    o.max_mr_size = a.max_mr_size;
    o.page_size_cap = a.page_size_cap;
    o.vendor_id = a.vendor_id;
    o.vendor_part_id = a.vendor_part_id;
    o.hw_ver = a.hw_ver;
    o.max_qp = int(a.max_qp);
    o.max_qp_wr = int(a.max_qp_wr);
    o.device_cap_flags = a.device_cap_flags.bits();
    o.max_sge = int(a.max_sge);
    o.max_sge_rd = int(a.max_sge_rd);
    o.max_cq = int(a.max_cq);
    o.max_cqe = int(a.max_cqe);
    o.max_mr = int(a.max_mr);
    o.max_pd = int(a.max_pd);
    o.max_qp_rd_atom = int(a.max_qp_rd_atom);
    o.max_ee_rd_atom = int(a.max_ee_rd_atom);
    o.max_res_rd_atom = int(a.max_res_rd_atom);
    o.max_qp_init_rd_atom = int(a.max_qp_init_rd_atom);
    o.max_ee_init_rd_atom = int(a.max_ee_init_rd_atom);
    o.atomic_cap = int(a.atomic_cap);
    o.max_ee = int(a.max_ee);
    o.max_rdd = int(a.max_rdd);
    o.max_mw = int(a.max_mw);
    o.max_raw_ipv6_qp = int(a.max_raw_ipv6_qp);
    o.max_raw_ethy_qp = int(a.max_raw_ethy_qp);
    o.max_mcast_grp = int(a.max_mcast_grp);
    o.max_mcast_qp_attach = int(a.max_mcast_qp_attach);
    o.max_total_mcast_qp_attach = int(a.max_total_mcast_qp_attach);
    o.max_ah = int(a.max_ah);
    o.max_fmr = int(a.max_fmr);
    o.max_map_per_fmr = int(a.max_map_per_fmr);
    o.max_srq = int(a.max_srq);
    o.max_srq_wr = int(a.max_srq_wr);
    o.max_srq_sge = int(a.max_srq_sge);
    o.max_pkeys = a.max_pkeys;
    o.local_ca_ack_delay = a.local_ca_ack_delay;
    o.phys_port_cnt = a.phys_port_cnt;
    x.odp_caps = ibv_odp_caps {
        general_caps: a.odp_caps.general_caps,
        per_transport_caps: ibv_odp_per_transport_caps {
            rc_odp_caps: a.odp_caps.rc_odp_caps,
            uc_odp_caps: a.odp_caps.uc_odp_caps,
            ud_odp_caps: a.odp_caps.ud_odp_caps,
        },
    };
    x.completion_timestamp_mask = a.completion_timestamp_mask;
    x.hca_core_clock = a.hca_core_clock;
    x.device_cap_flags_ex = a.device_cap_flags_ex.bits();
    x.rss_caps.supported_qpts = a.rss_caps.supported_qpts;
    x.rss_caps.max_rwq_indirection_tables = a.rss_caps.max_rwq_indirection_tables;
    x.rss_caps.max_rwq_indirection_table_size = a.rss_caps.max_rwq_indirection_table_size;
    x.max_wq_type_rq = a.max_wq_type_rq;
    x.raw_packet_caps = a.raw_packet_caps;
    x.tm_caps = ibv_tm_caps {
        max_rndv_hdr_size: a.tm_caps.max_rndv_hdr_size,
        max_num_tags: a.tm_caps.max_num_tags,
        flags: a.tm_caps.flags,
        max_ops: a.tm_caps.max_ops,
        max_sge: a.tm_caps.max_sge,
    };
    x.cq_mod_caps = ibv_cq_moderation_caps {
        max_cq_count: a.cq_mod_caps.max_cq_count,
        max_cq_period: a.cq_mod_caps.max_cq_period,
    };
    x.max_dm_size = a.max_dm_size;
    x.xrc_odp_caps = a.xrc_odp_caps;
    // The port count netlink reported, else the device's.
    x.phys_port_cnt_ex = if ports != 0 {
        ports
    } else {
        u32::from(a.phys_port_cnt)
    };
    x
}

/// `query_device_ex` without the C return convention.
///
/// # Safety
/// As [`query_device_ex`].
unsafe fn query_device_into(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let ctx = unsafe { Context::from_c(context) }?;
    // SAFETY: `input` is NULL or a readable struct (the caller's contract).
    if !input.is_null() && unsafe { input.read_unaligned() }.comp_mask != 0 {
        return Err(Errno::EINVAL);
    }
    if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
        return Err(Errno::EINVAL);
    }
    let out = attr.cast::<u8>();
    // SAFETY: `attr` has `attr_size` writable bytes (the caller's contract).
    unsafe { ptr::write_bytes(out, 0, attr_size) };
    let a = ctx.uv.query_device().map_err(|e| errno::of(&e))?;
    let full = device_attr_ex(&a, ctx.uv.device().port_count.unwrap_or(0));
    let src = (&raw const full).cast::<u8>();
    let orig = [(0, size_of::<ibv_device_attr>())];
    for (off, len) in orig.into_iter().chain(EXTENDED) {
        if off + len <= attr_size {
            // SAFETY: `off + len` is inside both `full` and `attr`.
            unsafe { ptr::copy_nonoverlapping(src.add(off), out.add(off), len) };
        }
    }
    Ok(())
}

/// `verbs_context.query_device_ex`: fills the first `attr_size` bytes of
/// `attr` (zero where nothing is known); a positive errno on failure
/// (`EINVAL` for a `comp_mask` in `input` or a size below
/// `ibv_device_attr`'s).
///
/// # Safety
/// `context` is an open context of this library, `input` NULL or
/// readable, `attr` has `attr_size` writable bytes.
unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { query_device_into(context, input, attr, attr_size) } {
        Ok(()) => 0,
        Err(e) => errno::positive(e),
    }
}

/// `ibv_query_device`: the device's attributes; a positive errno on
/// failure.
///
/// # Safety
/// `context` is an open context of this library (or NULL), `device_attr`
/// a writable `struct ibv_device_attr` (or NULL).
#[export_name = "uverbs_ibv_query_device"]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    device_attr: *mut ibv_device_attr,
) -> c_int {
    // SAFETY: the caller's contract; `ibv_device_attr` is the first field
    // of `ibv_device_attr_ex` and only its size is written.
    unsafe {
        query_device_ex(
            context,
            ptr::null(),
            device_attr.cast(),
            size_of::<ibv_device_attr>(),
        )
    }
}

/// `ibv_port_attr` (v44's fields) of uverbs' answer.
fn port_attr(p: &PortAttr) -> ibv_port_attr {
    ibv_port_attr {
        state: c_int::from(p.state.raw()),
        max_mtu: c_int::from(p.max_mtu.0),
        active_mtu: c_int::from(p.active_mtu.0),
        gid_tbl_len: int(p.gid_tbl_len),
        port_cap_flags: p.port_cap_flags.bits(),
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed,
        phys_state: p.phys_state,
        link_layer: match p.link_layer {
            uverbs::LinkLayer::Unspecified => 0,
            uverbs::LinkLayer::InfiniBand => 1,
            uverbs::LinkLayer::Ethernet => 2,
            uverbs::LinkLayer::Other(v) => v,
            _ => 0,
        },
        flags: p.flags,
        port_cap_flags2: p.port_cap_flags2.bits(),
    }
}

/// `query_port` without the C return convention.
///
/// # Safety
/// As [`query_port`].
unsafe fn query_port_into(
    context: *mut ibv_context,
    port_num: u8,
    out: *mut ibv_port_attr,
    len: usize,
) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let ctx = unsafe { Context::from_c(context) }?;
    if out.is_null() {
        return Err(Errno::EINVAL);
    }
    let whole = size_of::<ibv_port_attr>();
    if len >= whole {
        // A size from newer headers: the fields this library does not
        // know (`active_speed_ex`) read as zero.
        // SAFETY: `out` has `len` writable bytes.
        unsafe { ptr::write_bytes(out.cast::<u8>(), 0, len) };
    }
    let attr = port_attr(&ctx.uv.query_port(port_num).map_err(|e| errno::of(&e))?);
    let src = (&raw const attr).cast::<u8>();
    // SAFETY: `len.min(whole)` bytes are inside `attr` and `out`.
    unsafe { ptr::copy_nonoverlapping(src, out.cast::<u8>(), len.min(whole)) };
    Ok(())
}

/// `verbs_context.query_port` (libibverbs' `__lib_query_port`): fills
/// `port_attr_len` bytes, the size the program's `struct ibv_port_attr`
/// has (48 for the oldest, 52 for v44's, 56 for newer rdma-core's); a
/// positive errno on failure.
///
/// # Safety
/// `context` is an open context of this library, `port_attr` has
/// `port_attr_len` writable bytes.
unsafe extern "C" fn query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { query_port_into(context, port_num, port_attr, port_attr_len) } {
        Ok(()) => 0,
        Err(e) => errno::positive(e),
    }
}

/// `ibv_query_port` (IBVERBS_1.1): fills the 48-byte
/// `struct _compat_ibv_port_attr` (no `port_cap_flags2`); a positive
/// errno on failure. Programs built against verbs.h call the
/// `verbs_context` op instead, with their own size.
///
/// # Safety
/// `context` is an open context of this library (or NULL), `port_attr`
/// has 48 writable bytes (or is NULL).
#[export_name = "uverbs_ibv_query_port"]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { query_port(context, port_num, port_attr, COMPAT_PORT_ATTR_SIZE) }
}

/// `ibv_port_state_str`: libibverbs' text for an `enum ibv_port_state`.
///
/// # Safety
/// None: the strings are static.
#[export_name = "uverbs_ibv_port_state_str"]
pub unsafe extern "C" fn ibv_port_state_str(port_state: c_int) -> *const core::ffi::c_char {
    let s: &'static core::ffi::CStr = match port_state {
        0 => c"no state change (NOP)",
        1 => c"down",
        2 => c"init",
        3 => c"armed",
        4 => c"active",
        5 => c"active defer",
        _ => c"unknown",
    };
    s.as_ptr()
}

mod gid;

#[cfg(test)]
mod tests;
