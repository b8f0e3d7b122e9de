//! Typed posting sessions (`QueuePair::start_wr`, the `ibv_qp_ex` /
//! `ibv_wr_*` API, `uverbs::qp_ex`) on the mlx5 device model: every
//! operation's builder on RC, UC and UD down to what the device executed
//! (the model decodes the WQEs with its own decoder), the checks made once
//! per session (QP type, provider, state) and per request (SGE count,
//! inline size, room) as typed errors with nothing of the request written,
//! abort and drop taking everything back, and a session after a RESET.

use uverbs::{
    qp_ex::{Mlx5, Rc, Rxe, Uc, Ud},
    CqOptions, PostErrorKind, QpAttr, QpState, QpType, RecvWr, SendFlags, Sge, UdDest, WcFlags,
    WcOpcode, WcStatus,
};

use uverbs_test_support::mlx5_pair::*;

#[test]
fn every_rc_operation_of_a_session_executes_as_built() {
    let mut p = pair(QpType::Rc, 16);
    p.mr_a.write(0, b"0123456789abcdef").unwrap();
    p.mr_a.write(16, b"ghijklmn").unwrap();
    p.mr_b.write(512, &7u64.to_le_bytes()).unwrap();
    p.mr_b.write(520, &40u64.to_le_bytes()).unwrap();
    p.mr_b.write(1024, b"read me!and me!!").unwrap();
    for i in 0..3u64 {
        let sge = [p.mr_b.sge(2048 + 256 * i as usize, 256).unwrap()];
        p.b.post_recv(&[RecvWr::new(70 + i, &sge)]).unwrap();
    }
    let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
    let a = |off: usize, len: u32| p.mr_a.sge(off, len).unwrap();
    let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
    // A write gathered from two SGEs.
    s.rdma_write(rkey, rb)
        .wr_id(1)
        .sge_list(&[a(0, 16), a(16, 8)])
        .unwrap();
    s.rdma_write_imm(rkey, rb + 64, 0xabcd)
        .wr_id(2)
        .inline(b"inline write")
        .unwrap();
    // A read scattered into two SGEs.
    s.rdma_read(rkey, rb + 1024)
        .wr_id(3)
        .sge_list(&[a(256, 8), a(300, 8)])
        .unwrap();
    s.atomic_fetch_add(rkey, rb + 512, 5)
        .wr_id(4)
        .sge(a(384, 8))
        .unwrap();
    // The length given is replaced by the 8 bytes an atomic returns.
    s.atomic_cmp_swp(rkey, rb + 520, 40, 99)
        .wr_id(5)
        .sge((a(392, 0)).length(1))
        .unwrap();
    s.send().wr_id(6).sge(a(0, 10)).unwrap();
    s.send_imm(0xfeed).wr_id(7).inline(b"imm!").unwrap();
    assert_eq!((s.len(), s.is_empty()), (7, false));
    // Written, not rung: the device executes nothing.
    p.model.process();
    assert_eq!(p.mr_b.read_u64(0).unwrap(), 0, "a request ran early");
    s.complete().unwrap();

    let ca = run_and_poll(&p.model, &mut p.cq_a, 7);
    let got: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    let ok = WcStatus::SUCCESS;
    assert_eq!(
        got,
        [
            (1, ok, WcOpcode::RDMA_WRITE),
            (2, ok, WcOpcode::RDMA_WRITE),
            (3, ok, WcOpcode::RDMA_READ),
            (4, ok, WcOpcode::FETCH_ADD),
            (5, ok, WcOpcode::COMP_SWAP),
            (6, ok, WcOpcode::SEND),
            (7, ok, WcOpcode::SEND),
        ]
    );
    let mut buf = [0u8; 24];
    p.mr_b.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"0123456789abcdefghijklmn");
    let mut buf = [0u8; 12];
    p.mr_b.read(64, &mut buf).unwrap();
    assert_eq!(&buf, b"inline write");
    assert_eq!(&p.mr_a.read_u64(256).unwrap().to_le_bytes(), b"read me!");
    assert_eq!(&p.mr_a.read_u64(300).unwrap().to_le_bytes(), b"and me!!");
    assert_eq!(p.mr_a.read_u64(384).unwrap(), 7, "fetch-add's old value");
    assert_eq!(p.mr_b.read_u64(512).unwrap(), 12);
    assert_eq!(p.mr_a.read_u64(392).unwrap(), 40, "cmp-swap's old value");
    assert_eq!(p.mr_b.read_u64(520).unwrap(), 99);

    // The peer: the write with immediate consumed a receive, then the sends.
    let cb = run_and_poll(&p.model, &mut p.cq_b, 3);
    let got: Vec<_> = cb
        .iter()
        .map(|w| (w.wr_id, w.opcode, w.byte_len, w.imm_data))
        .collect();
    assert_eq!(
        got,
        [
            (70, WcOpcode::RECV_RDMA_WITH_IMM, 12, 0xabcd),
            (71, WcOpcode::RECV, 10, 0),
            (72, WcOpcode::RECV, 4, 0xfeed),
        ]
    );
    assert!(cb[2].wc_flags.contains(WcFlags::WITH_IMM));
    let mut buf = [0u8; 10];
    p.mr_b.read(2048 + 256, &mut buf).unwrap();
    assert_eq!(&buf, b"0123456789");
    assert_clean(&p.model);
}

/// Flags set through the builder reach the control segment the model
/// decodes (the exhaustive matrix over both untyped paths is
/// `tests/mlx5_send_flags.rs`, which runs the typed path too).
#[test]
fn a_requests_flags_and_id_reach_the_device() {
    let mut p = pair(QpType::Rc, 8);
    p.model.log_wqes(true);
    let src = p.mr_a.sge(0, 8).unwrap();
    let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
    let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
    s.rdma_write(rkey, rb)
        .wr_id(1)
        .unsignaled()
        .sge(src)
        .unwrap();
    s.rdma_write(rkey, rb + 8)
        .wr_id(2)
        .fence()
        .sge(src)
        .unwrap();
    s.rdma_write(rkey, rb + 16)
        .wr_id(3)
        .flags(SendFlags::SOLICITED)
        .sge(src)
        .unwrap();
    s.complete().unwrap();
    p.model.process();
    let w = p.model.executed_wqes();
    let w: Vec<_> = w.iter().filter(|w| w.qpn == p.a.qp_num()).collect();
    let seen: Vec<_> = w
        .iter()
        .map(|w| (w.signaled(), w.fence_mode(), w.solicited(), w.inline))
        .collect();
    assert_eq!(
        seen,
        [
            (false, 0, false, false),
            (true, 4, false, false),
            (false, 0, true, false)
        ]
    );
    // Only the second was signaled (`flags` replaced the default).
    let ca = run_and_poll(&p.model, &mut p.cq_a, 1);
    assert_eq!(ca[0].wr_id, 2);
    assert_clean(&p.model);
}

#[test]
fn uc_and_ud_sessions_carry_what_their_transport_carries() {
    // UC: writes and sends.
    let mut p = pair(QpType::Uc, 8);
    p.mr_a.write(0, b"uc write").unwrap();
    let recv = [p.mr_b.sge(1024, 64).unwrap()];
    p.b.post_recv(&[RecvWr::new(9, &recv)]).unwrap();
    let mut s = p.a.start_wr::<Uc, Mlx5>().unwrap();
    s.rdma_write(p.mr_b.rkey(), p.mr_b.addr())
        .wr_id(1)
        .sge(p.mr_a.sge(0, 8).unwrap())
        .unwrap();
    s.send().wr_id(2).inline(b"uc send").unwrap();
    s.complete().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 2);
    assert_eq!((ca[0].wr_id, ca[1].wr_id), (1, 2));
    assert!(ca.iter().all(|c| c.status == WcStatus::SUCCESS));
    assert_eq!(&p.mr_b.read_u64(0).unwrap().to_le_bytes(), b"uc write");
    let cb = run_and_poll(&p.model, &mut p.cq_b, 1);
    assert_eq!((cb[0].wr_id, cb[0].byte_len), (9, 7));
    assert_clean(&p.model);

    // UD: every send names its destination.
    let mut u = ud_pair();
    for i in 0..2u64 {
        let recv = [u.mr.sge(1024 + 256 * i as usize, 256).unwrap()];
        u.b.post_recv(&[RecvWr::new(20 + i, &recv)]).unwrap();
    }
    let dest = UdDest::new(&u.ah, u.b.qp_num(), QKEY);
    u.mr.write(0, b"datagram").unwrap();
    let mut s = u.a.start_wr::<Ud, Mlx5>().unwrap();
    s.send_to(dest)
        .wr_id(1)
        .sge(u.mr.sge(0, 8).unwrap())
        .unwrap();
    s.send_imm_to(dest, 77).wr_id(2).inline(b"dg").unwrap();
    s.complete().unwrap();
    let ca = run_and_poll(&u.model, &mut u.cq_a, 2);
    assert!(ca.iter().all(|c| c.status == WcStatus::SUCCESS), "{ca:?}");
    let cb = run_and_poll(&u.model, &mut u.cq_b, 2);
    // A UD receive starts with the 40-byte GRH.
    let got: Vec<_> = cb
        .iter()
        .map(|w| (w.wr_id, w.byte_len, w.src_qp, w.imm_data))
        .collect();
    assert_eq!(got, [(20, 48, u.a.qp_num(), 0), (21, 42, u.a.qp_num(), 77)]);
    let mut buf = [0u8; 8];
    u.mr.read(1024 + 40, &mut buf).unwrap();
    assert_eq!(&buf, b"datagram");
    assert_clean(&u.model);
}

#[test]
fn a_session_checks_the_qp_type_provider_and_state_once() {
    let mut p = pair(QpType::Rc, 4);
    let e = p.a.start_wr::<Ud, Mlx5>().unwrap_err();
    assert_eq!(
        e.kind,
        PostErrorKind::WrongQpType {
            qp: QpType::Rc,
            session: QpType::Ud
        }
    );
    assert!(e.to_string().contains("start_wr::<Rc, _>"), "{e}");
    let e = p.a.start_wr::<Rc, Rxe>().unwrap_err();
    assert_eq!(
        e.kind,
        PostErrorKind::WrongProvider {
            qp: "mlx5",
            session: "rxe"
        }
    );
    // Sends need RTS: a fresh QP (RESET), then INIT.
    let cq = p._ctx.create_cq(8, CqOptions::default()).unwrap();
    let mut qp = create_qp(&p.pd, QpType::Rc, &cq, None, cap(4, 1, 0));
    let e = qp.start_wr::<Rc, Mlx5>().unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    qp.modify_to(&QpAttr::new().qp_state(QpState::Init).port_num(1))
        .unwrap();
    let e = qp.start_wr::<Rc, Mlx5>().unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    // Nothing was started on the QP that sends.
    assert!(p.a.start_wr::<Rc, Mlx5>().unwrap().is_empty());
    assert_clean(&p.model);
}

#[test]
fn a_bad_request_is_refused_with_nothing_written_and_the_rest_completes() {
    let mut p = pair(QpType::Rc, 4);
    let one = p.mr_a.sge(0, 8).unwrap();
    for i in 0..2 {
        p.b.post_recv(&[RecvWr::new(i, &[p.mr_b.sge(64 * i as usize, 64).unwrap()])])
            .unwrap();
    }
    let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
    s.send().wr_id(1).sge(one).unwrap();
    // The pair's QPs take 2 SGEs and 64 bytes inline.
    let e = s.send().wr_id(2).sge_list(&[one; 3]).unwrap_err();
    assert_eq!(e.index, 1);
    assert_eq!(e.kind, PostErrorKind::TooManySges { given: 3, max: 2 });
    let e = s.send().wr_id(3).inline(&[0; 200]).unwrap_err();
    assert!(
        matches!(e.kind, PostErrorKind::InlineTooLong { given: 200, .. }),
        "{e}"
    );
    let e = s
        .rdma_read(p.mr_b.rkey(), p.mr_b.addr())
        .sge_list(&[one; 3])
        .unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::TooManySges { .. }), "{e}");
    s.send().wr_id(4).sge(one).unwrap();
    assert_eq!(s.len(), 2);
    s.complete().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 2);
    let ids: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, [(1, WcStatus::SUCCESS), (4, WcStatus::SUCCESS)]);

    // A full queue refuses the request that does not fit, at its index,
    // and what fit still goes.
    let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
    let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
    let mut refused = None;
    for i in 0..8u64 {
        let wr = s.rdma_write(rkey, rb + 512 + 8 * i).wr_id(10 + i);
        if let Err(e) = wr.sge(one) {
            refused = Some(e);
            break;
        }
    }
    let e = refused.expect("a 4-deep queue took 8 requests");
    assert_eq!(e.kind, PostErrorKind::QueueFull, "{e}");
    assert_eq!(e.index, s.len());
    let n = s.len();
    s.complete().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, n);
    assert!(ca.iter().all(|c| c.status == WcStatus::SUCCESS), "{ca:?}");
    assert_clean(&p.model);
}

#[test]
fn an_aborted_or_dropped_session_never_executes_and_a_reset_restarts_it() {
    let mut p = pair(QpType::Rc, 8);
    p.mr_a.write(0, b"AAAAAAAA").unwrap();
    p.mr_a.write(8, b"BBBBBBBB").unwrap();
    let (rb, rkey) = (p.mr_b.addr(), p.mr_b.rkey());
    let (a_src, b_src) = (p.mr_a.sge(0, 8).unwrap(), p.mr_a.sge(8, 8).unwrap());
    for round in 0..10u64 {
        let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
        for k in 0..8 {
            s.rdma_write(rkey, rb + 64 * k).sge(a_src).unwrap();
        }
        if round % 2 == 0 {
            s.abort();
        } else {
            drop(s);
        }
        // A request dropped before its payload is not written either.
        let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
        let _ = s.rdma_write(rkey, rb).wr_id(999);
        assert!(s.is_empty());
        for k in 0..8 {
            let wr = s.rdma_write(rkey, rb + 1024 + 8 * k).wr_id(round * 8 + k);
            if k == 7 { wr } else { wr.unsignaled() }
                .sge(b_src)
                .unwrap();
        }
        s.complete().unwrap();
        let ca = run_and_poll(&p.model, &mut p.cq_a, 1);
        assert_eq!(
            (ca[0].wr_id, ca[0].status),
            (round * 8 + 7, WcStatus::SUCCESS)
        );
    }
    for k in 0..8 {
        assert_eq!(p.mr_b.read_u64(64 * k).unwrap(), 0, "aborted write {k} ran");
    }

    // Through RESET and back to RTS: the next session starts the ring over.
    p.a.modify_to(&QpAttr::with_state(QpState::Reset)).unwrap();
    let e = p.a.start_wr::<Rc, Mlx5>().unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    let g = gid(&p._ctx);
    connect(&p.a, p.b.qp_num(), g, 7);
    p.mr_a.write(16, b"CCCCCCCC").unwrap();
    let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
    s.rdma_write(rkey, rb + 2048)
        .wr_id(5000)
        .sge(p.mr_a.sge(16, 8).unwrap())
        .unwrap();
    s.complete().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 1);
    assert_eq!((ca[0].wr_id, ca[0].status), (5000, WcStatus::SUCCESS));
    assert_eq!(&p.mr_b.read_u64(2048).unwrap().to_le_bytes(), b"CCCCCCCC");
    assert_clean(&p.model);
}

/// A program written once for every provider: generic over
/// `ProviderKind`, compiled per provider without dispatch.
#[test]
fn code_generic_over_the_provider_posts_on_mlx5() {
    fn write_all<P: uverbs::qp_ex::ProviderKind>(
        s: &mut uverbs::WrSession<'_, Rc, P>,
        rkey: u32,
        raddr: u64,
        src: Sge,
    ) -> Result<(), uverbs::PostError> {
        for k in 0..3 {
            s.rdma_write(rkey, raddr + 8 * k).wr_id(k).sge(src)?;
        }
        Ok(())
    }
    let mut p = pair(QpType::Rc, 8);
    p.mr_a.write(0, b"generic!").unwrap();
    let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
    write_all(
        &mut s,
        p.mr_b.rkey(),
        p.mr_b.addr(),
        p.mr_a.sge(0, 8).unwrap(),
    )
    .unwrap();
    s.complete().unwrap();
    let ca = run_and_poll(&p.model, &mut p.cq_a, 3);
    assert_eq!(ca.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0, 1, 2]);
    for k in 0..3 {
        assert_eq!(&p.mr_b.read_u64(8 * k).unwrap().to_le_bytes(), b"generic!");
    }
    assert_clean(&p.model);
}
