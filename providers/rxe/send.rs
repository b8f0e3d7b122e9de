//! rxe send queues: validating send work requests and writing
//! `struct rxe_send_wqe` into the mmapped SQ ring.
//!
//! What userspace fills follows RC `providers/rxe/rxe.c`
//! (`validate_send_wr`, `convert_send_wr`, `init_send_wqe`, `post_one_send`);
//! what the kernel reads back is K61 `rxe_req.c` (`req_next_wqe` recomputes
//! `mask` and `iova`; `rxe_requester` bounds `dma.num_sge`/`cur_sge` by the
//! SQ's `max_sge`, and sends inline data from `dma.inline_data` when
//! `IB_SEND_INLINE` is set). The kernel uses the WQE in place, so a
//! published slot is never touched again.
//!
//! This module has no `unsafe`: slot memory is written through
//! [`queue::Slot`](super::queue::Slot), which bounds-checks every copy.

use std::mem::{offset_of, size_of};

use zerocopy::IntoBytes;

use super::{
    queue::{Producer, Slot},
    Rxe,
};
use crate::{
    abi::{
        RxeDmaInfo, RxeSendWqe, RxeSendWr, RxeSendWrAtomic, RxeSendWrMw, RxeSendWrRdma,
        RxeSendWrUd, RxeSge, IB_UVERBS_QPT_RC, IB_UVERBS_QPT_UC, IB_UVERBS_QPT_UD,
    },
    error::{Error, ErrorKind},
    providers::Member,
    sys::Mapping,
    wr::{Payload, PostError, PostErrorKind, SendFlags, SendOp, SendWr},
};

/// `sizeof(struct rxe_send_wqe)`: the SGE array or inline data starts here.
pub(crate) const SEND_WQE_LEN: usize = size_of::<RxeSendWqe>();
/// `sizeof(struct rxe_sge)`.
const SGE_LEN: usize = size_of::<RxeSge>();

/// A UD destination resolved to what the WQE carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UdFields {
    /// Remote QP number.
    pub(crate) remote_qpn: u32,
    /// Remote Q_Key.
    pub(crate) remote_qkey: u32,
    /// The AH's index in rxe's AH pool (`rxe_create_ah_resp.ah_num`).
    pub(crate) ah_num: u32,
}

/// `wr.ud` resolved to what the WQE carries.
#[inline]
fn resolve_ud(wr: &SendWr<'_>) -> Result<Option<UdFields>, PostErrorKind> {
    let Some(d) = wr.ud else {
        return Ok(None);
    };
    let ah = Rxe::ah_of(d.ah_driver()).ok_or(PostErrorKind::BadDestination(
        "the address handle belongs to a device of another driver",
    ))?;
    Ok(Some(UdFields {
        remote_qpn: d.remote_qpn,
        remote_qkey: d.remote_qkey,
        ah_num: ah.ah_num,
    }))
}

/// A UD destination whose address handle has no rxe AH number.
#[cold]
fn no_ah_num() -> PostErrorKind {
    PostErrorKind::BadDestination(
        "the address handle has no rxe AH number (kernels before 5.10 need an address vector \
         in the WQE, which uverbs does not build)",
    )
}

/// The send queue of an rxe QP.
#[derive(Debug)]
pub(crate) struct RxeSq {
    ring: Producer,
    /// `max_send_sge` as the kernel returned it (`qp->sq.max_sge`).
    max_sge: u32,
    /// `max_inline_data` as the kernel returned it (`qp->sq.max_inline`).
    max_inline: u32,
    /// `IB_UVERBS_QPT_*` (RC, UC or UD).
    qp_type: u8,
    /// Our producer index when the send session began: the session's
    /// requests are those from here to `ring.prod()` (its cursor).
    session_mark: u32,
}

impl RxeSq {
    /// Takes over the SQ mapping of a new QP. `max_sge` and `max_inline`
    /// must be the caps the kernel returned from CREATE_QP (it rewrites them
    /// to fill the slot, K61 rxe_qp.c `rxe_qp_init_req`); a slot too small
    /// for them, or a QP type rxe has no send queue for, is an error.
    pub(crate) fn new(
        map: Mapping,
        max_sge: u32,
        max_inline: u32,
        qp_type: u8,
    ) -> Result<Self, Error> {
        const WHAT: &str = "map rxe send queue";
        if ![IB_UVERBS_QPT_RC, IB_UVERBS_QPT_UC, IB_UVERBS_QPT_UD].contains(&u32::from(qp_type)) {
            return Err(Error::new(
                WHAT,
                ErrorKind::InvalidArgument,
                format!("QP type {qp_type}: rxe send queues exist for RC, UC and UD QPs only"),
            ));
        }
        // At least 8 bytes past the fixed part: an atomic write's
        // `dma.atomic_wr` (a power-of-two slot of 208 bytes or more has
        // them anyway).
        let payload = (max_sge as usize)
            .saturating_mul(SGE_LEN)
            .max(max_inline as usize)
            .max(8);
        let ring = Producer::new(map, WHAT, SEND_WQE_LEN.saturating_add(payload))?;
        Ok(RxeSq {
            ring,
            max_sge,
            max_inline,
            qp_type,
            session_mark: 0,
        })
    }

    /// The number of WQEs the ring holds at once.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> u32 {
        self.ring.ring().mask()
    }

    /// Writes one WQE per request and publishes each; no syscall, no
    /// allocation. On a failure at `i`, requests before `i` stay posted and
    /// `PostError { index: i, .. }` is returned; the caller rings the
    /// doorbell (`Doorbell::ring`) for whatever was posted.
    ///
    /// `SendFlags::INLINE` is derived from the payload: set for
    /// [`Payload::Inline`], cleared for [`Payload::Sges`] (the kernel would
    /// otherwise send the SGE array's bytes as data).
    pub(crate) fn post(&mut self, wrs: &[SendWr<'_>]) -> Result<(), PostError> {
        for (index, wr) in wrs.iter().enumerate() {
            resolve_ud(wr)
                .and_then(|ud| self.post_one(wr, ud))
                .map_err(|kind| PostError { index, kind })?;
        }
        Ok(())
    }

    /// Validates, writes and publishes one WQE; `ud` is `wr.ud` resolved
    /// (the `AddressHandle` is not otherwise read).
    #[inline]
    pub(crate) fn post_one(
        &mut self,
        wr: &SendWr<'_>,
        ud: Option<UdFields>,
    ) -> Result<(), PostErrorKind> {
        self.write_one(wr, ud)?;
        self.ring.publish();
        Ok(())
    }

    /// Opens the send session (`ibv_wr_start`): remembers where it begins.
    pub(crate) fn begin(&mut self) {
        self.session_mark = self.ring.prod();
    }

    /// Validates and writes one WQE of a session, taken into our producer
    /// index but not handed to the kernel; on an error nothing of it is
    /// taken.
    #[inline]
    pub(crate) fn push(&mut self, wr: &SendWr<'_>) -> Result<(), PostErrorKind> {
        let ud = resolve_ud(wr)?;
        self.write_one(wr, ud)
    }

    /// [`RxeSq::push`] of a typed session's request ([`crate::WrSession`]):
    /// the QP's type was checked for the session and the request's
    /// operation and destination are ones that type carries, so only the
    /// payload is checked. Inlined, so that the caller's constant
    /// operation folds the rest of the checks and the WQE layout.
    #[inline(always)]
    pub(crate) fn push_typed(&mut self, wr: &SendWr<'_>) -> Result<(), PostErrorKind> {
        let ud = resolve_ud(wr)?;
        if ud.is_some_and(|d| d.ah_num == 0) {
            return Err(no_ah_num());
        }
        let length = self.check_payload(wr)?;
        self.write_checked(wr, ud, length)
    }

    /// Validates and writes one WQE, taken into our producer index (not
    /// yet published); on an error nothing of it is taken.
    #[inline]
    fn write_one(&mut self, wr: &SendWr<'_>, ud: Option<UdFields>) -> Result<(), PostErrorKind> {
        let length = self.validate(wr, ud)?;
        self.write_checked(wr, ud, length)
    }

    /// Writes one checked WQE of `length` payload bytes.
    #[inline(always)]
    fn write_checked(
        &mut self,
        wr: &SendWr<'_>,
        ud: Option<UdFields>,
        length: u32,
    ) -> Result<(), PostErrorKind> {
        let mut slot = self.ring.next_slot().ok_or(PostErrorKind::QueueFull)?;
        write_wqe(&mut slot, wr, ud, length);
        slot.commit();
        Ok(())
    }

    /// Ends the session (`ibv_wr_complete`): hands its WQEs to the kernel;
    /// whether there were any (the caller then rings the doorbell).
    pub(crate) fn complete_session(&mut self) -> bool {
        let any = self.ring.prod() != self.session_mark;
        if any {
            self.ring.publish();
        }
        any
    }

    /// Ends the session (`ibv_wr_abort`): its WQEs were never handed over.
    pub(crate) fn abort_session(&mut self) {
        self.ring.rewind(self.session_mark);
    }

    /// RC `validate_send_wr` plus the per-QP-type opcode rules; returns the
    /// total payload length.
    #[inline]
    fn validate(&self, wr: &SendWr<'_>, ud: Option<UdFields>) -> Result<u32, PostErrorKind> {
        let qp_type = u32::from(self.qp_type);
        let op = wr.op;
        if qp_type == IB_UVERBS_QPT_UD {
            if !matches!(op, SendOp::Send | SendOp::SendWithImm { .. }) {
                return Err(PostErrorKind::OpNotSupported(
                    "UD QPs support only SEND and SEND_WITH_IMM",
                ));
            }
            match ud {
                None => {
                    return Err(PostErrorKind::BadDestination(
                        "a send on a UD QP needs a destination (SendWr::to)",
                    ))
                }
                Some(d) if d.ah_num == 0 => return Err(no_ah_num()),
                Some(_) => {}
            }
        } else {
            if ud.is_some() {
                return Err(PostErrorKind::BadDestination(
                    "a UD destination was given for a connected (RC/UC) QP",
                ));
            }
            // The kernel's opcode table has no UC entry for these (K61
            // rxe_opcode.c `rxe_wr_opcode_info`: LOCAL_INV RC only; 6.12's
            // ATOMIC_WRITE RC only); rdma-core's rxe lists them apart from
            // UC's send_ops_flags.
            if qp_type == IB_UVERBS_QPT_UC
                && (op.is_atomic()
                    || matches!(
                        op,
                        SendOp::RdmaRead { .. }
                            | SendOp::AtomicWrite { .. }
                            | SendOp::LocalInvalidate { .. }
                    ))
            {
                return Err(PostErrorKind::OpNotSupported(
                    "UC QPs support no RDMA read, no atomics (atomic write included) \
                     and no local invalidate",
                ));
            }
        }
        self.check_payload(wr)
    }

    /// The checks of a request's payload and of an atomic's operands;
    /// returns the total payload length.
    #[inline(always)]
    fn check_payload(&self, wr: &SendWr<'_>) -> Result<u32, PostErrorKind> {
        let op = wr.op;
        let length = match wr.payload {
            Payload::Sges(sges) => {
                if sges.len() > self.max_sge as usize {
                    return Err(PostErrorKind::TooManySges {
                        given: sges.len(),
                        max: self.max_sge,
                    });
                }
                let total = sges.iter().map(|s| u64::from(s.length)).sum::<u64>();
                u32::try_from(total).map_err(|_| {
                    PostErrorKind::OpNotSupported(
                        "the scatter/gather list totals more than 4 GiB - 1 bytes",
                    )
                })?
            }
            Payload::Inline(data) => {
                if data.len() > self.max_inline as usize {
                    return Err(PostErrorKind::InlineTooLong {
                        given: data.len(),
                        max: self.max_inline,
                    });
                }
                // The requester bounds `cur_sge` by the SQ's max_sge whenever
                // the WQE carries payload, inline or not (K61 rxe_req.c
                // `rxe_requester`, also 6.12), so on a queue with max_sge 0
                // any inline byte fails the request and moves the QP to ERR
                // (seen in the guest: LOC_QP_OP_ERR on 6.1, WR_FLUSH_ERR on
                // 6.12). Such a queue exists when both max_send_sge and
                // max_inline_data (< 16) were asked small.
                if !data.is_empty() && self.max_sge == 0 {
                    return Err(PostErrorKind::OpNotSupported(
                        "rxe sends no payload, inline included, on a send queue with \
                         max_send_sge 0 (the kernel fails the request and the QP): create \
                         the QP with max_send_sge >= 1 or max_inline_data >= 16",
                    ));
                }
                if op.is_atomic() {
                    return Err(PostErrorKind::BadAtomic(
                        "an atomic's result buffer must be an SGE, not inline data",
                    ));
                }
                if matches!(op, SendOp::RdmaRead { .. }) {
                    return Err(PostErrorKind::OpNotSupported(
                        "an RDMA read's destination must be an SGE, not inline data",
                    ));
                }
                // `data.len() <= max_inline`, a u32.
                data.len() as u32
            }
        };
        if let SendOp::CompareSwap { remote_addr, .. } | SendOp::FetchAdd { remote_addr, .. } = op {
            if remote_addr & 7 != 0 {
                return Err(PostErrorKind::BadAtomic(
                    "the remote address of an atomic must be 8-byte aligned",
                ));
            }
            if !matches!(wr.payload, Payload::Sges([s]) if s.length == 8) {
                return Err(PostErrorKind::BadAtomic(
                    "an atomic needs exactly one 8-byte local SGE",
                ));
            }
        }
        if op.takes_no_payload() {
            return no_payload(wr);
        }
        Ok(length)
    }
}

/// The length of an operation that carries its data itself (bind, local
/// invalidate: 0; atomic write: its 8 bytes), when it is given no payload:
/// an empty SGE list (rdma-core's rxe `validate_send_wr` refuses a bind
/// with any SGE; inline data, even none, would set `IBV_SEND_INLINE`).
#[cold]
fn no_payload(wr: &SendWr<'_>) -> Result<u32, PostErrorKind> {
    if !matches!(wr.payload, Payload::Sges([])) {
        return Err(PostErrorKind::UnexpectedPayload(
            "a bind, a local invalidate or an atomic write takes no scatter/gather list \
             or inline data (an atomic write's 8 bytes are in SendOp::AtomicWrite)",
        ));
    }
    match wr.op {
        SendOp::AtomicWrite { remote_addr, .. } => {
            if remote_addr & 7 != 0 {
                return Err(PostErrorKind::BadAtomic(
                    "the remote address of an atomic write must be 8-byte aligned",
                ));
            }
            Ok(8)
        }
        _ => Ok(0),
    }
}

/// The send flags and SGE count the WQE carries: `INLINE` exactly for
/// inline payloads (operations without payload were given an empty SGE
/// list: `no_payload`).
#[inline(always)]
fn flags_and_sges(wr: &SendWr<'_>) -> (SendFlags, u32) {
    match wr.payload {
        // `validate` bounded the count by max_sge, a u32.
        Payload::Sges(sges) => (wr.flags.difference(SendFlags::INLINE), sges.len() as u32),
        // The kernel reads no SGE of an inline WQE; 0 also passes its
        // `num_sge <= max_sge` check for every SQ (K61 rxe_req.c).
        Payload::Inline(_) => (wr.flags.union(SendFlags::INLINE), 0),
    }
}

/// Writes the WQE for `wr` straight into `slot`: the fixed 208 bytes
/// (everything before the SGEs / inline data) field by field, then the SGEs
/// or the inline data. No 208-byte WQE is built, zeroed and copied.
///
/// What is written: `wr_id`, `reserved` (0), `opcode`, `send_flags`, `ex`,
/// the union member the opcode selects (RDMA: `wr.rdma`; atomics:
/// `wr.atomic`; UD sends: the whole `wr.ud` with the rest zeroed), `status`
/// and `state` (0 = `wqe_state_posted`), `iova`, the kernel-owned `mask`,
/// PSNs, `ack_length`, `ssn` and `has_rd_atomic` (0, as a fresh ring has
/// them), and all of `dma`. The rest of the 120-byte union is not
/// rewritten: the kernel reads only the member the opcode selects (K61
/// rxe_req.c `req_next_wqe`, `init_req_packet`; rxe_av.c reads `wr.ud`
/// only for UD), and RC `convert_send_wr` zeroes it only because it
/// builds the WQE in place from a zeroed struct. [`build_wqe`] is the
/// reference the tests compare with.
#[inline]
fn write_wqe(slot: &mut Slot<'_>, wr: &SendWr<'_>, ud: Option<UdFields>, length: u32) {
    // Field offsets in `struct rxe_send_wqe` (abi/tests/layout.rs checks
    // the struct against the C header).
    const WR_ID: usize = offset_of!(RxeSendWqe, wr) + offset_of!(RxeSendWr, wr_id);
    const RESERVED: usize = offset_of!(RxeSendWqe, wr) + offset_of!(RxeSendWr, reserved);
    const SEND_FLAGS: usize = offset_of!(RxeSendWqe, wr) + offset_of!(RxeSendWr, send_flags);
    const UNION: usize = offset_of!(RxeSendWqe, wr) + offset_of!(RxeSendWr, wr);
    const STATUS: usize = offset_of!(RxeSendWqe, status);
    const IOVA: usize = offset_of!(RxeSendWqe, iova);
    const MASK: usize = offset_of!(RxeSendWqe, mask);
    const DMA: usize = offset_of!(RxeSendWqe, dma);
    const _: () = assert!(
        RESERVED == WR_ID + 8
            && SEND_FLAGS == RESERVED + 8
            && UNION == SEND_FLAGS + 8
            && IOVA == STATUS + 8
            && MASK == IOVA + 8
            && DMA == MASK + 24
            && SEND_WQE_LEN == DMA + size_of::<RxeDmaInfo>()
    );
    // One check for the fixed part; the checks of the writes below fold.
    slot.reserve(SEND_WQE_LEN);
    let (flags, num_sge) = flags_and_sges(wr);
    slot.write(WR_ID, &wr.wr_id);
    // `reserved` = 0, `opcode`.
    slot.write(RESERVED, &[0, wr.op.raw()]);
    // `send_flags`, `ex`.
    let (member, iova, ex) = union_member(wr.op, ud);
    slot.write(SEND_FLAGS, &[flags.bits(), ex]);
    match member {
        // The kernel reads the UD member and the AV behind it: zero all of it.
        UnionMember::Ud(ud) => {
            let mut union = [0u8; 120];
            union[..size_of::<RxeSendWrUd>()].copy_from_slice(ud.as_bytes());
            slot.write(UNION, &union);
        }
        UnionMember::Rdma(m) => slot.write(UNION, &m),
        UnionMember::Atomic(m) => slot.write(UNION, &m),
        UnionMember::Mw(m) => slot.write(UNION, &m),
        // An atomic write's 8 bytes go where the SGEs would
        // (`dma.atomic_wr`, rdma-core rxe.c `wr_atomic_write`); its SGE
        // list is empty, so nothing below writes there.
        UnionMember::AtomicWrite(m, data) => {
            slot.write(UNION, &m);
            slot.write_bytes(SEND_WQE_LEN, &data);
        }
        UnionMember::None => {}
    }
    // `status`, `state` = wqe_state_posted (0).
    slot.write(STATUS, &[0u32, 0u32]);
    slot.write(IOVA, &iova);
    // `mask`, `first_psn`, `last_psn`, `ack_length`, `ssn`, `has_rd_atomic`.
    slot.write(MASK, &[0u32; 6]);
    let dma = RxeDmaInfo {
        length,
        resid: length,
        cur_sge: 0,
        num_sge,
        sge_offset: 0,
        reserved: 0,
    };
    slot.write(DMA, &dma);
    match wr.payload {
        Payload::Sges(sges) => {
            for (i, s) in sges.iter().enumerate() {
                let sge = RxeSge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                };
                slot.write(SEND_WQE_LEN + i * SGE_LEN, &sge);
            }
        }
        Payload::Inline(data) => slot.write_bytes(SEND_WQE_LEN, data),
    }
}

/// The member of `rxe_send_wr.wr` an operation uses.
#[derive(Debug, Clone, Copy)]
enum UnionMember {
    Rdma(RxeSendWrRdma),
    Atomic(RxeSendWrAtomic),
    Ud(RxeSendWrUd),
    Mw(RxeSendWrMw),
    /// `wr.rdma` and the 8 bytes of `dma.atomic_wr`.
    AtomicWrite(RxeSendWrRdma, [u8; 8]),
    None,
}

impl UnionMember {
    /// The member's bytes (empty for none).
    #[cfg(test)]
    fn as_bytes(&self) -> &[u8] {
        match self {
            UnionMember::Rdma(m) => m.as_bytes(),
            UnionMember::Atomic(m) => m.as_bytes(),
            UnionMember::Ud(m) => m.as_bytes(),
            UnionMember::Mw(m) => m.as_bytes(),
            UnionMember::AtomicWrite(m, _) => m.as_bytes(),
            UnionMember::None => &[],
        }
    }
}

/// The union member, the `iova` (the remote address, 0 for sends) and the
/// `ex` word (immediate data as its big-endian bytes, or the key an
/// invalidation names in host order: `ex.invalidate_rkey` is a `__u32`)
/// of an operation, as RC `init_send_wqe` fills them; one dispatch on the
/// operation for all three.
#[inline(always)]
fn union_member(op: SendOp, ud: Option<UdFields>) -> (UnionMember, u64, u32) {
    let rdma = |remote_addr, rkey| RxeSendWrRdma {
        remote_addr,
        rkey,
        reserved: 0,
    };
    let sent = |ex| match ud {
        Some(d) => (
            UnionMember::Ud(RxeSendWrUd {
                remote_qpn: d.remote_qpn,
                remote_qkey: d.remote_qkey,
                ah_num: d.ah_num,
                ..RxeSendWrUd::default()
            }),
            0,
            ex,
        ),
        None => (UnionMember::None, 0, ex),
    };
    match op {
        SendOp::Send => sent(0),
        SendOp::SendWithImm { imm } => sent(imm.to_be()),
        SendOp::SendWithInvalidate { rkey } => sent(rkey),
        SendOp::RdmaWrite { remote_addr, rkey } | SendOp::RdmaRead { remote_addr, rkey } => {
            (UnionMember::Rdma(rdma(remote_addr, rkey)), remote_addr, 0)
        }
        SendOp::RdmaWriteWithImm {
            remote_addr,
            rkey,
            imm,
        } => (
            UnionMember::Rdma(rdma(remote_addr, rkey)),
            remote_addr,
            imm.to_be(),
        ),
        SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => (
            UnionMember::Atomic(RxeSendWrAtomic {
                remote_addr,
                compare_add: compare,
                swap,
                rkey,
                reserved: 0,
            }),
            remote_addr,
            0,
        ),
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => (
            UnionMember::Atomic(RxeSendWrAtomic {
                remote_addr,
                compare_add: add,
                swap: 0,
                rkey,
                reserved: 0,
            }),
            remote_addr,
            0,
        ),
        SendOp::LocalInvalidate { rkey } => (UnionMember::None, 0, rkey),
        SendOp::BindMw(b) => (
            UnionMember::Mw(RxeSendWrMw {
                addr: b.addr,
                length: b.length,
                mr_lkey: b.mr_lkey,
                mw_rkey: b.mw_rkey,
                rkey: b.rkey,
                access: b.access.bits(),
            }),
            0,
            0,
        ),
        SendOp::AtomicWrite {
            remote_addr,
            rkey,
            data,
        } => (
            UnionMember::AtomicWrite(rdma(remote_addr, rkey), data),
            remote_addr,
            0,
        ),
    }
}

/// The fixed 208 bytes of the WQE (everything before the SGEs / inline
/// data), as RC `init_send_wqe` fills them: a zeroed `wr` with wr_id,
/// opcode, send_flags, `ex.imm_data` (big-endian), the union member the
/// opcode selects, then `iova`, `dma` and `state = wqe_state_posted (0)`.
/// `status`, `mask`, the PSNs, `ssn` and `has_rd_atomic` are the kernel's
/// (it computes `mask` and `iova` again in `req_next_wqe`).
#[cfg(test)]
pub(crate) fn build_wqe(wr: &SendWr<'_>, ud: Option<UdFields>, length: u32) -> RxeSendWqe {
    let mut wqe = RxeSendWqe::default();
    let (flags, num_sge) = flags_and_sges(wr);
    wqe.wr.wr_id = wr.wr_id;
    wqe.wr.opcode = wr.op.raw();
    wqe.wr.send_flags = flags.bits();
    let (member, iova, ex) = union_member(wr.op, ud);
    wqe.wr.ex = ex;
    put_union(&mut wqe, member.as_bytes());
    wqe.iova = iova;
    wqe.dma.length = length;
    wqe.dma.resid = length;
    wqe.dma.num_sge = num_sge;
    wqe.dma.cur_sge = 0;
    wqe.dma.sge_offset = 0;
    wqe.state = 0;
    wqe
}

/// Copies a union member into `wr.wr` (every member is at most 120 bytes).
#[cfg(test)]
fn put_union(wqe: &mut RxeSendWqe, member: &[u8]) {
    wqe.wr.wr[..member.len()].copy_from_slice(member);
}
