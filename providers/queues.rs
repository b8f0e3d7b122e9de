//! The provider side of creating queues: the interface between the core
//! objects (`src/cq.rs`, `src/qp.rs`, `src/srq.rs`) and the providers.
//!
//! Every create follows the same three steps, whatever the provider:
//!
//! 1. **plan** ([`Provider::plan_cq`] etc.): the provider decides the
//!    driver data ("UHW") of the create command and sizes its response
//!    buffer. rxe sends none and expects the `mminfo` of kernel-allocated
//!    rings; mlx5 allocates the queue buffer and doorbell record in this
//!    process and sends their addresses (`mlx5_ib_create_cq`/`_qp`), plus the
//!    UAR page the queue will ring.
//! 2. the core object runs the command (ioctl, or the write fallback) with
//!    [`CqPlan::driver_in`] and [`CqPlan::driver_out`];
//! 3. **finish** ([`CqPlan::finish`]): the provider turns the response into
//!    the data-path state the object owns: rxe maps the rings; mlx5 wraps
//!    its buffers and records the CQ number / QP number / UAR.
//!
//! The data path then dispatches on the enum ([`CqRing`], [`QpQueues`],
//! [`SrqRing`]): no virtual calls on the hot path. A completion event read
//! from a channel calls `CqInner::on_completion_event` on the shared part of
//! the CQ (events can be read on any thread, without the CQ handle): mlx5
//! will advance its CQ arm sequence number there (`mlx5_cq_event` in
//! rdma-core's `providers/mlx5/cq.c`); rxe needs nothing.

use zerocopy::{FromZeros, IntoBytes};

use super::{
    rxe::{Doorbell, RxeCq, RxeRq, RxeSq},
    Provider,
};
use crate::{
    abi,
    context::ContextInner,
    error::{Error, ErrorKind, Result},
    sys::{Errno, Protection},
    wc::WorkCompletion,
    wr::{PostError, PostErrorKind, RecvWr, SendWr},
};

fn mlx5_missing(op: &'static str) -> Error {
    Error::new(
        op,
        ErrorKind::UnsupportedProvider,
        "the mlx5 data path (queue buffers, doorbell records, UAR doorbells) is not \
         implemented yet; only rxe has one",
    )
}

fn map(ctx: &ContextInner, mi: &abi::Mminfo, what: &'static str) -> Result<crate::sys::Mapping> {
    ctx.kernel
        .mmap(ctx.fd(), mi.size as usize, mi.offset, Protection::ReadWrite)
        .map_err(|e| Error::sys(what, e))
}

/// Step 1 of creating a CQ.
#[derive(Debug)]
pub(crate) enum CqPlan {
    Rxe(abi::RxeCreateCqResp),
}

/// The data path of a CQ.
#[derive(Debug)]
pub(crate) enum CqRing {
    Rxe(RxeCq),
}

impl Provider {
    /// Plans a CQ of `cqe` entries.
    pub(crate) fn plan_cq(&self, _cqe: u32) -> Result<CqPlan> {
        match self {
            Provider::Rxe(_) => Ok(CqPlan::Rxe(abi::RxeCreateCqResp::new_zeroed())),
            Provider::Mlx5(_) => Err(mlx5_missing("ibv_create_cq")),
        }
    }

    /// Plans a QP.
    pub(crate) fn plan_qp(&self) -> Result<QpPlan> {
        match self {
            Provider::Rxe(_) => Ok(QpPlan::Rxe(abi::RxeCreateQpResp::new_zeroed())),
            Provider::Mlx5(_) => Err(mlx5_missing("ibv_create_qp")),
        }
    }

    /// Plans an SRQ.
    pub(crate) fn plan_srq(&self) -> Result<SrqPlan> {
        match self {
            Provider::Rxe(_) => Ok(SrqPlan::Rxe(abi::RxeCreateSrqResp::new_zeroed())),
            Provider::Mlx5(_) => Err(mlx5_missing("ibv_create_srq")),
        }
    }
}

impl CqPlan {
    /// Driver input and output buffers of the create command.
    pub(crate) fn driver_bufs(&mut self) -> (&[u8], &mut [u8]) {
        match self {
            CqPlan::Rxe(resp) => (&[], resp.as_mut_bytes()),
        }
    }

    /// Step 3: the CQ's data path.
    pub(crate) fn finish(self, ctx: &ContextInner) -> Result<CqRing> {
        match self {
            CqPlan::Rxe(resp) => Ok(CqRing::Rxe(RxeCq::new(map(
                ctx,
                &resp.mi,
                "mmap rxe CQ ring",
            )?)?)),
        }
    }
}

impl CqRing {
    /// Polls completions (no syscall, no allocation).
    #[inline]
    pub(crate) fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        match self {
            CqRing::Rxe(r) => r.poll(out),
        }
    }

    /// Arms the CQ. rxe: the `REQ_NOTIFY_CQ` write command; mlx5 will write
    /// the arm doorbell record and ring the UAR instead.
    pub(crate) fn req_notify(
        &self,
        ctx: &ContextInner,
        handle: u32,
        solicited_only: bool,
    ) -> Result<(), Errno> {
        match self {
            CqRing::Rxe(_) => {
                let mut req = abi::IbUverbsReqNotifyCq::new_zeroed();
                req.cq_handle = handle;
                req.solicited_only = u32::from(solicited_only);
                ctx.write_with_resp(
                    abi::IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
                    req.as_bytes(),
                    &[],
                    &mut [],
                    &mut [],
                )
            }
        }
    }
}

/// Step 1 of creating a QP.
#[derive(Debug)]
pub(crate) enum QpPlan {
    Rxe(abi::RxeCreateQpResp),
}

/// The data path of a QP: its send and receive queues.
#[derive(Debug)]
pub(crate) enum QpQueues {
    Rxe {
        sq: RxeSq,
        /// `None` for a QP that receives from an SRQ.
        rq: Option<RxeRq>,
        doorbell: Doorbell,
    },
}

/// What [`QpPlan::finish`] needs to know about the QP.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QpShape {
    pub(crate) qp_type: u8,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
    pub(crate) has_srq: bool,
}

impl QpPlan {
    /// Driver input (rxe refuses any) and output buffers of the create command.
    pub(crate) fn driver_bufs(&mut self) -> (&[u8], &mut [u8]) {
        match self {
            QpPlan::Rxe(resp) => (&[], resp.as_mut_bytes()),
        }
    }

    /// Step 3: the QP's queues.
    pub(crate) fn finish(
        self,
        ctx: &ContextInner,
        handle: u32,
        shape: QpShape,
    ) -> Result<QpQueues> {
        match self {
            QpPlan::Rxe(resp) => {
                let sq = RxeSq::new(
                    map(ctx, &resp.sq_mi, "mmap rxe send queue")?,
                    shape.max_send_sge,
                    shape.max_inline_data,
                    shape.qp_type,
                )?;
                // A QP on an SRQ has no receive queue; the kernel leaves rq_mi empty.
                let rq = if shape.has_srq {
                    None
                } else {
                    Some(RxeRq::new(
                        map(ctx, &resp.rq_mi, "mmap rxe receive queue")?,
                        shape.max_recv_sge,
                    )?)
                };
                Ok(QpQueues::Rxe {
                    sq,
                    rq,
                    doorbell: Doorbell::new(handle),
                })
            }
        }
    }
}

impl QpQueues {
    /// Writes the send WQEs and rings the doorbell once for the batch (rxe:
    /// one `POST_SEND` write; mlx5: doorbell record + UAR/BlueFlame write).
    #[inline]
    pub(crate) fn post_send(
        &mut self,
        ctx: &ContextInner,
        wrs: &[SendWr<'_>],
    ) -> Result<(), PostError> {
        match self {
            QpQueues::Rxe { sq, doorbell, .. } => {
                let ring = |count: usize| {
                    doorbell.ring(ctx).map_err(|e| PostError {
                        index: count,
                        kind: PostErrorKind::Doorbell(Error::sys(
                            "rxe send doorbell (POST_SEND)",
                            e,
                        )),
                    })
                };
                match sq.post(wrs) {
                    // The hot path: no large `PostError` moved around.
                    Ok(()) if wrs.is_empty() => Ok(()),
                    Ok(()) => ring(wrs.len()),
                    Err(e) => {
                        if e.index > 0 {
                            ring(e.index)?;
                        }
                        Err(e)
                    }
                }
            }
        }
    }

    /// Writes receive WQEs (no system call on either provider).
    #[inline]
    pub(crate) fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        match self {
            QpQueues::Rxe { rq: Some(rq), .. } => rq.post(wrs),
            QpQueues::Rxe { rq: None, .. } => Err(PostError {
                index: 0,
                kind: PostErrorKind::OpNotSupported(
                    "this QP receives from an SRQ: post to the SRQ",
                ),
            }),
        }
    }
}

/// Step 1 of creating an SRQ.
#[derive(Debug)]
pub(crate) enum SrqPlan {
    Rxe(abi::RxeCreateSrqResp),
}

/// The data path of an SRQ.
#[derive(Debug)]
pub(crate) enum SrqRing {
    Rxe(RxeRq),
}

impl SrqPlan {
    /// Driver input and output buffers of the create command.
    pub(crate) fn driver_bufs(&mut self) -> (&[u8], &mut [u8]) {
        match self {
            SrqPlan::Rxe(resp) => (&[], resp.as_mut_bytes()),
        }
    }

    /// The SRQ number the driver reported.
    pub(crate) fn srq_num(&self) -> u32 {
        match self {
            SrqPlan::Rxe(resp) => resp.srq_num,
        }
    }

    /// Step 3: the SRQ's ring.
    pub(crate) fn finish(self, ctx: &ContextInner, max_sge: u32) -> Result<SrqRing> {
        match self {
            SrqPlan::Rxe(resp) => Ok(SrqRing::Rxe(RxeRq::new(
                map(ctx, &resp.mi, "mmap rxe SRQ ring")?,
                max_sge,
            )?)),
        }
    }
}

impl SrqRing {
    /// Writes receive WQEs.
    pub(crate) fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        match self {
            SrqRing::Rxe(rq) => rq.post(wrs),
        }
    }

    /// The driver data of a MODIFY_SRQ: rxe wants the address where it would
    /// write a new ring `mminfo` if MAX_WR were resized (it never is here).
    pub(crate) fn modify_driver_in(&self, mi: &mut abi::Mminfo) -> abi::RxeModifySrqCmd {
        match self {
            SrqRing::Rxe(_) => {
                let mut drv = abi::RxeModifySrqCmd::new_zeroed();
                drv.mmap_info_addr = std::ptr::addr_of_mut!(*mi) as u64;
                drv
            }
        }
    }
}
