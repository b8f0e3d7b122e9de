//! mlx5_ib's UAR bookkeeping for a user context: static bfregs and their
//! pages, dynamic UAR objects, and the mmap offsets that name them.
//!
//! Facts (Linux 6.1 `drivers/infiniband/hw/mlx5/main.c`):
//! - `mlx5_ib_alloc_ucontext`: with `MLX5_LIB_CAP_DYN_UAR` no static UAR is
//!   made (`tot_bfregs` 0, `num_dyn_bfregs` 0). Otherwise `calc_total_bfregs`
//!   aligns the request to `2 * uars_per_sys_page` (0 is EINVAL, more than
//!   `MLX5_MAX_BFREGS` 512 ENOMEM), adds `num_dyn_bfregs` (1024, or 512 for
//!   a large page without 4K UARs) and `allocate_uars` makes the static
//!   pages; `tot_bfregs` reports the static ones.
//! - `UAR_OBJ_ALLOC`: BF without write-combining is EOPNOTSUPP; the page's
//!   mmap offset comes from `mlx5_entry_to_mmap_offset` (entries inserted
//!   from `MLX5_IB_MMAP_OFFSET_START << 16`, 9 << 16); length `PAGE_SIZE`.
//! - `mlx5_ib_mmap`: command = bits 8..15 of the page offset; WC and
//!   ALLOC_WC are EPERM without write-combining; `uar_mmap` refuses a
//!   dynamic-UAR context (EINVAL), a length other than one page (EINVAL) and
//!   an index beyond the static pages (ALLOC_WC: beyond all pages); other
//!   commands look an object's entry up (`mlx5_ib_mmap_offset`).
//! - `qp.c` `alloc_bfreg` (context request v2): the first free low-latency
//!   bfreg (the top `num_low_latency_bfregs`), else the least used medium
//!   one (1 up to them), else bfreg 0; `bfregn_to_uar_index` and
//!   `adjust_bfregn` (the "gross" index: 4 per UAR, 2 usable).
#![allow(unsafe_code)]

use std::{collections::HashMap, os::fd::OwnedFd, sync::Arc};

use crate::sys::{Errno, Mapping};

/// `MLX5_IB_MMAP_*` commands.
pub(crate) const REGULAR_PAGE: u64 = 0;
pub(crate) const GET_CONTIGUOUS_PAGES: u64 = 1;
pub(crate) const WC_PAGE: u64 = 2;
pub(crate) const NC_PAGE: u64 = 3;
pub(crate) const CORE_CLOCK: u64 = 5;
pub(crate) const ALLOC_WC: u64 = 6;
pub(crate) const CLOCK_INFO: u64 = 7;
/// `MLX5_IB_MMAP_OFFSET_START`: dynamic objects' mmap commands start here.
const OFFSET_START: u64 = 9;
/// `MLX5_IB_INVALID_BFREG`.
pub(crate) const INVALID_BFREG: u32 = 1 << 31;
const MAX_BFREGS: u32 = 512;
const NON_FP_BFREGS_PER_UAR: u32 = 2;
const BFREGS_PER_UAR: u32 = 4;

/// A memfd of `len` bytes.
pub(crate) fn memfd(len: usize) -> Result<Arc<OwnedFd>, Errno> {
    let fd = nix::sys::memfd::memfd_create(
        c"uverbs-mlx5-model-uar",
        nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
    )?;
    nix::unistd::ftruncate(&fd, len as i64)?;
    Ok(Arc::new(fd))
}

/// A shared mapping of `fd` (one for the library, one for the model).
pub(crate) fn map(fd: &OwnedFd, len: usize) -> Result<Mapping, Errno> {
    memmap2::MmapOptions::new()
        .len(len)
        .map_raw(fd)
        .map_err(|_| Errno::ENOMEM)
}

/// A dynamic UAR object (`MLX5_IB_OBJECT_UAR`).
#[derive(Debug)]
pub(crate) struct DynUar {
    /// `rdma_user_mmap_entry` start page offset.
    pub(crate) start_pgoff: u64,
    pub(crate) page_id: u32,
    pub(crate) fd: Arc<OwnedFd>,
}

/// The UAR side of a user context.
#[derive(Debug, Default)]
pub(crate) struct Uctx {
    /// `bfregi->lib_uar_dyn`.
    pub(crate) dynamic: bool,
    /// Request format: 0 (legacy) or 2.
    pub(crate) ver: u8,
    pub(crate) low_lat: u32,
    /// 4 KiB UARs per system page the context uses.
    pub(crate) uars_per_sys_page: u32,
    pub(crate) num_static_sys_pages: u32,
    pub(crate) num_sys_pages: u32,
    pub(crate) total_num_bfregs: u32,
    pub(crate) num_dyn_bfregs: u32,
    /// QPs per bfreg (net numbering).
    pub(crate) count: Vec<u32>,
    /// The firmware UAR id of each system page (`None`: not allocated).
    pub(crate) sys_pages: Vec<Option<u32>>,
}

impl Uctx {
    /// `calc_total_bfregs`: sizes a static-UAR context.
    pub(crate) fn static_layout(
        total_req: u32,
        low_lat: u32,
        uars_per_sys_page: u32,
        page_len: usize,
    ) -> Result<Uctx, Errno> {
        if total_req == 0 {
            return Err(Errno::EINVAL);
        }
        if total_req > MAX_BFREGS {
            return Err(Errno::ENOMEM);
        }
        let per_page = uars_per_sys_page * NON_FP_BFREGS_PER_UAR;
        let total = total_req.div_ceil(per_page) * per_page;
        if low_lat > total - 1 {
            return Err(Errno::EINVAL);
        }
        let dyn_bfregs: u32 = if uars_per_sys_page == 1 && page_len > 4096 {
            512
        } else {
            1024
        };
        let num_dyn = dyn_bfregs.div_ceil(per_page) * per_page;
        let all = total + num_dyn;
        Ok(Uctx {
            dynamic: false,
            ver: 2,
            low_lat,
            uars_per_sys_page,
            num_static_sys_pages: total / per_page,
            num_sys_pages: all / per_page,
            total_num_bfregs: all,
            num_dyn_bfregs: num_dyn,
            count: vec![0; all as usize],
            sys_pages: vec![None; (all / per_page) as usize],
        })
    }

    /// `tot_bfregs` of the context response.
    pub(crate) fn tot_bfregs(&self) -> u32 {
        if self.dynamic {
            0
        } else {
            self.total_num_bfregs - self.num_dyn_bfregs
        }
    }

    fn max_bfregs(&self) -> u32 {
        self.uars_per_sys_page * self.num_static_sys_pages * NON_FP_BFREGS_PER_UAR
    }

    /// `alloc_bfreg`: a static bfreg (net numbering) for a new QP.
    pub(crate) fn alloc_bfreg(&mut self) -> Result<u32, Errno> {
        if self.dynamic {
            return Err(Errno::EINVAL);
        }
        let max = self.max_bfregs();
        let med = max.saturating_sub(self.low_lat + 1);
        let first_hi = med + 1;
        let mut n = None;
        if self.ver >= 2 {
            n = (first_hi..max).find(|&i| self.count[i as usize] == 0);
            if n.is_none() && med > 0 {
                let mut min = 1u32;
                for i in 1..first_hi {
                    if self.count[i as usize] < self.count[min as usize] {
                        min = i;
                    }
                    if self.count[min as usize] == 0 {
                        break;
                    }
                }
                n = Some(min);
            }
        }
        let n = n.unwrap_or(0);
        self.count[n as usize] += 1;
        Ok(n)
    }

    pub(crate) fn free_bfreg(&mut self, n: u32) {
        if let Some(c) = self.count.get_mut(n as usize) {
            *c = c.saturating_sub(1);
        }
    }

    /// `bfregn_to_uar_index`: the firmware UAR id of bfreg `n` (net), in
    /// the static pages or (`dynamic`) the pages mapped with ALLOC_WC.
    pub(crate) fn uar_of_bfreg(&self, n: u32, dynamic: bool) -> Result<u32, Errno> {
        if self.dynamic {
            return Err(Errno::EINVAL);
        }
        let per_page = self.uars_per_sys_page * NON_FP_BFREGS_PER_UAR;
        let mut page = n / per_page;
        if dynamic {
            page += self.num_static_sys_pages;
            if page >= self.num_sys_pages || n > self.num_dyn_bfregs {
                return Err(Errno::EINVAL);
            }
        }
        let id = self
            .sys_pages
            .get(page as usize)
            .copied()
            .flatten()
            .ok_or(Errno::EINVAL)?;
        Ok(id + n % per_page / NON_FP_BFREGS_PER_UAR)
    }
}

/// `adjust_bfregn`: net bfreg number to the gross index userspace sees.
pub(crate) fn gross(n: u32) -> u32 {
    n / NON_FP_BFREGS_PER_UAR * BFREGS_PER_UAR + n % NON_FP_BFREGS_PER_UAR
}

/// The mmap offset of a dynamic entry (`mlx5_entry_to_mmap_offset`).
pub(crate) fn entry_offset(start_pgoff: u64, page_len: usize) -> u64 {
    let cmd = (start_pgoff >> 16) & 0xffff;
    let index = start_pgoff & 0xffff;
    (((index >> 8) << 16) | (cmd << 8) | (index & 0xff)) * page_len as u64
}

/// The start page offset of the `n`-th dynamic entry.
pub(crate) fn entry_pgoff(n: u64) -> u64 {
    (OFFSET_START << 16) + n
}

/// A page offset's command (`get_command`).
pub(crate) fn command(pgoff: u64) -> u64 {
    (pgoff >> 8) & 0xff
}

/// A page offset's extended index (`get_extended_index`).
pub(crate) fn extended_index(pgoff: u64) -> u64 {
    (pgoff & 0xff) | ((pgoff >> 16) & 0xff) << 8
}

/// The entry page offset a mapping names (`mlx5_vma_to_pgoff`).
pub(crate) fn entry_key(pgoff: u64) -> u64 {
    command(pgoff) << 16 | extended_index(pgoff)
}

/// The UAR objects and static pages a model's kernel made.
#[derive(Debug, Default)]
pub(crate) struct Uars {
    pub(crate) uctx: Uctx,
    /// Dynamic UAR objects by handle.
    pub(crate) objects: HashMap<u32, DynUar>,
    /// The memfd behind each firmware UAR id (first sub-UAR of a page).
    pub(crate) fds: HashMap<u32, Arc<OwnedFd>>,
    /// Dynamic entries inserted so far.
    pub(crate) entries: u64,
    /// UAR pages allocated so far (ids are multiples of the UARs per page).
    pub(crate) pages: u32,
}

impl Uars {
    /// A new firmware UAR page id (`mlx5_cmd_uar_alloc`).
    pub(crate) fn new_page_id(&mut self, uars_per_page: u32) -> u32 {
        self.pages += 1;
        self.pages * uars_per_page
    }
}
