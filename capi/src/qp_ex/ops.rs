//! The function slots of `struct ibv_qp_ex` (verbs.h's `ibv_wr_*` inlines
//! call them with no NULL check): the builders, the setters, and
//! `wr_start` / `wr_complete` / `wr_abort`; plus `wr_flush`, the slot
//! rdma-core appends after 44.
//!
//! A builder reads `qpx->wr_id` and `qpx->wr_flags` when it is called, as
//! rxe's and mlx5's do; the program writes them through its pointer, so
//! they are atomics read with relaxed loads (the program orders its own
//! writes before its call). The operations uverbs has no objects for
//! (`wr_send_tso`, `wr_flush`, `wr_set_xrc_srqn`) fail the session: its
//! `wr_complete` returns `EOPNOTSUPP` and posts nothing.

use crate::handle::Handle;
use core::{
    ffi::{c_int, c_void},
    mem::transmute,
    slice,
    sync::atomic::Ordering,
};

use uverbs::{sys::Errno, SendOp, Sge};

use super::session::{self, flags, with_open};
use crate::{
    errno,
    layout::{
        pd::ibv_mw,
        qp::{ibv_ah, ibv_data_buf, ibv_mw_bind_info, ibv_qp_ex, ibv_sge},
        AnyFn,
    },
    mw::bind,
    qp::Qp,
};

/// The QP behind a program's `qpx` (`None` for NULL).
///
/// # Safety
/// `qpx` is NULL or a live QP of this library.
#[inline(always)]
unsafe fn qp<'a>(qpx: *mut ibv_qp_ex) -> Option<&'a Qp> {
    // SAFETY: the caller's contract; `ibv_qp_ex` starts with the `ibv_qp`.
    unsafe { Qp::from_c(qpx.cast()) }.ok()
}

/// A builder: a request of `op` with the `wr_id` and `wr_flags` the
/// program wrote; `whole`: the operation carries its own data (pushed
/// now).
///
/// # Safety
/// As [`qp`].
#[inline(always)]
unsafe fn build(qpx: *mut ibv_qp_ex, op: SendOp, whole: bool) {
    // SAFETY: the caller's contract.
    let Some(q) = (unsafe { qp(qpx) }) else {
        return;
    };
    with_open(q, |s, uv, config| {
        let wr_id = q.c.wr_id.load(Ordering::Relaxed);
        let flags = flags(q.c.wr_flags.load(Ordering::Relaxed));
        if whole {
            s.build_whole(uv, config, wr_id, flags, op);
        } else {
            s.build(uv, config, wr_id, flags, op);
        }
    });
}

/// A builder or setter that cannot be carried out: the session fails
/// with `e`.
///
/// # Safety
/// As [`qp`].
unsafe fn fail(qpx: *mut ibv_qp_ex, e: Errno) {
    // SAFETY: the caller's contract.
    if let Some(q) = unsafe { qp(qpx) } {
        with_open(q, |s, _, _| s.fail(e));
    }
}

/// A builder or setter uverbs cannot carry out: the session fails with
/// `EOPNOTSUPP`.
///
/// # Safety
/// As [`qp`].
unsafe fn unsupported(qpx: *mut ibv_qp_ex) {
    // SAFETY: the caller's contract.
    unsafe { fail(qpx, Errno::EOPNOTSUPP) }
}

/// `ibv_wr_start`.
unsafe extern "C" fn wr_start(qpx: *mut ibv_qp_ex) {
    // SAFETY: verbs.h's contract: a live QP.
    if let Some(q) = unsafe { qp(qpx) } {
        session::start(q);
    }
}

/// `ibv_wr_complete`: 0, or the session's first error as a positive errno
/// (nothing of it posted, but for a failed doorbell).
unsafe extern "C" fn wr_complete(qpx: *mut ibv_qp_ex) -> c_int {
    // SAFETY: verbs.h's contract: a live QP.
    let Some(q) = (unsafe { qp(qpx) }) else {
        return errno::positive(Errno::EINVAL);
    };
    match session::complete(q) {
        Ok(()) => 0,
        Err(e) => errno::positive(e),
    }
}

/// `ibv_wr_abort`.
unsafe extern "C" fn wr_abort(qpx: *mut ibv_qp_ex) {
    // SAFETY: verbs.h's contract: a live QP.
    if let Some(q) = unsafe { qp(qpx) } {
        session::abort(q);
    }
}

/// `ibv_wr_send`.
unsafe extern "C" fn wr_send(qpx: *mut ibv_qp_ex) {
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, SendOp::Send, false) }
}

/// `ibv_wr_send_imm` (`imm` big-endian, as in `ibv_send_wr`).
unsafe extern "C" fn wr_send_imm(qpx: *mut ibv_qp_ex, imm: u32) {
    let op = SendOp::SendWithImm {
        imm: u32::from_be(imm),
    };
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, op, false) }
}

/// `ibv_wr_rdma_write`.
unsafe extern "C" fn wr_rdma_write(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    let op = SendOp::RdmaWrite { remote_addr, rkey };
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, op, false) }
}

/// `ibv_wr_rdma_write_imm`.
unsafe extern "C" fn wr_rdma_write_imm(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm: u32) {
    let op = SendOp::RdmaWriteWithImm {
        remote_addr,
        rkey,
        imm: u32::from_be(imm),
    };
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, op, false) }
}

/// `ibv_wr_rdma_read`.
unsafe extern "C" fn wr_rdma_read(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    let op = SendOp::RdmaRead { remote_addr, rkey };
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, op, false) }
}

/// `ibv_wr_atomic_cmp_swp`.
unsafe extern "C" fn wr_atomic_cmp_swp(
    qpx: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    let op = SendOp::CompareSwap {
        remote_addr,
        rkey,
        compare,
        swap,
    };
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, op, false) }
}

/// `ibv_wr_atomic_fetch_add`.
unsafe extern "C" fn wr_atomic_fetch_add(
    qpx: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    let op = SendOp::FetchAdd {
        remote_addr,
        rkey,
        add,
    };
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, op, false) }
}

/// `ibv_wr_bind_mw`: binds `mw` to `info`'s range with the new key
/// `rkey`; the window's current key and the region's local key are read
/// now, as rxe's `wr_bind_mw` reads them (a NULL window or bind info, or a
/// NULL region with a length, fails the session with `EINVAL`).
unsafe extern "C" fn wr_bind_mw(
    qpx: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    // SAFETY: verbs.h's contract: a live window of this library, a bind
    // info whose region is a live one of this library or NULL.
    let bind = unsafe { info.as_ref() }
        .ok_or(Errno::EINVAL)
        // SAFETY: as above.
        .and_then(|info| unsafe { bind::binding(mw, rkey, info) });
    match bind {
        // SAFETY: verbs.h's contract: a live QP.
        Ok(b) => unsafe { build(qpx, SendOp::BindMw(b), true) },
        // SAFETY: as above.
        Err(e) => unsafe { fail(qpx, e) },
    }
}

/// `ibv_wr_local_inv`.
unsafe extern "C" fn wr_local_inv(qpx: *mut ibv_qp_ex, rkey: u32) {
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, SendOp::LocalInvalidate { rkey }, true) }
}

/// `ibv_wr_send_inv`.
unsafe extern "C" fn wr_send_inv(qpx: *mut ibv_qp_ex, rkey: u32) {
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, SendOp::SendWithInvalidate { rkey }, false) }
}

/// `ibv_wr_send_tso`: uverbs has no TSO (nor raw packet QPs).
unsafe extern "C" fn wr_send_tso(qpx: *mut ibv_qp_ex, _hdr: *mut c_void, _sz: u16, _mss: u16) {
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { unsupported(qpx) }
}

/// `ibv_wr_atomic_write`: the 8 bytes at `data` are copied now (a NULL
/// `data` fails the session with `EINVAL`).
unsafe extern "C" fn wr_atomic_write(
    qpx: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    data: *const c_void,
) {
    if data.is_null() {
        // SAFETY: verbs.h's contract: a live QP.
        return unsafe { fail(qpx, Errno::EINVAL) };
    }
    // SAFETY: verbs.h's contract: `data` names 8 readable bytes.
    let data = unsafe { data.cast::<[u8; 8]>().read_unaligned() };
    let op = SendOp::AtomicWrite {
        remote_addr,
        rkey,
        data,
    };
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { build(qpx, op, true) }
}

/// `ibv_wr_flush` (rdma-core after 44): not in uverbs' operations.
unsafe extern "C" fn wr_flush(
    qpx: *mut ibv_qp_ex,
    _rkey: u32,
    _addr: u64,
    _len: usize,
    _type: u8,
    _level: u8,
) {
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { unsupported(qpx) }
}

/// `ibv_wr_set_xrc_srqn`: uverbs has no XRC QPs.
unsafe extern "C" fn wr_set_xrc_srqn(qpx: *mut ibv_qp_ex, _srqn: u32) {
    // SAFETY: verbs.h's contract: a live QP.
    unsafe { unsupported(qpx) }
}

/// `ibv_wr_set_ud_addr`: the AH is resolved when the request is pushed.
unsafe extern "C" fn wr_set_ud_addr(qpx: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    // SAFETY: verbs.h's contract: a live QP.
    if let Some(q) = unsafe { qp(qpx) } {
        with_open(q, |s, uv, config| s.set_ud_addr(uv, config, ah, qpn, qkey));
    }
}

/// `ibv_wr_set_sge`.
unsafe extern "C" fn wr_set_sge(qpx: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    // SAFETY: verbs.h's contract: a live QP.
    if let Some(q) = unsafe { qp(qpx) } {
        with_open(q, |s, uv, config| {
            s.set_sge(uv, config, Sge::new(addr, length, lkey));
        });
    }
}

/// `ibv_wr_set_sge_list`: at most the QP's `max_send_sge` (`ENOSPC`, as
/// rxe).
unsafe extern "C" fn wr_set_sge_list(qpx: *mut ibv_qp_ex, num: usize, list: *const ibv_sge) {
    let list = if num == 0 {
        &[][..]
    } else if list.is_null() {
        // SAFETY: verbs.h's contract: a live QP.
        return unsafe { fail(qpx, Errno::EINVAL) };
    } else {
        // SAFETY: verbs.h's contract: `num` entries, read during the call.
        unsafe { slice::from_raw_parts(list, num) }
    };
    // SAFETY: verbs.h's contract: a live QP.
    if let Some(q) = unsafe { qp(qpx) } {
        with_open(q, |s, uv, config| s.set_sge_list(uv, config, list));
    }
}

/// `ibv_wr_set_inline_data`: the bytes are taken during the call (the
/// program may reuse the buffer when it returns).
unsafe extern "C" fn wr_set_inline_data(qpx: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    let bytes = if length == 0 {
        &[][..]
    } else if addr.is_null() {
        // SAFETY: verbs.h's contract: a live QP.
        return unsafe { fail(qpx, Errno::EINVAL) };
    } else {
        // SAFETY: verbs.h's contract: `length` bytes at `addr`, read
        // during the call.
        unsafe { slice::from_raw_parts(addr.cast::<u8>(), length) }
    };
    // SAFETY: verbs.h's contract: a live QP.
    if let Some(q) = unsafe { qp(qpx) } {
        with_open(q, |s, uv, config| s.set_inline(uv, config, bytes));
    }
}

/// `ibv_wr_set_inline_data_list`: the pieces concatenated during the call.
unsafe extern "C" fn wr_set_inline_data_list(
    qpx: *mut ibv_qp_ex,
    num: usize,
    list: *const ibv_data_buf,
) {
    let list = if num == 0 {
        &[][..]
    } else if list.is_null() {
        // SAFETY: verbs.h's contract: a live QP.
        return unsafe { fail(qpx, Errno::EINVAL) };
    } else {
        // SAFETY: verbs.h's contract: `num` entries.
        unsafe { slice::from_raw_parts(list, num) }
    };
    if list.iter().any(|b| b.addr.is_null() && b.length > 0) {
        // SAFETY: verbs.h's contract: a live QP.
        return unsafe { fail(qpx, Errno::EINVAL) };
    }
    // SAFETY: verbs.h's contract: a live QP.
    if let Some(q) = unsafe { qp(qpx) } {
        // SAFETY: verbs.h's contract: each piece names `length` readable
        // bytes (checked non-NULL above).
        with_open(q, |s, uv, config| unsafe {
            s.set_inline_list(uv, config, list)
        });
    }
}

/// A slot holding `f`, whose type is the slot's verbs.h signature.
macro_rules! slot {
    ($f:ident: fn($($arg:ty),*) $(-> $ret:ty)?) => {{
        type Sig = unsafe extern "C" fn($($arg),*) $(-> $ret)?;
        const SLOT: AnyFn =
            // SAFETY: a function pointer as another function pointer type;
            // programs call the slot with verbs.h's signature, `Sig`.
            Some(unsafe { transmute::<Sig, unsafe extern "C" fn()>($f) });
        SLOT
    }};
}

/// Fills every slot of `c` (none is left NULL, whatever `send_ops_flags`
/// asked for); returns the `wr_flush` slot of rdma-core after 44, which
/// follows `c` in the QP object.
pub(crate) fn install(c: &mut ibv_qp_ex) -> AnyFn {
    type Q = *mut ibv_qp_ex;
    c.wr_atomic_cmp_swp = slot!(wr_atomic_cmp_swp: fn(Q, u32, u64, u64, u64));
    c.wr_atomic_fetch_add = slot!(wr_atomic_fetch_add: fn(Q, u32, u64, u64));
    c.wr_bind_mw = slot!(wr_bind_mw: fn(Q, *mut ibv_mw, u32, *const ibv_mw_bind_info));
    c.wr_local_inv = slot!(wr_local_inv: fn(Q, u32));
    c.wr_rdma_read = slot!(wr_rdma_read: fn(Q, u32, u64));
    c.wr_rdma_write = slot!(wr_rdma_write: fn(Q, u32, u64));
    c.wr_rdma_write_imm = slot!(wr_rdma_write_imm: fn(Q, u32, u64, u32));
    c.wr_send = slot!(wr_send: fn(Q));
    c.wr_send_imm = slot!(wr_send_imm: fn(Q, u32));
    c.wr_send_inv = slot!(wr_send_inv: fn(Q, u32));
    c.wr_send_tso = slot!(wr_send_tso: fn(Q, *mut c_void, u16, u16));
    c.wr_set_ud_addr = slot!(wr_set_ud_addr: fn(Q, *mut ibv_ah, u32, u32));
    c.wr_set_xrc_srqn = slot!(wr_set_xrc_srqn: fn(Q, u32));
    c.wr_set_inline_data = slot!(wr_set_inline_data: fn(Q, *mut c_void, usize));
    c.wr_set_inline_data_list = slot!(wr_set_inline_data_list: fn(Q, usize, *const ibv_data_buf));
    c.wr_set_sge = slot!(wr_set_sge: fn(Q, u32, u64, u32));
    c.wr_set_sge_list = slot!(wr_set_sge_list: fn(Q, usize, *const ibv_sge));
    c.wr_start = slot!(wr_start: fn(Q));
    c.wr_complete = slot!(wr_complete: fn(Q) -> c_int);
    c.wr_abort = slot!(wr_abort: fn(Q));
    c.wr_atomic_write = slot!(wr_atomic_write: fn(Q, u32, u64, *const c_void));
    slot!(wr_flush: fn(Q, u32, u64, usize, u8, u8))
}
