//! Queue pairs: `ibv_create_qp` and the `create_qp_ex` op, `ibv_modify_qp`,
//! `ibv_query_qp`, `ibv_destroy_qp`, multicast attach/detach,
//! `ibv_query_qp_data_in_order`, and the `post_send` / `post_recv` ops
//! (`qp/post.rs`); `ibv_qp_to_qp_ex` and the `ibv_wr_*` slots are
//! `crate::qp_ex`'s.
//!
//! Every QP is allocated as an `ibv_qp_ex` followed by the `wr_flush` slot
//! newer rdma-core appends, then the uverbs QP ([`guard::Guarded`]). The
//! uverbs QP's context value ([`uverbs::QpInitAttr::context`]) is the C
//! object's address, so its async events lead back to it.

#![allow(unsafe_code)]

pub(crate) mod attr;
pub(crate) mod guard;
pub(crate) mod post;
#[cfg(test)]
pub(crate) mod tests;

use crate::handle::Handle;
use core::{
    ffi::{c_int, c_void},
    mem::{offset_of, transmute},
    ptr::null_mut,
};

use uverbs::{
    sys::Errno, QpCreateFlags, QpCreateOptions, QpInitAttr, QueuePair, RecvQueue, SendOpsFlags,
    SharedReceiveQueue,
};

use crate::{
    cq::{self, Cq},
    errno,
    layout::{
        context::ibv_context,
        cq::ibv_cq,
        device::ibv_gid,
        mlx5::mlx5dv_qp_ex,
        pd::ibv_pd,
        pthread_cond_t, pthread_mutex_t,
        qp::{
            ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_ex, ibv_qp_init_attr, ibv_qp_init_attr_ex,
            ibv_recv_wr, ibv_send_wr, ibv_srq,
        },
        AnyFn,
    },
    pd::Pd,
    qp_ex,
    srq::Srq,
};
use guard::Guarded;
use post::PostBufs;
use std::sync::{
    atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering},
    Mutex, PoisonError,
};

/// `IBV_QP_INIT_ATTR_*` of `ibv_qp_init_attr_ex.comp_mask`.
const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
/// `IBV_QP_CREATE_SOURCE_QPN` (`ibv_qp_init_attr_ex.source_qpn`).
const IBV_QP_CREATE_SOURCE_QPN: u32 = 1 << 10;
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`: the `ibv_wr_*` operations asked for
/// (`uverbs::Context::send_ops`).
const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
/// XRCD, MAX_TSO_HEADER, IND_TABLE and RX_HASH: known, and not done here
/// (`EOPNOTSUPP`).
const UNSUPPORTED_INIT_ATTR: u32 = (1 << 1) | (1 << 3) | (1 << 4) | (1 << 5);
/// Every bit verbs.h 44 defines.
const KNOWN_INIT_ATTR: u32 = (1 << 7) - 1;
/// `IBV_QP_STATE`.
const IBV_QP_STATE: c_int = 1;

/// A queue pair: what `ibv_create_qp` returns a pointer to.
#[repr(C)]
#[derive(Debug)]
pub struct Qp {
    /// The C part; programs hold `&c.qp_base`.
    pub c: ibv_qp_ex,
    /// `ibv_qp_ex.wr_flush` of rdma-core after 44, allocated so that a
    /// program built against a newer verbs.h finds it.
    pub wr_flush: AnyFn,
    /// The uverbs QP and the `ibv_wr_*` session's state (`crate::qp_ex`),
    /// under the lock the session holds from `wr_start` to `wr_complete`.
    pub(crate) qp: Guarded<QueuePair, qp_ex::Session>,
    /// The QP's own receive queue, split off (`QueuePair::split_recv`)
    /// with its own lock and conversion buffers, so that receives posted on
    /// one thread never wait for sends posted on another (libibverbs'
    /// providers lock a QP's two queues apart). `None` for a QP on an SRQ.
    rq: Mutex<Option<(RecvQueue, PostBufs)>>,
    /// What the `ibv_wr_*` session needs of the QP, set at creation.
    pub(crate) config: qp_ex::Config,
    /// `struct mlx5dv_qp_ex` (`mlx5dv_qp_ex_from_ibv_qp_ex`): the mlx5
    /// `wr_*` slots, filled by `mlx5dv_create_qp` for what it was asked
    /// (`crate::mlx5::qp`), NULL otherwise.
    pub dv: mlx5dv_qp_ex,
}

const _: () = assert!(offset_of!(Qp, wr_flush) == 352);

// SAFETY: the C part's pointers name this library's live objects or the
// program's own context value; the uverbs QP is behind `Guarded`'s lock
// and its receive queue behind `rq`'s.
unsafe impl Send for Qp {}
// SAFETY: as for Send.
unsafe impl Sync for Qp {}

crate::handle!(Qp: ibv_qp = c.qp_base);

impl Qp {
    fn blank() -> Box<Qp> {
        let mut b = Box::new(Qp {
            c: ibv_qp_ex {
                qp_base: ibv_qp {
                    context: null_mut(),
                    qp_context: null_mut(),
                    pd: null_mut(),
                    send_cq: null_mut(),
                    recv_cq: null_mut(),
                    srq: null_mut(),
                    handle: 0,
                    qp_num: 0,
                    state: AtomicI32::new(0),
                    qp_type: 0,
                    mutex: pthread_mutex_t([0; 40]),
                    cond: pthread_cond_t([0; 48]),
                    events_completed: 0,
                },
                comp_mask: 0,
                wr_id: AtomicU64::new(0),
                wr_flags: AtomicU32::new(0),
                wr_atomic_cmp_swp: None,
                wr_atomic_fetch_add: None,
                wr_bind_mw: None,
                wr_local_inv: None,
                wr_rdma_read: None,
                wr_rdma_write: None,
                wr_rdma_write_imm: None,
                wr_send: None,
                wr_send_imm: None,
                wr_send_inv: None,
                wr_send_tso: None,
                wr_set_ud_addr: None,
                wr_set_xrc_srqn: None,
                wr_set_inline_data: None,
                wr_set_inline_data_list: None,
                wr_set_sge: None,
                wr_set_sge_list: None,
                wr_start: None,
                wr_complete: None,
                wr_abort: None,
                wr_atomic_write: None,
            },
            wr_flush: None,
            qp: Guarded::new(),
            rq: Mutex::new(None),
            config: qp_ex::Config::default(),
            dv: mlx5dv_qp_ex::default(),
        });
        b.wr_flush = qp_ex::install(&mut b.c);
        b
    }
}

/// What the creation paths ask for.
pub(crate) struct Request {
    pd: *mut ibv_pd,
    qp_context: *mut c_void,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    srq: *mut ibv_srq,
    cap: ibv_qp_cap,
    pub(crate) qp_type: c_int,
    sq_sig_all: c_int,
    /// Through the `create_qp_ex` op: `ibv_qp_to_qp_ex` gives the QP's
    /// `ibv_qp_ex`.
    extended: bool,
    /// `create_flags` and `send_ops_flags` of `ibv_qp_init_attr_ex`.
    opts: QpCreateOptions,
}

/// How a QP's uverbs QP is made: `ProtectionDomain::create_qp_with`, or
/// `mlx5dv_create_qp`'s maker.
pub(crate) type Make<'a> = &'a dyn Fn(
    &uverbs::ProtectionDomain,
    &QpInitAttr<'_>,
    &QpCreateOptions,
) -> uverbs::Result<QueuePair>;

/// Creates the QP `req` describes; returns it and the capacities granted.
///
/// # Safety
/// The pointers in `req` are NULL or live objects of this library.
unsafe fn create(req: &Request) -> Result<(*mut ibv_qp, ibv_qp_cap), Errno> {
    if matches!(req.qp_type, 9 | 10 | 0xff) {
        // XRC needs an XRC domain, DRIVER a provider's own attributes.
        return Err(Errno::EOPNOTSUPP);
    }
    let make: Make<'_> = &|pd, init, opts| pd.create_qp_with(init, opts);
    // SAFETY: the caller's contract.
    unsafe { create_with(req, make) }
}

/// [`create`], the uverbs QP made by `make` (which also takes the driver
/// QP type, `IBV_QPT_DRIVER`, as mlx5's attributes make it).
///
/// # Safety
/// As [`create`].
pub(crate) unsafe fn create_with(
    req: &Request,
    make: Make<'_>,
) -> Result<(*mut ibv_qp, ibv_qp_cap), Errno> {
    // SAFETY: the caller's contract.
    let pd = unsafe { Pd::from_c(req.pd) }?;
    // SAFETY: the caller's contract.
    let (send, recv) = unsafe { (Cq::from_c(req.send_cq)?, Cq::from_c(req.recv_cq)?) };
    let srq = if req.srq.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { Srq::from_c(req.srq) }?)
    };
    let qp_type = match req.qp_type {
        2..=4 | 8 | 0xff => attr::qp_type(req.qp_type),
        9 | 10 => return Err(Errno::EOPNOTSUPP),
        _ => return Err(Errno::EINVAL),
    };
    let mut b = Qp::blank();
    let address = (&raw const *b) as u64;
    let make = |pd: &uverbs::ProtectionDomain,
                s: &uverbs::CompletionQueue,
                r: &uverbs::CompletionQueue,
                q: Option<&SharedReceiveQueue>| {
        make(
            pd,
            &QpInitAttr::new(qp_type, s, r)
                .srq(q)
                .cap(attr::cap(&req.cap))
                .sq_sig_all(req.sq_sig_all != 0)
                .context(address),
            &req.opts,
        )
    };
    let made = pd.with(|uv_pd| {
        cq::with_cqs(send, recv, |s, r| match srq {
            None => Ok(make(uv_pd, s, r, None)),
            Some(srq) => srq.with(|q| make(uv_pd, s, r, Some(q))),
        })
    })???;
    let qp = made.map_err(|e| errno::of(&e))?;
    let granted = attr::c_cap(&qp.cap());
    b.config = qp_ex::Config::new(req.extended, qp_type, &qp.cap());
    let base = &mut b.c.qp_base;
    base.context = pd.c.context;
    base.qp_context = req.qp_context;
    base.pd = req.pd;
    base.send_cq = req.send_cq;
    base.recv_cq = req.recv_cq;
    base.srq = req.srq;
    base.handle = qp.handle();
    base.qp_num = qp.qp_num();
    base.state = AtomicI32::new(0);
    base.qp_type = req.qp_type;
    base.events_completed = 0;
    let mut qp = qp;
    // A QP on an SRQ has no queue of its own (its receives go to the SRQ,
    // and its own post_recv keeps failing as uverbs fails it).
    if req.srq.is_null() {
        if let Ok(rq) = qp.split_recv() {
            *b.rq.get_mut().unwrap_or_else(PoisonError::into_inner) =
                Some((rq, PostBufs::default()));
        }
    }
    b.qp.set(qp);
    Ok((b.into_c(), granted))
}

/// `ibv_create_qp`: NULL and `errno` on failure; on success
/// `qp_init_attr->cap` holds the capacities the QP got, as libibverbs
/// writes them back.
///
/// # Safety
/// `pd` and the objects `qp_init_attr` names are NULL or live objects of
/// this library; `qp_init_attr` is NULL or writable.
#[export_name = "uverbs_ibv_create_qp"]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { qp_init_attr.as_mut() }) else {
        return errno::null(Errno::EINVAL);
    };
    let req = Request {
        pd,
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
        extended: false,
        opts: QpCreateOptions::new(),
    };
    // SAFETY: the caller's contract.
    match unsafe { create(&req) } {
        Ok((qp, cap)) => {
            a.cap = cap;
            qp
        }
        Err(e) => errno::null(e),
    }
}

/// The `create_qp_ex` op (`ibv_create_qp_ex`): the PD comes in the
/// attributes (`IBV_QP_INIT_ATTR_PD`, required), create flags go to uverbs
/// (which passes them to the kernel; its rxe provider refuses any) but
/// `IBV_QP_CREATE_SOURCE_QPN` (`EOPNOTSUPP`: uverbs has no source QPN),
/// `send_ops_flags` when uverbs posts every operation they name on the
/// QP's type (`EOPNOTSUPP` otherwise, as rxe refuses what it lacks; then
/// they size the send queue, as libmlx5 sizes it), and XRC, TSO and RSS
/// fail with `EOPNOTSUPP`. The QP it makes has an `ibv_qp_ex`
/// ([`crate::qp_ex::ibv_qp_to_qp_ex`]), as rxe's `create_qp_ex` gives
/// one whatever the mask.
pub(crate) unsafe extern "C" fn create_qp_ex(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: verbs.h's contract: NULL or the program's attributes.
    let Some(a) = (unsafe { attr.as_mut() }) else {
        return errno::null(Errno::EINVAL);
    };
    // SAFETY: verbs.h's contract.
    let made = unsafe { ex_request(context, a) }.and_then(|req| {
        // SAFETY: verbs.h's contract: the objects named are live.
        unsafe { create(&req) }
    });
    match made {
        Ok((qp, cap)) => {
            a.cap = cap;
            qp
        }
        Err(e) => errno::null(e),
    }
}

/// The request of an `ibv_qp_init_attr_ex`, checked as `create_qp_ex`
/// checks it (see there).
///
/// # Safety
/// `context` is NULL or an open context of this library; the PD `a`
/// names is NULL or live.
pub(crate) unsafe fn ex_request(
    context: *mut ibv_context,
    a: &ibv_qp_init_attr_ex,
) -> Result<Request, Errno> {
    let mask = a.comp_mask;
    if mask & !KNOWN_INIT_ATTR != 0 {
        return Err(Errno::EINVAL);
    }
    if mask & UNSUPPORTED_INIT_ATTR != 0
        || (mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0
            && a.create_flags & IBV_QP_CREATE_SOURCE_QPN != 0)
    {
        return Err(Errno::EOPNOTSUPP);
    }
    let mut opts = QpCreateOptions::new();
    if mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 {
        opts = opts.create_flags(QpCreateFlags::from_bits_retain(a.create_flags));
    }
    if mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        let ops = SendOpsFlags::from_bits_retain(a.send_ops_flags);
        opts = opts.send_ops(ops);
        // Checked here, before the PD (uverbs checks again when it creates
        // the QP): what the provider posts on the QP's type, none on a type
        // without an `ibv_qp_ex` (rxe's `check_qp_init_attr`).
        // SAFETY: verbs.h's contract: the program's open context.
        let posts = match a.qp_type {
            // SAFETY: the caller's contract.
            2..=4 => unsafe { crate::context::Context::from_c(context) }?
                .uv
                .send_ops(attr::qp_type(a.qp_type)),
            _ => None,
        };
        if !posts.is_some_and(|p| p.contains(ops)) {
            return Err(Errno::EOPNOTSUPP);
        }
    }
    if mask & IBV_QP_INIT_ATTR_PD == 0 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: the caller's contract: the PD is NULL or live.
    if let Ok(pd) = unsafe { Pd::from_c(a.pd) } {
        if pd.c.context != context {
            return Err(Errno::EINVAL);
        }
    }
    Ok(Request {
        pd: a.pd,
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
        extended: true,
        opts,
    })
}

/// `ibv_modify_qp`: 0 or the positive errno; on success with
/// `IBV_QP_STATE`, `qp->state` is the new state (as libibverbs sets it).
///
/// # Safety
/// `qp` is NULL or a live QP of this library; `attr` is NULL or readable.
#[export_name = "uverbs_ibv_modify_qp"]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    let (Ok(q), Some(a)) = (unsafe { Qp::from_c(qp) }, unsafe { attr.as_ref() }) else {
        return errno::positive(Errno::EINVAL);
    };
    // The legacy bits 21..=24 and bits above IBV_QP_RATE_LIMIT: the
    // kernel refuses them with EOPNOTSUPP (uverbs' own check would say
    // EINVAL first).
    if attr_mask & (0xf << 21) != 0 || attr_mask & !((attr::IBV_QP_RATE_LIMIT << 1) - 1) != 0 {
        return errno::positive(Errno::EOPNOTSUPP);
    }
    let (uv_attr, mask) = attr::modify_attr(a, attr_mask);
    match q.qp.with(|uv| uv.modify(&uv_attr, mask)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return errno::positive(errno::of(&e)),
        Err(e) => return errno::positive(e),
    }
    if attr_mask & IBV_QP_STATE != 0 {
        // The program's reads are ordered against the modify by the
        // program, as with libibverbs' plain store.
        q.c.qp_base.state.store(a.qp_state, Ordering::Relaxed);
    }
    0
}

/// `ibv_query_qp`: every attribute the kernel reports (all of
/// `ibv_qp_attr` but `en_sqd_async_notify` and `rate_limit`, as in
/// libibverbs) and the creation attributes; masks with `IBV_QP_RATE_LIMIT`
/// or above fail with `EOPNOTSUPP`, as libibverbs' query.
///
/// # Safety
/// `qp` is NULL or a live QP of this library; `attr` and `init_attr` are
/// NULL or writable.
#[export_name = "uverbs_ibv_query_qp"]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the caller's contract.
    let q = match unsafe { Qp::from_c(qp) } {
        Ok(q) => q,
        Err(e) => return errno::positive(e),
    };
    if attr.is_null() || init_attr.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    let mask = match attr::query_mask(attr_mask) {
        Ok(m) => m,
        Err(e) => return errno::positive(e),
    };
    let (got, init) = match q.qp.with(|uv| uv.query(mask)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return errno::positive(errno::of(&e)),
        Err(e) => return errno::positive(e),
    };
    let base = &q.c.qp_base;
    let c_init = ibv_qp_init_attr {
        qp_context: base.qp_context,
        send_cq: base.send_cq,
        recv_cq: base.recv_cq,
        srq: base.srq,
        cap: attr::c_cap(&init.cap),
        qp_type: base.qp_type,
        sq_sig_all: c_int::from(init.sq_sig_all),
    };
    // SAFETY: the caller's contract: writable.
    unsafe {
        attr::write_query(&got, &mut *attr);
        init_attr.write(c_init);
    }
    if attr_mask & IBV_QP_STATE != 0 {
        q.c.qp_base
            .state
            .store(c_int::from(got.qp_state.raw()), Ordering::Relaxed);
    }
    0
}

/// `ibv_destroy_qp`: destroys the QP, then waits until the program has
/// acknowledged the async events the kernel reported for it (uverbs'
/// `QueuePair::destroy_awaiting_acks`, libibverbs' order); 0 or the
/// positive errno (the QP is then unchanged).
///
/// # Safety
/// `qp` is NULL or a live QP of this library, not used after success.
#[export_name = "uverbs_ibv_destroy_qp"]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: the caller's contract.
    let q = match unsafe { Qp::from_c(qp) } {
        Ok(q) => q,
        Err(e) => return errno::positive(e),
    };
    if let Err(e) = q.qp.destroy(qp_ex::end_for_destroy) {
        return errno::positive(e);
    }
    // SAFETY: made by `into_c` in `create`; the program gives it up.
    unsafe { Qp::free(qp) };
    0
}

/// Acknowledges one async event of the QP at `p` (`ibv_ack_async_event`).
///
/// # Safety
/// `p` is NULL or a live QP of this library.
pub(crate) unsafe fn ack_async_event(p: *mut ibv_qp) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    unsafe { Qp::from_c(p) }?.qp.ack_async_event()
}

/// Attach or detach (`attach`) the QP at `qp` to the group `gid`/`lid`.
///
/// # Safety
/// As [`ibv_attach_mcast`].
unsafe fn mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16, attach: bool) -> c_int {
    // SAFETY: the caller's contract.
    let (Ok(q), Some(g)) = (unsafe { Qp::from_c(qp) }, unsafe { gid.as_ref() }) else {
        return errno::positive(Errno::EINVAL);
    };
    let g = attr::gid(g);
    let r = q.qp.with(|uv| {
        if attach {
            uv.attach_mcast(g, lid)
        } else {
            uv.detach_mcast(g, lid)
        }
    });
    match r {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => errno::positive(errno::of(&e)),
        Err(e) => errno::positive(e),
    }
}

/// `ibv_attach_mcast`: 0 or the positive errno.
///
/// # Safety
/// `qp` is NULL or a live QP of this library; `gid` is NULL or readable.
#[export_name = "uverbs_ibv_attach_mcast"]
pub unsafe extern "C" fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { mcast(qp, gid, lid, true) }
}

/// `ibv_detach_mcast`: 0 or the positive errno.
///
/// # Safety
/// As [`ibv_attach_mcast`].
#[export_name = "uverbs_ibv_detach_mcast"]
pub unsafe extern "C" fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { mcast(qp, gid, lid, false) }
}

/// `ibv_query_qp_data_in_order` (IBVERBS_1.14): 0, "no in-order
/// guarantee and no capability", which is libibverbs' answer for a
/// provider that does not implement the query (rxe at 44); uverbs has no
/// such query.
///
/// # Safety
/// `qp` is a QP of this library (it is not read).
#[export_name = "uverbs_ibv_query_qp_data_in_order"]
pub unsafe extern "C" fn ibv_query_qp_data_in_order(
    _qp: *mut ibv_qp,
    _op: c_int,
    _flags: u32,
) -> c_int {
    0
}

/// The `post_send` op (`ibv_post_send`).
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    if bad_wr.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    // SAFETY: verbs.h's contract: `bad_wr` is writable.
    unsafe { bad_wr.write(null_mut()) };
    // SAFETY: verbs.h's contract: a live QP.
    let q = match unsafe { Qp::from_c(qp) } {
        Ok(q) if !wr.is_null() => q,
        _ => return errno::positive(Errno::EINVAL),
    };
    let r = q.qp.posting(|uv, bufs| {
        // SAFETY: verbs.h's contract: a chain of valid requests.
        unsafe { post::post_send_chain(bufs, uv, wr, bad_wr) }
    });
    r.unwrap_or_else(errno::positive)
}

/// The `post_recv` op (`ibv_post_recv`).
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    if bad_wr.is_null() {
        return errno::positive(Errno::EINVAL);
    }
    // SAFETY: verbs.h's contract: `bad_wr` is writable.
    unsafe { bad_wr.write(null_mut()) };
    // SAFETY: verbs.h's contract: a live QP.
    let q = match unsafe { Qp::from_c(qp) } {
        Ok(q) if !wr.is_null() => q,
        _ => return errno::positive(Errno::EINVAL),
    };
    let mut rq = q.rq.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((rq, bufs)) = rq.as_mut() {
        // SAFETY: verbs.h's contract: a chain of valid requests.
        return unsafe { post::post_recv_chain(bufs, wr, bad_wr, |w| rq.post_recv(w)) };
    }
    drop(rq);
    let r = q.qp.posting(|uv, bufs| {
        // SAFETY: verbs.h's contract: a chain of valid requests.
        unsafe { post::post_recv_chain(bufs, wr, bad_wr, |w| uv.post_recv(w)) }
    });
    r.unwrap_or_else(errno::positive)
}

type PostSendFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
type PostRecvFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
type CreateQpExFn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;

/// `ibv_context_ops.post_send`.
// SAFETY: a function pointer as another function pointer type; programs
// call the slot with verbs.h's signature, which is `PostSendFn`.
pub(crate) const POST_SEND: AnyFn =
    Some(unsafe { transmute::<PostSendFn, unsafe extern "C" fn()>(post_send) });
/// `ibv_context_ops.post_recv`.
// SAFETY: as for POST_SEND, with `PostRecvFn`.
pub(crate) const POST_RECV: AnyFn =
    Some(unsafe { transmute::<PostRecvFn, unsafe extern "C" fn()>(post_recv) });
/// `verbs_context.create_qp_ex`.
// SAFETY: as for POST_SEND, with `CreateQpExFn`.
pub(crate) const CREATE_QP_EX: AnyFn =
    Some(unsafe { transmute::<CreateQpExFn, unsafe extern "C" fn()>(create_qp_ex) });
