//! The entry points of `crate::unsupported`, called as a C program calls
//! them: each call's result and `errno`.

use core::ptr::{null_mut, NonNull};

use uverbs::sys::Errno;

use super::*;

/// A pointer that is not NULL and must never be read (the unsupported
/// calls only compare their arguments with NULL).
fn not_null<T>() -> *mut T {
    NonNull::<u64>::dangling().as_ptr().cast()
}

/// Runs `f` with `errno` cleared; returns its result and `errno` after.
fn with_errno<R>(f: impl FnOnce() -> R) -> (R, Errno) {
    Errno::clear();
    let r = f();
    (r, Errno::last())
}

#[test]
fn device_memory_imports_fail_with_eopnotsupp_or_einval() {
    // The arguments below are NULL or never-read non-NULL pointers, which
    // these functions only compare with NULL.
    // SAFETY: see above.
    let (p, e) = with_errno(|| unsafe { ibv_import_dm(not_null(), 3) });
    assert!(p.is_null());
    assert_eq!(e, Errno::EOPNOTSUPP);
    // SAFETY: see above.
    let (p, e) = with_errno(|| unsafe { ibv_import_dm(null_mut(), 3) });
    assert!(p.is_null());
    assert_eq!(e, Errno::EINVAL);
    // Nothing to undo, nothing reported.
    // SAFETY: see above.
    let ((), e) = with_errno(|| unsafe { ibv_unimport_dm(not_null()) });
    assert_eq!(e, Errno::UnknownErrno);
}

#[test]
fn ece_is_not_supported() {
    let mut ece = ibv_ece {
        vendor_id: 0x15b3,
        ..ibv_ece::default()
    };
    // SAFETY: the QP pointer is never read; `ece` is live.
    let (r, e) = with_errno(|| unsafe { ibv_query_ece(not_null(), &mut ece) });
    assert_eq!((r, e), (Errno::EOPNOTSUPP as c_int, Errno::EOPNOTSUPP));
    // SAFETY: as above.
    let (r, e) = with_errno(|| unsafe { ibv_set_ece(not_null(), &mut ece) });
    assert_eq!((r, e), (Errno::EOPNOTSUPP as c_int, Errno::EOPNOTSUPP));
    // SAFETY: NULL arguments are checked.
    let r = unsafe { ibv_query_ece(null_mut(), &mut ece) };
    assert_eq!(r, Errno::EINVAL as c_int);
    // SAFETY: as above.
    let r = unsafe { ibv_set_ece(not_null(), null_mut()) };
    assert_eq!(r, Errno::EINVAL as c_int);
}
