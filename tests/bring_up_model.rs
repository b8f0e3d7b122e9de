//! `QueuePair::bring_up` and `Endpoint` through the public API, on the mlx5
//! device model: two QPs exchange their endpoints as bytes (as a program
//! sends them over its own channel), each brings itself up against the
//! other's, and messages move. The model keeps the attributes the library
//! sent (`ib_uverbs_modify_qp`, decoded by the model) and reports them on
//! query, so the test also reads back what each transition set.

use uverbs::testing::mlx5::{fake_mlx5, Mlx5Model};
use uverbs::{
    AccessFlags, BringUp, CompletionQueue, Context, CqOptions, Endpoint, ErrorKind, Mtu,
    QpAttrMask, QpCap, QpInitAttr, QpState, QpType, QueuePair, RecvWr, SendWr, UdDest, WcStatus,
    WorkCompletion,
};

fn qp(pd: &uverbs::ProtectionDomain, cq: &CompletionQueue, t: QpType) -> QueuePair {
    pd.create_qp(&QpInitAttr::new(t, cq, cq).cap(QpCap::new(8, 8, 1, 1).max_inline_data(64)))
        .unwrap_or_else(|e| panic!("create {t} QP: {e:#}"))
}

/// Runs the device, then polls until `n` completions came.
fn completions(model: &Mlx5Model, cq: &mut CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut wc = [WorkCompletion::default(); 8];
    for _ in 0..1000 {
        model.process();
        let k = cq.poll(&mut wc);
        out.extend_from_slice(&wc[..k]);
        if out.len() >= n {
            break;
        }
    }
    assert_eq!(out.len(), n, "{out:?}");
    out
}

/// Each side's endpoint goes through its byte encoding to the other.
fn exchange(a: &QueuePair, la: &BringUp, b: &QueuePair, lb: &BringUp) -> (Endpoint, Endpoint) {
    let to_b = a.endpoint(la).unwrap().encode();
    let to_a = b.endpoint(lb).unwrap().encode();
    (
        Endpoint::decode(&to_b).unwrap(),
        Endpoint::decode(&to_a).unwrap(),
    )
}

#[test]
fn two_rc_qps_brought_up_from_each_others_bytes_exchange_messages() {
    let model = fake_mlx5();
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let (mut cq_a, mut cq_b) = (
        ctx.create_cq(16, CqOptions::default()).unwrap(),
        ctx.create_cq(16, CqOptions::default()).unwrap(),
    );
    let (mut a, mut b) = (qp(&pd, &cq_a, QpType::Rc), qp(&pd, &cq_b, QpType::Rc));
    let la = BringUp::new(1).gid_index(1).psn(0x10_0001);
    let lb = BringUp::new(1).gid_index(1).psn(0x20_0002);
    let (a_seen_by_b, b_seen_by_a) = exchange(&a, &la, &b, &lb);
    assert_eq!(
        (a_seen_by_b.qp_num, a_seen_by_b.psn),
        (a.qp_num(), 0x10_0001)
    );
    assert!(!a_seen_by_b.gid.is_null(), "GID index 1 is the model's GID");

    // A program may post receives before it knows its peer: INIT first.
    b.init(&lb).unwrap();
    assert_eq!(b.state(), QpState::Init);
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let mr_a = pd.alloc_mr(4096, access).unwrap();
    let mr_b = pd.alloc_mr(4096, access).unwrap();
    b.post_recv(&[RecvWr::new(9, &[mr_b.sge(0, 64).unwrap()])])
        .unwrap();

    a.bring_up(&la, &b_seen_by_a).unwrap();
    b.bring_up(&lb, &a_seen_by_b).unwrap();
    assert_eq!((a.state(), b.state()), (QpState::Rts, QpState::Rts));

    // What each transition set, read back from the device.
    let (qa, _) = a.query(QpAttrMask::all()).unwrap();
    assert_eq!(
        (qa.dest_qp_num, qa.rq_psn, qa.sq_psn),
        (b.qp_num(), 0x20_0002, 0x10_0001)
    );
    // The model's port is active at 1024 (`src/testing/device.rs`): both
    // endpoints say so, and the path MTU is the smaller of the two.
    assert_eq!(
        (b_seen_by_a.mtu, qa.path_mtu),
        (Mtu::BYTES_1024, Mtu::BYTES_1024)
    );
    assert_eq!(
        (qa.timeout, qa.retry_cnt, qa.rnr_retry, qa.min_rnr_timer),
        (14, 7, 7, 12)
    );
    assert_eq!(
        qa.qp_access_flags,
        AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
    );
    let grh = qa.ah_attr.grh.expect("a global route towards a GID");
    assert_eq!((grh.dgid, grh.sgid_index), (b_seen_by_a.gid, 1));

    mr_a.write(0, b"brought up").unwrap();
    a.post_send(&[SendWr::send(1, &[mr_a.sge(0, 10).unwrap()])])
        .unwrap();
    assert_eq!(
        completions(&model, &mut cq_a, 1)[0].status,
        WcStatus::SUCCESS
    );
    let got = completions(&model, &mut cq_b, 1);
    assert_eq!((got[0].wr_id, got[0].byte_len), (9, 10));
    let mut buf = [0u8; 10];
    mr_b.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"brought up");
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

#[test]
fn a_ud_qp_is_brought_up_and_reaches_its_peer_through_the_endpoints_address() {
    let model = fake_mlx5();
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let (mut cq_a, mut cq_b) = (
        ctx.create_cq(16, CqOptions::default()).unwrap(),
        ctx.create_cq(16, CqOptions::default()).unwrap(),
    );
    let (mut a, mut b) = (qp(&pd, &cq_a, QpType::Ud), qp(&pd, &cq_b, QpType::Ud));
    let link = BringUp::new(1).gid_index(1).qkey(0x4242);
    let (_, b_seen_by_a) = exchange(&a, &link, &b, &link);
    assert_eq!(b_seen_by_a.qkey, 0x4242, "a UD endpoint carries its Q_Key");
    a.bring_up(&link, &b_seen_by_a).unwrap();
    b.bring_up(&link, &b_seen_by_a).unwrap();
    let (qb, _) = b.query(QpAttrMask::all()).unwrap();
    assert_eq!((b.state(), qb.qkey), (QpState::Rts, 0x4242));

    let ah = pd.create_ah(&b_seen_by_a.ah_attr(&link)).unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    b.post_recv(&[RecvWr::new(5, &[mr.sge(0, 40 + 64).unwrap()])])
        .unwrap();
    let dest = UdDest::new(&ah, b_seen_by_a.qp_num, b_seen_by_a.qkey);
    a.post_send(&[SendWr::send(1, &[]).inline(b"datagram").to(dest)])
        .unwrap();
    assert_eq!(
        completions(&model, &mut cq_a, 1)[0].status,
        WcStatus::SUCCESS
    );
    let got = completions(&model, &mut cq_b, 1);
    assert_eq!((got[0].byte_len, got[0].src_qp), (40 + 8, a.qp_num()));
    let mut buf = [0u8; 8];
    mr.read(40, &mut buf).unwrap();
    assert_eq!(&buf, b"datagram");
}

#[test]
fn bring_up_refuses_what_it_cannot_do_and_leaves_the_qp_where_it_was() {
    let model = fake_mlx5();
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let a = qp(&pd, &cq, QpType::Rc);
    let link = BringUp::new(1).gid_index(1);
    let peer = a.endpoint(&link).unwrap();

    // A GID index the port does not have: no endpoint, nothing changed.
    let e = a.endpoint(&BringUp::new(1).gid_index(200)).unwrap_err();
    assert_eq!(a.state(), QpState::Reset, "{e:#}");

    // RTR is refused (a path MTU that is no IBV_MTU_* value): the QP
    // stays in INIT, the step before the one that failed.
    let too_big = link.clone().mtu(uverbs::Mtu(9));
    let e = a.bring_up(&too_big, &peer).unwrap_err();
    assert_eq!(a.state(), QpState::Init, "{e:#}");
    // ... and a second call continues from there.
    a.bring_up(&link, &peer).unwrap();
    assert_eq!(a.state(), QpState::Rts);
    // From RTS there is nothing to bring up: an error, not a silent
    // success that ignored the peer.
    let e = a.bring_up(&link, &peer).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.detail().unwrap().contains("RTS"), "{e:#}");
    assert_eq!(a.state(), QpState::Rts);
}
