//! The completions of a QP destroyed or reset are never returned
//! afterwards, on the mlx5 device model (issue 39 item 3): libmlx5 removes
//! them from its CQs (`__mlx5_cq_clean`, from `mlx5_destroy_qp` and
//! `mlx5_modify_qp` to RESET), and a polling session
//! (`CompletionQueue::start_poll`) takes completions off the ring in
//! batches, so those it took and has not handed out yet go too: in the
//! next session, in `poll()`, and in the session open meanwhile. The
//! completions of other QPs, and those of a reset QP's new work, all come,
//! once, in order.
//!
//! rxe, whose CQs keep a destroyed QP's completions (rdma-core's rxe
//! returns them), is `tests/cq_ex_fake.rs`.

use uverbs::testing::mlx5::{fake_mlx5, Mlx5Model};
use uverbs::{
    AccessFlags, CompletionQueue, CqOptions, MemoryRegion, QpAttr, QpState, QpType, QueuePair,
    SendFlags, SendOp, SendWr, WcExFlags, WcStatus, WorkCompletion,
};

use uverbs_test_support::mlx5_pair::*;

/// Writes per QP.
const N: u64 = 4;

struct Rig {
    model: std::sync::Arc<Mlx5Model>,
    cq: CompletionQueue,
    a: QueuePair,
    b: QueuePair,
    mr: MemoryRegion,
    pd: uverbs::ProtectionDomain,
    ctx: uverbs::Context,
}

/// QPs A and B, each connected to itself, completing on one CQ (with
/// completion timestamps when `stamped`).
fn rig(stamped: bool) -> Rig {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let wc_flags = if stamped {
        WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP
    } else {
        WcExFlags::STANDARD
    };
    let opts = CqOptions::new().wc_flags(wc_flags);
    let cq = ctx.create_cq(64, opts).unwrap();
    let a = create_qp(&pd, QpType::Rc, &cq, None, cap(16, 1, 0));
    let b = create_qp(&pd, QpType::Rc, &cq, None, cap(16, 1, 0));
    let g = gid(&ctx);
    connect(&a, a.qp_num(), g, 7);
    connect(&b, b.qp_num(), g, 7);
    let all = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let mr = pd.alloc_mr(4096, all).unwrap();
    Rig {
        model,
        cq,
        a,
        b,
        mr,
        pd,
        ctx,
    }
}

/// Posts `N` signalled RDMA writes on `qp`, work requests `base..base + N`,
/// and runs the device: their completions are in the CQ.
fn writes(model: &Mlx5Model, qp: &mut QueuePair, mr: &MemoryRegion, base: u64) {
    for i in 0..N {
        let sge = [mr.sge(8 * i as usize, 8).unwrap()];
        let op = SendOp::RdmaWrite {
            remote_addr: mr.addr() + 2048 + 8 * i,
            rkey: mr.rkey(),
        };
        let mut wr = SendWr::new(base + i, op, &sge);
        wr.flags = SendFlags::SIGNALED;
        qp.post_send(&[wr]).unwrap();
    }
    model.process();
}

/// A session's first completion, the session then ended.
fn take_one(cq: &mut CompletionQueue) -> u64 {
    let s = cq.start_poll().expect("a completion");
    assert_eq!(s.status(), WcStatus::SUCCESS);
    s.wr_id()
}

/// Every completion left, through sessions (checking the timestamps are
/// each completion's own when `stamped`).
fn sessions(cq: &mut CompletionQueue, stamped: bool) -> Vec<u64> {
    let mut ids = Vec::new();
    while let Some(mut s) = cq.start_poll() {
        loop {
            assert_eq!(s.status(), WcStatus::SUCCESS);
            ids.push(s.wr_id());
            if stamped {
                assert_ne!(s.completion_ts(), Some(0), "{:#x}: a timestamp", s.wr_id());
            }
            if !s.next() {
                break;
            }
        }
    }
    ids
}

fn wr_ids(base: u64, from: u64) -> Vec<u64> {
    (from..N).map(|i| base + i).collect()
}

/// A session took A's first completion off the ring with the rest of the
/// CQ's; A is destroyed; the next sessions return B's, none of A's.
#[test]
fn sessions_after_a_destroy_return_none_of_its_completions() {
    for stamped in [false, true] {
        let mut r = rig(stamped);
        writes(&r.model, &mut r.a, &r.mr, 0xa0);
        writes(&r.model, &mut r.b, &r.mr, 0xb0);
        assert_eq!(take_one(&mut r.cq), 0xa0);
        r.a.destroy().unwrap();
        assert_eq!(
            sessions(&mut r.cq, stamped),
            wr_ids(0xb0, 0),
            "stamped {stamped}"
        );
        r.b.destroy().unwrap();
        assert_clean(&r.model);
    }
}

/// `poll()` after the destroy: the same (it returns what a session left
/// first).
#[test]
fn poll_after_a_destroy_returns_none_of_its_completions() {
    let mut r = rig(false);
    writes(&r.model, &mut r.a, &r.mr, 0xa0);
    writes(&r.model, &mut r.b, &r.mr, 0xb0);
    assert_eq!(take_one(&mut r.cq), 0xa0);
    r.a.destroy().unwrap();
    let mut wc = [WorkCompletion::default(); 16];
    let n = r.cq.poll(&mut wc);
    let ids: Vec<u64> = wc[..n].iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, wr_ids(0xb0, 0));
    assert_eq!(r.cq.poll(&mut wc), 0);
}

/// A QP destroyed while a session is open: the session's next
/// completions are not its (libmlx5's destroy waits for the session's
/// end, then cleans; here the session drops them as it moves on).
#[test]
fn a_session_open_during_a_destroy_moves_past_its_completions() {
    let Rig {
        model,
        mut cq,
        mut a,
        mut b,
        mr,
        ..
    } = rig(true);
    writes(&model, &mut a, &mr, 0xa0);
    writes(&model, &mut b, &mr, 0xb0);
    let mut s = cq.start_poll().unwrap();
    assert_eq!(s.wr_id(), 0xa0);
    assert!(s.next());
    assert_eq!(s.wr_id(), 0xa1);
    // Destroyed by another thread while this one holds the session.
    std::thread::scope(|t| {
        t.spawn(move || a.destroy().unwrap());
    });
    let mut rest = Vec::new();
    while s.next() {
        rest.push(s.wr_id());
        assert_ne!(s.completion_ts(), Some(0));
    }
    drop(s);
    assert_eq!(rest, wr_ids(0xb0, 0));
    assert!(cq.start_poll().is_none());
}

/// A reset: A's completions from before are dropped, those of its work
/// after it is back in RTS all come, and B's.
#[test]
fn after_a_reset_its_old_completions_go_and_its_new_ones_come() {
    let mut r = rig(false);
    writes(&r.model, &mut r.a, &r.mr, 0xa0);
    writes(&r.model, &mut r.b, &r.mr, 0xb0);
    assert_eq!(take_one(&mut r.cq), 0xa0);
    let reset = QpAttr::new().qp_state(QpState::Reset);
    r.a.modify_to(&reset).unwrap();
    let g = gid(&r.ctx);
    connect(&r.a, r.a.qp_num(), g, 7);
    writes(&r.model, &mut r.a, &r.mr, 0xc0);
    let mut want = wr_ids(0xb0, 0);
    want.extend(wr_ids(0xc0, 0));
    assert_eq!(sessions(&mut r.cq, false), want);
    assert_clean(&r.model);
}

/// A QP destroyed with none of its completions in the CQ changes nothing
/// for the others'.
#[test]
fn destroying_a_quiet_qp_leaves_the_others_completions() {
    let mut r = rig(false);
    writes(&r.model, &mut r.a, &r.mr, 0xa0);
    writes(&r.model, &mut r.b, &r.mr, 0xb0);
    assert_eq!(take_one(&mut r.cq), 0xa0);
    let quiet = create_qp(&r.pd, QpType::Rc, &r.cq, None, cap(4, 1, 0));
    quiet.destroy().unwrap();
    let mut want = wr_ids(0xa0, 1);
    want.extend(wr_ids(0xb0, 0));
    assert_eq!(sessions(&mut r.cq, false), want);
}
