//! The option and attribute structs as a program outside the crate sees
//! them (issue 42 item 1): `#[non_exhaustive]`, so built by constructors
//! and setters; each constructor gives the fields its docs say, each
//! setter sets its own field only, the `Option` setters take the value or an
//! `Option`, and the old `Mtu` names still resolve. What the builders make
//! is also created for real: on the mlx5 device model, a QP from
//! `QpInitAttr::rc(..)` reports the type, capacities, context and
//! `sq_sig_all` it was asked for.
//!
//! (That a literal no longer compiles is the compiler's check: the
//! `compile_fail` doctest in `src/setters.rs`.)

use uverbs::testing::mlx5::fake_mlx5;
use uverbs::{
    cm::ConnParam, AccessFlags, AhAttr, Context, CqOptions, Gid, GlobalRoute, Mtu, MwBind,
    PathMigState, Payload, QpAttr, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendFlags, SendOp,
    SendWr, Sge, SrqAttr, SrqOptions, WcExFlags,
};

#[test]
fn qp_cap_new_sets_the_four_sizes_and_no_inline_data() {
    let c = QpCap::new(16, 8, 2, 1);
    assert_eq!(
        (
            c.max_send_wr,
            c.max_recv_wr,
            c.max_send_sge,
            c.max_recv_sge,
            c.max_inline_data
        ),
        (16, 8, 2, 1, 0)
    );
    let c = c.max_inline_data(64).max_recv_wr(9);
    assert_eq!(
        (c.max_recv_wr, c.max_inline_data, c.max_send_wr),
        (9, 64, 16)
    );
    assert_eq!(QpCap::new(0, 0, 0, 0), QpCap::default());
}

#[test]
fn qp_attr_new_is_default_and_each_setter_sets_its_field() {
    assert_eq!(QpAttr::new(), QpAttr::default());
    assert_eq!(QpAttr::with_state(QpState::Rtr).qp_state, QpState::Rtr);
    let av = AhAttr::new(1).dlid(7);
    let a = QpAttr::new()
        .qp_state(QpState::Rts)
        .cur_qp_state(QpState::Rtr)
        .path_mtu(Mtu::BYTES_1024)
        .path_mig_state(PathMigState::Armed)
        .qkey(0x1111)
        .rq_psn(1)
        .sq_psn(2)
        .dest_qp_num(3)
        .qp_access_flags(AccessFlags::REMOTE_WRITE)
        .cap(QpCap::new(1, 2, 3, 4))
        .ah_attr(av)
        .alt_ah_attr(AhAttr::new(2))
        .pkey_index(4)
        .alt_pkey_index(5)
        .en_sqd_async_notify(true)
        .sq_draining(true)
        .max_rd_atomic(6)
        .max_dest_rd_atomic(7)
        .min_rnr_timer(8)
        .port_num(1)
        .timeout(9)
        .retry_cnt(3)
        .rnr_retry(7)
        .alt_port_num(2)
        .alt_timeout(10)
        .rate_limit(1000);
    let mut b = QpAttr::default();
    b.qp_state = QpState::Rts;
    b.cur_qp_state = QpState::Rtr;
    b.path_mtu = Mtu(3);
    b.path_mig_state = PathMigState::Armed;
    b.qkey = 0x1111;
    b.rq_psn = 1;
    b.sq_psn = 2;
    b.dest_qp_num = 3;
    b.qp_access_flags = AccessFlags::REMOTE_WRITE;
    b.cap.max_send_wr = 1;
    b.cap.max_recv_wr = 2;
    b.cap.max_send_sge = 3;
    b.cap.max_recv_sge = 4;
    b.ah_attr.port_num = 1;
    b.ah_attr.dlid = 7;
    b.alt_ah_attr.port_num = 2;
    b.pkey_index = 4;
    b.alt_pkey_index = 5;
    b.en_sqd_async_notify = true;
    b.sq_draining = true;
    b.max_rd_atomic = 6;
    b.max_dest_rd_atomic = 7;
    b.min_rnr_timer = 8;
    b.port_num = 1;
    b.timeout = 9;
    b.retry_cnt = 3;
    b.rnr_retry = 7;
    b.alt_port_num = 2;
    b.alt_timeout = 10;
    b.rate_limit = 1000;
    assert_eq!(a, b);
}

#[test]
fn qp_attr_builds_in_a_const() {
    const INIT: QpAttr = QpAttr::new()
        .qp_state(QpState::Init)
        .port_num(1)
        .pkey_index(0);
    assert_eq!((INIT.qp_state, INIT.port_num), (QpState::Init, 1));
}

#[test]
fn an_address_vector_with_and_without_a_global_route() {
    let dgid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let g = GlobalRoute::new(dgid, 3);
    assert_eq!(
        (
            g.dgid,
            g.sgid_index,
            g.flow_label,
            g.hop_limit,
            g.traffic_class
        ),
        (dgid, 3, 0, 0, 0)
    );
    let g = g.hop_limit(64).traffic_class(0x12).flow_label(0xabcde);
    assert_eq!(
        (g.hop_limit, g.traffic_class, g.flow_label),
        (64, 0x12, 0xabcde)
    );

    let ib = AhAttr::new(1)
        .dlid(0x17)
        .sl(2)
        .src_path_bits(1)
        .static_rate(3);
    assert!(!ib.is_global());
    assert_eq!(
        (
            ib.port_num,
            ib.dlid,
            ib.sl,
            ib.src_path_bits,
            ib.static_rate
        ),
        (1, 0x17, 2, 1, 3)
    );
    let roce = AhAttr::new(1).grh(g);
    assert_eq!(roce.grh, Some(g));
    // The Option form: what a translation from C (`is_global`) passes.
    assert_eq!(AhAttr::new(1).grh(Some(g)), roce);
    assert_eq!(roce.grh(None), AhAttr::new(1));
    assert_eq!(AhAttr::new(0), AhAttr::default());
}

#[test]
fn cq_options_new_is_plain_create_cq() {
    let o = CqOptions::new();
    assert!(o.channel.is_none() && o.parent_domain.is_none());
    assert_eq!(
        (o.comp_vector, o.context, o.wc_flags),
        (0, 0, WcExFlags::STANDARD)
    );
    let d = CqOptions::default();
    assert_eq!(
        (d.comp_vector, d.context, d.wc_flags),
        (0, 0, WcExFlags::STANDARD)
    );
}

#[test]
fn srq_and_connection_parameters() {
    let a = SrqAttr::new(64, 2);
    assert_eq!((a.max_wr, a.max_sge, a.srq_limit), (64, 2, 0));
    assert_eq!(a.srq_limit(8).srq_limit, 8);
    assert_eq!(SrqOptions::new().context(7).context, 7);
    assert_eq!(SrqOptions::new().context, SrqOptions::default().context);

    assert_eq!(ConnParam::new(), ConnParam::default());
    let p = ConnParam::new()
        .responder_resources(1)
        .initiator_depth(2)
        .flow_control(1)
        .retry_count(7)
        .rnr_retry_count(6)
        .srq(true)
        .qp_num(0x99)
        .qkey(0x1234)
        .private_data(b"hi");
    let mut q = ConnParam::default();
    q.responder_resources = 1;
    q.initiator_depth = 2;
    q.flow_control = 1;
    q.retry_count = 7;
    q.rnr_retry_count = 6;
    q.srq = true;
    q.qp_num = 0x99;
    q.qkey = 0x1234;
    q.private_data = b"hi".to_vec();
    assert_eq!(p, q);
}

#[test]
fn work_requests_and_window_binds() {
    const SGE: Sge = Sge::new(0x1000, 64, 7);
    assert_eq!((SGE.addr, SGE.length, SGE.lkey), (0x1000, 64, 7));
    assert_eq!(SGE.length(8).addr(0x2000), Sge::new(0x2000, 8, 7));
    let sges = [SGE];
    let r = RecvWr::new(5, &sges);
    assert_eq!((r.wr_id, r.sges), (5, &sges[..]));

    let w = SendWr::send(1, &sges);
    assert_eq!(
        (w.wr_id, w.op, w.flags),
        (1, SendOp::Send, SendFlags::SIGNALED)
    );
    assert!(matches!(w.payload, Payload::Sges(s) if s == sges));
    assert!(w.ud.is_none());
    let w = w
        .inline(b"abc")
        .unsignaled()
        .wr_id(2)
        .op(SendOp::SendWithImm { imm: 9 });
    assert!(matches!(w.payload, Payload::Inline(b"abc")));
    assert_eq!(
        (w.wr_id, w.flags, w.op.imm()),
        (2, SendFlags::empty(), Some(9))
    );
    let w = w
        .sges(&sges)
        .flags(SendFlags::FENCE)
        .payload(Payload::Inline(b"x"));
    assert!(matches!(w.payload, Payload::Inline(b"x")));
    assert_eq!(w.flags, SendFlags::FENCE);

    let b = MwBind::new(0x100, 0x101);
    assert_eq!(
        (b.mw_rkey, b.rkey, b.mr_lkey, b.addr, b.length, b.access),
        (0x100, 0x101, 0, 0, 0, AccessFlags::empty())
    );
    let b = b
        .mr_lkey(7)
        .addr(0x1000)
        .length(64)
        .access(AccessFlags::REMOTE_READ);
    assert_eq!(
        (b.mr_lkey, b.addr, b.length, b.access),
        (7, 0x1000, 64, AccessFlags::REMOTE_READ)
    );
}

#[test]
#[allow(deprecated)]
fn the_old_mtu_names_are_the_new_values() {
    assert_eq!(Mtu::MTU_256, Mtu::BYTES_256);
    assert_eq!(Mtu::MTU_4096, Mtu::BYTES_4096);
    assert_eq!(Mtu::from_bytes(1024), Some(Mtu::BYTES_1024));
    assert_eq!(format!("{:?}", Mtu::BYTES_2048), "BYTES_2048");
}

#[test]
fn a_qp_made_from_the_builders_is_what_was_asked_for() {
    let model = fake_mlx5();
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let send_cq = ctx
        .create_cq(16, CqOptions::new().channel(&ch).context(11))
        .unwrap();
    let recv_cq = ctx.create_cq(16, CqOptions::new().channel(None)).unwrap();
    assert_eq!(send_cq.context(), 11);
    let srq = pd
        .create_srq_with(SrqAttr::new(8, 1), SrqOptions::new().context(5))
        .unwrap();
    assert_eq!(srq.context(), 5);

    let init = QpInitAttr::rc(&send_cq, &recv_cq)
        .cap(QpCap::new(8, 0, 1, 0))
        .srq(&srq)
        .sq_sig_all(true)
        .context(42);
    assert_eq!(init.qp_type, QpType::Rc);
    assert!(std::ptr::eq(init.send_cq, &send_cq) && std::ptr::eq(init.recv_cq, &recv_cq));
    assert!(init.srq.is_some_and(|s| std::ptr::eq(s, &srq)));
    let qp = pd.create_qp(&init).unwrap();
    assert_eq!((qp.qp_type(), qp.context()), (QpType::Rc, 42));
    assert!(qp.cap().max_send_wr >= 8, "{:?}", qp.cap());
    let (_, info) = qp.query(uverbs::QpAttrMask::CAP).unwrap();
    assert!(info.sq_sig_all);

    // `new` with any type, and `srq(None)`: the QP's own receive queue.
    let ud = QpInitAttr::new(QpType::Ud, &send_cq, &send_cq)
        .cap(QpCap::new(4, 4, 1, 1))
        .srq(None);
    assert!(ud.srq.is_none() && !ud.sq_sig_all && ud.context == 0);
    let qp = pd.create_qp(&ud).unwrap();
    assert_eq!(qp.qp_type(), QpType::Ud);
    let (_, info) = qp.query(uverbs::QpAttrMask::CAP).unwrap();
    assert!(!info.sq_sig_all);
    assert_eq!(QpInitAttr::uc(&send_cq, &send_cq).qp_type, QpType::Uc);
    assert_eq!(QpInitAttr::ud(&send_cq, &send_cq).qp_type, QpType::Ud);
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}
