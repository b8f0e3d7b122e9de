//! `BufferPool` and `PooledQp` against the real kernel: rxe receives into
//! pooled buffers that the program then reads in place, flushes posted
//! receives when the QP moves to ERR, refuses a message longer than the
//! buffer, and a QP destroyed with receives posted keeps their buffers.

use uverbs::{
    BufferPool, CompletionQueue, CqOptions, PoolCompletion, PooledQp, QpAttr, QpState, QpType,
    WcStatus,
};

use crate::support::*;

struct Ends {
    cq_a: CompletionQueue,
    cq_b: CompletionQueue,
    a: PooledQp,
    b: PooledQp,
}

fn ends(ctx: &uverbs::Context, pool_a: &BufferPool, pool_b: &BufferPool) -> Ends {
    let mut cq_a = ctx.create_cq(64, CqOptions::default()).unwrap();
    let mut cq_b = ctx.create_cq(64, CqOptions::default()).unwrap();
    let (a, _) = pool_a.create_qp(QpType::Rc, cap(16), &mut cq_a).unwrap();
    let (b, _) = pool_b.create_qp(QpType::Rc, cap(16), &mut cq_b).unwrap();
    let gid = local_gid(ctx);
    let local = uverbs::AccessFlags::LOCAL_WRITE;
    connect(a.qp(), b.qp().qp_num(), gid, local, 7);
    connect(b.qp(), a.qp().qp_num(), gid, local, 7);
    Ends { cq_a, cq_b, a, b }
}

/// Polls `qp` until `n` completions came (bounded).
fn poll_n(qp: &mut PooledQp, cq: &mut CompletionQueue, n: usize) -> Vec<PoolCompletion> {
    let mut out = Vec::new();
    let start = std::time::Instant::now();
    while out.len() < n {
        if qp.poll(cq, &mut out).unwrap() == 0 {
            assert!(
                start.elapsed() < PATIENCE.0,
                "{} of {n} completions after {:?}: {out:?}",
                out.len(),
                PATIENCE.0
            );
            std::thread::yield_now();
        }
    }
    out
}

fn pattern(round: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 + round) as u8).collect()
}

#[test]
fn buffer_pool_send_receive_loop_on_the_kernel() {
    let ctx = open();
    let pool = BufferPool::new(&ctx, 16, 2048).unwrap();
    let mut e = ends(&ctx, &pool, &pool);
    assert_eq!(e.a.post_recvs_from_pool(4).unwrap(), 4);
    for round in 0..200 {
        let len = 1 + (round * 97) % 2048;
        let mut buf = pool.take().unwrap();
        buf.copy_from(&pattern(round, len)).unwrap();
        e.b.post_send(buf).unwrap();
        let sent = poll_n(&mut e.b, &mut e.cq_b, 1);
        assert!(
            matches!(&sent[0], PoolCompletion::Sent { wc, .. } if wc.status == WcStatus::SUCCESS),
            "{sent:?}"
        );
        drop(sent);
        let got = poll_n(&mut e.a, &mut e.cq_a, 1).pop().unwrap();
        let PoolCompletion::Recv { wc, buf } = got else {
            panic!("{got:?}")
        };
        assert_eq!((wc.status, wc.byte_len as usize), (WcStatus::SUCCESS, len));
        assert_eq!(&buf[..], &pattern(round, len)[..], "round {round}");
        e.a.post_recv(buf).unwrap();
    }
    assert_eq!(pool.available(), 12);
}

#[test]
fn buffer_pool_flush_length_error_and_destroy_on_the_kernel() {
    let ctx = open();
    let small = BufferPool::new(&ctx, 8, 64).unwrap();
    let big = BufferPool::new(&ctx, 8, 512).unwrap();
    let mut e = ends(&ctx, &small, &big);
    // A message longer than the receive buffer: the receive fails and its
    // buffer shows nothing.
    assert_eq!(e.a.post_recvs_from_pool(4).unwrap(), 4);
    let mut buf = big.take().unwrap();
    buf.copy_from(&[5u8; 300]).unwrap();
    e.b.post_send(buf).unwrap();
    // rxe moves the QP to ERR at the length error and may flush the other
    // three receives at once (one poll can return all four); the modify
    // to ERR makes sure of it.
    let mut out = poll_n(&mut e.a, &mut e.cq_a, 1);
    e.a.qp()
        .modify_to(&QpAttr::with_state(QpState::Err))
        .unwrap();
    let start = std::time::Instant::now();
    while out.len() < 4 {
        e.a.poll(&mut e.cq_a, &mut out).unwrap();
        assert!(start.elapsed() < PATIENCE.0, "{out:?}");
        std::thread::yield_now();
    }
    assert_eq!(out.len(), 4, "{out:?}");
    for (i, c) in out.into_iter().enumerate() {
        let PoolCompletion::Recv { wc, buf } = c else {
            panic!("{c:?}")
        };
        if i == 0 {
            // rxe reports the responder's length error as a class C
            // error, the model as LOC_LEN_ERR: a failure either way.
            assert_ne!(wc.status, WcStatus::SUCCESS, "{wc:?}");
            assert_ne!(wc.status, WcStatus::WR_FLUSH_ERR, "{wc:?}");
            eprintln!("the too-long receive: {}", wc.status);
        } else {
            assert_eq!(wc.status, WcStatus::WR_FLUSH_ERR, "{wc:?}");
        }
        assert!(buf.is_empty(), "a failed receive shows no bytes");
    }
    assert_eq!(e.a.posted(), 0);
    assert_eq!(small.available(), 8);
    // Destroyed with receives posted: those buffers stay with the device
    // for good.
    let mut cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let (mut qp, _) = small.create_qp(QpType::Rc, cap(8), &mut cq).unwrap();
    connect(
        qp.qp(),
        qp.qp().qp_num(),
        local_gid(&ctx),
        uverbs::AccessFlags::LOCAL_WRITE,
        7,
    );
    assert_eq!(qp.post_recvs_from_pool(3).unwrap(), 3);
    qp.destroy().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(small.available(), 5);
    drop(small);
    drop(e);
}

/// The example, run on rxe: messages through pooled buffers, read in
/// place.
#[test]
fn example_buffer_pool_reads_messages_in_place() {
    let mut cmd = std::process::Command::new(crate::example("buffer_pool"));
    cmd.args([&crate::test_device(), "3"]);
    let (status, out, err) =
        crate::async_events::run_bounded(cmd, std::time::Duration::from_secs(60));
    assert!(status.success(), "buffer_pool: {status}: {out}{err}");
    assert!(out.contains("message 2 through a pooled buffer"), "{out}");
    assert!(
        out.contains("3 messages; 12 of 16 buffers free, 4 posted"),
        "{out}"
    );
}
