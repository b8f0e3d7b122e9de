//! Opening an mlx5 device and asking it what it has: `mlx5dv_is_supported`,
//! `mlx5dv_open_device`, `mlx5dv_query_device`, `mlx5dv_get_clock_info`,
//! `mlx5dv_set_context_attr`.

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::ffi::c_int;
use std::os::fd::{AsFd, AsRawFd};

use uverbs::{mlx5, sys::Errno};

use crate::context::Context;
use crate::device::{kernel, Device};
use crate::errno;
use crate::layout::{
    context::{ibv_context, ibv_device},
    mlx5::{
        mlx5dv_clock_info, mlx5dv_context, mlx5dv_context_attr, mlx5dv_cqe_comp_caps,
        mlx5dv_crypto_caps, mlx5dv_dci_streams_caps, mlx5dv_sig_caps, mlx5dv_striding_rq_caps,
        mlx5dv_sw_parsing_caps,
    },
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
    let vctx = crate::ops::verbs_context(d.as_c(), cmd_fd, async_fd, uv.num_comp_vectors());
    Context::boxed(uv, vctx)
}

/// The mlx5 view of a program's context, or libmlx5's answer for one that
/// is not mlx5's (`EOPNOTSUPP`; `EINVAL` for NULL or a foreign pointer).
///
/// # Safety
/// `context` is NULL or an open context of this library.
pub(super) unsafe fn mlx5_of<'a>(
    context: *mut ibv_context,
) -> Result<mlx5::Mlx5Context<'a>, Errno> {
    // SAFETY: the caller's contract.
    let ctx = unsafe { Context::from_c(context) }?;
    ctx.uv.mlx5().map_err(|_| Errno::EOPNOTSUPP)
}

/// `mlx5dv_context.comp_mask` bits (`enum mlx5dv_context_comp_mask`).
mod mask {
    pub const CQE_COMPRESION: u64 = 1 << 0;
    pub const SWP: u64 = 1 << 1;
    pub const STRIDING_RQ: u64 = 1 << 2;
    pub const TUNNEL_OFFLOADS: u64 = 1 << 3;
    pub const DYN_BFREGS: u64 = 1 << 4;
    pub const CLOCK_INFO_UPDATE: u64 = 1 << 5;
    pub const FLOW_ACTION_FLAGS: u64 = 1 << 6;
    pub const DC_ODP_CAPS: u64 = 1 << 7;
    pub const HCA_CORE_CLOCK: u64 = 1 << 8;
    pub const NUM_LAG_PORTS: u64 = 1 << 9;
    pub const SIGNATURE_OFFLOAD: u64 = 1 << 10;
    pub const DCI_STREAMS: u64 = 1 << 11;
    pub const WR_MEMCPY_LENGTH: u64 = 1 << 12;
    pub const CRYPTO_OFFLOAD: u64 = 1 << 13;
}

/// `mlx5dv_query_device`: `version` and `flags` always; each group the
/// program's `comp_mask` asks for and the device has, its bit kept in
/// `comp_mask` (libmlx5's `_mlx5dv_query_device`: the clock update
/// period, the core clock and the LAG ports only when present). A positive
/// errno on failure (`EOPNOTSUPP` for a context that is not mlx5's).
///
/// # Safety
/// `context` is an open context of this library, `attrs` a writable
/// `mlx5dv_context` whose `comp_mask` the program set.
#[export_name = "uverbs_mlx5dv_query_device"]
pub unsafe extern "C" fn mlx5dv_query_device(
    context: *mut ibv_context,
    attrs: *mut mlx5dv_context,
) -> c_int {
    // SAFETY: the caller's contract.
    let m = match unsafe { mlx5_of(context) } {
        Ok(m) => m,
        Err(e) => return errno::positive(e),
    };
    if attrs.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    let a = match m.query_device() {
        Ok(a) => a,
        Err(e) => return errno::positive(errno::of(&e)),
    };
    // SAFETY: the caller's contract; each field is written through the
    // raw pointer (the struct may be partly uninitialised).
    let want = unsafe { (*attrs).comp_mask };
    let mut got = 0;
    // SAFETY: as above.
    unsafe {
        (*attrs).version = 0;
        (*attrs).flags = a.flags.bits();
        if want & mask::CQE_COMPRESION != 0 {
            (*attrs).cqe_comp_caps = mlx5dv_cqe_comp_caps {
                max_num: a.cqe_comp_caps.max_num,
                supported_format: a.cqe_comp_caps.supported_format,
            };
            got |= mask::CQE_COMPRESION;
        }
        if want & mask::SWP != 0 {
            (*attrs).sw_parsing_caps = mlx5dv_sw_parsing_caps {
                sw_parsing_offloads: a.sw_parsing_caps.sw_parsing_offloads,
                supported_qpts: a.sw_parsing_caps.supported_qpts,
            };
            got |= mask::SWP;
        }
        if want & mask::STRIDING_RQ != 0 {
            let r = a.striding_rq_caps;
            (*attrs).striding_rq_caps = mlx5dv_striding_rq_caps {
                min_single_stride_log_num_of_bytes: r.min_single_stride_log_num_of_bytes,
                max_single_stride_log_num_of_bytes: r.max_single_stride_log_num_of_bytes,
                min_single_wqe_log_num_of_strides: r.min_single_wqe_log_num_of_strides,
                max_single_wqe_log_num_of_strides: r.max_single_wqe_log_num_of_strides,
                supported_qpts: r.supported_qpts,
            };
            got |= mask::STRIDING_RQ;
        }
        if want & mask::TUNNEL_OFFLOADS != 0 {
            (*attrs).tunnel_offloads_caps = a.tunnel_offloads_caps;
            got |= mask::TUNNEL_OFFLOADS;
        }
        if want & mask::DCI_STREAMS != 0 {
            (*attrs).dci_streams_caps = mlx5dv_dci_streams_caps {
                max_log_num_concurent: a.dci_streams_caps.max_log_num_concurent,
                max_log_num_errored: a.dci_streams_caps.max_log_num_errored,
            };
            got |= mask::DCI_STREAMS;
        }
        if want & mask::DYN_BFREGS != 0 {
            (*attrs).max_dynamic_bfregs = a.max_dynamic_bfregs;
            got |= mask::DYN_BFREGS;
        }
        if want & mask::CLOCK_INFO_UPDATE != 0 {
            if let Some(ns) = a.max_clock_info_update_nsec {
                (*attrs).max_clock_info_update_nsec = ns;
                got |= mask::CLOCK_INFO_UPDATE;
            }
        }
        if want & mask::FLOW_ACTION_FLAGS != 0 {
            (*attrs).flow_action_flags = a.flow_action_flags;
            got |= mask::FLOW_ACTION_FLAGS;
        }
        if want & mask::DC_ODP_CAPS != 0 {
            (*attrs).dc_odp_caps = a.dc_odp_caps;
            got |= mask::DC_ODP_CAPS;
        }
        if want & mask::HCA_CORE_CLOCK != 0 {
            if let Some(p) = m.core_clock_ptr() {
                (*attrs).hca_core_clock = p.cast_mut().cast();
                got |= mask::HCA_CORE_CLOCK;
            }
        }
        if want & mask::NUM_LAG_PORTS != 0 {
            if let Some(n) = a.num_lag_ports {
                (*attrs).num_lag_ports = n;
                got |= mask::NUM_LAG_PORTS;
            }
        }
        if want & mask::SIGNATURE_OFFLOAD != 0 {
            (*attrs).sig_caps = mlx5dv_sig_caps {
                block_size: a.sig_caps.block_size,
                block_prot: a.sig_caps.block_prot,
                t10dif_bg: a.sig_caps.t10dif_bg,
                crc_type: a.sig_caps.crc_type,
            };
            got |= mask::SIGNATURE_OFFLOAD;
        }
        if want & mask::WR_MEMCPY_LENGTH != 0 {
            (*attrs).max_wr_memcpy_length = a.max_wr_memcpy_length as usize;
            got |= mask::WR_MEMCPY_LENGTH;
        }
        if want & mask::CRYPTO_OFFLOAD != 0 {
            let c = a.crypto_caps;
            (*attrs).crypto_caps = mlx5dv_crypto_caps {
                failed_selftests: c.failed_selftests,
                crypto_engines: c.crypto_engines,
                wrapped_import_method: c.wrapped_import_method,
                log_max_num_deks: c.log_max_num_deks,
                flags: c.flags,
            };
            got |= mask::CRYPTO_OFFLOAD;
        }
        (*attrs).comp_mask = got;
    }
    0
}

/// `mlx5dv_get_clock_info`: a consistent copy of the kernel's clock info
/// page. A positive errno: `EOPNOTSUPP` on a context that is not mlx5's,
/// `EINVAL` without the page, `EBUSY` when the kernel was updating it on
/// each of ten tries (libmlx5's `_mlx5dv_get_clock_info`).
///
/// # Safety
/// `context` is an open context of this library, `clock_info` a writable
/// `mlx5dv_clock_info`.
#[export_name = "uverbs_mlx5dv_get_clock_info"]
pub unsafe extern "C" fn mlx5dv_get_clock_info(
    context: *mut ibv_context,
    clock_info: *mut mlx5dv_clock_info,
) -> c_int {
    // SAFETY: the caller's contract.
    let m = match unsafe { mlx5_of(context) } {
        Ok(m) => m,
        Err(e) => return errno::positive(e),
    };
    if clock_info.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    if m.attr().max_clock_info_update_nsec.is_none() {
        return errno::positive(Errno::EINVAL);
    }
    match m.clock_info() {
        Ok(c) => {
            // SAFETY: the caller's contract.
            unsafe {
                clock_info.write(mlx5dv_clock_info {
                    nsec: c.nsec,
                    last_cycles: c.last_cycles,
                    frac: c.frac,
                    mult: c.mult,
                    shift: c.shift,
                    mask: c.mask,
                })
            };
            0
        }
        Err(e) => errno::positive(errno::of(&e)),
    }
}

super::unsupported::unsupported! {
    positive: [mlx5dv_set_context_attr],
}
