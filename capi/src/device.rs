//! TEMP(wt-qp): a minimal device list, open/close and the port/GID queries
//! the pingpongs import, so wt-qp's QPs run in the guest before wt-dev's
//! module lands; the merge takes wt-dev's module instead.

#![allow(unsafe_code)]

use core::{
    ffi::{c_char, c_int},
    ptr::null_mut,
};
use std::{
    ffi::CString,
    os::fd::{AsFd, AsRawFd},
    sync::OnceLock,
};

use uverbs::{sys::Errno, DeviceInfo};

use crate::{
    ctx::Context,
    errno,
    layout::{
        context::{_ibv_device_ops, ibv_context, ibv_device},
        device::ibv_gid,
    },
};

/// A device for the process's lifetime, as libibverbs keeps them.
#[repr(C)]
struct Dev {
    c: ibv_device,
    info: DeviceInfo,
}

fn devices() -> &'static [usize] {
    static LIST: OnceLock<Vec<usize>> = OnceLock::new();
    LIST.get_or_init(|| {
        let infos = uverbs::devices().unwrap_or_default();
        infos
            .into_iter()
            .map(|info| {
                let mut c = ibv_device {
                    _ops: _ibv_device_ops {
                        _dummy1: None,
                        _dummy2: None,
                    },
                    node_type: 1,
                    transport_type: 0,
                    name: [0; 64],
                    dev_name: [0; 64],
                    dev_path: [0; 256],
                    ibdev_path: [0; 256],
                };
                for (d, s) in c.name.iter_mut().zip(info.name.bytes().take(63)) {
                    *d = s as c_char;
                }
                for (d, s) in c.dev_name.iter_mut().zip(info.uverbs_name.bytes().take(63)) {
                    *d = s as c_char;
                }
                Box::into_raw(Box::new(Dev { c, info })) as usize
            })
            .collect()
    })
}

/// `ibv_get_device_list` (TEMP).
///
/// # Safety
/// `num_devices` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let list = devices();
    // SAFETY: the caller's contract.
    if let Some(n) = unsafe { num_devices.as_mut() } {
        *n = list.len() as c_int;
    }
    let mut v: Vec<*mut ibv_device> = list.iter().map(|&d| d as *mut ibv_device).collect();
    v.push(null_mut());
    Box::into_raw(v.into_boxed_slice()).cast()
}

/// `ibv_free_device_list` (TEMP).
///
/// # Safety
/// `list` came from `ibv_get_device_list`.
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    if list.is_null() {
        return;
    }
    let n = devices().len() + 1;
    // SAFETY: made by ibv_get_device_list with `n` entries.
    drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(list, n)) });
}

/// `ibv_get_device_name` (TEMP).
///
/// # Safety
/// `device` is a device of this library.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { device.as_ref() } {
        Some(d) => d.name.as_ptr(),
        None => errno::null(Errno::EINVAL),
    }
}

/// `ibv_open_device` (TEMP).
///
/// # Safety
/// `device` is a device of this library.
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    // SAFETY: the caller's contract; `c` is `Dev`'s first field.
    let Some(d) = (unsafe { device.cast::<Dev>().as_ref() }) else {
        return errno::null(Errno::EINVAL);
    };
    match uverbs::Context::open_device(uverbs::sys::linux(), d.info.clone()) {
        Ok(uv) => {
            let async_fd = uv.async_fd().as_raw_fd();
            // SAFETY: only the fd number is kept, for the C struct.
            let cmd_fd = unsafe { uv.cmd_fd() }.as_fd().as_raw_fd();
            Context::create(uv, device, cmd_fd, async_fd)
        }
        Err(e) => errno::null(errno::of(&e)),
    }
}

/// `ibv_close_device` (TEMP).
///
/// # Safety
/// `context` is a live context of this library.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { Context::destroy(context) } {
        Ok(()) => 0,
        Err(e) => errno::minus_one(e),
    }
}

/// `struct ibv_port_attr` (v44, 52 bytes).
#[repr(C)]
struct PortAttr {
    state: c_int,
    max_mtu: c_int,
    active_mtu: c_int,
    gid_tbl_len: c_int,
    port_cap_flags: u32,
    max_msg_sz: u32,
    bad_pkey_cntr: u32,
    qkey_viol_cntr: u32,
    pkey_tbl_len: u16,
    lid: u16,
    sm_lid: u16,
    lmc: u8,
    max_vl_num: u8,
    sm_sl: u8,
    subnet_timeout: u8,
    init_type_reply: u8,
    active_width: u8,
    active_speed: u8,
    phys_state: u8,
    link_layer: u8,
    flags: u8,
    port_cap_flags2: u16,
}

/// `ibv_query_port` (TEMP; the `query_port` op stays NULL, so the inline
/// calls this).
///
/// # Safety
/// `context` live, `attr` writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    attr: *mut c_char,
) -> c_int {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::positive(e),
    };
    let p = match ctx.uv.query_port(port_num) {
        Ok(p) => p,
        Err(e) => return errno::positive(errno::of(&e)),
    };
    let out = PortAttr {
        state: c_int::from(p.state.raw()),
        max_mtu: c_int::from(p.max_mtu.0),
        active_mtu: c_int::from(p.active_mtu.0),
        gid_tbl_len: p.gid_tbl_len as c_int,
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
            uverbs::LinkLayer::InfiniBand => 1,
            uverbs::LinkLayer::Ethernet => 2,
            uverbs::LinkLayer::Other(v) => v,
            _ => 0,
        },
        flags: p.flags,
        port_cap_flags2: p.port_cap_flags2.bits(),
    };
    // SAFETY: the caller's contract: room for the v44 struct.
    unsafe { attr.cast::<PortAttr>().write_unaligned(out) };
    0
}

/// `ibv_query_gid` (TEMP): 0, or -1.
///
/// # Safety
/// `context` live, `gid` writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    // SAFETY: the caller's contract.
    let ctx = match unsafe { Context::from_c(context) } {
        Ok(c) => c,
        Err(e) => return errno::minus_one(e),
    };
    let Ok(i) = u32::try_from(index) else {
        return errno::minus_one(Errno::EINVAL);
    };
    match ctx.uv.query_gid(port_num, i) {
        Ok(g) => {
            let raw = g.map(|e| e.gid.0).unwrap_or([0; 16]);
            // SAFETY: the caller's contract.
            unsafe { gid.write(ibv_gid { raw }) };
            0
        }
        Err(e) => errno::minus_one(errno::of(&e)),
    }
}

/// `ibv_query_device` (TEMP: not implemented here).
///
/// # Safety
/// None needed.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(_c: *mut ibv_context, _a: *mut c_char) -> c_int {
    errno::positive(Errno::EOPNOTSUPP)
}

/// `ibv_wc_status_str` (TEMP).
#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        (0..=22u32)
            .map(|s| CString::new(uverbs::WcStatus(s).as_str()).unwrap_or_default())
            .collect()
    });
    let i = usize::try_from(status).unwrap_or(22).min(22);
    names[i].as_ptr()
}
