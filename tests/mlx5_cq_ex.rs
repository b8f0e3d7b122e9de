//! Extended CQ polling (`ibv_start_poll` / `ibv_next_poll` /
//! `ibv_end_poll` and the `ibv_wc_read_*` readers: `CompletionQueue::
//! start_poll`, `CqPoll`) on the mlx5 device model.
//!
//! The same traffic (every opcode, immediates, UD with its source QP and
//! GRH, receives of an SRQ, a remote access error and the flushes after
//! it) runs on fresh models, deterministic, and is taken once with
//! `poll()` and once through sessions, read accessor by accessor, with
//! sessions ended early at varying points and `poll()` taking what they
//! left: every completion must come out once, in order, with every field
//! as `poll()` reports it. Timestamps are present only on a CQ created
//! with them, never decrease, and advance at the clock the device reports.

use std::time::Duration;

use uverbs::testing::mlx5::fake_mlx5;
use uverbs::{
    AccessFlags, AhAttr, CompletionQueue, CqOptions, CqPoll, ErrorKind, GlobalRoute, QpType,
    RecvWr, SendOp, SendWr, SrqAttr, UdDest, WcExFlags, WcFlags, WcOpcode, WcStatus,
    WorkCompletion,
};

use uverbs_test_support::mlx5_pair::*;

/// How a test takes completions off a CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drain {
    /// `poll()` in batches of 16.
    Poll,
    /// Sessions only, each ended after a varying number of completions.
    Sessions,
    /// Sessions ended early, each followed by a `poll()` of a few, which
    /// takes what the session left first.
    Mixed,
}

/// How many completions successive sessions read before they end: short
/// and long, on and around the powers of two a session's batch could have.
const BUDGETS: [usize; 10] = [1, 5, 17, 3, 40, 16, 63, 64, 65, 100];

/// A completion and the timestamp its session read (`None` from `poll()`
/// or a CQ without timestamps).
type Taken = (WorkCompletion, Option<u64>);

/// The current completion of a session, read accessor by accessor (and
/// checked against the accessors that say the same thing twice).
fn read(s: &CqPoll<'_>) -> Taken {
    let flags = s.wc_flags();
    assert_eq!(s.imm_data().is_some(), flags.contains(WcFlags::WITH_IMM));
    assert_eq!(
        s.invalidated_rkey().is_some(),
        flags.contains(WcFlags::WITH_INVALIDATE)
    );
    let wc = {
        let mut v = WorkCompletion::default();
        v.wr_id = s.wr_id();
        v.status = s.status();
        v.opcode = s.opcode();
        v.vendor_err = s.vendor_err();
        v.byte_len = s.byte_len();
        v.imm_data = s.imm_data().or(s.invalidated_rkey()).unwrap_or(0);
        v.qp_num = s.qp_num();
        v.src_qp = s.src_qp();
        v.wc_flags = flags;
        v.pkey_index = s.pkey_index();
        v.slid = s.slid();
        v.sl = s.sl();
        v.dlid_path_bits = s.dlid_path_bits();
        v
    };
    assert_eq!(s.work_completion(), wc);
    (wc, s.completion_ts())
}

/// Takes every completion `cq` has now into `out`, the way `how` says;
/// `round` picks the session budgets and advances.
fn take_all(cq: &mut CompletionQueue, how: Drain, round: &mut usize, out: &mut Vec<Taken>) {
    let mut wc = [WorkCompletion::default(); 16];
    loop {
        let before = out.len();
        if how == Drain::Poll {
            let n = cq.poll(&mut wc);
            out.extend(wc[..n].iter().map(|w| (*w, None)));
        } else {
            let budget = BUDGETS[*round % BUDGETS.len()];
            *round += 1;
            if let Some(mut s) = cq.start_poll() {
                for i in 0..budget {
                    out.push(read(&s));
                    if i + 1 < budget && !s.next() {
                        break;
                    }
                }
                s.end();
            }
            if how == Drain::Mixed {
                let n = cq.poll(&mut wc[..3]);
                out.extend(wc[..n].iter().map(|w| (*w, None)));
            }
        }
        if out.len() == before {
            break;
        }
    }
}

/// What a scenario's CQs gave, and what the model saw.
#[derive(Debug)]
struct Outcome {
    /// The requesters' CQ, then the responders'.
    taken: [Vec<Taken>; 2],
    /// Their `IB_UVERBS_CQ_FLAGS_*` at create, as the model saw them.
    create_flags: [u32; 2],
}

/// The traffic every comparison runs, on a fresh model, with both CQs
/// created with `wc_flags` and drained as `how` says after each step.
///
/// Requesters (on CQ 0): `a` (RC to `b`), `c` (UD to `d`), `f` (RC to `e`,
/// which receives from an SRQ); responders (on CQ 1): `b`, `d`, `e`.
fn scenario(how: Drain, wc_flags: WcExFlags) -> Outcome {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let opts = CqOptions::new().wc_flags(wc_flags);
    let mut cqs = [
        ctx.create_cq(256, opts).unwrap(),
        ctx.create_cq(256, opts).unwrap(),
    ];
    let srq = pd.create_srq(SrqAttr::new(16, 1)).unwrap();
    let g = gid(&ctx);
    let (sq, rq) = (&cqs[0], &cqs[1]);
    let qp = |qp_type, send: &CompletionQueue, recv: &CompletionQueue, srq| {
        pd.create_qp(
            &uverbs::QpInitAttr::new(qp_type, send, recv)
                .srq(srq)
                .cap(cap(128, 2, 64)),
        )
        .unwrap()
    };
    let mut a = qp(QpType::Rc, sq, rq, None);
    let mut b = qp(QpType::Rc, rq, rq, None);
    let mut c = qp(QpType::Ud, sq, sq, None);
    let mut d = qp(QpType::Ud, rq, rq, None);
    let e = qp(QpType::Rc, rq, rq, Some(&srq));
    let mut f = qp(QpType::Rc, sq, sq, None);
    connect(&a, b.qp_num(), g, 7);
    connect(&b, a.qp_num(), g, 7);
    connect(&c, 0, g, 7);
    connect(&d, 0, g, 7);
    connect(&e, f.qp_num(), g, 7);
    connect(&f, e.qp_num(), g, 7);
    let create_flags = [0, 1].map(|i| {
        let cqn = model.cqn_of_handle(cqs[i].handle()).unwrap();
        model.cq(cqn).unwrap().create_flags
    });
    let all = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let mr = pd.alloc_mr(1 << 16, all).unwrap();
    mr.write(0, &[0x5a; 64]).unwrap();
    let mut taken = [Vec::new(), Vec::new()];
    let mut round = 0;
    let mut settle = |cqs: &mut [CompletionQueue; 2]| {
        model.process();
        for (cq, out) in cqs.iter_mut().zip(taken.iter_mut()) {
            take_all(cq, how, &mut round, out);
        }
    };

    // RC: every opcode, then enough sends for sessions to cross batches.
    let bufs: Vec<_> = (0..120)
        .map(|i| [mr.sge(8192 + 128 * i, 128).unwrap()])
        .collect();
    let recvs: Vec<_> = (0..120u64)
        .map(|i| RecvWr::new(1000 + i, &bufs[i as usize]))
        .collect();
    b.post_recv(&recvs).unwrap();
    let src = [mr.sge(0, 32).unwrap()];
    let back = [mr.sge(512, 32).unwrap()];
    let old = [mr.sge(600, 8).unwrap()];
    let mut wrs = vec![
        SendWr::new(1, SendOp::SendWithImm { imm: 0xdead_beef }, &src),
        SendWr::new(
            2,
            SendOp::RdmaWrite {
                remote_addr: mr.addr() + 1024,
                rkey: mr.rkey(),
            },
            &src,
        ),
        SendWr::new(
            3,
            SendOp::RdmaWriteWithImm {
                remote_addr: mr.addr() + 2048,
                rkey: mr.rkey(),
                imm: 0x0102_0304,
            },
            &src,
        ),
        SendWr::new(
            4,
            SendOp::RdmaRead {
                remote_addr: mr.addr() + 1024,
                rkey: mr.rkey(),
            },
            &back,
        ),
        SendWr::new(
            5,
            SendOp::CompareSwap {
                remote_addr: mr.addr() + 4096,
                rkey: mr.rkey(),
                compare: 0,
                swap: 9,
            },
            &old,
        ),
        SendWr::new(
            6,
            SendOp::FetchAdd {
                remote_addr: mr.addr() + 4104,
                rkey: mr.rkey(),
                add: 3,
            },
            &old,
        ),
        SendWr::send(7, &[]).inline(b"inline"),
    ];
    wrs.extend((100..200).map(|i| SendWr::send(i, &src)));
    a.post_send(&wrs).unwrap();
    settle(&mut cqs);

    // UD: the receiver sees the sender's QP and the GRH.
    let ah = pd
        .create_ah(&AhAttr::new(1).grh(GlobalRoute::new(g, 1).hop_limit(64)))
        .unwrap();
    let ud_bufs: Vec<_> = (0..3)
        .map(|i| [mr.sge(16384 + 256 * i, 104).unwrap()])
        .collect();
    for (i, sge) in ud_bufs.iter().enumerate() {
        d.post_recv(&[RecvWr::new(200 + i as u64, sge)]).unwrap();
    }
    let to_d = UdDest::new(&ah, d.qp_num(), QKEY);
    c.post_send(&[
        SendWr::send(40, &[]).inline(b"datagram").to(to_d),
        SendWr::new(41, SendOp::SendWithImm { imm: 77 }, &src).to(to_d),
        SendWr::send(42, &[]).inline(b"").to(to_d),
    ])
    .unwrap();
    settle(&mut cqs);

    // Receives of an SRQ, more than its session's buffer holds at once.
    let mut srq = srq;
    for round in 0..3u64 {
        let srq_bufs: Vec<_> = (0..8)
            .map(|i| [mr.sge(20480 + 128 * i, 128).unwrap()])
            .collect();
        let srq_recvs: Vec<_> = (0..8u64)
            .map(|i| RecvWr::new(300 + 8 * round + i, &srq_bufs[i as usize]))
            .collect();
        srq.post_recv(&srq_recvs).unwrap();
        let sends: Vec<_> = (0..8u64)
            .map(|i| {
                SendWr::new(
                    50 + 8 * round + i,
                    SendOp::SendWithImm { imm: i as u32 },
                    &src,
                )
            })
            .collect();
        f.post_send(&sends).unwrap();
        settle(&mut cqs);
    }

    // Errors: an RDMA write with a bad rkey fails remotely, and what `f`
    // posted after it flushes; a SEND longer than `b`'s receive fails
    // there (and `a`'s request), and `b`'s other receives flush.
    f.post_send(&[
        SendWr::new(
            90,
            SendOp::RdmaWrite {
                remote_addr: mr.addr(),
                rkey: mr.rkey() ^ 0x100,
            },
            &src,
        ),
        SendWr::send(91, &src),
        SendWr::send(92, &[]).inline(b"late"),
    ])
    .unwrap();
    settle(&mut cqs);
    let long = [mr.sge(0, 200).unwrap()];
    a.post_send(&[SendWr::send(95, &long), SendWr::send(96, &src)])
        .unwrap();
    settle(&mut cqs);
    assert_clean(&model);
    drop((a, b, c, d, e, f, srq));
    Outcome {
        taken,
        create_flags,
    }
}

fn completions(t: &[Taken]) -> Vec<WorkCompletion> {
    t.iter().map(|(w, _)| *w).collect()
}

#[test]
fn sessions_read_every_field_poll_reports_and_lose_nothing() {
    let polled = scenario(Drain::Poll, WcExFlags::STANDARD);
    // The scenario did what it says (so the comparison covers it).
    let [req, resp] = [0, 1].map(|i| completions(&polled.taken[i]));
    let ok = |w: &&WorkCompletion| w.status == WcStatus::SUCCESS;
    assert!(req.len() > 130 && resp.len() > 130, "{req:?} {resp:?}");
    for op in [
        WcOpcode::SEND,
        WcOpcode::RDMA_WRITE,
        WcOpcode::RDMA_READ,
        WcOpcode::COMP_SWAP,
        WcOpcode::FETCH_ADD,
    ] {
        assert!(req.iter().filter(ok).any(|w| w.opcode == op), "{op:?}");
    }
    assert!(resp.iter().any(|w| w.opcode == WcOpcode::RECV_RDMA_WITH_IMM
        && w.imm_data == 0x0102_0304
        && w.wc_flags.contains(WcFlags::WITH_IMM)));
    assert!(resp.iter().any(|w| w.wr_id == 201
        && w.imm_data == 77
        && w.src_qp != 0
        && w.wc_flags.contains(WcFlags::GRH | WcFlags::WITH_IMM)));
    assert_eq!(
        resp.iter()
            .filter(|w| (300..324).contains(&w.wr_id))
            .count(),
        24,
        "the SRQ's receives"
    );
    let status_of = |list: &[WorkCompletion], id| {
        list.iter()
            .find(|w| w.wr_id == id)
            .map(|w| (w.status, w.vendor_err != 0))
    };
    let (flush, access) = (WcStatus::WR_FLUSH_ERR, WcStatus::REM_ACCESS_ERR);
    assert_eq!(status_of(&req, 90), Some((access, true)));
    assert_eq!(status_of(&req, 92), Some((flush, true)));
    assert_eq!(status_of(&req, 95), Some((WcStatus::REM_INV_REQ_ERR, true)));
    assert_eq!(status_of(&req, 96), Some((flush, true)));
    assert_eq!(status_of(&resp, 1103), Some((WcStatus::LOC_LEN_ERR, true)));
    assert_eq!(
        resp.iter().filter(|w| w.status == flush).count(),
        16,
        "b's other receives"
    );
    assert_eq!(polled.create_flags, [0, 0]);

    for how in [Drain::Sessions, Drain::Mixed] {
        let s = scenario(how, WcExFlags::STANDARD);
        for i in 0..2 {
            assert_eq!(
                completions(&s.taken[i]),
                completions(&polled.taken[i]),
                "{how:?}, CQ {i}"
            );
            assert!(s.taken[i].iter().all(|(_, ts)| ts.is_none()), "{how:?}");
        }
        assert_eq!(s.create_flags, [0, 0], "no timestamps asked for");
    }
}

#[test]
fn timestamps_only_when_asked_and_never_decreasing() {
    let polled = scenario(Drain::Poll, WcExFlags::STANDARD);
    let flags = WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP;
    for how in [Drain::Sessions, Drain::Mixed, Drain::Poll] {
        let s = scenario(how, flags);
        // The kernel was asked for them (libibverbs `ibv_cmd_create_cq_ex`).
        let ts_flag = uverbs::abi::IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION;
        assert_eq!(s.create_flags, [ts_flag; 2], "{how:?}");
        for i in 0..2 {
            assert_eq!(
                completions(&s.taken[i]),
                completions(&polled.taken[i]),
                "{how:?}, CQ {i}"
            );
            if how == Drain::Poll {
                continue;
            }
            let mut last = 0;
            let mut from_sessions = 0;
            for (w, ts) in &s.taken[i] {
                let Some(ts) = ts else {
                    // Taken by the mixed drain's poll().
                    assert_eq!(how, Drain::Mixed);
                    continue;
                };
                from_sessions += 1;
                if w.status == WcStatus::SUCCESS {
                    assert!(*ts > last, "{how:?} CQ {i}: {ts} after {last} ({w:?})");
                    last = *ts;
                } else {
                    assert_eq!(*ts, 0, "an error CQE has no timestamp: {w:?}");
                }
            }
            assert!(from_sessions > 20, "{how:?} CQ {i}: {from_sessions}");
        }
    }
}

#[test]
fn timestamps_tick_at_the_core_clock_the_device_reports() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let attr = ctx.query_device().unwrap();
    assert_eq!(attr.completion_timestamp_mask, 0x7fff_ffff_ffff_ffff);
    assert_eq!(attr.hca_core_clock, 156_250, "kHz");
    let pd = ctx.alloc_pd().unwrap();
    let opts = CqOptions::new().wc_flags(WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP);
    let mut cq = ctx.create_cq(16, opts).unwrap();
    assert_eq!(cq.wc_flags(), opts.wc_flags);
    let mut qp = create_qp(&pd, QpType::Rc, &cq, None, cap(8, 1, 16));
    connect(&qp, qp.qp_num(), gid(&ctx), 7);
    let mut stamp = |id: u64| {
        qp.post_recv(&[RecvWr::new(id, &[])]).unwrap();
        qp.post_send(&[SendWr::send(id, &[]).inline(b"")]).unwrap();
        model.process();
        let mut s = cq.start_poll().expect("two completions");
        let first = (s.wr_id(), s.completion_ts().expect("a timestamp"));
        assert!(s.next());
        let second = (s.wr_id(), s.completion_ts().expect("a timestamp"));
        assert!(!s.next());
        assert_eq!((first.0, second.0), (id, id));
        assert!(second.1 > first.1);
        second.1
    };
    let t0 = stamp(1);
    std::thread::sleep(Duration::from_millis(5));
    let t1 = stamp(2);
    // At least 5 ms of 156.25 MHz ticks.
    assert!(t1 - t0 >= 5 * 156_250, "{t0} .. {t1}");
    assert_clean(&model);
}

#[test]
fn an_early_end_leaves_completions_for_the_next_session_and_poll() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(255, CqOptions::default()).unwrap();
    let mut qp = create_qp(&pd, QpType::Rc, &cq, None, cap(128, 1, 16));
    connect(&qp, qp.qp_num(), gid(&ctx), 7);
    assert!(cq.start_poll().is_none(), "an empty CQ has no session");
    // Zero-length messages: the receives have no buffer. The QP sends to
    // itself, so send and receive completions interleave: 200 in all.
    let sends: Vec<_> = (0..100).map(|i| SendWr::send(i, &[])).collect();
    let recvs: Vec<_> = (1000..1100).map(|i| RecvWr::new(i, &[])).collect();
    qp.post_recv(&recvs).unwrap();
    qp.post_send(&sends).unwrap();
    model.process();
    let mut order = Vec::new();
    let ids = |s: &CqPoll<'_>| {
        assert_eq!(s.status(), WcStatus::SUCCESS, "{s:?}");
        s.wr_id()
    };
    // A session of `n` completions, then its end.
    let session = |cq: &mut CompletionQueue, n: usize, order: &mut Vec<u64>| {
        let mut s = cq.start_poll().unwrap();
        order.push(ids(&s));
        for _ in 1..n {
            assert!(s.next());
            order.push(ids(&s));
        }
        s.end();
    };
    let mut wc = [WorkCompletion::default(); 5];
    let mut polled = |cq: &mut CompletionQueue, order: &mut Vec<u64>| {
        assert_eq!(cq.poll(&mut wc), 5);
        assert!(wc.iter().all(|w| w.status == WcStatus::SUCCESS), "{wc:?}");
        order.extend(wc.iter().map(|w| w.wr_id));
    };
    // Three; then a session goes on from the fourth, and poll() takes what
    // it left, first; and so on, long and short.
    session(&mut cq, 3, &mut order);
    session(&mut cq, 100, &mut order);
    polled(&mut cq, &mut order);
    session(&mut cq, 1, &mut order);
    session(&mut cq, 70, &mut order);
    polled(&mut cq, &mut order);
    // poll() takes the rest: what the last session left and what is still
    // in the ring, in one call.
    let mut rest = [WorkCompletion::default(); 256];
    let n = cq.poll(&mut rest);
    order.extend(rest[..n].iter().map(|w| w.wr_id));
    assert!(cq.start_poll().is_none());
    assert_eq!(cq.poll(&mut wc), 0);

    assert_eq!(order.len(), 200, "{order:?}");
    let sent: Vec<u64> = order.iter().copied().filter(|&i| i < 1000).collect();
    let received: Vec<u64> = order.iter().copied().filter(|&i| i >= 1000).collect();
    assert_eq!(sent, (0..100).collect::<Vec<_>>());
    assert_eq!(received, (1000..1100).collect::<Vec<_>>());

    // After next() said there is no more, the session still reads the last
    // completion, and goes on when more arrive.
    qp.post_recv(&recvs[..2]).unwrap();
    qp.post_send(&sends[..1]).unwrap();
    model.process();
    let mut s = cq.start_poll().unwrap();
    assert!(s.next(), "{s:?} {:?}", model.violations());
    let last = s.work_completion();
    assert!(!s.next());
    assert!(!s.next());
    assert_eq!(s.work_completion(), last);
    qp.post_send(&sends[1..2]).unwrap();
    model.process();
    assert!(
        s.next(),
        "a session sees completions that arrived during it"
    );
    assert!(s.next());
    assert!(!s.next());
    drop(s);
    assert!(cq.start_poll().is_none());
    assert_clean(&model);
}

#[test]
fn fields_mlx5_does_not_report_are_refused_by_name() {
    let model = fake_mlx5();
    let ctx = open(&model);
    for (flag, name) in [
        (WcExFlags::CVLAN, "CVLAN"),
        (WcExFlags::FLOW_TAG, "FLOW_TAG"),
        (WcExFlags::TM_INFO, "TM_INFO"),
    ] {
        let opts = CqOptions::new().wc_flags(WcExFlags::STANDARD | flag);
        let e = ctx.create_cq(16, opts).expect_err(name);
        assert_eq!(e.kind(), ErrorKind::UnsupportedProvider, "{name}: {e}");
        assert_eq!(e.errno(), uverbs::sys::Errno::EOPNOTSUPP, "{name}");
        assert!(e.to_string().contains(name), "{name}: {e}");
    }
    let opts = CqOptions::new().wc_flags(WcExFlags::from_bits_retain(1 << 12));
    let e = ctx.create_cq(16, opts).expect_err("an unknown bit");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("0x1000"), "{e}");
    // Fewer fields than the standard ones is fine (they are decoded anyway).
    let opts = CqOptions::new().wc_flags(WcExFlags::BYTE_LEN);
    let cq = ctx.create_cq(16, opts).unwrap();
    assert_eq!(cq.wc_flags(), WcExFlags::BYTE_LEN);
}

/// The flags keep libibverbs' values (`enum ibv_create_cq_wc_flags`).
#[test]
fn wc_ex_flags_are_libibverbs_values() {
    let values = [
        (WcExFlags::BYTE_LEN, 1 << 0),
        (WcExFlags::IMM, 1 << 1),
        (WcExFlags::QP_NUM, 1 << 2),
        (WcExFlags::SRC_QP, 1 << 3),
        (WcExFlags::SLID, 1 << 4),
        (WcExFlags::SL, 1 << 5),
        (WcExFlags::DLID_PATH_BITS, 1 << 6),
        (WcExFlags::COMPLETION_TIMESTAMP, 1 << 7),
        (WcExFlags::CVLAN, 1 << 8),
        (WcExFlags::FLOW_TAG, 1 << 9),
        (WcExFlags::TM_INFO, 1 << 10),
        (WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK, 1 << 11),
        (WcExFlags::STANDARD, 0x7f),
    ];
    for (flag, bits) in values {
        assert_eq!(flag.bits(), bits, "{flag:?}");
    }
    assert_eq!(WcExFlags::default(), WcExFlags::STANDARD);
    assert_eq!(CqOptions::default().wc_flags, WcExFlags::STANDARD);
}
