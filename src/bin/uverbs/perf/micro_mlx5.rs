//! `uverbs perf micro --mlx5-model` (feature `test-utils`): the mlx5 data
//! path's cost per call, on the device model of `uverbs::testing::mlx5`
//! (host memory; the UAR is a page of ordinary memory).
//!
//! Each kind of work first runs one chunk through the model, which executes
//! the WQEs and checks the library's doorbells (a run with a protocol
//! violation or a failed completion is an error). The timed chunks then
//! complete the way `benches/mlx5_baseline.c` drains: the device's part is
//! a completion written straight into the CQ for the last WQE of the chunk
//! (`Mlx5Model::inject_cqe`), polled outside the timed loop. So the times
//! are the library's alone, with the same memory traffic as the C baseline:
//! WQE building, the doorbell record and the 8-byte doorbell (BlueFlame for
//! one inline WQE) per post; the ownership check and parsing per CQE, of
//! requester CQEs (`poll_cqe`) and of receives (`RESP_SEND` CQEs; the
//! receives reposted between rounds, untimed): of the QP's own receive
//! queue (`poll_recv_cqe`) and of an SRQ (`poll_srq_cqe`); and the same
//! CQEs taken by extended polling sessions (`start_poll`, `next`; each
//! completion's `wr_id` and status read, sessions of up to 16:
//! `cqex_poll_cqe`, `cqex_poll_recv_cqe`, `cqex_poll_srq_cqe`).
//! `benches/mlx5.sh` runs it beside the C baseline written with rdma-core's
//! mlx5dv.h helpers and prints both in one table.
//!
//! Output: one line per measurement, `name ns_per_op`, as the C baseline.

use std::time::Instant;

use uverbs::{
    qp_ex::{Mlx5, Rc},
    testing::mlx5::{fake_mlx5, Mlx5Model},
    AccessFlags, CompletionQueue, CqOptions, Gid, Mtu, QpCap, QpInitAttr, QueuePair, RecvWr,
    SendOp, SendWr, SrqAttr, WcOpcode, WcStatus, WorkCompletion,
};

use super::{err, Opts, Res};

/// Work requests per timed chunk: the send queue's depth (as the C
/// baseline's `MAX_POST`).
pub(super) const CHUNK: usize = 512;
/// CQEs per timed poll round (the CQ's size, as the C baseline's `NCQE`).
pub(super) const NCQE: usize = 4096;
/// WQEs of the SRQ (as the C baseline's `SRQ_WQE`); one fewer receives fit.
const SRQ_WQES: u32 = 512;
/// `MLX5_CQE_REQ`, `MLX5_CQE_RESP_SEND` and `MLX5_OPCODE_RDMA_WRITE`
/// (mlx5dv.h).
const CQE_REQ: u8 = 0;
const CQE_RESP_SEND: u8 = 2;
const OPCODE_RDMA_WRITE: u8 = 0x08;

/// The QP under test and what completes its work.
pub(super) struct Bench {
    pub(super) model: std::sync::Arc<Mlx5Model>,
    pub(super) cq: CompletionQueue,
    pub(super) cqn: u32,
    pub(super) qpn: u32,
    /// The QP's user index (CQE version 1), which CQEs name it by.
    pub(super) uidx: Option<u32>,
    /// WQE basic blocks posted so far (every WQE here takes one).
    pub(super) posted: u32,
    pub(super) wc: [WorkCompletion; 16],
}

impl Bench {
    /// A requester CQE for the WQE at basic block `counter`, as the device
    /// writes it (fields of `mlx5_cqe64`; the model sets the owner bit).
    fn req_cqe(&self, counter: u32) -> [u8; 64] {
        let mut c = [0u8; 64];
        if let Some(u) = self.uidx {
            c[32..36].copy_from_slice(&u.to_be_bytes());
        }
        c[56..60].copy_from_slice(&(u32::from(OPCODE_RDMA_WRITE) << 24 | self.qpn).to_be_bytes());
        c[60..62].copy_from_slice(&(counter as u16).to_be_bytes());
        c[63] = CQE_REQ << 4;
        c
    }

    /// A receive's CQE (`RESP_SEND`, 64 bytes) for QP `qpn` (user index
    /// `uidx`), naming WQE `wqe` (an SRQ's), as the device writes it (the
    /// model sets the owner bit).
    fn resp_cqe(&self, qpn: u32, uidx: Option<u32>, wqe: u32) -> [u8; 64] {
        let mut c = [0u8; 64];
        if let Some(u) = uidx {
            c[32..36].copy_from_slice(&u.to_be_bytes());
        }
        c[44..48].copy_from_slice(&64u32.to_be_bytes());
        c[56..60].copy_from_slice(&qpn.to_be_bytes());
        c[60..62].copy_from_slice(&(wqe as u16).to_be_bytes());
        c[63] = CQE_RESP_SEND << 4;
        c
    }

    /// Completes everything posted: one CQE for the last WQE, which frees
    /// the send queue up to it, polled here.
    pub(super) fn drain(&mut self) -> Res<()> {
        let cqe = self.req_cqe(self.posted.wrapping_sub(1));
        if !self.model.inject_cqe(self.cqn, cqe) {
            return Err("the model refused a completion (CQ full)".into());
        }
        let n = self.cq.poll(&mut self.wc);
        if n != 1 || self.wc[0].status != WcStatus::SUCCESS {
            return Err(format!(
                "draining polled {n} completions: {:?}",
                &self.wc[..n]
            ));
        }
        Ok(())
    }

    /// Runs the model over what was posted and polls until nothing more
    /// comes; every completion must be a success and the model must have
    /// seen no protocol violation.
    pub(super) fn settle(&mut self) -> Res<usize> {
        let mut total = 0;
        loop {
            self.model.process();
            let mut n = 0;
            loop {
                let k = self.cq.poll(&mut self.wc);
                if let Some(bad) = self.wc[..k].iter().find(|w| w.status != WcStatus::SUCCESS) {
                    return Err(format!("the model completed a request with {bad:?}"));
                }
                if k == 0 {
                    break;
                }
                n += k;
            }
            if n == 0 {
                break;
            }
            total += n;
        }
        let violations = self.model.violations();
        if !violations.is_empty() {
            return Err(format!(
                "the device model saw protocol violations: {violations:?}"
            ));
        }
        Ok(total)
    }
}

/// Times polls of receive completions until `iters` are taken: per round,
/// `post` posts `per_round` receives (the first `per_round` of `recvs`,
/// ids from 0), `cqe` gives the CQE of each, and `poll` takes them, 16 per
/// call; the last must be the round's last receive, 64 bytes, a success.
fn timed_recv(
    b: &mut Bench,
    iters: u64,
    per_round: usize,
    poll: fn(&mut CompletionQueue, &mut [WorkCompletion; 16]) -> usize,
    mut cqe: impl FnMut(&Bench) -> [u8; 64],
    mut post: impl FnMut(&mut Bench) -> Res<()>,
) -> Res<f64> {
    let (mut ns, mut done) = (0u128, 0u64);
    while done < iters {
        post(b)?;
        for _ in 0..per_round {
            if !b.model.inject_cqe(b.cqn, cqe(b)) {
                return Err("the model refused a completion (CQ full)".into());
            }
        }
        let t0 = Instant::now();
        let (mut got, mut last) = (0, 0);
        while got < per_round {
            last = poll(&mut b.cq, &mut b.wc);
            if last == 0 {
                return Err(format!("{got} of {per_round} receive completions polled"));
            }
            got += last;
        }
        ns += t0.elapsed().as_nanos();
        done += per_round as u64;
        let w = &b.wc[last - 1];
        if (w.wr_id, w.status, w.opcode, w.byte_len)
            != (per_round as u64 - 1, WcStatus::SUCCESS, WcOpcode::RECV, 64)
        {
            return Err(format!("the last receive completed as {w:?}"));
        }
    }
    Ok(ns as f64 / done as f64)
}

/// Runs `chunk` (which posts `CHUNK` WQEs) once through the model.
fn verify(
    b: &mut Bench,
    qp: &mut QueuePair,
    chunk: &mut impl FnMut(&mut QueuePair) -> Res<()>,
) -> Res<()> {
    chunk(qp)?;
    b.posted = b.posted.wrapping_add(CHUNK as u32);
    if b.settle()? == 0 {
        return Err("the model completed nothing".into());
    }
    Ok(())
}

/// Times `chunk` until `iters` WQEs are posted, draining by injection.
fn timed(
    b: &mut Bench,
    qp: &mut QueuePair,
    iters: u64,
    chunk: &mut impl FnMut(&mut QueuePair) -> Res<()>,
) -> Res<f64> {
    let (mut ns, mut done) = (0u128, 0u64);
    while done < iters {
        let t0 = Instant::now();
        chunk(qp)?;
        ns += t0.elapsed().as_nanos();
        b.posted = b.posted.wrapping_add(CHUNK as u32);
        done += CHUNK as u64;
        b.drain()?;
    }
    Ok(ns as f64 / done as f64)
}

// The calls measured, each a function of its own so that
// `benches/callgrind.sh --mlx5` can count their instructions (the
// `black_box`es keep LLVM from merging the identical ones).

/// One `post_send` of 1, 8 or 64 RDMA writes.
#[inline(never)]
pub(super) fn op_write_batch1(
    qp: &mut QueuePair,
    wrs: &[SendWr<'_>],
) -> Result<(), uverbs::PostError> {
    std::hint::black_box(0);
    qp.post_send(wrs)
}

#[inline(never)]
pub(super) fn op_write_batch8(
    qp: &mut QueuePair,
    wrs: &[SendWr<'_>],
) -> Result<(), uverbs::PostError> {
    std::hint::black_box(1);
    qp.post_send(wrs)
}

#[inline(never)]
pub(super) fn op_write_batch64(
    qp: &mut QueuePair,
    wrs: &[SendWr<'_>],
) -> Result<(), uverbs::PostError> {
    std::hint::black_box(2);
    qp.post_send(wrs)
}

/// The same writes through a send batch (`start_send`, one `push` per
/// request built at the call site, `complete`), the last one signaled.
#[inline(always)]
fn batch_writes(qp: &mut QueuePair, w: &Write, n: usize) -> Result<(), uverbs::PostError> {
    let mut batch = qp.start_send()?;
    for k in 0..n {
        let wr = SendWr::new(
            k as u64,
            SendOp::RdmaWrite {
                remote_addr: w.remote_addr,
                rkey: w.rkey,
            },
            &w.sge,
        );
        batch.push(&if k + 1 == n { wr } else { wr.unsignaled() })?;
    }
    batch.complete()
}

#[inline(never)]
fn op_batch_write1(qp: &mut QueuePair, w: &Write) -> Result<(), uverbs::PostError> {
    std::hint::black_box(3);
    batch_writes(qp, w, 1)
}

#[inline(never)]
fn op_batch_write8(qp: &mut QueuePair, w: &Write) -> Result<(), uverbs::PostError> {
    std::hint::black_box(4);
    batch_writes(qp, w, 8)
}

#[inline(never)]
fn op_batch_write64(qp: &mut QueuePair, w: &Write) -> Result<(), uverbs::PostError> {
    std::hint::black_box(5);
    batch_writes(qp, w, 64)
}

/// An inline SEND through a send batch of one.
#[inline(never)]
fn op_batch_inline_send(qp: &mut QueuePair, id: u64, data: &[u8]) -> Result<(), uverbs::PostError> {
    let mut batch = qp.start_send()?;
    batch.push(&SendWr::send(id, &[]).inline(data))?;
    batch.complete()
}

/// The same writes through a typed session (`start_wr::<Rc, Mlx5>`, one
/// builder per request, `complete`): the `ibv_wr_*` API with the QP's
/// type and provider checked once per session.
#[inline(always)]
fn typed_writes(qp: &mut QueuePair, w: &Write, n: usize) -> Result<(), uverbs::PostError> {
    let mut s = qp.start_wr::<Rc, Mlx5>()?;
    for k in 0..n {
        let wr = s.rdma_write(w.rkey, w.remote_addr).wr_id(k as u64);
        if k + 1 == n { wr } else { wr.unsignaled() }.sge(w.sge[0])?;
    }
    s.complete()
}

#[inline(never)]
fn op_typed_write1(qp: &mut QueuePair, w: &Write) -> Result<(), uverbs::PostError> {
    std::hint::black_box(8);
    typed_writes(qp, w, 1)
}

#[inline(never)]
fn op_typed_write8(qp: &mut QueuePair, w: &Write) -> Result<(), uverbs::PostError> {
    std::hint::black_box(9);
    typed_writes(qp, w, 8)
}

#[inline(never)]
fn op_typed_write64(qp: &mut QueuePair, w: &Write) -> Result<(), uverbs::PostError> {
    std::hint::black_box(10);
    typed_writes(qp, w, 64)
}

/// An inline SEND through a typed session of one.
#[inline(never)]
fn op_typed_inline_send(qp: &mut QueuePair, id: u64, data: &[u8]) -> Result<(), uverbs::PostError> {
    let mut s = qp.start_wr::<Rc, Mlx5>()?;
    s.send().wr_id(id).inline(data)?;
    s.complete()
}

/// The same writes through the send session's non-borrowing calls
/// (`begin_send`, one `push_send` per request, `complete_send`): what the
/// C library's `ibv_wr_*` calls reach, one call per request.
#[inline(always)]
fn call_writes(qp: &mut QueuePair, w: &Write, n: usize) -> Result<(), uverbs::PostError> {
    qp.begin_send()?;
    for k in 0..n {
        let wr = SendWr::new(
            k as u64,
            SendOp::RdmaWrite {
                remote_addr: w.remote_addr,
                rkey: w.rkey,
            },
            &w.sge,
        );
        qp.push_send(std::hint::black_box(&if k + 1 == n {
            wr
        } else {
            wr.unsignaled()
        }))?;
    }
    qp.complete_send()
}

#[inline(never)]
fn op_call_write1(qp: &mut QueuePair, w: &Write) -> Result<(), uverbs::PostError> {
    std::hint::black_box(11);
    call_writes(qp, w, 1)
}

#[inline(never)]
fn op_call_write8(qp: &mut QueuePair, w: &Write) -> Result<(), uverbs::PostError> {
    std::hint::black_box(12);
    call_writes(qp, w, 8)
}

#[inline(never)]
fn op_call_write64(qp: &mut QueuePair, w: &Write) -> Result<(), uverbs::PostError> {
    std::hint::black_box(13);
    call_writes(qp, w, 64)
}

/// An inline SEND through a session of calls of one.
#[inline(never)]
fn op_call_inline_send(qp: &mut QueuePair, id: u64, data: &[u8]) -> Result<(), uverbs::PostError> {
    qp.begin_send()?;
    qp.push_send(std::hint::black_box(&SendWr::send(id, &[]).inline(data)))?;
    qp.complete_send()
}

/// What a timed RDMA write carries.
struct Write {
    remote_addr: u64,
    rkey: u32,
    sge: [uverbs::Sge; 1],
}

/// One `post_send` of an inline SEND.
#[inline(never)]
fn op_inline_send(qp: &mut QueuePair, wr: &[SendWr<'_>; 1]) -> Result<(), uverbs::PostError> {
    qp.post_send(wr)
}

/// One poll of up to 16 completions.
#[inline(never)]
fn op_poll(cq: &mut CompletionQueue, wc: &mut [WorkCompletion; 16]) -> usize {
    cq.poll(wc)
}

/// One poll of up to 16 receive completions (the same call as `op_poll`,
/// a function of its own so it is counted apart).
#[inline(never)]
fn op_poll_recv(cq: &mut CompletionQueue, wc: &mut [WorkCompletion; 16]) -> usize {
    std::hint::black_box(6);
    cq.poll(wc)
}

/// One poll of up to 16 receive completions of a QP on an SRQ.
#[inline(never)]
fn op_poll_srq(cq: &mut CompletionQueue, wc: &mut [WorkCompletion; 16]) -> usize {
    std::hint::black_box(7);
    cq.poll(wc)
}

/// One extended polling session of up to 16 completions
/// (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`), reading each one's
/// `wr_id`, status, opcode, byte length and QP number, as
/// `benches/mlx5_libmlx5.c`'s `lib_cqex_poll_cqe` reads them with
/// `ibv_wc_read_*` (summed, the sum kept from the optimizer once per
/// session); the session's last completion, whole, into `wc` at its
/// index (the rows check it). Inlined into each measured function.
#[inline(always)]
fn cqex_session(cq: &mut CompletionQueue, wc: &mut [WorkCompletion; 16]) -> usize {
    let Some(mut s) = cq.start_poll() else {
        return 0;
    };
    let mut n = 0;
    let mut sink = 0u64;
    loop {
        sink = sink
            .wrapping_add(s.wr_id())
            .wrapping_add(u64::from(s.status().0))
            .wrapping_add(u64::from(s.opcode().0))
            .wrapping_add(u64::from(s.byte_len()))
            .wrapping_add(u64::from(s.qp_num()));
        n += 1;
        if n == wc.len() || !s.next() {
            break;
        }
    }
    std::hint::black_box(sink);
    wc[n - 1] = s.work_completion();
    n
}

/// [`cqex_session`] over requester completions.
#[inline(never)]
fn op_cqex_poll(cq: &mut CompletionQueue, wc: &mut [WorkCompletion; 16]) -> usize {
    std::hint::black_box(8);
    cqex_session(cq, wc)
}

/// [`cqex_session`] over receive completions.
#[inline(never)]
fn op_cqex_poll_recv(cq: &mut CompletionQueue, wc: &mut [WorkCompletion; 16]) -> usize {
    std::hint::black_box(9);
    cqex_session(cq, wc)
}

/// [`cqex_session`] over receive completions of a QP on an SRQ.
#[inline(never)]
fn op_cqex_poll_srq(cq: &mut CompletionQueue, wc: &mut [WorkCompletion; 16]) -> usize {
    std::hint::black_box(10);
    cqex_session(cq, wc)
}

/// Times `poll` (16 per call) over requester CQEs until `iters` are
/// taken: per round, `NCQE` CQEs written for the `CHUNK` signaled WQEs
/// posted from basic block `first` on (each WQE completed again and again:
/// the CQEs name the same counters), then polled.
fn timed_req(
    b: &mut Bench,
    iters: u64,
    first: u32,
    poll: fn(&mut CompletionQueue, &mut [WorkCompletion; 16]) -> usize,
) -> Res<f64> {
    let (mut ns, mut done) = (0u128, 0u64);
    while done < iters {
        for k in 0..NCQE as u32 {
            let cqe = b.req_cqe(first.wrapping_add(k % CHUNK as u32));
            if !b.model.inject_cqe(b.cqn, cqe) {
                return Err("the model refused a completion (CQ full)".into());
            }
        }
        let t0 = Instant::now();
        let mut got = 0;
        while got < NCQE {
            let n = poll(&mut b.cq, &mut b.wc);
            if n == 0 {
                return Err(format!("{got} of {NCQE} completions polled"));
            }
            got += n;
        }
        ns += t0.elapsed().as_nanos();
        done += NCQE as u64;
    }
    Ok(ns as f64 / done as f64)
}

pub fn run(o: &Opts) -> Res<()> {
    let iters = o.iters.max(CHUNK) as u64;
    let model = fake_mlx5();
    let ctx =
        uverbs::Context::open_with(model.dyn_kernel(), None).map_err(err("open the mlx5 model"))?;
    let pd = ctx.alloc_pd().map_err(err("allocate PD"))?;
    let cq = ctx
        .create_cq(NCQE as u32 - 1, CqOptions::default())
        .map_err(err("create CQ"))?;
    let mut qp = pd
        .create_qp(
            &QpInitAttr::rc(&cq, &cq)
                .cap(QpCap::new(CHUNK as u32, CHUNK as u32, 1, 1).max_inline_data(16)),
        )
        .map_err(err("create QP"))?;
    let gid = ctx
        .query_gid(1, 1)
        .map_err(err("query GID"))?
        .map_or(Gid([0; 16]), |e| e.gid);
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
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let mr = pd
        .alloc_mr(1 << 16, access)
        .map_err(err("register memory"))?;
    let sge = [mr.sge(0, 64).map_err(err("sge"))?];
    let rsge = [mr.sge(8192, 64).map_err(err("sge"))?];
    let op = SendOp::RdmaWrite {
        remote_addr: mr.addr() + 4096,
        rkey: mr.rkey(),
    };

    let batches = [1usize, 8, 64].map(|batch| {
        let mut wrs: Vec<SendWr<'_>> = (0..batch)
            .map(|i| SendWr::new(i as u64, op, &sge).unsignaled())
            .collect();
        wrs[batch - 1] = SendWr::new(batch as u64, op, &sge);
        wrs
    });
    let mut writes = batches.each_ref().map(|wrs| {
        let op = match wrs.len() {
            1 => op_write_batch1,
            8 => op_write_batch8,
            _ => op_write_batch64,
        };
        move |qp: &mut QueuePair| -> Res<()> {
            for _ in 0..CHUNK / wrs.len() {
                op(qp, wrs).map_err(err("post RDMA writes"))?;
            }
            Ok(())
        }
    });
    let write = Write {
        remote_addr: mr.addr() + 4096,
        rkey: mr.rkey(),
        sge,
    };
    let mut batched = [1usize, 8, 64].map(|n| {
        let op = match n {
            1 => op_batch_write1,
            8 => op_batch_write8,
            _ => op_batch_write64,
        };
        let write = &write;
        move |qp: &mut QueuePair| -> Res<()> {
            for _ in 0..CHUNK / n {
                op(qp, write).map_err(err("post RDMA writes in a send batch"))?;
            }
            Ok(())
        }
    });
    let mut typed = [1usize, 8, 64].map(|n| {
        let op = match n {
            1 => op_typed_write1,
            8 => op_typed_write8,
            _ => op_typed_write64,
        };
        let write = &write;
        move |qp: &mut QueuePair| -> Res<()> {
            for _ in 0..CHUNK / n {
                op(qp, write).map_err(err("post RDMA writes in a typed session"))?;
            }
            Ok(())
        }
    });
    let mut calls = [1usize, 8, 64].map(|n| {
        let op = match n {
            1 => op_call_write1,
            8 => op_call_write8,
            _ => op_call_write64,
        };
        let write = &write;
        move |qp: &mut QueuePair| -> Res<()> {
            for _ in 0..CHUNK / n {
                op(qp, write).map_err(err("post RDMA writes in a session of calls"))?;
            }
            Ok(())
        }
    });
    let data = [0u8; 16];
    let mut call_inline = |qp: &mut QueuePair| -> Res<()> {
        for k in 0..CHUNK as u64 {
            op_call_inline_send(qp, k, &data).map_err(err("post an inline send by calls"))?;
        }
        Ok(())
    };
    let mut typed_inline = |qp: &mut QueuePair| -> Res<()> {
        for k in 0..CHUNK as u64 {
            op_typed_inline_send(qp, k, &data).map_err(err("post an inline send, typed"))?;
        }
        Ok(())
    };
    let mut batch_inline = |qp: &mut QueuePair| -> Res<()> {
        for k in 0..CHUNK as u64 {
            op_batch_inline_send(qp, k, &data).map_err(err("post an inline send in a batch"))?;
        }
        Ok(())
    };
    let send = [SendWr::send(7, &[]).inline(&data).unsignaled()];
    let last = [SendWr::send(8, &[]).inline(&data)];
    let mut inline = |qp: &mut QueuePair| -> Res<()> {
        for _ in 0..CHUNK - 1 {
            op_inline_send(qp, &send).map_err(err("post an inline send"))?;
        }
        op_inline_send(qp, &last).map_err(err("post an inline send"))
    };

    // Everything once through the model first (the inline sends need
    // receives at the responder: the QP is connected to itself); from then
    // on the model only writes completions.
    for w in writes.iter_mut() {
        verify(&mut b, &mut qp, w)?;
    }
    for w in batched.iter_mut() {
        verify(&mut b, &mut qp, w)?;
    }
    for w in typed.iter_mut() {
        verify(&mut b, &mut qp, w)?;
    }
    for w in calls.iter_mut() {
        verify(&mut b, &mut qp, w)?;
    }
    let recvs: Vec<RecvWr<'_>> = (0..CHUNK).map(|i| RecvWr::new(i as u64, &rsge)).collect();
    qp.post_recv(&recvs).map_err(err("post receives"))?;
    verify(&mut b, &mut qp, &mut inline)?;
    qp.post_recv(&recvs).map_err(err("post receives"))?;
    verify(&mut b, &mut qp, &mut batch_inline)?;
    qp.post_recv(&recvs).map_err(err("post receives"))?;
    verify(&mut b, &mut qp, &mut typed_inline)?;
    qp.post_recv(&recvs).map_err(err("post receives"))?;
    verify(&mut b, &mut qp, &mut call_inline)?;

    // The contended shared row (`micro_shared.rs`), on a QP of its own,
    // first: it runs its QP once through the model, which must not meet
    // this QP's timed WQEs (never executed, only completed by injection).
    super::micro_shared::contended(&model, &ctx, &pd, &mr, o, iters)?;

    // A warm-up of a third of a second, untimed: started right after
    // another busy process (the C baseline, which `benches/mlx5.sh`
    // alternates with this one), the first timed row ran about 1.7 times
    // slower in most rounds.
    // `benches/callgrind.sh` turns it off (UVERBS_PERF_WARMUP_MS=0): it
    // counts each row's calls, and the warm-up's would count in the first.
    let warm_ms = std::env::var("UVERBS_PERF_WARMUP_MS")
        .ok()
        .and_then(|v| v.parse::<u128>().ok())
        .unwrap_or(300);
    let warm = Instant::now();
    while warm.elapsed().as_millis() < warm_ms {
        timed(&mut b, &mut qp, CHUNK as u64, &mut writes[0])?;
    }
    for (w, batch) in writes.iter_mut().zip([1, 8, 64]) {
        let ns = timed(&mut b, &mut qp, iters, w)?;
        out!("write_batch{batch} {ns:.2}");
    }
    let ns = timed(&mut b, &mut qp, iters, &mut inline)?;
    out!("inline_send {ns:.2}");
    for (w, batch) in batched.iter_mut().zip([1, 8, 64]) {
        let ns = timed(&mut b, &mut qp, iters, w)?;
        out!("wr_write_batch{batch} {ns:.2}");
    }
    let ns = timed(&mut b, &mut qp, iters, &mut batch_inline)?;
    out!("wr_inline_send {ns:.2}");
    for (w, batch) in typed.iter_mut().zip([1, 8, 64]) {
        let ns = timed(&mut b, &mut qp, iters, w)?;
        out!("wrx_write_batch{batch} {ns:.2}");
    }
    let ns = timed(&mut b, &mut qp, iters, &mut typed_inline)?;
    out!("wrx_inline_send {ns:.2}");
    for (w, batch) in calls.iter_mut().zip([1, 8, 64]) {
        let ns = timed(&mut b, &mut qp, iters, w)?;
        out!("wrc_write_batch{batch} {ns:.2}");
    }
    let ns = timed(&mut b, &mut qp, iters, &mut call_inline)?;
    out!("wrc_inline_send {ns:.2}");
    // Shared posting (`micro_shared.rs`): the uncontended rows on this QP,
    // shared and given back.
    let mut qp = super::micro_shared::uncontended(&mut b, qp, iters, &batches)?;

    // Polling: CQEs written for WQEs of a posted chunk, then polled in
    // batches of 16 as the C baseline does.
    let signaled: Vec<SendWr<'_>> = (0..64).map(|i| SendWr::new(i, op, &sge)).collect();
    for _ in 0..CHUNK / 64 {
        qp.post_send(&signaled).map_err(err("post RDMA writes"))?;
    }
    let first = b.posted;
    b.posted = b.posted.wrapping_add(CHUNK as u32);
    let ns = timed_req(&mut b, iters, first, op_poll)?;
    out!("poll_cqe {ns:.2}");
    let ns = timed_req(&mut b, iters, first, op_cqex_poll)?;
    out!("cqex_poll_cqe {ns:.2}");

    // Receive completions: CHUNK receives posted, a RESP_SEND CQE written
    // for each (receives complete in order), polled in batches of 16.
    let cqe = b.resp_cqe(b.qpn, b.uidx, 0);
    for (name, poll) in [
        ("poll_recv_cqe", op_poll_recv as fn(&mut _, &mut _) -> _),
        ("cqex_poll_recv_cqe", op_cqex_poll_recv),
    ] {
        let ns = timed_recv(
            &mut b,
            iters,
            CHUNK,
            poll,
            |_| cqe,
            |_| qp.post_recv(&recvs).map_err(err("post receives")),
        )?;
        out!("{name} {ns:.2}");
    }

    // The same through an SRQ: its WQEs are reused in the order they are
    // freed, so with completions in order receive number j of the run is
    // in WQE j modulo the SRQ's size, which the CQE names.
    let mut srq = pd
        .create_srq(SrqAttr::new(SRQ_WQES - 1, 1))
        .map_err(err("create SRQ"))?;
    let on_srq = pd
        .create_qp(
            &QpInitAttr::rc(&b.cq, &b.cq)
                .srq(&srq)
                .cap(QpCap::new(16, 0, 1, 1)),
        )
        .map_err(err("create a QP on the SRQ"))?;
    let info = model
        .qp(on_srq.qp_num())
        .ok_or("the model does not know the QP on the SRQ")?;
    let per_round = SRQ_WQES as usize - 1;
    let srq_recvs = &recvs[..per_round];
    let mut j = 0u32;
    for (name, poll) in [
        ("poll_srq_cqe", op_poll_srq as fn(&mut _, &mut _) -> _),
        ("cqex_poll_srq_cqe", op_cqex_poll_srq),
    ] {
        let ns = timed_recv(
            &mut b,
            iters,
            per_round,
            poll,
            |b| {
                j = j.wrapping_add(1);
                b.resp_cqe(info.qpn, info.uidx, j.wrapping_sub(1) % SRQ_WQES)
            },
            |_| srq.post_recv(srq_recvs).map_err(err("post SRQ receives")),
        )?;
        out!("{name} {ns:.2}");
    }
    Ok(())
}
