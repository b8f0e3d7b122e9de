//! The shared forms on the mlx5 device model (`QueuePair::into_shared`,
//! `CompletionQueue::into_shared`): two connected QPs, each shared by
//! threads that post sends, threads that post receives and threads that
//! poll its shared CQ, all at once, while another thread runs the device.
//! Every send and every receive completes exactly once, each at the poller
//! that took it, every payload arrives exactly once; the model sees no
//! protocol violation (a doorbell before its record, a torn WQE). And the
//! receive queue split off for sharing rejoins its QP after a reset
//! without losing the receives posted since (`into_inner`).

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use uverbs::{
    MemoryRegion, PostErrorKind, QpAttr, QpState, QpType, RecvWr, SendWr, SharedCompletionQueue,
    SharedQueuePair, WcOpcode, WcStatus, WorkCompletion,
};
use uverbs_test_support::mlx5_pair::*;

const SENDERS: u64 = 2;
const RECEIVERS: u64 = 2;
const POLLERS: usize = 2;
const PER_SENDER: u64 = 300;
const PER_RECEIVER: u64 = SENDERS * PER_SENDER / RECEIVERS;
/// A receive's slot in its side's MR.
const SLOT: usize = 64;

/// Posts with `post` until it is taken, waiting out a full queue.
fn until_taken(mut post: impl FnMut() -> Result<(), uverbs::PostError>) {
    let end = Instant::now() + Duration::from_secs(120);
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

/// One side: its shared QP and CQ, its MR (receive slots), what its
/// pollers took.
struct Side<'a> {
    qp: &'a SharedQueuePair,
    cq: &'a SharedCompletionQueue,
    mr: &'a MemoryRegion,
    /// A tag in every wr_id of this side (bit 48).
    tag: u64,
}

/// The wr_id of sender `t`'s request `i` on side `tag`; receives have bit
/// 40 set.
fn send_id(tag: u64, t: u64, i: u64) -> u64 {
    tag << 48 | t << 32 | i
}

fn recv_id(tag: u64, slot: u64) -> u64 {
    tag << 48 | 1 << 40 | slot
}

#[test]
fn threads_send_receive_and_poll_one_shared_qp_each_completion_once() {
    let p = pair(QpType::Rc, 64);
    let (a, b) = (p.a.into_shared(), p.b.into_shared());
    let (cq_a, cq_b) = (p.cq_a.into_shared(), p.cq_b.into_shared());
    let sides = [
        Side {
            qp: &a,
            cq: &cq_a,
            mr: &p.mr_a,
            tag: 1,
        },
        Side {
            qp: &b,
            cq: &cq_b,
            mr: &p.mr_b,
            tag: 2,
        },
    ];
    let per_side = (2 * SENDERS * PER_SENDER) as usize; // its sends and receives
    let polled = [AtomicUsize::new(0), AtomicUsize::new(0)];
    // The device runs on the model's own thread (`spawn_hca`), which knows
    // that the library's stores may be in flight when it looks: a loop of
    // `process()` calls would check BlueFlame copies and doorbell records
    // as if every post had finished (`Mlx5Model::process`'s contract).
    let hca = p.model.spawn_hca();
    let taken: Vec<(usize, Vec<WorkCompletion>)> = std::thread::scope(|s| {
        let mut posters = Vec::new();
        let mut pollers = Vec::new();
        for (k, side) in sides.iter().enumerate() {
            for t in 0..SENDERS {
                posters.push(s.spawn(move || {
                    for i in 0..PER_SENDER {
                        let id = send_id(side.tag, t, i);
                        let data = id.to_le_bytes();
                        until_taken(|| side.qp.post_send(&[SendWr::send(id, &[]).inline(&data)]));
                    }
                }));
            }
            for t in 0..RECEIVERS {
                posters.push(s.spawn(move || {
                    for i in 0..PER_RECEIVER {
                        let slot = t * PER_RECEIVER + i;
                        let sge = [side.mr.sge(slot as usize * SLOT, SLOT as u32).unwrap()];
                        let id = recv_id(side.tag, slot);
                        until_taken(|| side.qp.post_recv(&[RecvWr::new(id, &sge)]));
                    }
                }));
            }
            for _ in 0..POLLERS {
                let polled = &polled[k];
                pollers.push(s.spawn(move || {
                    let end = Instant::now() + Duration::from_secs(120);
                    let mut mine = Vec::new();
                    let mut wc = [WorkCompletion::default(); 8];
                    while polled.load(Ordering::Acquire) < per_side {
                        assert!(Instant::now() < end, "completions stopped coming");
                        let n = side.cq.poll(&mut wc);
                        polled.fetch_add(n, Ordering::AcqRel);
                        mine.extend_from_slice(&wc[..n]);
                        if n == 0 {
                            std::thread::yield_now();
                        }
                    }
                    (k, mine)
                }));
            }
        }
        for t in posters {
            t.join().unwrap();
        }
        pollers.into_iter().map(|t| t.join().unwrap()).collect()
    });
    drop(hca);

    for (k, side) in sides.iter().enumerate() {
        let peer = &sides[1 - k];
        let mut by_id: BTreeMap<u64, WorkCompletion> = BTreeMap::new();
        for wc in taken.iter().filter(|(j, _)| *j == k).flat_map(|(_, v)| v) {
            assert_eq!(wc.status, WcStatus::SUCCESS, "{wc:?}");
            assert!(
                by_id.insert(wc.wr_id, *wc).is_none(),
                "side {k}: wr_id {:#x} completed twice",
                wc.wr_id
            );
        }
        let sends: Vec<u64> = (0..SENDERS)
            .flat_map(|t| (0..PER_SENDER).map(move |i| send_id(side.tag, t, i)))
            .collect();
        let recvs: Vec<u64> = (0..SENDERS * PER_SENDER)
            .map(|slot| recv_id(side.tag, slot))
            .collect();
        let mut expected: Vec<u64> = sends.iter().chain(&recvs).copied().collect();
        expected.sort_unstable();
        assert_eq!(
            by_id.keys().copied().collect::<Vec<_>>(),
            expected,
            "side {k}: every send and receive completed, nothing else"
        );
        for id in &sends {
            assert_eq!(by_id[id].opcode, WcOpcode::SEND);
        }
        // Each receive slot holds one of the peer's sends; together, each
        // of them once.
        let mut payloads = Vec::new();
        for id in &recvs {
            let wc = &by_id[id];
            assert_eq!((wc.opcode, wc.byte_len), (WcOpcode::RECV, 8), "{wc:?}");
            let slot = (id & 0xff_ffff) as usize;
            payloads.push(side.mr.read_u64(slot * SLOT).unwrap());
        }
        payloads.sort_unstable();
        let mut peer_sends: Vec<u64> = (0..SENDERS)
            .flat_map(|t| (0..PER_SENDER).map(move |i| send_id(peer.tag, t, i)))
            .collect();
        peer_sends.sort_unstable();
        assert_eq!(
            payloads, peer_sends,
            "side {k}: each peer send arrived once"
        );
    }
    assert_clean(&p.model);
}

#[test]
fn after_a_reset_into_inner_keeps_the_receives_posted_since() {
    let p = pair(QpType::Rc, 16);
    let (mut a, b) = (p.a, p.b.into_shared());
    let mut cq_b = p.cq_b;
    // Some receives, one consumed, then a reset of both.
    for i in 0..4u64 {
        let sge = [p.mr_b.sge(64 * i as usize, 64).unwrap()];
        b.post_recv(&[RecvWr::new(i, &sge)]).unwrap();
    }
    let src = [p.mr_a.sge(0, 8).unwrap()];
    a.post_send(&[SendWr::send(50, &src).unsignaled()]).unwrap();
    let got = run_and_poll(&p.model, &mut cq_b, 1);
    assert_eq!((got[0].wr_id, got[0].status), (0, WcStatus::SUCCESS));
    b.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    a.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    let g = gid(&p._ctx);
    connect(&a, b.qp_num(), g, 7);
    {
        // The shared form connects as the QP does.
        let held = b.lock_send();
        connect(&held, a.qp_num(), g, 7);
    }
    let mut flushed = [WorkCompletion::default(); 16];
    while cq_b.poll(&mut flushed) > 0 {}
    // Receives posted through the shared form after the reset (its receive
    // queue restarted); no send since.
    for i in 0..8u64 {
        let sge = [p.mr_b.sge(1024 + 64 * i as usize, 64).unwrap()];
        b.post_recv(&[RecvWr::new(100 + i, &sge)]).unwrap();
    }
    // Back to the QueuePair: its send queue restarts for the reset, its
    // receive queue must not restart again over those eight receives.
    let mut b = b.into_inner();
    // One more through the QueuePair: its first post after the rejoin.
    let sge = [p.mr_b.sge(1024 + 64 * 8, 64).unwrap()];
    b.post_recv(&[RecvWr::new(108, &sge)]).unwrap();
    for i in 0..9u64 {
        p.mr_a
            .write(64 * i as usize, &(700 + i).to_le_bytes())
            .unwrap();
        let s = [p.mr_a.sge(64 * i as usize, 8).unwrap()];
        a.post_send(&[SendWr::send(200 + i, &s).unsignaled()])
            .unwrap();
    }
    let got = run_and_poll(&p.model, &mut cq_b, 9);
    for (i, wc) in got.iter().enumerate() {
        assert_eq!((wc.wr_id, wc.status), (100 + i as u64, WcStatus::SUCCESS));
        assert_eq!(p.mr_b.read_u64(1024 + 64 * i).unwrap(), 700 + i as u64);
    }
    // And it sends and receives with `&mut` as before.
    let mut cq_a = p.cq_a;
    let dst = [p.mr_a.sge(4096, 64).unwrap()];
    a.post_recv(&[RecvWr::new(300, &dst)]).unwrap();
    p.mr_b.write(8192, &9u64.to_le_bytes()).unwrap();
    let s = [p.mr_b.sge(8192, 8).unwrap()];
    b.post_send(&[SendWr::send(301, &s)]).unwrap();
    let got = run_and_poll(&p.model, &mut cq_a, 1);
    assert_eq!((got[0].wr_id, got[0].status), (300, WcStatus::SUCCESS));
    assert_eq!(p.mr_a.read_u64(4096).unwrap(), 9);
    let got = run_and_poll(&p.model, &mut cq_b, 1);
    assert_eq!((got[0].wr_id, got[0].status), (301, WcStatus::SUCCESS));
    assert_clean(&p.model);
}
