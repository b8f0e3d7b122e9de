//! Devices: ibv_get_device_list, ibv_open_device and the device's sysfs files.
//!
//! TEMP(wt-obj): a minimal stand-in (list, name, open, close) so that the
//! object tests (capi/tests/c/objects.c) can open rxe0 before wt-dev's
//! module exists; the coordinator drops this file for wt-dev's.

#![allow(unsafe_code)]

use core::{
    ffi::{c_char, c_int},
    ptr::null_mut,
};
use std::os::fd::AsRawFd;

use uverbs::sys::Errno;

use crate::{
    ctx::Context,
    errno,
    layout::context::{_ibv_device_ops, ibv_context, ibv_device, IBV_SYSFS_NAME_MAX},
};

/// TEMP(wt-obj): one `ibv_device` per uverbs device, kept for the process.
#[repr(C)]
struct Device {
    c: ibv_device,
    info: uverbs::DeviceInfo,
}

fn c_name<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (o, b) in out.iter_mut().zip(s.bytes().take(N - 1)) {
        *o = b as c_char;
    }
    out
}

/// TEMP(wt-obj): the device list; NULL and `errno` on failure.
///
/// # Safety
/// `num` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    if !num.is_null() {
        // SAFETY: the caller's contract.
        unsafe { num.write(0) };
    }
    let list = match uverbs::devices() {
        Ok(l) => l,
        Err(e) => return errno::null(errno::of(&e)),
    };
    let mut out: Vec<*mut ibv_device> = list
        .into_iter()
        .map(|info| {
            let dev = Box::new(Device {
                c: ibv_device {
                    _ops: _ibv_device_ops {
                        _dummy1: None,
                        _dummy2: None,
                    },
                    node_type: 1,
                    transport_type: 0,
                    name: c_name::<IBV_SYSFS_NAME_MAX>(&info.name),
                    dev_name: c_name::<IBV_SYSFS_NAME_MAX>(&info.uverbs_name),
                    dev_path: c_name(""),
                    ibdev_path: c_name(""),
                },
                info,
            });
            Box::into_raw(dev).cast::<ibv_device>()
        })
        .collect();
    if !num.is_null() {
        // SAFETY: the caller's contract.
        unsafe { num.write(c_int::try_from(out.len()).unwrap_or(c_int::MAX)) };
    }
    out.push(null_mut());
    Box::into_raw(out.into_boxed_slice()).cast()
}

/// TEMP(wt-obj): frees the list (the devices stay, as in libibverbs).
///
/// # Safety
/// `list` came from [`ibv_get_device_list`].
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    if list.is_null() {
        return;
    }
    let mut n = 0;
    // SAFETY: the list is NULL-terminated.
    while !unsafe { *list.add(n) }.is_null() {
        n += 1;
    }
    // SAFETY: made by `into_boxed_slice` with `n + 1` entries.
    drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(list, n + 1)) });
}

/// TEMP(wt-obj): the device's name.
///
/// # Safety
/// `device` is NULL or from [`ibv_get_device_list`].
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    if device.is_null() {
        errno::set(Errno::EINVAL);
        return core::ptr::null();
    }
    // SAFETY: the caller's contract.
    unsafe { (*device).name.as_ptr() }
}

/// TEMP(wt-obj): opens the device; NULL and `errno` on failure.
///
/// # Safety
/// `device` is NULL or from [`ibv_get_device_list`].
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    if device.is_null() {
        return errno::null(Errno::EINVAL);
    }
    // SAFETY: the caller's contract; `c` is the first field of `Device`.
    let dev = unsafe { &*device.cast::<Device>() };
    match uverbs::Context::open_device(uverbs::sys::linux(), dev.info.clone()) {
        Ok(uv) => {
            let async_fd = uv.async_fd().as_raw_fd();
            Context::create(uv, device, -1, async_fd)
        }
        Err(e) => errno::null(errno::of(&e)),
    }
}

/// TEMP(wt-obj): closes the device.
///
/// # Safety
/// `context` is NULL or open.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { Context::destroy(context) } {
        Ok(()) => 0,
        Err(e) => errno::minus_one(e),
    }
}
