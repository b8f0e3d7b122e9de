//! `LD_PRELOAD` shim: unmodified rdma-core userspace (libibverbs, libmlx5,
//! ibverbs-utils, pyverbs) against uverbs' mlx5 device model
//! (`uverbs::testing::mlx5`), in the program's own process.
//!
//! - An ELF constructor builds the model, writes its sysfs tree into a
//!   temporary directory and points `SYSFS_PATH` at it, before libibverbs
//!   looks for devices. `socket(AF_NETLINK, *, NETLINK_RDMA)` is refused
//!   with `EPROTONOSUPPORT`, so libibverbs discovers through sysfs.
//! - `open`/`stat` of `/dev/infiniband/uverbs0` get `/dev/null`: the
//!   command fd is `open("/dev/null", O_PATH)`, so any call the shim does
//!   not catch fails with `EBADF`, and `fstat` reports the character device
//!   1:3 that sysfs `dev` names.
//! - `ioctl(RDMA_VERBS_IOCTL)` on a command fd is decoded with the 6.1
//!   attribute specs (`decode.rs`, `specs.rs`) into the model's typed
//!   commands, and a plain `write()` command on it as the 6.1
//!   `ib_uverbs_write` decodes it (`plain_write.rs`); `mmap` of it maps
//!   what the model maps; `read`, `fcntl`
//!   and `close` of the fds the model handed out (completion channels,
//!   the async event fd, DevX channels) go to the model.
//! - Every interposed call is async-signal-safe where libc's is: fds are
//!   looked up without a lock (`fd_table.rs`), and the shim holds locks
//!   only with every signal blocked; blocking reads sleep where a signal
//!   can interrupt them (`signals.rs`).
//! - A child forked without exec gets a model of its own when it opens the
//!   device (`fork.rs`).
//! - At exit the model's violations are appended to the file named by
//!   `UVERBS_MODEL_REPORT` (stderr when unset), one per line, so a harness
//!   can fail a run.
//!
//! `UVERBS_PRELOAD_TRACE=1` logs every command on stderr.
//!
//! Variadic C functions (`open`, `openat`, `ioctl`, `fcntl`) are defined
//! with their optional argument as a fixed one: on x86-64 SysV the
//! variadic and the fixed argument travel in the same register, and a
//! caller that passes none leaves garbage the shim never reads.
#![allow(unsafe_code)] // exported C symbols (`no_mangle`), the ELF constructor, raw fds

mod decode;
mod fd_table;
mod fork;
mod plain_write;
mod real;
mod signals;
mod specs;
mod sysfs;
mod two_stacks;

use std::{
    ffi::CStr,
    io::Write,
    os::fd::BorrowedFd,
    path::PathBuf,
    ptr::null_mut,
    sync::{
        atomic::{AtomicPtr, Ordering},
        Arc, Mutex, MutexGuard, OnceLock,
    },
};

use libc::{c_char, c_int, c_ulong, c_void, mode_t, off_t, size_t, ssize_t};
use uverbs::{
    sys::{Errno, Kernel, Protection},
    testing::mlx5::{self as model, HcaThread, Mlx5Model},
};

use fd_table::Fd;
use real::{in_shim, Guard};
use signals::{Critical, Ready};

/// The model of one process and the thread that runs its HCA.
#[derive(Debug)]
struct Model {
    model: Arc<Mlx5Model>,
    kernel: Arc<dyn Kernel>,
    hca: Mutex<Option<HcaThread>>,
    /// The process that made it.
    pid: u32,
}

impl Model {
    fn new() -> Model {
        // An identity of its own even alone: two processes must never
        // have the same GIDs (issue 41).
        let model = model::fake_mlx5_with(model::Options {
            fabric: fabric_dir(),
            identity: Some(identity()),
            ..model::Options::default()
        });
        let kernel = model.dyn_kernel();
        Model {
            model,
            kernel,
            hca: Mutex::new(None),
            pid: std::process::id(),
        }
    }
}

/// The fabric this process's HCA joins (`uverbs::testing::mlx5::fabric`):
/// `$UVERBS_FABRIC`, else a default every process of the user shares;
/// `UVERBS_FABRIC=off` keeps the HCA alone.
fn fabric_dir() -> Option<PathBuf> {
    match std::env::var_os("UVERBS_FABRIC") {
        Some(v) if v == "off" => None,
        _ => Some(model::fabric::default_dir()),
    }
}

/// The identity number this process's HCA asks for:
/// `$UVERBS_MODEL_IDENTITY` (decimal, or hex with `0x`; e.g. `0x123456`,
/// the lone model's, for runs that compare processes' outputs), else the
/// process id.
fn identity() -> u32 {
    std::env::var("UVERBS_MODEL_IDENTITY")
        .ok()
        .and_then(|v| match v.strip_prefix("0x") {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        })
        .unwrap_or_else(std::process::id)
}

#[derive(Debug)]
struct Shim {
    sysfs: PathBuf,
    /// The process that wrote the sysfs tree; it removes it at exit.
    sysfs_owner: u32,
    trace: bool,
    /// `UVERBS_MODEL_HCA=manual`: no HCA thread; the program calls
    /// [`uverbs_model_process`].
    manual_hca: bool,
    /// This process's model, never freed: made by the constructor; null in
    /// a child forked without exec (`fork.rs`) until the child opens the
    /// device, which makes it a model of its own.
    model: AtomicPtr<Model>,
}

static SHIM: OnceLock<Shim> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn shim() -> Option<&'static Shim> {
    SHIM.get()
}

fn set_errno(e: Errno) {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = e as c_int };
}

impl Shim {
    /// This process's model, if it has one.
    fn model(&self) -> Option<&'static Model> {
        let p = self.model.load(Ordering::Acquire);
        // SAFETY: a non-null pointer here came from `Box::into_raw` (init,
        // `model_or_new`) and is never freed.
        unsafe { p.as_ref() }
    }

    /// This process's model, made now in a forked child that has none.
    fn model_or_new(&self) -> &'static Model {
        if let Some(m) = self.model() {
            return m;
        }
        let fresh = Box::into_raw(Box::new(Model::new()));
        match self
            .model
            .compare_exchange(null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: `fresh` is live and now never freed.
            Ok(_) => unsafe { &*fresh },
            Err(winner) => {
                // SAFETY: `fresh` lost the race and was never shared;
                // `winner` is live and never freed.
                unsafe {
                    drop(Box::from_raw(fresh));
                    &*winner
                }
            }
        }
    }

    /// Starts `m`'s HCA at the first device open, unless the program runs
    /// the device itself (`UVERBS_MODEL_HCA=manual`, [`uverbs_model_process`]).
    /// Inside a [`Critical`]: the thread inherits a mask that blocks every
    /// signal, so the program's handlers never run on it.
    fn start_hca(&self, m: &Model) {
        if self.manual_hca {
            return;
        }
        let mut h = lock(&m.hca);
        if h.is_none() {
            *h = Some(m.model.spawn_hca());
        }
    }
}

/// Runs the device once over everything rung so far (WQEs, doorbells,
/// arms) and returns the WQEs it executed: for programs that run the model
/// without its HCA thread (`UVERBS_MODEL_HCA=manual`), such as the
/// libmlx5 rows of `benches/mlx5.sh`, whose timed loops then have the
/// machine to themselves. Found with `dlsym(RTLD_DEFAULT, ...)`.
#[no_mangle]
pub extern "C" fn uverbs_model_process() -> usize {
    let _c = Critical::enter();
    shim()
        .and_then(Shim::model)
        .map_or(0, |m| m.model.process())
}

/// Makes the next `n` event deliveries to data-mode DevX channels fail as
/// the kernel's `GFP_ATOMIC` allocation can (the event is lost and the
/// channel's next read is `EOVERFLOW`): for test programs, found with
/// `dlsym(RTLD_DEFAULT, ...)` (`capi/tests/c/devx_events.c`).
#[no_mangle]
pub extern "C" fn uverbs_model_devx_fail_event_allocs(n: u32) {
    let _c = Critical::enter();
    if let Some(m) = shim().and_then(Shim::model) {
        m.model.devx_fail_event_allocs(n);
    }
}

/// While `on` is not 0, the model refuses the destroys of CQs, QPs, SRQs,
/// MRs, PDs, AHs and DevX objects with `EBUSY`, leaving them in place, as
/// the kernel answers for an object something else uses
/// (`Mlx5Model::refuse_destroys`): for test programs, found with `dlsym`
/// (`capi/tests/c/destroy.c`).
#[no_mangle]
pub extern "C" fn uverbs_model_refuse_destroys(on: i32) {
    let _c = Critical::enter();
    if let Some(m) = shim().and_then(Shim::model) {
        m.model.refuse_destroys(on != 0);
    }
}

/// Destroys every DevX command fd and event channel as device removal
/// does (their reads then answer `EIO`, or `EAGAIN` when non-blocking, and
/// `poll` reports `POLLRDHUP`): for test programs, found with `dlsym`.
#[no_mangle]
pub extern "C" fn uverbs_model_devx_destroy_fds() {
    let _c = Critical::enter();
    if let Some(m) = shim().and_then(Shim::model) {
        m.model.devx_destroy_fds();
    }
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

extern "C" fn init() {
    let _g = Guard::enter();
    let m = Model::new();
    let dir = std::env::temp_dir().join(format!("uverbs-model-sysfs.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = sysfs::write_tree(&*m.kernel, &dir) {
        eprintln!(
            "uverbs-model-preload: writing the sysfs tree to {}: {e}",
            dir.display()
        );
        return;
    }
    // The constructor runs before the program's threads exist.
    std::env::set_var("SYSFS_PATH", &dir);
    let trace = std::env::var_os("UVERBS_PRELOAD_TRACE").is_some_and(|v| v == "1");
    let _ = SHIM.set(Shim {
        sysfs: dir,
        sysfs_owner: std::process::id(),
        manual_hca: std::env::var_os("UVERBS_MODEL_HCA").is_some_and(|v| v == "manual"),
        trace,
        model: AtomicPtr::new(Box::into_raw(Box::new(m))),
    });
    fork::install();
}

extern "C" fn fini() {
    let _g = Guard::enter();
    let Some(s) = shim() else { return };
    let pid = std::process::id();
    if s.sysfs_owner == pid {
        // A forked child leaves the tree to its parent.
        let _ = std::fs::remove_dir_all(&s.sysfs);
    }
    // Only a process that opened the device reports (its children that
    // did not, such as a shell, have nothing to say); a forked child that
    // did reports what its own model saw.
    let Some(m) = s.model().filter(|m| m.pid == pid) else {
        return;
    };
    let hca = lock(&m.hca).take();
    let opened = hca.is_some();
    drop(hca); // a last pass, then the thread stops
    m.model.leave_fabric(); // its socket goes
    if !opened {
        return;
    }
    let lines: Vec<String> = m
        .model
        .violations()
        .into_iter()
        .map(|v| format!("pid {pid}: violation: {v}"))
        .collect();
    for d in m.model.ignored_doorbells() {
        eprintln!("uverbs-model-preload: pid {pid}: ignored doorbell: {d}");
    }
    if lines.is_empty() {
        return;
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    match std::env::var_os("UVERBS_MODEL_REPORT") {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path);
            if let Ok(mut f) = f {
                let _ = f.write_all(text.as_bytes());
            } else {
                eprint!("{text}");
            }
        }
        None => eprint!("{text}"),
    }
}

/// Whether `path` is a uverbs device node; `Some(true)` for the model's
/// `uverbs0`, `Some(false)` for another one (which does not exist).
fn uverbs_path(path: *const c_char) -> Option<bool> {
    if path.is_null() || in_shim() {
        return None;
    }
    // SAFETY: the program passed a NUL-terminated path.
    let p = unsafe { CStr::from_ptr(path) }.to_bytes();
    let rest = p.strip_prefix(b"/dev/infiniband/uverbs")?;
    shim()?;
    Some(rest == b"0")
}

const DEV_NULL: &CStr = c"/dev/null";

/// Opens a command fd (of this process's model: in a forked child, a
/// model of its own).
fn open_device(flags: c_int) -> c_int {
    let Some(s) = shim() else { return -1 };
    let _c = Critical::enter();
    // SAFETY: a static path.
    let fd = unsafe {
        real::open(
            DEV_NULL.as_ptr(),
            libc::O_PATH | (flags & libc::O_CLOEXEC),
            0,
        )
    };
    if fd < 0 {
        return fd;
    }
    if !fd_table::set(fd, Fd::Cmd) {
        // SAFETY: the fd just opened, not handed out.
        unsafe { real::close(fd) };
        set_errno(Errno::EMFILE);
        return -1;
    }
    s.start_hca(s.model_or_new());
    if s.trace {
        eprintln!("uverbs-model-preload: open uverbs0 -> fd {fd}");
    }
    fd
}

fn no_such_device() -> c_int {
    set_errno(Errno::ENOENT);
    -1
}

/// # Safety
///
/// `open(2)`.
#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    match uverbs_path(path) {
        Some(true) => open_device(flags),
        Some(false) => no_such_device(),
        // SAFETY: the program's arguments.
        None => unsafe { real::open(path, flags, mode) },
    }
}

/// # Safety
///
/// `open64(2)`.
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    match uverbs_path(path) {
        Some(true) => open_device(flags),
        Some(false) => no_such_device(),
        // SAFETY: the program's arguments.
        None => unsafe { real::open64(path, flags, mode) },
    }
}

/// # Safety
///
/// `openat(2)` (the device path is absolute, so `dirfd` does not matter).
#[no_mangle]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    match uverbs_path(path) {
        Some(true) => open_device(flags),
        Some(false) => no_such_device(),
        // SAFETY: the program's arguments.
        None => unsafe { real::openat(dirfd, path, flags, mode) },
    }
}

/// # Safety
///
/// `openat64(2)`.
#[no_mangle]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    match uverbs_path(path) {
        Some(true) => open_device(flags),
        Some(false) => no_such_device(),
        // SAFETY: the program's arguments.
        None => unsafe { real::openat64(dirfd, path, flags, mode) },
    }
}

/// # Safety
///
/// glibc's fortified `open` (`-D_FORTIFY_SOURCE`).
#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    match uverbs_path(path) {
        Some(true) => open_device(flags),
        Some(false) => no_such_device(),
        // SAFETY: the program's arguments.
        None => unsafe { real::__open_2(path, flags) },
    }
}

/// # Safety
///
/// glibc's fortified `open64`.
#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    match uverbs_path(path) {
        Some(true) => open_device(flags),
        Some(false) => no_such_device(),
        // SAFETY: the program's arguments.
        None => unsafe { real::__open64_2(path, flags) },
    }
}

/// The path `stat` looks at: `/dev/null` for the device.
fn stat_path(path: *const c_char) -> Result<*const c_char, c_int> {
    match uverbs_path(path) {
        Some(true) => Ok(DEV_NULL.as_ptr()),
        Some(false) => Err(no_such_device()),
        None => Ok(path),
    }
}

macro_rules! stat_fn {
    ($name:ident($($pre:ident: $pty:ty),*; $buf:ty; $($post:ident: $qty:ty),*)) => {
        /// # Safety
        ///
        /// The libc function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($pre: $pty,)* path: *const c_char, buf: $buf $(, $post: $qty)*) -> c_int {
            match stat_path(path) {
                // SAFETY: the program's arguments, or a static path.
                Ok(p) => unsafe { real::$name($($pre,)* p, buf $(, $post)*) },
                Err(r) => r,
            }
        }
    };
}

stat_fn!(stat(; *mut libc::stat;));
stat_fn!(stat64(; *mut libc::stat64;));
stat_fn!(lstat(; *mut libc::stat;));
stat_fn!(lstat64(; *mut libc::stat64;));
stat_fn!(fstatat(dirfd: c_int; *mut libc::stat; flags: c_int));
stat_fn!(fstatat64(dirfd: c_int; *mut libc::stat64; flags: c_int));
stat_fn!(__xstat(ver: c_int; *mut libc::stat;));
stat_fn!(__xstat64(ver: c_int; *mut libc::stat64;));

/// `NETLINK_RDMA` (`include/uapi/linux/netlink.h`).
const NETLINK_RDMA: c_int = 20;

/// # Safety
///
/// `socket(2)`.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    if domain == libc::AF_NETLINK && protocol == NETLINK_RDMA && !in_shim() && shim().is_some() {
        // As a kernel without ib_core: libibverbs then reads sysfs.
        set_errno(Errno::EPROTONOSUPPORT);
        return -1;
    }
    // SAFETY: the program's arguments.
    unsafe { real::socket(domain, ty, protocol) }
}

/// The shim and the kind of `fd`, unless the call is the shim's own. No
/// lock: a signal handler may ask in the middle of another call
/// (`fd_table.rs`).
fn tracked(fd: c_int) -> Option<(&'static Shim, Fd)> {
    if in_shim() {
        return None;
    }
    let s = shim()?;
    Some((s, fd_table::get(fd)?))
}

/// The model behind a command or event fd of this process (every such fd
/// was made by it: a forked child's inherited ones are [`Fd::Inherited`]).
fn model_of(s: &Shim) -> Result<&'static Model, Errno> {
    s.model().ok_or(Errno::EIO)
}

/// Records the fds a command created (completion channels, async event
/// and DevX fds); one beyond the fd table is closed and the command fails
/// with `EMFILE`.
fn track_new(m: &Model, fds: Vec<c_int>) -> Result<(), Errno> {
    let mut result = Ok(());
    for f in fds {
        if !fd_table::set(f, Fd::Event { nonblocking: false }) {
            m.model.kernel.forget_fd(f);
            // SAFETY: the model's new fd, which the shim cannot track.
            unsafe { real::close(f) };
            result = Err(Errno::EMFILE);
        }
    }
    result
}

/// The answer to a call on an fd a forked child inherited: its objects are
/// the parent's model's, out of the child's reach (`fork.rs`).
fn inherited<T>(fail: T) -> T {
    set_errno(Errno::EIO);
    fail
}

/// # Safety
///
/// `ioctl(2)`; for `RDMA_VERBS_IOCTL` on a command fd, `arg` is an
/// `ib_uverbs_ioctl_hdr` as the kernel reads it.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    match tracked(fd) {
        Some((s, Fd::Cmd)) => {
            let _c = Critical::enter();
            if request != decode::RDMA_VERBS_IOCTL {
                set_errno(Errno::ENOTTY);
                return -1;
            }
            let m = match model_of(s) {
                Ok(m) => m,
                Err(e) => {
                    set_errno(e);
                    return -1;
                }
            };
            // SAFETY: the fd is open (tracked until closed); `arg` is the
            // program's command, read as the kernel reads it.
            let r =
                unsafe { decode::ioctl(&*m.kernel, BorrowedFd::borrow_raw(fd), arg.cast::<u8>()) };
            if s.trace {
                // SAFETY: the header's object and method ids, when present.
                let (o, m) = unsafe {
                    if arg.is_null() {
                        (0, 0)
                    } else {
                        (
                            std::ptr::read_unaligned(arg.cast::<u8>().add(2).cast::<u16>()),
                            std::ptr::read_unaligned(arg.cast::<u8>().add(4).cast::<u16>()),
                        )
                    }
                };
                eprintln!(
                    "uverbs-model-preload: ioctl fd {fd} object {o:#x} method {m:#x} -> {r:?}"
                );
            }
            match r.and_then(|fds| track_new(m, fds)) {
                Ok(()) => 0,
                Err(e) => {
                    set_errno(e);
                    -1
                }
            }
        }
        Some((_, Fd::Inherited)) => inherited(-1),
        // SAFETY: the program's arguments.
        _ => unsafe { real::ioctl(fd, request, arg) },
    }
}

/// # Safety
///
/// `write(2)`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    match tracked(fd) {
        Some((s, Fd::Cmd)) => {
            let _c = Critical::enter();
            let m = match model_of(s) {
                Ok(m) => m,
                Err(e) => {
                    set_errno(e);
                    return -1;
                }
            };
            // SAFETY: the fd is open (tracked until closed); `buf` is the
            // program's command of `n` bytes, read as the kernel reads it.
            let r = unsafe {
                plain_write::write(&*m.kernel, BorrowedFd::borrow_raw(fd), buf.cast::<u8>(), n)
            };
            if s.trace {
                let cmd = if buf.is_null() || n < 4 {
                    0
                } else {
                    // SAFETY: the program's buffer of `n` bytes.
                    unsafe { std::ptr::read_unaligned(buf.cast::<u32>()) }
                };
                eprintln!("uverbs-model-preload: write fd {fd} command {cmd:#x} -> {r:?}");
            }
            match r.and_then(|fds| track_new(m, fds)) {
                Ok(()) => n as ssize_t,
                Err(e) => {
                    set_errno(e);
                    -1
                }
            }
        }
        Some((_, Fd::Inherited)) => inherited(-1),
        // SAFETY: the program's arguments.
        _ => unsafe { real::write(fd, buf, n) },
    }
}

/// `read` of an event fd: the model's record, after a wait the program's
/// signals can interrupt when the fd is blocking (`signals.rs`).
///
/// # Safety
///
/// `buf` has `n` writable bytes (or `n` is 0).
unsafe fn read_event(
    s: &Shim,
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    nonblocking: bool,
) -> ssize_t {
    if buf.is_null() && n > 0 {
        set_errno(Errno::EFAULT);
        return -1;
    }
    // The kernel never touches a 0-byte buffer (NULL included): a record
    // does not fit in it (`ib_uverbs_event_read`: EINVAL), and an empty
    // queue answers EAGAIN or is waited on.
    let out: &mut [u8] = if n == 0 {
        &mut []
    } else {
        // SAFETY: the program's buffer of `n` bytes, not NULL.
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) }
    };
    // SAFETY: the fd is open (tracked until closed).
    let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
    let r = loop {
        let ready = if nonblocking {
            Ready::NonBlocking
        } else {
            // Sleeps until a record is queued, as the kernel's event files
            // do, with no lock held and signals deliverable.
            match signals::wait_readable(fd) {
                Ok(r) => r,
                Err(e) => break Err(e),
            }
        };
        let _c = Critical::enter();
        let m = match model_of(s) {
            Ok(m) => m,
            Err(e) => break Err(e),
        };
        let r = if ready == Ready::NoWriter {
            // The model dropped the fd (a destroyed DevX channel): its
            // reads answer at once.
            m.kernel.read(bfd, out)
        } else {
            m.model.kernel.try_read(bfd, out)
        };
        match r {
            // Another reader took the record first: sleep again.
            Err(Errno::EAGAIN) if ready == Ready::Readable => continue,
            r => break r,
        }
    };
    match r {
        Ok(n) => n as ssize_t,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// # Safety
///
/// `read(2)`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    match tracked(fd) {
        Some((_, Fd::Cmd)) => {
            set_errno(Errno::EINVAL);
            -1
        }
        // SAFETY: the program's buffer of `n` bytes.
        Some((s, Fd::Event { nonblocking })) => unsafe { read_event(s, fd, buf, n, nonblocking) },
        Some((_, Fd::Inherited)) => inherited(-1),
        // SAFETY: the program's arguments.
        None => unsafe { real::read(fd, buf, n) },
    }
}

/// Forgets a tracked fd the program closes or replaces.
fn forget(s: &Shim, fd: c_int) {
    if let Some(Fd::Event { .. }) = fd_table::clear(fd) {
        let _c = Critical::enter();
        if let Some(m) = s.model() {
            m.model.kernel.forget_fd(fd);
        }
    }
}

/// # Safety
///
/// `close(2)`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if let Some((s, _)) = tracked(fd) {
        forget(s, fd);
    }
    // SAFETY: the program's argument.
    unsafe { real::close(fd) }
}

/// Tracks a duplicate of a tracked fd (`ibv_import_device` is given a
/// `dup` of a command fd); `r` is what the real call returned.
fn track_dup(kind: Fd, r: c_int) -> c_int {
    if r >= 0 && !fd_table::set(r, kind) {
        // SAFETY: the duplicate just made, which the shim cannot track.
        unsafe { real::close(r) };
        set_errno(Errno::EMFILE);
        return -1;
    }
    r
}

/// Whether a duplicate of this kind of fd is tracked: a command fd's (its
/// commands are the model's) and an inherited one's (whose commands fail).
fn dup_kind(kind: Fd) -> Option<Fd> {
    match kind {
        Fd::Cmd | Fd::Inherited => Some(kind),
        Fd::Event { .. } => None,
    }
}

/// # Safety
///
/// `dup(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: the program's argument.
    let r = unsafe { real::dup(fd) };
    match tracked(fd).and_then(|(_, k)| dup_kind(k)) {
        Some(k) => track_dup(k, r),
        None => r,
    }
}

/// # Safety
///
/// `dup2(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, to: c_int) -> c_int {
    if let Some(s) = shim().filter(|_| !in_shim() && fd != to) {
        forget(s, to);
    }
    // SAFETY: the program's arguments.
    let r = unsafe { real::dup2(fd, to) };
    match tracked(fd).and_then(|(_, k)| dup_kind(k)) {
        Some(k) => track_dup(k, r),
        None => r,
    }
}

/// # Safety
///
/// `dup3(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, to: c_int, flags: c_int) -> c_int {
    if let Some(s) = shim().filter(|_| !in_shim() && fd != to) {
        forget(s, to);
    }
    // SAFETY: the program's arguments.
    let r = unsafe { real::dup3(fd, to, flags) };
    match tracked(fd).and_then(|(_, k)| dup_kind(k)) {
        Some(k) => track_dup(k, r),
        None => r,
    }
}

/// `fcntl` on the shim's fds: `O_NONBLOCK` of a model fd is the model's
/// business (its reads), the real fd keeps the flags the model gave it.
fn fcntl_tracked(s: &Shim, fd: c_int, kind: Fd, cmd: c_int, arg: c_ulong) -> Option<c_int> {
    match (kind, cmd) {
        (Fd::Event { .. }, libc::F_SETFL) => {
            let nb = arg & libc::O_NONBLOCK as c_ulong != 0;
            let _c = Critical::enter();
            if fd_table::set(fd, Fd::Event { nonblocking: nb }) {
                if let Some(m) = s.model() {
                    // SAFETY: the fd is open.
                    let _ = m
                        .kernel
                        .set_nonblocking(unsafe { BorrowedFd::borrow_raw(fd) }, nb);
                }
            }
            Some(0)
        }
        (Fd::Event { nonblocking }, libc::F_GETFL) => {
            // SAFETY: F_GETFL takes no argument.
            let fl = unsafe { real::fcntl(fd, libc::F_GETFL, 0) };
            if fl < 0 {
                return Some(fl);
            }
            let fl = fl & !libc::O_NONBLOCK;
            Some(if nonblocking {
                fl | libc::O_NONBLOCK
            } else {
                fl
            })
        }
        // An O_PATH fd refuses F_SETFL; a uverbs fd takes it.
        (Fd::Cmd, libc::F_SETFL) => Some(0),
        (Fd::Cmd | Fd::Inherited, libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) => {
            // SAFETY: duplicating the fd, as the program asked.
            let r = unsafe { real::fcntl(fd, cmd, arg) };
            Some(track_dup(kind, r))
        }
        _ => None,
    }
}

/// # Safety
///
/// `fcntl(2)`.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    if let Some((s, kind)) = tracked(fd) {
        if let Some(r) = fcntl_tracked(s, fd, kind, cmd, arg) {
            return r;
        }
    }
    // SAFETY: the program's arguments.
    unsafe { real::fcntl(fd, cmd, arg) }
}

/// # Safety
///
/// glibc's `fcntl64` (what `fcntl` is with 64-bit `off_t`).
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    if let Some((s, kind)) = tracked(fd) {
        if let Some(r) = fcntl_tracked(s, fd, kind, cmd, arg) {
            return r;
        }
    }
    // SAFETY: the program's arguments.
    unsafe { real::fcntl64(fd, cmd, arg) }
}

/// `mmap` of a command fd: what the model maps at `offset` (UAR pages, the
/// clock page). The mapping is handed over; `munmap` is libc's own.
fn mmap_device(
    s: &Shim,
    fd: c_int,
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    off: off_t,
) -> *mut c_void {
    let _c = Critical::enter();
    let m = match model_of(s) {
        Ok(m) => m,
        Err(e) => {
            set_errno(e);
            return libc::MAP_FAILED;
        }
    };
    if !addr.is_null() && flags & libc::MAP_FIXED != 0 || flags & libc::MAP_SHARED == 0 || off < 0 {
        set_errno(Errno::EINVAL);
        return libc::MAP_FAILED;
    }
    let p = if prot & libc::PROT_WRITE != 0 {
        Protection::ReadWrite
    } else {
        Protection::ReadOnly
    };
    // SAFETY: the fd is open (tracked until closed).
    let r = m
        .kernel
        .mmap(unsafe { BorrowedFd::borrow_raw(fd) }, len, off as u64, p);
    if s.trace {
        eprintln!(
            "uverbs-model-preload: mmap fd {fd} len {len} offset {off:#x} -> {:?}",
            r.as_ref().map(|m| m.as_ptr())
        );
    }
    match r {
        Ok(m) => {
            let ptr = m.as_mut_ptr().cast::<c_void>();
            // The program owns the mapping now and unmaps it with munmap.
            std::mem::forget(m);
            ptr
        }
        Err(e) => {
            set_errno(e);
            libc::MAP_FAILED
        }
    }
}

/// # Safety
///
/// `mmap(2)`.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    match tracked(fd) {
        Some((s, Fd::Cmd)) => return mmap_device(s, fd, addr, len, prot, flags, off),
        Some((_, Fd::Inherited)) => return inherited(libc::MAP_FAILED),
        _ => {}
    }
    // SAFETY: the program's arguments.
    unsafe { real::mmap(addr, len, prot, flags, fd, off) }
}

/// # Safety
///
/// `mmap64` (the same as `mmap` on x86-64).
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    // SAFETY: the same call (`off_t` is 64 bits on x86-64).
    unsafe { mmap(addr, len, prot, flags, fd, off) }
}
