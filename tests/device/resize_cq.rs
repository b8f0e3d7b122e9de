//! `CompletionQueue::resize` (`ibv_resize_cq`) on the real kernel: rxe
//! moves the completions waiting in the CQ to a new ring, which the
//! provider maps in place of the old one.

use uverbs::{sys::Errno, CompletionQueue, QpType, RecvWr, SendWr, WcOpcode, WcStatus};

use crate::support::*;

/// Sends `ids` from `a` to `b` (one receive posted for each) and waits for
/// the send completions on `a`'s CQ: rxe completes a receive before it
/// acknowledges the send, so the receives then all wait in `b`'s CQ,
/// unpolled.
fn sends_with_receives_waiting(p: &mut Pair, ids: std::ops::Range<u64>) {
    let src = mr(&p.pd, 64);
    let dst = mr(&p.pd, 64 * 64);
    for id in ids.clone() {
        let at = (id % 64) as usize * 64;
        p.b.post_recv(&[RecvWr::new(id, &[dst.sge(at, 64).unwrap()])])
            .unwrap();
    }
    for id in ids.clone() {
        p.a.post_send(&[SendWr::send(id, &[src.sge(0, 8).unwrap()])])
            .unwrap();
    }
    let sent = wait(&mut p.cq_a, ids.clone().count());
    assert!(
        sent.iter().all(|w| w.status == WcStatus::SUCCESS),
        "{sent:?}"
    );
}

/// Polls the receives `ids`, in order.
fn expect_receives(cq: &mut CompletionQueue, ids: std::ops::Range<u64>) {
    let got = wait(cq, ids.clone().count());
    for (w, id) in got.iter().zip(ids) {
        assert_eq!(
            (w.wr_id, w.status, w.opcode),
            (id, WcStatus::SUCCESS, WcOpcode::RECV)
        );
    }
    let mut more = [uverbs::WorkCompletion::default(); 4];
    assert_eq!(cq.poll(&mut more), 0, "nothing beyond: {more:?}");
}

#[test]
fn resize_cq_grows_and_shrinks_with_completions_waiting() {
    let mut p = pair(QpType::Rc, 32, 7);
    let first = p.cq_b.cqe();
    sends_with_receives_waiting(&mut p, 0..10);
    p.cq_b.resize(200).unwrap_or_else(|e| panic!("grow: {e}"));
    let grown = p.cq_b.cqe();
    assert!(grown >= 200, "asked 200, granted {grown} (was {first})");
    p.cq_b.resize(12).unwrap_or_else(|e| panic!("shrink: {e}"));
    let shrunk = p.cq_b.cqe();
    assert!((12..grown).contains(&shrunk), "asked 12, granted {shrunk}");
    expect_receives(&mut p.cq_b, 0..10);
    // The new ring takes new completions, beyond its first wrap.
    for round in 0..3 {
        let ids = 10 + round * 10..20 + round * 10;
        sends_with_receives_waiting(&mut p, ids.clone());
        expect_receives(&mut p.cq_b, ids);
    }
}

#[test]
fn resize_cq_below_the_completions_waiting_is_einval_and_keeps_them() {
    let mut p = pair(QpType::Rc, 32, 7);
    let cqe = p.cq_b.cqe();
    sends_with_receives_waiting(&mut p, 0..10);
    let max_cqe = p.ctx.query_device().unwrap().max_cqe;
    for asked in [5, 0, max_cqe + 1] {
        let e = p.cq_b.resize(asked).unwrap_err();
        assert_eq!(e.kernel_errno(), Some(Errno::EINVAL), "cqe {asked}: {e}");
        assert_eq!(p.cq_b.cqe(), cqe);
    }
    expect_receives(&mut p.cq_b, 0..10);
    sends_with_receives_waiting(&mut p, 10..20);
    expect_receives(&mut p.cq_b, 10..20);
    // Exactly as many as wait is enough.
    sends_with_receives_waiting(&mut p, 20..30);
    p.cq_b.resize(10).unwrap_or_else(|e| panic!("to 10: {e}"));
    assert!(p.cq_b.cqe() >= 10);
    expect_receives(&mut p.cq_b, 20..30);
}
