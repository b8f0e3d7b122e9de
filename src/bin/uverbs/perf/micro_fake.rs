//! `uverbs perf micro --fake` (feature `test-utils`): the data-path calls
//! on the fake rxe kernel of `uverbs::testing::rxe`, rings in shared memory
//! and a doorbell `write` that returns at once ([`FastDoorbell`]), with the
//! kernel's side of the rings played between the calls.

use std::sync::Arc;

use uverbs::{RecvWr, WorkCompletion};
use zerocopy::FromZeros;

use super::{clock::Clock, err, Opts, Res};

/// `uverbs perf micro --fake`: the data-path calls on rings in anonymous
/// memory, with a fake kernel (`uverbs::testing::rxe`) whose doorbell
/// `write` returns at once and whose ring side is played between the
/// calls. Deterministic, so `valgrind --tool=callgrind` gives the
/// instructions per call: each measured call is one `op_*` function, called
/// exactly `n` times (`benches/callgrind.sh` divides their inclusive cost by
/// `n`).
pub fn run(o: &Opts) -> Res<()> {
    use std::time::Instant;

    use uverbs::{AccessFlags, CqOptions, Gid, Mtu, QpCap, QpInitAttr, SendOp, SendWr};

    use uverbs::testing::rxe::{fake_rxe, FastDoorbell, DEV};

    let n = o.iters as u64;
    let fake = fake_rxe();
    let ctx = uverbs::Context::open_with(Arc::new(FastDoorbell(fake.clone())), Some(DEV))
        .map_err(err("open the fake rxe0"))?;
    let pd = ctx.alloc_pd().map_err(err("allocate PD"))?;
    let mut send_cq = ctx
        .create_cq(16, CqOptions::default())
        .map_err(err("create send CQ"))?;
    let recv_cq = ctx
        .create_cq(16, CqOptions::default())
        .map_err(err("create receive CQ"))?;
    let mut qp = pd
        .create_qp(
            &QpInitAttr::rc(&send_cq, &recv_cq).cap(QpCap::new(32, 32, 1, 1).max_inline_data(236)),
        )
        .map_err(err("create QP"))?;
    super::connect(
        &qp,
        qp.qp_num(),
        o,
        Mtu::from_bytes(1024).ok_or("MTU")?,
        Gid([0; 16]),
    )?;
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let mr = pd.alloc_mr(8192, access).map_err(err("register memory"))?;
    let missing = || "the fake kernel lost a ring".to_string();
    let sq = fake.sq_ring(qp.handle()).ok_or_else(missing)?;
    let rq = fake.rq_ring(qp.handle()).ok_or_else(missing)?;
    let cq = fake.cq_ring(send_cq.handle()).ok_or_else(missing)?;

    let size = o.size.min(236) as u32;
    let sge = [mr.sge(0, size).map_err(err("sge"))?];
    let rsge = [mr.sge(4096, size).map_err(err("sge"))?];
    let data = vec![1u8; size as usize];
    let op = SendOp::RdmaWrite {
        remote_addr: mr.addr() + 4096,
        rkey: mr.rkey(),
    };
    let wr_sge = SendWr::new(1, op, &sge);
    let wr_inline = SendWr::new(2, op, &[]).inline(&data);
    let wr_send_inline = SendWr::send(3, &[]).inline(&data);
    let wr_send_sge = SendWr::send(5, &sge);
    let wr_recv = RecvWr::new(4, &rsge);
    let mut wc = [WorkCompletion::default(); 1];
    // What the fake kernel posts for the poll rows: a successful completion.
    let mut cqe = uverbs::abi::IbUverbsWc::new_zeroed();
    cqe.wr_id = 7;
    cqe.byte_len = size;
    cqe.qp_num = qp.qp_num();

    // Each row: a key for scripts (`scripts/bench.sh` sums them into the
    // userspace time of one message), a description, ns per call.
    // Timed in 5 chunks, the fastest one reported: the first chunk pays for
    // cold caches (in the TCG guest, for translating the code) and any chunk
    // can take an interrupt. The call count stays exactly `n`.
    let mut rows: Vec<(&str, &str, f64)> = Vec::new();
    let mut time =
        |key: &'static str, name: &'static str, f: &mut dyn FnMut() -> Res<()>| -> Res<()> {
            const CHUNKS: u64 = 5;
            let mut best = f64::INFINITY;
            for c in 0..CHUNKS {
                let calls = n / CHUNKS + u64::from(c < n % CHUNKS);
                let t0 = Instant::now();
                for _ in 0..calls {
                    f()?;
                }
                if calls > 0 {
                    best = best.min(t0.elapsed().as_nanos() as f64 / calls as f64);
                }
            }
            rows.push((key, name, best));
            Ok(())
        };
    time(
        "write_sge",
        "post_send 1 WR, 1 SGE (RDMA write)",
        &mut || {
            op_post_send_sge(&mut qp, &wr_sge)?;
            sq.consume_all();
            Ok(())
        },
    )?;
    time(
        "write_inline",
        "post_send 1 WR, inline (RDMA write)",
        &mut || {
            op_post_send_inline(&mut qp, &wr_inline)?;
            sq.consume_all();
            Ok(())
        },
    )?;
    let (raddr, rkey) = (mr.addr() + 4096, mr.rkey());
    time(
        "batch_write_sge",
        "send batch of 1 WR, 1 SGE (RDMA write)",
        &mut || {
            op_batch_write_sge(&mut qp, raddr, rkey, &sge)?;
            sq.consume_all();
            Ok(())
        },
    )?;
    time(
        "typed_write_sge",
        "typed session of 1 WR, 1 SGE (RDMA write)",
        &mut || {
            op_typed_write_sge(&mut qp, raddr, rkey, sge[0])?;
            sq.consume_all();
            Ok(())
        },
    )?;
    time("send_inline", "post_send 1 WR, inline (SEND)", &mut || {
        op_post_send_send_inline(&mut qp, &wr_send_inline)?;
        sq.consume_all();
        Ok(())
    })?;
    time("send_sge", "post_send 1 WR, 1 SGE (SEND)", &mut || {
        op_post_send_send_sge(&mut qp, &wr_send_sge)?;
        sq.consume_all();
        Ok(())
    })?;
    time("recv", "post_recv 1 WR, 1 SGE", &mut || {
        op_post_recv(&mut qp, &wr_recv)?;
        rq.consume_all();
        Ok(())
    })?;
    time(
        "poll_empty",
        "CompletionQueue::poll, empty",
        &mut || match op_poll_empty(&mut send_cq, &mut wc) {
            0 => Ok(()),
            k => Err(format!("poll of an empty CQ returned {k}")),
        },
    )?;
    time("poll_one", "CompletionQueue::poll, 1 CQE", &mut || {
        if !cq.post_cqe(&cqe) {
            return Err("the fake CQ is full".into());
        }
        match op_poll_one(&mut send_cq, &mut wc) {
            1 if wc[0].wr_id == 7 => Ok(()),
            k => Err(format!("poll returned {k}: {:?}", wc[0])),
        }
    })?;
    time(
        "cqex_empty",
        "CompletionQueue::start_poll, empty",
        &mut || match op_cqex_empty(&mut send_cq) {
            None => Ok(()),
            Some(id) => Err(format!("start_poll of an empty CQ gave {id}")),
        },
    )?;
    time("cqex_one", "start_poll, wr_id, status, 1 CQE", &mut || {
        if !cq.post_cqe(&cqe) {
            return Err("the fake CQ is full".into());
        }
        match op_cqex_one(&mut send_cq) {
            Some((7, s)) if s.is_success() => Ok(()),
            got => Err(format!("start_poll gave {got:?}")),
        }
    })?;
    // The completion event path of `rc-pingpong -e` (benches/event-path.sh
    // counts it on the device): a CQ on a channel, an event record queued
    // by the fake kernel before each get, the counts acknowledged after.
    let channel = ctx
        .create_comp_channel()
        .map_err(err("create completion channel"))?;
    let ev_cq = ctx
        .create_cq(16, CqOptions::new().channel(&channel))
        .map_err(err("create CQ on the channel"))?;
    let queue_event = || {
        fake.push_comp_event(ev_cq.handle())
            .then_some(())
            .ok_or_else(|| "the fake kernel lost the CQ's channel".to_string())
    };
    time(
        "cq_event",
        "get_event_deferred (the record queued)",
        &mut || {
            queue_event()?;
            op_get_event_deferred(&channel, &ev_cq)
        },
    )?;
    time(
        "cq_event_value",
        "get_event + defer_ack (the record queued)",
        &mut || {
            queue_event()?;
            op_get_event_defer_ack(&channel, &ev_cq)
        },
    )?;
    time("cq_arm", "CompletionQueue::req_notify", &mut || {
        op_req_notify(&ev_cq)
    })?;
    ev_cq
        .ack_events(2 * n as u32)
        .map_err(err("acknowledge the events"))?;
    let last = 4096 + size as usize - 1;
    time("mr_read", "MemoryRegion::read 1 byte", &mut || {
        std::hint::black_box(op_mr_read_byte(&mr, last)?);
        Ok(())
    })?;
    time("mr_read_u8", "MemoryRegion::read_u8", &mut || {
        std::hint::black_box(op_mr_read_u8(&mr, last)?);
        Ok(())
    })?;
    let clock = Clock::start(o.clock);
    time("clock", "the benchmark clock's now()", &mut || {
        std::hint::black_box(clock.now());
        Ok(())
    })?;
    out!(" fake rxe kernel: {n} calls each, size {size}");
    out!(" key           operation                                 ns/call");
    for (key, name, ns) in rows {
        out!(" {key:<13} {name:<40} {ns:>8.1}");
    }
    drop(qp);
    Ok(())
}

/// Keeps the `op_*` functions distinct: LLVM merges identical functions,
/// and each must be its own symbol for callgrind (one instruction).
#[inline(always)]
fn tag(t: u8) {
    std::hint::black_box(t);
}

#[inline(never)]
fn op_post_send_sge(qp: &mut uverbs::QueuePair, wr: &uverbs::SendWr<'_>) -> Res<()> {
    tag(1);
    qp.post_send(std::slice::from_ref(wr))
        .map_err(|e| format!("{e:#}"))
}

#[inline(never)]
fn op_post_send_inline(qp: &mut uverbs::QueuePair, wr: &uverbs::SendWr<'_>) -> Res<()> {
    tag(2);
    qp.post_send(std::slice::from_ref(wr))
        .map_err(|e| format!("{e:#}"))
}

#[inline(never)]
fn op_post_send_send_inline(qp: &mut uverbs::QueuePair, wr: &uverbs::SendWr<'_>) -> Res<()> {
    tag(3);
    qp.post_send(std::slice::from_ref(wr))
        .map_err(|e| format!("{e:#}"))
}

/// One RDMA write through a send batch, the request built at the call site.
#[inline(never)]
fn op_batch_write_sge(
    qp: &mut uverbs::QueuePair,
    remote_addr: u64,
    rkey: u32,
    sge: &[uverbs::Sge; 1],
) -> Res<()> {
    tag(10);
    let wr = uverbs::SendWr::new(1, uverbs::SendOp::RdmaWrite { remote_addr, rkey }, sge);
    let mut batch = qp.start_send().map_err(|e| format!("{e:#}"))?;
    batch.push(&wr).map_err(|e| format!("{e:#}"))?;
    batch.complete().map_err(|e| format!("{e:#}"))
}

/// One RDMA write through a typed session (`start_wr::<Rc, Rxe>`).
#[inline(never)]
fn op_typed_write_sge(
    qp: &mut uverbs::QueuePair,
    remote_addr: u64,
    rkey: u32,
    sge: uverbs::Sge,
) -> Res<()> {
    tag(11);
    let mut s = qp
        .start_wr::<uverbs::qp_ex::Rc, uverbs::qp_ex::Rxe>()
        .map_err(|e| format!("{e:#}"))?;
    s.rdma_write(rkey, remote_addr)
        .wr_id(1)
        .sge(sge)
        .map_err(|e| format!("{e:#}"))?;
    s.complete().map_err(|e| format!("{e:#}"))
}

#[inline(never)]
fn op_post_send_send_sge(qp: &mut uverbs::QueuePair, wr: &uverbs::SendWr<'_>) -> Res<()> {
    tag(9);
    qp.post_send(std::slice::from_ref(wr))
        .map_err(|e| format!("{e:#}"))
}

#[inline(never)]
fn op_post_recv(qp: &mut uverbs::QueuePair, wr: &RecvWr<'_>) -> Res<()> {
    tag(4);
    qp.post_recv(std::slice::from_ref(wr))
        .map_err(|e| format!("{e:#}"))
}

/// One completion event got and left counted by its CQ
/// (`ibv_get_cq_event`).
#[inline(never)]
fn op_get_event_deferred(
    channel: &uverbs::CompletionChannel,
    cq: &uverbs::CompletionQueue,
) -> Res<()> {
    tag(13);
    let ev = channel.get_event_deferred().map_err(|e| e.to_string())?;
    if ev.is_for(cq) {
        Ok(())
    } else {
        Err(format!("event for CQ {:#x}", ev.cq_handle()))
    }
}

/// One completion event got as a value, then deferred.
#[inline(never)]
fn op_get_event_defer_ack(
    channel: &uverbs::CompletionChannel,
    cq: &uverbs::CompletionQueue,
) -> Res<()> {
    tag(14);
    let ev = channel.get_event().map_err(|e| e.to_string())?;
    if !ev.is_for(cq) {
        return Err(format!("event for CQ {:#x}", ev.cq_handle()));
    }
    ev.defer_ack();
    Ok(())
}

/// One arm (`ibv_req_notify_cq(cq, 0)`).
#[inline(never)]
fn op_req_notify(cq: &uverbs::CompletionQueue) -> Res<()> {
    tag(15);
    cq.req_notify(false).map_err(|e| e.to_string())
}

#[inline(never)]
fn op_poll_empty(cq: &mut uverbs::CompletionQueue, wc: &mut [WorkCompletion; 1]) -> usize {
    tag(5);
    cq.poll(wc)
}

#[inline(never)]
fn op_poll_one(cq: &mut uverbs::CompletionQueue, wc: &mut [WorkCompletion; 1]) -> usize {
    tag(6);
    cq.poll(wc)
}

/// A session on an empty CQ (`ibv_start_poll` answering `ENOENT`).
#[inline(never)]
fn op_cqex_empty(cq: &mut uverbs::CompletionQueue) -> Option<u64> {
    tag(11);
    cq.start_poll().map(|s| s.wr_id())
}

/// A session of the one completion the CQ has: its `wr_id` and status,
/// and the `ibv_next_poll` that finds no more.
#[inline(never)]
fn op_cqex_one(cq: &mut uverbs::CompletionQueue) -> Option<(u64, uverbs::WcStatus)> {
    tag(12);
    let mut s = cq.start_poll()?;
    let got = (s.wr_id(), s.status());
    (!s.next()).then_some(got)
}

#[inline(never)]
fn op_mr_read_byte(mr: &uverbs::MemoryRegion, offset: usize) -> Res<u8> {
    tag(7);
    let mut b = [0u8; 1];
    mr.read(offset, &mut b).map_err(|e| format!("{e:#}"))?;
    Ok(b[0])
}

#[inline(never)]
fn op_mr_read_u8(mr: &uverbs::MemoryRegion, offset: usize) -> Res<u8> {
    tag(8);
    mr.read_u8(offset).map_err(|e| format!("{e:#}"))
}
