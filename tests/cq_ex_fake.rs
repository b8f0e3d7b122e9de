//! Extended CQ polling on rxe, against the fake rxe kernel
//! (`uverbs::testing::rxe`), which writes `struct ib_uverbs_wc` entries
//! into the CQ's ring as the kernel does: sessions read every field as
//! `poll()` converts it (the immediate in host order, an invalidated rkey,
//! UD fields, errors), with completions a session left read first by the
//! next one and by `poll()`, and completions that arrive during a session
//! read by it; completions of a QP destroyed or reset since a session
//! took them off the ring are still returned, as rdma-core's rxe returns
//! them (rxe removes nothing from its CQs; the mlx5 side, which does, is
//! `tests/mlx5_cq_clean.rs`); and completion timestamps, which rxe does
//! not have, are refused.

use uverbs::{
    abi::IbUverbsWc, testing::rxe::*, CompletionQueue, Context, CqOptions, CqPoll, ErrorKind,
    QpCap, QpInitAttr, WcExFlags, WcFlags, WcStatus, WorkCompletion,
};
use zerocopy::FromZeros;

fn open() -> (std::sync::Arc<FakeRxe>, Context) {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    (fake, ctx)
}

/// Completion `i` of a varied sequence, as the kernel writes it: sends,
/// receives with an immediate (`__be32` in the ring) or an invalidated
/// rkey (host order), UD receives with their address fields, and errors.
fn cqe(i: u32) -> IbUverbsWc {
    let mut c = IbUverbsWc::new_zeroed();
    c.wr_id = 1000 + u64::from(i);
    c.qp_num = 0x11 + i % 3;
    match i % 5 {
        0 => c.opcode = 0, // IB_WC_SEND
        1 => {
            c.opcode = 128; // IB_WC_RECV
            c.byte_len = 64 + i;
            c.wc_flags = WcFlags::WITH_IMM.bits();
            c.ex = (0xabc0_0000 | i).to_be();
        }
        2 => {
            c.opcode = 128;
            c.wc_flags = WcFlags::WITH_INVALIDATE.bits();
            c.ex = 0x5500 + i;
        }
        3 => {
            c.opcode = 128;
            c.byte_len = 40 + i;
            c.src_qp = 0x77 + i;
            c.wc_flags = WcFlags::GRH.bits();
            c.pkey_index = 3;
            c.slid = 0x1234;
            c.sl = 5;
            c.dlid_path_bits = 2;
        }
        _ => {
            c.status = WcStatus::WR_FLUSH_ERR.0;
            c.vendor_err = 0x244;
        }
    }
    c
}

/// The current completion of a session, accessor by accessor.
fn read(s: &CqPoll<'_>) -> WorkCompletion {
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
        v.wc_flags = s.wc_flags();
        v.pkey_index = s.pkey_index();
        v.slid = s.slid();
        v.sl = s.sl();
        v.dlid_path_bits = s.dlid_path_bits();
        v
    };
    assert_eq!(s.work_completion(), wc);
    assert_eq!(s.completion_ts(), None, "rxe has no timestamps");
    wc
}

fn post(fake: &FakeRxe, cq: &CompletionQueue, range: std::ops::Range<u32>) {
    let ring = fake.cq_ring(cq.handle()).unwrap();
    for i in range {
        assert!(ring.post_cqe(&cqe(i)), "the fake CQ ring is full");
    }
}

fn poll_all(cq: &mut CompletionQueue) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 16];
    loop {
        let n = cq.poll(&mut wc);
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&wc[..n]);
    }
}

#[test]
fn sessions_read_what_poll_converts() {
    let (fake, ctx) = open();
    let mut cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    post(&fake, &cq, 0..40);
    let polled = poll_all(&mut cq);
    assert_eq!(polled.len(), 40);
    // The conversions the comparison covers.
    assert_eq!(polled[1].imm_data, 0xabc0_0001, "immediate in host order");
    assert_eq!(polled[2].imm_data, 0x5502, "invalidated rkey as it is");
    assert_eq!(
        (polled[3].src_qp, polled[3].slid, polled[3].sl),
        (0x7a, 0x1234, 5)
    );
    assert_eq!(polled[4].status, WcStatus::WR_FLUSH_ERR);

    post(&fake, &cq, 0..40);
    let mut read_back = Vec::new();
    let mut s = cq.start_poll().expect("completions");
    loop {
        read_back.push(read(&s));
        if !s.next() {
            break;
        }
    }
    drop(s);
    assert_eq!(read_back, polled);
    assert!(cq.start_poll().is_none());
}

#[test]
fn completions_a_session_left_come_first_in_the_next_session_and_in_poll() {
    let (fake, ctx) = open();
    let mut cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    post(&fake, &cq, 0..40);
    let mut ids = Vec::new();
    for budget in [2, 15, 1] {
        let mut s = cq.start_poll().unwrap();
        ids.push(read(&s).wr_id);
        for _ in 1..budget {
            assert!(s.next());
            ids.push(read(&s).wr_id);
        }
    }
    // 18 read; the first session took all 40 off the ring, so it is free
    // for 40 more. A poll of 4 takes four that were left.
    let mut wc = [WorkCompletion::default(); 4];
    assert_eq!(cq.poll(&mut wc), 4);
    ids.extend(wc.iter().map(|w| w.wr_id));
    post(&fake, &cq, 40..80);
    // The rest of what was left, then the ring's, in one poll.
    ids.extend(poll_all(&mut cq).iter().map(|w| w.wr_id));
    assert_eq!(ids, (1000..1080).collect::<Vec<_>>());
    assert!(cq.start_poll().is_none());
    // Every slot was handed back.
    post(&fake, &cq, 0..63);
    assert_eq!(poll_all(&mut cq).len(), 63);
}

#[test]
fn a_session_goes_on_with_completions_that_arrive_during_it() {
    let (fake, ctx) = open();
    let mut cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let ring = fake.cq_ring(cq.handle()).unwrap();
    post(&fake, &cq, 0..63);
    let mut s = cq.start_poll().unwrap();
    let mut ids = vec![read(&s).wr_id];
    while s.next() {
        ids.push(read(&s).wr_id);
    }
    // No more: the session still reads its last completion.
    assert_eq!(read(&s).wr_id, 1062);
    for i in 63..120 {
        assert!(ring.post_cqe(&cqe(i)));
    }
    while s.next() {
        ids.push(read(&s).wr_id);
    }
    drop(s);
    assert_eq!(ids, (1000..1120).collect::<Vec<_>>());
    assert!(cq.start_poll().is_none());
}

#[test]
fn rxe_refuses_completion_timestamps_by_name() {
    let (_fake, ctx) = open();
    for flag in [
        WcExFlags::COMPLETION_TIMESTAMP,
        WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK,
    ] {
        let opts = CqOptions::new().wc_flags(WcExFlags::STANDARD | flag);
        let e = ctx.create_cq(8, opts).expect_err("rxe has no timestamps");
        assert_eq!(e.kind(), ErrorKind::UnsupportedProvider, "{e}");
        assert_eq!(e.errno(), uverbs::sys::Errno::EOPNOTSUPP);
        assert!(
            e.to_string().contains("rxe has no completion timestamps"),
            "{e}"
        );
    }
    for flag in [WcExFlags::CVLAN, WcExFlags::FLOW_TAG, WcExFlags::TM_INFO] {
        let opts = CqOptions::new().wc_flags(flag);
        let e = ctx
            .create_cq(8, opts)
            .expect_err("rxe has only the standard fields");
        assert_eq!(e.kind(), ErrorKind::UnsupportedProvider, "{e}");
    }
    // The standard fields, or fewer, are what rxe has.
    for flags in [WcExFlags::STANDARD, WcExFlags::QP_NUM, WcExFlags::empty()] {
        let opts = CqOptions::new().wc_flags(flags);
        ctx.create_cq(8, opts).unwrap();
    }
}

/// rdma-core's rxe removes no completion from a CQ when a QP is destroyed
/// (providers/rxe/rxe.c `rxe_destroy_qp`: the destroy command and
/// `munmap`, nothing of the CQ), and neither does the kernel: its
/// completions after the destroy are returned. So are those a session had
/// taken off the ring, here, as over rdma-core.
#[test]
fn on_rxe_a_destroyed_qps_completions_are_still_returned_as_rdma_core_does() {
    let (fake, ctx) = open();
    let mut cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::rc(&cq, &cq).cap(QpCap::new(4, 4, 1, 1)))
        .unwrap();
    let ring = fake.cq_ring(cq.handle()).unwrap();
    for i in 0..6u64 {
        let mut c = IbUverbsWc::new_zeroed();
        c.wr_id = i;
        c.qp_num = if i % 2 == 0 { qp.qp_num() } else { 0x99 };
        assert!(ring.post_cqe(&c));
    }
    let s = cq.start_poll().unwrap();
    assert_eq!(s.wr_id(), 0);
    drop(s);
    qp.destroy().unwrap();
    let mut ids = Vec::new();
    while let Some(mut s) = cq.start_poll() {
        loop {
            ids.push(s.wr_id());
            if !s.next() {
                break;
            }
        }
    }
    assert_eq!(ids, [1, 2, 3, 4, 5]);
}
