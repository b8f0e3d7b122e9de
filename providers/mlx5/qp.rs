//! mlx5 QPs: queue sizing as the kernel checks it, the per-QP completion
//! state CQs find by resource number, and the table they find it in.
//!
//! Sizing follows rdma-core `providers/mlx5/verbs.c` (`mlx5_calc_send_wqe`,
//! `mlx5_calc_sq_size`, `mlx5_calc_rcv_wqe`, `mlx5_calc_rq_size`,
//! `mlx5_calc_wq_size`) and is what the kernel accepts
//! (`drivers/infiniband/hw/mlx5/qp.c` `set_rq_size`, `set_user_buf_size`:
//! power-of-two counts, the RQ first in the buffer, the SQ after it). The
//! send overhead counts only the operations this library posts: no memory
//! windows or UMR (rdma-core reserves room for them on RC, which only
//! lowers `max_inline_data`).

use std::{
    collections::{HashMap, HashSet},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
};

use super::{
    rq::{RqTrack, SrqTrack},
    sq::{SqGeometry, SqTrack},
    wqe::{DS, SEND_WQE_BB},
};
use crate::{
    error::{Error, ErrorKind, Result},
    QpCap, QpType,
};

/// `MLX5_IB_DEFAULT_UIDX`: "no user index" (CQE v0 contexts).
pub(crate) const NO_UIDX: u32 = 0x00ff_ffff;

/// The queue geometry of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpGeometry {
    pub(crate) sq: SqGeometry,
    /// RQ WQEs (0: no RQ, the QP uses an SRQ or asked for no receives).
    pub(crate) rq_wqe_cnt: u32,
    /// log2 of the RQ stride.
    pub(crate) rq_wqe_shift: u32,
    /// Bytes of queue buffer (RQ then SQ).
    pub(crate) buf_len: usize,
}

/// Bytes of a send WQE before its data, for the operations a QP type
/// carries (`_sq_overhead` without memory windows).
fn sq_overhead(qp_type: QpType) -> usize {
    match qp_type {
        // ctrl + raddr + atomic
        QpType::Rc => 48,
        // ctrl + raddr
        QpType::Uc => 32,
        // ctrl + datagram (address vector)
        _ => 64,
    }
}

fn invalid(detail: String) -> Error {
    Error::new("ibv_create_qp", ErrorKind::InvalidArgument, detail)
}

/// Sizes a QP's queues; errors name the capability that does not fit.
pub(crate) fn geometry(
    qp_type: QpType,
    cap: &QpCap,
    has_srq: bool,
    max_sq_desc: u32,
    max_rq_desc: u32,
) -> Result<QpGeometry> {
    if !matches!(qp_type, QpType::Rc | QpType::Uc | QpType::Ud) {
        return Err(invalid(format!(
            "QP type {qp_type:?}: the mlx5 provider creates RC, UC and UD QPs"
        )));
    }
    let max_sq_desc = max_sq_desc as usize;
    // Receive side first: it sits at offset 0.
    let (rq_wqe_cnt, rq_wqe_shift, rq_len) = if has_srq || cap.max_recv_wr == 0 {
        (0, 0, 0)
    } else {
        let stride = (DS * cap.max_recv_sge.max(1) as usize).next_power_of_two();
        if stride > max_rq_desc as usize {
            return Err(invalid(format!(
                "max_recv_sge {} needs {stride}-byte receive WQEs; the device takes {max_rq_desc}",
                cap.max_recv_sge
            )));
        }
        let len = ((cap.max_recv_wr as usize).next_power_of_two() * stride).max(SEND_WQE_BB);
        ((len / stride) as u32, stride.trailing_zeros(), len)
    };
    let sq = if cap.max_send_wr == 0 {
        SqGeometry {
            offset: rq_len,
            wqe_cnt: 0,
            max_post: 0,
            max_gs: 0,
            max_inline: 0,
        }
    } else {
        let overhead = sq_overhead(qp_type);
        let inline = if cap.max_inline_data > 0 {
            overhead + (4 + cap.max_inline_data as usize).next_multiple_of(DS)
        } else {
            0
        };
        let max_gather = max_sq_desc.saturating_sub(overhead) / DS;
        if cap.max_send_sge as usize > max_gather {
            return Err(invalid(format!(
                "max_send_sge {} is more than the {max_gather} data segments a {max_sq_desc}-byte \
                 send WQE holds",
                cap.max_send_sge
            )));
        }
        let size = (overhead + cap.max_send_sge as usize * DS).max(inline);
        if size > max_sq_desc {
            return Err(invalid(format!(
                "max_inline_data {} needs a {size}-byte send WQE; the device takes {max_sq_desc}",
                cap.max_inline_data
            )));
        }
        let wqe_size = size.next_multiple_of(SEND_WQE_BB);
        let wq_len = (cap.max_send_wr as usize)
            .checked_mul(wqe_size)
            .filter(|&l| l <= 1 << 30)
            .ok_or_else(|| invalid(format!("max_send_wr {} is too large", cap.max_send_wr)))?
            .next_power_of_two();
        SqGeometry {
            offset: rq_len,
            wqe_cnt: (wq_len / SEND_WQE_BB) as u32,
            max_post: (wq_len / wqe_size) as u32,
            max_gs: cap.max_send_sge,
            max_inline: (wqe_size - overhead - 4) as u32,
        }
    };
    Ok(QpGeometry {
        sq,
        rq_wqe_cnt,
        rq_wqe_shift,
        buf_len: rq_len + sq.wqe_cnt as usize * SEND_WQE_BB,
    })
}

/// A QP's completion side, found by CQs from a CQE's resource number.
#[derive(Debug)]
pub(crate) struct QpTrack {
    /// User index (CQE v1) or QP number (v0): what CQEs name it by.
    pub(crate) rsn: u32,
    alive: AtomicBool,
    pub(crate) sq: Arc<SqTrack>,
    pub(crate) rq: Option<Arc<RqTrack>>,
    pub(crate) srq: Option<Arc<SrqTrack>>,
}

impl QpTrack {
    pub(crate) fn new(
        rsn: u32,
        sq: Arc<SqTrack>,
        rq: Option<Arc<RqTrack>>,
        srq: Option<Arc<SrqTrack>>,
    ) -> Self {
        QpTrack {
            rsn,
            alive: AtomicBool::new(true),
            sq,
            rq,
            srq,
        }
    }

    /// Whether the QP is still registered (a CQ's cached QP is checked
    /// with it). Relaxed: nothing read after it depends on what its
    /// destroyer wrote before clearing it (the track's memory lives as long
    /// as the `Arc`), and an acquire load would be no fresher; the CQEs a
    /// destroyed QP left behind are dropped by the CQ's clean list, whose
    /// taking also clears the cache.
    #[inline(always)]
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// The work request of a receive completion.
    #[inline]
    pub(crate) fn complete_recv(&self, wqe_counter: u16) -> u64 {
        match (&self.srq, &self.rq) {
            (Some(srq), _) => srq.complete(wqe_counter),
            (None, Some(rq)) => rq.complete(),
            (None, None) => 0,
        }
    }
}

/// The context's table of live QPs by resource number, and the user
/// indexes handed out (`mlx5_store_uidx`).
#[derive(Debug, Default)]
pub(crate) struct Resources {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    qps: HashMap<u32, Arc<QpTrack>>,
    /// The next user index to try.
    next_uidx: u32,
    uidx_used: HashSet<u32>,
}

impl Resources {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A free user index (24 bits, never `NO_UIDX`), handed out round robin
    /// so a destroyed QP's index is not reused at once.
    pub(crate) fn alloc_uidx(&self) -> Result<u32> {
        let mut t = self.lock();
        for _ in 0..NO_UIDX {
            let u = t.next_uidx;
            t.next_uidx = (u + 1) % NO_UIDX;
            if t.uidx_used.insert(u) {
                return Ok(u);
            }
        }
        Err(Error::new(
            "ibv_create_qp",
            ErrorKind::InvalidArgument,
            "all 2^24 - 1 mlx5 user indexes are in use",
        ))
    }

    /// Returns a user index.
    pub(crate) fn free_uidx(&self, uidx: u32) {
        self.lock().uidx_used.remove(&uidx);
    }

    /// Registers a created QP.
    pub(crate) fn insert(&self, track: Arc<QpTrack>) {
        self.lock().qps.insert(track.rsn, track);
    }

    /// Unregisters a QP: CQs no longer find it.
    pub(crate) fn remove(&self, track: &QpTrack) {
        track.alive.store(false, Ordering::Relaxed);
        let mut t = self.lock();
        if t.qps
            .get(&track.rsn)
            .is_some_and(|q| std::ptr::eq(&**q, track))
        {
            t.qps.remove(&track.rsn);
        }
    }

    /// The live QP with resource number `rsn`.
    pub(crate) fn find(&self, rsn: u32) -> Option<Arc<QpTrack>> {
        self.lock().qps.get(&rsn).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(send: u32, recv: u32, ssge: u32, rsge: u32, inline: u32) -> QpCap {
        QpCap {
            max_send_wr: send,
            max_recv_wr: recv,
            max_send_sge: ssge,
            max_recv_sge: rsge,
            max_inline_data: inline,
        }
    }

    /// Worked by hand from rdma-core's formulas (RC overhead 48 here).
    #[test]
    fn sizes_match_rdma_core_formulas() {
        let g = geometry(QpType::Rc, &cap(64, 32, 2, 2, 64), false, 1024, 512).unwrap();
        // RQ: stride 32, 32 WQEs = 1024 bytes.
        assert_eq!((g.rq_wqe_cnt, g.rq_wqe_shift), (32, 5));
        // SQ: max(48 + 32, 48 + align(68, 16) = 128) = 128 -> 128-byte WQEs,
        // 64 * 128 = 8192 bytes = 128 WQEBBs, 64 posts, inline 128-48-4.
        assert_eq!(g.sq.offset, 1024);
        assert_eq!(
            (g.sq.wqe_cnt, g.sq.max_post, g.sq.max_inline),
            (128, 64, 76)
        );
        assert_eq!(g.buf_len, 1024 + 8192);
        // UD: overhead 64, 1 SGE: 80 -> 128.
        let g = geometry(QpType::Ud, &cap(1, 1, 1, 1, 0), false, 1024, 512).unwrap();
        assert_eq!((g.sq.wqe_cnt, g.sq.max_post, g.sq.max_inline), (2, 1, 60));
        assert_eq!((g.rq_wqe_cnt, g.rq_wqe_shift), (4, 4));
        // SRQ: no RQ.
        let g = geometry(QpType::Rc, &cap(1, 8, 1, 1, 0), true, 1024, 512).unwrap();
        assert_eq!(g.rq_wqe_cnt, 0);
        assert_eq!(g.sq.offset, 0);
    }

    #[test]
    fn sizes_beyond_the_device_are_named() {
        let e = geometry(QpType::Rc, &cap(1, 1, 100, 1, 0), false, 1024, 512).unwrap_err();
        assert!(e.to_string().contains("max_send_sge 100"), "{e}");
        let e = geometry(QpType::Rc, &cap(1, 1, 1, 1, 2000), false, 1024, 512).unwrap_err();
        assert!(e.to_string().contains("max_inline_data 2000"), "{e}");
        let e = geometry(QpType::Rc, &cap(1, 1, 1, 64, 0), false, 1024, 512).unwrap_err();
        assert!(e.to_string().contains("max_recv_sge 64"), "{e}");
    }

    #[test]
    fn user_indexes_are_not_reused_at_once() {
        let r = Resources::default();
        let a = r.alloc_uidx().unwrap();
        r.free_uidx(a);
        let b = r.alloc_uidx().unwrap();
        assert_ne!(a, b);
    }
}
