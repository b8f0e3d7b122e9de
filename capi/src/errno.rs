//! libibverbs' error conventions: which errno a uverbs error becomes, and
//! the three ways a C function reports it.

use core::{ffi::c_int, ptr::null_mut};

use uverbs::{sys::Errno, Error};

/// Sets the calling thread's `errno`.
pub fn set(e: Errno) {
    Errno::set_raw(e as i32);
}

/// The errno of a uverbs error: the kernel's, or the one rdma-core gives
/// the failure the library found itself ([`uverbs::ErrorKind::errno`]).
pub fn of(e: &Error) -> Errno {
    e.errno()
}

/// A constructor's failure: NULL with `errno` set.
pub fn null<T>(e: Errno) -> *mut T {
    set(e);
    null_mut()
}

/// A failure reported as -1 with `errno` set.
pub fn minus_one(e: Errno) -> c_int {
    set(e);
    -1
}

/// A failure reported as the positive errno (and in `errno` too, which
/// libibverbs' wrappers leave set by the failed system call).
pub fn positive(e: Errno) -> c_int {
    set(e);
    e as c_int
}
