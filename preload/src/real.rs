//! The C library's own functions, found with `dlsym(RTLD_NEXT, ...)`, and
//! the thread-local guard that sends every call made from inside the shim
//! (the model opening `/dev/null`, mapping memfds, closing fds) straight to
//! them.
#![allow(unsafe_code)] // dlsym and calls through the pointers it returns

use std::{
    cell::Cell,
    ffi::CStr,
    sync::atomic::{AtomicUsize, Ordering},
};

thread_local! {
    static IN_SHIM: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside the shim (or exiting, when the
/// thread-local is gone: then everything passes through too).
pub(crate) fn in_shim() -> bool {
    IN_SHIM.try_with(Cell::get).unwrap_or(true)
}

/// Marks this thread as inside the shim until dropped.
#[derive(Debug)]
pub(crate) struct Guard(bool);

impl Guard {
    pub(crate) fn enter() -> Guard {
        Guard(IN_SHIM.try_with(|c| c.replace(true)).unwrap_or(true))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let was = self.0;
        let _ = IN_SHIM.try_with(|c| c.set(was));
    }
}

/// A symbol of the next object in the lookup order, cached.
pub(crate) fn next(cache: &AtomicUsize, name: &CStr) -> usize {
    let f = cache.load(Ordering::Relaxed);
    if f != 0 {
        return f;
    }
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT is a valid handle in a
    // shared object, and dlsym only looks the name up.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    if f == 0 {
        // No libc function of that name: nothing sensible to call.
        let msg = b"uverbs-model-preload: dlsym(RTLD_NEXT) found no libc function\n";
        // SAFETY: writing a static buffer to stderr.
        unsafe { libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len()) };
        std::process::abort();
    }
    cache.store(f, Ordering::Relaxed);
    f
}

/// Declares `real::NAME(args) -> ret`, which calls the libc function.
macro_rules! real {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(
            #[allow(clippy::missing_safety_doc)] // the libc function's contract
            pub(crate) unsafe fn $name($($arg: $ty),*) -> $ret {
                static CACHE: AtomicUsize = AtomicUsize::new(0);
                let f = next(&CACHE, {
                    const NAME: &CStr = match CStr::from_bytes_with_nul(
                        concat!(stringify!($name), "\0").as_bytes()) {
                        Ok(c) => c,
                        Err(_) => panic!("symbol name"),
                    };
                    NAME
                });
                // SAFETY: `f` is the address of the libc function of this
                // name, whose C prototype this signature transcribes.
                let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(f) };
                // SAFETY: the caller keeps the libc function's contract.
                unsafe { f($($arg),*) }
            }
        )*
    };
}

use libc::{c_char, c_int, c_ulong, c_void, mode_t, off_t, size_t, ssize_t};

real! {
    open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int;
    open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int;
    openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int;
    openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int;
    __open_2(path: *const c_char, flags: c_int) -> c_int;
    __open64_2(path: *const c_char, flags: c_int) -> c_int;
    stat(path: *const c_char, buf: *mut libc::stat) -> c_int;
    stat64(path: *const c_char, buf: *mut libc::stat64) -> c_int;
    lstat(path: *const c_char, buf: *mut libc::stat) -> c_int;
    lstat64(path: *const c_char, buf: *mut libc::stat64) -> c_int;
    fstatat(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int;
    fstatat64(dirfd: c_int, path: *const c_char, buf: *mut libc::stat64, flags: c_int) -> c_int;
    __xstat(ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int;
    __xstat64(ver: c_int, path: *const c_char, buf: *mut libc::stat64) -> c_int;
    socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int;
    write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;
    read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    close(fd: c_int) -> c_int;
    dup(fd: c_int) -> c_int;
    dup2(fd: c_int, to: c_int) -> c_int;
    dup3(fd: c_int, to: c_int, flags: c_int) -> c_int;
    fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
    fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
    mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
}
