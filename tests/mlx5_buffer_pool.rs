//! `BufferPool` and `PooledQp` on the mlx5 device model: buffers moved
//! into posted receives and sends and back out with their completions, a
//! send/receive loop through them, flushes, a QP destroyed and a pool
//! dropped with buffers posted, and the device writing while the program
//! writes the buffers it holds.

use std::sync::Arc;

use uverbs::testing::mlx5::{fake_mlx5, Mlx5Model};
use uverbs::{
    BufferPool, CompletionQueue, Context, CqOptions, PoolBuf, PoolCompletion, PooledQp,
    PostErrorKind, QpAttr, QpState, QpType, WcStatus,
};
use uverbs_test_support::mlx5_pair::{assert_clean, cap, connect, gid, open};

const DEPTH: u32 = 16;

/// Two pooled RC QPs of `pool`, connected to each other, each with its
/// own CQ.
struct Ends {
    model: Arc<Mlx5Model>,
    _ctx: Context,
    cq_a: CompletionQueue,
    cq_b: CompletionQueue,
    a: PooledQp,
    b: PooledQp,
}

fn ends(model: Arc<Mlx5Model>, ctx: Context, pool_a: &BufferPool, pool_b: &BufferPool) -> Ends {
    let mut cq_a = ctx.create_cq(DEPTH * 4, CqOptions::default()).unwrap();
    let mut cq_b = ctx.create_cq(DEPTH * 4, CqOptions::default()).unwrap();
    let (a, drained_a) = pool_a
        .create_qp(QpType::Rc, cap(DEPTH, 1, 0), &mut cq_a)
        .unwrap();
    let (b, drained_b) = pool_b
        .create_qp(QpType::Rc, cap(DEPTH, 1, 0), &mut cq_b)
        .unwrap();
    assert!(drained_a.is_empty() && drained_b.is_empty());
    assert_eq!(a.qp().state(), QpState::Reset);
    let g = gid(&ctx);
    connect(a.qp(), b.qp().qp_num(), g, 7);
    connect(b.qp(), a.qp().qp_num(), g, 7);
    Ends {
        model,
        _ctx: ctx,
        cq_a,
        cq_b,
        a,
        b,
    }
}

/// Runs the device and polls `qp` on `cq` until `n` completions came.
fn poll_n(
    model: &Mlx5Model,
    qp: &mut PooledQp,
    cq: &mut CompletionQueue,
    n: usize,
) -> Vec<PoolCompletion> {
    let mut out = Vec::new();
    for _ in 0..1000 {
        model.process();
        qp.poll(cq, &mut out).unwrap();
        if out.len() >= n {
            break;
        }
    }
    assert_eq!(out.len(), n, "completions: {out:?}");
    out
}

fn pattern(round: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i * 31 + round * 7) as u8 ^ 0xa5)
        .collect()
}

/// 1,000 messages of varying length from B to A through pooled buffers:
/// each received buffer shows exactly the bytes sent, in place, and goes
/// straight back to the device; every buffer is accounted for at the end.
#[test]
fn a_send_receive_loop_reads_received_bytes_in_place() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pool = BufferPool::new(&ctx, 32, 1000).unwrap();
    assert_eq!(pool.stride(), 1024);
    let mut e = ends(model.clone(), ctx, &pool, &pool);
    assert_eq!(e.a.post_recvs_from_pool(8).unwrap(), 8);
    assert_eq!(e.a.posted(), 8);
    assert_eq!(pool.available(), 24);
    for round in 0..1000 {
        let len = 1 + (round * 37) % 1000;
        let mut buf = pool.take().expect("a free buffer");
        buf.copy_from(&pattern(round, len)).unwrap();
        e.b.post_send(buf).unwrap();
        let sent = poll_n(&e.model, &mut e.b, &mut e.cq_b, 1);
        let PoolCompletion::Sent { wc, buf } = &sent[0] else {
            panic!("{sent:?}")
        };
        assert_eq!(wc.status, WcStatus::SUCCESS);
        assert_eq!(buf.len(), len, "a send's buffer keeps its length");
        drop(sent);
        let got = poll_n(&e.model, &mut e.a, &mut e.cq_a, 1).pop().unwrap();
        let PoolCompletion::Recv { wc, buf } = got else {
            panic!("{got:?}")
        };
        assert_eq!(wc.status, WcStatus::SUCCESS);
        assert_eq!(wc.byte_len as usize, len);
        assert_eq!(&buf[..], &pattern(round, len)[..], "round {round}");
        e.a.post_recv(buf).unwrap();
    }
    assert_eq!(e.a.posted(), 8);
    assert_eq!(e.b.posted(), 0);
    assert_eq!(pool.available(), 24);
    assert_clean(&e.model);
}

/// Moving the QP to ERR flushes every posted receive: each buffer comes
/// back with WR_FLUSH_ERR and length 0, and the pool is whole again.
#[test]
fn flushed_receives_come_back_empty() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pool = BufferPool::new(&ctx, 8, 256).unwrap();
    let mut e = ends(model.clone(), ctx, &pool, &pool);
    // A buffer the program filled and posts: its bytes must not show.
    let mut buf = pool.take().unwrap();
    buf.fill(0x77);
    e.a.post_recv(buf).unwrap();
    assert_eq!(e.a.post_recvs_from_pool(3).unwrap(), 3);
    assert_eq!(pool.available(), 4);
    e.a.qp()
        .modify_to(&QpAttr::with_state(QpState::Err))
        .unwrap();
    let out = poll_n(&e.model, &mut e.a, &mut e.cq_a, 4);
    for c in out {
        let PoolCompletion::Recv { wc, mut buf } = c else {
            panic!("{c:?}")
        };
        assert_eq!(wc.status, WcStatus::WR_FLUSH_ERR);
        assert!(buf.is_empty(), "a failed receive's buffer shows no bytes");
        // The bytes are still the buffer's, shown on request.
        buf.set_len(buf.capacity()).unwrap();
        assert_eq!(buf.len(), 256);
    }
    assert_eq!(e.a.posted(), 0);
    assert_eq!(pool.available(), 8);
    assert_clean(&e.model);
}

/// A message longer than the receive buffer: the receive fails (local
/// length error) and the buffer comes back empty, never longer than
/// itself.
#[test]
fn a_message_longer_than_the_buffer_shows_nothing() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let small = BufferPool::new(&ctx, 4, 64).unwrap();
    let big = BufferPool::new(&ctx, 4, 512).unwrap();
    let mut e = ends(model.clone(), ctx, &small, &big);
    e.a.post_recv(small.take().unwrap()).unwrap();
    let mut buf = big.take().unwrap();
    buf.copy_from(&[9u8; 300]).unwrap();
    e.b.post_send(buf).unwrap();
    let got = poll_n(&e.model, &mut e.a, &mut e.cq_a, 1).pop().unwrap();
    let PoolCompletion::Recv { wc, buf } = got else {
        panic!("{got:?}")
    };
    assert_eq!(wc.status, WcStatus::LOC_LEN_ERR);
    assert!(buf.is_empty());
    assert_eq!(buf.capacity(), 64);
    drop(buf);
    assert_eq!(small.available(), 4);
    assert_clean(&e.model);
}

/// A QP destroyed with receives posted: their buffers never come back,
/// the region stays registered while the pool lives, and is deregistered
/// when the pool goes.
#[test]
fn buffers_posted_at_a_destroy_never_come_back() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let mrs = model.mr_count();
    let pool = BufferPool::new(&ctx, 8, 128).unwrap();
    assert_eq!(model.mr_count(), mrs + 1);
    let mut cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    let (mut qp, _) = pool
        .create_qp(QpType::Rc, cap(DEPTH, 1, 0), &mut cq)
        .unwrap();
    connect(qp.qp(), qp.qp().qp_num(), gid(&ctx), 7);
    assert_eq!(qp.post_recvs_from_pool(3).unwrap(), 3);
    qp.destroy().unwrap();
    assert_eq!(
        pool.available(),
        5,
        "the 3 posted buffers are gone for good"
    );
    let mut out = [uverbs::WorkCompletion::default(); 8];
    model.process();
    assert_eq!(cq.poll(&mut out), 0, "no completion for a destroyed QP");
    assert_eq!(model.mr_count(), mrs + 1, "still registered");
    // A QP dropped (not destroyed) with buffers posted: the same.
    let (mut qp, _) = pool
        .create_qp(QpType::Rc, cap(DEPTH, 1, 0), &mut cq)
        .unwrap();
    connect(qp.qp(), qp.qp().qp_num(), gid(&ctx), 7);
    assert_eq!(qp.post_recvs_from_pool(2).unwrap(), 2);
    drop(qp);
    assert_eq!(pool.available(), 3);
    drop(pool);
    assert_eq!(model.mr_count(), mrs, "deregistered with the pool");
    assert_clean(&model);
}

/// The pool handle dropped while receives are posted: the region stays
/// registered and the receives complete into it; it is deregistered when
/// the last buffer and QP are gone.
#[test]
fn a_pool_dropped_early_stays_registered_for_its_posted_buffers() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let mrs = model.mr_count();
    let pool_a = BufferPool::new(&ctx, 4, 128).unwrap();
    let pool_b = BufferPool::new(&ctx, 4, 128).unwrap();
    let mut e = ends(model.clone(), ctx, &pool_a, &pool_b);
    assert_eq!(e.a.post_recvs_from_pool(4).unwrap(), 4);
    drop(pool_a);
    assert_eq!(model.mr_count(), mrs + 2);
    let mut buf = pool_b.take().unwrap();
    buf.copy_from(b"after the pool was dropped").unwrap();
    e.b.post_send(buf).unwrap();
    let got = poll_n(&e.model, &mut e.a, &mut e.cq_a, 1).pop().unwrap();
    let PoolCompletion::Recv { buf, .. } = got else {
        panic!("{got:?}")
    };
    assert_eq!(&buf[..], b"after the pool was dropped");
    let Ends { a, b, .. } = e;
    drop(a);
    assert_eq!(
        model.mr_count(),
        mrs + 2,
        "the received buffer holds the region"
    );
    drop(buf);
    assert_eq!(model.mr_count(), mrs + 1, "pool A's region deregistered");
    drop(b);
    drop(pool_b);
    assert_eq!(model.mr_count(), mrs);
    assert_clean(&model);
}

/// The device (the model's HCA thread) writes receive buffers while the
/// program writes the buffers it holds, round after round: what arrives
/// is exactly what was sent, and what the program holds is exactly what
/// it wrote (no write of either lands in the other's buffers).
#[test]
fn the_device_writes_posted_buffers_while_the_program_writes_its_own() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pool = BufferPool::new(&ctx, 24, 200).unwrap();
    let mut e = ends(model.clone(), ctx, &pool, &pool);
    let hca = e.model.spawn_hca();
    let mut held: Vec<PoolBuf> = (0..4).map(|_| pool.take().unwrap()).collect();
    assert_eq!(e.a.post_recvs_from_pool(8).unwrap(), 8);
    let mut out = Vec::new();
    for round in 0..300usize {
        let mut buf = pool.take().unwrap();
        buf.copy_from(&pattern(round, 200)).unwrap();
        e.b.post_send(buf).unwrap();
        // Scribble over the held buffers while the device works.
        for (i, h) in held.iter_mut().enumerate() {
            h.fill((round + i) as u8);
        }
        out.clear();
        let (mut got, mut sent) = (None, false);
        for _ in 0..1_000_000 {
            e.a.poll(&mut e.cq_a, &mut out).unwrap();
            e.b.poll(&mut e.cq_b, &mut out).unwrap();
            for c in out.drain(..) {
                match c {
                    PoolCompletion::Recv { wc, buf } => {
                        assert_eq!(wc.status, WcStatus::SUCCESS);
                        got = Some(buf);
                    }
                    PoolCompletion::Sent { .. } => sent = true,
                    other => panic!("{other:?}"),
                }
            }
            if got.is_some() && sent {
                break;
            }
            std::thread::yield_now();
        }
        let buf = got.expect("the message arrived");
        assert_eq!(&buf[..], &pattern(round, 200)[..], "round {round}");
        e.a.post_recv(buf).unwrap();
        for (i, h) in held.iter().enumerate() {
            assert!(
                h.iter().all(|&b| b == (round + i) as u8),
                "held buffer {i}, round {round}"
            );
        }
    }
    drop(hca);
    assert_clean(&e.model);
}

/// The pool and its buffers go to other threads and are shared; a pooled
/// QP goes to another thread.
#[test]
fn the_pool_and_its_buffers_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<BufferPool>();
    send_sync::<PoolBuf>();
    send::<PooledQp>();
    send::<PoolCompletion>();
}

/// Posts that fail give the buffer back: a buffer of another pool, and a
/// receive in RESET.
#[test]
fn a_refused_post_gives_the_buffer_back() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pool = BufferPool::new(&ctx, 2, 64).unwrap();
    let other = BufferPool::new(&ctx, 2, 64).unwrap();
    let mut cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let mut cq2 = ctx.create_cq(16, CqOptions::default()).unwrap();
    let (mut qp, _) = pool.create_qp(QpType::Rc, cap(4, 1, 0), &mut cq).unwrap();
    let mut foreign = other.take().unwrap();
    foreign.copy_from(b"mine").unwrap();
    let refused = qp.post_recv(foreign).unwrap_err();
    assert!(
        matches!(refused.error.kind, PostErrorKind::OpNotSupported(_)),
        "{refused}"
    );
    assert_eq!(&refused.buf[..], b"mine");
    assert!(refused.buf.is_from(&other));
    let refused = qp.post_recv(pool.take().unwrap()).unwrap_err();
    assert!(
        matches!(refused.error.kind, PostErrorKind::BadState(_)),
        "{refused}"
    );
    assert_eq!(qp.posted(), 0);
    drop(refused);
    assert_eq!(pool.available(), 2);
    // Polling another CQ than the QP's is refused.
    let err = qp.poll(&mut cq2, &mut Vec::new()).unwrap_err();
    assert_eq!(err.kind(), uverbs::ErrorKind::InvalidArgument);
    assert!(pool.create_qp(QpType::Ud, cap(4, 1, 0), &mut cq).is_err());
    assert!(BufferPool::new(&ctx, 0, 64).is_err());
    assert!(BufferPool::new(&ctx, 1, 0).is_err());
    assert!(BufferPool::new(&ctx, (1 << 24) + 1, 64).is_err());
}

/// A CQ shared with a plain QP: the plain QP's completions waiting at the
/// pooled QP's creation come back from it, later ones come back from
/// `poll` as `Other`, without a buffer; the pooled QP's own come with
/// theirs.
#[test]
fn another_qps_completions_carry_no_buffer() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    let mut plain =
        uverbs_test_support::mlx5_pair::create_qp(&pd, QpType::Rc, &cq, None, cap(8, 1, 0));
    connect(&plain, plain.qp_num(), gid(&ctx), 7);
    let mr = pd.alloc_mr(4096, uverbs::AccessFlags::LOCAL_WRITE).unwrap();
    let send = |qp: &mut uverbs::QueuePair, wr_id: u64| {
        let sge = [mr.sge(0, 8).unwrap()];
        qp.post_recv(&[uverbs::RecvWr::new(wr_id, &sge)]).unwrap();
        qp.post_send(&[uverbs::SendWr::send(wr_id, &sge)]).unwrap();
    };
    // wr_ids that look like a pooled one's (slot 0, sequence 1).
    send(&mut plain, 1 << 24);
    model.process();
    let pool = BufferPool::new(&ctx, 4, 64).unwrap();
    let (mut qp, drained) = pool.create_qp(QpType::Rc, cap(8, 1, 0), &mut cq).unwrap();
    assert_eq!(drained.len(), 2, "{drained:?}");
    connect(qp.qp(), qp.qp().qp_num(), gid(&ctx), 7);
    qp.post_recv(pool.take().unwrap()).unwrap();
    send(&mut plain, 1 << 24);
    let mut buf = pool.take().unwrap();
    buf.copy_from(b"pooled").unwrap();
    qp.post_send(buf).unwrap();
    let out = poll_n(&model, &mut qp, &mut cq, 4);
    let others = out
        .iter()
        .filter(|c| matches!(c, PoolCompletion::Other(_)))
        .count();
    assert_eq!(others, 2, "{out:?}");
    for c in &out {
        match c {
            PoolCompletion::Other(wc) => assert_eq!(wc.qp_num, plain.qp_num()),
            PoolCompletion::Recv { buf, .. } => assert_eq!(&buf[..], b"pooled"),
            PoolCompletion::Sent { wc, .. } => assert_eq!(wc.qp_num, qp.qp().qp_num()),
            _ => unreachable!(),
        }
    }
    drop(out);
    assert_eq!(pool.available(), 4);
    assert_clean(&model);
}
