//! Fork protection turned on by `RDMAV_FORK_SAFE` (libibverbs' variable,
//! read at the first device listing), on the mlx5 device model: registered
//! memory and the provider's queue buffers are `MADV_DONTFORK` while they
//! exist (`/proc/self/smaps` shows `dc`, VM_DONTCOPY, and a child forked meanwhile
//! does not have them), and not after. One test: the protection is the
//! process's, turned on once before anything is registered.

use std::sync::Arc;

use uverbs::testing::mlx5::fake_mlx5;
use uverbs::{fork_init, fork_status_with, AccessFlags, Context, CqOptions, ForkStatus};

/// The `VmFlags` of the mapping `addr` is in.
fn vm_flags(addr: usize) -> String {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&addr);
                continue;
            }
        }
        if inside {
            if let Some(f) = line.strip_prefix("VmFlags:") {
                return f.to_string();
            }
        }
    }
    panic!("no mapping holds {addr:#x}");
}

fn dontfork(addr: usize) -> bool {
    vm_flags(addr).split_whitespace().any(|f| f == "dc")
}

/// The mappings marked `dc` (VM_DONTCOPY, what `MADV_DONTFORK` sets) now.
fn dontfork_mappings() -> usize {
    std::fs::read_to_string("/proc/self/smaps")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("VmFlags:") && l.split_whitespace().any(|f| f == "dc"))
        .count()
}

/// Whether a child forked now can read the byte at `addr`: the child
/// `write(2)`s it to a pipe, which fails with `EFAULT` where the child has
/// no mapping (and calls nothing but `write` and `_exit`).
#[allow(unsafe_code)]
fn child_can_read(addr: usize) -> bool {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is two ints for pipe(2) to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child runs only async-signal-safe calls (write, _exit)
    // on memory it inherited, then exits without unwinding.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: `addr` is passed to the kernel only, which checks it.
        let r = unsafe { libc::write(fds[1], addr as *const libc::c_void, 1) };
        // SAFETY: this thread's errno.
        let faulted = r == -1 && unsafe { *libc::__errno_location() } == libc::EFAULT;
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(if faulted { 10 } else { 11 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    // SAFETY: closes the pipe this function opened.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    assert!(libc::WIFEXITED(status), "child status {status:#x}");
    match libc::WEXITSTATUS(status) {
        10 => false,
        11 => true,
        s => panic!("child exit {s}"),
    }
}

#[test]
fn registered_memory_and_queue_buffers_are_kept_from_children_while_they_exist() {
    // Before the first listing, as a program's environment would say it.
    std::env::set_var("RDMAV_FORK_SAFE", "1");
    let model = fake_mlx5();
    let kernel: Arc<dyn uverbs::sys::Kernel> = model.dyn_kernel();
    let ctx = Context::open_with(kernel.clone(), None).unwrap();
    // The model's kernel does not say it copies on fork.
    assert_eq!(fork_status_with(kernel.as_ref()), ForkStatus::Enabled);
    fork_init().unwrap(); // again: harmless

    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(3 * 4096, AccessFlags::LOCAL_WRITE).unwrap();
    let addr = mr.as_ptr().unwrap() as usize;
    assert!(
        dontfork(addr) && dontfork(addr + 2 * 4096),
        "{}",
        vm_flags(addr)
    );
    assert!(!child_can_read(addr + 4096));

    // The program's own mapping, given back unprotected after deregistration.
    let map = memmap2::MmapMut::map_anon(2 * 4096).unwrap();
    let own = map.as_ptr() as usize;
    assert!(child_can_read(own), "an unregistered page is inherited");
    let region = pd.register_owned(map, AccessFlags::LOCAL_WRITE).unwrap();
    assert!(dontfork(own));
    assert!(!child_can_read(own));
    // A second region over the same pages: the first deregistration leaves
    // them protected (counted per page), the second releases them.
    // SAFETY: the pages stay mapped while `twice` exists (dropped first
    // below) and are accessed only through the regions' copies.
    #[allow(unsafe_code)]
    let twice = unsafe { pd.register_raw(own as *mut u8, 4096, AccessFlags::LOCAL_WRITE) }.unwrap();
    twice.destroy().unwrap();
    assert!(dontfork(own), "still registered once");
    let map = region.into_inner().unwrap_or_else(|e| panic!("{e}"));
    assert!(!dontfork(own), "{}", vm_flags(own));
    assert!(child_can_read(own));
    drop(map);

    mr.destroy().unwrap();

    // The provider's buffers: a CQ's queue and doorbell record (counted
    // with no other marked mapping around, which the kernel could merge
    // it with).
    let before = dontfork_mappings();
    let cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    assert_eq!(dontfork_mappings(), before + 1, "the CQ buffer is marked");
    cq.destroy().unwrap();
    assert_eq!(dontfork_mappings(), before, "and released with the CQ");
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}
