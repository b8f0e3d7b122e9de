//! Memory the device reads and writes, allocated by the library (mlx5 queue
//! buffers and doorbell records; rxe's rings are allocated by the kernel).
//!
//! A [`DmaBuf`] is zeroed, page-aligned anonymous memory. It is never
//! accessed through Rust references, because the device writes it at any
//! time: providers read and write it through raw pointers with volatile or
//! atomic accesses. Providers keep it in their per-object *shared* state,
//! which the core drops only after the kernel object is destroyed, so the
//! device never writes memory that was given back. Should the destroy
//! fail, the core leaks the object, this memory with it (`object.rs`):
//! pinning is no argument for unmapping it, since mlx5_ib caches doorbell
//! pages by virtual address (a later buffer at the same address would share
//! the stale pinned page) and the device model pins nothing.
//!
//! With fork protection on ([`crate::fork_init`]), the buffer is
//! `MADV_DONTFORK` while it exists, as libmlx5's buffers are
//! (`ibv_dontfork_range` in `mlx5_alloc_buf`, `ibv_dofork_range` in
//! `mlx5_free_buf`).

use crate::{
    error::{Error, ErrorKind, Result},
    fork::{self, ForkGuard},
    sys::{Errno, Mapping},
};

/// The page size the kernel aligns device memory to.
pub(crate) const PAGE: usize = 4096;

/// A zeroed, page-aligned buffer for the device.
#[derive(Debug)]
pub(crate) struct DmaBuf {
    /// Released (`MADV_DOFORK`) before the memory is unmapped: fields
    /// drop in order.
    _fork: Option<ForkGuard>,
    map: Mapping,
    len: usize,
    /// Backed by huge pages ([`DmaBuf::new_huge`]).
    huge: bool,
}

// The mlx5 data path (queue buffers and doorbell records) is the first user.
#[allow(dead_code)]
impl DmaBuf {
    /// Allocates at least `len` bytes (rounded up to whole pages).
    pub(crate) fn new(len: usize, what: &'static str) -> Result<Self> {
        let rounded = len
            .checked_add(PAGE - 1)
            .map(|l| l & !(PAGE - 1))
            .filter(|&l| l != 0)
            .ok_or_else(|| {
                Error::new(
                    what,
                    ErrorKind::InvalidArgument,
                    format!("a device buffer of {len} bytes"),
                )
            })?;
        let map = memmap2::MmapOptions::new()
            .len(rounded)
            .map_anon()
            .map(Mapping::from)
            .map_err(|e| {
                Error::sys(
                    what,
                    Errno::from_raw(e.raw_os_error().unwrap_or(libc::ENOMEM)),
                )
            })?;
        let fork = fork::protect(map.as_mut_ptr() as usize, rounded).map_err(|e| {
            Error::sys(what, e).with_detail("madvise(MADV_DONTFORK) of the buffer (fork_init)")
        })?;
        Ok(DmaBuf {
            _fork: fork,
            map,
            len: rounded,
            huge: false,
        })
    }

    /// Allocates at least `len` bytes of huge pages of `huge_page` bytes
    /// (`MAP_HUGETLB`; the length rounded up to whole huge pages): `ENOMEM`
    /// when the host has too few free (`nr_hugepages`).
    pub(crate) fn new_huge(len: usize, huge_page: usize, what: &'static str) -> Result<Self> {
        let rounded = len
            .checked_next_multiple_of(huge_page)
            .filter(|&l| l != 0 && huge_page.is_power_of_two())
            .ok_or_else(|| {
                Error::new(
                    what,
                    ErrorKind::InvalidArgument,
                    format!("a device buffer of {len} bytes in {huge_page}-byte pages"),
                )
            })?;
        let map = memmap2::MmapOptions::new()
            .len(rounded)
            .huge(Some(huge_page.trailing_zeros() as u8))
            .map_anon()
            .map(Mapping::from)
            .map_err(|e| {
                Error::sys(
                    what,
                    Errno::from_raw(e.raw_os_error().unwrap_or(libc::ENOMEM)),
                )
            })?;
        let fork = fork::protect(map.as_mut_ptr() as usize, rounded).map_err(|e| {
            Error::sys(what, e).with_detail("madvise(MADV_DONTFORK) of the buffer (fork_init)")
        })?;
        Ok(DmaBuf {
            _fork: fork,
            map,
            len: rounded,
            huge: true,
        })
    }

    /// Whether it is backed by huge pages.
    pub(crate) fn is_huge(&self) -> bool {
        self.huge
    }

    /// The start of the buffer (what the kernel is told in create commands).
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// The address as the kernel ABI carries it.
    pub(crate) fn addr(&self) -> u64 {
        self.as_ptr() as u64
    }

    /// Its length in bytes (whole pages).
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_whole_zeroed_aligned_pages() {
        let b = DmaBuf::new(100, "test").unwrap();
        assert_eq!(b.len(), PAGE);
        assert_eq!(b.addr() % PAGE as u64, 0);
        let b = DmaBuf::new(PAGE + 1, "test").unwrap();
        assert_eq!(b.len(), 2 * PAGE);
        let base = b.as_ptr().cast::<u64>();
        for i in 0..b.len() / 8 {
            // SAFETY: `i < len / 8` keeps the read inside the mapping, which
            // is page-aligned (so u64-aligned) and zero-initialised; no
            // reference to it exists.
            let word = unsafe { std::ptr::read_volatile(base.add(i)) };
            assert_eq!(word, 0);
        }
    }

    /// Without free huge pages (`nr_hugepages` 0, as on the project's
    /// machines) the mapping fails with the kernel's `ENOMEM`; with them
    /// it is whole huge pages.
    #[test]
    fn huge_buffers_are_whole_huge_pages_or_enomem() {
        const HUGE: usize = 2 << 20;
        match DmaBuf::new_huge(100, HUGE, "test") {
            Ok(b) => {
                assert!(b.is_huge());
                assert_eq!(b.len(), HUGE);
                assert_eq!(b.addr() % HUGE as u64, 0);
            }
            Err(e) => assert_eq!(e.errno(), Errno::ENOMEM, "{e}"),
        }
        assert!(!DmaBuf::new(100, "test").unwrap().is_huge());
        let e = DmaBuf::new_huge(usize::MAX, HUGE, "test").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn zero_or_overflowing_lengths_are_errors() {
        for len in [0, usize::MAX] {
            let e = DmaBuf::new(len, "test").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        }
    }
}
