//! The shared forms (`QueuePair::into_shared` -> `SharedQueuePair`,
//! `CompletionQueue::into_shared` -> `SharedCompletionQueue`) on the fake
//! rxe kernel, whose rings the test reads as the kernel does:
//!
//! - four threads post sends and two post receives to one shared QP at
//!   once, while the "kernel" (a thread of the test) consumes both rings:
//!   every work request lands in its ring exactly once, each thread's in
//!   the order it posted them;
//! - three threads poll one shared CQ while the kernel writes CQEs: every
//!   completion is taken by exactly one of them;
//! - a held send lock keeps other senders out and lets receives through;
//! - a refused destroy gives the shared QP / CQ back, still posting and
//!   polling; the shared form and back (`into_inner`).

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Barrier,
    },
    time::{Duration, Instant},
};

use uverbs::testing::rxe::*;
use uverbs::{
    abi::IbUverbsWc, sys::Errno, AccessFlags, CqOptions, PostErrorKind, RecvWr, SendWr,
    SharedCompletionQueue, SharedQueuePair, WorkCompletion,
};
use uverbs_test_support::fake_rc::rc_in_rts;
use zerocopy::FromZeros;

const SENDERS: u64 = 4;
const RECEIVERS: u64 = 2;
const PER_THREAD: u64 = 500;

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn the_shared_forms_are_send_and_sync() {
    assert_send_sync::<SharedQueuePair>();
    assert_send_sync::<SharedCompletionQueue>();
}

/// The wr_id at the start of a ring slot (`rxe_send_wqe` and
/// `rxe_recv_wqe` both begin with it).
fn wr_id(slot: &[u8]) -> u64 {
    u64::from_ne_bytes(slot[..8].try_into().unwrap())
}

/// Posts with `post` until it is taken, waiting out a full queue.
fn until_taken(mut post: impl FnMut() -> Result<(), uverbs::PostError>) {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match post() {
            Ok(()) => return,
            Err(e) if e.kind == PostErrorKind::QueueFull && Instant::now() < end => {
                std::thread::yield_now()
            }
            Err(e) => panic!("post failed: {e}"),
        }
    }
}

#[test]
fn threads_post_sends_and_receives_to_one_qp_each_request_lands_once() {
    let fake = fake_rxe();
    let ctx = uverbs::Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let qp = rc_in_rts(&pd, &cq).into_shared();
    let sq = fake.sq_ring(qp.handle()).unwrap();
    let rq = fake.rq_ring(qp.handle()).unwrap();
    let total_sends = (SENDERS * PER_THREAD) as usize;
    let total_recvs = (RECEIVERS * PER_THREAD) as usize;
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    let start = Barrier::new((SENDERS + RECEIVERS) as usize);
    std::thread::scope(|s| {
        for t in 0..SENDERS {
            let (qp, mr, start) = (&qp, &mr, &start);
            s.spawn(move || {
                let sge = [mr.sge(0, 8).unwrap()];
                start.wait();
                for i in 0..PER_THREAD {
                    until_taken(|| qp.post_send(&[SendWr::send(t << 32 | i, &sge)]));
                }
            });
        }
        for t in 0..RECEIVERS {
            let (qp, mr, start) = (&qp, &mr, &start);
            s.spawn(move || {
                let sge = [mr.sge(1024, 64).unwrap()];
                start.wait();
                for i in 0..PER_THREAD {
                    until_taken(|| qp.post_recv(&[RecvWr::new(1 << 40 | t << 32 | i, &sge)]));
                }
            });
        }
        // The kernel's side: both rings consumed as they fill.
        let end = Instant::now() + Duration::from_secs(60);
        while sends.len() < total_sends || recvs.len() < total_recvs {
            assert!(Instant::now() < end, "the rings stopped filling");
            let mut idle = true;
            while let Some(w) = sq.consume() {
                sends.push(wr_id(&w));
                idle = false;
            }
            while let Some(w) = rq.consume() {
                recvs.push(wr_id(&w));
                idle = false;
            }
            if idle {
                std::thread::yield_now();
            }
        }
    });
    for (ids, threads, tag) in [(&sends, SENDERS, 0), (&recvs, RECEIVERS, 1u64 << 40)] {
        for t in 0..threads {
            let mine: Vec<u64> = ids
                .iter()
                .filter(|&&id| id >> 32 == tag >> 32 | t)
                .map(|id| id & 0xffff_ffff)
                .collect();
            assert_eq!(
                mine,
                (0..PER_THREAD).collect::<Vec<_>>(),
                "thread {t}'s requests (tag {tag:#x}): each once, in its order"
            );
        }
        assert_eq!(
            ids.len() as u64,
            threads * PER_THREAD,
            "nothing else landed"
        );
    }
}

#[test]
fn threads_poll_one_cq_each_completion_is_taken_once() {
    let fake = fake_rxe();
    let ctx = uverbs::Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let cq = ctx
        .create_cq(16, CqOptions::default())
        .unwrap()
        .into_shared();
    let ring = fake.cq_ring(cq.handle()).unwrap();
    const TOTAL: u64 = 6000;
    let done = AtomicBool::new(false);
    let taken: Vec<Vec<u64>> = std::thread::scope(|s| {
        let pollers: Vec<_> = (0..3)
            .map(|_| {
                let (cq, done) = (&cq, &done);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    let mut wc = [WorkCompletion::default(); 4];
                    loop {
                        let finished = done.load(Ordering::Acquire);
                        let n = cq.poll(&mut wc);
                        mine.extend(wc[..n].iter().map(|w| w.wr_id));
                        if n == 0 && finished {
                            return mine;
                        }
                        if n == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let end = Instant::now() + Duration::from_secs(60);
        let mut c = IbUverbsWc::new_zeroed();
        for i in 0..TOTAL {
            c.wr_id = i;
            while !ring.post_cqe(&c) {
                assert!(Instant::now() < end, "the pollers stopped taking CQEs");
                std::thread::yield_now();
            }
        }
        done.store(true, Ordering::Release);
        pollers.into_iter().map(|p| p.join().unwrap()).collect()
    });
    let mut all: Vec<u64> = taken.iter().flatten().copied().collect();
    // Each poller took its completions in the CQ's order.
    for mine in &taken {
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "out of order");
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (0..TOTAL).collect::<Vec<_>>(),
        "each completion exactly once"
    );
}

#[test]
fn a_held_send_lock_keeps_senders_out_and_lets_receives_through() {
    let fake = fake_rxe();
    let ctx = uverbs::Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let qp = rc_in_rts(&pd, &cq).into_shared();
    let sq = fake.sq_ring(qp.handle()).unwrap();
    let rq = fake.rq_ring(qp.handle()).unwrap();
    let sge = [mr.sge(0, 8).unwrap()];
    let sent = AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut held = qp.lock_send();
        let mut batch = held.start_send().unwrap();
        batch.push(&SendWr::send(1, &sge)).unwrap();
        let other = s.spawn(|| {
            qp.post_send(&[SendWr::send(2, &sge)]).unwrap();
            sent.store(true, Ordering::Release);
        });
        // Receives go in while the send lock is held.
        qp.post_recv(&[RecvWr::new(9, &sge)]).unwrap();
        assert_eq!(rq.consume().map(|w| wr_id(&w)), Some(9));
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !sent.load(Ordering::Acquire),
            "a send got past the held lock"
        );
        assert_eq!(
            sq.count(),
            0,
            "the session's request is not handed over yet"
        );
        batch.complete().unwrap();
        drop(held);
        other.join().unwrap();
    });
    // The session's request first, then the other thread's.
    assert_eq!(sq.consume().map(|w| wr_id(&w)), Some(1));
    assert_eq!(sq.consume().map(|w| wr_id(&w)), Some(2));
}

#[test]
fn a_refused_destroy_gives_the_shared_forms_back_usable() {
    let fake = fake_rxe();
    let ctx = uverbs::Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let qp = rc_in_rts(&pd, &cq).into_shared();
    let cq = cq.into_shared();
    let sge = [mr.sge(0, 8).unwrap()];

    // The CQ is in use by the QP: EBUSY, and it comes back.
    let e = cq.destroy().unwrap_err();
    assert_eq!(e.errno(), Errno::EBUSY, "{e}");
    let cq = e.into_inner();
    let ring = fake.cq_ring(cq.handle()).unwrap();
    let mut c = IbUverbsWc::new_zeroed();
    c.wr_id = 77;
    assert!(ring.post_cqe(&c));
    let mut wc = [WorkCompletion::default(); 2];
    assert_eq!(cq.poll(&mut wc), 1);
    assert_eq!(wc[0].wr_id, 77);

    // The kernel refuses the QP's destroy: it comes back, both sides post.
    fake.behaviour
        .fail_destroy
        .store(libc::EBUSY, Ordering::Relaxed);
    let e = qp.destroy().unwrap_err();
    assert_eq!(e.errno(), Errno::EBUSY, "{e}");
    let qp = e.into_inner();
    qp.post_send(&[SendWr::send(5, &sge)]).unwrap();
    qp.post_recv(&[RecvWr::new(6, &sge)]).unwrap();
    let sq = fake.sq_ring(qp.handle()).unwrap();
    let rq = fake.rq_ring(qp.handle()).unwrap();
    assert_eq!(sq.consume().map(|w| wr_id(&w)), Some(5));
    assert_eq!(rq.consume().map(|w| wr_id(&w)), Some(6));
    fake.behaviour.fail_destroy.store(0, Ordering::Relaxed);
    let handle = qp.handle();
    qp.destroy().unwrap();
    assert!(fake.destroyed(Kind::Qp).contains(&handle));
    cq.destroy().unwrap();
}

#[test]
fn into_inner_gives_the_queue_pair_back_with_its_receive_queue() {
    let fake = fake_rxe();
    let ctx = uverbs::Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let shared = rc_in_rts(&pd, &cq).into_shared();
    let sge = [mr.sge(0, 8).unwrap()];
    shared.post_recv(&[RecvWr::new(1, &sge)]).unwrap();
    let mut qp = shared.into_inner();
    // Its own post_recv works again (it did not while split off), after
    // the receive posted through the shared form.
    qp.post_recv(&[RecvWr::new(2, &sge)]).unwrap();
    qp.post_send(&[SendWr::send(3, &sge)]).unwrap();
    let rq = fake.rq_ring(qp.handle()).unwrap();
    assert_eq!(rq.consume().map(|w| wr_id(&w)), Some(1));
    assert_eq!(rq.consume().map(|w| wr_id(&w)), Some(2));
    // And it can be shared again.
    let shared = qp.into_shared();
    shared.post_recv(&[RecvWr::new(4, &sge)]).unwrap();
    assert_eq!(rq.consume().map(|w| wr_id(&w)), Some(4));
    let cq = cq.into_shared().into_inner();
    drop(shared);
    cq.destroy().unwrap();
}
