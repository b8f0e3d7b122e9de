//! A QP and its CQs shared between threads (`QueuePair::into_shared`,
//! `CompletionQueue::into_shared`) against the real kernel (rxe): four
//! threads post sends to one shared QP, two post receives to its peer's
//! shared QP, and two threads poll each side's shared CQ, all at once
//! (never more posted than a CQ holds unpolled, see [`Room`]); every send
//! and every receive completes exactly once, and every payload arrives
//! once. Then the QP is taken back (`into_inner`) and posts with
//! `&mut` again.

use std::{
    collections::BTreeSet,
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use uverbs::{
    PostErrorKind, QpType, RecvWr, SendWr, SharedCompletionQueue, WcOpcode, WcStatus,
    WorkCompletion,
};

use crate::support::*;

const SENDERS: u64 = 4;
const PER_SENDER: u64 = 50;
const RECEIVERS: u64 = 2;
const TOTAL: u64 = SENDERS * PER_SENDER;

/// Room in a CQ for completions nobody took yet: a poster reserves one
/// before each post, a poller gives back what it took. The kernel frees a
/// queue slot when it writes the completion, not when it is polled, so
/// posters that only wait for queue slots outrun starved pollers and fill
/// the CQ: rxe then drops the completion and reports `CQ_ERR`
/// (`rxe_cq_post`), as hardware does, and the verbs contract leaves it to
/// the program to size the CQ for what it leaves unpolled.
struct Room(AtomicUsize);

impl Room {
    fn reserve(&self) {
        let end = Instant::now() + Duration::from_secs(300);
        while self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| r.checked_sub(1))
            .is_err()
        {
            assert!(
                Instant::now() < end,
                "no room in the CQ: its pollers stopped"
            );
            std::thread::yield_now();
        }
    }

    fn give_back(&self, n: usize) {
        self.0.fetch_add(n, Ordering::AcqRel);
    }
}

fn until_taken(mut post: impl FnMut() -> Result<(), uverbs::PostError>) {
    let end = Instant::now() + Duration::from_secs(300);
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

/// Two threads polling `cq` until `n` completions are taken between them.
fn poll_from_two_threads<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    ctx: &'s uverbs::Context,
    cq: &'s SharedCompletionQueue,
    taken: &'s AtomicUsize,
    room: &'s Room,
    n: usize,
) -> Vec<std::thread::ScopedJoinHandle<'s, Vec<WorkCompletion>>> {
    (0..2)
        .map(|_| {
            s.spawn(move || {
                let end = Instant::now() + Duration::from_secs(300);
                let mut mine = Vec::new();
                let mut wc = [WorkCompletion::default(); 8];
                while taken.load(Ordering::Acquire) < n {
                    assert!(
                        Instant::now() < end,
                        "completions stopped coming: {} of {n} taken; async event: {:?}; \
                         this thread's first unsuccessful one: {:?}",
                        taken.load(Ordering::Acquire),
                        ctx.try_get_async_event().map(|e| e.map(|e| e.event_type())),
                        mine.iter()
                            .find(|c: &&WorkCompletion| c.status != WcStatus::SUCCESS)
                    );
                    let k = cq.poll(&mut wc);
                    taken.fetch_add(k, Ordering::AcqRel);
                    room.give_back(k);
                    mine.extend_from_slice(&wc[..k]);
                    if k == 0 {
                        std::thread::yield_now();
                    }
                }
                mine
            })
        })
        .collect()
}

#[test]
fn threads_post_to_one_shared_qp_and_poll_shared_cqs() {
    let p = pair(QpType::Rc, 32, 7);
    let ma = mr(&p.pd, 1 << 14);
    let mb = mr(&p.pd, 1 << 14);
    // Each send carries its own slot of A's region, written before.
    for id in 0..TOTAL {
        ma.write(8 * id as usize, &(1000 + id).to_le_bytes())
            .unwrap();
    }
    let (a, b) = (p.a.into_shared(), p.b.into_shared());
    let (cq_a, cq_b) = (p.cq_a.into_shared(), p.cq_b.into_shared());
    let (taken_a, taken_b) = (AtomicUsize::new(0), AtomicUsize::new(0));
    // What each CQ holds, as its creation reported it (`cqe`).
    let room = |cq: &SharedCompletionQueue| Room(AtomicUsize::new(cq.cqe() as usize));
    let (room_a, room_b) = (room(&cq_a), room(&cq_b));
    let (sent, received): (Vec<WorkCompletion>, Vec<WorkCompletion>) = std::thread::scope(|s| {
        let pa = poll_from_two_threads(s, &p.ctx, &cq_a, &taken_a, &room_a, TOTAL as usize);
        let pb = poll_from_two_threads(s, &p.ctx, &cq_b, &taken_b, &room_b, TOTAL as usize);
        for t in 0..RECEIVERS {
            let (b, mb, room_b) = (&b, &mb, &room_b);
            s.spawn(move || {
                for i in 0..TOTAL / RECEIVERS {
                    let slot = t * (TOTAL / RECEIVERS) + i;
                    let sge = [mb.sge(64 * slot as usize, 64).unwrap()];
                    room_b.reserve();
                    until_taken(|| b.post_recv(&[RecvWr::new(5000 + slot, &sge)]));
                }
            });
        }
        for t in 0..SENDERS {
            let (a, ma, room_a) = (&a, &ma, &room_a);
            s.spawn(move || {
                for i in 0..PER_SENDER {
                    let id = t * PER_SENDER + i;
                    let sge = [ma.sge(8 * id as usize, 8).unwrap()];
                    room_a.reserve();
                    until_taken(|| a.post_send(&[SendWr::send(id, &sge)]));
                }
            });
        }
        let join = |v: Vec<std::thread::ScopedJoinHandle<'_, Vec<WorkCompletion>>>| {
            v.into_iter().flat_map(|h| h.join().unwrap()).collect()
        };
        (join(pa), join(pb))
    });
    assert!(
        p.ctx.try_get_async_event().unwrap().is_none(),
        "no CQ overflowed, no QP failed"
    );
    assert!(sent
        .iter()
        .all(|c| c.status == WcStatus::SUCCESS && c.opcode == WcOpcode::SEND));
    let ids: BTreeSet<u64> = sent.iter().map(|c| c.wr_id).collect();
    assert_eq!(sent.len() as u64, TOTAL, "{sent:?}");
    assert_eq!(ids, (0..TOTAL).collect(), "each send completed once");
    assert!(received
        .iter()
        .all(|c| c.status == WcStatus::SUCCESS && c.opcode == WcOpcode::RECV && c.byte_len == 8));
    let slots: BTreeSet<u64> = received.iter().map(|c| c.wr_id - 5000).collect();
    assert_eq!(received.len() as u64, TOTAL, "{received:?}");
    assert_eq!(slots, (0..TOTAL).collect(), "each receive completed once");
    let payloads: BTreeSet<u64> = slots
        .iter()
        .map(|&s| mb.read_u64(64 * s as usize).unwrap())
        .collect();
    assert_eq!(
        payloads,
        (1000..1000 + TOTAL).collect(),
        "each payload once"
    );

    // Back to `&mut`: the receive queue rejoined, both sides post.
    let (mut a, mut b) = (a.into_inner(), b.into_inner());
    let (mut cq_a, mut cq_b) = (cq_a.into_inner(), cq_b.into_inner());
    let sge = [mb.sge(0, 64).unwrap()];
    b.post_recv(&[RecvWr::new(77, &sge)]).unwrap();
    let src = [ma.sge(0, 8).unwrap()];
    a.post_send(&[SendWr::send(78, &src)]).unwrap();
    let got = wait(&mut cq_b, 1);
    assert_eq!((got[0].wr_id, got[0].status), (77, WcStatus::SUCCESS));
    let got = wait(&mut cq_a, 1);
    assert_eq!((got[0].wr_id, got[0].status), (78, WcStatus::SUCCESS));
    drop((a, b));
    cq_a.destroy().unwrap();
    cq_b.destroy().unwrap();
}
