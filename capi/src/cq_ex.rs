//! `struct ibv_cq_ex`: the `create_cq_ex` op behind verbs.h's inline
//! `ibv_create_cq_ex`, and the polling session behind its inline
//! `ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll` and `ibv_wc_read_*`.
//!
//! Every CQ of this library is an `ibv_cq_ex` whose ops are all set
//! ([`fill_ops`], for `ibv_create_cq`'s CQs too, where rdma-core's rxe
//! leaves them NULL): a CQ made here is one [`Cq`] whatever made it, so
//! `ibv_poll_cq`, `ibv_req_notify_cq`, completion events and
//! `ibv_destroy_cq` work on it as on any other.
//!
//! # What a CQ reports (rdma-core's `rxe_create_cq_ex` and `cq_read_*`)
//!
//! The seven standard `IBV_WC_EX_WITH_*` fields are decoded by uverbs for
//! every completion, so each reader answers whatever `wc_flags` asked for
//! (rdma-core's rxe leaves the slots of fields not asked for NULL; a
//! program may not call them, and here they answer rather than crash).
//! The values are `ibv_poll_cq`'s for the same completion (cq.rs's
//! conversion): `imm_data` in network order as the kernel wrote it,
//! `wc_flags` in the numbering uverbs gives for the device
//! (`Context::wc_flags_numbering`: the kernel's where rdma-core's provider
//! copies them, rxe; libibverbs' where it builds them, mlx5). The two timestamps are granted by
//! uverbs where the provider has them (mlx5), refused with `EOPNOTSUPP`
//! where not (rxe, as rdma-core's rxe refuses them); `CVLAN`, `FLOW_TAG`
//! and `TM_INFO`, which uverbs does not decode, and bits verbs.h does not
//! define are refused with `EOPNOTSUPP` (rdma-core's rxe: any bit beyond
//! its seven). Their readers, never reached through a CQ that was created,
//! answer 0.
//!
//! # The session and its lock
//!
//! rdma-core's rxe holds the CQ's lock from a successful `start_poll` to
//! `end_poll`, so sessions of two threads on one CQ run one after the
//! other, and the fields a session's thread reads (`cq->status`,
//! `cq->wr_id`, the readers) stay its own. Here a session is a per-CQ
//! owner word ([`Session`]): `start_poll` takes it (waiting while another
//! thread's session is open, as rxe's spin lock does), `end_poll` gives it
//! back, and a `start_poll` that finds nothing (`ENOENT`) gives it back at
//! once, as rxe unlocks there. Inside a session each `start_poll` and
//! `next_poll` takes one completion from uverbs' CQ
//! ([`uverbs::CompletionQueue::start_poll`], under the lock `ibv_poll_cq`
//! takes) and copies it into the session's record before returning:
//! `status` and `wr_id` into the C struct's fields, the rest into atomics
//! the readers load. The uverbs lock is not held between calls, so arming
//! the CQ and creating QPs on it never wait for a session (neither waits
//! for rxe's lock either); completions uverbs took off the ring but the
//! session did not reach stay in uverbs' CQ, first in line for the next
//! session and for `ibv_poll_cq`, except a QP's destroyed or reset since:
//! uverbs drops them before it hands out the next (mlx5, as libmlx5's
//! `__mlx5_cq_clean` removes them; rxe keeps them, as rdma-core's rxe
//! does), so a program that frees a QP's requests after `ibv_destroy_qp`
//! never reads their `wr_id` again.
//!
//! A program that breaks the contract gets errors or another thread's
//! values, never undefined behaviour: `next_poll` outside the caller's own
//! session is `EINVAL`, a second `start_poll` in the same thread's open
//! session is `EDEADLK` (rxe's spin lock would spin forever), `end_poll`
//! outside it does nothing (rxe unlocks a lock it does not hold), and the
//! record is atomics.

#![allow(unsafe_code)]

use crate::handle::Handle;
use core::{
    ffi::{c_int, c_uint},
    sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed},
};
use uverbs::{sys::Errno, WcExFlags, WorkCompletion};

use crate::{
    cq::{self, Cq, CqCreate},
    errno,
    layout::{
        context::ibv_context,
        cq::{ibv_cq_ex, ibv_cq_init_attr_ex, ibv_poll_cq_attr, ibv_wc_tm_info},
        AnyFn,
    },
    owner::{thread_token, OwnerLock},
};

/// `IBV_CQ_INIT_ATTR_MASK_FLAGS`: `flags` is valid.
const MASK_FLAGS: u32 = 1 << 0;
/// `IBV_CQ_INIT_ATTR_MASK_PD`: `parent_domain` is valid.
const MASK_PD: u32 = 1 << 1;
/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED`: the program promises one thread
/// per CQ (a permission to skip locks, which this library need not use).
const SINGLE_THREADED: u32 = 1 << 0;

/// The `IBV_WC_EX_WITH_*` bits uverbs can report: the standard seven and
/// the two timestamps (which it grants only where the provider has them).
const REPORTABLE: WcExFlags = WcExFlags::STANDARD
    .union(WcExFlags::COMPLETION_TIMESTAMP)
    .union(WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK);

/// Checks `ibv_create_cq_ex`'s attributes as libibverbs and rdma-core's rxe
/// do, and says what to create.
pub(crate) fn create_args(a: &ibv_cq_init_attr_ex) -> Result<CqCreate, Errno> {
    // rdma-core's rxe: any bit beyond what it reports is EOPNOTSUPP, first.
    if a.wc_flags & !REPORTABLE.bits() != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    // libibverbs' ibv_cmd_create_cq_ex: an unknown comp_mask bit.
    if a.comp_mask & !(MASK_FLAGS | MASK_PD) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    // IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN goes to the kernel, whose rxe
    // refuses every CQ flag with EOPNOTSUPP (and uverbs has no way to ask
    // for it); unknown bits are refused the same way.
    if a.comp_mask & MASK_FLAGS != 0 && a.flags & !SINGLE_THREADED != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    // The parent domain whose allocator the CQ's memory comes from (mlx5;
    // rxe ignores it, as rdma-core's). A NULL one is refused.
    let parent_domain = if a.comp_mask & MASK_PD != 0 {
        if a.parent_domain.is_null() {
            return Err(Errno::EINVAL);
        }
        a.parent_domain
    } else {
        core::ptr::null_mut()
    };
    let (Ok(cqe), Ok(comp_vector)) = (c_int::try_from(a.cqe), c_int::try_from(a.comp_vector))
    else {
        // The kernel's answer for a cqe above max_cqe, and uverbs' for a
        // vector the device does not have.
        return Err(Errno::EINVAL);
    };
    Ok(CqCreate {
        cqe,
        cq_context: a.cq_context,
        channel: a.channel,
        comp_vector,
        wc_flags: WcExFlags::from_bits_retain(a.wc_flags),
        parent_domain,
    })
}

/// `verbs_context.create_cq_ex`: a CQ polled in sessions (and by every
/// other CQ verb); NULL and `errno` on failure.
///
/// # Safety
/// `context` is NULL or an open context of this library; `attr` is NULL or
/// the program's attributes, whose `channel` is NULL or a live channel of
/// the context.
unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    // SAFETY: the caller's contract: NULL or readable attributes.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return errno::null(Errno::EINVAL);
    };
    let made = create_args(a).and_then(|args| {
        // SAFETY: the caller's contract.
        unsafe { cq::create(context, &args, fill_ops) }
    });
    match made {
        Ok(cq) => cq.cast(),
        Err(e) => errno::null(e),
    }
}

/// Sets every op of a new CQ's `ibv_cq_ex` part (`cq::create` calls it
/// before the CQ is handed out).
pub(crate) fn fill_ops(c: &mut ibv_cq_ex) {
    c.start_poll = START_POLL;
    c.next_poll = NEXT_POLL;
    c.end_poll = END_POLL;
    c.read_opcode = READ_OPCODE;
    c.read_vendor_err = READ_VENDOR_ERR;
    c.read_byte_len = READ_BYTE_LEN;
    c.read_imm_data = READ_IMM_DATA;
    c.read_qp_num = READ_QP_NUM;
    c.read_src_qp = READ_SRC_QP;
    c.read_wc_flags = READ_WC_FLAGS;
    c.read_slid = READ_SLID;
    c.read_sl = READ_SL;
    c.read_dlid_path_bits = READ_DLID_PATH_BITS;
    c.read_completion_ts = READ_COMPLETION_TS;
    c.read_cvlan = READ_CVLAN;
    c.read_flow_tag = READ_FLOW_TAG;
    c.read_tm_info = READ_TM_INFO;
    c.read_completion_wallclock_ns = READ_COMPLETION_WALLCLOCK_NS;
}

/// A CQ's polling session: which thread has one open (an owner lock,
/// `crate::owner`), and the completion it is at (see the module's doc).
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// Held by the thread whose session is open.
    owner: OwnerLock,
    /// The current completion's fields other than `status` and `wr_id`.
    cur: Current,
}

/// The current completion, as `ibv_poll_cq` would have written it.
#[derive(Debug, Default)]
struct Current {
    opcode: AtomicU32,
    vendor_err: AtomicU32,
    byte_len: AtomicU32,
    imm_data: AtomicU32,
    qp_num: AtomicU32,
    src_qp: AtomicU32,
    wc_flags: AtomicU32,
    slid: AtomicU32,
    sl: AtomicU8,
    dlid_path_bits: AtomicU8,
    completion_ts: AtomicU64,
    wallclock_ns: AtomicU64,
}

impl Session {
    /// Opens the session for thread `me`, waiting while another thread's
    /// is open; `EDEADLK` if `me`'s own is.
    fn open(&self, me: usize) -> Result<(), Errno> {
        if self.owner.held_by(me) {
            return Err(Errno::EDEADLK);
        }
        self.owner.acquire(me);
        Ok(())
    }

    /// Ends `me`'s session; nothing if `me` has none open.
    fn close(&self, me: usize) {
        if self.owner.held_by(me) {
            self.owner.release();
        }
    }

    /// Whether `me` has the session open.
    fn is_open_by(&self, me: usize) -> bool {
        self.owner.held_by(me)
    }
}

/// Moves the session of `cq` to the next completion uverbs has: 0 with
/// the completion recorded, `ENOENT` when there is none, `EINVAL` if the
/// uverbs CQ is gone (each also in `errno`, as rdma-core's rxe sets it).
fn advance(cq: &Cq) -> c_int {
    let got = cq.with_mut(|q| {
        q.start_poll().map(|s| {
            let ts = s.completion_ts().unwrap_or(0);
            (
                s.work_completion(),
                ts,
                s.completion_wallclock_ns().unwrap_or(0),
            )
        })
    });
    match got {
        Ok(Some((w, ts, wallclock))) => {
            record(cq, &w, ts, wallclock);
            0
        }
        Ok(None) => errno::positive(Errno::ENOENT),
        Err(e) => errno::positive(e),
    }
}

/// Writes a completion where the program reads it: `status` and `wr_id`
/// in the C struct, the rest in the session's record.
fn record(cq: &Cq, w: &WorkCompletion, ts: u64, wallclock: u64) {
    let wc = cq.wc_to_c(w);
    cq.c.status.store(wc.status, Relaxed);
    cq.c.wr_id.store(wc.wr_id, Relaxed);
    let cur = &cq.session.cur;
    cur.opcode.store(wc.opcode, Relaxed);
    cur.vendor_err.store(wc.vendor_err, Relaxed);
    cur.byte_len.store(wc.byte_len, Relaxed);
    cur.imm_data.store(wc.imm_data, Relaxed);
    cur.qp_num.store(wc.qp_num, Relaxed);
    cur.src_qp.store(wc.src_qp, Relaxed);
    cur.wc_flags.store(wc.wc_flags, Relaxed);
    cur.slid.store(u32::from(wc.slid), Relaxed);
    cur.sl.store(wc.sl, Relaxed);
    cur.dlid_path_bits.store(wc.dlid_path_bits, Relaxed);
    cur.completion_ts.store(ts, Relaxed);
    cur.wallclock_ns.store(wallclock, Relaxed);
}

/// `ibv_cq_ex.start_poll`: opens a session at the CQ's first completion
/// (0), or `ENOENT` with no session open when the CQ is empty; `EINVAL`
/// for a NULL `attr` or one with a `comp_mask`.
///
/// # Safety
/// `cq` is NULL or a live CQ of this library; `attr` is NULL or readable.
unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: the caller's contract.
    let c = match unsafe { Cq::from_c(cq.cast()) } {
        Ok(c) => c,
        Err(e) => return errno::positive(e),
    };
    // SAFETY: the caller's contract: NULL or readable.
    match unsafe { attr.as_ref() } {
        Some(a) if a.comp_mask == 0 => {}
        _ => return errno::positive(Errno::EINVAL),
    }
    let me = thread_token();
    if let Err(e) = c.session.open(me) {
        return errno::positive(e);
    }
    let rc = advance(c);
    if rc != 0 {
        c.session.close(me);
    }
    rc
}

/// `ibv_cq_ex.next_poll`: the session's next completion (0), or `ENOENT`
/// (the session stays open until `end_poll`); `EINVAL` outside the
/// calling thread's session.
///
/// # Safety
/// `cq` is NULL or a live CQ of this library.
unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: the caller's contract.
    let c = match unsafe { Cq::from_c(cq.cast()) } {
        Ok(c) => c,
        Err(e) => return errno::positive(e),
    };
    if !c.session.is_open_by(thread_token()) {
        return errno::positive(Errno::EINVAL);
    }
    advance(c)
}

/// `ibv_cq_ex.end_poll`: ends the calling thread's session.
///
/// # Safety
/// `cq` is NULL or a live CQ of this library.
unsafe extern "C" fn end_poll(cq: *mut ibv_cq_ex) {
    // SAFETY: the caller's contract.
    if let Ok(c) = unsafe { Cq::from_c(cq.cast()) } {
        c.session.close(thread_token());
    }
}

/// Defines `ibv_cq_ex.read_*` ops that load one field of the session's
/// record (0 for a NULL CQ, which a reader cannot report).
macro_rules! readers {
    ($($(#[$doc:meta])* $name:ident -> $t:ty = |$cur:ident| $value:expr;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// `cq` is NULL or a live CQ of this library.
        unsafe extern "C" fn $name(cq: *mut ibv_cq_ex) -> $t {
            // SAFETY: the caller's contract.
            match unsafe { Cq::from_c(cq.cast()) } {
                Ok(c) => {
                    let $cur = &c.session.cur;
                    $value
                }
                Err(_) => 0,
            }
        }
    )*};
}

readers! {
    /// `read_opcode`: `enum ibv_wc_opcode`.
    read_opcode -> c_uint = |c| c.opcode.load(Relaxed);
    /// `read_vendor_err`.
    read_vendor_err -> u32 = |c| c.vendor_err.load(Relaxed);
    /// `read_byte_len`.
    read_byte_len -> u32 = |c| c.byte_len.load(Relaxed);
    /// `read_imm_data`: `__be32`, as `ibv_wc.imm_data` (the invalidated
    /// rkey in host order when the completion carries one).
    read_imm_data -> u32 = |c| c.imm_data.load(Relaxed);
    /// `read_qp_num`.
    read_qp_num -> u32 = |c| c.qp_num.load(Relaxed);
    /// `read_src_qp`.
    read_src_qp -> u32 = |c| c.src_qp.load(Relaxed);
    /// `read_wc_flags`: as `ibv_wc.wc_flags`.
    read_wc_flags -> c_uint = |c| c.wc_flags.load(Relaxed);
    /// `read_slid` (`uint32_t` in `ibv_cq_ex`, 16 bits in `ibv_wc`).
    read_slid -> u32 = |c| c.slid.load(Relaxed);
    /// `read_sl`.
    read_sl -> u8 = |c| c.sl.load(Relaxed);
    /// `read_dlid_path_bits`.
    read_dlid_path_bits -> u8 = |c| c.dlid_path_bits.load(Relaxed);
    /// `read_completion_ts`: the device's raw timestamp (mlx5; 0 on a CQ
    /// without, which `create_cq_ex` never made).
    read_completion_ts -> u64 = |c| c.completion_ts.load(Relaxed);
    /// `read_completion_wallclock_ns` (as `read_completion_ts`).
    read_completion_wallclock_ns -> u64 = |c| c.wallclock_ns.load(Relaxed);
    /// `read_cvlan`: 0 (`IBV_WC_EX_WITH_CVLAN` is refused at create).
    read_cvlan -> u16 = |_c| 0;
    /// `read_flow_tag`: 0 (`IBV_WC_EX_WITH_FLOW_TAG` is refused at create).
    read_flow_tag -> u32 = |_c| 0;
}

/// `ibv_cq_ex.read_tm_info`: zeroes `*tm_info` (`IBV_WC_EX_WITH_TM_INFO`
/// is refused at create, so no completion carries one).
///
/// # Safety
/// `tm_info` is NULL or writable.
unsafe extern "C" fn read_tm_info(_cq: *mut ibv_cq_ex, tm_info: *mut ibv_wc_tm_info) {
    if !tm_info.is_null() {
        // SAFETY: the caller's contract: writable, and verbs.h's type.
        unsafe { tm_info.write(ibv_wc_tm_info::default()) };
    }
}

/// `AnyFn` of a function, typed as the verbs.h slot it fills.
macro_rules! any_fn {
    ($f:ident: $t:ty) => {
        Some(
            // SAFETY: a function pointer cast to another function pointer
            // type of the same size; programs call it through verbs.h's
            // slot, whose signature is the type given here.
            unsafe { core::mem::transmute::<$t, unsafe extern "C" fn()>($f) },
        )
    };
}

type Ex = *mut ibv_cq_ex;

/// `verbs_context.create_cq_ex`.
pub(crate) const CREATE_CQ_EX: AnyFn =
    any_fn!(create_cq_ex: unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> Ex);
const START_POLL: AnyFn =
    any_fn!(start_poll: unsafe extern "C" fn(Ex, *mut ibv_poll_cq_attr) -> c_int);
const NEXT_POLL: AnyFn = any_fn!(next_poll: unsafe extern "C" fn(Ex) -> c_int);
const END_POLL: AnyFn = any_fn!(end_poll: unsafe extern "C" fn(Ex));
const READ_OPCODE: AnyFn = any_fn!(read_opcode: unsafe extern "C" fn(Ex) -> c_uint);
const READ_VENDOR_ERR: AnyFn = any_fn!(read_vendor_err: unsafe extern "C" fn(Ex) -> u32);
const READ_BYTE_LEN: AnyFn = any_fn!(read_byte_len: unsafe extern "C" fn(Ex) -> u32);
const READ_IMM_DATA: AnyFn = any_fn!(read_imm_data: unsafe extern "C" fn(Ex) -> u32);
const READ_QP_NUM: AnyFn = any_fn!(read_qp_num: unsafe extern "C" fn(Ex) -> u32);
const READ_SRC_QP: AnyFn = any_fn!(read_src_qp: unsafe extern "C" fn(Ex) -> u32);
const READ_WC_FLAGS: AnyFn = any_fn!(read_wc_flags: unsafe extern "C" fn(Ex) -> c_uint);
const READ_SLID: AnyFn = any_fn!(read_slid: unsafe extern "C" fn(Ex) -> u32);
const READ_SL: AnyFn = any_fn!(read_sl: unsafe extern "C" fn(Ex) -> u8);
const READ_DLID_PATH_BITS: AnyFn = any_fn!(read_dlid_path_bits: unsafe extern "C" fn(Ex) -> u8);
const READ_COMPLETION_TS: AnyFn = any_fn!(read_completion_ts: unsafe extern "C" fn(Ex) -> u64);
const READ_CVLAN: AnyFn = any_fn!(read_cvlan: unsafe extern "C" fn(Ex) -> u16);
const READ_FLOW_TAG: AnyFn = any_fn!(read_flow_tag: unsafe extern "C" fn(Ex) -> u32);
const READ_TM_INFO: AnyFn = any_fn!(read_tm_info: unsafe extern "C" fn(Ex, *mut ibv_wc_tm_info));
const READ_COMPLETION_WALLCLOCK_NS: AnyFn =
    any_fn!(read_completion_wallclock_ns: unsafe extern "C" fn(Ex) -> u64);

#[cfg(test)]
mod tests;
