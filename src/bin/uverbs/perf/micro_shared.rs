//! The shared-posting rows of `uverbs perf micro --mlx5-model`
//! (`benches/mlx5.sh`; issue 42 item 4):
//!
//! - `shared_write_batchN`: `SharedQueuePair::post_send` of N RDMA writes
//!   from one thread (the lock never contended), the same work and drain
//!   as `write_batchN`; `mut_write_batchN` is `write_batchN` again, its
//!   chunks timed alternately with the shared ones (the same phase of the
//!   process: this shared machine runs whole phases slower at times);
//! - `contended4_write_batch1`: four threads posting single RDMA writes to
//!   one `SharedQueuePair` at once, in rounds: the four wait at a barrier,
//!   each posts its share of a round (`ROUND / 4` writes, unsignaled), and
//!   the round's time runs from the first thread's start to the last
//!   one's end; between rounds (untimed) the main thread posts one
//!   signaled write and completes the round with one CQE, as the other
//!   rows drain. ns per write, so the inverse of the throughput;
//!   `benches/mlx5_libmlx5.c`'s `lib_contended4_write_batch1` is the same
//!   with libmlx5 (its per-SQ spinlock) on the same model.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Barrier,
    },
    time::Instant,
};

use uverbs::{
    testing::mlx5::Mlx5Model, Context, CqOptions, MemoryRegion, Mtu, ProtectionDomain, QpCap,
    QpInitAttr, QueuePair, SendOp, SendWr, SharedQueuePair, WorkCompletion,
};

use super::{
    err, micro_mlx5,
    micro_mlx5::{Bench, CHUNK, NCQE},
    Opts, Res,
};

/// Posting threads of the contended row.
const THREADS: usize = 4;
/// Writes per contended round, all threads together: the send queue's
/// depth less room for the signaled write that ends the round.
const ROUND: usize = 8192 - 64;
const DEPTH: u32 = 8192;

/// One `SharedQueuePair::post_send` of 1, 8 or 64 RDMA writes.
#[inline(never)]
fn op_shared_write_batch1(
    qp: &SharedQueuePair,
    wrs: &[SendWr<'_>],
) -> Result<(), uverbs::PostError> {
    std::hint::black_box(14);
    qp.post_send(wrs)
}

#[inline(never)]
fn op_shared_write_batch8(
    qp: &SharedQueuePair,
    wrs: &[SendWr<'_>],
) -> Result<(), uverbs::PostError> {
    std::hint::black_box(15);
    qp.post_send(wrs)
}

#[inline(never)]
fn op_shared_write_batch64(
    qp: &SharedQueuePair,
    wrs: &[SendWr<'_>],
) -> Result<(), uverbs::PostError> {
    std::hint::black_box(16);
    qp.post_send(wrs)
}

/// The uncontended rows: chunks posted through `qp` with `&mut` and
/// through it shared, alternately (the `&mut` chunks timed as
/// `mut_write_batchN`, so that both are measured in the same phase of the
/// process; converting between the forms is untimed).
pub(super) fn uncontended(
    b: &mut Bench,
    mut qp: QueuePair,
    iters: u64,
    batches: &[Vec<SendWr<'_>>; 3],
) -> Res<QueuePair> {
    for wrs in batches {
        let (op, op_mut): (SharedOp, MutOp) = match wrs.len() {
            // The `&mut` anchor: micro_mlx5's own measured posts.
            1 => (op_shared_write_batch1, micro_mlx5::op_write_batch1),
            8 => (op_shared_write_batch8, micro_mlx5::op_write_batch8),
            _ => (op_shared_write_batch64, micro_mlx5::op_write_batch64),
        };
        let (mut ns, mut ns_mut, mut done) = (0u128, 0u128, 0u64);
        while done < iters {
            let t0 = Instant::now();
            for _ in 0..CHUNK / wrs.len() {
                op_mut(&mut qp, wrs).map_err(err("post RDMA writes"))?;
            }
            ns_mut += t0.elapsed().as_nanos();
            b.posted = b.posted.wrapping_add(CHUNK as u32);
            b.drain()?;
            let shared = qp.into_shared();
            let t0 = Instant::now();
            for _ in 0..CHUNK / wrs.len() {
                op(&shared, wrs).map_err(err("post RDMA writes to a shared QP"))?;
            }
            ns += t0.elapsed().as_nanos();
            b.posted = b.posted.wrapping_add(CHUNK as u32);
            done += CHUNK as u64;
            b.drain()?;
            qp = shared.into_inner();
        }
        out!(
            "mut_write_batch{} {:.2}",
            wrs.len(),
            ns_mut as f64 / done as f64
        );
        out!(
            "shared_write_batch{} {:.2}",
            wrs.len(),
            ns as f64 / done as f64
        );
    }
    Ok(qp)
}

type SharedOp = fn(&SharedQueuePair, &[SendWr<'_>]) -> Result<(), uverbs::PostError>;
type MutOp = fn(&mut QueuePair, &[SendWr<'_>]) -> Result<(), uverbs::PostError>;

/// The contended row, on a QP of its own (`DEPTH` deep) and a CQ of its
/// own, connected to itself.
pub(super) fn contended(
    model: &Arc<Mlx5Model>,
    ctx: &Context,
    pd: &ProtectionDomain,
    mr: &MemoryRegion,
    o: &Opts,
    iters: u64,
) -> Res<()> {
    let cq = ctx
        .create_cq(NCQE as u32 - 1, CqOptions::default())
        .map_err(err("create CQ"))?;
    let qp = pd
        .create_qp(&QpInitAttr::rc(&cq, &cq).cap(QpCap::new(DEPTH, 16, 1, 1)))
        .map_err(err("create the contended QP"))?;
    let gid = ctx
        .query_gid(1, 1)
        .map_err(err("query GID"))?
        .map_or(uverbs::Gid([0; 16]), |e| e.gid);
    super::connect(&qp, qp.qp_num(), o, Mtu(3), gid)?;
    let info = model
        .qp(qp.qp_num())
        .ok_or("the model does not know the QP")?;
    let mut b = Bench {
        cqn: info.send_cqn,
        qpn: info.qpn,
        uidx: info.uidx,
        model: model.clone(),
        cq,
        posted: 0,
        wc: [WorkCompletion::default(); 16],
    };
    let sge = [mr.sge(0, 64).map_err(err("sge"))?];
    let op = SendOp::RdmaWrite {
        remote_addr: mr.addr() + 4096,
        rkey: mr.rkey(),
    };
    let one = [SendWr::new(0, op, &sge).unsignaled()];
    let last = [SendWr::new(1, op, &sge)];
    let qp = qp.into_shared();
    // Once through the model: what the threads post executes.
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| qp.post_send(&[SendWr::new(2, op, &sge)]));
        }
    });
    b.posted = THREADS as u32;
    if b.settle()? != THREADS {
        return Err("the model did not complete the shared QP's writes".into());
    }

    let per_thread = ROUND / THREADS;
    let rounds = (iters as usize).div_ceil(ROUND).max(1);
    let base = Instant::now();
    let stamps: Vec<[AtomicU64; 2]> = (0..THREADS)
        .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
        .collect();
    let barrier = Barrier::new(THREADS + 1);
    let failed = AtomicU64::new(0);
    let mut ns = 0u128;
    std::thread::scope(|s| -> Res<()> {
        for stamp in &stamps {
            let (qp, barrier, failed, one) = (&qp, &barrier, &failed, &one);
            s.spawn(move || {
                for _ in 0..rounds {
                    barrier.wait();
                    stamp[0].store(base.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    for _ in 0..per_thread {
                        if op_contended(qp, one).is_err() {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    stamp[1].store(base.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    barrier.wait();
                }
            });
        }
        for _ in 0..rounds {
            barrier.wait();
            barrier.wait();
            let start = stamps.iter().map(|s| s[0].load(Ordering::Relaxed)).min();
            let end = stamps.iter().map(|s| s[1].load(Ordering::Relaxed)).max();
            ns += u128::from(end.unwrap_or(0) - start.unwrap_or(0));
            qp.post_send(&last)
                .map_err(err("post the round's last write"))?;
            b.posted = b.posted.wrapping_add(ROUND as u32 + 1);
            b.drain()?;
        }
        Ok(())
    })?;
    if failed.load(Ordering::Relaxed) > 0 {
        return Err(format!(
            "{} contended posts failed",
            failed.load(Ordering::Relaxed)
        ));
    }
    out!(
        "contended{THREADS}_write_batch1 {:.2}",
        ns as f64 / (rounds * per_thread * THREADS) as f64
    );
    Ok(())
}

/// One contended post of one write.
#[inline(never)]
fn op_contended(qp: &SharedQueuePair, wr: &[SendWr<'_>; 1]) -> Result<(), uverbs::PostError> {
    std::hint::black_box(17);
    qp.post_send(wr)
}
