//! Error completions, flushes, RNR, overrun, arming and the protocol
//! checks, with hand-built WQEs.

use std::time::Duration;

use super::{assert_clean, connect, dseg, inl, op, pair, raddr, set_dbrec, Rig, CE, SE};
use crate::{testing::mlx5::Options, AsyncEventType, QpAttr, QpState, QpType};

const REQ: u8 = 0;
const REQ_ERR: u8 = 13;
const RESP_ERR: u8 = 14;
const LOCAL_LENGTH: u8 = 0x01;
const LOCAL_QP_OP: u8 = 0x02;
const LOCAL_PROT: u8 = 0x04;
const FLUSH: u8 = 0x05;
const REMOTE_INVAL_REQ: u8 = 0x12;
const REMOTE_ACCESS: u8 = 0x13;
const RNR_RETRY_EXC: u8 = 0x16;
const IB_QPS_ERR: u8 = 6;

#[test]
fn a_bad_lkey_fails_locally_and_flushes_both_queues() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let (lkey, base) = (p.mr.lkey(), p.mr.addr());
    p.a.recv(&[(base, 64, lkey)]);
    p.a.recv(&[(base, 64, lkey)]);
    let bad =
        p.a.post(op::SEND, CE, [0; 4], &dseg(8, lkey ^ 0x5500, base));
    let next = p.a.post(op::SEND, 0, [0; 4], &inl(b"flushed"));
    p.a.ring(&p.rig, next);
    p.rig.model.process();
    let c = p.ca.drain();
    let got: Vec<_> = c
        .iter()
        .map(|c| (c.opcode, c.syndrome, c.wqe_counter))
        .collect();
    assert_eq!(
        got,
        [
            (REQ_ERR, LOCAL_PROT, bad),
            (RESP_ERR, FLUSH, 0),
            (RESP_ERR, FLUSH, 1),
            (REQ_ERR, FLUSH, next),
        ],
        "an unsignaled WQE is flushed with a CQE too"
    );
    assert!(c.iter().all(|c| c.vendor != 0 && c.qpn == p.a.qpn));
    assert_eq!(p.rig.model.qp_state(p.a.qpn), Some(IB_QPS_ERR));
    assert!(p.cb.poll().is_none());
    assert_clean(&p.rig.model);
}

#[test]
fn a_bad_rkey_is_a_remote_access_error_on_rc_and_dropped_on_uc() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let (lkey, rkey, base) = (p.mr.lkey(), p.mr.rkey(), p.mr.addr());
    let mut segs = raddr(base + 4096, rkey ^ 0x7700);
    segs.extend(dseg(8, lkey, base));
    let idx = p.a.post(op::RDMA_WRITE, CE, [0; 4], &segs);
    p.a.ring(&p.rig, idx);
    p.rig.model.process();
    let c = p.ca.poll().unwrap();
    assert_eq!(
        (c.opcode, c.syndrome, c.wqe_counter),
        (REQ_ERR, REMOTE_ACCESS, idx)
    );
    // Out of the MR's range is the same error.
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let mut segs = raddr(p.mr.addr() + (1 << 16) - 4, p.mr.rkey());
    segs.extend(dseg(8, p.mr.lkey(), p.mr.addr()));
    let idx = p.a.post(op::RDMA_WRITE, CE, [0; 4], &segs);
    p.a.ring(&p.rig, idx);
    p.rig.model.process();
    assert_eq!(p.ca.poll().unwrap().syndrome, REMOTE_ACCESS);
    // UC: nobody tells the requester.
    let mut p = pair(Options::default(), QpType::Uc, 8, 7);
    p.mr.write(0, b"payload!").unwrap();
    let mut segs = raddr(p.mr.addr() + 4096, p.mr.rkey() ^ 0x7700);
    segs.extend(dseg(8, p.mr.lkey(), p.mr.addr()));
    let idx = p.a.post(op::RDMA_WRITE, CE, [0; 4], &segs);
    p.a.ring(&p.rig, idx);
    p.rig.model.process();
    assert_eq!(p.ca.poll().unwrap().opcode, REQ);
    assert_eq!(p.mr.read_u64(4096).unwrap(), 0, "nothing written");
    assert_clean(&p.rig.model);
}

#[test]
fn rnr_waits_with_infinite_retries_and_fails_without() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let idx = p.a.post(op::SEND, CE, [0; 4], &inl(b"wait"));
    p.a.ring(&p.rig, idx);
    assert_eq!(p.rig.model.process(), 0);
    assert!(p.rig.model.qp(p.a.qpn).unwrap().rnr_waiting);
    assert!(p.ca.poll().is_none());
    p.b.recv(&[(p.mr.addr(), 64, p.mr.lkey())]);
    assert_eq!(p.rig.model.process(), 1, "retried once a receive is there");
    assert_eq!(p.ca.poll().unwrap().opcode, REQ);
    assert_clean(&p.rig.model);

    let mut p = pair(Options::default(), QpType::Rc, 8, 0);
    let idx = p.a.post(op::SEND, CE, [0; 4], &inl(b"fail"));
    p.a.ring(&p.rig, idx);
    p.rig.model.process();
    let c = p.ca.poll().unwrap();
    assert_eq!((c.opcode, c.syndrome), (REQ_ERR, RNR_RETRY_EXC));
    assert_clean(&p.rig.model);
}

#[test]
fn a_receive_too_small_fails_at_both_ends() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let r = p.b.recv(&[(p.mr.addr(), 4, p.mr.lkey())]);
    let idx = p.a.post(op::SEND, CE, [0; 4], &inl(b"sixteen bytes!!!"));
    p.a.ring(&p.rig, idx);
    p.rig.model.process();
    let rc = p.cb.poll().unwrap();
    assert_eq!(
        (rc.opcode, rc.syndrome, u32::from(rc.wqe_counter)),
        (RESP_ERR, LOCAL_LENGTH, r)
    );
    let sc = p.ca.poll().unwrap();
    assert_eq!((sc.opcode, sc.syndrome), (REQ_ERR, REMOTE_INVAL_REQ));
    assert_eq!(p.rig.model.qp_state(p.b.qpn), Some(IB_QPS_ERR));
    assert_clean(&p.rig.model);
}

#[test]
fn a_full_cq_is_not_overwritten_and_raises_cq_err_once() {
    let rig = &Rig::new(Options::default());
    let mut small = rig.cq(3);
    assert_eq!(small.ncqe, 4);
    let mut q = rig.qp(QpType::Rc, &small, None, 8);
    connect(&q.qp, q.qpn, 7);
    let mut last = 0;
    for _ in 0..6 {
        last = q.post(op::NOP, CE, [0; 4], &[]);
    }
    q.ring(rig, last);
    rig.model.process();
    let ev = rig
        .ctx
        .get_async_event_timeout(Some(Duration::from_secs(1)))
        .unwrap()
        .expect("CQ_ERR");
    assert_eq!(ev.event_type(), AsyncEventType::CQ_ERR);
    assert!(ev.is_for_cq(&small.cq));
    ev.ack();
    let info = rig.model.cq(small.cqn).unwrap();
    assert!(info.in_error && info.async_events == 1 && info.produced == 4);
    let c = small.drain();
    assert_eq!(
        c.iter().map(|c| c.wqe_counter).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    // Nothing more is written, and no second event.
    let idx = q.post(op::NOP, CE, [0; 4], &[]);
    q.ring(rig, idx);
    rig.model.process();
    assert!(small.poll().is_none() && rig.events().is_empty());
    assert_clean(&rig.model);
}

#[test]
fn an_armed_cq_raises_one_event_and_solicited_arms_wait_for_se() {
    let rig = Rig::new(Options::default());
    let ch = rig.ctx.create_comp_channel().unwrap();
    let ca = rig.cq(16);
    let mut cb = rig.cq_on(16, Some(&ch));
    let cb_handle = cb.cq.handle();
    let mut a = rig.qp(QpType::Rc, &ca, None, 8);
    let mut b = rig.qp(QpType::Rc, &cb, None, 8);
    connect(&a.qp, b.qpn, 7);
    connect(&b.qp, a.qpn, 7);
    let mr = rig.mr(4096, super::ALL);
    let (lkey, base) = (mr.lkey(), mr.addr());
    // The events queued so far, acknowledged.
    let events = || {
        let mut n = 0;
        while let Some(e) = ch.get_event_timeout(Some(Duration::ZERO)).unwrap() {
            assert_eq!(e.cq_handle(), cb_handle);
            e.ack();
            n += 1;
        }
        n
    };
    cb.arm(&rig, 0, false);
    rig.model.process();
    assert_eq!(events(), 0, "no CQE yet");
    for _ in 0..3 {
        b.recv(&[(base, 64, lkey)]);
    }
    let idx = a.post(op::SEND, 0, [0; 4], &inl(b"one"));
    a.ring(&rig, idx);
    rig.model.process();
    assert_eq!(events(), 1, "one completion event");
    assert_eq!(cb.drain().len(), 1);
    // Solicited only: an unsolicited receive does not fire, a solicited one
    // does.
    cb.arm(&rig, 1, true);
    let idx = a.post(op::SEND, 0, [0; 4], &inl(b"two"));
    a.ring(&rig, idx);
    rig.model.process();
    assert_eq!(events(), 0);
    let idx = a.post(op::SEND, SE, [0; 4], &inl(b"three"));
    a.ring(&rig, idx);
    rig.model.process();
    assert_eq!(events(), 1);
    let arms = rig.model.arms(cb.cqn);
    assert_eq!(arms.len(), 2);
    assert_eq!((arms[1].sn, arms[1].solicited, arms[1].ci), (1, true, 1));
    // Arming behind the CQEs already written fires at once.
    cb.arm(&rig, 2, false);
    rig.model.process();
    assert_eq!(events(), 1);
    assert_eq!(rig.model.cq(cb.cqn).unwrap().comp_events, 3);
    // A CQ without a channel gets no events (the kernel drops them).
    ca.arm(&rig, 0, false);
    let idx = a.post(op::NOP, CE, [0; 4], &[]);
    a.ring(&rig, idx);
    rig.model.process();
    assert_eq!(rig.model.cq(ca.cqn).unwrap().comp_events, 0);
    assert!(rig.events().is_empty());
    assert_clean(&rig.model);
}

#[test]
fn arms_elsewhere_are_ignored_and_arms_without_their_record_are_flagged() {
    let p = pair(Options::default(), QpType::Rc, 8, 7);
    let mut b = [0u8; 8];
    b[4..].copy_from_slice(&p.cb.cqn.to_be_bytes());
    p.rig.uar_store(p.a.uar, 0x20, b);
    p.rig.model.process();
    assert_eq!(p.rig.model.ignored_doorbells().len(), 1);
    assert!(p.rig.model.arms(p.cb.cqn).is_empty());
    p.cb.arm(&p.rig, 0, false);
    set_dbrec(p.cb.db, 1, 0x1234);
    p.rig.model.process();
    let v = p.rig.model.violations();
    assert!(v.iter().any(|m| m.contains("doorbell record")), "{v:?}");
}

#[test]
fn doorbells_on_another_uar_are_ignored_and_blueflame_copies_are_compared() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    assert_ne!(
        p.a.uar, p.ca.uar,
        "QPs ring a BF page, CQs arm on the NC page"
    );
    p.b.recv(&[(p.mr.addr(), 64, p.mr.lkey())]);
    let idx = p.a.post(op::SEND, CE, [0; 4], &inl(b"elsewhere"));
    let first: [u8; 8] = p.a.wqe_bytes(idx)[..8].try_into().unwrap();
    p.rig.uar_store(p.ca.uar, 0x800, first);
    assert_eq!(p.rig.model.process(), 0);
    let ig = p.rig.model.ignored_doorbells();
    assert!(ig.len() == 1 && ig[0].contains("created on UAR"), "{ig:?}");
    let v = p.rig.model.violations();
    assert!(v.len() == 1 && v[0].contains("no doorbell named"), "{v:?}");
    // The same WQE by BlueFlame on the right UAR: executed, no complaint.
    p.a.ring_bf(&p.rig, idx, false);
    assert_eq!(p.rig.model.process(), 1);
    assert_eq!(p.rig.model.violations().len(), 1);
    // A copy that differs from the queue is flagged.
    p.b.recv(&[(p.mr.addr(), 64, p.mr.lkey())]);
    let idx = p.a.post(op::SEND, CE, [0; 4], &inl(b"corrupted"));
    p.a.ring_bf(&p.rig, idx, true);
    p.rig.model.process();
    let v = p.rig.model.violations();
    assert!(v.len() == 2 && v[1].contains("BlueFlame"), "{v:?}");
}

#[test]
fn a_doorbell_before_its_record_is_flagged_and_waits() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let idx = p.a.post(op::NOP, CE, [0; 4], &[]);
    set_dbrec(p.a.db, 1, 0); // the record not updated
    p.a.ring(&p.rig, idx);
    assert_eq!(p.rig.model.process(), 0);
    let v = p.rig.model.violations();
    assert!(v.len() == 1 && v[0].contains("record not updated"), "{v:?}");
    set_dbrec(p.a.db, 1, 1);
    p.a.ring(&p.rig, idx);
    assert_eq!(p.rig.model.process(), 1);
    assert_eq!(p.ca.poll().unwrap().wqe_counter, idx);
}

#[test]
fn moving_to_err_flushes_what_is_posted_at_once() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    let (lkey, base) = (p.mr.lkey(), p.mr.addr());
    p.a.recv(&[(base, 64, lkey)]);
    p.a.recv(&[(base, 64, lkey)]);
    let idx = p.a.post(op::NOP, 0, [0; 4], &[]);
    p.a.qp.modify_to(&QpAttr::with_state(QpState::Err)).unwrap();
    let c = p.ca.drain();
    let got: Vec<_> = c
        .iter()
        .map(|c| (c.opcode, c.syndrome, c.wqe_counter))
        .collect();
    assert_eq!(
        got,
        [
            (RESP_ERR, FLUSH, 0),
            (RESP_ERR, FLUSH, 1),
            (REQ_ERR, FLUSH, idx)
        ]
    );
    assert_clean(&p.rig.model);
}

#[test]
fn a_zero_length_data_segment_is_a_violation() {
    let mut p = pair(Options::default(), QpType::Rc, 8, 7);
    p.b.recv(&[(p.mr.addr(), 64, p.mr.lkey())]);
    let idx =
        p.a.post(op::SEND, CE, [0; 4], &dseg(0, p.mr.lkey(), p.mr.addr()));
    p.a.ring(&p.rig, idx);
    p.rig.model.process();
    let c = p.ca.poll().unwrap();
    assert_eq!((c.opcode, c.syndrome), (REQ_ERR, LOCAL_QP_OP));
    let v = p.rig.model.violations();
    assert!(v.len() == 1 && v[0].contains("zero-length"), "{v:?}");
}

#[test]
fn injected_cqes_get_the_owner_bit_of_their_slot() {
    let rig = Rig::new(Options::default());
    let mut cq = rig.cq(3);
    let mut bytes = [0u8; 64];
    bytes[55] = 0x22; // REM_ABORT_ERR
    bytes[54] = 0x99;
    bytes[56..60].copy_from_slice(&0x0012_3456u32.to_be_bytes());
    bytes[63] = REQ_ERR << 4 | 1; // a wrong owner bit: replaced
    for round in 0..3 {
        for _ in 0..4 {
            assert!(rig.model.inject_cqe(cq.cqn, bytes));
        }
        let c = cq.drain();
        assert_eq!(c.len(), 4, "round {round}");
        assert!(c
            .iter()
            .all(|c| (c.opcode, c.syndrome, c.vendor, c.qpn) == (REQ_ERR, 0x22, 0x99, 0x12_3456)));
    }
    for _ in 0..4 {
        assert!(rig.model.inject_cqe(cq.cqn, bytes));
    }
    assert!(!rig.model.inject_cqe(cq.cqn, bytes), "full");
    let ev = rig
        .ctx
        .get_async_event_timeout(Some(Duration::from_secs(1)));
    let ev = ev.unwrap().expect("CQ_ERR");
    assert!(ev.is_for_cq(&cq.cq));
    ev.ack();
}
