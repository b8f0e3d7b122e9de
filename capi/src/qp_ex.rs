//! `struct ibv_qp_ex`: `ibv_qp_to_qp_ex`, the `send_ops_flags` a QP may be
//! created with, and the `ibv_wr_*` posting session (`qp_ex/ops.rs`) over
//! the QP's uverbs send session.
//!
//! # One session, written call by call
//!
//! uverbs keeps a QP's send session in its send queue and reaches it with
//! calls that borrow the QP only for themselves (`QueuePair::begin_send`,
//! `push_send`, `complete_send`, `abort_send`; `src/send_session.rs`), so
//! each `ibv_wr_*` call writes into the queue when it is made, as libmlx5
//! writes its WQE at each call: `wr_start` begins the session, each
//! request is pushed when its builder and setters are in
//! (`qp_ex/session.rs`), `wr_complete` completes the session (one
//! doorbell), `wr_abort` aborts it. Nothing is recorded to be replayed, and
//! nothing here names or branches on the provider: the QP's own (uverbs
//! dispatches once per call).
//!
//! A request is one uverbs `SendWr`, made of its builder (the operation,
//! `qpx->wr_id`, `qpx->wr_flags`) and its setters: a data setter
//! (`wr_set_sge`, `wr_set_sge_list`, `wr_set_inline_data(_list)`) pushes it
//! at once, with the program's own SGE list or bytes (nothing copied but
//! an inline list, gathered into one buffer); on a UD QP it is pushed when
//! both its data and its destination (`wr_set_ud_addr`) are in, the one
//! given first kept until the other comes. A request that carries its own
//! data (`wr_bind_mw`, `wr_local_inv`, `wr_atomic_write`) is pushed by its
//! builder; one given no data setter (a zero-length SEND, as rxe sends it)
//! when the next builder or `wr_complete` comes.
//!
//! # The critical section and its lock
//!
//! `wr_start` .. `wr_complete`/`wr_abort` is a per-QP critical section
//! (ibv_wr_post(3), CONCURRENCY): `wr_start` takes the QP's lock
//! (`qp/guard.rs`, the lock its posts, modifies and queries take) and
//! keeps it until the session ends, as rdma-core's providers keep their
//! send queue's spin lock; a second thread's `wr_start` (or post, modify,
//! query) waits until the session ends. The builders and setters check
//! that the calling thread holds it (one load and one comparison with the
//! thread's token) and do nothing otherwise. A thread that starts again
//! inside its own session drops the earlier session's requests (rxe spins
//! forever on its own lock). Inside its session the thread may modify or
//! query the QP; an `ibv_post_send` there fails with `EINVAL` (the queue's
//! next WQEs are the session's; rdma-core's providers deadlock on their
//! own lock), and an `ibv_destroy_qp` ends the session first.
//!
//! # Errors, as rdma-core's rxe provider (`providers/rxe/rxe.c` of v44)
//!
//! - The first error of a session (`ENOSPC` for a full queue, too many
//!   SGEs or too much inline data; `EOPNOTSUPP` for an operation uverbs
//!   has no object for or the QP's type does not carry; `EINVAL` for a
//!   request that is malformed, a QP not in a state that sends, a setter
//!   with no builder before it, a second data or destination setter for
//!   one request) is kept, the calls after it do nothing, and
//!   `wr_complete` returns it with nothing of the session posted (the
//!   uverbs session aborted), as rxe returns `qp->err` without publishing
//!   its producer index. A failed doorbell leaves the requests in the
//!   queue (rxe's `post_send_db` after `store_producer_index`).
//! - Every slot is filled in every QP this library makes, whatever
//!   `send_ops_flags` asked for (rxe leaves the unasked ones NULL; mlx5
//!   fills its QP type's builders whatever was asked): an operation the
//!   QP's type carries works, one it does not fails the session with
//!   `EOPNOTSUPP`.
//! - `IBV_SEND_INLINE` in `wr_flags` is ignored: the data setter called
//!   says whether the data is inline (as mlx5; rxe's kernel reads the flag
//!   and sends SGE descriptors as data when it is set with `wr_set_sge`).
//! - An atomic's one SGE is 8 bytes whatever its length says (the device
//!   writes 8), as uverbs' typed sessions take it.
//! - `wr_set_inline_data_list` sends the pieces' total and `wr_set_sge_list`
//!   the SGEs' total: rdma-core 44's rxe sends 0 bytes for the first and
//!   `num_sge` times the first SGE's length for the second (fixed in
//!   rdma-core by 1e8ed0aff and 406cd2ad0).

#![allow(unsafe_code)]

mod ops;
mod session;
#[cfg(test)]
mod tests;

use crate::handle::Handle;
use uverbs::{QpCap, QpType};

use crate::{
    layout::qp::{ibv_qp, ibv_qp_ex},
    qp::Qp,
};
pub(crate) use ops::install;
pub(crate) use session::{end_for_destroy, push_own, Session};

/// What a QP's sessions need to know of it, set once at creation.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Config {
    /// Created through the `create_qp_ex` op: `ibv_qp_to_qp_ex` gives the
    /// `ibv_qp_ex` (rxe sets `VERBS_QP_EX` there, whatever the mask).
    pub(crate) extended: bool,
    /// A UD QP: a request is pushed once its destination is in too.
    pub(crate) ud: bool,
    /// The granted `max_send_sge` and `max_inline_data`, checked before a
    /// setter copies anything (rxe's `ENOSPC`).
    pub(crate) max_sge: u32,
    pub(crate) max_inline: u32,
}

impl Config {
    /// The configuration of a QP with these properties.
    pub(crate) fn new(extended: bool, qp_type: QpType, cap: &QpCap) -> Self {
        Config {
            extended,
            ud: qp_type == QpType::Ud,
            max_sge: cap.max_send_sge,
            max_inline: cap.max_inline_data,
        }
    }
}

/// `ibv_qp_to_qp_ex` (IBVERBS_1.6): the QP's `ibv_qp_ex` if it was created
/// through `ibv_create_qp_ex` (the `create_qp_ex` op), else NULL with
/// `errno` untouched, as libibverbs' verbs.c (which tests the
/// `VERBS_QP_EX` rxe sets in its `create_qp_ex`); NULL with `EINVAL` for
/// NULL.
///
/// # Safety
/// `qp` is NULL or a live QP of this library.
#[export_name = "uverbs_ibv_qp_to_qp_ex"]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    // SAFETY: the caller's contract.
    match unsafe { Qp::from_c(qp) } {
        Ok(q) if q.config.extended => qp.cast::<ibv_qp_ex>(),
        Ok(_) => core::ptr::null_mut(),
        Err(e) => crate::errno::null(e),
    }
}
