//! Opening an mlx5 device and asking it what it has: `mlx5dv_is_supported`,
//! `mlx5dv_open_device`, `mlx5dv_query_device`, `mlx5dv_get_clock_info`,
//! `mlx5dv_set_context_attr`.

#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd};

use uverbs::{mlx5, sys::Errno};

use crate::ctx::Context;
use crate::device::{kernel, Device};
use crate::errno;
use crate::layout::{
    context::{ibv_context, ibv_device},
    mlx5::mlx5dv_context_attr,
};

/// `MLX5DV_CONTEXT_FLAGS_DEVX`.
const CONTEXT_FLAGS_DEVX: u32 = 1;

/// `mlx5dv_is_supported`: whether `device` is one the mlx5 provider drives
/// (false for anything else, NULL and foreign pointers included).
///
/// # Safety
/// None beyond C's: the pointer is checked against the device list.
#[export_name = "uverbs_mlx5dv_is_supported"]
pub unsafe extern "C" fn mlx5dv_is_supported(device: *mut ibv_device) -> bool {
    Device::from_c(device).is_ok_and(|d| mlx5::is_supported(&d.info))
}

/// `mlx5dv_open_device`: `ibv_open_device` with mlx5 attributes. With
/// `MLX5DV_CONTEXT_FLAGS_DEVX` the context has a DevX user context or the
/// open fails with the kernel's answer; without it DevX is asked for and
/// dropped if refused, as `ibv_open_device` does. NULL and `errno`:
/// `EOPNOTSUPP` for a device of another provider, `EINVAL` for a
/// `comp_mask` or an unknown flag (libmlx5's `mlx5_alloc_context`).
///
/// # Safety
/// `attr` is NULL or points to a readable `mlx5dv_context_attr`.
#[export_name = "uverbs_mlx5dv_open_device"]
pub unsafe extern "C" fn mlx5dv_open_device(
    device: *mut ibv_device,
    attr: *mut mlx5dv_context_attr,
) -> *mut ibv_context {
    let d = match Device::from_c(device) {
        Ok(d) => d,
        Err(e) => return errno::null(e),
    };
    if !mlx5::is_supported(&d.info) {
        return errno::null(Errno::EOPNOTSUPP);
    }
    // SAFETY: the caller's contract.
    let attr = unsafe { attr.as_ref() }.copied().unwrap_or_default();
    if attr.comp_mask != 0 || attr.flags & !CONTEXT_FLAGS_DEVX != 0 {
        return errno::null(Errno::EINVAL);
    }
    let flags = if attr.flags & CONTEXT_FLAGS_DEVX != 0 {
        mlx5::OpenFlags::DEVX
    } else {
        mlx5::OpenFlags::empty()
    };
    let uv = match mlx5::open_device(kernel(), d.info.clone(), flags) {
        Ok(uv) => uv,
        Err(e) => return errno::null(errno::of(&e)),
    };
    // SAFETY: only the fd's number is read, as in `ibv_open_device`.
    let cmd_fd = unsafe { uv.cmd_fd() }.as_raw_fd();
    let async_fd = uv.async_fd().as_fd().as_raw_fd();
    Context::create(uv, d.as_c(), cmd_fd, async_fd)
}

super::unsupported::unsupported! {
    positive: [mlx5dv_query_device, mlx5dv_get_clock_info, mlx5dv_set_context_attr],
}
