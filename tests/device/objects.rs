//! Object lifecycles on the real kernel: SRQs, QP modify/query, parents kept
//! alive by children, and the errors that name what to fix.

use std::os::fd::AsFd;

use uverbs::{
    AccessFlags, ErrorKind, QpAttr, QpAttrMask, QpInitAttr, QpState, QpType, RecvWr, SendWr,
    SrqAttr, WcStatus,
};

use crate::support::*;

#[test]
fn srq_feeds_several_qps_and_reports_its_attributes() {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq_s = ctx.create_cq(64, Default::default()).unwrap();
    let mut cq_r = ctx.create_cq(64, Default::default()).unwrap();
    let mut srq = pd
        .create_srq(SrqAttr::new(32, 2))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(srq.attr().max_wr >= 32);
    let q = srq.query().unwrap();
    assert!(q.max_wr >= 32 && q.max_sge >= 2, "{q:?}");
    let dst = mr(&pd, 16 * 64);
    for i in 0..16u64 {
        srq.post_recv(&[RecvWr::new(i, &[dst.sge(i as usize * 64, 64).unwrap()])])
            .unwrap();
    }
    // Two receivers on the SRQ, two senders.
    let gid = local_gid(&ctx);
    let mk = |cq: &uverbs::CompletionQueue, srq: Option<&uverbs::SharedReceiveQueue>| {
        pd.create_qp(&QpInitAttr::rc(cq, cq).srq(srq).cap(cap(8)).sq_sig_all(true))
            .unwrap()
    };
    let r1 = mk(&cq_r, Some(&srq));
    let r2 = mk(&cq_r, Some(&srq));
    let mut s1 = mk(&cq_s, None);
    let mut s2 = mk(&cq_s, None);
    connect(&r1, s1.qp_num(), gid, access_all(), 7);
    connect(&s1, r1.qp_num(), gid, access_all(), 7);
    connect(&r2, s2.qp_num(), gid, access_all(), 7);
    connect(&s2, r2.qp_num(), gid, access_all(), 7);
    let src = mr(&pd, 64);
    src.write(0, b"via srq").unwrap();
    let sge = [src.sge(0, 7).unwrap()];
    s1.post_send(&[SendWr::send(1, &sge), SendWr::send(2, &sge)])
        .unwrap();
    s2.post_send(&[SendWr::send(3, &sge)]).unwrap();
    wait(&mut cq_s, 3);
    let r = wait(&mut cq_r, 3);
    assert!(r
        .iter()
        .all(|c| c.status == WcStatus::SUCCESS && c.byte_len == 7));
    let mut qps: Vec<u32> = r.iter().map(|c| c.qp_num).collect();
    qps.sort_unstable();
    let mut want = vec![r1.qp_num(), r1.qp_num(), r2.qp_num()];
    want.sort_unstable();
    assert_eq!(qps, want);
    // A QP on an SRQ has no receive queue of its own.
    let mut r1 = r1;
    assert!(r1.post_recv(&[RecvWr::new(0, &[])]).is_err());
    // The SRQ is in use: destroying it now is refused, and works after.
    srq.set_limit(4).unwrap();
    assert_eq!(srq.query().unwrap().srq_limit, 4);
    let busy = srq.destroy();
    assert_eq!(busy.unwrap_err().errno(), uverbs::sys::Errno::EBUSY);
}

#[test]
fn destroying_parents_in_use_is_refused_and_order_is_kept() {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, Default::default()).unwrap();
    let qp = pd.create_qp(&QpInitAttr::ud(&cq, &cq).cap(cap(4))).unwrap();
    // PD clones and children keep the PD: an explicit destroy says EBUSY
    // and gives the handle back (dropping it is dropping the clone).
    let err = pd.clone().destroy().unwrap_err();
    assert_eq!(err.errno(), uverbs::sys::Errno::EBUSY);
    assert!(err.to_string().contains("still use it"), "{err}");
    drop(err.into_inner());
    // A CQ used by a QP is refused too, and given back.
    let err = cq.destroy().unwrap_err();
    assert_eq!(err.errno(), uverbs::sys::Errno::EBUSY);
    let cq = err.into_inner();
    // Destroy in the right order works, reporting success.
    qp.destroy().unwrap();
    cq.destroy().unwrap_or_else(|e| panic!("{e}"));
    pd.destroy().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn explicit_destroys_succeed_in_order() {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, Default::default()).unwrap();
    let m = mr(&pd, 4096);
    let qp = pd.create_qp(&QpInitAttr::rc(&cq, &cq).cap(cap(4))).unwrap();
    qp.destroy().unwrap();
    m.destroy().unwrap();
    cq.destroy().unwrap();
    pd.destroy().unwrap();
}

#[test]
fn modify_names_missing_attributes_and_query_reports_state() {
    let p = pair(QpType::Rc, 8, 7);
    let (attr, init) = p.a.query(QpAttrMask::all()).unwrap();
    assert_eq!(attr.qp_state, QpState::Rts);
    assert_eq!(attr.dest_qp_num, p.b.qp_num());
    assert_eq!(attr.port_num, 1);
    assert_eq!(attr.path_mtu, uverbs::Mtu(3));
    assert_eq!(attr.max_rd_atomic, 4);
    assert!(init.cap.max_send_wr >= 8);
    assert_eq!(p.a.state(), QpState::Rts);

    let fresh =
        p.pd.create_qp(&QpInitAttr::rc(&p.cq_a, &p.cq_a).cap(cap(4)))
            .unwrap();
    let err = fresh
        .modify(
            &QpAttr::new().qp_state(QpState::Init).port_num(1),
            QpAttrMask::STATE | QpAttrMask::PORT | QpAttrMask::QKEY,
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let msg = err.to_string();
    assert!(
        msg.contains("missing") && msg.contains("PKEY_INDEX"),
        "{msg}"
    );
    assert!(msg.contains("ACCESS_FLAGS"), "{msg}");
    assert!(msg.contains("not allowed: QKEY"), "{msg}");
    // An impossible transition, through either form of modify.
    let err = fresh
        .modify(&QpAttr::with_state(QpState::Rts), QpAttrMask::STATE)
        .unwrap_err();
    assert!(err.to_string().contains("RESET->RTS"), "{err}");
    let err = fresh
        .modify_to(&QpAttr::with_state(QpState::Rts))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("RESET->RTS: this transition does not exist"),
        "{err}"
    );
    // Moving to ERR flushes posted receives with WR_FLUSH_ERR.
    let mut b = p.b;
    let dst = mr(&p.pd, 64);
    b.post_recv(&[RecvWr::new(99, &[dst.sge(0, 64).unwrap()])])
        .unwrap();
    b.modify(&QpAttr::with_state(QpState::Err), QpAttrMask::STATE)
        .unwrap();
    let mut cq_b = p.cq_b;
    let c = wait(&mut cq_b, 1);
    assert_eq!((c[0].wr_id, c[0].status), (99, WcStatus::WR_FLUSH_ERR));
}

#[test]
fn posting_in_the_wrong_state_is_refused_before_the_kernel() {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, Default::default()).unwrap();
    let mut qp = pd.create_qp(&QpInitAttr::rc(&cq, &cq).cap(cap(4))).unwrap();
    let m = mr(&pd, 64);
    let sge = [m.sge(0, 8).unwrap()];
    let err = qp.post_send(&[SendWr::send(1, &sge)]).unwrap_err();
    assert!(err.to_string().contains("RTS"), "{err}");
    let err = qp.post_recv(&[RecvWr::new(1, &sge)]).unwrap_err();
    assert!(err.to_string().contains("RESET"), "{err}");
    // Too many SGEs, and inline data beyond the QP's limit.
    let connect_to_self = qp.qp_num();
    connect(&qp, connect_to_self, local_gid(&ctx), access_all(), 7);
    let many = [m.sge(0, 1).unwrap(); 64];
    let err = qp.post_send(&[SendWr::send(1, &many)]).unwrap_err();
    assert!(
        matches!(
            err.kind,
            uverbs::PostErrorKind::TooManySges { given: 64, .. }
        ),
        "{err}"
    );
    let big = vec![0u8; 4096];
    let err = qp
        .post_send(&[SendWr::send(1, &[]).inline(&big)])
        .unwrap_err();
    assert!(
        matches!(err.kind, uverbs::PostErrorKind::InlineTooLong { .. }),
        "{err}"
    );
}

/// A post follows the state the kernel accepted, through every transition
/// and a reset: sends refused in INIT and RTR (receives taken), taken in
/// RTS and in ERR (where the kernel flushes them), both refused again after
/// RESET, and after both sides reconnect the QP carries messages again.
#[test]
fn posts_follow_the_qp_state_through_a_reset() {
    let mut p = pair(QpType::Rc, 8, 7);
    let m = mr(&p.pd, 4096);
    let sge = [m.sge(0, 64).unwrap()];
    let gid = local_gid(&p.ctx);
    let refused = |r: Result<(), uverbs::PostError>, what: &str| match r {
        Err(e) => assert!(
            matches!(e.kind, uverbs::PostErrorKind::BadState(_)),
            "{what}: {e}"
        ),
        Ok(()) => panic!("{what}: posted"),
    };
    let exchange = |p: &mut Pair, id: u64| {
        p.b.post_recv(&[RecvWr::new(id, &sge)]).unwrap();
        p.a.post_send(&[SendWr::send(id, &[]).inline(b"gate")])
            .unwrap();
        let wa = wait(&mut p.cq_a, 1);
        let wb = wait(&mut p.cq_b, 1);
        assert_eq!(
            [(wa[0].wr_id, wa[0].status), (wb[0].wr_id, wb[0].status)],
            [(id, WcStatus::SUCCESS); 2]
        );
    };
    exchange(&mut p, 1);
    // Both sides start over (the peer's expected PSN went on).
    p.b.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    connect(&p.b, p.a.qp_num(), gid, access_all(), 7);
    p.a.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    refused(p.a.post_send(&[SendWr::send(2, &sge)]), "a send in RESET");
    refused(p.a.post_recv(&[RecvWr::new(2, &sge)]), "a receive in RESET");
    let mut attr = crate::qp_connect::to_rtr(&p.a, p.b.qp_num(), gid, gid_index(), access_all());
    refused(p.a.post_send(&[SendWr::send(3, &sge)]), "a send in RTR");
    refused(p.a.start_send().map(drop), "a send batch in RTR");
    p.a.post_recv(&[RecvWr::new(3, &sge)]).unwrap();
    attr.qp_state = QpState::Rts;
    (
        attr.timeout,
        attr.retry_cnt,
        attr.rnr_retry,
        attr.max_rd_atomic,
    ) = (14, 7, 7, 4);
    p.a.modify_to(&attr).unwrap();
    exchange(&mut p, 4);
    // In ERR the kernel flushes what is posted, with the receive posted in
    // RTR.
    p.a.modify_to(&QpAttr::with_state(QpState::Err)).unwrap();
    p.a.post_send(&[SendWr::send(5, &sge)]).unwrap();
    let mut flushed: Vec<_> = wait(&mut p.cq_a, 2)
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    flushed.sort_unstable_by_key(|&(id, _)| id);
    assert_eq!(
        flushed,
        [(3, WcStatus::WR_FLUSH_ERR), (5, WcStatus::WR_FLUSH_ERR)]
    );
}

#[test]
fn memory_region_bounds_and_access_rules() {
    let ctx = open();
    let pd = ctx.alloc_pd().unwrap();
    let m = mr(&pd, 4096);
    assert!(m.sge(4000, 96).is_ok());
    assert!(m.sge(4000, 97).is_err());
    assert!(m.write(4095, b"xy").is_err());
    assert!(m.read(usize::MAX, &mut [0u8; 2]).is_err());
    let err = pd.alloc_mr(64, AccessFlags::REMOTE_WRITE).unwrap_err();
    assert!(err.to_string().contains("LOCAL_WRITE"), "{err}");
    // rxe cannot register dma-bufs: the error says so.
    let memfd = std::fs::File::open("/dev/null").unwrap();
    let err = pd
        .register_dmabuf(memfd.as_fd(), 0, 4096, 0, AccessFlags::LOCAL_WRITE)
        .unwrap_err();
    assert_eq!(err.kind(), uverbs::ErrorKind::Os, "{err}");
    assert!(err.kernel_errno().is_some(), "the kernel's answer: {err}");
}
