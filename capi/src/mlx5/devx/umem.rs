//! DevX user memory: `mlx5dv_devx_umem_reg`, `mlx5dv_devx_umem_reg_ex`,
//! `mlx5dv_devx_umem_dereg`.
//!
//! libmlx5 (`__mlx5dv_devx_umem_reg_ex`) registers the program's memory as
//! it is: the address, size and access go to the kernel unchecked, with
//! the page-size bitmap (`umem_reg`: every size from 4 KiB, an optional
//! attribute; `umem_reg_ex`: the program's, mandatory) and with
//! `MLX5DV_UMEM_MASK_DMABUF` the dma-buf fd (`-1` is `EBADF` before any
//! call; then `addr` is the offset in the dma-buf). Other `comp_mask` bits
//! are `EOPNOTSUPP`. The memory stays the program's: it keeps it mapped
//! while registered. A deregistration the kernel refuses (the firmware
//! still uses the UMEM for an object) leaves the UMEM registered and its
//! C object as it was.

use core::ffi::{c_int, c_void};
use std::{
    os::fd::BorrowedFd,
    sync::{Mutex, PoisonError},
};

use uverbs::{
    mlx5::{DevxUmem, UmemAccess, UmemIn},
    sys::Errno,
};

use super::{devx_of, of};
use crate::{
    errno,
    layout::{
        context::ibv_context,
        mlx5::{mlx5dv_devx_umem, mlx5dv_devx_umem_in},
    },
};

/// `MLX5DV_UMEM_MASK_DMABUF`.
const UMEM_MASK_DMABUF: u64 = 1;

/// A registered UMEM: what `mlx5dv_devx_umem_reg` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Umem {
    /// The C part (`struct mlx5dv_devx_umem *` is this object's address).
    pub c: mlx5dv_devx_umem,
    umem: Mutex<Option<DevxUmem>>,
}

/// Registers `input` on `context`; the C object's pointer.
///
/// # Safety
/// `context` is NULL or an open context of this library; the memory, as
/// `mlx5dv_devx_umem_reg`'s contract has it, stays mapped while
/// registered.
unsafe fn register(
    context: *mut ibv_context,
    input: &UmemIn<'_>,
) -> Result<*mut mlx5dv_devx_umem, Errno> {
    // SAFETY: the caller's contract.
    let (_, devx) = unsafe { devx_of(context) }?;
    // SAFETY: the program keeps the memory mapped while it is registered
    // and hands the device only what it may write (mlx5dv.h's contract);
    // C reaches it through its own pointers, never Rust references.
    let umem = unsafe { devx.umem_reg_ex(input) }.map_err(of)?;
    let boxed = Box::new(Umem {
        c: mlx5dv_devx_umem { umem_id: umem.id() },
        umem: Mutex::new(Some(umem)),
    });
    Ok(Box::into_raw(boxed).cast())
}

/// Registers `size` bytes at `addr` with IB access flags `access`; NULL
/// and `errno` on failure.
///
/// # Safety
/// `context` is NULL or an open context of this library; `addr..addr +
/// size` stays mapped while registered.
#[export_name = "uverbs_mlx5dv_devx_umem_reg"]
pub unsafe extern "C" fn mlx5dv_devx_umem_reg(
    context: *mut ibv_context,
    addr: *mut c_void,
    size: usize,
    access: u32,
) -> *mut mlx5dv_devx_umem {
    // libmlx5 sends every page size from 4 KiB as an optional attribute,
    // which means what the kernel does without one: no bitmap here, so
    // kernels that predate the attribute take the registration too.
    let input = UmemIn::new(addr.cast(), size, UmemAccess::from_bits_retain(access));
    // SAFETY: the caller's contract.
    unsafe { register(context, &input) }.unwrap_or_else(errno::null)
}

/// Registers what `umem_in` describes (memory with a page-size bitmap, or
/// a range of a dma-buf); NULL and `errno` on failure.
///
/// # Safety
/// `context` is NULL or an open context of this library; `umem_in` is
/// readable; the memory stays mapped while registered.
#[export_name = "uverbs_mlx5dv_devx_umem_reg_ex"]
pub unsafe extern "C" fn mlx5dv_devx_umem_reg_ex(
    context: *mut ibv_context,
    umem_in: *mut mlx5dv_devx_umem_in,
) -> *mut mlx5dv_devx_umem {
    // SAFETY: the caller's contract.
    let Some(u) = (unsafe { umem_in.as_ref() }).copied() else {
        return errno::null(Errno::EINVAL);
    };
    if u.comp_mask & !UMEM_MASK_DMABUF != 0 {
        return errno::null(Errno::EOPNOTSUPP);
    }
    let mut input = UmemIn::new(
        u.addr.cast(),
        u.size,
        UmemAccess::from_bits_retain(u.access),
    )
    .with_page_sizes(u.pgsz_bitmap);
    if u.comp_mask & UMEM_MASK_DMABUF != 0 {
        if u.dmabuf_fd == -1 {
            return errno::null(Errno::EBADF);
        }
        // SAFETY: not -1; the kernel looks the number up itself (a RAW_FD
        // attribute) and answers EBADF for one that is not open; the
        // borrow ends with this call.
        input = input.with_dmabuf(unsafe { BorrowedFd::borrow_raw(u.dmabuf_fd) });
    }
    // SAFETY: the caller's contract.
    unsafe { register(context, &input) }.unwrap_or_else(errno::null)
}

/// Deregisters a UMEM: 0, or the positive errno and the UMEM as it was.
///
/// # Safety
/// `umem` is NULL or a live UMEM of this library.
#[export_name = "uverbs_mlx5dv_devx_umem_dereg"]
pub unsafe extern "C" fn mlx5dv_devx_umem_dereg(umem: *mut mlx5dv_devx_umem) -> c_int {
    // SAFETY: the caller's contract; `c` is the first field.
    let Some(u) = (unsafe { umem.cast::<Umem>().as_ref() }) else {
        return errno::positive(Errno::EINVAL);
    };
    {
        let mut g = u.umem.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(uv) = g.take() else {
            return errno::positive(Errno::EINVAL);
        };
        if let Err(e) = uv.dereg() {
            let (uv, e) = e.into_parts();
            *g = Some(uv);
            return errno::positive(of(e));
        }
    }
    // SAFETY: `umem` came from `Box::into_raw` in `register` and the
    // program gives it up with this call.
    drop(unsafe { Box::from_raw(umem.cast::<Umem>()) });
    0
}
