//! `ibv_send_wr` / `ibv_recv_wr` chains as uverbs [`SendWr`] / [`RecvWr`]
//! slices, posted with one uverbs call per chain.
//!
//! A chain is read twice: the first pass checks each request and copies
//! its scatter/gather entries (or, for `IBV_SEND_INLINE`, the bytes they
//! name) into the QP's reusable buffers, and stops at the first request it
//! refuses; the second builds the uverbs requests over those buffers. The
//! requests before a refused one are posted, as rdma-core's providers post
//! a chain request by request, and `*bad_wr` names the first request not
//! posted: the refused one, or the one uverbs' post stopped at
//! ([`PostError::index`]). No allocation once the buffers have grown to the
//! program's largest chain.

use core::{ffi::c_int, slice};

use uverbs::{
    sys::Errno, MwBind, Payload, PostError, PostErrorKind, QpType, RecvWr, SendFlags, SendOp,
    SendWr, Sge, UdDest,
};

use crate::{
    ah::Ah,
    errno,
    layout::qp::{ibv_recv_wr, ibv_send_wr, ibv_sge},
    mw,
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
    sends: Vec<SendWr<'static>>,
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

/// The uverbs operation of a send request.
///
/// # Safety
/// A bind request's window and region are NULL or live objects of this
/// library (verbs.h's contract).
unsafe fn send_op(wr: &ibv_send_wr) -> Result<SendOp, Errno> {
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
    unsafe { mw::binding(b.mw.cast(), b.rkey, &b.bind_info) }
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
    Ok(UdDest {
        ah: ah.handle(),
        remote_qpn: ud.remote_qpn,
        remote_qkey: ud.remote_qkey,
    })
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

/// Posts the send chain at `first` through `post` (the QP's uverbs post):
/// 0, or the errno with `*bad_wr` set.
///
/// # Safety
/// `first` is a chain of live requests whose pointers (SGE lists, inline
/// data, AHs) are valid, as verbs.h requires; `bad_wr` is writable.
pub(crate) unsafe fn post_send_chain(
    bufs: &mut PostBufs,
    qp_type: QpType,
    max_inline: u32,
    first: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
    post: impl FnOnce(&[SendWr<'_>]) -> Result<(), PostError>,
) -> c_int {
    let ud = qp_type == QpType::Ud;
    bufs.sges.clear();
    bufs.inline.clear();
    // Pass 1: check and copy.
    let mut refused = None;
    let mut count = 0usize;
    let mut p = first;
    while !p.is_null() {
        // SAFETY: the caller's contract.
        let wr = unsafe { &*p };
        let checked = (|| {
            // SAFETY: the caller's contract.
            unsafe { send_op(wr) }?;
            if ud {
                // SAFETY: the caller's contract.
                unsafe { ud_dest(wr) }?;
            }
            // SAFETY: the caller's contract.
            let list = unsafe { sg_list(wr.sg_list, wr.num_sge) }?;
            if wr.send_flags & IBV_SEND_INLINE != 0 {
                let total = list.iter().fold(0u64, |n, s| n + u64::from(s.length));
                if total > u64::from(max_inline) {
                    return Err(Errno::EINVAL);
                }
                for s in list.iter().filter(|s| s.length > 0) {
                    // SAFETY: inline data is read from the addresses the
                    // SGEs name, program memory valid for the post (the
                    // providers copy it the same way).
                    let bytes = unsafe {
                        slice::from_raw_parts(
                            core::ptr::with_exposed_provenance::<u8>(s.addr as usize),
                            s.length as usize,
                        )
                    };
                    bufs.inline.extend_from_slice(bytes);
                }
            } else {
                bufs.sges.extend(list.iter().map(sge));
            }
            Ok(())
        })();
        if let Err(e) = checked {
            refused = Some((count, e));
            break;
        }
        count += 1;
        p = wr.next;
    }
    // Pass 2: the uverbs requests over the copies.
    let mut wrs: Vec<SendWr<'_>> = recycle(core::mem::take(&mut bufs.sends));
    let (mut at_sge, mut at_byte) = (0usize, 0usize);
    let mut p = first;
    for _ in 0..count {
        // SAFETY: pass 1 read these `count` requests.
        let wr = unsafe { &*p };
        p = wr.next;
        // SAFETY: as in pass 1.
        let (Ok(op), Ok(list)) = (unsafe { send_op(wr) }, unsafe {
            sg_list(wr.sg_list, wr.num_sge)
        }) else {
            break;
        };
        let inline = wr.send_flags & IBV_SEND_INLINE != 0;
        let payload = if inline {
            let len = list.iter().map(|s| s.length as usize).sum::<usize>();
            let data = bufs.inline.get(at_byte..at_byte + len).unwrap_or(&[]);
            at_byte += len;
            Payload::Inline(data)
        } else {
            let sges = bufs.sges.get(at_sge..at_sge + list.len()).unwrap_or(&[]);
            at_sge += list.len();
            Payload::Sges(sges)
        };
        let dest = if ud {
            // SAFETY: as in pass 1.
            match unsafe { ud_dest(wr) } {
                Ok(d) => Some(d),
                Err(_) => break,
            }
        } else {
            None
        };
        wrs.push(SendWr {
            wr_id: wr.wr_id,
            op,
            payload,
            flags: SendFlags::from_bits_retain(wr.send_flags & !IBV_SEND_INLINE)
                | if inline {
                    SendFlags::INLINE
                } else {
                    SendFlags::empty()
                },
            ud: dest,
        });
    }
    let posted = if wrs.is_empty() { Ok(()) } else { post(&wrs) };
    bufs.sends = recycle(wrs);
    let failed = match posted {
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
