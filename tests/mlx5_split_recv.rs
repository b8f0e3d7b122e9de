//! A QP's receive queue split off into a handle of its own
//! (`QueuePair::split_recv` -> `RecvQueue`), on the mlx5 device model:
//! receives posted on one thread while the QP's sends are posted on
//! another, with no lock between them (each side's `&mut` is its own), all
//! executed by the device as posted; the split queue following the QP's
//! state through a reset; the refusals (the QP's own `post_recv` after the
//! split, a second split, a QP on an SRQ); and posting after the QP is
//! destroyed staying memory-safe.

use uverbs::{
    CqOptions, PostErrorKind, QpAttr, QpState, QpType, RecvWr, SendWr, SrqAttr, WcOpcode, WcStatus,
};

use uverbs_test_support::mlx5_pair::*;

const N: u64 = 24;

#[test]
fn receives_on_one_thread_and_sends_on_another_all_execute() {
    let mut p = pair(QpType::Rc, 32);
    let mut rq_b = p.b.split_recv().unwrap();
    assert_eq!(rq_b.qp_num(), p.b.qp_num());
    // A receives what B sends: A's receives first.
    for i in 0..N {
        let sge = [p.mr_a.sge(4096 + 64 * i as usize, 64).unwrap()];
        p.a.post_recv(&[RecvWr::new(1000 + i, &sge)]).unwrap();
    }
    for i in 0..N {
        p.mr_b.write(64 * i as usize, &i.to_le_bytes()).unwrap();
    }
    let (mr_b, b) = (&p.mr_b, &mut p.b);
    // Each thread has `&mut` of its own handle: nothing shared is locked.
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..N {
                let sge = [mr_b.sge(8192 + 64 * i as usize, 64).unwrap()];
                rq_b.post_recv(&[RecvWr::new(2000 + i, &sge)]).unwrap();
            }
        });
        s.spawn(|| {
            for i in 0..N {
                let sge = [mr_b.sge(64 * i as usize, 8).unwrap()];
                b.post_send(&[SendWr::send(3000 + i, &sge)]).unwrap();
            }
        });
    });
    // B's sends arrived at A in order.
    let ca = run_and_poll(&p.model, &mut p.cq_a, N as usize);
    for (i, wc) in ca.iter().enumerate() {
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode),
            (1000 + i as u64, WcStatus::SUCCESS, WcOpcode::RECV)
        );
        assert_eq!(p.mr_a.read_u64(4096 + 64 * i).unwrap(), i as u64);
    }
    // A's sends consume the receives the other thread posted, in order.
    for i in 0..N {
        p.mr_a
            .write(64 * i as usize, &(100 + i).to_le_bytes())
            .unwrap();
        let sge = [p.mr_a.sge(64 * i as usize, 8).unwrap()];
        p.a.post_send(&[SendWr::send(4000 + i, &sge).unsignaled()])
            .unwrap();
    }
    let cb = run_and_poll(&p.model, &mut p.cq_b, 2 * N as usize);
    let (recvs, sends): (Vec<&uverbs::WorkCompletion>, Vec<_>) =
        cb.iter().partition(|wc| wc.opcode == WcOpcode::RECV);
    assert_eq!(
        sends.iter().map(|wc| wc.wr_id).collect::<Vec<_>>(),
        (3000..3000 + N).collect::<Vec<_>>()
    );
    assert_eq!(
        recvs.iter().map(|wc| wc.wr_id).collect::<Vec<_>>(),
        (2000..2000 + N).collect::<Vec<_>>()
    );
    for i in 0..N as usize {
        assert_eq!(p.mr_b.read_u64(8192 + 64 * i).unwrap(), 100 + i as u64);
    }
    assert_clean(&p.model);
}

#[test]
fn the_split_queue_follows_the_qps_state_through_a_reset() {
    let mut p = pair(QpType::Rc, 8);
    let mut rq_b = p.b.split_recv().unwrap();
    // Fill part of the ring, let one complete, then reset: the queue starts
    // over at 0 in the QP's next life.
    for i in 0..5u64 {
        let sge = [p.mr_b.sge(64 * i as usize, 64).unwrap()];
        rq_b.post_recv(&[RecvWr::new(i, &sge)]).unwrap();
    }
    let src = [p.mr_a.sge(0, 8).unwrap()];
    p.a.post_send(&[SendWr::send(77, &src).unsignaled()])
        .unwrap();
    let cb = run_and_poll(&p.model, &mut p.cq_b, 1);
    assert_eq!((cb[0].wr_id, cb[0].status), (0, WcStatus::SUCCESS));

    p.b.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    let sge = [p.mr_b.sge(0, 64).unwrap()];
    let e = rq_b.post_recv(&[RecvWr::new(9, &sge)]).unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    p.a.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    let g = gid(&p._ctx);
    connect(&p.a, p.b.qp_num(), g, 7);
    connect(&p.b, p.a.qp_num(), g, 7);
    // The receives of the first life are gone (flushed or dropped by the
    // reset); the next ones are the queue's first again.
    let mut flushed = [uverbs::WorkCompletion::default(); 16];
    while p.cq_b.poll(&mut flushed) > 0 {}
    for i in 0..8u64 {
        let sge = [p.mr_b.sge(1024 + 64 * i as usize, 64).unwrap()];
        rq_b.post_recv(&[RecvWr::new(100 + i, &sge)]).unwrap();
    }
    for i in 0..8u64 {
        p.mr_a
            .write(64 * i as usize, &(500 + i).to_le_bytes())
            .unwrap();
        let s = [p.mr_a.sge(64 * i as usize, 8).unwrap()];
        p.a.post_send(&[SendWr::send(200 + i, &s).unsignaled()])
            .unwrap();
    }
    let cb = run_and_poll(&p.model, &mut p.cq_b, 8);
    for (i, wc) in cb.iter().enumerate() {
        assert_eq!((wc.wr_id, wc.status), (100 + i as u64, WcStatus::SUCCESS));
        assert_eq!(p.mr_b.read_u64(1024 + 64 * i).unwrap(), 500 + i as u64);
    }
    assert_clean(&p.model);
}

#[test]
fn what_a_split_refuses() {
    let mut p = pair(QpType::Rc, 8);
    let _rq = p.b.split_recv().unwrap();
    let sge = [p.mr_b.sge(0, 64).unwrap()];
    let e = p.b.post_recv(&[RecvWr::new(1, &sge)]).unwrap_err();
    assert!(
        matches!(e.kind, PostErrorKind::OpNotSupported(m) if m.contains("RecvQueue")),
        "{e}"
    );
    let e = p.b.split_recv().unwrap_err();
    assert_eq!(e.kind(), uverbs::ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("split off already"), "{e}");

    // A QP that receives from an SRQ has no queue of its own to split.
    let srq = p.pd.create_srq(SrqAttr::new(8, 1)).unwrap();
    let cq = p._ctx.create_cq(8, CqOptions::default()).unwrap();
    let mut on_srq = create_qp(&p.pd, QpType::Rc, &cq, Some(&srq), cap(8, 1, 0));
    let e = on_srq.split_recv().unwrap_err();
    assert!(e.to_string().contains("SRQ"), "{e}");
}

#[test]
fn posting_after_the_qp_is_destroyed_writes_nothing_anyone_reads() {
    let mut p = pair(QpType::Rc, 8);
    let mut rq_b = p.b.split_recv().unwrap();
    let b = std::mem::replace(
        &mut p.b,
        create_qp(&p.pd, QpType::Rc, &p.cq_b, None, cap(8, 2, 64)),
    );
    b.destroy()
        .unwrap_or_else(|e| panic!("destroy: {}", e.error()));
    // The queue's memory is its own or shared by reference count: the
    // post is harmless, and nothing completes from it.
    let sge = [p.mr_b.sge(0, 64).unwrap()];
    rq_b.post_recv(&[RecvWr::new(1, &sge)]).unwrap();
    p.model.process();
    let mut wc = [uverbs::WorkCompletion::default(); 4];
    assert_eq!(p.cq_b.poll(&mut wc), 0);
    drop(rq_b);
    assert_clean(&p.model);
}
