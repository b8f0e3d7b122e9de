//! Queue pairs: create, modify, query, destroy, and the posting ops.

use crate::layout::AnyFn;

/// The op this module fills in (NULL until implemented).
pub(crate) const POST_SEND: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const POST_RECV: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const CREATE_QP_EX: AnyFn = None;

// TEMP(wt-dev): the owner's real `ack_async_event` replaces this at merge;
// it lets async_event.rs build. It acknowledges nothing, so it fails.
#[allow(unsafe_code)]
/// Acknowledges one async event of the qp behind `p` (`*mut ibv_qp`).
///
/// # Safety
/// `p` is NULL or a live object of this library.
pub(crate) unsafe fn ack_async_event(_p: *mut core::ffi::c_void) -> Result<(), uverbs::sys::Errno> {
    Err(uverbs::sys::Errno::EOPNOTSUPP)
}
