//! The direct views of verbs objects, as `mlx5dv_init_obj` gives them
//! (rdma-core's `mlx5dv_get_qp`, `_cq`, `_srq`, `_av`, `_pd` in
//! `providers/mlx5/mlx5.c`): where each queue's buffer, doorbell record
//! and doorbell register are in this process, for programs that write
//! WQEs and read CQEs themselves (UCX, DPDK-style data paths).
//!
//! The views hold raw addresses: the memory is the device's to read and
//! write, so nothing here hands out a Rust reference to it, and using the
//! addresses is the program's `unsafe` business (and its responsibility
//! to keep the object alive meanwhile). Posting by hand and through
//! [`QueuePair::post_send`] on the same queue do not mix (as with libmlx5:
//! the library's producer counters do not see hand-written WQEs). Taking a
//! CQ's view makes the program its poller: a destroyed or reset QP's
//! completions are then left in the ring for it to skip, as libmlx5 does
//! for a CQ it handed out (`MLX5_CQ_FLAGS_DV_OWNED`).

use std::sync::atomic::Ordering;

use super::dv::Mlx5Context;
use super::{wqe::SEND_WQE_BB, Mlx5};
use crate::{
    error::{Error, ErrorKind, Result},
    providers::Member,
    AddressHandle, CompletionQueue, QueuePair, SharedReceiveQueue,
};

/// One work queue of a [`QpView`] (`mlx5dv_qp`'s `sq` and `rq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WqView {
    /// The first WQE.
    pub buf: *mut u8,
    /// WQEs (send: 64-byte basic blocks) in the ring; 0 when the queue
    /// does not exist (a QP that receives from an SRQ).
    pub wqe_cnt: u32,
    /// Bytes per WQE.
    pub stride: u32,
}

/// A QP's direct view (`struct mlx5dv_qp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QpView {
    /// The doorbell record: two big-endian words, receive counter then
    /// send counter.
    pub dbrec: *mut u32,
    /// The send queue.
    pub sq: WqView,
    /// The receive queue.
    pub rq: WqView,
    /// The doorbell register (BlueFlame register when `bf_size` is not 0).
    pub bf_reg: *mut u8,
    /// The BlueFlame half-buffer size; 0 when only 8-byte doorbells go to
    /// `bf_reg` (no write-combining, or a shared non-cached register).
    pub bf_size: u32,
    /// The offset the doorbell's UAR page is mapped at on the command fd.
    pub uar_mmap_offset: u64,
}

/// A CQ's direct view (`struct mlx5dv_cq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CqView {
    /// The first CQE.
    pub buf: *mut u8,
    /// The doorbell record: consumer index, then the arm word (big-endian).
    pub dbrec: *mut u32,
    /// CQEs in the ring.
    pub cqe_cnt: u32,
    /// Bytes per CQE (64 or 128).
    pub cqe_size: u32,
    /// The UAR page the CQ is armed through (the arm doorbell at +0x20).
    pub cq_uar: *mut u8,
    /// The CQ number.
    pub cqn: u32,
}

/// An SRQ's direct view (`struct mlx5dv_srq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SrqView {
    /// The first WQE.
    pub buf: *mut u8,
    /// The doorbell record (one big-endian counter).
    pub dbrec: *mut u32,
    /// Bytes per WQE.
    pub stride: u32,
    /// The free list's first WQE.
    pub head: u32,
    /// The free list's last WQE (the sentinel, never posted).
    pub tail: u32,
    /// The SRQ number.
    pub srqn: u32,
}

fn foreign(what: &str) -> Error {
    Error::new(
        "mlx5dv_init_obj",
        ErrorKind::InvalidArgument,
        format!("the {what} belongs to a device of another driver"),
    )
}

impl Mlx5Context<'_> {
    /// `qp`'s direct view, like `mlx5dv_init_obj` with `MLX5DV_OBJ_QP`.
    #[doc(alias = "mlx5dv_init_obj")]
    pub fn qp_view(&self, qp: &QueuePair) -> Result<QpView> {
        let s = Mlx5::qp_shared_of(&qp.inner.shared).ok_or_else(|| foreign("QP"))?;
        let g = &s.geometry;
        let base = s.buf.addr() as usize as *mut u8;
        let bfreg = s
            .bfreg
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                Error::new(
                    "mlx5dv_init_obj",
                    ErrorKind::InvalidArgument,
                    "the QP has no doorbell register",
                )
            })?;
        Ok(QpView {
            dbrec: s.buf.db_addr() as usize as *mut u32,
            sq: WqView {
                buf: base.wrapping_add(g.sq.offset),
                wqe_cnt: g.sq.wqe_cnt,
                stride: SEND_WQE_BB as u32,
            },
            rq: WqView {
                buf: base,
                wqe_cnt: g.rq_wqe_cnt,
                stride: 1 << g.rq_wqe_shift,
            },
            bf_reg: bfreg.page.base().wrapping_add(bfreg.reg),
            bf_size: bfreg.buf_size as u32,
            uar_mmap_offset: bfreg.page.mmap_offset,
        })
    }

    /// `cq`'s direct view, like `mlx5dv_init_obj` with `MLX5DV_OBJ_CQ`.
    /// From now on the program polls the CQ: see the module doc.
    #[doc(alias = "mlx5dv_init_obj")]
    pub fn cq_view(&self, cq: &CompletionQueue) -> Result<CqView> {
        let c = Mlx5::cq_of(&cq.ring).ok_or_else(|| foreign("CQ"))?;
        let core = &c.core;
        core.dv_owned.store(true, Ordering::Release);
        let (ncqe, size) = core.shape();
        Ok(CqView {
            buf: core.buf.addr() as usize as *mut u8,
            dbrec: core.buf.db_addr() as usize as *mut u32,
            cqe_cnt: ncqe,
            cqe_size: size as u32,
            cq_uar: c.uar.base(),
            cqn: core.cqn.load(Ordering::Relaxed),
        })
    }

    /// `srq`'s direct view, like `mlx5dv_init_obj` with `MLX5DV_OBJ_SRQ`.
    #[doc(alias = "mlx5dv_init_obj")]
    pub fn srq_view(&self, srq: &SharedReceiveQueue) -> Result<SrqView> {
        let s = Mlx5::srq_of(&srq.ring).ok_or_else(|| foreign("SRQ"))?;
        let (buf, db, stride, head, tail) = s.track.dv_view();
        Ok(SrqView {
            buf: buf as usize as *mut u8,
            dbrec: db as usize as *mut u32,
            stride,
            head,
            tail,
            srqn: srq.srq_num(),
        })
    }

    /// The 48 bytes of `ah`'s address vector (`struct mlx5_wqe_av`), as
    /// `mlx5dv_init_obj` with `MLX5DV_OBJ_AH` points at them; valid while
    /// the AH lives.
    #[doc(alias = "mlx5dv_init_obj")]
    pub fn ah_av(&self, ah: &AddressHandle) -> Result<*const [u8; 48]> {
        let a = Mlx5::ah_of(&ah.inner.driver).ok_or_else(|| foreign("AH"))?;
        Ok(&raw const a.wire)
    }
}
