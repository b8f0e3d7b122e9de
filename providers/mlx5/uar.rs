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
#![allow(unsafe_code)]

use std::sync::{
    atomic::{compiler_fence, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    providers::Device,
    sys::{Errno, Mapping, Protection},
};

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

/// A blue-flame register: where one QP (or several, when shared) rings its
/// send doorbell.
#[derive(Debug)]
pub(crate) struct Bfreg {
    pub(crate) page: Arc<UarPage>,
    /// Offset of the register in the page.
    pub(crate) reg: usize,
    /// Half the BlueFlame register (the largest BlueFlame copy); 0 when the
    /// register takes 8-byte doorbells only (NC page, bfreg 0, no WC).
    pub(crate) buf_size: usize,
    /// Held while ringing a bfreg that several QPs share (its BlueFlame
    /// halves and offset toggle are common state).
    lock: Option<Mutex<()>>,
    /// The half of the register the next ring uses (0 or `buf_size`):
    /// toggled on every ring (`bf->offset ^= bf->buf_size`).
    offset: AtomicUsize,
    /// What the QP create passes: the page id (dynamic UARs,
    /// `MLX5_QP_FLAG_UAR_PAGE_INDEX`) or the gross bfreg index (static UARs;
    /// the kernel chose it).
    pub(crate) index: u32,
}

/// A ring in progress on a bfreg ([`Bfreg::begin`]): the lock of a shared
/// bfreg, if any, and the half of the register this ring uses.
pub(crate) struct Ring<'a> {
    bf: &'a Bfreg,
    /// The half's offset in the page: `reg` or `reg + buf_size`, inside
    /// the page with all its `buf_size` bytes ([`Bfreg::new`]).
    at: usize,
    _lock: Option<MutexGuard<'a, ()>>,
}

impl Bfreg {
    /// The bfreg at offset `reg` of `page`, with BlueFlame halves of
    /// `buf_size` bytes (0: doorbells only); `None` unless `reg` is
    /// 64-aligned, `buf_size` a multiple of 64, and the register (both
    /// halves, or the 8-byte doorbell) inside the page. Checked once here,
    /// so a ring stores without a check ([`Ring`]).
    pub(crate) fn new(
        page: Arc<UarPage>,
        reg: usize,
        buf_size: usize,
        shared: bool,
        index: u32,
    ) -> Option<Self> {
        let span = if buf_size == 0 {
            8
        } else {
            buf_size.checked_mul(2)?
        };
        let fits = reg % 64 == 0 && buf_size % 64 == 0 && reg.checked_add(span)? <= page.len();
        fits.then(|| Bfreg {
            page,
            reg,
            buf_size,
            lock: shared.then(|| Mutex::new(())),
            offset: AtomicUsize::new(0),
            index,
        })
    }

    /// Whether several QPs ring this bfreg.
    pub(crate) fn is_shared(&self) -> bool {
        self.lock.is_some()
    }

    /// Starts a ring: takes the shared bfreg's lock (a dedicated one has
    /// none) and picks the register half.
    #[inline(always)]
    pub(crate) fn begin(&self) -> Ring<'_> {
        let lock = self
            .lock
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()));
        Ring {
            bf: self,
            // `offset` is 0 or `buf_size`: it starts at 0 and is only ever
            // stored by `Ring::end`, as the XOR of a value it loaded with
            // `buf_size` (whatever the interleaving of rings).
            at: self.reg + self.offset.load(Ordering::Relaxed),
            _lock: lock,
        }
    }
}

impl Ring<'_> {
    /// The largest BlueFlame copy, in bytes (0: doorbells only).
    #[inline(always)]
    pub(crate) fn bf_size(&self) -> usize {
        self.bf.buf_size
    }

    /// Stores the 8-byte doorbell `bytes` (in memory order) as one 64-bit
    /// store.
    #[inline(always)]
    pub(crate) fn doorbell(&self, bytes: [u8; 8]) {
        // SAFETY: `at` is `reg` or `reg + buf_size` (`Bfreg::begin`);
        // `Bfreg::new` checked that `reg` and `buf_size` are multiples of
        // 64 and that the 8 bytes at `reg` (no BlueFlame) or the
        // `2 * buf_size >= 128` bytes from it are inside the page, so the 8
        // bytes at `at` are an aligned u64 inside the mapping, which the
        // bfreg's `Arc` keeps alive. UAR memory is only ever accessed
        // through atomics, by this library and (in tests) the device model.
        let reg = unsafe { AtomicU64::from_ptr(self.bf.page.map.as_mut_ptr().add(self.at).cast()) };
        reg.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
    }

    /// Stores 64-byte block `bb` of a BlueFlame copy as eight ascending
    /// 64-bit stores, never a `memcpy` (which could use wider or narrower
    /// stores, or go backwards). A block past the half's `buf_size` bytes
    /// is a bug, and nothing is stored.
    #[inline(always)]
    pub(crate) fn bf_block(&self, bb: usize, block: &[u64; 8]) {
        if bb >= self.bf.buf_size / 64 {
            debug_assert!(false, "BlueFlame block {bb} past the register half");
            return;
        }
        let base = self
            .bf
            .page
            .map
            .as_mut_ptr()
            .wrapping_add(self.at + bb * 64)
            .cast::<u64>();
        for (i, &word) in block.iter().enumerate() {
            // SAFETY: block `bb < buf_size / 64` of the half at `at` lies in
            // `at..at + buf_size`, inside the page and 64-aligned
            // (`Bfreg::new`, as for `doorbell`), so word `i < 8` is an
            // aligned u64 inside the live mapping; UAR memory is only
            // accessed through atomics.
            let reg = unsafe { AtomicU64::from_ptr(base.add(i)) };
            reg.store(word, Ordering::Relaxed);
            // Keeps the stores in ascending order in the generated code
            // (relaxed stores to different addresses may otherwise be
            // reordered by the compiler); no instruction is emitted.
            compiler_fence(Ordering::Release);
        }
    }

    /// Ends the ring (releasing a shared bfreg's lock): the next one uses
    /// the other half.
    #[inline(always)]
    pub(crate) fn end(self) {
        let cur = self.bf.offset.load(Ordering::Relaxed);
        self.bf
            .offset
            .store(cur ^ self.bf.buf_size, Ordering::Relaxed);
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

    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Chooses the bfreg of a new QP (dynamic UARs; `mlx5_get_qp_uar`):
    /// without write-combining, the NC doorbell; else a dedicated bfreg
    /// while fewer than [`DEDICATED_BFREGS`] are in use, then one of
    /// [`SHARED_BFREGS`] shared ones, round robin. Static UARs: `None`, the
    /// kernel chooses (see [`Uars::static_bfreg`]).
    pub(crate) fn qp_bfreg(&self, dev: Device<'_>) -> Result<Option<Arc<Bfreg>>> {
        if self.is_static() {
            return Ok(None);
        }
        if self.bf_reg_size == 0 {
            return Ok(Some(self.nc_bfreg.clone()));
        }
        let mut pool = self.pool();
        if let Some(b) = pool.free_dedicated.pop() {
            pool.dedicated_used += 1;
            return Ok(Some(b));
        }
        if pool.dedicated_used < DEDICATED_BFREGS {
            let bfregs = self.alloc_bf_page(dev, false)?;
            pool.dedicated_used += 1;
            let mut it = bfregs.into_iter();
            let first = it.next();
            pool.free_dedicated.extend(it);
            return Ok(first);
        }
        let idx = pool.next_shared % SHARED_BFREGS;
        pool.next_shared = pool.next_shared.wrapping_add(1);
        while pool.shared.len() <= idx {
            let bfregs = self.alloc_bf_page(dev, true)?;
            pool.shared.extend(bfregs);
        }
        Ok(Some(pool.shared[idx].clone()))
    }

    /// A thread domain's own bfreg (`mlx5_attach_dedicated_uar`): a free
    /// one of the pages thread domains took, or the first of a new BF page
    /// (kept apart from the QPs' dedicated and shared ones), rung without
    /// a lock. Without write-combining, the NC doorbell (doorbells only,
    /// which need no lock either). Static UARs: `None`, the kernel chooses
    /// the QPs' bfregs as without a thread domain (libmlx5 would map a
    /// page of the context's "dynamic" static bfregs, which it asks for
    /// only when the program sets `MLX5_NUM_DYN_BFREGS`-like attributes
    /// this crate does not have).
    pub(crate) fn td_bfreg(&self, dev: Device<'_>) -> Result<Option<Arc<Bfreg>>> {
        if self.is_static() {
            return Ok(None);
        }
        if self.bf_reg_size == 0 {
            return Ok(Some(self.nc_bfreg.clone()));
        }
        let mut pool = self.pool();
        if let Some(b) = pool.free_td.pop() {
            return Ok(Some(b));
        }
        let mut bfregs = self.alloc_bf_page(dev, false)?.into_iter();
        let first = bfregs.next();
        // Handed out from the end: the page's next bfreg first.
        pool.free_td.extend(bfregs.rev());
        Ok(first)
    }

    /// Gives a thread domain's bfreg back when the thread domain goes.
    pub(crate) fn release_td(&self, bfreg: &Arc<Bfreg>) {
        if bfreg.buf_size == 0 || self.is_static() {
            return;
        }
        self.pool().free_td.push(bfreg.clone());
    }

    /// Gives a QP's dedicated bfreg back when the QP is destroyed.
    pub(crate) fn release(&self, bfreg: &Arc<Bfreg>) {
        if bfreg.is_shared() || bfreg.buf_size == 0 || self.is_static() {
            return;
        }
        let mut pool = self.pool();
        pool.dedicated_used = pool.dedicated_used.saturating_sub(1);
        pool.free_dedicated.push(bfreg.clone());
    }

    /// A new BF page's bfregs (2 per sub-UAR). Sub-UAR `j` is page id
    /// `page_id + j`: a page id the kernel gave so close to `u32::MAX` that
    /// its sub-UARs' ids do not fit is `Malformed`.
    fn alloc_bf_page(&self, dev: Device<'_>, shared: bool) -> Result<Vec<Arc<Bfreg>>> {
        let page = Arc::new(alloc_dynamic(dev, false)?.0);
        let subs = (page.len() / ADAPTER_PAGE).min(self.uars_per_page);
        let mut out = Vec::with_capacity(subs * 2);
        let half = self.bf_reg_size / 2;
        for j in 0..subs {
            let id = u32::try_from(j)
                .ok()
                .and_then(|j| page.page_id.checked_add(j))
                .ok_or_else(|| {
                    malformed(format!(
                        "the kernel gave a UAR page id {:#x} with {subs} 4 KiB UARs: \
                         UAR {j}'s id is past u32::MAX",
                        page.page_id
                    ))
                })?;
            for k in 0..BFREGS_PER_UAR as usize {
                let reg = bf_reg_offset(j, k, self.bf_reg_size).ok_or_else(|| {
                    malformed(format!(
                        "the context's BlueFlame register size {} puts bfreg {k} of \
                         UAR {j} past the address space",
                        self.bf_reg_size
                    ))
                })?;
                let bf = Bfreg::new(page.clone(), reg, half, shared, id)
                    .ok_or_else(|| outside_page(reg, half, page.len()))?;
                out.push(Arc::new(bf));
            }
        }
        Ok(out)
    }

    /// The static bfreg the kernel chose for a QP (its gross index), as
    /// rdma-core's `map_uuar` finds it; `None` for an index outside the
    /// mapped pages or not a usable bfreg.
    pub(crate) fn static_bfreg(
        &self,
        gross: u32,
        low_latency: u32,
        total: u32,
    ) -> Option<Arc<Bfreg>> {
        let Mode::Static { pages, bfregs } = &self.mode else {
            return None;
        };
        let mut made = bfregs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = made.get(&gross) {
            return Some(b.clone());
        }
        let uar = (gross / GROSS_PER_UAR) as usize;
        let k = (gross % GROSS_PER_UAR) as usize;
        if k >= BFREGS_PER_UAR as usize {
            return None;
        }
        let page = pages.get(uar / self.uars_per_page)?.clone();
        let reg = bf_reg_offset(uar % self.uars_per_page, k, self.bf_reg_size)?;
        let buf_size = if gross == 0 { 0 } else { self.bf_reg_size / 2 };
        let b = Arc::new(Bfreg::new(
            page,
            reg,
            buf_size,
            needs_lock(gross, low_latency, total),
            gross,
        )?);
        made.insert(gross, b.clone());
        Some(b)
    }

    /// The NC doorbell page's register spacing (doorbells only).
    #[allow(dead_code)]
    pub(crate) fn nc_stride() -> usize {
        NC_DB_STRIDE
    }
}

/// The offset in its page of bfreg `k` of sub-UAR `sub`
/// (`sub * 4096 + 0x800 + k * bf_reg_size`), `None` when it overflows
/// (`bf_reg_size` is the kernel's).
fn bf_reg_offset(sub: usize, k: usize, bf_reg_size: usize) -> Option<usize> {
    sub.checked_mul(ADAPTER_PAGE)?
        .checked_add(BF_OFFSET)?
        .checked_add(k.checked_mul(bf_reg_size)?)
}

/// rdma-core's `need_uuar_lock`: bfreg 0 needs none (8-byte doorbells
/// only), the low-latency ones are dedicated, the rest are shared.
fn needs_lock(gross: u32, low_latency: u32, total: u32) -> bool {
    if gross == 0 {
        return false;
    }
    let i = gross / 2 + gross % 2;
    i < total.saturating_sub(low_latency)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::{
        providers::Transport,
        testing::kernel::{dummy_fd, FakeKernel},
    };

    /// A kernel that answers `UAR_OBJ_ALLOC` with `(page id, mmap length)`
    /// from `answers`, in turn (`ENOMEM` once they run out), and maps every
    /// offset as anonymous memory; static UARs need no answers.
    fn uar_kernel(answers: &[(u32, u32)]) -> Transport {
        let fake = Arc::new(FakeKernel::new());
        let mut answers: VecDeque<(u32, u32)> = answers.iter().copied().collect();
        let mut handle = 0u32;
        fake.on_ioctl(move |cmd| {
            if (cmd.object_id, cmd.method_id)
                != (abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_ALLOC)
            {
                return Err(Errno::EPROTONOSUPPORT);
            }
            let (page_id, length) = answers.pop_front().ok_or(Errno::ENOMEM)?;
            handle += 1;
            cmd.set_new_object(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, handle);
            let offset = u64::from(handle) << 16;
            cmd.write_output(
                abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET,
                &offset.to_ne_bytes(),
            );
            cmd.write_output(
                abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH,
                &length.to_ne_bytes(),
            );
            cmd.write_output(
                abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID,
                &page_id.to_ne_bytes(),
            );
            Ok(())
        });
        Transport::new(fake, dummy_fd(), abi::RDMA_DRIVER_MLX5)
    }

    fn geometry(tot_bfregs: u32, num_uars_per_page: u32) -> UarGeometry {
        UarGeometry {
            tot_bfregs,
            bf_reg_size: 512,
            num_uars_per_page,
        }
    }

    fn malformed_kind(r: Result<Uars>) -> ErrorKind {
        match r {
            Ok(u) => panic!("accepted: {u:?}"),
            Err(e) => e.kind(),
        }
    }

    /// Item 6 of issue 27: a `num_uars_per_page` mlx5_ib never reports
    /// (not a power of two, or above 16) is `Malformed`, with static and
    /// with dynamic UARs, where `tot_bfregs / (n * 2)` overflowed u32 from
    /// 2^31 on (a panic, or a division by zero in release).
    #[test]
    fn uars_per_page_mlx5_ib_never_reports_are_malformed() {
        for n in [1 << 31, 3, 32, u32::MAX, 17, 6, 1 << 16] {
            for tot in [0, 16] {
                let t = uar_kernel(&[(1, 4096)]);
                let r = Uars::open(t.device(), geometry(tot, n));
                assert_eq!(
                    malformed_kind(r),
                    ErrorKind::Malformed,
                    "{n} per page, {tot}"
                );
            }
        }
        for n in [0, 1, 2, 4, 8, 16] {
            let page = n.max(1) * 4096;
            let t = uar_kernel(&[(1, page)]);
            let u = Uars::open(t.device(), geometry(0, n)).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(
                (u.uars_per_page, u.cq_page.len()),
                (n.max(1) as usize, page as usize)
            );
            let t = uar_kernel(&[]);
            let u = Uars::open(t.device(), geometry(32, n)).unwrap_or_else(|e| panic!("{n}: {e}"));
            let Mode::Static { pages, .. } = &u.mode else {
                panic!("static UARs expected");
            };
            assert_eq!(pages.len(), (32 / (2 * n.max(1)) as usize).max(1), "{n}");
        }
    }

    /// More static bfregs than mlx5_ib ever gives (512) are `Malformed`,
    /// not a loop over 2^31 page mappings.
    #[test]
    fn more_static_bfregs_than_mlx5_ib_gives_are_malformed() {
        for tot in [513, 1 << 20, u32::MAX] {
            let t = uar_kernel(&[]);
            let r = Uars::open(t.device(), geometry(tot, 1));
            assert_eq!(malformed_kind(r), ErrorKind::Malformed, "{tot}");
        }
        let t = uar_kernel(&[]);
        let u = Uars::open(t.device(), geometry(512, 1)).unwrap_or_else(|e| panic!("{e}"));
        let Mode::Static { pages, .. } = &u.mode else {
            panic!("static UARs expected");
        };
        assert_eq!(pages.len(), 256);
        assert!(
            u.static_bfreg(255 * 4 + 1, 4, 512).is_some(),
            "the last page's bfreg"
        );
        assert!(
            u.static_bfreg(256 * 4 + 1, 4, 512).is_none(),
            "past the pages"
        );
        assert!(u.static_bfreg(u32::MAX, 4, 512).is_none());
        assert!(u.static_bfreg(u32::MAX - 2, 4, 512).is_none());
    }

    /// A BF page whose id leaves no room for its sub-UARs' ids
    /// (`page_id + j` past `u32::MAX`) is `Malformed` when a QP asks for a
    /// bfreg on it; one whose ids fit gives each sub-UAR its own id.
    #[test]
    fn a_page_id_whose_sub_uar_ids_overflow_is_malformed() {
        for (id, ok) in [
            (u32::MAX, false),
            (u32::MAX - 1, false),
            (u32::MAX - 3, true),
        ] {
            // The NC page, then a BF page of 4 sub-UARs.
            let t = uar_kernel(&[(7, 4 * 4096), (id, 4 * 4096)]);
            let u = Uars::open(t.device(), geometry(0, 4)).unwrap_or_else(|e| panic!("{e}"));
            match u.qp_bfreg(t.device()) {
                Ok(Some(b)) if ok => {
                    assert_eq!((b.index, b.reg, b.buf_size), (id, BF_OFFSET, 256));
                    let pool = u.pool();
                    let ids: Vec<u32> = pool.free_dedicated.iter().map(|b| b.index).collect();
                    assert_eq!(ids, [id, id + 1, id + 1, id + 2, id + 2, id + 3, id + 3]);
                }
                Err(e) if !ok => assert_eq!(e.kind(), ErrorKind::Malformed, "{e}"),
                other => panic!("page id {id:#x}: {other:?}"),
            }
        }
    }

    /// A UAR page longer than `num_uars_per_page` sub-UARs gets bfregs on
    /// the first `num_uars_per_page` only; a BlueFlame register size that
    /// puts a bfreg outside its page is `Malformed`.
    #[test]
    fn bfregs_stay_inside_the_sub_uars_the_geometry_names() {
        let t = uar_kernel(&[(7, 4096), (100, 64 * 4096)]);
        let u = Uars::open(t.device(), geometry(0, 2)).unwrap_or_else(|e| panic!("{e}"));
        assert!(u.qp_bfreg(t.device()).is_ok_and(|b| b.is_some()));
        assert_eq!(u.pool().free_dedicated.len(), 3, "2 sub-UARs of 2 bfregs");
        let t = uar_kernel(&[(7, 4096), (100, 4096)]);
        let g = UarGeometry {
            bf_reg_size: u32::MAX,
            ..geometry(0, 1)
        };
        let u = Uars::open(t.device(), g).unwrap_or_else(|e| panic!("{e}"));
        let e = u.qp_bfreg(t.device()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Malformed, "{e}");
    }

    #[test]
    fn static_lock_rule_matches_rdma_core() {
        // tot 16, low latency 4: gross indexes whose (i/2 + i%2) >= 12 are
        // dedicated.
        assert!(!needs_lock(0, 4, 16));
        assert!(needs_lock(1, 4, 16));
        assert!(needs_lock(4, 4, 16));
        assert!(!needs_lock(24, 4, 16));
        assert!(!needs_lock(29, 4, 16));
        assert!(needs_lock(21, 4, 16));
    }

    /// A bfreg is made only where its whole register fits its page,
    /// aligned, so rings store without a check; its rings alternate
    /// halves and land where rdma-core's would.
    #[test]
    fn a_bfreg_is_made_only_inside_its_page() {
        let page = Arc::new(UarPage::anonymous(4096));
        let make = |reg, half| Bfreg::new(page.clone(), reg, half, false, 0).is_some();
        assert!(make(0x800, 256), "rdma-core's first bfreg of a sub-UAR");
        assert!(make(0xa00, 256), "its second");
        assert!(make(0xe00, 256), "both halves end at the page's end");
        assert!(!make(0xf00, 256), "the second half past the page");
        assert!(!make(0x820, 256), "not 64-aligned");
        assert!(!make(0x800, 100), "halves not a multiple of 64");
        assert!(make(0xfc0, 0), "a doorbell-only register's 8 bytes");
        assert!(!make(4096, 0), "past the page");
        assert!(!make(usize::MAX - 63, 256), "overflow");
        let bf = Bfreg::new(page.clone(), 0xa00, 256, false, 0).unwrap();
        for (i, at) in [0xa00, 0xb00, 0xa00].into_iter().enumerate() {
            let ring = bf.begin();
            ring.doorbell([i as u8 + 1; 8]);
            ring.end();
            assert_eq!(page.load64(at), Some([i as u8 + 1; 8]), "ring {i}");
        }
    }
}
