//! Fork safety (`ibv_fork_init`, `ibv_is_fork_initialized`), as
//! libibverbs 44 provides it (`libibverbs/memory.c`, `init.c`).
//!
//! A child created by `fork(2)` shares the parent's pages copy-on-write;
//! on kernels before 5.13 the first write to a page pinned by a memory
//! registration then gave the *parent* a new copy, and the device went on
//! using the old page, now the child's. libibverbs' answer is to mark
//! every registered range and every queue buffer `MADV_DONTFORK`, so a
//! child never gets them, once a program asked for it ([`fork_init`], or
//! `RDMAV_FORK_SAFE` / `IBV_FORK_SAFE` in the environment, read when the
//! first device is listed or opened). Ranges are counted page by page
//! (several registrations may share a page), so a page is advised
//! `MADV_DONTFORK` with the first range covering it and `MADV_DOFORK` with
//! the last one's release; `RDMAV_HUGEPAGES_SAFE` rounds ranges to the
//! page size of their mapping (from `/proc/self/smaps`) instead of the
//! system's.
//!
//! Kernels since 5.13 copy pinned pages at fork instead
//! (`RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`): [`fork_status`] is then
//! [`ForkStatus::Unneeded`], whether or not [`fork_init`] ran (libibverbs
//! 44 still keeps the bookkeeping after `ibv_fork_init` there, and so does
//! this crate).
//!
//! What is protected while it is enabled: memory regions
//! ([`crate::ProtectionDomain::alloc_mr`], `register_raw`,
//! `register_owned`; not dma-buf or on-demand ones, as libibverbs) and
//! the buffers providers allocate for the device (mlx5's queues and
//! doorbell records, DevX UMEM memory). Registering or allocating any of
//! them before [`fork_init`] makes a later [`fork_init`] fail with
//! `EINVAL`, as libibverbs' `too_late`: what was registered unprotected
//! could not be told apart at its release.

use std::sync::{Mutex, MutexGuard, Once, PoisonError};

use crate::{
    abi,
    error::{Error, Result},
    netlink::{self, Request},
    sys::{
        memory::{self, ForkAdvice},
        Errno, Kernel,
    },
};

mod ranges;

use ranges::{page_span, Ranges};

/// What [`fork_status`] answers (`enum ibv_fork_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ForkStatus {
    /// `IBV_FORK_DISABLED` (0): no protection; a child may break
    /// registrations on a kernel that does not copy on fork.
    Disabled,
    /// `IBV_FORK_ENABLED` (1): registered memory and queue buffers are
    /// `MADV_DONTFORK`.
    Enabled,
    /// `IBV_FORK_UNNEEDED` (2): the kernel copies pinned pages at fork.
    Unneeded,
}

impl ForkStatus {
    /// The value of `enum ibv_fork_status`.
    pub fn raw(self) -> u32 {
        match self {
            ForkStatus::Disabled => 0,
            ForkStatus::Enabled => 1,
            ForkStatus::Unneeded => 2,
        }
    }
}

/// The process's fork protection.
#[derive(Debug)]
struct State {
    enabled: bool,
    /// A range was protected or released while disabled.
    too_late: bool,
    /// `RDMAV_HUGEPAGES_SAFE`: ranges are rounded to their mapping's pages.
    huge_pages: bool,
    page: usize,
    ranges: Ranges,
}

static STATE: Mutex<State> = Mutex::new(State {
    enabled: false,
    too_late: false,
    huge_pages: false,
    page: 4096,
    ranges: Ranges::new(),
});

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether an environment variable is set to anything but `0`
/// (rdma-core's `check_env`).
fn env_on(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| v != "0")
}

/// Turns on fork protection, like `ibv_fork_init`: from now on memory
/// regions and provider buffers are made `MADV_DONTFORK` while they exist.
/// Reads `RDMAV_HUGEPAGES_SAFE` each time, as libibverbs does. Calling it
/// again is harmless.
///
/// # Errors
///
/// `EINVAL` when memory was already registered or allocated for a device
/// without protection (libibverbs' `too_late`); `ENOSYS` when the kernel
/// refuses `MADV_DONTFORK` (libibverbs' probe of one page).
#[doc(alias = "ibv_fork_init")]
pub fn fork_init() -> Result<()> {
    let op = "ibv_fork_init";
    let mut s = state();
    if env_on("RDMAV_HUGEPAGES_SAFE") {
        s.huge_pages = true;
    }
    if s.enabled {
        return Ok(());
    }
    if s.too_late {
        return Err(Error::sys(op, Errno::EINVAL).with_detail(
            "memory was registered (or queues allocated) before; call fork_init first",
        ));
    }
    let page = memory::page_size().map_err(|e| Error::sys(op, e))?;
    // libibverbs' probe: advise one page (its mapping's page with huge
    // pages) both ways.
    let probe = memmap2::MmapOptions::new()
        .len(page)
        .map_anon()
        .map_err(|e| {
            Error::sys(
                op,
                Errno::from_raw(e.raw_os_error().unwrap_or(libc::ENOMEM)),
            )
        })?;
    let addr = probe.as_ptr() as usize;
    let (base, size) = if s.huge_pages {
        let size = memory::mapping_page_size(addr).unwrap_or(page);
        (addr & !(size - 1), size)
    } else {
        (addr, page)
    };
    let probed = memory::madvise_fork(base, size, ForkAdvice::DontFork)
        .and_then(|()| memory::madvise_fork(base, size, ForkAdvice::DoFork));
    drop(probe);
    if probed.is_err() {
        return Err(Error::sys(op, Errno::ENOSYS).with_detail("madvise(MADV_DONTFORK) failed"));
    }
    s.page = page;
    s.enabled = true;
    Ok(())
}

/// [`fork_init`] when `RDMAV_FORK_SAFE` or `IBV_FORK_SAFE` is set (not to
/// `0`), once per process: libibverbs' `ibverbs_init`, which runs at the
/// first device listing. A failure is reported on stderr, as libibverbs
/// does, and otherwise ignored.
pub(crate) fn init_from_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if env_on("RDMAV_FORK_SAFE") || env_on("IBV_FORK_SAFE") {
            if let Err(e) = fork_init() {
                eprintln!("uverbs: Warning: fork()-safety requested but init failed: {e}");
            }
        }
    });
}

/// Whether the kernel copies pinned pages at fork
/// (`RDMA_NLDEV_CMD_SYS_GET` answers `RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`
/// non-zero; Linux 5.13+). `false` when it cannot be asked (no netlink)
/// or does not say (older kernels), as libibverbs' `get_copy_on_fork`.
pub fn copy_on_fork(kernel: &dyn Kernel) -> bool {
    let mut req = Request::nldev(abi::RDMA_NLDEV_CMD_SYS_GET, netlink::NLM_F_REQUEST, 1);
    let mut cof = false;
    let asked = kernel.netlink_rdma(req.finish(), &mut |msg| {
        for a in netlink::attrs(msg) {
            if a.kind == abi::RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK {
                cof = a.u8().is_some_and(|v| v != 0);
            }
        }
    });
    asked.is_ok() && cof
}

/// The fork status, like `ibv_is_fork_initialized`, asking the running
/// kernel ([`fork_status_with`] for another transport).
#[doc(alias = "ibv_is_fork_initialized")]
pub fn fork_status() -> ForkStatus {
    fork_status_with(crate::sys::linux().as_ref())
}

/// [`fork_status`], asking `kernel` whether it copies on fork:
/// [`ForkStatus::Unneeded`] if so, else whether [`fork_init`] ran.
pub fn fork_status_with(kernel: &dyn Kernel) -> ForkStatus {
    if copy_on_fork(kernel) {
        ForkStatus::Unneeded
    } else if state().enabled {
        ForkStatus::Enabled
    } else {
        ForkStatus::Disabled
    }
}

/// A range made `MADV_DONTFORK`; dropping it releases the range (the
/// pages no other range covers go back to `MADV_DOFORK`). Held by what
/// owns the memory, dropped before the memory is given back.
#[derive(Debug)]
pub(crate) struct ForkGuard {
    start: usize,
    end: usize,
}

impl Drop for ForkGuard {
    fn drop(&mut self) {
        let mut s = state();
        release(&mut s, self.start, self.end, &mut memory::madvise_fork);
    }
}

/// Protects the `len` bytes at `addr` if fork protection is on
/// (libibverbs' `ibv_dontfork_range`): `Some` guard to keep while the
/// memory is registered; `None` when protection is off (which makes a
/// later [`fork_init`] fail, as libibverbs' `too_late`) or there is
/// nothing to protect (no bytes, a NULL address).
///
/// # Errors
///
/// The `madvise` failure (`ENOMEM` for an unmapped range, `EINVAL`), with
/// no page left advised.
pub(crate) fn protect(addr: usize, len: usize) -> Result<Option<ForkGuard>, Errno> {
    let mut s = state();
    if !s.enabled {
        s.too_late = true;
        return Ok(None);
    }
    let page = if s.huge_pages {
        memory::mapping_page_size(addr).unwrap_or(s.page)
    } else {
        s.page
    };
    let Some((start, end)) = page_span(addr, len, page) else {
        return Ok(None);
    };
    protect_span(&mut s, start, end, &mut memory::madvise_fork)?;
    Ok(Some(ForkGuard { start, end }))
}

/// The `madvise` a span is advised with.
type Advise<'a> = dyn FnMut(usize, usize, ForkAdvice) -> Result<(), Errno> + 'a;

/// Counts `[start, end)` once more, advising what was not covered
/// `MADV_DONTFORK`; if that fails, advises back what it advised and counts
/// nothing (libibverbs' roll-back).
fn protect_span(
    s: &mut State,
    start: usize,
    end: usize,
    advise: &mut Advise<'_>,
) -> Result<(), Errno> {
    let new = s.ranges.uncovered(start, end);
    for (i, &(a, b)) in new.iter().enumerate() {
        if let Err(e) = advise(a, b - a, ForkAdvice::DontFork) {
            for &(a, b) in &new[..i] {
                undo(a, b, s.page, advise);
            }
            return Err(e);
        }
    }
    s.ranges.add(start, end);
    Ok(())
}

/// Counts `[start, end)` once less, advising the pages no range covers
/// any more `MADV_DOFORK`.
fn release(s: &mut State, start: usize, end: usize, advise: &mut Advise<'_>) {
    for (a, b) in s.ranges.remove(start, end) {
        undo(a, b, s.page, advise);
    }
}

/// `MADV_DOFORK` on `[a, b)`; if the whole span fails, page by page
/// (libibverbs' `do_madvise`); failures are ignored, as there.
fn undo(a: usize, b: usize, page: usize, advise: &mut Advise<'_>) {
    if advise(a, b - a, ForkAdvice::DoFork).is_err() {
        let mut p = a;
        while p < b {
            let _ = advise(p, page.min(b - p), ForkAdvice::DoFork);
            p += page;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> State {
        State {
            enabled: true,
            too_late: false,
            huge_pages: false,
            page: 4096,
            ranges: Ranges::new(),
        }
    }

    /// Records every advice; fails the `fail`-th call (counting from 0).
    fn recorder(
        log: &mut Vec<(usize, usize, ForkAdvice)>,
        fail: Option<usize>,
    ) -> impl FnMut(usize, usize, ForkAdvice) -> Result<(), Errno> + '_ {
        move |a, len, advice| {
            let n = log.len();
            log.push((a, len, advice));
            if Some(n) == fail {
                Err(Errno::ENOMEM)
            } else {
                Ok(())
            }
        }
    }

    const P: usize = 4096;
    use ForkAdvice::{DoFork, DontFork};

    #[test]
    fn pages_are_advised_at_the_first_protection_and_the_last_release() {
        let mut s = enabled();
        let mut log = Vec::new();
        protect_span(&mut s, P, 3 * P, &mut recorder(&mut log, None)).unwrap();
        protect_span(&mut s, 2 * P, 4 * P, &mut recorder(&mut log, None)).unwrap();
        release(&mut s, P, 3 * P, &mut recorder(&mut log, None));
        release(&mut s, 2 * P, 4 * P, &mut recorder(&mut log, None));
        assert_eq!(
            log,
            vec![
                (P, 2 * P, DontFork),
                (3 * P, P, DontFork),
                (P, P, DoFork),
                (2 * P, 2 * P, DoFork),
            ]
        );
        assert!(s.ranges.is_empty());
    }

    #[test]
    fn a_failed_protection_advises_back_what_it_advised_and_counts_nothing() {
        let mut s = enabled();
        let mut log = Vec::new();
        protect_span(&mut s, P, 2 * P, &mut recorder(&mut log, None)).unwrap();
        protect_span(&mut s, 4 * P, 5 * P, &mut recorder(&mut log, None)).unwrap();
        log.clear();
        // [0, 6P) has three gaps: the second madvise fails.
        let e = protect_span(&mut s, 0, 6 * P, &mut recorder(&mut log, Some(1))).unwrap_err();
        assert_eq!(e, Errno::ENOMEM);
        assert_eq!(
            log,
            vec![(0, P, DontFork), (2 * P, 2 * P, DontFork), (0, P, DoFork)]
        );
        assert_eq!(
            (s.ranges.count(0), s.ranges.count(P), s.ranges.count(3 * P)),
            (0, 1, 0)
        );
    }

    #[test]
    fn a_failed_release_is_retried_page_by_page() {
        let mut s = enabled();
        let mut log = Vec::new();
        protect_span(&mut s, P, 3 * P, &mut recorder(&mut log, None)).unwrap();
        log.clear();
        release(&mut s, P, 3 * P, &mut recorder(&mut log, Some(0)));
        assert_eq!(
            log,
            vec![(P, 2 * P, DoFork), (P, P, DoFork), (2 * P, P, DoFork)]
        );
        assert!(s.ranges.is_empty());
    }

    #[test]
    fn the_status_values_are_verbs_hs() {
        assert_eq!(ForkStatus::Disabled.raw(), 0);
        assert_eq!(ForkStatus::Enabled.raw(), 1);
        assert_eq!(ForkStatus::Unneeded.raw(), 2);
    }

    /// The fake kernel answers netlink as it is told: COPY_ON_FORK 1 is
    /// Unneeded; no answer (the model's shim refuses the socket) is the
    /// process's state.
    #[test]
    fn a_copy_on_fork_kernel_makes_protection_unneeded() {
        use crate::testing::kernel::FakeKernel;
        let k = FakeKernel::new();
        k.on_netlink(|_| {
            let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_SYS_GET, 0, 1);
            m.u8(abi::RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, 1);
            Ok(vec![m.finish().to_vec()])
        });
        assert!(copy_on_fork(&k));
        assert_eq!(fork_status_with(&k), ForkStatus::Unneeded);
        let k = FakeKernel::new();
        k.on_netlink(|_| Err(Errno::EPROTONOSUPPORT));
        assert!(!copy_on_fork(&k));
        assert_ne!(fork_status_with(&k), ForkStatus::Unneeded);
    }
}
