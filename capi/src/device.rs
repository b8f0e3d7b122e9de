//! Devices: `ibv_get_device_list`, `ibv_open_device`, the device's names
//! and sysfs files, fork status.
//!
//! Every device found is one [`Device`] that lives for the process, as
//! libibverbs keeps its device list: a later `ibv_get_device_list` that
//! finds the same device (same uverbs node, netlink index, name and device
//! number) hands out the same pointer, so a program may keep a device
//! pointer past `ibv_free_device_list`, as it may with libibverbs while it
//! holds a context. The `struct ibv_device` is filled as libibverbs' init.c
//! fills it; the kernel is reached only through [`kernel`] (uverbs' Linux
//! transport; a fake one in this crate's tests).

#![allow(unsafe_code)]

use core::ffi::{c_char, c_int, CStr};
use std::{
    ffi::CString,
    os::{
        fd::{AsFd, AsRawFd, FromRawFd},
        unix::ffi::OsStringExt,
    },
    sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError},
};

use uverbs::{
    sys::{Errno, Kernel},
    DeviceInfo, NodeType,
};

use crate::{
    context::Context,
    errno,
    layout::context::{ibv_context, ibv_device, IBV_SYSFS_NAME_MAX, IBV_SYSFS_PATH_MAX},
};

/// One RDMA device: what the entries of `ibv_get_device_list` point to.
#[repr(C)]
#[derive(Debug)]
pub struct Device {
    /// The C part (the program's pointer is its address).
    pub c: ibv_device,
    /// What uverbs found.
    pub info: DeviceInfo,
}

/// Every device found so far; entries are never removed (they are leaked
/// boxes), so a `&'static Device` from it stays valid.
static DEVICES: Mutex<Vec<&'static Device>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<&'static Device>> {
    DEVICES.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Device {
    /// The device behind a program's `ibv_device` pointer: one this
    /// library handed out (anything else, NULL included, is `EINVAL`).
    pub(crate) fn from_c(p: *const ibv_device) -> Result<&'static Device, Errno> {
        registry()
            .iter()
            .copied()
            .find(|d| core::ptr::eq(&d.c, p))
            .ok_or(Errno::EINVAL)
    }

    /// The program's pointer to this device.
    pub(crate) fn as_c(&'static self) -> *mut ibv_device {
        (&raw const self.c).cast_mut()
    }

    /// `ibdev_path`: `<sysfs>/class/infiniband/<name>` (as in the C part).
    pub(crate) fn ibdev_path(&self) -> String {
        format!(
            "{}/class/infiniband/{}",
            sysfs_path().to_string_lossy(),
            self.info.name
        )
    }
}

/// The kernel transport every device and context of this library uses.
pub(crate) fn kernel() -> Arc<dyn Kernel> {
    #[cfg(test)]
    if let Some(k) = test_kernel::current() {
        return k;
    }
    uverbs::sys::linux()
}

/// The devices present now, in libibverbs' order: the kernel's netlink
/// order (device index) when netlink answered, by name otherwise. A
/// device whose names do not fit `struct ibv_device` is left out, as
/// libibverbs leaves it out.
fn scan() -> Result<Vec<&'static Device>, Errno> {
    // libibverbs fails with ENOSYS when neither netlink nor the sysfs class
    // `infiniband_verbs` can be read (init.c, `find_sysfs_devs`).
    let mut found = uverbs::devices_with(&kernel()).map_err(|_| Errno::ENOSYS)?;
    found.sort_by_key(|d| d.index.unwrap_or(u32::MAX));
    let mut reg = registry();
    let mut list = Vec::with_capacity(found.len());
    for info in found {
        let known = reg.iter().copied().find(|d| {
            let k = &d.info;
            (&k.uverbs_name, k.index, &k.name, k.dev)
                == (&info.uverbs_name, info.index, &info.name, info.dev)
        });
        let dev = match known {
            Some(d) => d,
            None => {
                let Some(c) = fill(&info) else { continue };
                let d: &'static Device = Box::leak(Box::new(Device { c, info }));
                reg.push(d);
                d
            }
        };
        list.push(dev);
    }
    Ok(list)
}

/// `struct ibv_device` as libibverbs' `try_driver` fills it.
fn fill(info: &DeviceInfo) -> Option<ibv_device> {
    let sysfs = sysfs_path().to_str().ok()?;
    let (node_type, transport_type) = match info.node_type {
        // IBV_NODE_UNKNOWN / IBV_TRANSPORT_UNKNOWN.
        NodeType::Other(_) => (-1, -1),
        t => (node_type_number(t), t.transport_number()),
    };
    let mut c = ibv_device {
        _ops: crate::layout::context::_ibv_device_ops {
            _dummy1: None,
            _dummy2: None,
        },
        node_type,
        transport_type,
        name: [0; IBV_SYSFS_NAME_MAX],
        dev_name: [0; IBV_SYSFS_NAME_MAX],
        dev_path: [0; IBV_SYSFS_PATH_MAX],
        ibdev_path: [0; IBV_SYSFS_PATH_MAX],
    };
    copy_c_str(&mut c.name, &info.name)?;
    copy_c_str(&mut c.dev_name, &info.uverbs_name)?;
    let dev_path = format!("{sysfs}/class/infiniband_verbs/{}", info.uverbs_name);
    copy_c_str(&mut c.dev_path, &dev_path)?;
    let ibdev_path = format!("{sysfs}/class/infiniband/{}", info.name);
    copy_c_str(&mut c.ibdev_path, &ibdev_path)?;
    Some(c)
}

/// `enum ibv_node_type` of a kernel node type (`decode_knode_type`).
fn node_type_number(t: NodeType) -> c_int {
    match t {
        NodeType::Ca => 1,
        NodeType::Switch => 2,
        NodeType::Router => 3,
        NodeType::Rnic => 4,
        NodeType::Usnic => 5,
        NodeType::UsnicUdp => 6,
        NodeType::Unspecified => 7,
        _ => -1,
    }
}

/// Copies `s` and its terminating NUL into `dst`; `None` if it does not
/// fit (libibverbs' `check_snprintf`).
fn copy_c_str(dst: &mut [c_char], s: &str) -> Option<()> {
    if s.len() >= dst.len() || s.as_bytes().contains(&0) {
        return None;
    }
    for (d, &b) in dst.iter_mut().zip(s.as_bytes()) {
        *d = b as c_char;
    }
    dst[s.len()] = 0;
    Some(())
}

/// libibverbs' sysfs root, decided once per process: `SYSFS_PATH` from the
/// environment (at most `IBV_SYSFS_PATH_MAX` bytes, trailing slashes
/// dropped) unless the program runs set-user-ID, `/sys` otherwise.
fn sysfs_path() -> &'static CStr {
    static PATH: OnceLock<CString> = OnceLock::new();
    PATH.get_or_init(|| {
        // SAFETY: getuid and geteuid cannot fail and touch no memory.
        let same_user = unsafe { libc::getuid() == libc::geteuid() };
        let env = same_user
            .then(|| std::env::var_os("SYSFS_PATH"))
            .flatten()
            .map(OsStringExt::into_vec);
        match env {
            Some(mut v) => {
                v.truncate(IBV_SYSFS_PATH_MAX);
                while v.last() == Some(&b'/') {
                    v.pop();
                }
                CString::new(v).unwrap_or_default()
            }
            None => c"/sys".to_owned(),
        }
    })
}

/// `ibv_get_device_list`: the devices present, a NULL-terminated array
/// the program frees with `ibv_free_device_list`; `*num` (when not NULL)
/// is set to 0 before anything can fail, then to the count. NULL with
/// `errno` on failure (`ENOSYS`: no RDMA subsystem; `ENOMEM`).
///
/// # Safety
/// `num` is NULL or points to a writable `int`.
#[export_name = "uverbs_ibv_get_device_list"]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    if !num.is_null() {
        // SAFETY: the caller's contract.
        unsafe { num.write(0) };
    }
    let list = match scan() {
        Ok(l) => l,
        Err(e) => return errno::null(e),
    };
    let slot = core::mem::size_of::<*mut ibv_device>();
    // SAFETY: calloc of `len + 1` pointers; checked for NULL below.
    let array = unsafe { libc::calloc(list.len() + 1, slot) }.cast::<*mut ibv_device>();
    if array.is_null() {
        return errno::null(Errno::ENOMEM);
    }
    for (i, d) in list.iter().enumerate() {
        // SAFETY: `i < len`, inside the allocation; the last slot stays NULL.
        unsafe { array.add(i).write(d.as_c()) };
    }
    if !num.is_null() {
        // SAFETY: the caller's contract.
        unsafe { num.write(c_int::try_from(list.len()).unwrap_or(c_int::MAX)) };
    }
    array
}

/// `ibv_free_device_list`: frees the array (the devices stay valid).
///
/// # Safety
/// `list` is NULL or an array `ibv_get_device_list` returned, not yet freed.
#[export_name = "uverbs_ibv_free_device_list"]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: the array came from `calloc` in `ibv_get_device_list`.
    unsafe { libc::free(list.cast()) };
}

/// `ibv_get_device_name`: the device's name (`rxe0`); NULL and `EINVAL`
/// for a pointer that is no device of this library.
///
/// # Safety
/// None beyond C's: any pointer value is checked against the device list.
#[export_name = "uverbs_ibv_get_device_name"]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    match Device::from_c(device) {
        Ok(d) => d.c.name.as_ptr(),
        Err(e) => errno::null::<c_char>(e),
    }
}

/// `ibv_get_device_guid`: the node GUID in network byte order, as
/// libibverbs returns it (0 when unknown).
///
/// # Safety
/// None beyond C's: any pointer value is checked against the device list.
#[export_name = "uverbs_ibv_get_device_guid"]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    match Device::from_c(device) {
        Ok(d) => d.info.node_guid.to_be(),
        Err(e) => {
            errno::set(e);
            0
        }
    }
}

/// `ibv_get_device_index`: the kernel's device index (netlink), or -1
/// when the device was found through sysfs.
///
/// # Safety
/// None beyond C's: any pointer value is checked against the device list.
#[export_name = "uverbs_ibv_get_device_index"]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    match Device::from_c(device) {
        Ok(d) => d
            .info
            .index
            .and_then(|i| c_int::try_from(i).ok())
            .unwrap_or(-1),
        Err(e) => errno::minus_one(e),
    }
}

/// `ibv_open_device`: opens the device; NULL and `errno` on failure.
/// The context's `cmd_fd` and `async_fd` are uverbs' own fds (a program
/// may poll or dup them).
///
/// # Safety
/// None beyond C's: any pointer value is checked against the device list.
#[export_name = "uverbs_ibv_open_device"]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    let d = match Device::from_c(device) {
        Ok(d) => d,
        Err(e) => return errno::null(e),
    };
    let uv = match uverbs::Context::open_device(kernel(), d.info.clone()) {
        Ok(uv) => uv,
        Err(e) => return errno::null(errno::of(&e)),
    };
    boxed_context(d, uv)
}

/// The C context of `uv`, an open context of device `d`.
fn boxed_context(d: &'static Device, uv: uverbs::Context) -> *mut ibv_context {
    // SAFETY: only the fd's number is read here; what the program does
    // with it is under libibverbs' contract for `ctx->cmd_fd` (its own
    // commands, never closing it), which uverbs' `cmd_fd` contract mirrors.
    let cmd_fd = unsafe { uv.cmd_fd() }.as_raw_fd();
    let async_fd = uv.async_fd().as_fd().as_raw_fd();
    let vctx = crate::ops::verbs_context(d.as_c(), cmd_fd, async_fd, uv.num_comp_vectors());
    Context::boxed(uv, vctx)
}

/// A C context for `uv`, a context uverbs opened elsewhere (rdma_cm's
/// device context, `crate::rdmacm::verbs`): its `device` is this
/// library's `ibv_device` of the same uverbs node. `ENODEV` when the
/// device list has no such device.
pub(crate) fn wrap_context(uv: uverbs::Context) -> Result<*mut ibv_context, Errno> {
    let info = uv.device();
    let d = scan()?
        .into_iter()
        .find(|d| d.info.uverbs_name == info.uverbs_name && d.info.node_guid == info.node_guid)
        .ok_or(Errno::ENODEV)?;
    Ok(boxed_context(d, uv))
}

/// Every device present now, in libibverbs' order (`rdma_get_devices`).
pub(crate) fn present() -> Result<Vec<&'static Device>, Errno> {
    scan()
}

/// `ibv_import_device`: a context on the kernel context whose command fd
/// `cmd_fd` is (a duplicate of another context's `cmd_fd`, maybe another
/// process's), through `uverbs::Context::import`. NULL and `errno` on
/// failure: `EINVAL` when `cmd_fd` is no character device, `ENODEV` when
/// no RDMA device has it, `EOPNOTSUPP` on a provider that imports nothing
/// (rxe, as rdma-core's rxe) or a kernel that cannot describe the
/// context.
///
/// As in libibverbs, the library takes `cmd_fd` over on success: the
/// context works on a duplicate of its own, so `cmd_fd` itself is closed
/// at once (libibverbs closes it at `ibv_close_device`), and
/// `ctx->cmd_fd` is the duplicate. On failure `cmd_fd` stays the
/// program's (libibverbs closes it when the provider's import fails).
///
/// # Safety
/// None beyond C's: `cmd_fd` is only `fstat`ed and duplicated until the
/// import succeeded; then the program has handed it over.
#[export_name = "uverbs_ibv_import_device"]
pub unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
    let mut st = core::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fstat` writes a `struct stat` into the buffer given; an
    // invalid descriptor makes it fail, not misbehave.
    let rc = unsafe { libc::fstat(cmd_fd, st.as_mut_ptr()) };
    // SAFETY: `fstat` succeeded, so it filled the struct.
    if rc != 0 || unsafe { st.assume_init_ref() }.st_mode & libc::S_IFMT != libc::S_IFCHR {
        return errno::null(Errno::EINVAL);
    }
    // SAFETY: `cmd_fd` is open (fstat succeeded); the borrow ends with the
    // import, which duplicates it.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(cmd_fd) };
    let uv = match uverbs::Context::import(kernel(), borrowed) {
        Ok(uv) => uv,
        Err(e) => return errno::null(errno::of(&e)),
    };
    // The device entry programs compare `ctx->device` with.
    let info = uv.device();
    let dev = scan().ok().and_then(|list| {
        list.into_iter()
            .find(|d| (&d.info.name, d.info.dev) == (&info.name, info.dev))
    });
    let Some(dev) = dev else {
        return errno::null(Errno::ENODEV);
    };
    // SAFETY: the program handed `cmd_fd` over (libibverbs' contract); the
    // context works on its own duplicate.
    drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(cmd_fd) });
    // SAFETY: as in `ibv_open_device`.
    let own_fd = unsafe { uv.cmd_fd() }.as_raw_fd();
    let async_fd = uv.async_fd().as_fd().as_raw_fd();
    let vctx = crate::ops::verbs_context(dev.as_c(), own_fd, async_fd, uv.num_comp_vectors());
    Context::boxed(uv, vctx)
}

/// `ibv_close_device`: frees the context; 0, or -1 and `EINVAL` for NULL.
///
/// # Safety
/// `context` is NULL or a context `ibv_open_device` returned, not yet
/// closed; the program uses it no more.
#[export_name = "uverbs_ibv_close_device"]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { Context::destroy(context) } {
        Ok(()) => 0,
        Err(e) => errno::minus_one(e),
    }
}

/// `ibv_get_sysfs_path`: the sysfs root libibverbs reads (`/sys`, or
/// `SYSFS_PATH`).
///
/// # Safety
/// None: the string lives for the process.
#[export_name = "uverbs_ibv_get_sysfs_path"]
pub unsafe extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    sysfs_path().as_ptr()
}

/// `ibv_read_sysfs_file`: reads `<dir>/<file>` (one `read` of at most
/// `size` bytes) into `buf`; a trailing newline becomes the terminating
/// NUL. The length read (without the newline), or -1: the file cannot be
/// opened or read (`errno` from the system call), or it fills `buf`
/// without a newline to replace (as in libibverbs, `errno` is left as it
/// is then).
///
/// # Safety
/// `dir` and `file` are NUL-terminated strings, `buf` has `size` writable
/// bytes.
#[export_name = "uverbs_ibv_read_sysfs_file"]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() {
        return errno::minus_one(Errno::EINVAL);
    }
    // SAFETY: the caller's contract.
    let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
    let mut path = dir.to_bytes().to_vec();
    path.push(b'/');
    path.extend_from_slice(file.to_bytes());
    let Ok(path) = CString::new(path) else {
        return errno::minus_one(Errno::EINVAL);
    };
    // SAFETY: `path` is NUL-terminated; the fd is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return -1;
    }
    // SAFETY: `buf` has `size` writable bytes (the caller's contract).
    let got = unsafe { libc::read(fd, buf.cast(), size) };
    // SAFETY: `fd` is ours, opened above.
    unsafe { libc::close(fd) };
    let Ok(mut len) = usize::try_from(got) else {
        return -1;
    };
    if len > 0 {
        // SAFETY: `len - 1 < len <= size`: inside `buf`.
        let last = unsafe { buf.add(len - 1) };
        // SAFETY: as above; `len < size` keeps the NUL inside `buf`.
        unsafe {
            if *last == b'\n' as c_char {
                len -= 1;
                last.write(0);
            } else if len < size {
                buf.add(len).write(0);
            } else {
                return -1;
            }
        }
    }
    c_int::try_from(len).unwrap_or(c_int::MAX)
}

/// `ibv_fork_init`: turns on uverbs' fork protection
/// ([`uverbs::fork_init`]: registered memory and queue buffers
/// `MADV_DONTFORK` while they exist), as libibverbs 44 does whatever the
/// kernel: 0, or `EINVAL` when memory was registered before (libibverbs'
/// `too_late`), `ENOSYS` when the kernel refuses `MADV_DONTFORK`.
///
/// # Safety
/// None.
#[export_name = "uverbs_ibv_fork_init"]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    match uverbs::fork_init() {
        Ok(()) => 0,
        Err(e) => errno::positive(errno::of(&e)),
    }
}

/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED` (2) on a kernel that
/// copies pinned pages at fork (nldev `RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`,
/// Linux 5.13+), else `IBV_FORK_ENABLED` (1) after a successful
/// `ibv_fork_init` (or `RDMAV_FORK_SAFE`), `IBV_FORK_DISABLED` (0)
/// otherwise ([`uverbs::fork_status_with`]).
///
/// # Safety
/// None.
#[export_name = "uverbs_ibv_is_fork_initialized"]
pub unsafe extern "C" fn ibv_is_fork_initialized() -> c_int {
    uverbs::fork_status_with(kernel().as_ref()).raw() as c_int
}

/// `ibv_node_type_str`: libibverbs' text for an `enum ibv_node_type`.
///
/// # Safety
/// None: the strings are static.
#[export_name = "uverbs_ibv_node_type_str"]
pub unsafe extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    let s: &'static CStr = match node_type {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        7 => c"unspecified",
        _ => c"unknown",
    };
    s.as_ptr()
}

/// The kernel the tests' devices come from.
#[cfg(test)]
pub(crate) mod test_kernel {
    use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

    use uverbs::sys::Kernel;

    static KERNEL: Mutex<Option<Arc<dyn Kernel>>> = Mutex::new(None);
    static SERIAL: Mutex<()> = Mutex::new(());

    pub(crate) fn current() -> Option<Arc<dyn Kernel>> {
        KERNEL
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Runs `f` with `kernel` as the library's kernel; tests that use it
    /// run one at a time (the device list is process-wide).
    pub(crate) fn with<R>(kernel: Arc<dyn Kernel>, f: impl FnOnce() -> R) -> R {
        let _serial: MutexGuard<'_, ()> = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        *KERNEL.lock().unwrap_or_else(PoisonError::into_inner) = Some(kernel);
        let r = f();
        *KERNEL.lock().unwrap_or_else(PoisonError::into_inner) = None;
        r
    }

    /// Opens the first device of the current kernel (inside [`with`]).
    pub(crate) fn open_first() -> *mut crate::layout::context::ibv_context {
        // SAFETY: NULL `num` is allowed; the list is freed once, the device
        // outlives it.
        unsafe {
            let list = super::ibv_get_device_list(core::ptr::null_mut());
            assert!(!list.is_null() && !(*list).is_null(), "no device");
            let ctx = super::ibv_open_device(*list);
            super::ibv_free_device_list(list);
            assert!(
                !ctx.is_null(),
                "ibv_open_device: {}",
                uverbs::sys::Errno::last()
            );
            ctx
        }
    }
}

#[cfg(test)]
mod tests;
