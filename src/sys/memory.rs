//! The process-memory calls of fork protection ([`crate::fork`]): the page
//! size, `madvise(MADV_DONTFORK / MADV_DOFORK)`, and the page size of the
//! mapping an address is in (`/proc/self/smaps`), as libibverbs'
//! `memory.c` makes them. They act on this process's own address space,
//! whatever device or transport a context uses, so they are functions of
//! the module rather than [`super::Kernel`] methods; the bookkeeping that
//! decides which ranges to advise is tested apart from them
//! (`fork/ranges.rs`).
#![allow(unsafe_code)]

use std::{ffi::c_void, ptr::NonNull};

use nix::sys::mman::{madvise, MmapAdvise};

use super::Errno;

/// `sysconf(_SC_PAGESIZE)`.
pub(crate) fn page_size() -> Result<usize, Errno> {
    // SAFETY: sysconf reads a configuration value; no memory is passed.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n)
        .ok()
        .filter(|&n| n.is_power_of_two())
        .ok_or_else(Errno::last)
}

/// What a child process gets of a range after `fork(2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ForkAdvice {
    /// `MADV_DONTFORK`: nothing (the range is not mapped in the child).
    DontFork,
    /// `MADV_DOFORK`: a copy, as for any memory (undoes `DontFork`).
    DoFork,
}

/// `madvise(addr, len, MADV_DONTFORK | MADV_DOFORK)`; `addr` must be
/// page-aligned. An unmapped range fails with `ENOMEM`.
pub(crate) fn madvise_fork(addr: usize, len: usize, advice: ForkAdvice) -> Result<(), Errno> {
    let Some(ptr) = NonNull::new(addr as *mut c_void) else {
        return Err(Errno::EINVAL);
    };
    let advice = match advice {
        ForkAdvice::DontFork => MmapAdvise::MADV_DONTFORK,
        ForkAdvice::DoFork => MmapAdvise::MADV_DOFORK,
    };
    // SAFETY: these two advices only set or clear VM_DONTCOPY on the
    // mappings in the range: what this process reads and writes there is
    // unchanged (a child forked later does not get the pages; a program
    // that forks takes that on with `ibv_fork_init`). The kernel checks
    // the range (EINVAL, ENOMEM), nothing is dereferenced here.
    unsafe { madvise(ptr, len, advice) }
}

/// The page size (`KernelPageSize`) of the mapping `addr` is in, from
/// `/proc/self/smaps` (libibverbs' `get_page_size`, for
/// `RDMAV_HUGEPAGES_SAFE`); `None` when it cannot be read.
pub(crate) fn mapping_page_size(addr: usize) -> Option<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    smaps_page_size(&smaps, addr)
}

/// [`mapping_page_size`] on the text of an smaps file.
pub(crate) fn smaps_page_size(smaps: &str, addr: usize) -> Option<usize> {
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((lo, hi)) = mapping_range(line) {
            inside = (lo..hi).contains(&addr);
            continue;
        }
        if inside {
            if let Some(kb) = line.strip_prefix("KernelPageSize:") {
                let kb: usize = kb.trim().strip_suffix("kB")?.trim().parse().ok()?;
                return kb.checked_mul(1024);
            }
        }
    }
    None
}

/// The `start-end` of a mapping's header line (`7f00..-7f01.. rw-p ...`).
fn mapping_range(line: &str) -> Option<(usize, usize)> {
    let range = line.split_whitespace().next()?;
    let (lo, hi) = range.split_once('-')?;
    let lo = usize::from_str_radix(lo, 16).ok()?;
    let hi = usize::from_str_radix(hi, 16).ok()?;
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaps_gives_the_page_size_of_the_mapping_an_address_is_in() {
        let smaps = "\
55d0a0000000-55d0a0021000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
7f0000000000-7f0000400000 rw-s 00000000 00:0f 1234                       /anon_hugepage (deleted)
Size:               4096 kB
KernelPageSize:     2048 kB
MMUPageSize:        2048 kB
VmFlags: rd wr sh mr mw me ms de ht sd
";
        assert_eq!(smaps_page_size(smaps, 0x55d0_a000_1000), Some(4096));
        assert_eq!(smaps_page_size(smaps, 0x7f00_0020_0000), Some(2 << 20));
        assert_eq!(
            smaps_page_size(smaps, 0x7f00_0040_0000),
            None,
            "past the end"
        );
        assert_eq!(smaps_page_size(smaps, 0x1000), None);
        assert_eq!(smaps_page_size("garbage\nKernelPageSize: x kB", 0), None);
    }

    #[test]
    fn the_page_size_is_a_power_of_two_and_this_stacks_page_is_in_smaps() {
        let page = page_size().unwrap();
        assert!(page.is_power_of_two() && page >= 4096);
        let local = 0u8;
        let addr = &raw const local as usize;
        assert_eq!(mapping_page_size(addr), Some(page));
    }

    #[test]
    fn advising_a_null_or_unaligned_range_fails_cleanly() {
        assert_eq!(
            madvise_fork(0, 4096, ForkAdvice::DontFork),
            Err(Errno::EINVAL)
        );
        let page = page_size().unwrap();
        let map = memmap2::MmapOptions::new().len(page).map_anon().unwrap();
        let addr = map.as_ptr() as usize;
        madvise_fork(addr, page, ForkAdvice::DontFork).unwrap();
        madvise_fork(addr, page, ForkAdvice::DoFork).unwrap();
        assert_eq!(
            madvise_fork(addr + 1, page, ForkAdvice::DontFork),
            Err(Errno::EINVAL),
            "not page-aligned"
        );
    }
}
