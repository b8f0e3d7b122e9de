//! Order within a send queue: the fence modes of the control segment, and
//! RDMA reads and atomics that complete late, when a test asks for it
//! ([`Mlx5Model::reorder_reads`](super::Mlx5Model::reorder_reads)).
//!
//! The fence mode is `fm_ce_se` bits 7..5 (PRM "Send WQE Control Segment";
//! the values are Linux 6.1 `include/linux/mlx5/qp.h`'s
//! `MLX5_FENCE_MODE_*`):
//!
//! | mode | name | the WQE waits for |
//! |---|---|---|
//! | 0 | none | nothing |
//! | 1 | initiator small fence | earlier local memory-key work (UMR, local invalidate, binds: not executed by the model, so nothing) |
//! | 2 | fence | earlier RDMA reads and atomics of its QP to complete |
//! | 3 | strong ordering | every earlier WQE of its QP to complete |
//! | 4 | fence and initiator small fence | both (libmlx5's `MLX5_WQE_CTRL_FENCE`, what `IBV_SEND_FENCE` sets) |
//! | 5..7 | reserved | a violation |
//!
//! InfiniBand lets a requester go on with later WQEs while a read's or an
//! atomic's response is outstanding: a later SEND or RDMA WRITE may take
//! its data before the read's data has landed, and may reach the
//! responder's memory before the read fetches it or the atomic changes it;
//! the fence indicator is there to forbid that ("processing won't begin
//! until all prior RDMA Read and Atomic operations on the same Send Queue
//! have completed", rdmamojo's summary of the IBA ordering rules).
//!
//! By default the model executes each WQE to its end before the next, so
//! a missing fence cannot be seen. With reordering on, a read's or
//! atomic's [`Response`] (checked at both ends when its WQE executes)
//! lands late: after the later WQEs of the same run of the send queue,
//! unless one of them has a fence mode that waits (2, 3, 4), before which
//! every outstanding response lands. Responses land in WQE order (the
//! responder's memory access happens then), and the requester's CQEs keep
//! the WQE order, as a send queue completes in order: the CQE of a WQE
//! executed while a response was outstanding is written after that
//! response's. A run ends when the send queue stops (everything the
//! doorbell announced has executed, or a WQE waits for a receive); a WQE
//! that fails lands the outstanding responses before its error CQE.

use super::{
    exec::Response,
    hca::Hca,
    layout::{self, Ctrl, InCqe},
};

/// The highest fence mode the PRM defines.
pub(crate) const FENCE_MODE_MAX: u8 = 4;

/// Whether a WQE whose control segment has `fm_ce_se` waits for the
/// earlier reads and atomics of its QP (fence modes 2, 3 and 4).
pub(crate) fn waits_for_responses(fm_ce_se: u8) -> bool {
    matches!(fm_ce_se >> 5, 2..=4)
}

/// What a run of a send queue has left to do at its end, in WQE order
/// (empty unless reordering is on).
#[derive(Debug, Default)]
pub(crate) struct Late(Vec<Entry>);

#[derive(Debug)]
enum Entry {
    /// A read or atomic whose response has not landed.
    Response { ctrl: Ctrl, response: Response },
    /// The CQE of a later WQE, held behind them.
    Cqe {
        ctrl: Ctrl,
        result: Result<Option<InCqe>, u8>,
        bytes: u32,
    },
}

impl Hca {
    /// A read's or atomic's response: landed now (and its CQE written if
    /// the WQE asked for one), or, with reordering on, at the run's end or
    /// before a fenced WQE.
    pub(crate) fn respond(&mut self, qpn: u32, ctrl: &Ctrl, response: Response, late: &mut Late) {
        if self.reorder_reads {
            late.0.push(Entry::Response {
                ctrl: *ctrl,
                response,
            });
            return;
        }
        let done = self.land(&response);
        if ctrl.fm_ce_se & layout::CQ_UPDATE != 0 {
            self.req_cqe(qpn, ctrl, Ok(done.in_cqe), done.bytes);
        }
    }

    /// Writes a requester CQE of `qpn`, or holds it behind the responses
    /// still outstanding (a send queue completes in WQE order).
    pub(crate) fn req_cqe_in_order(
        &mut self,
        qpn: u32,
        ctrl: &Ctrl,
        result: Result<Option<InCqe>, u8>,
        bytes: u32,
        late: &mut Late,
    ) {
        if late.0.is_empty() {
            self.req_cqe(qpn, ctrl, result, bytes);
        } else {
            late.0.push(Entry::Cqe {
                ctrl: *ctrl,
                result,
                bytes,
            });
        }
    }

    /// Lands every outstanding response of the run, in WQE order, with the
    /// CQEs held behind them.
    pub(crate) fn land_late(&mut self, qpn: u32, late: &mut Late) {
        for entry in std::mem::take(&mut late.0) {
            match entry {
                Entry::Response { ctrl, response } => {
                    let done = self.land(&response);
                    if ctrl.fm_ce_se & layout::CQ_UPDATE != 0 {
                        self.req_cqe(qpn, &ctrl, Ok(done.in_cqe), done.bytes);
                    }
                }
                Entry::Cqe {
                    ctrl,
                    result,
                    bytes,
                } => self.req_cqe(qpn, &ctrl, result, bytes),
            }
        }
    }
}
