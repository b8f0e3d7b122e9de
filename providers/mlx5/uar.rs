//! UARs ("user access regions"): the device pages a process rings doorbells
//! on, and the blue-flame registers (bfregs) inside them.
//!
//! Facts (rdma-core `providers/mlx5/mlx5.c` `mlx5_init_context`,
//! `mlx5_insert_dyn_uuars`, `need_uuar_lock`, `get_uar_mmap_offset`;
//! `verbs.c` `mlx5_get_qp_uar`, `mlx5_create_qp` (bfreg index and flags);
//! kernel `drivers/infiniband/hw/mlx5/main.c` `mlx5_ib_mmap`, `uar_mmap`,
//! `UAR_OBJ_ALLOC`):
//!
//! - A context whose response has `tot_bfregs == 0` has **dynamic UARs**:
//!   every page comes from `MLX5_IB_METHOD_UAR_OBJ_ALLOC` (type BF or NC)
//!   and is mapped at the offset the kernel returns. Each 4 KiB sub-UAR of a
//!   BF page holds 2 bfregs at `0x800 + k * bf_reg_size`, each with a
//!   BlueFlame buffer of `bf_reg_size / 2`; an NC page's doorbells are at
//!   `0x800 + k * 0x100` and carry no BlueFlame. A QP names its page by id
//!   (`MLX5_QP_FLAG_UAR_PAGE_INDEX`), a CQ too
//!   (`MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX`).
//! - Otherwise the context has `tot_bfregs` **static** bfregs, 2 usable of
//!   every 4 numbers ("gross" numbering, `MLX5_NUM_NON_FP_BFREGS_PER_UAR`),
//!   on pages mapped with `offset = index * page` (command 0, regular).
//!   The kernel picks a QP's bfreg and returns its gross index; bfreg 0 has
//!   no BlueFlame; bfregs above the shared ones are dedicated (no lock).
//! - One NC page per context carries every CQ's arm doorbell at `+0x20`
//!   (`mlx5_set_singleton_nc_uar`); with static UARs it is page 0.
//! - Ringing a UAR the queue was not created with is silently ignored by the
//!   hardware: the page a QP rings is always the one its create named.
//!
//! Stores to a UAR are single 64-bit atomic stores (a plain `mov` on x86_64,
//! `str` on aarch64, as rdma-core's `mmio_write64_be`), never a `memcpy`:
//! write-combining would otherwise split or merge them.
//!
//! Three files, by concern: this one, the pages (mapping the static ones,
//! allocating and mapping dynamic ones, the single 64-bit store) and the
//! context's UARs as `mlx5_init_context` sets them up; `uar/bfreg.rs`,
//! ringing a bfreg (the doorbell store, BlueFlame copies, the halves and
//! the shared bfregs' lock); `uar/assign.rs`, which bfreg a QP or thread
//! domain rings (dedicated, shared round robin, the NC doorbell, or the
//! static one the kernel chose).
#![allow(unsafe_code)]

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, Mutex,
};

use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    providers::Device,
    sys::{Errno, Mapping, Protection},
};

mod assign;
mod bfreg;

pub(crate) use bfreg::{Bfreg, Ring};

/// The 4 KiB unit the device's UARs come in (`MLX5_ADAPTER_PAGE_SIZE`).
pub(crate) const ADAPTER_PAGE: usize = 4096;
/// Where the bfregs of a sub-UAR start (`MLX5_BF_OFFSET`).
pub(crate) const BF_OFFSET: usize = 0x800;
/// The CQ arm doorbell's offset in a UAR (`MLX5_CQ_DOORBELL`).
pub(crate) const CQ_DOORBELL: usize = 0x20;
/// Usable bfregs per 4 KiB UAR (`MLX5_NUM_NON_FP_BFREGS_PER_UAR`).
const BFREGS_PER_UAR: u32 = 2;
/// Bfreg numbers per UAR in the kernel's "gross" numbering (`NUM_BFREGS_PER_UAR`).
const GROSS_PER_UAR: u32 = 4;
/// Doorbell spacing on an NC page.
const NC_DB_STRIDE: usize = 0x100;
/// The most 4 KiB UARs a page holds. mlx5_ib reports the firmware's
/// `num_of_uars_per_page` when mlx5_core enabled 4 KiB UARs and 1
/// otherwise (`mlx5_ib_alloc_ucontext`); mlx5_core sets `log_uar_page_sz`
/// to `PAGE_SHIFT - 12` and enables `uar_4k` only for pages above 4 KiB
/// (`handle_hca_cap`), so the count is a power of two, 16 on the largest
/// (64 KiB) pages of the hosts mlx5 runs on. A kernel before 4 KiB UARs
/// leaves the field 0, which means 1 (rdma-core's `adjust_uar_info`).
const MAX_UARS_PER_PAGE: u32 = 16;
/// The most static bfregs a context has (`MLX5_MAX_BFREGS`: 256 UARs of
/// 2). mlx5_ib's `calc_total_bfregs` refuses a request above it and rounds
/// the one it takes up to a whole number of pages' bfregs, which divides
/// it; so static pages are numbered below 256, inside the 8 bits the mmap
/// offset gives the index ([`map_static`]).
const MAX_BFREGS: u32 = 512;
/// Dedicated (lock-free) bfregs a context hands out before sharing
/// (rdma-core's default `MLX5_NUM_LOW_LAT_UUARS`).
pub(crate) const DEDICATED_BFREGS: usize = 4;
/// Shared bfregs QPs are spread over once the dedicated ones are taken
/// (rdma-core: `tot_uuars - low_lat_uuars` = 16 - 4).
pub(crate) const SHARED_BFREGS: usize = 12;

/// One mapped UAR page (`num_uars_per_page` sub-UARs of 4 KiB).
#[derive(Debug)]
pub(crate) struct UarPage {
    map: Mapping,
    /// The page id the kernel knows it by (the first sub-UAR's index).
    pub(crate) page_id: u32,
    /// The offset it was mapped at on the command fd (`mlx5dv_qp`'s
    /// `uar_mmap_offset`: another process may map it there).
    pub(crate) mmap_offset: u64,
}

impl UarPage {
    /// The page's address in this process (`mlx5dv_init_obj`'s views:
    /// `bf.reg`, `cq_uar`). Only ever written through 64-bit stores.
    pub(crate) fn base(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// Stores `bytes` (the doorbell's bytes in memory order) at `offset` as
    /// one 64-bit store. Offsets are computed by this module; an offset
    /// outside the page is a bug, and the store is dropped rather than made.
    #[inline(always)]
    pub(crate) fn store64(&self, offset: usize, bytes: [u8; 8]) {
        if offset % 8 != 0 || offset + 8 > self.map.len() {
            debug_assert!(false, "UAR store at {offset:#x} outside the page");
            return;
        }
        // SAFETY: the mapping is live for `self`'s lifetime, `offset` is
        // 8-aligned and inside it (checked above; the mapping is page
        // aligned). UAR memory is only ever accessed through atomics, by
        // this library and (in tests) by the device model, so no Rust
        // reference to it exists.
        let reg = unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(offset).cast()) };
        reg.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
    }

    /// The page's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The start of the mapping (for programs that ring it themselves).
    #[cfg_attr(not(feature = "devx"), allow(dead_code))] // used by DevX only
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// An anonymous page standing in for a UAR (unit tests).
    #[cfg(test)]
    pub(crate) fn anonymous(len: usize) -> Self {
        let map = memmap2::MmapOptions::new()
            .len(len)
            .map_anon()
            .map(Mapping::from)
            .expect("anonymous mapping");
        UarPage {
            map,
            page_id: 7,
            mmap_offset: 0,
        }
    }

    /// The 8 bytes at `offset` (unit tests), or `None` outside the page.
    #[cfg(test)]
    pub(crate) fn load64(&self, offset: usize) -> Option<[u8; 8]> {
        if offset % 8 != 0 || offset + 8 > self.map.len() {
            return None;
        }
        // SAFETY: inside the page and aligned, as in `store64`.
        let reg = unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(offset).cast()) };
        Some(reg.load(Ordering::Relaxed).to_ne_bytes())
    }
}

/// The error for a bfreg the context's UAR geometry puts (partly) outside
/// its page.
fn outside_page(reg: usize, buf_size: usize, page: usize) -> Error {
    Error::new(
        "mlx5 UAR",
        ErrorKind::Malformed,
        format!(
            "the context's UAR geometry puts a doorbell register at {reg:#x} with \
             BlueFlame halves of {buf_size} bytes, not 64-byte aligned inside its \
             {page}-byte page"
        ),
    )
}

/// The error for a UAR geometry or page id mlx5_ib never answers with.
fn malformed(what: String) -> Error {
    Error::new("mlx5 UAR", ErrorKind::Malformed, what)
}

/// Which kind of UARs the kernel gives this context.
#[derive(Debug)]
enum Mode {
    /// `UAR_OBJ_ALLOC` pages; BlueFlame pages when write-combining exists.
    Dynamic,
    /// Static pages mapped at open, bfregs chosen by the kernel; each bfreg
    /// is made once, so QPs the kernel puts on the same shared bfreg share
    /// its lock and BlueFlame half.
    Static {
        pages: Vec<Arc<UarPage>>,
        bfregs: Mutex<std::collections::HashMap<u32, Arc<Bfreg>>>,
    },
}

/// The bfregs handed out so far (dynamic mode).
#[derive(Debug, Default)]
struct Pool {
    /// Free dedicated bfregs (returned when their QP goes).
    free_dedicated: Vec<Arc<Bfreg>>,
    /// Dedicated bfregs in use.
    dedicated_used: usize,
    /// Shared bfregs created so far, and the next one to hand out.
    shared: Vec<Arc<Bfreg>>,
    next_shared: usize,
    /// Free bfregs for thread domains (libmlx5's `dyn_uar_bf_list`): the
    /// rest of the pages thread domains were given a bfreg of, and those
    /// given back.
    free_td: Vec<Arc<Bfreg>>,
}

/// A context's UARs: the NC page for CQ arming and the bfregs of QPs.
#[derive(Debug)]
pub(crate) struct Uars {
    mode: Mode,
    /// The page every CQ is created on and armed through.
    pub(crate) cq_page: Arc<UarPage>,
    /// The NC doorbell QPs use when there is no write-combining.
    nc_bfreg: Arc<Bfreg>,
    bf_reg_size: usize,
    /// 4 KiB UARs per page, 1 to [`MAX_UARS_PER_PAGE`].
    uars_per_page: usize,
    pool: Mutex<Pool>,
}

/// The geometry `Uars::open` needs from the context response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UarGeometry {
    pub(crate) tot_bfregs: u32,
    pub(crate) bf_reg_size: u32,
    pub(crate) num_uars_per_page: u32,
}

impl UarGeometry {
    /// The 4 KiB UARs per page, 1 to [`MAX_UARS_PER_PAGE`] (0 is 1), after
    /// checking the numbers against what mlx5_ib answers: `Malformed` for
    /// a count that is not a power of two or above 16, or for more static
    /// bfregs than [`MAX_BFREGS`]. Every page length, page count and
    /// register offset `Uars` computes from them then fits its type.
    fn uars_per_page(&self) -> Result<usize> {
        let n = self.num_uars_per_page.max(1);
        if n > MAX_UARS_PER_PAGE || !n.is_power_of_two() {
            return Err(malformed(format!(
                "the kernel reports {} 4 KiB UARs per page (mlx5_ib reports a power of \
                 two up to {MAX_UARS_PER_PAGE})",
                self.num_uars_per_page
            )));
        }
        if self.tot_bfregs > MAX_BFREGS {
            return Err(malformed(format!(
                "the kernel reports {} static bfregs (mlx5_ib gives at most {MAX_BFREGS})",
                self.tot_bfregs
            )));
        }
        Ok(n as usize)
    }
}

/// Allocates a dynamic UAR (`MLX5_IB_METHOD_UAR_OBJ_ALLOC`) and maps it;
/// returns the page, the UAR object's handle and the mmap offset. The
/// object lives until it is destroyed (`UAR_OBJ_DESTROY`) or the context
/// is closed (the verbs QPs' pages live as long as the context).
pub(crate) fn alloc_dynamic(dev: Device<'_>, nc: bool) -> Result<(UarPage, u32, u64), Error> {
    const OP: &str = "MLX5_IB_METHOD_UAR_OBJ_ALLOC";
    let (mut offset, mut length, mut page_id) = (0u64, 0u32, 0u32);
    let handle = {
        let mut cmd = dev.ioctl_cmd(abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_ALLOC);
        let at = cmd.new_object(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE);
        let kind = if nc {
            abi::MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC
        } else {
            abi::MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF
        };
        cmd.const_in(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, u64::from(kind));
        cmd.output(
            abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET,
            zerocopy::IntoBytes::as_mut_bytes(&mut offset),
        );
        cmd.output(
            abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH,
            zerocopy::IntoBytes::as_mut_bytes(&mut length),
        );
        cmd.output(
            abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID,
            zerocopy::IntoBytes::as_mut_bytes(&mut page_id),
        );
        dev.ioctl(&mut cmd).map_err(|e| Error::sys(OP, e))?;
        cmd.new_handle(at)
    };
    let len = length as usize;
    if len < ADAPTER_PAGE || len % ADAPTER_PAGE != 0 {
        return Err(Error::new(
            OP,
            ErrorKind::Malformed,
            format!("the kernel returned a UAR of {len} bytes"),
        ));
    }
    let map = dev
        .mmap(len, offset, Protection::ReadWrite)
        .map_err(|e| Error::sys("mmap mlx5 UAR", e))?;
    Ok((
        UarPage {
            map,
            page_id,
            mmap_offset: offset,
        },
        handle,
        offset,
    ))
}

/// Maps static UAR page `index` (`MLX5_IB_MMAP_REGULAR_PAGE`).
/// `index` is below 256 and `len` at most 64 KiB ([`UarGeometry::uars_per_page`]);
/// an offset that does not fit is `EOVERFLOW`, never a wrapped one.
fn map_static(dev: Device<'_>, index: u32, len: usize) -> Result<UarPage, Errno> {
    let offset = (u64::from(abi::MLX5_IB_MMAP_REGULAR_PAGE) << 8 | u64::from(index))
        .checked_mul(len as u64)
        .ok_or(Errno::EOVERFLOW)?;
    let map = dev.mmap(len, offset, Protection::ReadWrite)?;
    Ok(UarPage {
        map,
        page_id: index,
        mmap_offset: offset,
    })
}

impl Uars {
    /// Sets up the context's UARs as rdma-core's `mlx5_init_context` does.
    /// The kernel's numbers are checked first
    /// ([`UarGeometry::uars_per_page`]).
    pub(crate) fn open(dev: Device<'_>, g: UarGeometry) -> Result<Self> {
        let uars_per_page = g.uars_per_page()?;
        let page_len = uars_per_page * ADAPTER_PAGE;
        let bf_reg_size = g.bf_reg_size as usize;
        if g.tot_bfregs == 0 {
            // The NC page: every CQ's arm doorbell, and the QPs' doorbell
            // without write-combining. A kernel that refuses NC allocation
            // (it predates the type) gets a BF page, as rdma-core falls back.
            let nc = match alloc_dynamic(dev, true) {
                Ok((p, _, _)) => p,
                Err(e) if e.kernel_errno() == Some(Errno::EOPNOTSUPP) => {
                    alloc_dynamic(dev, false)?.0
                }
                Err(e) => return Err(e),
            };
            let nc = Arc::new(nc);
            let nc_bfreg = Arc::new(
                Bfreg::new(nc.clone(), BF_OFFSET, 0, false, nc.page_id)
                    .ok_or_else(|| outside_page(BF_OFFSET, 0, nc.len()))?,
            );
            return Ok(Uars {
                mode: Mode::Dynamic,
                cq_page: nc,
                nc_bfreg,
                bf_reg_size,
                uars_per_page,
                pool: Mutex::default(),
            });
        }
        // At most 512 / 2 = 256 pages: `tot_bfregs` and `uars_per_page`
        // were checked.
        let count = (g.tot_bfregs as usize / (uars_per_page * BFREGS_PER_UAR as usize)).max(1);
        let mut pages = Vec::with_capacity(count);
        for i in 0..count as u32 {
            let page = map_static(dev, i, page_len).map_err(|e| {
                Error::sys("mmap mlx5 static UAR", e).with_detail(format!("page {i}"))
            })?;
            pages.push(Arc::new(page));
        }
        let cq_page = pages[0].clone();
        let nc_bfreg = Bfreg::new(cq_page.clone(), BF_OFFSET, 0, false, 0)
            .ok_or_else(|| outside_page(BF_OFFSET, 0, cq_page.len()))?;
        Ok(Uars {
            mode: Mode::Static {
                pages,
                bfregs: Mutex::default(),
            },
            cq_page,
            nc_bfreg: Arc::new(nc_bfreg),
            bf_reg_size,
            uars_per_page,
            pool: Mutex::default(),
        })
    }

    /// Whether the kernel chooses bfregs (static UARs).
    pub(crate) fn is_static(&self) -> bool {
        matches!(self.mode, Mode::Static { .. })
    }

    /// The CQ create's UAR page index (`None`: the kernel's default, static).
    pub(crate) fn cq_page_index(&self) -> Option<u16> {
        match self.mode {
            Mode::Dynamic => u16::try_from(self.cq_page.page_id).ok(),
            Mode::Static { .. } => None,
        }
    }

    /// The NC doorbell page's register spacing (doorbells only).
    #[allow(dead_code)]
    pub(crate) fn nc_stride() -> usize {
        NC_DB_STRIDE
    }
}

#[cfg(test)]
mod tests;
