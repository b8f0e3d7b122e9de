//! A RESET racing a poller inside a run of the QP's completions (issue 27,
//! item 8): the poller computed a tail from a CQE of the QP's old epoch and
//! stores it after the reset (before or after the poster restarted the
//! queues). The real poster
//! ([`Mlx5Sq`], [`Mlx5Rq`] through [`Provider::restart_queues`]), the real
//! reset ([`reset_completions`], what `on_qp_state(Reset)` does), the
//! poller's own steps ([`SqTrack::take`] / [`SqTrack::free`], an RQ run's
//! `take` / `finish`) and a real poll ([`Mlx5Cq::poll`]) of CQEs written
//! into the CQ's memory as the device writes them. Single-threaded: the
//! interleaving is written out, a step at a time.

use std::sync::Arc;

use super::{
    buf::QueueBuf,
    cq::{CqCore, Mlx5Cq},
    cqe::{cqe_opcode, CQE_SIZE},
    qp::{QpTrack, Resources, Tail, TailReader},
    reset_completions,
    rq::{Mlx5Rq, RecvRun, RqTrack},
    sq::{Mlx5Sq, SqGeometry, SqTrack},
    uar::{Bfreg, UarPage},
    wqe::{opcode, Av},
    Mlx5, Mlx5Qp,
};
use crate::{
    providers::Provider,
    wc::{WcOpcode, WcStatus, WorkCompletion},
    wr::{Payload, PostErrorKind, RecvWr, SendFlags, SendOp, SendWr},
    QpType,
};

/// The QP number (CQE v0: CQEs name the QP by it).
const QPN: u32 = 0x1234;
/// Receive WQEs (16-byte stride: one data segment, no terminator).
const RQ_WQES: u32 = 4;
/// Send WQEBBs; 128-byte WQEs, so half as many posts.
const SQ_WQEBBS: u32 = 8;
const SQ_POSTS: u32 = SQ_WQEBBS / 2;

/// The address vectors of this RC QP: none (never called).
fn no_av<'w>(_: &SendWr<'w>) -> Result<&'w Av, PostErrorKind> {
    Err(PostErrorKind::BadDestination("no address handles here"))
}

/// A QP with a receive queue and a send queue completing on CQs of 16
/// CQEs (one, or a send CQ and a receive CQ), registered where their
/// pollers find it.
struct Rig {
    qp: Mlx5Qp,
    track: Arc<QpTrack>,
    /// The send CQ and the receive CQ (the same one, or not).
    cqs: [Arc<CqCore>; 2],
    send_cq: Mlx5Cq,
    /// The receive CQ's poller, if not the send CQ's.
    recv_cq: Option<Mlx5Cq>,
}

/// Which CQ of a [`Rig`].
#[derive(Debug, Clone, Copy)]
enum Side {
    Send,
    Recv,
}

impl Rig {
    /// One CQ for both queues.
    fn new() -> Rig {
        Rig::with_cqs(false)
    }

    fn with_cqs(separate: bool) -> Rig {
        let rq_bytes = RQ_WQES as usize * 16;
        let buf = Arc::new(QueueBuf::new(rq_bytes + SQ_WQEBBS as usize * 64, "test QP").unwrap());
        let page = Arc::new(UarPage::anonymous(4096));
        let bf = Arc::new(Bfreg::new(page.clone(), 0x800, 256, false, 7).unwrap());
        let sq_track = Arc::new(SqTrack::new(SQ_WQEBBS));
        let rq_track = Arc::new(RqTrack::new(RQ_WQES));
        let g = SqGeometry {
            offset: rq_bytes,
            wqe_cnt: SQ_WQEBBS,
            max_post: SQ_POSTS,
            max_gs: 2,
            max_inline: 76,
        };
        let sq = Mlx5Sq::new(buf.clone(), g, QPN, QpType::Rc, true, bf, sq_track.clone());
        let rq = Mlx5Rq::new(buf, RQ_WQES, 4, rq_track.clone());
        let track = Arc::new(QpTrack::new(QPN, QPN, sq_track, Some(rq_track), None));
        let resources = Arc::new(Resources::default());
        resources.insert(track.clone());
        let cq = || {
            let core = Arc::new(CqCore::new(16, CQE_SIZE).unwrap());
            let cq = Mlx5Cq::new(core.clone(), page.clone(), resources.clone(), false);
            (core, cq)
        };
        let (send, send_cq) = cq();
        let (recv, recv_cq) = if separate {
            let (core, cq) = cq();
            (core, Some(cq))
        } else {
            (send.clone(), None)
        };
        Rig {
            qp: Mlx5Qp {
                sq: sq.expect("the send queue fits"),
                rq: Some(rq.expect("the receive queue fits")),
            },
            track,
            cqs: [send, recv],
            send_cq,
            recv_cq,
        }
    }

    /// Posts sends of `wr_ids` until the first refused; the ids posted.
    fn post_sends(&mut self, wr_ids: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut posted = Vec::new();
        for id in wr_ids {
            let wr = SendWr {
                wr_id: id,
                op: SendOp::Send,
                payload: Payload::Inline(b"x"),
                flags: SendFlags::SIGNALED,
                ud: None,
            };
            match self.qp.sq.post(&[wr], no_av) {
                Ok(()) => posted.push(id),
                Err((_, PostErrorKind::QueueFull)) => break,
                Err((_, e)) => panic!("send {id}: {e:?}"),
            }
        }
        posted
    }

    /// Posts receives of `wr_ids` until the first refused; the ids posted.
    fn post_recvs(&mut self, wr_ids: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let rq = self.qp.rq.as_mut().unwrap();
        let mut posted = Vec::new();
        for id in wr_ids {
            match rq.post(&[RecvWr::new(id, &[])]) {
                Ok(()) => posted.push(id),
                Err(e) if matches!(e.kind, PostErrorKind::QueueFull) => break,
                Err(e) => panic!("receive {id}: {e}"),
            }
        }
        posted
    }

    /// What `on_qp_state(Reset)` does to the completion side, then the
    /// poster's restart once the reset is published to it.
    fn reset_and_restart(&mut self) {
        self.reset();
        self.restart();
    }

    /// What `on_qp_state(Reset)` does to the completion side.
    fn reset(&self) {
        reset_completions(&self.track, &self.cqs);
    }

    /// The poster's restart, once the reset is published to it.
    fn restart(&mut self) {
        Mlx5::restart_queues(&mut self.qp);
    }

    /// Writes the CQE at consumer index `ci` of the CQ of `side` (first
    /// pass over the ring: owner bit 0) as the device does, its `op_own`
    /// byte last.
    fn write_cqe(&self, side: Side, ci: u32, op: u8, wqe_opcode: u8, wqe_counter: u16) {
        let core = &self.cqs[side as usize];
        let mut b = [0u8; 64];
        b[44..48].copy_from_slice(&1u32.to_be_bytes()); // byte count
        let sop = u32::from(wqe_opcode) << 24 | QPN;
        b[56..60].copy_from_slice(&sop.to_be_bytes());
        b[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
        let at = ci as usize * CQE_SIZE;
        for (i, v) in b[..63].iter().enumerate() {
            assert!(core.buf.fill(at + i, 1, *v));
        }
        assert!(core.buf.fill(at + 63, 1, op << 4));
    }

    /// Polls the CQ of `side`.
    fn poll(&mut self, side: Side) -> Vec<WorkCompletion> {
        let cq = match (side, &mut self.recv_cq) {
            (Side::Recv, Some(cq)) => cq,
            _ => &mut self.send_cq,
        };
        let mut wc = [WorkCompletion::default(); 8];
        let n = cq.poll(&mut wc);
        wc[..n].to_vec()
    }
}

/// Polls the new epoch's first send completion (the CQ's entry `ci`,
/// naming WQEBB 0) and checks it is work request `wr_id`, and that it freed
/// one WQE and no more: one more send fits.
fn complete_first_send(r: &mut Rig, ci: u32, wr_id: u64) {
    r.write_cqe(Side::Send, ci, cqe_opcode::REQ, opcode::SEND, 0);
    let wc = r.poll(Side::Send);
    assert_eq!(
        wc.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        [(wr_id, WcStatus::SUCCESS, WcOpcode::SEND)]
    );
    assert_eq!(r.post_sends(20..), [20], "one WQE freed, one more fits");
}

/// A poller took the requester CQE of one WQE of a full send queue (the
/// tail after it computed, not yet stored) when the QP was reset; it
/// stores that tail before or after the poster restarted. The restarted
/// queue takes its whole depth, whichever WQE it was, and the new epoch's
/// first completion frees its first WQE.
///
/// With the work-request counter restarting at 0 (before the fix), a stale
/// tail stored after the restart was ahead of the restarted counter and
/// the queue looked full until the QP was recreated. With the counter
/// running on, the stale tail lies behind the one the restart moved the
/// tail up to: stored with a plain store, it would take the tail back and
/// the poster would stop short of the depth (for any WQE but the last);
/// the forward-only compare-exchange (`SqTrack::free`) leaves it out.
#[test]
fn a_stale_send_tail_stored_around_a_restart_leaves_the_restarted_queue_its_depth() {
    for completed in 0..SQ_POSTS as u16 {
        for after_restart in [false, true] {
            let what = format!("WQE {completed}'s tail, stored after the restart: {after_restart}");
            let mut r = Rig::new();
            assert_eq!(r.post_sends(1..), [1, 2, 3, 4]);
            // The poller's fast path: the WQE's work request and the tail
            // after it (a one-byte inline SEND: one WQEBB).
            let (wr_id, stale, _) = r.track.sq.take(completed);
            assert_eq!(wr_id, u64::from(completed) + 1);
            r.reset();
            if after_restart {
                r.restart();
                r.track.sq.free(stale);
            } else {
                r.track.sq.free(stale);
                r.restart();
            }
            assert_eq!(r.post_sends(10..), [10, 11, 12, 13], "{what}");
            complete_first_send(&mut r, 0, 10);
        }
    }
}

/// The WQEs a reset flushed complete nothing (their CQEs, if any, are
/// dropped): the restarted queue takes its depth all the same, reset after
/// reset with nothing polled in between (the restart moves the tail up to
/// the poster's counter), and the first completion after the last restart
/// frees the first WQE of that epoch.
#[test]
fn a_send_queue_reset_with_nothing_completed_takes_its_depth_each_time() {
    let mut r = Rig::new();
    for round in 0..5u64 {
        let ids = 100 * round..100 * round + u64::from(SQ_POSTS);
        assert_eq!(
            r.post_sends(ids.clone()),
            ids.collect::<Vec<_>>(),
            "{round}"
        );
        assert_eq!(r.post_sends(1000..), [], "the queue is full");
        r.reset_and_restart();
    }
    assert_eq!(r.post_sends(10..), [10, 11, 12, 13]);
    complete_first_send(&mut r, 0, 10);
}

/// The other way round: the poller took the CQE of the first WQE (tail 1)
/// and stores it after the restarted poster posted three. With the
/// counter restarting at 0 (before the fix), the stale tail behind the
/// poster's counter freed a WQE the device had not executed: the poster
/// took five requests into a queue of four. With the counter running on,
/// the stale tail is behind the restart's, and is not stored.
#[test]
fn a_stale_send_tail_stored_after_a_reset_frees_nothing_of_the_new_epoch() {
    let mut r = Rig::new();
    assert_eq!(r.post_sends(1..), [1, 2, 3, 4]);
    let (wr_id, stale, _) = r.track.sq.take(0);
    assert_eq!(wr_id, 1);
    r.reset_and_restart();
    assert_eq!(r.post_sends(10..13), [10, 11, 12]);
    r.track.sq.free(stale);
    assert_eq!(r.post_sends(20..), [20], "the queue holds four, no more");
    complete_first_send(&mut r, 0, 10);
}

/// The work-request counter wraps past `u32::MAX`: tails are compared in
/// wrapping order, so the queue's room is exact across the wrap, and a
/// stale tail computed just after it (0) is still behind the restart's.
#[test]
fn a_send_queue_counts_its_room_across_the_counters_wrap() {
    // Across the wrap, no reset: complete the first two, post two more.
    let mut r = Rig::new();
    r.qp.sq.skip_to(u32::MAX - 1);
    assert_eq!(r.post_sends(1..), [1, 2, 3, 4]);
    assert_eq!(r.track.sq.complete(0), (1, false));
    assert_eq!(r.post_sends(10..), [10], "one freed (tail u32::MAX)");
    assert_eq!(r.track.sq.complete(1), (2, false));
    assert_eq!(r.post_sends(20..), [20], "one more freed (tail 0)");
    for late in [false, true] {
        let mut r = Rig::new();
        r.qp.sq.skip_to(u32::MAX - 1);
        assert_eq!(r.post_sends(1..), [1, 2, 3, 4]);
        // The second WQE's tail: u32::MAX - 1 + 1 + 1, that is 0.
        let (wr_id, stale, _) = r.track.sq.take(1);
        assert_eq!((wr_id, stale), (2, 0));
        r.reset_and_restart();
        if late {
            assert_eq!(r.post_sends(10..), [10, 11, 12, 13]);
            r.track.sq.free(stale);
            assert_eq!(r.post_sends(30..), [], "full: nothing freed");
        } else {
            r.track.sq.free(stale);
            assert_eq!(r.post_sends(10..), [10, 11, 12, 13]);
        }
        complete_first_send(&mut r, 0, 10);
    }
}

/// A poller inside a run of receive completions had taken two receives
/// (the tail 2, not yet stored) when the QP was reset, with a third
/// receive's CQE still in the CQ; its run ends after the poster restarted.
/// The restarted receive queue takes its whole depth, the old CQE does not
/// surface, and the new epoch's first receive completion is the new
/// epoch's first work request (untagged, the stale tail made the queue
/// look full and the completion take the third WQE's `wr_id`).
#[test]
fn a_stale_receive_tail_stored_after_a_reset_leaves_the_new_epoch_in_order() {
    let mut r = Rig::new();
    assert_eq!(r.post_recvs(1..), [1, 2, 3, 4]);
    let rq = r.track.rq.clone().unwrap();
    let mut run = rq.run().unwrap();
    assert_eq!((run.take(0), run.take(1)), (1, 2));
    // The third receive completed before the reset: its CQE is in the CQ.
    r.write_cqe(Side::Recv, 0, cqe_opcode::RESP_SEND, 0, 2);
    r.reset_and_restart();
    run.finish();
    assert_eq!(
        r.post_recvs(100..),
        [100, 101, 102, 103],
        "the restarted queue takes its depth"
    );
    r.write_cqe(Side::Recv, 1, cqe_opcode::RESP_SEND, 0, 0);
    let wc = r.poll(Side::Recv);
    assert_eq!(
        wc.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        [(100, WcStatus::SUCCESS, WcOpcode::RECV)],
        "the old epoch's CQE dropped, the new epoch's first receive taken"
    );
    assert_eq!(
        r.post_recvs(200..),
        [200],
        "one receive freed, one more fits"
    );
}

/// The run's stale tail (2) stored after the restarted poster refilled the
/// receive queue: the new epoch's first completion is still its first work
/// request, and the queue does not take more than its depth (untagged, the
/// completion took the third WQE's `wr_id` and the poster two more
/// receives into WQEs the device had not filled).
#[test]
fn a_stale_receive_tail_stored_after_the_queue_was_refilled_completes_in_order() {
    let mut r = Rig::new();
    assert_eq!(r.post_recvs(1..), [1, 2, 3, 4]);
    let rq = r.track.rq.clone().unwrap();
    let mut run = rq.run().unwrap();
    assert_eq!((run.take(0), run.take(1)), (1, 2));
    r.reset_and_restart();
    assert_eq!(r.post_recvs(100..), [100, 101, 102, 103]);
    run.finish();
    r.write_cqe(Side::Recv, 0, cqe_opcode::RESP_SEND, 0, 0);
    let wc = r.poll(Side::Recv);
    assert_eq!(
        wc.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        [100],
        "the new epoch's first receive"
    );
    assert_eq!(
        r.post_recvs(200..),
        [200],
        "one receive freed, one more fits"
    );
}

/// With a send CQ and a receive CQ, each restarts the tail of the queue
/// that completes on it, and only that one: the send CQ's poller, taking
/// its request after the receive CQ's poller freed receives of the new
/// epoch, leaves the receive queue's tail alone (restarting it too, it
/// would be a second writer of that tail, and here would take back two
/// freed receives: the queue would look full). Both queues' stale tails
/// are stored after the restart, as in the tests above.
#[test]
fn with_two_cqs_each_restarts_only_the_queue_that_completes_on_it() {
    let mut r = Rig::with_cqs(true);
    assert_eq!(r.post_sends(1..), [1, 2, 3, 4]);
    assert_eq!(r.post_recvs(1..), [1, 2, 3, 4]);
    let (_, stale_send, _) = r.track.sq.take(SQ_POSTS as u16 - 1);
    let rq = r.track.rq.clone().unwrap();
    let mut run = rq.run().unwrap();
    run.take(0);
    r.reset_and_restart();
    r.track.sq.free(stale_send);
    run.finish();
    assert_eq!(r.post_recvs(100..), [100, 101, 102, 103]);
    assert_eq!(r.post_sends(10..), [10, 11, 12, 13]);
    r.write_cqe(Side::Recv, 0, cqe_opcode::RESP_SEND, 0, 0);
    r.write_cqe(Side::Recv, 1, cqe_opcode::RESP_SEND, 0, 1);
    let wc = r.poll(Side::Recv);
    assert_eq!(wc.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [100, 101]);
    r.write_cqe(Side::Send, 0, cqe_opcode::REQ, opcode::SEND, 0);
    let wc = r.poll(Side::Send);
    assert_eq!(wc.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [10]);
    assert_eq!(r.post_recvs(200..), [200, 201], "two receives freed");
    assert_eq!(r.post_sends(20..), [20], "one send freed");
}

/// The tail's epochs: a restart never goes back to an older epoch (the
/// requests of resets made at once on two threads may come in either
/// order); the poster counts nothing freed from a tail of another epoch,
/// and once it has seen the tail in its own it reads the count alone.
#[test]
fn a_tail_restarts_only_forward_and_is_read_in_the_posters_epoch() {
    let tail = Tail::default();
    let mut reader = TailReader::new(&tail);
    tail.advance(3);
    assert_eq!(reader.freed(&tail), 3, "a new queue's tail is read as is");
    let (e1, e2) = (tail.begin_reset(), tail.begin_reset());
    assert_eq!((e1, e2), (1, 2));
    reader.restart(&tail);
    assert_eq!(reader.freed(&tail), 0, "epoch 0's tail frees nothing of 2");
    tail.restart(e2);
    tail.restart(e1);
    tail.advance(5);
    assert_eq!(tail.load(), 2 << 32 | 5, "still in epoch 2");
    assert_eq!(reader.freed(&tail), 5);
    tail.advance(u32::MAX);
    tail.advance(u32::MAX.wrapping_add(2));
    assert_eq!(
        tail.load(),
        2 << 32 | 1,
        "the count wraps, not into the tag"
    );
    assert_eq!(reader.freed(&tail), 1);
}

/// Through the public API on the device model, a QP with a send CQ and a
/// receive CQ of their own (the tests in `tests/mlx5_model.rs` reset QPs
/// on one CQ): reset with completions of both queues left in both CQs,
/// each CQ drops them and restarts its queue, and the restarted queues
/// take their depth and complete in order.
#[test]
fn a_reset_qp_on_two_cqs_restarts_both_queues_through_the_public_api() {
    use crate::{
        AccessFlags, Context, CqOptions, Gid, GlobalRoute, Mtu, QpAttr, QpCap, QpInitAttr, QpState,
        QueuePair,
    };

    fn connect_to_itself(qp: &QueuePair) {
        let mut a = QpAttr::with_state(QpState::Init);
        a.port_num = 1;
        a.qp_access_flags = AccessFlags::LOCAL_WRITE;
        qp.modify_to(&a).unwrap();
        a.qp_state = QpState::Rtr;
        a.path_mtu = Mtu(3);
        a.dest_qp_num = qp.qp_num();
        a.ah_attr.port_num = 1;
        a.ah_attr.grh = Some(GlobalRoute {
            dgid: Gid([0; 16]),
            sgid_index: 1,
            ..Default::default()
        });
        qp.modify_to(&a).unwrap();
        a.qp_state = QpState::Rts;
        a.rnr_retry = 7;
        qp.modify_to(&a).unwrap();
    }

    let model = crate::testing::mlx5::fake_mlx5();
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut send_cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let mut recv_cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let mut qp = pd
        .create_qp(&QpInitAttr {
            context: 0,
            qp_type: QpType::Rc,
            send_cq: &send_cq,
            recv_cq: &recv_cq,
            srq: None,
            cap: QpCap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 16,
            },
            sq_sig_all: true,
        })
        .unwrap();
    connect_to_itself(&qp);
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    let sge = [mr.sge(0, 64).unwrap()];
    let poll = |cq: &mut crate::CompletionQueue| {
        let mut wc = [WorkCompletion::default(); 8];
        let n = cq.poll(&mut wc);
        wc[..n]
            .iter()
            .map(|w| {
                assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
                w.wr_id
            })
            .collect::<Vec<_>>()
    };
    let recvs = |ids: std::ops::Range<u64>| ids.map(|id| RecvWr::new(id, &sge)).collect::<Vec<_>>();
    let sends = |ids: std::ops::Range<u64>| {
        ids.map(|id| SendWr::send(id, &[]).inline(b"epoch"))
            .collect::<Vec<_>>()
    };
    // Two completed and polled on each queue, two more completed, left in
    // the CQs when the QP is reset.
    qp.post_recv(&recvs(1..5)).unwrap();
    qp.post_send(&sends(1..3)).unwrap();
    model.process();
    assert_eq!(poll(&mut send_cq), [1, 2]);
    assert_eq!(poll(&mut recv_cq), [1, 2]);
    qp.post_send(&sends(3..5)).unwrap();
    model.process();
    qp.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    assert_eq!(poll(&mut send_cq), Vec::<u64>::new(), "dropped");
    assert_eq!(poll(&mut recv_cq), Vec::<u64>::new(), "dropped");
    // The restarted queues take their depth, twice over.
    connect_to_itself(&qp);
    for round in 0..2u64 {
        let base = 100 * (round + 1);
        qp.post_recv(&recvs(base..base + 4)).unwrap();
        qp.post_send(&sends(base..base + 4)).unwrap();
        model.process();
        assert_eq!(poll(&mut send_cq), (base..base + 4).collect::<Vec<_>>());
        assert_eq!(poll(&mut recv_cq), (base..base + 4).collect::<Vec<_>>());
    }
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}
