//! A CQE into a work completion: the general parser (every CQE kind this
//! library asks for, as rdma-core's `mlx5_parse_cqe`, `handle_good_req`,
//! `handle_responder` and `mlx5_handle_error_cqe` fill `ibv_wc`) and the
//! fast paths that take runs of the common cases (successful requester
//! CQEs, receives of a receive queue or an SRQ) of the QP seen last.
//! The poll loop that calls them is `poll.rs`.

use super::Parser;
use crate::{
    providers::mlx5::{
        buf::CqeRun,
        cqe::{cqe_opcode, status_of_syndrome, Cqe64, CqeTail, CqeView},
        qp::QpTrack,
        rq::RecvRun,
        wqe::opcode,
    },
    wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion},
};

/// The completion opcode and byte count of a successful requester CQE, by
/// its WQE opcode (`handle_good_req`; an RDMA read's byte count is the
/// CQE's): a table, so the poll loop does not branch on it.
const REQ_COMPLETION: [(WcOpcode, u8); 256] = {
    let mut t = [(WcOpcode::SEND, 0u8); 256];
    t[opcode::RDMA_WRITE as usize] = (WcOpcode::RDMA_WRITE, 0);
    t[opcode::RDMA_WRITE_IMM as usize] = (WcOpcode::RDMA_WRITE, 0);
    t[opcode::RDMA_READ as usize] = (WcOpcode::RDMA_READ, 0);
    t[opcode::ATOMIC_CS as usize] = (WcOpcode::COMP_SWAP, 8);
    t[opcode::ATOMIC_FA as usize] = (WcOpcode::FETCH_ADD, 8);
    t
};

/// Writes the work completion of a successful requester CQE (of either
/// view of it; `byte_cnt` reads its byte count, used by RDMA reads only)
/// of work request `wr_id` into `wc`.
#[inline(always)]
fn requester_wc(
    wc: &mut WorkCompletion,
    wr_id: u64,
    qp_num: u32,
    wqe_opcode: u8,
    byte_cnt: impl FnOnce() -> u32,
) {
    let (opcode, len) = REQ_COMPLETION[usize::from(wqe_opcode)];
    *wc = WorkCompletion {
        wr_id,
        status: WcStatus::SUCCESS,
        opcode,
        byte_len: if wqe_opcode == opcode::RDMA_READ {
            byte_cnt()
        } else {
            u32::from(len)
        },
        qp_num,
        ..WorkCompletion::default()
    };
}

/// The completion opcode and flags of a successful responder CQE by its
/// opcode, and the mask of its `imm_inval_pkey` that is the completion's
/// immediate (`handle_responder`; the invalidated rkey for
/// `RESP_SEND_INV`): a table, so the poll loop does not branch on it.
const RESP_COMPLETION: [(WcOpcode, WcFlags, u32); 16] = {
    let mut t = [(WcOpcode::RECV, WcFlags::empty(), 0u32); 16];
    t[cqe_opcode::RESP_WR_IMM as usize] = (WcOpcode::RECV_RDMA_WITH_IMM, WcFlags::WITH_IMM, !0);
    t[cqe_opcode::RESP_SEND_IMM as usize] = (WcOpcode::RECV, WcFlags::WITH_IMM, !0);
    t[cqe_opcode::RESP_SEND_INV as usize] = (WcOpcode::RECV, WcFlags::WITH_INVALIDATE, !0);
    t
};

/// Writes the work completion of a successful responder CQE (opcodes
/// `RESP_WR_IMM` to `RESP_SEND_INV`, of either view of it) of work request
/// `wr_id` into `wc`, as rdma-core's `handle_responder` fills it.
#[inline(always)]
fn responder_wc(wc: &mut WorkCompletion, wr_id: u64, qp_num: u32, op: u8, cqe: &impl CqeView) {
    let imm = cqe.imm_inval_pkey();
    let (opcode, mut wc_flags, imm_mask) = RESP_COMPLETION[usize::from(op & 15)];
    if cqe.grh() {
        wc_flags |= WcFlags::GRH;
    }
    *wc = WorkCompletion {
        wr_id,
        status: WcStatus::SUCCESS,
        opcode,
        vendor_err: 0,
        byte_len: cqe.byte_cnt(),
        imm_data: imm & imm_mask,
        qp_num,
        src_qp: cqe.src_qp(),
        wc_flags,
        pkey_index: (imm & 0xffff) as u16,
        slid: cqe.slid(),
        sl: cqe.sl(),
        dlid_path_bits: cqe.ml_path(),
    };
}

/// The opcode and QP number of `cqe` if it is a successful responder CQE
/// of the QP whose resource number is `rsn`.
#[inline(always)]
fn responder_of<const CQE_V1: bool>(cqe: &impl CqeView, rsn: u32) -> Option<(u8, u32)> {
    let op = cqe.opcode();
    let qp_num = cqe.qpn();
    let owner = if CQE_V1 { cqe.srqn_uidx() } else { qp_num };
    ((cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV).contains(&op) && owner == rsn)
        .then_some((op, qp_num))
}

/// Entries `k..ready` of a checked run that are successful responder CQEs
/// of the QP whose resource number is `rsn`, each into `out[n]` (`n`
/// advanced) with the work request `recv` gives; stops at the first other
/// CQE and returns its index.
#[inline(always)]
fn responder_loop<const CQE_V1: bool, R: RecvRun>(
    rsn: u32,
    mut recv: R,
    run: CqeRun<'_>,
    mut k: u32,
    ready: u32,
    out: &mut [WorkCompletion],
    n: &mut usize,
) -> u32 {
    let from = k;
    let room = out.get_mut(*n..).unwrap_or_default();
    for (cqe, wc) in run.iter(k, ready).zip(room) {
        // Words 2 to 5 loaded once each (a field's word is otherwise
        // loaded per field: the loads are volatile).
        let head = [cqe.word(2), cqe.word(3), cqe.word(4), cqe.word(5)];
        let view = CqeTail::new(|i| match i {
            2..=5 => head[i - 2],
            _ => cqe.word(i),
        });
        let Some((op, qp_num)) = responder_of::<CQE_V1>(&view, rsn) else {
            break;
        };
        responder_wc(wc, recv.take(view.wqe_counter()), qp_num, op, &view);
        k += 1;
    }
    recv.finish();
    *n += (k - from) as usize;
    k
}

/// Whether a CQE whose `op_own` byte is `op_own` was handed over by the
/// device, which writes `owner` (0 or 1) as its owner bit in this pass over
/// the ring: its opcode is not `INVALID` (15) and its owner bit is
/// `owner`. In one comparison: with the owner bit cleared by the XOR when
/// it matches and rotated to the top, the byte is below `0x78` exactly when
/// it matched (bit 7 clear) and the opcode is below 15.
#[inline(always)]
pub(super) fn cqe_is_valid(op_own: u8, owner: u8) -> bool {
    (op_own ^ owner).rotate_right(1) < (cqe_opcode::INVALID << 3)
}

impl Parser {
    /// The QP a CQE belongs to: the last one seen (no lock, no reference
    /// count touched), or one looked up in the context's table.
    #[inline]
    fn qp_of(&mut self, rsn: u32) -> Option<&QpTrack> {
        let hit = self
            .last
            .as_ref()
            .is_some_and(|t| t.rsn == rsn && t.is_alive());
        if !hit {
            self.last = Some(self.resources.find(rsn)?);
        }
        self.last.as_deref()
    }

    /// The cached QP, if the fast paths may take its CQEs: no QP's CQEs
    /// are being cleaned, and it is still alive.
    #[inline(always)]
    fn fast_qp(&self) -> Option<&QpTrack> {
        let qp = self.last.as_deref()?;
        (self.cleaning.is_empty() && qp.is_alive()).then_some(qp)
    }

    /// The fast paths, one after the other, from entry `k` of a run whose
    /// ownership was checked: requester CQEs, then receives of a receive
    /// queue, then of an SRQ; returns the index of the first CQE none of
    /// them took (`ready` if they took all).
    #[inline(always)]
    pub(super) fn fast_runs<const CQE_V1: bool>(
        &self,
        run: CqeRun<'_>,
        mut k: u32,
        ready: u32,
        out: &mut [WorkCompletion],
        n: &mut usize,
    ) -> u32 {
        k = self.requester_run::<CQE_V1>(run, k, ready, out, n);
        if k < ready {
            k = self.responder_run::<CQE_V1>(run, k, ready, out, n);
        }
        if k < ready {
            k = self.srq_run::<CQE_V1>(run, k, ready, out, n);
        }
        k
    }

    /// The fast path over entries `k..ready` of a run whose ownership was
    /// checked: successful requester CQEs of the cached QP, none of them
    /// cleaned, each into `out[n]` (`n` advanced), read from their words 4,
    /// 5 and 7 alone, as [`Parser::parse`] would; stops at the first other
    /// CQE and returns its index. The send queue is freed once, after the
    /// last `wr_id` was read (one compare-exchange with release per run,
    /// [`SqTrack::free`](crate::providers::mlx5::sq::SqTrack::free): a release makes the
    /// compiler reload what it holds in registers).
    #[inline(always)]
    fn requester_run<const CQE_V1: bool>(
        &self,
        run: CqeRun<'_>,
        mut k: u32,
        ready: u32,
        out: &mut [WorkCompletion],
        n: &mut usize,
    ) -> u32 {
        let Some(qp) = self.fast_qp() else {
            return k;
        };
        let sq = &*qp.sq;
        let Some(slots) = sq.slots() else {
            return k;
        };
        // The tail to free to, valid once `k` moved: as an `Option` it made
        // the compiler peel the loop's first CQE (the call's fixed part
        // grew by about 60 instructions).
        let mut freed = 0;
        let from = k;
        let room = out.get_mut(*n..).unwrap_or_default();
        for (cqe, wc) in run.iter(k, ready).zip(room) {
            let tail = CqeTail::new(|i| cqe.word(i));
            let qp_num = tail.qpn();
            let rsn = if CQE_V1 { tail.srqn_uidx() } else { qp_num };
            if tail.opcode() != cqe_opcode::REQ || rsn != qp.rsn {
                break;
            }
            let Some((wr_id, to, raw)) = slots.take(tail.wqe_counter()) else {
                break;
            };
            requester_wc(wc, wr_id, qp_num, tail.wqe_opcode(), || tail.byte_cnt());
            if raw {
                wc.opcode = WcOpcode::DRIVER2;
            }
            freed = to;
            k += 1;
        }
        *n += (k - from) as usize;
        if k != from {
            sq.free(freed);
        }
        k
    }

    /// The fast path over entries `k..ready` of a run whose ownership was
    /// checked, for receives: successful responder CQEs of the cached QP,
    /// none of them cleaned, each into `out[n]` (`n` advanced), as
    /// [`Parser::parse`] would; stops at the first other CQE and returns
    /// its index. The receives come from the QP's receive queue, in order
    /// (a QP on an SRQ: [`Parser::srq_run`]).
    #[inline(always)]
    fn responder_run<const CQE_V1: bool>(
        &self,
        run: CqeRun<'_>,
        k: u32,
        ready: u32,
        out: &mut [WorkCompletion],
        n: &mut usize,
    ) -> u32 {
        let Some(qp) = self.fast_qp() else {
            return k;
        };
        match (&qp.srq, &qp.rq) {
            (None, Some(rq)) => match rq.run() {
                Some(rq) => responder_loop::<CQE_V1, _>(qp.rsn, rq, run, k, ready, out, n),
                None => k,
            },
            _ => k,
        }
    }

    /// [`Parser::responder_run`] for a QP on an SRQ: each CQE's receive is
    /// the WQE it names, linked back onto the SRQ's free list under its
    /// lock, taken once for the run (out of line: SRQs are the rarer case,
    /// and a loop for them in the poll made the others' register
    /// allocation worse).
    #[inline(never)]
    fn srq_run<const CQE_V1: bool>(
        &self,
        run: CqeRun<'_>,
        k: u32,
        ready: u32,
        out: &mut [WorkCompletion],
        n: &mut usize,
    ) -> u32 {
        let Some(qp) = self.fast_qp() else {
            return k;
        };
        let Some(srq) = &qp.srq else {
            return k;
        };
        // The SRQ's lock only for a run that starts with one of its
        // receives (a CQ shared by QPs may alternate between them).
        let starts = run.get(k).is_some_and(|c| {
            responder_of::<CQE_V1>(&CqeTail::new(|i| c.word(i)), qp.rsn).is_some()
        });
        if !starts {
            return k;
        }
        match srq.run() {
            Some(recv) => responder_loop::<CQE_V1, _>(qp.rsn, recv, run, k, ready, out, n),
            None => k,
        }
    }

    /// Turns a CQE into the work completion `wc` (every field written);
    /// false, with `wc` untouched, for a CQE that does not surface (a
    /// cleaned QP's, one naming no known QP, or a kind this library never
    /// asks for).
    #[inline]
    pub(super) fn parse(&mut self, cqe: &Cqe64, ci: u32, wc: &mut WorkCompletion) -> bool {
        let qp_num = cqe.qpn();
        let rsn = if self.cqe_v1 { cqe.srqn_uidx() } else { qp_num };
        if !self.cleaning.is_empty()
            && self
                .cleaning
                .iter()
                .any(|c| c.rsn == rsn && (c.before.wrapping_sub(ci) as i32) > 0)
        {
            return false;
        }
        let Some(qp) = self.qp_of(rsn) else {
            return false;
        };
        match cqe.opcode() {
            cqe_opcode::REQ => {
                let (wr_id, raw) = qp.sq.complete(cqe.wqe_counter());
                requester_wc(wc, wr_id, qp_num, cqe.wqe_opcode(), || cqe.byte_cnt());
                if raw {
                    wc.opcode = WcOpcode::DRIVER2;
                }
            }
            op @ (cqe_opcode::RESP_WR_IMM
            | cqe_opcode::RESP_SEND
            | cqe_opcode::RESP_SEND_IMM
            | cqe_opcode::RESP_SEND_INV) => {
                let wr_id = qp.complete_recv(cqe.wqe_counter());
                responder_wc(wc, wr_id, qp_num, op, cqe);
            }
            op @ (cqe_opcode::REQ_ERR | cqe_opcode::RESP_ERR) => {
                let wr_id = if op == cqe_opcode::REQ_ERR {
                    qp.sq.complete(cqe.wqe_counter()).0
                } else {
                    qp.complete_recv(cqe.wqe_counter())
                };
                *wc = WorkCompletion {
                    wr_id,
                    status: status_of_syndrome(cqe.syndrome()),
                    vendor_err: u32::from(cqe.vendor_err_synd()),
                    qp_num,
                    ..WorkCompletion::default()
                };
            }
            // Resize and other CQEs this library never asks for.
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-comparison test against the two-part definition, for every
    /// `op_own` byte and both owner values.
    #[test]
    fn cqe_validity_is_opcode_not_invalid_and_owner_bit_matching() {
        for owner in [0u8, 1] {
            for op_own in 0..=u8::MAX {
                let expected = op_own >> 4 != 15 && op_own & 1 == owner;
                assert_eq!(cqe_is_valid(op_own, owner), expected, "{op_own:#x} {owner}");
            }
        }
    }

    /// A receive's completion, by CQE opcode, as rdma-core's
    /// `handle_responder` fills it (expected values written by hand from
    /// it), through both views of the CQE.
    #[test]
    fn responder_completions_carry_what_handle_responder_reports() {
        use crate::providers::mlx5::cqe::tail_of;
        let cases = [
            (
                cqe_opcode::RESP_WR_IMM,
                WcOpcode::RECV_RDMA_WITH_IMM,
                WcFlags::WITH_IMM,
                true,
            ),
            (
                cqe_opcode::RESP_SEND,
                WcOpcode::RECV,
                WcFlags::empty(),
                false,
            ),
            (
                cqe_opcode::RESP_SEND_IMM,
                WcOpcode::RECV,
                WcFlags::WITH_IMM,
                true,
            ),
            (
                cqe_opcode::RESP_SEND_INV,
                WcOpcode::RECV,
                WcFlags::WITH_INVALIDATE,
                true,
            ),
        ];
        for (op, opcode, flags, has_imm) in cases {
            for grh in [false, true] {
                let mut b = [0u8; 64];
                b[17] = 0x85; // ml_path: bits 0..7 are the path bits
                b[22..24].copy_from_slice(&0x1234u16.to_be_bytes()); // slid
                let flags_rqpn = u32::from(grh) << 28 | 0x7 << 24 | 0x00ab_cdef;
                b[24..28].copy_from_slice(&flags_rqpn.to_be_bytes());
                b[36..40].copy_from_slice(&0xdead_beefu32.to_be_bytes());
                b[44..48].copy_from_slice(&77u32.to_be_bytes());
                b[63] = op << 4;
                let cqe = Cqe64(b);
                let expected = WorkCompletion {
                    wr_id: 9,
                    status: WcStatus::SUCCESS,
                    opcode,
                    vendor_err: 0,
                    byte_len: 77,
                    imm_data: if has_imm { 0xdead_beef } else { 0 },
                    qp_num: 0x42,
                    src_qp: 0x00ab_cdef,
                    wc_flags: if grh { flags | WcFlags::GRH } else { flags },
                    pkey_index: 0xbeef,
                    slid: 0x1234,
                    sl: 7,
                    dlid_path_bits: 5,
                };
                let mut wc = WorkCompletion::default();
                responder_wc(&mut wc, 9, 0x42, op, &cqe);
                assert_eq!(wc, expected, "op {op}, grh {grh}");
                let mut wc = WorkCompletion::default();
                responder_wc(&mut wc, 9, 0x42, op, &tail_of(&cqe));
                assert_eq!(wc, expected, "op {op}, grh {grh}, tail view");
            }
        }
    }
}
