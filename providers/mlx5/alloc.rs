//! Where an mlx5 queue's memory comes from: the program's allocator of a
//! parent domain, or libmlx5's allocation types.
//!
//! Facts (rdma-core `providers/mlx5/buf.c` `mlx5_get_alloc_type`,
//! `mlx5_alloc_prefered_buf`, `alloc_huge_buf`, `mlx5_alloc_buf_contig`;
//! `dbrec.c` `mlx5_alloc_dbrec`; `verbs.c` `mlx5_alloc_qp_buf`,
//! `mlx5_set_custom_qp_alignment`; `cq.c` `mlx5_alloc_cq_buf`; `srq.c`
//! `mlx5_alloc_srq_buf`):
//!
//! - In a parent domain with both callbacks, every queue buffer and every
//!   doorbell record is asked of them first (`MLX5DV_RES_TYPE_QP`, `SRQ`,
//!   `CQ`, `DBR`); `IBV_ALLOCATOR_USE_DEFAULT` falls back to the anonymous
//!   default for that piece, NULL fails the create. The environment is not
//!   read then.
//! - Otherwise `MLX_QP_ALLOC_TYPE`, `MLX_CQ_ALLOC_TYPE`, `MLX_SRQ_ALLOC_TYPE`
//!   (case-insensitive `ANON`, `HUGE`, `CONTIG`, `PREFER_CONTIG`,
//!   `PREFER_HUGE`, `ALL`; anything else is the default) choose the
//!   buffer's memory: huge pages, then the device's contiguous pages, then
//!   anonymous memory, each tried as the type allows: `HUGE` and `CONTIG`
//!   fail the create when theirs fails, the `PREFER_` types and `ALL` fall
//!   back. The default is `ANON`, or `HUGE` when the older
//!   `HUGE_CQ` / `HUGE_RC` / `HUGE_UC` / `HUGE_UD` variable is `y`.
//!   Doorbell records are always anonymous then.
//!
//! Differences, on purpose: libmlx5 carves huge-page buffers out of 2 MiB
//! SysV segments (`shmget(SHM_HUGETLB)`) that buffers share in 32 KiB
//! chunks; here each buffer maps its own huge pages
//! (`mmap(MAP_HUGETLB)`), which fails the same way (`ENOMEM`) when the host
//! has none. Contiguous pages are the device's mmap command
//! `MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES`, tried from the buffer's order down
//! to 4 KiB blocks as libmlx5 does (without its `*_LOG2_CONTIG_BSIZE`
//! variables); mlx5_ib has answered it with `ENOSYS` for years, so
//! `CONTIG` fails and `PREFER_CONTIG` falls back.
#![allow(unsafe_code)]

use std::{ptr::NonNull, sync::Arc};

use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    providers::{dma::DmaBuf, Device},
    sys::{Errno, Mapping, Protection},
    QueueAllocRequest, QueueAllocator, QueueMemory, QueueResource,
};

/// The page size buffers are aligned to (`dev->page_size`).
pub(crate) const PAGE: usize = crate::providers::dma::PAGE;
/// The huge page size libmlx5 uses (`HPAGE_SIZE`).
pub(crate) const HUGE_PAGE: usize = 2 << 20;
/// The smallest contiguous block libmlx5 asks for
/// (`MLX5_MIN_LOG2_CONTIG_BLOCK_SIZE`).
const MIN_CONTIG_LOG: u32 = 12;
/// The largest (`MLX5_MAX_LOG2_CONTIG_BLOCK_SIZE`).
const MAX_CONTIG_LOG: u32 = 23;
/// The alignment unit of a QP buffer's start (`MLX5_QPC_PAGE_OFFSET_QUANTA`).
const QPC_PAGE_OFFSET_QUANTA: usize = 64;

/// libmlx5's `enum mlx5_alloc_type`, as its environment names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AllocType {
    Anon,
    Huge,
    Contig,
    PreferContig,
    PreferHuge,
    All,
}

/// Which queue's variables apply (libmlx5's `MLX5_*_PREFIX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Component {
    Qp,
    Cq,
    Srq,
}

impl Component {
    /// The variable choosing the type (`MLX_QP_ALLOC_TYPE`, ...).
    pub(crate) fn variable(self) -> &'static str {
        match self {
            Component::Qp => "MLX_QP_ALLOC_TYPE",
            Component::Cq => "MLX_CQ_ALLOC_TYPE",
            Component::Srq => "MLX_SRQ_ALLOC_TYPE",
        }
    }
}

impl AllocType {
    /// The type a variable's value names (`mlx5_get_alloc_type`): the
    /// six names, in any case; `default` for none or another value.
    pub(crate) fn parse(value: Option<&str>, default: AllocType) -> AllocType {
        let Some(v) = value else { return default };
        [
            ("ANON", AllocType::Anon),
            ("HUGE", AllocType::Huge),
            ("CONTIG", AllocType::Contig),
            ("PREFER_CONTIG", AllocType::PreferContig),
            ("PREFER_HUGE", AllocType::PreferHuge),
            ("ALL", AllocType::All),
        ]
        .into_iter()
        .find(|(name, _)| v.eq_ignore_ascii_case(name))
        .map_or(default, |(_, t)| t)
    }

    /// The type the environment chooses for `component`; `huge_key` is
    /// the older variable that makes `HUGE` the default when it is `y`
    /// (`mlx5_use_huge`).
    pub(crate) fn from_env(component: Component, huge_key: Option<&str>) -> AllocType {
        let default = if huge_key.is_some_and(|k| std::env::var(k).is_ok_and(|v| v == "y")) {
            AllocType::Huge
        } else {
            AllocType::Anon
        };
        let value = std::env::var(component.variable()).ok();
        AllocType::parse(value.as_deref(), default)
    }

    fn tries_huge(self) -> bool {
        matches!(
            self,
            AllocType::Huge | AllocType::PreferHuge | AllocType::All
        )
    }

    fn tries_contig(self) -> bool {
        matches!(
            self,
            AllocType::Contig | AllocType::PreferContig | AllocType::All
        )
    }
}

/// `mlx5dv.h`'s `MLX5DV_RES_TYPE_*`: the driver id above, the kind below.
pub(crate) fn resource_type(r: QueueResource) -> u64 {
    let n = match r {
        QueueResource::Qp => 1,
        QueueResource::Rwq => 2,
        QueueResource::DoorbellRecord => 3,
        QueueResource::Srq => 4,
        QueueResource::Cq => 5,
    };
    (u64::from(abi::RDMA_DRIVER_MLX5) << 32) | n
}

/// The alignment libmlx5 asks a parent domain's allocator for a QP buffer
/// of `buf_len` bytes whose send and receive WQEs are `max_stride` bytes
/// at most (`mlx5_set_custom_qp_alignment`): the page offset quantum of
/// the buffer's page (its size in pages rounded up to a power of two), or
/// the largest stride if that is more.
pub(crate) fn custom_qp_alignment(buf_len: usize, max_stride: usize) -> usize {
    let buf_page = buf_len.div_ceil(PAGE).max(1).next_power_of_two() * PAGE;
    max_stride.max(buf_page / QPC_PAGE_OFFSET_QUANTA)
}

/// Where a piece of queue memory came from, and how it goes back.
#[derive(Debug)]
pub(crate) enum Backing {
    /// The provider's own mapping (anonymous, or huge pages).
    Own(DmaBuf),
    /// The device's contiguous pages, mapped from the command fd (unmapped
    /// when dropped).
    Contig { _map: Mapping },
    /// The program's allocator's, freed through it.
    Custom {
        ptr: NonNull<u8>,
        allocator: Arc<dyn QueueAllocator>,
        req: QueueAllocRequest,
    },
    /// Inside the queue's own allocation (a doorbell record after the
    /// queue).
    InQueue,
}

/// Where a piece came from, for tests and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    Anon,
    Huge,
    Contig,
    Custom,
    InQueue,
}

impl Backing {
    /// Where it came from.
    pub(crate) fn origin(&self) -> Origin {
        match self {
            Backing::Own(d) if d.is_huge() => Origin::Huge,
            Backing::Own(_) => Origin::Anon,
            Backing::Contig { .. } => Origin::Contig,
            Backing::Custom { .. } => Origin::Custom,
            Backing::InQueue => Origin::InQueue,
        }
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        if let Backing::Custom {
            ptr,
            allocator,
            req,
        } = self
        {
            // SAFETY: `ptr` is what `allocator.alloc(req)` answered
            // (`custom`), freed only here, once; the queue buffer holding
            // this backing is dropped only after the kernel object that
            // used it was destroyed (the core's ownership rules,
            // `providers::dma`), and no pointer into it survives the
            // buffer.
            unsafe { allocator.free(*ptr, req) };
        }
    }
}

// SAFETY: `Custom`'s pointer is memory the allocator lent to this backing
// alone (`QueueAllocator`'s contract), reached only through the queue
// buffer's raw and atomic accesses; the allocator is `Send + Sync`.
unsafe impl Send for Backing {}
// SAFETY: as for `Send`; a shared `Backing` gives access to nothing.
unsafe impl Sync for Backing {}

/// What a queue buffer is asked for.
#[derive(Clone, Copy)]
pub(crate) struct BufSpec<'a> {
    /// The bytes asked of an allocator (libmlx5's size for the queue).
    pub(crate) len: usize,
    /// The alignment asked of an allocator.
    pub(crate) alignment: usize,
    pub(crate) resource: QueueResource,
    /// The type without an allocator.
    pub(crate) alloc_type: AllocType,
    /// Whose variables chose it.
    pub(crate) component: Component,
    /// The parent domain's allocator.
    pub(crate) allocator: Option<&'a Arc<dyn QueueAllocator>>,
    /// The operation errors name.
    pub(crate) what: &'static str,
}

/// One piece of memory: its start, its usable length, its backing.
pub(crate) struct Piece {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) len: usize,
    pub(crate) backing: Backing,
}

/// Asks `allocator` for `req`: `None` for `USE_DEFAULT`. The memory is
/// zeroed; memory that is not aligned as asked is given back and refused.
pub(crate) fn custom(
    allocator: &Arc<dyn QueueAllocator>,
    req: QueueAllocRequest,
    what: &'static str,
) -> Result<Option<Piece>> {
    let ptr = match allocator.alloc(&req) {
        Ok(QueueMemory::Memory(p)) => p,
        Ok(QueueMemory::UseDefault) => return Ok(None),
        Err(e) => {
            return Err(Error::sys(what, e).with_detail(format!(
                "the parent domain's allocator refused {} bytes for {:?}",
                req.size, req.resource
            )))
        }
    };
    let backing = Backing::Custom {
        ptr,
        allocator: allocator.clone(),
        req,
    };
    if ptr.as_ptr() as usize % req.alignment.max(1) != 0 {
        drop(backing);
        return Err(Error::new(
            what,
            ErrorKind::InvalidArgument,
            format!(
                "the parent domain's allocator answered {:p}, not aligned to {} bytes",
                ptr, req.alignment
            ),
        ));
    }
    // SAFETY: the allocator lent `size` writable bytes at `ptr` to this
    // backing alone (`QueueAllocator`'s contract); a raw write.
    unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, req.size) };
    Ok(Some(Piece {
        ptr,
        len: req.size,
        backing,
    }))
}

/// The queue memory `spec` asks for, as `mlx5_alloc_prefered_buf`; the
/// bool says whether a page for the doorbell record follows the queue in
/// it (the anonymous default).
pub(crate) fn queue(dev: Option<Device<'_>>, spec: &BufSpec<'_>) -> Result<(Piece, bool)> {
    let rounded = spec.len.max(1).div_ceil(PAGE) * PAGE;
    let mut t = spec.alloc_type;
    if let Some(a) = spec.allocator {
        let req = QueueAllocRequest::new(
            spec.len,
            spec.alignment,
            spec.resource,
            resource_type(spec.resource),
        );
        if let Some(p) = custom(a, req, spec.what)? {
            return Ok((p, false));
        }
        // The default of a parent domain's fallback is anonymous memory,
        // whatever the environment says.
        t = AllocType::Anon;
    }
    if t.tries_huge() {
        match DmaBuf::new_huge(rounded, HUGE_PAGE, spec.what) {
            Ok(d) => return Ok((own(d, rounded), false)),
            Err(e) if t == AllocType::Huge => {
                return Err(e.with_detail(format!(
                    "allocation type HUGE ({}=HUGE, or HUGE_*=y): no {} KiB huge pages \
                     for {rounded} bytes (see /sys/kernel/mm/hugepages)",
                    spec.component.variable(),
                    HUGE_PAGE >> 10
                )))
            }
            Err(_) => {}
        }
    }
    if t.tries_contig() {
        match contig(dev, rounded, spec.what) {
            Ok(p) => return Ok((p, false)),
            Err(e) if t == AllocType::Contig => return Err(e),
            Err(_) => {}
        }
    }
    let d = DmaBuf::new(rounded + PAGE, spec.what)?;
    Ok((own(d, rounded), true))
}

fn own(d: DmaBuf, len: usize) -> Piece {
    let ptr = NonNull::new(d.as_ptr()).unwrap_or(NonNull::dangling());
    Piece {
        ptr,
        len,
        backing: Backing::Own(d),
    }
}

/// The device's contiguous pages (`mlx5_alloc_buf_contig`): orders from
/// the buffer's (at most 2^23) down to 4 KiB blocks; `EINVAL` stops early.
fn contig(dev: Option<Device<'_>>, len: usize, what: &'static str) -> Result<Piece> {
    let Some(dev) = dev else {
        return Err(Error::sys(what, Errno::ENODEV));
    };
    let mut order = len.next_power_of_two().trailing_zeros().min(MAX_CONTIG_LOG);
    let mut last = Errno::ENOMEM;
    while order >= MIN_CONTIG_LOG {
        let offset = (u64::from(abi::MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES) << 8 | u64::from(order))
            * PAGE as u64;
        match dev.mmap(len, offset, Protection::ReadWrite) {
            Ok(map) => {
                let ptr = NonNull::new(map.as_mut_ptr()).unwrap_or(NonNull::dangling());
                // SAFETY: a fresh mapping of `len` bytes, ours alone.
                unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
                return Ok(Piece {
                    ptr,
                    len,
                    backing: Backing::Contig { _map: map },
                });
            }
            Err(e) => {
                last = e;
                if e == Errno::EINVAL {
                    break;
                }
            }
        }
        order -= 1;
    }
    Err(Error::sys(what, last).with_detail(
        "MLX_*_ALLOC_TYPE=CONTIG: the kernel maps no contiguous pages \
         (MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES)",
    ))
}

/// A doorbell record (8 bytes): the allocator's if it answers, else
/// `None` (the caller's default).
pub(crate) fn dbrec(
    allocator: Option<&Arc<dyn QueueAllocator>>,
    what: &'static str,
) -> Result<Option<Piece>> {
    match allocator {
        None => Ok(None),
        Some(a) => {
            let r = QueueResource::DoorbellRecord;
            custom(a, QueueAllocRequest::new(8, 8, r, resource_type(r)), what)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_type_names_parse_as_libmlx5_reads_them() {
        use AllocType::*;
        for (v, t) in [
            ("HUGE", Huge),
            ("huge", Huge),
            ("Prefer_Huge", PreferHuge),
            ("ANON", Anon),
            ("CONTIG", Contig),
            ("prefer_contig", PreferContig),
            ("ALL", All),
        ] {
            assert_eq!(AllocType::parse(Some(v), Anon), t, "{v}");
        }
        assert_eq!(AllocType::parse(Some("HUGEPAGES"), Anon), Anon);
        assert_eq!(AllocType::parse(Some(""), Huge), Huge);
        assert_eq!(AllocType::parse(None, Huge), Huge);
    }

    #[test]
    fn resource_types_are_mlx5dv_numbers() {
        // mlx5dv.h: (RDMA_DRIVER_MLX5 << 32) | 1..=5, RDMA_DRIVER_MLX5 = 1.
        assert_eq!(resource_type(QueueResource::Qp), 0x1_0000_0001);
        assert_eq!(resource_type(QueueResource::DoorbellRecord), 0x1_0000_0003);
        assert_eq!(resource_type(QueueResource::Srq), 0x1_0000_0004);
        assert_eq!(resource_type(QueueResource::Cq), 0x1_0000_0005);
    }

    #[test]
    fn custom_qp_alignment_is_libmlx5s() {
        // 9 KiB -> 3 pages -> 4 pages (16 KiB) / 64 = 256; strides 64.
        assert_eq!(custom_qp_alignment(9216, 64), 256);
        // One page: 4096 / 64 = 64, but a 512-byte stride wins.
        assert_eq!(custom_qp_alignment(4096, 512), 512);
        // 1 MiB: 16 KiB.
        assert_eq!(custom_qp_alignment(1 << 20, 1024), 16384);
    }
}
