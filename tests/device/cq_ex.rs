//! Extended CQ polling (`CompletionQueue::start_poll`, `CqPoll`: libibverbs'
//! `ibv_start_poll` / `ibv_next_poll` / `ibv_end_poll` and `ibv_wc_read_*`)
//! on the real kernel's rxe.
//!
//! The same traffic runs twice on the same QPs: once taken with `poll()`,
//! once through sessions read accessor by accessor (ended early at varying
//! points, and mixed with `poll()` calls that take what a session left):
//! the completions must be the same, in the same order, field for field.
//! Errors are compared on two fresh pairs. rxe has no completion
//! timestamps: asking for them is refused, as rdma-core's rxe refuses them.

use std::time::{Duration, Instant};

use uverbs::{
    CompletionQueue, CqOptions, CqPoll, ErrorKind, MemoryRegion, QpType, RecvWr, SendOp, SendWr,
    UdDest, WcExFlags, WcFlags, WcOpcode, WcStatus, WorkCompletion,
};

use crate::support::*;

/// How many completions successive sessions read before they end.
const BUDGETS: [usize; 8] = [1, 5, 17, 3, 64, 65, 2, 100];

/// The current completion of a session, accessor by accessor.
fn read(s: &CqPoll<'_>) -> WorkCompletion {
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
        // poll() reports the `ex` union as the immediate or the rkey;
        // without either flag, as the kernel wrote it (0 on rxe).
        v.imm_data = s
            .imm_data()
            .or(s.invalidated_rkey())
            .unwrap_or(s.work_completion().imm_data);
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
    assert_eq!(s.completion_ts(), None, "rxe has no completion timestamps");
    wc
}

/// Takes `n` completions from `cq` through sessions of varying lengths
/// (with `mixed`, each followed by a `poll()` of up to 3, which takes what
/// the session left first); bounded (panics after ~20 s).
fn take_by_sessions(cq: &mut CompletionQueue, n: usize, mixed: bool) -> Vec<WorkCompletion> {
    let mut got = Vec::with_capacity(n);
    let mut wc = [WorkCompletion::default(); 3];
    let start = Instant::now();
    let mut round = 0;
    while got.len() < n {
        let budget = BUDGETS[round % BUDGETS.len()].min(n - got.len());
        round += 1;
        let before = got.len();
        if let Some(mut s) = cq.start_poll() {
            got.push(read(&s));
            for _ in 1..budget {
                if !s.next() {
                    break;
                }
                got.push(read(&s));
            }
        }
        if mixed && got.len() < n {
            let k = cq.poll(&mut wc[..(n - got.len()).min(3)]);
            got.extend_from_slice(&wc[..k]);
        }
        if got.len() == before {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "only {} of {n} completions after 20 s: {got:?}",
                got.len()
            );
            std::thread::yield_now();
        }
    }
    got
}

/// Nothing more arrives on `cq` (checked by both ways of polling).
fn assert_drained(cq: &mut CompletionQueue) {
    std::thread::sleep(Duration::from_millis(100));
    assert!(cq.start_poll().is_none(), "a completion too many");
    assert_eq!(cq.poll(&mut [WorkCompletion::default(); 4]), 0);
}

/// How a round's completions are taken.
#[derive(Debug, Clone, Copy)]
enum Take {
    Poll,
    Sessions,
    Mixed,
}

fn take(cq: &mut CompletionQueue, n: usize, how: Take) -> Vec<WorkCompletion> {
    match how {
        Take::Poll => wait(cq, n),
        Take::Sessions => take_by_sessions(cq, n, false),
        Take::Mixed => take_by_sessions(cq, n, true),
    }
}

/// One round of RC traffic from `a` to `b`: every opcode and a run of
/// sends; its completions on both CQs, taken `how`.
fn rc_round(
    p: &mut Pair,
    src: &MemoryRegion,
    dst: &MemoryRegion,
    how: Take,
) -> (Vec<WorkCompletion>, Vec<WorkCompletion>) {
    let recv_sges: Vec<_> = (0..80)
        .map(|i| [dst.sge(8192 + 128 * i, 128).unwrap()])
        .collect();
    let recvs: Vec<_> = (0..80u64)
        .map(|i| RecvWr::new(1000 + i, &recv_sges[i as usize]))
        .collect();
    p.b.post_recv(&recvs).unwrap();
    let s64 = [src.sge(0, 64).unwrap()];
    let back = [src.sge(1024, 64).unwrap()];
    let old = [src.sge(2048, 8).unwrap()];
    let mut wrs = vec![
        SendWr::new(1, SendOp::SendWithImm { imm: 0xdead_beef }, &s64),
        SendWr::new(
            2,
            SendOp::RdmaWrite {
                remote_addr: dst.addr() + 256,
                rkey: dst.rkey(),
            },
            &s64,
        ),
        SendWr::new(
            3,
            SendOp::RdmaWriteWithImm {
                remote_addr: dst.addr() + 512,
                rkey: dst.rkey(),
                imm: 0x0102_0304,
            },
            &s64,
        ),
        SendWr::new(
            4,
            SendOp::RdmaRead {
                remote_addr: dst.addr() + 256,
                rkey: dst.rkey(),
            },
            &back,
        ),
        SendWr::new(
            5,
            SendOp::CompareSwap {
                remote_addr: dst.addr() + 4096,
                rkey: dst.rkey(),
                compare: 0,
                swap: 9,
            },
            &old,
        ),
        SendWr::new(
            6,
            SendOp::FetchAdd {
                remote_addr: dst.addr() + 4104,
                rkey: dst.rkey(),
                add: 3,
            },
            &old,
        ),
        SendWr::send(7, &[]).inline(b"inline payload"),
    ];
    wrs.extend((100..177).map(|i| SendWr::send(i, &s64)));
    // 84 requests: every one signaled; 80 receives consumed (the SENDs
    // and the write with immediate).
    for chunk in wrs.chunks(16) {
        p.a.post_send(chunk).unwrap();
    }
    let sent = take(&mut p.cq_a, wrs.len(), how);
    let received = take(&mut p.cq_b, 80, how);
    assert_drained(&mut p.cq_a);
    assert_drained(&mut p.cq_b);
    (sent, received)
}

#[test]
fn sessions_read_every_field_poll_reports_on_rc() {
    let mut p = pair(QpType::Rc, 128, 7);
    let src = mr(&p.pd, 4096);
    let dst = mr(&p.pd, 1 << 16);
    src.write(0, &[0x5a; 64]).unwrap();
    let (sent, received) = rc_round(&mut p, &src, &dst, Take::Poll);
    // The round did what it says (so the comparison covers it).
    assert!(
        sent.iter().all(|w| w.status == WcStatus::SUCCESS),
        "{sent:?}"
    );
    assert!(
        received.iter().all(|w| w.status == WcStatus::SUCCESS),
        "{received:?}"
    );
    for op in [
        WcOpcode::SEND,
        WcOpcode::RDMA_WRITE,
        WcOpcode::RDMA_READ,
        WcOpcode::COMP_SWAP,
        WcOpcode::FETCH_ADD,
    ] {
        assert!(sent.iter().any(|w| w.opcode == op), "{op:?}: {sent:?}");
    }
    assert!(received
        .iter()
        .any(|w| w.opcode == WcOpcode::RECV_RDMA_WITH_IMM
            && w.imm_data == 0x0102_0304
            && w.wc_flags.contains(WcFlags::WITH_IMM)));
    assert!(received
        .iter()
        .any(|w| w.imm_data == 0xdead_beef && w.wc_flags.contains(WcFlags::WITH_IMM)));
    for how in [Take::Sessions, Take::Mixed] {
        let (s, r) = rc_round(&mut p, &src, &dst, how);
        assert_eq!(s, sent, "{how:?}: the requester's completions");
        assert_eq!(r, received, "{how:?}: the responder's completions");
    }
}

#[test]
fn sessions_read_every_field_poll_reports_on_ud() {
    let mut p = pair(QpType::Ud, 64, 7);
    let src = mr(&p.pd, 4096);
    let dst = mr(&p.pd, 1 << 16);
    src.write(0, b"datagram").unwrap();
    let ah = ah_to_own_gid(&p);
    let round = |p: &mut Pair, how| {
        let sges: Vec<_> = (0..40).map(|i| [dst.sge(256 * i, 104).unwrap()]).collect();
        let recvs: Vec<_> = (0..40u64)
            .map(|i| RecvWr::new(500 + i, &sges[i as usize]))
            .collect();
        p.b.post_recv(&recvs).unwrap();
        let to = UdDest::new(&ah, p.b.qp_num(), 0x1111_1111);
        let s8 = [src.sge(0, 8).unwrap()];
        let wrs: Vec<_> = (0..40u64)
            .map(|i| {
                let wr = if i % 2 == 0 {
                    SendWr::new(i, SendOp::SendWithImm { imm: i as u32 }, &s8)
                } else {
                    SendWr::send(i, &s8)
                };
                wr.to(to)
            })
            .collect();
        for chunk in wrs.chunks(16) {
            p.a.post_send(chunk).unwrap();
        }
        let sent = take(&mut p.cq_a, 40, how);
        let received = take(&mut p.cq_b, 40, how);
        assert_drained(&mut p.cq_a);
        assert_drained(&mut p.cq_b);
        (sent, received)
    };
    let (sent, received) = round(&mut p, Take::Poll);
    assert!(received.iter().all(|w| w.status == WcStatus::SUCCESS
        && w.src_qp == p.a.qp_num()
        && w.wc_flags.contains(WcFlags::GRH)
        && w.byte_len == 40 + 8));
    for how in [Take::Sessions, Take::Mixed] {
        let (s, r) = round(&mut p, how);
        assert_eq!(s, sent, "{how:?}: the sender's completions");
        assert_eq!(r, received, "{how:?}: the receiver's completions");
    }
}

#[test]
fn error_completions_read_as_poll_reports_them() {
    // On two fresh pairs: a write to a read-only region fails with a
    // remote access error; what is posted after it (the QP is in error
    // then) completes in error too.
    let run = |how| {
        let mut p = pair(QpType::Rc, 16, 7);
        let src = mr(&p.pd, 64);
        let ro =
            p.pd.alloc_mr(
                64,
                uverbs::AccessFlags::LOCAL_WRITE | uverbs::AccessFlags::REMOTE_READ,
            )
            .unwrap();
        let sge = [src.sge(0, 8).unwrap()];
        let write = SendWr::new(
            1,
            SendOp::RdmaWrite {
                remote_addr: ro.addr(),
                rkey: ro.rkey(),
            },
            &sge,
        );
        p.a.post_send(&[write]).unwrap();
        let mut got = take(&mut p.cq_a, 1, how);
        p.a.post_send(&[SendWr::send(2, &sge), SendWr::send(3, &[])])
            .unwrap();
        got.extend(take(&mut p.cq_a, 2, how));
        assert_drained(&mut p.cq_a);
        got.iter()
            .map(|w| (w.wr_id, w.status, w.qp_num == p.a.qp_num()))
            .collect::<Vec<_>>()
    };
    let polled = run(Take::Poll);
    assert_eq!(polled[0], (1, WcStatus::REM_ACCESS_ERR, true), "{polled:?}");
    assert!(
        polled[1..]
            .iter()
            .all(|&(_, s, own)| s != WcStatus::SUCCESS && own),
        "{polled:?}"
    );
    assert_eq!(run(Take::Sessions), polled);
}

#[test]
fn rxe_refuses_completion_timestamps() {
    let ctx = open();
    for flag in [
        WcExFlags::COMPLETION_TIMESTAMP,
        WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK,
    ] {
        let opts = CqOptions::new().wc_flags(WcExFlags::STANDARD | flag);
        let e = ctx.create_cq(16, opts).expect_err("rxe has no timestamps");
        assert_eq!(e.kind(), ErrorKind::UnsupportedProvider, "{e}");
        assert_eq!(e.errno(), uverbs::sys::Errno::EOPNOTSUPP, "{e}");
        assert!(
            e.to_string().contains("rxe has no completion timestamps"),
            "{e}"
        );
    }
    // The standard fields are what rxe has; the CQ they make polls.
    let mut cq = ctx
        .create_cq(16, CqOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cq.wc_flags(), WcExFlags::STANDARD);
    assert!(cq.start_poll().is_none());
}
