//! `struct ibv_qp_ex`: `ibv_qp_to_qp_ex`, the `send_ops_flags` a QP may be
//! created with, and the `ibv_wr_*` posting session (`qp_ex/ops.rs`) over
//! uverbs' typed sessions (`uverbs::qpx`, `QueuePair::start_wr`).
//!
//! The program's calls between `wr_start` and `wr_complete` are separate C
//! calls, and a uverbs `WrSession` borrows the QP for its whole life, so a
//! session's requests are recorded here (`qp_ex/pending.rs`: each request's
//! id, flags and operation, with copies of its SGE list and inline bytes,
//! in buffers kept from session to session) and written at `wr_complete`
//! through one typed session `start_wr::<Rc | Uc | Ud, Rxe | Mlx5>()`
//! chosen by the QP's type and provider (`qp_ex/post.rs`), under the QP's
//! send-side lock.
//!
//! Semantics, as rdma-core's rxe provider (`providers/rxe/rxe.c` of v44)
//! has them unless said otherwise:
//!
//! - `wr_start` .. `wr_complete`/`wr_abort` is a per-QP critical section
//!   (ibv_wr_post(3), CONCURRENCY): a second thread's `wr_start` waits
//!   until the session ends. A thread that starts again inside its own
//!   session drops the earlier session's requests (rxe spins forever on its
//!   own lock).
//! - The first error of a session (`ENOSPC` for a full queue, too many
//!   SGEs or too much inline data; `EOPNOTSUPP` for an operation uverbs has
//!   no object for; `EINVAL` for a request that is malformed) is kept, the
//!   calls after it do nothing, and `wr_complete` returns it with nothing
//!   of the session posted, as rxe returns `qp->err` without publishing its
//!   producer index. Errors found while the requests are written at
//!   complete (the QP's state, the queue filling up) also post nothing:
//!   the typed session is aborted. A failed doorbell leaves the requests in
//!   the queue (rxe's `post_send_db` after `store_producer_index`, and
//!   uverbs' `WrSession::complete`).
//! - Every slot is filled in every QP this library makes, whatever
//!   `send_ops_flags` asked for (rxe leaves the unasked ones NULL; mlx5
//!   fills its QP type's builders whatever was asked): an operation the
//!   QP's type carries works, one it does not fails the session with
//!   `EOPNOTSUPP`.
//! - `IBV_SEND_INLINE` in `wr_flags` is ignored: the data setter called
//!   says whether the data is inline (as mlx5; rxe's kernel reads the flag
//!   and sends SGE descriptors as data when it is set with `wr_set_sge`).
//! - `wr_set_inline_data_list` sends the pieces' total and `wr_set_sge_list`
//!   the SGEs' total: rdma-core 44's rxe sends 0 bytes for the first and
//!   `num_sge` times the first SGE's length for the second (fixed in
//!   rdma-core by 1e8ed0aff and 406cd2ad0).

#![allow(unsafe_code)]

mod ops;
mod pending;
mod post;
#[cfg(test)]
mod tests;

use std::{
    sync::{Condvar, Mutex, MutexGuard, PoisonError},
    thread,
};

use uverbs::{
    qpx::{Mlx5, ProviderKind, Rxe},
    sys::Errno,
    QpCap, QpType,
};

use crate::{
    layout::qp::{ibv_qp, ibv_qp_ex},
    qp::Qp,
};
pub(crate) use ops::install;
use pending::Pending;

/// `IBV_QP_EX_WITH_*` (`send_ops_flags`) that uverbs posts.
const WITH_RDMA_WRITE: u64 = 1 << 0;
const WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
const WITH_SEND: u64 = 1 << 2;
const WITH_SEND_WITH_IMM: u64 = 1 << 3;
const WITH_RDMA_READ: u64 = 1 << 4;
const WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
const WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
pub(crate) const WITH_LOCAL_INV: u64 = 1 << 7;
pub(crate) const WITH_BIND_MW: u64 = 1 << 8;
pub(crate) const WITH_SEND_WITH_INV: u64 = 1 << 9;
pub(crate) const WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// The operations a QP type may be created with: rxe's per-type sets
/// (rdma-core providers/rxe/rxe.c `RXE_SUP_*_QP_SEND_OPS_FLAGS`), as
/// ibv_wr_post(3) says: "If the QP does not support all the requested work
/// request types then QP creation will fail". `ATOMIC_WRITE` is accepted
/// as rxe's table has it whatever the kernel: 6.1's kernel fails the
/// request itself. uverbs' mlx5 provider posts no binds, invalidations or
/// atomic writes (`PostErrorKind::OpNotSupported`), so its QPs are
/// created without them.
const fn supported_send_ops(qp_type: QpType, provider: Provider) -> Option<u64> {
    const SENDS: u64 = WITH_SEND | WITH_SEND_WITH_IMM;
    const WRITES: u64 = WITH_RDMA_WRITE | WITH_RDMA_WRITE_WITH_IMM;
    const RC_ONLY: u64 = WITH_RDMA_READ | WITH_ATOMIC_CMP_AND_SWP | WITH_ATOMIC_FETCH_AND_ADD;
    const WINDOWS: u64 = WITH_BIND_MW | WITH_SEND_WITH_INV;
    const RC_WINDOWS: u64 = WINDOWS | WITH_LOCAL_INV | WITH_ATOMIC_WRITE;
    let rxe = matches!(provider, Provider::Rxe);
    match qp_type {
        QpType::Rc if rxe => Some(SENDS | WRITES | RC_ONLY | RC_WINDOWS),
        QpType::Rc => Some(SENDS | WRITES | RC_ONLY),
        QpType::Uc if rxe => Some(SENDS | WRITES | WINDOWS),
        QpType::Uc => Some(SENDS | WRITES),
        QpType::Ud => Some(SENDS),
        _ => None,
    }
}

/// Checks `send_ops_flags` (`IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`) for a QP of
/// `qp_type`: `EOPNOTSUPP` for an operation it cannot have, and for any
/// flag on a type rxe gives no `ibv_qp_ex` (as rxe's
/// `check_qp_init_attr`).
pub(crate) fn check_send_ops(
    qp_type: QpType,
    provider: Provider,
    send_ops_flags: u64,
) -> Result<(), Errno> {
    match supported_send_ops(qp_type, provider) {
        Some(ok) if send_ops_flags & !ok == 0 => Ok(()),
        _ => Err(Errno::EOPNOTSUPP),
    }
}

/// The provider whose typed session the QP's requests are written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    Rxe,
    Mlx5,
    /// No typed session: every `wr_complete` with requests fails.
    Other,
}

impl Provider {
    /// The provider of this name (`uverbs::Context::provider_name`).
    pub(crate) fn named(name: &str) -> Provider {
        if name == <Rxe as ProviderKind>::NAME {
            Provider::Rxe
        } else if name == <Mlx5 as ProviderKind>::NAME {
            Provider::Mlx5
        } else {
            Provider::Other
        }
    }
}

/// What a QP's sessions need to know of it, set once at creation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    /// Created through the `create_qp_ex` op: `ibv_qp_to_qp_ex` gives the
    /// `ibv_qp_ex` (rxe sets `VERBS_QP_EX` there, whatever the mask).
    pub(crate) extended: bool,
    pub(crate) qp_type: QpType,
    pub(crate) provider: Provider,
    /// The granted `max_send_sge` and `max_inline_data`, checked by the
    /// setters before they copy anything (rxe's `ENOSPC`).
    pub(crate) max_sge: u32,
    pub(crate) max_inline: u32,
}

impl Config {
    /// The configuration of a QP with these properties.
    pub(crate) fn new(extended: bool, qp_type: QpType, provider: Provider, cap: &QpCap) -> Self {
        Config {
            extended,
            qp_type,
            provider,
            max_sge: cap.max_send_sge,
            max_inline: cap.max_inline_data,
        }
    }
}

/// A QP's `ibv_wr_*` session: the requests recorded since `wr_start`, and
/// the critical section a session holds (`Pending::owner`).
#[derive(Debug)]
pub(crate) struct Session {
    pending: Mutex<Pending>,
    /// Signalled when a session ends, for the threads waiting in
    /// `wr_start`.
    ended: Condvar,
    config: Config,
}

impl Session {
    /// A QP's session state before creation has set its [`Config`].
    pub(crate) fn new() -> Self {
        Session {
            pending: Mutex::new(Pending::default()),
            ended: Condvar::new(),
            config: Config {
                extended: false,
                qp_type: QpType::Rc,
                provider: Provider::Other,
                max_sge: 0,
                max_inline: 0,
            },
        }
    }

    /// Sets what creation learned (before the QP is shared).
    pub(crate) fn configure(&mut self, config: Config) {
        self.config = config;
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `wr_start`: waits until no other thread is in a session, then opens
    /// one (empty).
    fn start(&self) {
        let me = thread::current().id();
        let mut g = self.lock();
        while g.owner.is_some_and(|t| t != me) {
            g = self.ended.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        g.open(me);
    }

    /// Runs a builder or setter on the open session (nothing outside one:
    /// the calls have no way to report it, and `wr_complete` then fails).
    fn record(&self, f: impl FnOnce(&mut Pending, &Config)) {
        let mut g = self.lock();
        if g.owner.is_some() && g.err.is_none() {
            f(&mut g, &self.config);
        }
    }

    /// `wr_complete`: posts the session's requests through `q`'s uverbs QP,
    /// or returns the session's error; ends the session either way.
    ///
    /// # Safety
    /// The AHs given to the session's `ibv_wr_set_ud_addr` are live AHs of
    /// this library.
    unsafe fn complete(&self, q: &Qp) -> Result<(), Errno> {
        let mut g = self.lock();
        if g.owner.is_none() {
            return Err(Errno::EINVAL);
        }
        let r = match g.err {
            Some(e) => Err(e),
            None => {
                let posted = q.qp.posting(|uv, _| {
                    // SAFETY: the caller's contract.
                    unsafe { post::post(uv, &self.config, &g) }
                });
                posted.and_then(|r| r)
            }
        };
        g.close();
        drop(g);
        self.ended.notify_one();
        r
    }

    /// `wr_abort`: ends the session; none of its requests is posted.
    fn abort(&self) {
        let mut g = self.lock();
        if g.owner.is_some() {
            g.close();
            drop(g);
            self.ended.notify_one();
        }
    }
}

impl Default for Session {
    fn default() -> Self {
        Session::new()
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
        Ok(q) if q.session.config.extended => qp.cast::<ibv_qp_ex>(),
        Ok(_) => core::ptr::null_mut(),
        Err(e) => crate::errno::null(e),
    }
}
