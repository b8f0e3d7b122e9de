//! UARs for DevX objects (`mlx5dv_devx_alloc_uar`): a page of doorbell
//! registers a DevX CQ or QP names by its page id in its PRM context and
//! rings with 64-bit stores.
//!
//! On kernels with dynamic UARs (`MLX5_IB_METHOD_UAR_OBJ_ALLOC`, as the
//! verbs QPs use them, see `../uar.rs`) the page comes from the kernel's
//! UAR object and its page id is the device's UAR index. Kernels without
//! them give DevX users UARs through `MLX5_IB_MMAP_ALLOC_WC` pages and
//! `DEVX_QUERY_UAR`; that path is not implemented here, and
//! [`Devx::alloc_uar`] says so.

use std::{any::Any, sync::Arc};

use super::{
    obj::{invalid, sealed, DevxResource},
    Devx,
};
use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    providers::mlx5::uar::{alloc_dynamic, UarPage, BF_OFFSET},
};

/// The kind of UAR page to allocate (`MLX5DV_UAR_ALLOC_TYPE_*`).
///
/// `MLX5DV_UAR_ALLOC_TYPE_BF`/`_NC` of `mlx5dv_devx_alloc_uar`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UarKind {
    /// Write-combining: BlueFlame copies (`MLX5DV_UAR_ALLOC_TYPE_BF`).
    BlueFlame,
    /// Non-cached: doorbells only (`MLX5DV_UAR_ALLOC_TYPE_NC`).
    NonCached,
}

/// A UAR page for DevX objects (`struct mlx5dv_devx_uar`). Clones share
/// it; it is freed when the last clone and the last object created with it
/// ([`Devx::obj_create_using`]) are gone. An object whose command only
/// names its page id ([`Devx::obj_create`]) does not keep it: the kernel
/// frees a UAR under the objects that ring it, and the device never writes
/// the page.
#[derive(Debug, Clone)]
pub struct DevxUar {
    inner: Arc<UarInner>,
}

#[derive(Debug)]
struct UarInner {
    devx: Devx,
    kind: UarKind,
    page: UarPage,
    handle: u32,
    mmap_offset: u64,
}

impl Devx {
    /// Allocates a UAR page for DevX objects, like `mlx5dv_devx_alloc_uar`.
    #[doc(alias = "mlx5dv_devx_alloc_uar")]
    pub fn alloc_uar(&self, kind: UarKind) -> Result<DevxUar> {
        if !self.dynamic_uars {
            return Err(Error::new(
                "mlx5dv_devx_alloc_uar",
                ErrorKind::UnsupportedProvider,
                "this kernel has no dynamic UARs (MLX5_IB_METHOD_UAR_OBJ_ALLOC); DevX UARs \
                 on such kernels (MLX5_IB_MMAP_ALLOC_WC pages) are not implemented",
            ));
        }
        let (page, handle, mmap_offset) = alloc_dynamic(self.device(), kind == UarKind::NonCached)?;
        Ok(DevxUar {
            inner: Arc::new(UarInner {
                devx: self.clone(),
                kind,
                page,
                handle,
                mmap_offset,
            }),
        })
    }

    /// The device's index of the context's UAR `user_index`
    /// (`MLX5_IB_METHOD_DEVX_QUERY_UAR`).
    pub fn query_uar(&self, user_index: u32) -> Result<u32> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_QUERY_UAR";
        let dev = self.device();
        let mut idx = 0u32;
        let mut cmd = dev.ioctl_cmd(abi::MLX5_IB_OBJECT_DEVX, abi::MLX5_IB_METHOD_DEVX_QUERY_UAR);
        cmd.input_u32(abi::MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX, user_index);
        cmd.output(
            abi::MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX,
            zerocopy::IntoBytes::as_mut_bytes(&mut idx),
        );
        dev.ioctl(&mut cmd).map_err(|e| Error::sys(OP, e))?;
        drop(cmd);
        Ok(idx)
    }

    /// The EQ a completion vector's events go to, for a DevX CQ's context
    /// (`MLX5_IB_METHOD_DEVX_QUERY_EQN`, `mlx5dv_devx_query_eqn`).
    #[doc(alias = "mlx5dv_devx_query_eqn")]
    pub fn query_eqn(&self, vector: u32) -> Result<u32> {
        const OP: &str = "MLX5_IB_METHOD_DEVX_QUERY_EQN";
        let dev = self.device();
        let mut eqn = 0u32;
        let mut cmd = dev.ioctl_cmd(abi::MLX5_IB_OBJECT_DEVX, abi::MLX5_IB_METHOD_DEVX_QUERY_EQN);
        cmd.input_u32(abi::MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC, vector);
        cmd.output(
            abi::MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN,
            zerocopy::IntoBytes::as_mut_bytes(&mut eqn),
        );
        dev.ioctl(&mut cmd).map_err(|e| {
            Error::sys(OP, e).with_detail(format!(
                "completion vector {vector}: the context has {} (Context::num_comp_vectors)",
                self.context().num_comp_vectors()
            ))
        })?;
        drop(cmd);
        Ok(eqn)
    }
}

impl DevxUar {
    /// The page id PRM contexts name it by (`uar_page`).
    pub fn page_id(&self) -> u32 {
        self.inner.page.page_id
    }

    /// The offset the page was mapped at on the command fd.
    pub fn mmap_offset(&self) -> u64 {
        self.inner.mmap_offset
    }

    /// The kind of page it is.
    pub fn kind(&self) -> UarKind {
        self.inner.kind
    }

    /// The mapped page (`mlx5dv_devx_uar.base_addr`), for programs that
    /// ring their doorbells themselves (C programs through
    /// `mlx5dv_devx_alloc_uar`). Valid while this UAR (a clone, or an
    /// object created with it) is alive; write it only with single
    /// aligned 64-bit (or 32-bit) stores, never through references.
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.page.as_ptr()
    }

    /// The offset of the page's first doorbell register
    /// (`mlx5dv_devx_uar.reg_addr - base_addr`): the first BlueFlame
    /// register of a BlueFlame page, the first doorbell of a non-cached
    /// one, both at `0x800` (`MLX5_BF_OFFSET`, rdma-core's
    /// `mlx5_insert_dyn_uuars` and `mlx5_set_singleton_nc_uar`).
    pub fn reg_offset(&self) -> usize {
        BF_OFFSET
    }

    /// The page's length in bytes.
    pub fn len(&self) -> usize {
        self.inner.page.len()
    }

    /// Whether the page is empty (never).
    pub fn is_empty(&self) -> bool {
        self.inner.page.len() == 0
    }

    /// Rings a doorbell: one 64-bit store of `bytes` (in the device's
    /// byte order, as `mmio_write64_be` writes them) at `offset` of the page.
    /// Ordering against the doorbell record and the WQEs is the caller's,
    /// with [`crate::barrier`].
    pub fn write64(&self, offset: usize, bytes: [u8; 8]) -> Result<()> {
        if offset % 8 != 0 || offset.checked_add(8).is_none_or(|end| end > self.len()) {
            return Err(invalid(
                "DevX UAR doorbell",
                format!(
                    "offset {offset:#x} is not an 8-byte-aligned register of the {}-byte page",
                    self.len()
                ),
            ));
        }
        self.inner.page.store64(offset, bytes);
        Ok(())
    }
}

impl sealed::Sealed for DevxUar {}

impl DevxResource for DevxUar {
    fn keep_alive(&self) -> Arc<dyn Any + Send + Sync> {
        self.inner.clone()
    }
}

impl Drop for UarInner {
    fn drop(&mut self) {
        let dev = self.devx.device();
        let mut cmd = dev.ioctl_cmd(abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_DESTROY);
        cmd.object(abi::MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, self.handle);
        // The kernel never refuses it, objects on the page or not (`main.c`
        // `mmap_obj_cleanup` returns 0; the firmware's DEALLOC_UAR waits
        // for the page's last mapping, `mlx5_ib_mmap_free`, its answer
        // ignored): only a removed device fails it, and then the kernel
        // has freed it already. The page is the CPU's doorbell registers,
        // which the device never writes, so nothing is at stake once the
        // mapping below goes.
        let _ = dev.ioctl(&mut cmd);
    }
}
