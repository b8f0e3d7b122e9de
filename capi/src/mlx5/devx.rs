//! The DevX family of `mlx5dv.h` over `uverbs::mlx5`'s DevX API.
//!
//! - `devx/obj.rs`: objects (`mlx5dv_devx_obj_create`, `_query`,
//!   `_modify`, `_destroy`, `_query_async`), the general command, the
//!   queries and modifies of verbs QPs, CQs and SRQs, `_query_eqn`;
//! - `devx/umem.rs`: `mlx5dv_devx_umem_reg`, `_reg_ex`, `_dereg`;
//! - `devx/uar.rs`: `mlx5dv_devx_alloc_uar`, `_free_uar`;
//! - `devx/event.rs`: command completion fds (`_create_cmd_comp`,
//!   `_destroy_cmd_comp`, `_get_async_cmd_comp`) and event channels
//!   (`_create_event_channel`, `_destroy_event_channel`,
//!   `_subscribe_devx_event`, `_subscribe_devx_event_fd`, `_get_event`).
//!
//! libmlx5 (`providers/mlx5/verbs.c`) sends each of them to the kernel as
//! it comes, whether or not the context has a DevX user context: the
//! kernel answers (`EINVAL` for what needs the uid). So do these, through
//! [`Mlx5Context::devx_any`](uverbs::mlx5::Mlx5Context::devx_any); on a
//! context of another provider they fail with `EOPNOTSUPP`
//! (`mlx5_get_dv_ops` finds no ops). A function returns as libmlx5's does:
//! a pointer or NULL and `errno`, `0` or the positive errno (set in
//! `errno` too), or for `mlx5dv_devx_get_event` the bytes read or -1 and
//! `errno`. The errno of a failure is the kernel's, or the one the kernel
//! would give for what uverbs checks first (short mailboxes: `EINVAL`).
//!
//! The WQ and RWQ indirection table forms stay unsupported
//! (`unsupported.rs`): uverbs makes no WQs.

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::ffi::c_void;

use uverbs::{mlx5::Devx, sys::Errno};

use crate::{context::Context, errno, layout::context::ibv_context};

mod event;
mod obj;
mod uar;
mod umem;

#[cfg(test)]
mod tests;

/// The C context behind `context` and its DevX functions: `EOPNOTSUPP`
/// for a device of another provider, as libmlx5 answers.
///
/// # Safety
/// `context` is NULL or an open context of this library.
unsafe fn devx_of<'a>(context: *mut ibv_context) -> Result<(&'a Context, Devx), Errno> {
    // SAFETY: the caller's contract.
    let ctx = unsafe { Context::from_c(context) }?;
    let devx = ctx
        .uv
        .mlx5()
        .and_then(|m| m.devx_any())
        .map_err(|_| Errno::EOPNOTSUPP)?;
    Ok((ctx, devx))
}

/// The `len` bytes at `p` (none when `len` is 0, whatever `p`).
///
/// # Safety
/// `p` points to `len` readable bytes that stay unchanged during the call.
unsafe fn input<'a>(p: *const c_void, len: usize) -> Result<&'a [u8], Errno> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(p.cast(), len) })
}

/// The `len` writable bytes at `p`: the program's output mailbox or read
/// buffer, which only this call (and the kernel, inside it) writes.
///
/// # Safety
/// `p` points to `len` writable bytes no one else uses during the call.
unsafe fn output<'a>(p: *mut c_void, len: usize) -> Result<&'a mut [u8], Errno> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts_mut(p.cast(), len) })
}

/// A command's result in the positive-errno convention.
fn positive(r: Result<(), Errno>) -> core::ffi::c_int {
    match r {
        Ok(()) => 0,
        Err(e) => errno::positive(e),
    }
}

/// The errno of a uverbs error.
fn of(e: uverbs::Error) -> Errno {
    errno::of(&e)
}
