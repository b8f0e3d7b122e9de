//! The device entry points against uverbs' fake kernels.

use crate::handle::Handle;
use core::ffi::CStr;
use std::{ptr, sync::Arc};

use uverbs::{
    abi,
    netlink::Request,
    sys::{fake::FakeKernel, Errno, Kernel},
    testing::rxe::{fake_rxe, DEV, NODE_GUID},
};

use super::*;

fn text(p: *const c_char) -> &'static str {
    assert!(!p.is_null());
    // SAFETY: the library's strings are NUL-terminated and live for the process.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap()
}

fn last_errno() -> Errno {
    Errno::last()
}

/// The fake rxe device's list, as a program sees it: (array, count).
fn rxe_list() -> (*mut *mut ibv_device, c_int) {
    let mut num = -1;
    // SAFETY: `num` is writable.
    let list = unsafe { ibv_get_device_list(&mut num) };
    assert!(!list.is_null());
    (list, num)
}

#[test]
fn a_failed_discovery_sets_num_to_zero_and_errno() {
    // No netlink answer and no sysfs class: libibverbs' ENOSYS.
    let bare: Arc<dyn Kernel> = Arc::new(FakeKernel::new());
    test_kernel::with(bare, || {
        let mut num = 77;
        // SAFETY: `num` is writable.
        let list = unsafe { ibv_get_device_list(&mut num) };
        assert!(list.is_null());
        assert_eq!(num, 0);
        assert_eq!(last_errno(), Errno::ENOSYS);
        // NULL `num` is allowed.
        // SAFETY: NULL is allowed.
        assert!(unsafe { ibv_get_device_list(ptr::null_mut()) }.is_null());
    });
}

#[test]
fn the_device_is_filled_as_libibverbs_fills_it() {
    let fake = fake_rxe();
    test_kernel::with(fake.dyn_kernel(), || {
        let (list, num) = rxe_list();
        assert_eq!(num, 1);
        // SAFETY: a two-slot array from ibv_get_device_list.
        let (dev, end) = unsafe { (*list, *list.add(1)) };
        assert!(end.is_null(), "NULL-terminated");
        // SAFETY: a device pointer of this library.
        let c = unsafe { &*dev };
        assert_eq!((c.node_type, c.transport_type), (1, 0));
        assert_eq!(text(c.name.as_ptr()), DEV);
        assert_eq!(text(c.dev_name.as_ptr()), "uverbs0");
        let sys = text(sysfs_path().as_ptr());
        assert_eq!(
            text(c.dev_path.as_ptr()),
            format!("{sys}/class/infiniband_verbs/uverbs0")
        );
        assert_eq!(
            text(c.ibdev_path.as_ptr()),
            format!("{sys}/class/infiniband/rxe0")
        );
        // SAFETY: a device of this library.
        unsafe {
            assert_eq!(text(ibv_get_device_name(dev)), DEV);
            assert_eq!(ibv_get_device_guid(dev), NODE_GUID.to_be());
            assert_eq!(ibv_get_device_index(dev), 3);
        }
        // A second list hands out the same device.
        let (again, _) = rxe_list();
        // SAFETY: both arrays have one device and are freed once.
        unsafe {
            assert_eq!(*again, dev);
            ibv_free_device_list(again);
            ibv_free_device_list(list);
            ibv_free_device_list(ptr::null_mut());
        }
    });
}

#[test]
fn pointers_that_are_no_device_are_einval() {
    // SAFETY: the library checks every pointer against its device list.
    unsafe {
        assert!(ibv_get_device_name(ptr::null_mut()).is_null());
        assert_eq!(last_errno(), Errno::EINVAL);
        let mut stranger: ibv_device = core::mem::zeroed();
        assert!(ibv_get_device_name(&mut stranger).is_null());
        assert_eq!(last_errno(), Errno::EINVAL);
        assert_eq!(ibv_get_device_guid(ptr::null_mut()), 0);
        assert_eq!(ibv_get_device_index(ptr::null_mut()), -1);
        assert!(ibv_open_device(ptr::null_mut()).is_null());
        assert_eq!(last_errno(), Errno::EINVAL);
        assert_eq!(ibv_close_device(ptr::null_mut()), -1);
        assert_eq!(last_errno(), Errno::EINVAL);
    }
}

#[test]
fn open_gives_the_context_uverbs_fds_and_close_frees_it() {
    let fake = fake_rxe();
    test_kernel::with(fake.dyn_kernel(), || {
        let (list, _) = rxe_list();
        // SAFETY: a device of this library; the context is closed once.
        unsafe {
            let dev = *list;
            let ctx = ibv_open_device(dev);
            assert!(!ctx.is_null(), "{}", last_errno());
            let c = &*ctx;
            assert_eq!(c.device, dev);
            assert!(c.cmd_fd >= 0 && c.async_fd >= 0 && c.cmd_fd != c.async_fd);
            let rust = Context::from_c(ctx).unwrap();
            assert_eq!(c.async_fd, rust.uv.async_fd().as_raw_fd());
            assert_eq!(c.num_comp_vectors, rust.uv.num_comp_vectors() as c_int);
            assert_eq!(ibv_close_device(ctx), 0);
            ibv_free_device_list(list);
        }
    });
}

/// `ibv_close_device` closes the uverbs context (its command fd and async
/// event fd) even while a PD made from it is alive, as libibverbs'
/// `verbs_uninit_context` closes both fds (issue 39 item 4): a handle kept
/// for the test sees it closed, and commands through it never reach the
/// kernel. That the fds are then closed is uverbs' `context_fds` tests,
/// and over the rxe kernel `capi/tests/c/close_device.c`.
#[test]
fn close_closes_the_uverbs_context_whatever_is_still_alive() {
    let fake = fake_rxe();
    test_kernel::with(fake.dyn_kernel(), || {
        let (list, _) = rxe_list();
        // SAFETY: a device of this library; the context is closed once and
        // the PD, left alive as a program may leave it, is used no more.
        unsafe {
            let ctx = ibv_open_device(*list);
            assert!(!ctx.is_null(), "{}", last_errno());
            let pd = crate::pd::ibv_alloc_pd(ctx);
            assert!(!pd.is_null(), "{}", last_errno());
            let uv = Context::from_c(ctx).unwrap().uv.clone();
            assert!(!uv.is_closed());
            assert_eq!(ibv_close_device(ctx), 0);
            assert!(uv.is_closed(), "closed with a PD alive");
            let calls = fake.kernel.calls().len();
            let e = uv.alloc_pd().unwrap_err();
            assert_eq!(e.kernel_errno(), Some(Errno::EBADF), "{e}");
            assert_eq!(fake.kernel.calls().len(), calls, "nothing sent");
            ibv_free_device_list(list);
        }
    });
}

#[test]
fn sysfs_files_read_as_libibverbs_reads_them() {
    let dir = std::env::temp_dir().join(format!("uverbs-cabi-sysfs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("fw_ver"), "1.2.3\n").unwrap();
    std::fs::write(dir.join("raw"), "abcd").unwrap();
    let cdir = CString::new(dir.to_str().unwrap()).unwrap();
    let mut buf = [0x55 as c_char; 8];
    let read = |file: &CStr, size: usize, buf: &mut [c_char; 8]| {
        // SAFETY: NUL-terminated names, `size <= 8` writable bytes.
        unsafe { ibv_read_sysfs_file(cdir.as_ptr(), file.as_ptr(), buf.as_mut_ptr(), size) }
    };
    // The newline becomes the NUL and is not counted.
    assert_eq!(read(c"fw_ver", 8, &mut buf), 5);
    assert_eq!(text(buf.as_ptr()), "1.2.3");
    // No newline: terminated after the data...
    assert_eq!(read(c"raw", 8, &mut buf), 4);
    assert_eq!(text(buf.as_ptr()), "abcd");
    // ...unless the data fills the buffer.
    assert_eq!(read(c"raw", 4, &mut buf), -1);
    assert_eq!(read(c"missing", 8, &mut buf), -1);
    assert_eq!(last_errno(), Errno::ENOENT);
    // SAFETY: NULL arguments are refused before any use.
    let null = unsafe { ibv_read_sysfs_file(ptr::null(), c"x".as_ptr(), buf.as_mut_ptr(), 8) };
    assert_eq!((null, last_errno()), (-1, Errno::EINVAL));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fork_status_follows_the_kernels_copy_on_fork() {
    let cof = Arc::new(FakeKernel::new());
    cof.on_netlink(|req| {
        let op = uverbs::netlink::msg_type(req).unwrap_or(0) & 0x3ff;
        if op != abi::RDMA_NLDEV_CMD_SYS_GET {
            return Err(Errno::EOPNOTSUPP);
        }
        let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_SYS_GET, 0, 1);
        m.u8(abi::RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, 1);
        Ok(vec![m.finish().to_vec()])
    });
    // The protection is the process's: whether this process registered
    // memory before (other tests) decides ibv_fork_init's answer, as in
    // pyverbs' test_fork: 0 then ENABLED, or EINVAL (too late) then
    // DISABLED; a copy-on-fork kernel makes it UNNEEDED either way.
    // SAFETY: no arguments.
    let r = unsafe { ibv_fork_init() };
    assert!(r == 0 || r == libc::EINVAL, "{r}");
    test_kernel::with(cof, || {
        // SAFETY: no arguments.
        assert_eq!(unsafe { ibv_is_fork_initialized() }, 2, "IBV_FORK_UNNEEDED");
    });
    // A kernel that does not report it (before 5.13).
    test_kernel::with(Arc::new(FakeKernel::new()), || {
        let want = if r == 0 { 1 } else { 0 };
        // SAFETY: no arguments.
        let status = unsafe { ibv_is_fork_initialized() };
        assert_eq!(status, want, "ENABLED / DISABLED");
        // Again: the same answer (0 stays 0, too late stays too late).
        // SAFETY: no arguments.
        assert_eq!(unsafe { ibv_fork_init() }, r);
    });
}

#[test]
fn node_type_texts_are_libibverbs_texts() {
    // SAFETY: static strings.
    let s = |t| text(unsafe { ibv_node_type_str(t) });
    assert_eq!(s(1), "InfiniBand channel adapter");
    assert_eq!(s(4), "iWARP NIC");
    assert_eq!(s(7), "unspecified");
    assert_eq!(s(0), "unknown");
    assert_eq!(s(-1), "unknown");
    assert_eq!(s(8), "unknown");
}

#[test]
fn import_device_checks_the_fd_as_libibverbs() {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(std::env::current_exe().expect("exe")).expect("open");
    Errno::clear();
    // SAFETY: the call only fstat()s a descriptor that is no char device.
    let p = unsafe { ibv_import_device(file.as_raw_fd()) };
    assert!(p.is_null());
    assert_eq!(
        last_errno(),
        Errno::EINVAL,
        "a regular file is no uverbs device"
    );
    // SAFETY: as above; -1 is no descriptor at all.
    let p = unsafe { ibv_import_device(-1) };
    assert!(p.is_null());
    assert_eq!(last_errno(), Errno::EINVAL);
    // A character device no RDMA device has: ENODEV, and the fd is left
    // to the program.
    let chr = std::fs::File::open("/dev/null").expect("/dev/null");
    let none = FakeKernel::new();
    none.char_dev(libc::makedev(1, 3));
    test_kernel::with(Arc::new(none), || {
        // SAFETY: fstat()ed; the import fails before it takes the fd.
        let p = unsafe { ibv_import_device(chr.as_raw_fd()) };
        assert!(p.is_null());
        assert_eq!(last_errno(), Errno::ENODEV);
    });
    // SAFETY: still open: fcntl only reads its flags.
    assert!(unsafe { libc::fcntl(chr.as_raw_fd(), libc::F_GETFD) } >= 0);
}
