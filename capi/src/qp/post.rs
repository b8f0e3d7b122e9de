//! `ibv_send_wr` / `ibv_recv_wr` chains as uverbs [`SendWr`] / [`RecvWr`]s.
//!
//! A send chain is read once: each request is translated and pushed into
//! one uverbs send session (`QueuePair::start_send`), which is completed
//! with one doorbell for the requests before the first one refused
//! ([`post_send_chain`]). A receive chain is read twice: the first pass
//! checks each request and copies its scatter/gather entries into the
//! reusable buffers, and stops at the first request it refuses; the second
//! builds the uverbs requests over those buffers, posted with one uverbs
//! call. Either way the requests before a refused one are posted, as
//! rdma-core's providers post a chain request by request, and `*bad_wr`
//! names the first request not posted: the refused one, or the one uverbs
//! stopped at ([`PostError::index`]). No allocation once the buffers have
//! grown to the program's largest chain.

use crate::handle::Handle;
use core::{ffi::c_int, slice};

use uverbs::{
    sys::Errno, MwBind, Payload, PostError, PostErrorKind, QpType, QueuePair, RecvWr, SendFlags,
    SendOp, SendWr, Sge, UdDest,
};

use crate::{
    ah::Ah,
    errno,
    layout::qp::{ibv_recv_wr, ibv_send_wr, ibv_sge},
    mw::bind,
};

/// `enum ibv_wr_opcode` values uverbs posts.
const IBV_WR_RDMA_WRITE: c_int = 0;
const IBV_WR_RDMA_WRITE_WITH_IMM: c_int = 1;
const IBV_WR_SEND: c_int = 2;
const IBV_WR_SEND_WITH_IMM: c_int = 3;
const IBV_WR_RDMA_READ: c_int = 4;
const IBV_WR_ATOMIC_CMP_AND_SWP: c_int = 5;
const IBV_WR_ATOMIC_FETCH_AND_ADD: c_int = 6;
const IBV_WR_LOCAL_INV: c_int = 7;
const IBV_WR_BIND_MW: c_int = 8;
const IBV_WR_SEND_WITH_INV: c_int = 9;
/// `IBV_WR_TSO`, `IBV_WR_DRIVER1`, and `IBV_WR_ATOMIC_WRITE` (whose 8
/// bytes `ibv_send_wr` has no field for: it is `ibv_wr_atomic_write`'s):
/// opcodes verbs.h has and this post does not (`EOPNOTSUPP`).
const KNOWN_UNSUPPORTED: [c_int; 3] = [10, 11, 15];
/// `IBV_SEND_INLINE`.
const IBV_SEND_INLINE: u32 = 1 << 3;

/// The buffers one QP (or SRQ) posts from, kept between posts so that a
/// post allocates nothing once they are large enough.
#[derive(Debug, Default)]
pub(crate) struct PostBufs {
    sges: Vec<Sge>,
    inline: Vec<u8>,
    recvs: Vec<RecvWr<'static>>,
}

/// An empty vector of `T<'b>` in the allocation of an emptied `T<'a>` one
/// (the same type but for the lifetime: the in-place collection keeps the
/// allocation).
fn recycle<A, B>(mut v: Vec<A>) -> Vec<B> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// The errno rdma-core's providers return for a post error: `ENOMEM` for a
/// full queue, the doorbell's own, `EINVAL` for a request they refuse.
pub(crate) fn post_errno(e: &PostError) -> Errno {
    match &e.kind {
        PostErrorKind::QueueFull => Errno::ENOMEM,
        PostErrorKind::Doorbell(err) => errno::of(err),
        _ => Errno::EINVAL,
    }
}

/// A request's scatter/gather list as a slice.
///
/// # Safety
/// `sg_list` points to `num_sge` entries when `num_sge > 0`.
unsafe fn sg_list<'a>(sg_list: *const ibv_sge, num_sge: c_int) -> Result<&'a [ibv_sge], Errno> {
    let n = usize::try_from(num_sge).map_err(|_| Errno::EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if sg_list.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: the caller's contract (verbs.h: `num_sge` entries).
    Ok(unsafe { slice::from_raw_parts(sg_list, n) })
}

fn sge(s: &ibv_sge) -> Sge {
    Sge::new(s.addr, s.length, s.lkey)
}

/// A request's `send_flags` (`enum ibv_send_flags`) as uverbs' flags
/// (`IBV_SEND_INLINE` also says where the payload is read from).
#[inline(always)]
pub(crate) fn send_flags(raw: u32) -> SendFlags {
    let inline = if raw & IBV_SEND_INLINE != 0 {
        SendFlags::INLINE
    } else {
        SendFlags::empty()
    };
    SendFlags::from_bits_retain(raw & !IBV_SEND_INLINE) | inline
}

/// The uverbs operation of a send request.
///
/// # Safety
/// A bind request's window and region are NULL or live objects of this
/// library (verbs.h's contract).
pub(crate) unsafe fn send_op(wr: &ibv_send_wr) -> Result<SendOp, Errno> {
    // SAFETY: the unions are plain data, and the opcode says which member
    // the program wrote; only that one is read (here and below).
    let imm = || u32::from_be(unsafe { wr.imm_data.imm_data });
    // SAFETY: as above (`invalidate_rkey` shares `imm_data`'s place).
    let inv = || unsafe { wr.imm_data.invalidate_rkey };
    // SAFETY: as above.
    let rdma = || unsafe { wr.wr.rdma };
    // SAFETY: as above.
    let atomic = || unsafe { wr.wr.atomic };
    Ok(match wr.opcode {
        IBV_WR_RDMA_WRITE => SendOp::RdmaWrite {
            remote_addr: rdma().remote_addr,
            rkey: rdma().rkey,
        },
        IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::RdmaWriteWithImm {
            remote_addr: rdma().remote_addr,
            rkey: rdma().rkey,
            imm: imm(),
        },
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm { imm: imm() },
        IBV_WR_RDMA_READ => SendOp::RdmaRead {
            remote_addr: rdma().remote_addr,
            rkey: rdma().rkey,
        },
        IBV_WR_ATOMIC_CMP_AND_SWP => {
            let a = atomic();
            SendOp::CompareSwap {
                remote_addr: a.remote_addr,
                rkey: a.rkey,
                compare: a.compare_add,
                swap: a.swap,
            }
        }
        IBV_WR_ATOMIC_FETCH_AND_ADD => {
            let a = atomic();
            SendOp::FetchAdd {
                remote_addr: a.remote_addr,
                rkey: a.rkey,
                add: a.compare_add,
            }
        }
        IBV_WR_LOCAL_INV => SendOp::LocalInvalidate { rkey: inv() },
        IBV_WR_SEND_WITH_INV => SendOp::SendWithInvalidate { rkey: inv() },
        // SAFETY: the caller's contract.
        IBV_WR_BIND_MW => SendOp::BindMw(unsafe { bind(wr) }?),
        op if KNOWN_UNSUPPORTED.contains(&op) => return Err(Errno::EOPNOTSUPP),
        _ => return Err(Errno::EINVAL),
    })
}

/// A bind request's window binding (`wr.bind_mw`).
///
/// # Safety
/// `wr.bind_mw.mw` is NULL or a live window of this library, and
/// `bind_info.mr` NULL or a live region of this library.
unsafe fn bind(wr: &ibv_send_wr) -> Result<MwBind, Errno> {
    // SAFETY: the opcode says the program wrote `bind_mw`.
    let b = unsafe { wr.bind_mw.bind_mw };
    // SAFETY: the caller's contract.
    unsafe { bind::binding(b.mw.cast(), b.rkey, &b.bind_info) }
}

/// The UD destination of a send request on a UD QP.
///
/// # Safety
/// `wr.wr.ud.ah` is NULL or a live AH of this library.
unsafe fn ud_dest<'a>(wr: &ibv_send_wr) -> Result<UdDest<'a>, Errno> {
    // SAFETY: on a UD QP the program writes `wr.ud`.
    let ud = unsafe { wr.wr.ud };
    // SAFETY: the caller's contract.
    let ah = unsafe { Ah::from_c(ud.ah) }?;
    Ok(UdDest::new(ah.handle(), ud.remote_qpn, ud.remote_qkey))
}

/// The request `index` links after `first`.
///
/// # Safety
/// The chain from `first` has more than `index` requests.
unsafe fn nth<T>(first: *mut T, index: usize, next: impl Fn(&T) -> *mut T) -> *mut T {
    let mut p = first;
    for _ in 0..index {
        // SAFETY: the caller's contract.
        p = next(unsafe { &*p });
    }
    p
}

/// A send request as uverbs takes it, its SGE list and inline bytes read
/// where the program has them (an inline list of several pieces is
/// gathered into `bufs`, an SGE list of several entries copied there).
///
/// # Safety
/// `wr` is a valid request whose pointers (SGE list, inline data, AH)
/// are valid, as verbs.h requires.
#[inline(always)]
unsafe fn translate<'a>(
    wr: &'a ibv_send_wr,
    bufs: &'a mut PostBufs,
    one: &'a mut Sge,
    ud: bool,
    max_inline: u32,
) -> Result<SendWr<'a>, Errno> {
    // SAFETY: the caller's contract.
    let op = unsafe { send_op(wr) }?;
    let dest = if ud {
        // SAFETY: the caller's contract.
        Some(unsafe { ud_dest(wr) }?)
    } else {
        None
    };
    // SAFETY: the caller's contract.
    let list = unsafe { sg_list(wr.sg_list, wr.num_sge) }?;
    let inline = wr.send_flags & IBV_SEND_INLINE != 0;
    let payload = if inline {
        let total = list.iter().fold(0u64, |n, s| n + u64::from(s.length));
        if total > u64::from(max_inline) {
            return Err(Errno::EINVAL);
        }
        // Inline data is read from the addresses the SGEs name, program
        // memory valid for the post (the providers copy it the same way).
        let bytes = |s: &ibv_sge| {
            // SAFETY: as said above; `length` bytes at `addr`.
            unsafe {
                slice::from_raw_parts(
                    core::ptr::with_exposed_provenance::<u8>(s.addr as usize),
                    s.length as usize,
                )
            }
        };
        match list {
            [s] if s.length > 0 => Payload::Inline(bytes(s)),
            _ => {
                bufs.inline.clear();
                for s in list.iter().filter(|s| s.length > 0) {
                    bufs.inline.extend_from_slice(bytes(s));
                }
                Payload::Inline(&bufs.inline)
            }
        }
    } else {
        match list {
            [s] => {
                *one = sge(s);
                Payload::Sges(slice::from_ref(one))
            }
            _ => {
                bufs.sges.clear();
                bufs.sges.extend(list.iter().map(sge));
                Payload::Sges(&bufs.sges)
            }
        }
    };
    Ok(SendWr::new(wr.wr_id, op, &[])
        .payload(payload)
        .flags(send_flags(wr.send_flags))
        .ud(dest))
}

/// Posts the send chain at `first` on `uv` in one pass, one uverbs send
/// session: each request translated and pushed in turn, the session
/// completed (one doorbell) for those before the first refused one, as
/// rdma-core's providers post a chain request by request. 0, or the errno
/// with `*bad_wr` set to the first request not posted: the refused one,
/// or (a failed doorbell) the one after those pushed. `EINVAL` for the
/// whole chain inside the calling thread's own `ibv_wr_*` session (whose
/// WQEs are the queue's next ones; rdma-core's providers deadlock on
/// their own lock there). No allocation once the buffers have grown to
/// the program's largest lists.
///
/// # Safety
/// `first` is a chain of live requests whose pointers (SGE lists, inline
/// data, AHs) are valid, as verbs.h requires; `bad_wr` is writable.
pub(crate) unsafe fn post_send_chain(
    bufs: &mut PostBufs,
    uv: &mut QueuePair,
    first: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let refuse = |e: Errno| {
        // SAFETY: the caller's contract.
        unsafe { bad_wr.write(first) };
        errno::positive(e)
    };
    if uv.send_pending().is_some() {
        return refuse(Errno::EINVAL);
    }
    let ud = uv.qp_type() == QpType::Ud;
    let max_inline = uv.cap().max_inline_data;
    let mut session = match uv.start_send() {
        Ok(s) => s,
        Err(e) => return refuse(post_errno(&e)),
    };
    let mut refused = None;
    let mut p = first;
    let mut count = 0usize;
    let mut one = Sge::default();
    while !p.is_null() {
        // SAFETY: the caller's contract.
        let wr = unsafe { &*p };
        // SAFETY: the caller's contract.
        let pushed = match unsafe { translate(wr, bufs, &mut one, ud, max_inline) } {
            Ok(w) => session.push(&w).map_err(|e| post_errno(&e)),
            Err(e) => Err(e),
        };
        if let Err(e) = pushed {
            refused = Some((count, e));
            break;
        }
        count += 1;
        p = wr.next;
    }
    let failed = match session.complete() {
        Err(e) => Some((e.index, post_errno(&e))),
        Ok(()) => refused,
    };
    match failed {
        None => 0,
        Some((index, e)) => {
            // SAFETY: `index` <= `count` requests of the chain.
            let bad = unsafe { nth(first, index, |w: &ibv_send_wr| w.next) };
            // SAFETY: the caller's contract.
            unsafe { bad_wr.write(bad) };
            errno::positive(e)
        }
    }
}

/// Posts the receive chain at `first` through `post` (a QP's or an SRQ's
/// uverbs post): 0, or the errno with `*bad_wr` set.
///
/// # Safety
/// `first` is a chain of live requests with valid SGE lists; `bad_wr` is
/// writable.
pub(crate) unsafe fn post_recv_chain(
    bufs: &mut PostBufs,
    first: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
    post: impl FnOnce(&[RecvWr<'_>]) -> Result<(), PostError>,
) -> c_int {
    bufs.sges.clear();
    let mut refused = None;
    let mut count = 0usize;
    let mut p = first;
    while !p.is_null() {
        // SAFETY: the caller's contract.
        let wr = unsafe { &*p };
        // SAFETY: the caller's contract.
        match unsafe { sg_list(wr.sg_list, wr.num_sge) } {
            Ok(list) => bufs.sges.extend(list.iter().map(sge)),
            Err(e) => {
                refused = Some((count, e));
                break;
            }
        }
        count += 1;
        p = wr.next;
    }
    let mut wrs: Vec<RecvWr<'_>> = recycle(core::mem::take(&mut bufs.recvs));
    let mut at = 0usize;
    let mut p = first;
    for _ in 0..count {
        // SAFETY: pass 1 read these `count` requests.
        let wr = unsafe { &*p };
        p = wr.next;
        let n = usize::try_from(wr.num_sge).unwrap_or(0);
        let sges = bufs.sges.get(at..at + n).unwrap_or(&[]);
        at += n;
        wrs.push(RecvWr::new(wr.wr_id, sges));
    }
    let posted = if wrs.is_empty() { Ok(()) } else { post(&wrs) };
    bufs.recvs = recycle(wrs);
    let failed = match posted {
        Err(e) => Some((e.index, post_errno(&e))),
        Ok(()) => refused,
    };
    match failed {
        None => 0,
        Some((index, e)) => {
            // SAFETY: `index` <= `count` requests of the chain.
            let bad = unsafe { nth(first, index, |w: &ibv_recv_wr| w.next) };
            // SAFETY: the caller's contract.
            unsafe { bad_wr.write(bad) };
            errno::positive(e)
        }
    }
}
