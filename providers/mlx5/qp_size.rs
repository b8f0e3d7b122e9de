//! mlx5 QP queue sizing, exactly as libmlx5 sizes (rdma-core 44
//! `providers/mlx5/verbs.c`: `_sq_overhead`, `sq_overhead`,
//! `mlx5_calc_send_wqe`, `mlx5_calc_sq_size`, `mlx5_calc_rcv_wqe`,
//! `mlx5_calc_rq_size`, `mlx5_calc_wq_size`; the capacities `create_qp`
//! reports): the same capacities accepted and refused (`EINVAL`), the same
//! queues, the same capacities reported.
//!
//! "The same" includes libmlx5's C arithmetic, which is written out here
//! step by step with its types, because its results are what a program
//! over rdma-core gets: the inline size is computed as `unsigned long` and
//! stored in an `int` (so a `max_inline_data` near 2^32 or 2^31 wraps to a
//! small or negative size and is accepted), the receive WQE size is a
//! `uint32_t` (so `max_recv_sge` of 2^28 + 1 is one SGE; a multiple of
//! 2^28 is 0, whose `roundup_pow_of_two` shifts by 64, which x86-64
//! executes as 1), and the counts compare as C compares `unsigned` with
//! `int`.
//!
//! Layout: the receive queue at the start of the buffer, the send queue
//! after it; a raw packet QP's send queue is a buffer of its own
//! (`sq_buf_addr`), here the same allocation from the next page on.

use super::{sq::SqGeometry, wqe::SEND_WQE_BB};
use crate::{
    error::{Error, ErrorKind, Result},
    QpCap, QpType, SendOpsFlags,
};

/// `sizeof` of the WQE segments the overhead is made of (`mlx5dv.h`,
/// `wqe.h`).
const CTRL: i32 = 16;
const RADDR: i32 = 16;
const ATOMIC: i32 = 16;
const UMR_CTRL: i32 = 48;
const MKEY_CONTEXT: i32 = 64;
/// `max(sizeof(struct mlx5_wqe_umr_klm_seg), 64)`.
const UMR_KLM: i32 = 64;
const DATAGRAM: i32 = 48;
const ETH: i32 = 32;
const DATA: u64 = 16;
const INLINE_HDR: u64 = 4;

/// The limits the context's `mlx5_ib_alloc_ucontext_resp` sets, as
/// libmlx5 keeps them (`int`s of `struct mlx5_context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpLimits {
    pub(crate) max_sq_desc_sz: i32,
    pub(crate) max_rq_desc_sz: i32,
    pub(crate) max_send_wqebb: i32,
    pub(crate) max_recv_wr: i32,
}

/// The queue geometry of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpGeometry {
    pub(crate) sq: SqGeometry,
    /// RQ WQEs (0: no RQ, the QP uses an SRQ or asked for no receives).
    pub(crate) rq_wqe_cnt: u32,
    /// log2 of the RQ stride.
    pub(crate) rq_wqe_shift: u32,
    /// Bytes of queue buffer (RQ, then the SQ at `sq.offset`).
    pub(crate) buf_len: usize,
    /// The SQ is a buffer of its own for the kernel (`sq_buf_addr`: raw
    /// packet QPs).
    pub(crate) separate_sq: bool,
    /// What `create_qp` reports back: `max_send_wr` the SQ's `max_post`,
    /// `max_recv_wr` the RQ's WQEs, `max_recv_sge` the SGEs its stride
    /// holds, `max_inline_data` the room the SQ's stride leaves (as asked
    /// without a send queue), `max_send_sge` as asked.
    pub(crate) cap: QpCap,
}

fn invalid(detail: String) -> Error {
    Error::new("ibv_create_qp", ErrorKind::InvalidArgument, detail)
}

/// `roundup_pow_of_two` (`util/util.h`) on x86-64: `1 << ilog64(n - 1)`,
/// whose shift by 64 (for 0) the CPU takes as a shift by 0.
fn roundup_pow_of_two(n: u64) -> u64 {
    match n {
        0 => 1,
        n => n.next_power_of_two(),
    }
}

/// `ilog32` (`ccan/ilog.h`): the bits of `v`, 0 for 0.
fn ilog32(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// `align` (`util/util.h`), on `unsigned long`.
fn align(v: u64, a: u64) -> u64 {
    v.wrapping_add(a - 1) & !(a - 1)
}

/// `sq_overhead`: the bytes of a send WQE before its data, for the largest
/// operation the QP may post (`ops`, or the type's default) and the
/// transport's segment.
fn sq_overhead(qp_type: QpType, ops: Option<SendOpsFlags>) -> Result<i32> {
    use SendOpsFlags as O;
    let ops = match (ops, qp_type) {
        (Some(ops), _) => ops,
        (None, QpType::Rc | QpType::Uc) => {
            O::SEND
                | O::SEND_WITH_INV
                | O::SEND_WITH_IMM
                | O::RDMA_WRITE
                | O::RDMA_WRITE_WITH_IMM
                | O::RDMA_READ
                | O::ATOMIC_CMP_AND_SWP
                | O::ATOMIC_FETCH_AND_ADD
                | O::LOCAL_INV
                | O::BIND_MW
        }
        (None, QpType::Ud) => O::SEND | O::SEND_WITH_IMM | O::TSO,
        (None, QpType::RawPacket) => O::SEND | O::TSO,
        (None, t) => return Err(unsized_type(t)),
    };
    let mut size = CTRL;
    if ops.intersects(O::RDMA_WRITE | O::RDMA_WRITE_WITH_IMM | O::RDMA_READ) {
        size = size.max(CTRL + RADDR);
    }
    if ops.intersects(O::ATOMIC_CMP_AND_SWP | O::ATOMIC_FETCH_AND_ADD) {
        size = size.max(CTRL + RADDR + ATOMIC);
    }
    if ops.intersects(O::BIND_MW | O::LOCAL_INV) {
        size = size.max(CTRL + UMR_CTRL + MKEY_CONTEXT + UMR_KLM);
    }
    Ok(size
        + match qp_type {
            QpType::Ud => DATAGRAM,
            QpType::RawPacket => ETH,
            QpType::Rc | QpType::Uc => 0,
            t => return Err(unsized_type(t)),
        })
}

/// The types this provider does not create: XRC (no XRC domains) and
/// mlx5's driver QPs (DC, which need `mlx5dv_create_qp`); any other value
/// is no QP type.
fn unsized_type(t: QpType) -> Error {
    match t {
        QpType::XrcIni | QpType::XrcTgt => Error::new(
            "ibv_create_qp",
            ErrorKind::UnsupportedProvider,
            "XRC QPs: uverbs has no XRC domains",
        ),
        _ => invalid(format!(
            "QP type {t}: the mlx5 provider creates RC, UC, UD and raw packet QPs"
        )),
    }
}

/// `mlx5_calc_send_wqe`: the send WQE stride, or the capacity that does
/// not fit.
fn send_wqe(overhead: i32, cap: &QpCap, lim: &QpLimits) -> Result<i32> {
    // int inl_size = size + align(sizeof(inl seg) + max_inline_data, 16):
    // unsigned long arithmetic stored in an int.
    let inl_size = if cap.max_inline_data != 0 {
        (overhead as u64).wrapping_add(align(INLINE_HDR + u64::from(cap.max_inline_data), 16))
            as u32 as i32
    } else {
        0
    };
    // int max_gather = (max_sq_desc_sz - size) / sizeof(data seg): the int
    // difference converted to unsigned long, the quotient stored in an int.
    let max_gather = ((lim.max_sq_desc_sz.wrapping_sub(overhead) as i64 as u64) / DATA) as u32;
    // `max_send_sge > max_gather`: unsigned against int, as unsigned.
    if cap.max_send_sge > max_gather {
        return Err(invalid(format!(
            "max_send_sge {} is more than the {} data segments a {}-byte send WQE holds \
             after its {overhead}-byte header",
            cap.max_send_sge, max_gather as i32, lim.max_sq_desc_sz
        )));
    }
    let size = (overhead as u64).wrapping_add(u64::from(cap.max_send_sge) * DATA) as u32 as i32;
    let tot = size.max(inl_size);
    if tot > lim.max_sq_desc_sz {
        return Err(invalid(format!(
            "max_inline_data {} needs a {tot}-byte send WQE; the device takes {}",
            cap.max_inline_data, lim.max_sq_desc_sz
        )));
    }
    Ok(align(tot as u64, SEND_WQE_BB as u64) as i32)
}

/// `mlx5_calc_sq_size`: the SQ's geometry (at offset 0) and the inline
/// size it reports.
fn sq_size(overhead: i32, cap: &QpCap, lim: &QpLimits) -> Result<(SqGeometry, u32)> {
    if cap.max_send_wr == 0 {
        let none = SqGeometry {
            offset: 0,
            wqe_cnt: 0,
            max_post: 0,
            max_gs: 0,
            max_inline: 0,
        };
        return Ok((none, cap.max_inline_data));
    }
    let wqe_size = send_wqe(overhead, cap, lim)?;
    if wqe_size > lim.max_sq_desc_sz {
        return Err(invalid(format!(
            "a {wqe_size}-byte send WQE; the device takes {}",
            lim.max_sq_desc_sz
        )));
    }
    let max_inline = (wqe_size as u64)
        .wrapping_sub(overhead as u64)
        .wrapping_sub(INLINE_HDR) as u32;
    if lim.max_sq_desc_sz <= 0 || cap.max_send_wr > (0x7fff_ffff / lim.max_sq_desc_sz) as u32 {
        return Err(invalid(format!(
            "max_send_wr {} is more than libmlx5 sizes ({} with {}-byte WQEs)",
            cap.max_send_wr,
            0x7fff_ffff / lim.max_sq_desc_sz.max(1),
            lim.max_sq_desc_sz
        )));
    }
    // unsigned max_send_wr * int wqe_size, rounded up, stored in an int.
    let wq_size =
        roundup_pow_of_two(u64::from(cap.max_send_wr.wrapping_mul(wqe_size as u32))) as i32;
    let wqe_cnt = (wq_size / SEND_WQE_BB as i32) as u32;
    if wqe_cnt > lim.max_send_wqebb as u32 {
        return Err(invalid(format!(
            "max_send_wr {} needs {wqe_cnt} send WQEBBs; the device takes {}",
            cap.max_send_wr, lim.max_send_wqebb
        )));
    }
    let sq = SqGeometry {
        offset: 0,
        wqe_cnt,
        max_post: (wq_size / wqe_size) as u32,
        max_gs: cap.max_send_sge,
        max_inline,
    };
    Ok((sq, max_inline))
}

/// `mlx5_calc_rcv_wqe`: the receive WQE stride (0 on an SRQ).
fn rcv_wqe(cap: &QpCap, has_srq: bool, lim: &QpLimits) -> Result<i32> {
    if has_srq {
        return Ok(0);
    }
    // uint32_t size = sizeof(data seg) * max(max_recv_sge, 1).
    let size = (DATA * u64::from(cap.max_recv_sge.max(1))) as u32;
    if size > lim.max_rq_desc_sz as u32 {
        return Err(invalid(format!(
            "max_recv_sge {} needs {}-byte receive WQEs; the device takes {}",
            cap.max_recv_sge,
            DATA * u64::from(cap.max_recv_sge.max(1)),
            lim.max_rq_desc_sz
        )));
    }
    Ok(roundup_pow_of_two(u64::from(size)) as u32 as i32)
}

/// `mlx5_calc_rq_size`: `(wq_size, wqe_cnt, wqe_shift, max_gs)`.
fn rq_size(cap: &QpCap, has_srq: bool, lim: &QpLimits) -> Result<(i32, u32, u32, u32)> {
    if cap.max_recv_wr == 0 {
        return Ok((0, 0, 0, 0));
    }
    if cap.max_recv_wr > lim.max_recv_wr as u32 {
        return Err(invalid(format!(
            "max_recv_wr {} is more than the device's {}",
            cap.max_recv_wr, lim.max_recv_wr
        )));
    }
    let wqe_size = rcv_wqe(cap, has_srq, lim)?;
    if wqe_size < 0 || wqe_size > lim.max_rq_desc_sz {
        return Err(invalid(format!(
            "a {wqe_size}-byte receive WQE; the device takes {}",
            lim.max_rq_desc_sz
        )));
    }
    let wq_size =
        roundup_pow_of_two(u64::from(cap.max_recv_wr)).wrapping_mul(wqe_size as u64) as i32;
    if wqe_size == 0 {
        return Ok((wq_size, 0, 0, 0));
    }
    let wq_size = wq_size.max(SEND_WQE_BB as i32);
    let wqe_cnt = (wq_size / wqe_size) as u32;
    Ok((
        wq_size,
        wqe_cnt,
        ilog32(wqe_size as u32 - 1),
        (wqe_size / DATA as i32) as u32,
    ))
}

/// `mlx5_calc_wq_size` for a QP of `qp_type` asking `cap` (receive sizes
/// as asked, also on an SRQ, where libmlx5 checks `max_recv_wr` too), with
/// the send operations `ops` (`None`: the type's defaults).
pub(crate) fn geometry(
    qp_type: QpType,
    cap: &QpCap,
    has_srq: bool,
    ops: Option<SendOpsFlags>,
    lim: &QpLimits,
) -> Result<QpGeometry> {
    let overhead = sq_overhead(qp_type, ops)?;
    let (mut sq, max_inline) = sq_size(overhead, cap, lim)?;
    let (rq_len, rq_wqe_cnt, rq_wqe_shift, rq_max_gs) = rq_size(cap, has_srq, lim)?;
    let rq_len = rq_len as usize;
    let sq_len = sq.wqe_cnt as usize * SEND_WQE_BB;
    let separate_sq = qp_type == QpType::RawPacket;
    sq.offset = if separate_sq {
        rq_len.next_multiple_of(crate::providers::dma::PAGE)
    } else {
        rq_len
    };
    Ok(QpGeometry {
        sq,
        rq_wqe_cnt,
        rq_wqe_shift,
        buf_len: sq.offset + sq_len,
        separate_sq,
        cap: QpCap {
            max_send_wr: sq.max_post,
            max_recv_wr: rq_wqe_cnt,
            max_send_sge: cap.max_send_sge,
            max_recv_sge: rq_max_gs,
            max_inline_data: max_inline,
        },
    })
}

#[cfg(test)]
mod tests;
