//! A bind request's window binding, read from the C structs alone: the
//! translation `ibv_post_send` (`IBV_WR_BIND_MW`), `ibv_wr_bind_mw` and the
//! `bind_mw` op share. It reads the window's key from `ibv_mw.rkey`, as
//! rdma-core's providers do (`wr->bind_mw.mw->rkey`), so the posting paths
//! need nothing of [`Mw`](super::Mw) and `mw.rs` (whose `bind_mw` posts
//! through the QP) stays apart from them.

#![allow(unsafe_code)]

use core::sync::atomic::Ordering;

use uverbs::{sys::Errno, AccessFlags, MwBind};

use crate::layout::{
    pd::{ibv_mr, ibv_mw},
    qp::ibv_mw_bind_info,
};

/// A bind of `mw` to `info`'s range with the new key `rkey`, as rdma-core's
/// rxe reads a bind (`convert_send_wr`, `wr_bind_mw`): the window's
/// current key, the region's local key (none for a zero-length unbind
/// without region; a NULL region with a length is `EINVAL`), the range
/// and the rights. A NULL window is `EINVAL`.
///
/// # Safety
/// `mw` is NULL or a live window of this library; `info.mr` is NULL or a
/// live region of this library.
pub(crate) unsafe fn binding(
    mw: *mut ibv_mw,
    rkey: u32,
    info: &ibv_mw_bind_info,
) -> Result<MwBind, Errno> {
    if mw.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: the caller's contract: a live `ibv_mw` of this library, whose
    // key is an atomic the library stores once a bind is posted.
    let mw_rkey = unsafe { (*mw).rkey.load(Ordering::Acquire) };
    let mr_lkey = if info.mr.is_null() {
        if info.length != 0 {
            return Err(Errno::EINVAL);
        }
        0
    } else {
        // SAFETY: the caller's contract: a live `ibv_mr` of this library,
        // whose fields are written once before the program has it.
        unsafe { (*info.mr.cast::<ibv_mr>()).lkey }
    };
    Ok(MwBind::new(mw_rkey, rkey)
        .mr_lkey(mr_lkey)
        .addr(info.addr)
        .length(info.length)
        .access(AccessFlags::from_bits_retain(info.mw_access_flags)))
}
