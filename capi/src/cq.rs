//! Completion queues: ibv_create_cq, ibv_poll_cq's op, arming.

use crate::layout::AnyFn;

/// The op this module fills in (NULL until implemented).
pub(crate) const POLL_CQ: AnyFn = None;
/// The op this module fills in (NULL until implemented).
pub(crate) const REQ_NOTIFY_CQ: AnyFn = None;

// TEMP(wt-dev): the owner's real `ack_async_event` replaces this at merge;
// it lets async_event.rs build. It acknowledges nothing, so it fails.
#[allow(unsafe_code)]
/// Acknowledges one async event of the cq behind `p` (`*mut ibv_cq`).
///
/// # Safety
/// `p` is NULL or a live object of this library.
pub(crate) unsafe fn ack_async_event(_p: *mut core::ffi::c_void) -> Result<(), uverbs::sys::Errno> {
    Err(uverbs::sys::Errno::EOPNOTSUPP)
}
