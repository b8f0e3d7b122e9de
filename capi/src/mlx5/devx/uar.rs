//! UARs for DevX objects: `mlx5dv_devx_alloc_uar`, `mlx5dv_devx_free_uar`.
//!
//! What libmlx5 44 returns (`_mlx5dv_devx_alloc_uar`, `verbs.c`):
//! - `MLX5DV_UAR_ALLOC_TYPE_BF` (0): a dedicated BlueFlame register of a
//!   write-combining page (`mlx5_attach_dedicated_uar`): `base_addr` the
//!   mapped page, `reg_addr` the register (`base_addr + 0x800` for the
//!   page's first), `page_id` the page the firmware knows it by,
//!   `mmap_off` where it was mapped on the command fd; `free_uar` gives it
//!   back. libmlx5 hands out a page's two registers one at a time; here
//!   each allocation is a page of its own and its first register, which a
//!   program sees the same way (it rings `reg_addr` and names `page_id`).
//! - `MLX5DV_UAR_ALLOC_TYPE_NC` (1): the context's one non-cached page
//!   (`mlx5_get_singleton_nc_uar`): every call returns the same object,
//!   with `reg_addr` at `base_addr + 0x800`, and `free_uar` does nothing;
//!   it lives as long as the context. Here it is made on first request
//!   (libmlx5 makes it at open: its failure then is `EOPNOTSUPP` at every
//!   call, as a failure here is each time).
//! - any other flag: `EOPNOTSUPP`. rdma-core 44 has no
//!   `MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED` (later releases add it).
//!
//! Kernels without dynamic UARs (`UAR_OBJ_ALLOC`): libmlx5 maps extra
//! write-combining pages for BF and has no NC (`EOPNOTSUPP`); uverbs has
//! neither there, so both are `EOPNOTSUPP`.

use uverbs::{
    mlx5::{DevxUar, UarKind},
    sys::Errno,
};

use super::{devx_of, of};
use crate::{
    errno,
    layout::{context::ibv_context, mlx5::mlx5dv_devx_uar},
};

/// `MLX5DV_UAR_ALLOC_TYPE_BF`, `MLX5DV_UAR_ALLOC_TYPE_NC`.
const TYPE_BF: u32 = 0;
const TYPE_NC: u32 = 1;

/// A DevX UAR: what `mlx5dv_devx_alloc_uar` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Uar {
    /// The C part (`struct mlx5dv_devx_uar *` is this object's address).
    pub c: mlx5dv_devx_uar,
    uar: DevxUar,
    /// The context's non-cached page: `free_uar` leaves it.
    singleton: bool,
}

impl Uar {
    fn new(uar: DevxUar, singleton: bool) -> *mut Uar {
        let base = uar.as_ptr();
        Box::into_raw(Box::new(Uar {
            c: mlx5dv_devx_uar {
                reg_addr: base.wrapping_add(uar.reg_offset()).cast(),
                base_addr: base.cast(),
                page_id: uar.page_id(),
                mmap_off: uar.mmap_offset() as i64,
                comp_mask: 0,
            },
            uar,
            singleton,
        }))
    }
}

/// The context's non-cached UAR, kept with it ([`crate::context::Context::attachment`]).
#[derive(Debug)]
struct NcUar(*mut Uar);

// SAFETY: the pointer is the program's view of a `Uar`, whose Rust state
// is Send + Sync; this library never writes it after making it.
unsafe impl Send for NcUar {}
// SAFETY: as for Send.
unsafe impl Sync for NcUar {}

impl Drop for NcUar {
    fn drop(&mut self) {
        // SAFETY: made by `Uar::new` and given to no one to free
        // (`free_uar` leaves singletons); the context is being closed.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// Allocates a UAR of kind `flags` (see the module documentation); NULL
/// and `errno` on failure.
///
/// # Safety
/// `context` is NULL or an open context of this library.
#[export_name = "uverbs_mlx5dv_devx_alloc_uar"]
pub unsafe extern "C" fn mlx5dv_devx_alloc_uar(
    context: *mut ibv_context,
    flags: u32,
) -> *mut mlx5dv_devx_uar {
    let made = (|| {
        // SAFETY: the caller's contract.
        let (ctx, devx) = unsafe { devx_of(context) }?;
        match flags {
            TYPE_BF => {
                let uar = devx.alloc_uar(UarKind::BlueFlame).map_err(of)?;
                Ok(Uar::new(uar, false))
            }
            TYPE_NC => {
                let nc = ctx.attachment(|| {
                    devx.alloc_uar(UarKind::NonCached)
                        .map(|u| NcUar(Uar::new(u, true)))
                        .map_err(of)
                })?;
                // SAFETY: the attachment lives as long as the context.
                Ok(unsafe { (*nc).0 })
            }
            _ => Err(Errno::EOPNOTSUPP),
        }
    })();
    match made {
        Ok(p) => p.cast(),
        Err(e) => errno::null(e),
    }
}

/// Frees a UAR `mlx5dv_devx_alloc_uar` returned (the context's non-cached
/// one stays with the context).
///
/// # Safety
/// `uar` is NULL or a UAR of this library not yet freed.
#[export_name = "uverbs_mlx5dv_devx_free_uar"]
pub unsafe extern "C" fn mlx5dv_devx_free_uar(uar: *mut mlx5dv_devx_uar) {
    // SAFETY: the caller's contract; `c` is the first field.
    let Some(u) = (unsafe { uar.cast::<Uar>().as_ref() }) else {
        return;
    };
    if u.singleton {
        return;
    }
    // SAFETY: made by `Uar::new` with `Box::into_raw`; the program gives
    // it up with this call.
    drop(unsafe { Box::from_raw(uar.cast::<Uar>()) });
}
