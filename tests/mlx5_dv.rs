//! `uverbs::mlx5`'s direct-verbs API (the counterpart of `mlx5dv.h`)
//! against the device model (`uverbs::testing::mlx5`): what
//! `mlx5dv_query_device` reports, the raw clock of `ibv_query_rt_values_ex`,
//! the direct views of `mlx5dv_init_obj`.
//! The C library's libmlx5.so.1 is these functions; its transcripts are
//! compared with rdma-core's libmlx5 in scripts/rdma-core-on-model.sh.

#![allow(unsafe_code)] // reading device-shared memory through the views

use uverbs::mlx5::{self, Mlx5DeviceFlags};
use uverbs::testing::mlx5::{fake_mlx5, fake_mlx5_with, Options};
use uverbs::{Context, ErrorKind};

use mlx5_pair::open;
use uverbs_test_support::{mlx5_pair, qp_connect};

#[test]
fn query_device_reports_the_context_and_the_device() {
    for cqe_version in [1, 0] {
        let model = fake_mlx5_with(Options {
            cqe_version,
            ..Options::default()
        });
        let ctx = open(&model);
        let m = ctx.mlx5().unwrap();
        let a = m.query_device().unwrap();
        // CQE v1 is the only flag the model's context and capabilities
        // give: its EX_QUERY_DEVICE has no mlx5 part set, its general
        // capabilities no LAG, signature, crypto or DMA memcpy.
        let want = if cqe_version == 1 {
            Mlx5DeviceFlags::CQE_V1
        } else {
            Mlx5DeviceFlags::empty()
        };
        assert_eq!(a.flags, want, "CQE v{cqe_version}");
        // The context asks for dynamic UARs (`MLX5_LIB_CAP_DYN_UAR`, as
        // libmlx5 44 does, `mlx5.c:2595`), so Linux 6.1's
        // `mlx5_ib_alloc_ucontext` skips `calc_total_bfregs` and reports
        // no dynamic bfregs (`main.c:1905`, `resp->num_dyn_bfregs` 1842).
        assert_eq!(a.max_dynamic_bfregs, 0);
        assert_eq!(a.num_lag_ports, None);
        assert_eq!(a.max_wr_memcpy_length, 0);
        // The model maps both clock pages.
        assert!(a.hca_core_clock);
        assert!(m.core_clock_ptr().is_some());
        // The clock info page's `overflow_period`, which the model writes
        // as a second.
        assert_eq!(a.max_clock_info_update_nsec, Some(1_000_000_000));
    }
}

#[test]
fn without_the_clock_info_page_no_update_period_is_reported() {
    let model = fake_mlx5_with(Options {
        no_clock_info: true,
        ..Options::default()
    });
    let ctx = open(&model);
    let m = ctx.mlx5().unwrap();
    assert_eq!(m.query_device().unwrap().max_clock_info_update_nsec, None);
    let e = m.clock_info().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedProvider);
}

#[test]
fn the_raw_clock_is_read_from_the_core_clock_page() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let m = ctx.mlx5().unwrap();
    // The model's core clock page reads as zero (it maps a blank page, as
    // scripts/rdma-core-on-model.sh's transcript shows libmlx5 reading):
    // both ways of reading it agree.
    assert_eq!(
        ctx.query_rt_values().unwrap().raw_clock,
        m.read_core_clock().unwrap()
    );
}

#[test]
fn a_64k_page_host_maps_no_core_clock() {
    // 16 UARs per page: the model's kernel offers no core clock there.
    let model = fake_mlx5_with(Options {
        num_uars_per_page: 16,
        ..Options::default()
    });
    let ctx = open(&model);
    let m = ctx.mlx5().unwrap();
    assert!(!m.query_device().unwrap().hca_core_clock);
    assert!(m.core_clock_ptr().is_none());
    let e = ctx.query_rt_values().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedProvider);
    assert_eq!(e.errno(), uverbs::sys::Errno::EOPNOTSUPP);
}

#[test]
fn rxe_has_no_raw_clock_and_no_mlx5_view() {
    let fake = uverbs::testing::rxe::fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), None).unwrap();
    assert_eq!(
        ctx.query_rt_values().unwrap_err().kind(),
        ErrorKind::UnsupportedProvider
    );
    assert_eq!(
        ctx.mlx5().unwrap_err().kind(),
        ErrorKind::UnsupportedProvider
    );
    let dev = ctx.device().clone();
    assert!(!mlx5::is_supported(&dev));
}

#[test]
fn is_supported_names_mlx5_devices() {
    let model = fake_mlx5();
    let ctx = open(&model);
    assert!(mlx5::is_supported(ctx.device()));
}

/// Reads the big-endian u32 at `p` (device-shared memory: a volatile
/// load, no Rust reference).
fn be32(p: *const u32) -> u32 {
    // SAFETY: the tests call it on doorbell records and queue entries of
    // objects alive for the call, 4-aligned.
    u32::from_be(unsafe { p.read_volatile() })
}

#[test]
fn the_views_show_what_the_library_wrote_and_the_device_completed() {
    use uverbs::{SendWr, SrqAttr};
    let mut p = mlx5_pair::pair(uverbs::QpType::Rc, 16);
    let ctx = p.pd.context().clone();
    let m = ctx.mlx5().unwrap();
    let qv = m.qp_view(&p.a).unwrap();
    // RC, 16 requests of 2 SGEs: a power of two of 64-byte basic blocks,
    // after a receive queue of 16-byte-aligned WQEs.
    assert_eq!(qv.sq.stride, 64);
    assert!(qv.sq.wqe_cnt.is_power_of_two() && qv.sq.wqe_cnt >= 16);
    assert!(qv.rq.wqe_cnt >= 16 && qv.rq.stride.is_power_of_two());
    assert_eq!(
        qv.sq.buf as usize,
        qv.rq.buf as usize + (qv.rq.wqe_cnt * qv.rq.stride) as usize
    );
    assert_eq!((be32(qv.dbrec), be32(qv.dbrec.wrapping_add(1))), (0, 0));
    // The model has write-combining: a dedicated BlueFlame register.
    assert!(qv.bf_size > 0);
    let cv = m.cq_view(&p.cq_a).unwrap();
    assert!(cv.cqe_cnt.is_power_of_two() && cv.cqe_cnt >= 32);
    assert_eq!(cv.cqe_size, 64);
    // One SEND through the library: its WQE and doorbell record are where
    // the view says.
    p.mr_a.write(0, b"view").unwrap();
    p.b.post_recv(&[uverbs::RecvWr::new(3, &[p.mr_b.sge(0, 64).unwrap()])])
        .unwrap();
    p.a.post_send(&[SendWr::send(1, &[p.mr_a.sge(0, 4).unwrap()])])
        .unwrap();
    assert_eq!(be32(qv.dbrec.wrapping_add(1)), 1, "send counter in WQEBBs");
    let ctrl0 = be32(qv.sq.buf.cast());
    let ctrl1 = be32(qv.sq.buf.cast::<u32>().wrapping_add(1));
    // opmod_idx_opcode: WQE index 0, MLX5_OPCODE_SEND (0x0a); qpn_ds.
    assert_eq!(ctrl0, 0x0a);
    assert_eq!(ctrl1 >> 8, p.a.qp_num());
    // The device completes it into the CQ the view shows (CQE 0's owner
    // bit 0, opcode REQ 0 in the last byte of the 64).
    p.model.process();
    let op_own = be32(cv.buf.wrapping_add(60).cast()) & 0xff;
    assert_eq!(op_own >> 4, 0, "MLX5_CQE_REQ");
    assert_eq!(op_own & 1, 0, "owner bit of the first pass");
    // SRQ and AH views.
    let srq =
        p.pd.create_srq_with(SrqAttr::new(32, 2), Default::default())
            .unwrap();
    let sv = m.srq_view(&srq).unwrap();
    assert_eq!((sv.head, sv.stride), (0, 64));
    assert!(sv.tail >= 32 && sv.tail + 1 == sv.tail.next_power_of_two());
    assert_eq!(sv.srqn, srq.srq_num());
    assert_clean(&p.model);
}

use mlx5_pair::assert_clean;

#[test]
fn a_cq_of_128_byte_cqes_carries_traffic_and_the_attributes_are_checked() {
    use mlx5::Mlx5CqAttr;
    use uverbs::{AccessFlags, CqOptions, QpType, RecvWr, SendWr, WcOpcode, WcStatus};
    let model = fake_mlx5();
    let ctx = open(&model);
    let m = ctx.mlx5().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let big = Mlx5CqAttr::default().cqe_size(128);
    let mut cq_a = m.create_cq(32, CqOptions::default(), big).unwrap();
    let mut cq_b = m.create_cq(32, CqOptions::default(), big).unwrap();
    assert_eq!(m.cq_view(&cq_b).map(|v| v.cqe_size), Ok(128));
    let cap = mlx5_pair::cap(16, 2, 64);
    let mut a = mlx5_pair::create_qp(&pd, QpType::Rc, &cq_a, None, cap);
    let mut b = mlx5_pair::create_qp(&pd, QpType::Rc, &cq_b, None, cap);
    let g = mlx5_pair::gid(&ctx);
    mlx5_pair::connect(&a, b.qp_num(), g, 7);
    mlx5_pair::connect(&b, a.qp_num(), g, 7);
    let mr = pd
        .alloc_mr(8192, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
        .unwrap();
    mr.write(0, &[0x5a; 100]).unwrap();
    b.post_recv(&[RecvWr::new(9, &[mr.sge(4096, 128).unwrap()])])
        .unwrap();
    a.post_send(&[SendWr::send(8, &[mr.sge(0, 100).unwrap()])])
        .unwrap();
    // The view took cq_b out of the library's cleaning, not its polling.
    let got_a = mlx5_pair::run_and_poll(&model, &mut cq_a, 1);
    let got_b = mlx5_pair::run_and_poll(&model, &mut cq_b, 1);
    assert_eq!(
        (got_a[0].wr_id, got_a[0].status, got_a[0].opcode),
        (8, WcStatus::SUCCESS, WcOpcode::SEND)
    );
    assert_eq!(
        (got_b[0].wr_id, got_b[0].status, got_b[0].byte_len),
        (9, WcStatus::SUCCESS, 100)
    );
    let mut data = [0u8; 100];
    mr.read(4096, &mut data).unwrap();
    assert_eq!(data, [0x5a; 100]);
    // libmlx5's refusals (EINVAL): a size that is not 64 or 128, and what
    // the model's device does not report (compression, padding).
    for bad in [
        Mlx5CqAttr::default().cqe_size(100),
        Mlx5CqAttr::default().compressed(mlx5::cqe_comp_format::HASH),
        Mlx5CqAttr::default().cqe_size(128).padded(),
    ] {
        let e = m.create_cq(8, CqOptions::default(), bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
    }
    mlx5_pair::assert_clean(&model);
}

#[test]
fn a_raw_wqe_is_copied_in_with_its_index_and_completes_as_driver2() {
    use uverbs::qp_ex::{Mlx5, Rc};
    use uverbs::{QpType, RecvWr, WcOpcode, WcStatus};
    let mut p = mlx5_pair::pair(QpType::Rc, 4);
    p.mr_a.write(0, &[0x77; 32]).unwrap();
    let sge = p.mr_a.sge(0, 32).unwrap();
    // A SEND WQE built by hand: ctrl (opcode SEND, qpn, DS 2, CQ update)
    // and one data segment, in the device's byte order. Its WQE index
    // field says 0x1234: the library puts the WQE's own index there.
    let mut wqe = [0u8; 32];
    wqe[0..4].copy_from_slice(&(0x12_3400 | 0x0a_u32).to_be_bytes());
    wqe[4..8].copy_from_slice(&(p.a.qp_num() << 8 | 2).to_be_bytes());
    wqe[11] = 0x08; // MLX5_WQE_CTRL_CQ_UPDATE
    wqe[16..20].copy_from_slice(&sge.length.to_be_bytes());
    wqe[20..24].copy_from_slice(&sge.lkey.to_be_bytes());
    wqe[24..32].copy_from_slice(&sge.addr.to_be_bytes());
    for round in 0..6u64 {
        p.b.post_recv(&[RecvWr::new(round, &[p.mr_b.sge(0, 64).unwrap()])])
            .unwrap();
        // Every other request a library-built one: the two kinds share
        // the ring (4 WRs deep, so the raw WQEs wrap around it).
        let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
        if round % 2 == 0 {
            s.raw_wqe(100 + round, &wqe).unwrap();
        } else {
            s.send().wr_id(100 + round).sge(sge).unwrap();
        }
        s.complete().unwrap();
        let ca = mlx5_pair::run_and_poll(&p.model, &mut p.cq_a, 1);
        let cb = mlx5_pair::run_and_poll(&p.model, &mut p.cq_b, 1);
        let want = if round % 2 == 0 {
            WcOpcode::DRIVER2
        } else {
            WcOpcode::SEND
        };
        assert_eq!(
            (ca[0].wr_id, ca[0].status, ca[0].opcode),
            (100 + round, WcStatus::SUCCESS, want)
        );
        assert_eq!((cb[0].wr_id, cb[0].byte_len), (round, 32));
    }
    let mut got = [0u8; 32];
    p.mr_b.read(0, &mut got).unwrap();
    assert_eq!(got, [0x77; 32]);
    // Refusals, nothing taken: no DS, DS beyond the bytes, beyond the
    // queue's WQE size.
    let mut s = p.a.start_wr::<Rc, Mlx5>().unwrap();
    let mut bad = wqe;
    bad[7] = 0;
    assert!(s.raw_wqe(1, &bad).is_err());
    bad[7] = 3;
    assert!(s.raw_wqe(1, &bad).is_err());
    let mut big = vec![0u8; 63 * 16];
    big[..32].copy_from_slice(&wqe);
    big[7] = 63;
    assert!(s.raw_wqe(1, &big).is_err());
    assert!(s.is_empty());
    s.abort();
    mlx5_pair::assert_clean(&p.model);
}

/// `mlx5::push_raw_wqe`: raw WQEs written into the QP's send session call
/// by call (`begin_send` .. `complete_send`, as the C library's
/// `mlx5dv_wr_raw_wqe` writes them), between requests the library builds,
/// each in order with its own index and completion; refusals take
/// nothing.
#[test]
fn raw_wqes_join_a_session_of_calls() {
    use uverbs::{PostErrorKind, QpType, RecvWr, SendWr, WcOpcode, WcStatus};
    let mut p = mlx5_pair::pair(QpType::Rc, 4);
    p.mr_a.write(0, &[0x5a; 16]).unwrap();
    let sge = p.mr_a.sge(0, 16).unwrap();
    let mut wqe = [0u8; 32];
    wqe[0..4].copy_from_slice(&0x0a_u32.to_be_bytes());
    wqe[4..8].copy_from_slice(&(p.a.qp_num() << 8 | 2).to_be_bytes());
    wqe[11] = 0x08;
    wqe[16..20].copy_from_slice(&sge.length.to_be_bytes());
    wqe[20..24].copy_from_slice(&sge.lkey.to_be_bytes());
    wqe[24..32].copy_from_slice(&sge.addr.to_be_bytes());
    // No session open: refused.
    let e = mlx5::push_raw_wqe(&mut p.a, 1, &wqe).unwrap_err();
    assert!(matches!(e.kind, PostErrorKind::BadState(_)), "{e}");
    for round in 0..3u64 {
        for k in 0..3 {
            p.b.post_recv(&[RecvWr::new(10 * round + k, &[p.mr_b.sge(0, 64).unwrap()])])
                .unwrap();
        }
        p.a.begin_send().unwrap();
        mlx5::push_raw_wqe(&mut p.a, 100 * round, &wqe).unwrap();
        p.a.push_send(&SendWr::send(100 * round + 1, &[sge]))
            .unwrap();
        let mut bad = wqe;
        bad[7] = 0;
        let e = mlx5::push_raw_wqe(&mut p.a, 7, &bad).unwrap_err();
        assert_eq!(e.index, 2);
        mlx5::push_raw_wqe(&mut p.a, 100 * round + 2, &wqe).unwrap();
        assert_eq!(p.a.send_pending(), Some(3));
        p.a.complete_send().unwrap();
        let ca = mlx5_pair::run_and_poll(&p.model, &mut p.cq_a, 3);
        let got: Vec<_> = ca.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
        assert_eq!(
            got,
            [
                (100 * round, WcStatus::SUCCESS, WcOpcode::DRIVER2),
                (100 * round + 1, WcStatus::SUCCESS, WcOpcode::SEND),
                (100 * round + 2, WcStatus::SUCCESS, WcOpcode::DRIVER2),
            ]
        );
        let cb = mlx5_pair::run_and_poll(&p.model, &mut p.cq_b, 3);
        assert!(cb.iter().all(|w| w.byte_len == 16), "{cb:?}");
    }
    mlx5_pair::assert_clean(&p.model);
}

/// On a QP of another provider (rxe, on the fake kernel) a raw WQE is
/// refused as a typed session of the wrong provider is.
#[test]
fn a_raw_wqe_on_an_rxe_qp_is_the_wrong_provider() {
    use uverbs::testing::rxe::{fake_rxe, DEV};
    use uverbs::{CqOptions, PostErrorKind, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState};
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, CqOptions::default()).unwrap();
    let mut qp = pd
        .create_qp(&QpInitAttr::ud(&cq, &cq).cap(QpCap::new(4, 4, 1, 1)))
        .unwrap();
    for (state, mask) in [
        (
            QpState::Init,
            QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY,
        ),
        (QpState::Rtr, QpAttrMask::STATE),
        (QpState::Rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN),
    ] {
        let attr = QpAttr::new().qp_state(state).port_num(1).qkey(0x11);
        qp.modify(&attr, mask).unwrap();
    }
    qp.begin_send().unwrap();
    let e = mlx5::push_raw_wqe(&mut qp, 1, &[0u8; 64]).unwrap_err();
    assert!(
        matches!(
            e.kind,
            PostErrorKind::WrongProvider {
                qp: "rxe",
                session: "mlx5"
            }
        ),
        "{e}"
    );
    assert_eq!(qp.send_pending(), Some(0));
    qp.abort_send();
}

/// `Mlx5Context::create_qp` (`mlx5dv_create_qp`): libmlx5 44's checks in
/// its order, the flags the kernel decides sent to it (the device model
/// refuses them as mlx5_ib does on its HCA, EOPNOTSUPP: the answer
/// libmlx5 gets there, capi/tests/c/mlx5dv.c), the scatter-to-CQE flags
/// taking nothing away, raw WQEs on RC, UC and UD and nothing else.
#[test]
fn mlx5_qps_take_mlx5s_attributes_as_libmlx5_checks_them() {
    use uverbs::mlx5::{DcType, Mlx5QpAttr, Mlx5QpCreateFlags as F, Mlx5SendOps as Ops};
    use uverbs::sys::Errno;
    use uverbs::{CqOptions, QpCap, QpCreateOptions, QpInitAttr, QpType};
    let model = fake_mlx5();
    let ctx = open(&model);
    let m = ctx.mlx5().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let init = |qp_type| QpInitAttr::new(qp_type, &cq, &cq).cap(QpCap::new(8, 8, 1, 1));
    let opts = QpCreateOptions::new();
    let attr = Mlx5QpAttr::default;
    type Row = (&'static str, QpType, Mlx5QpAttr, Option<(ErrorKind, Errno)>);
    let rows: [Row; 16] = [
        ("nothing", QpType::Rc, attr(), None),
        (
            "scatter disabled",
            QpType::Rc,
            attr().create_flags(F::DISABLE_SCATTER_TO_CQE),
            None,
        ),
        (
            "scatter allowed",
            QpType::Rc,
            attr().create_flags(F::ALLOW_SCATTER_TO_CQE),
            None,
        ),
        (
            "scatter both",
            QpType::Rc,
            attr().create_flags(F::DISABLE_SCATTER_TO_CQE | F::ALLOW_SCATTER_TO_CQE),
            Some((ErrorKind::InvalidArgument, Errno::EINVAL)),
        ),
        (
            "tunnel offloads",
            QpType::Rc,
            attr().create_flags(F::TUNNEL_OFFLOADS),
            Some((ErrorKind::Os, Errno::EOPNOTSUPP)),
        ),
        (
            "self loopback UC",
            QpType::Rc,
            attr().create_flags(F::TIR_ALLOW_SELF_LOOPBACK_UC),
            Some((ErrorKind::Os, Errno::EOPNOTSUPP)),
        ),
        (
            "packet-based credits",
            QpType::Rc,
            attr().create_flags(F::PACKET_BASED_CREDIT_MODE),
            Some((ErrorKind::Os, Errno::EOPNOTSUPP)),
        ),
        (
            "signature pipelining",
            QpType::Rc,
            attr().create_flags(F::SIG_PIPELINING),
            Some((ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP)),
        ),
        (
            "raw WQEs on RC",
            QpType::Rc,
            attr().send_ops(Ops::RAW_WQE),
            None,
        ),
        (
            "raw WQEs on UC",
            QpType::Uc,
            attr().send_ops(Ops::RAW_WQE),
            None,
        ),
        (
            "raw WQEs on UD",
            QpType::Ud,
            attr().send_ops(Ops::RAW_WQE),
            None,
        ),
        (
            "MR lists on RC",
            QpType::Rc,
            attr().send_ops(Ops::MR_LIST | Ops::RAW_WQE),
            Some((ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP)),
        ),
        (
            "memcpy on RC",
            QpType::Rc,
            attr().send_ops(Ops::MEMCPY),
            Some((ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP)),
        ),
        (
            "a DCI",
            QpType::Driver,
            attr().dc(DcType::Dci),
            Some((ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP)),
        ),
        (
            "a driver QP without DC",
            QpType::Driver,
            attr(),
            Some((ErrorKind::InvalidArgument, Errno::EINVAL)),
        ),
        (
            "a DCT on RC",
            QpType::Rc,
            attr().dc(DcType::Dct),
            Some((ErrorKind::InvalidArgument, Errno::EINVAL)),
        ),
    ];
    for (what, qp_type, a, want) in rows {
        let got = m.create_qp(&pd, &init(qp_type), &opts, a);
        match (got, want) {
            (Ok(qp), None) => assert_eq!(qp.qp_type(), qp_type, "{what}"),
            (Err(e), Some((kind, errno))) => {
                assert_eq!((e.kind(), e.errno()), (kind, errno), "{what}: {e}")
            }
            (Ok(_), Some(w)) => panic!("{what}: created, {w:?} expected"),
            (Err(e), None) => panic!("{what}: {e}"),
        }
    }
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

/// A QP made by `Mlx5Context::create_qp` with raw WQEs posts them, through
/// a typed session and through the session's calls, next to requests the
/// library builds.
#[test]
fn an_mlx5dv_qp_with_raw_wqes_posts_them() {
    use uverbs::mlx5::{Mlx5QpAttr, Mlx5SendOps};
    use uverbs::qp_ex::{Mlx5, Rc};
    use uverbs::{
        AccessFlags, CqOptions, QpCap, QpCreateOptions, QpInitAttr, SendOpsFlags, SendWr, WcOpcode,
        WcStatus,
    };
    let model = fake_mlx5();
    let ctx = open(&model);
    let m = ctx.mlx5().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(32, CqOptions::default()).unwrap();
    let mut qp = m
        .create_qp(
            &pd,
            &QpInitAttr::rc(&cq, &cq).cap(QpCap::new(8, 8, 1, 1)),
            &QpCreateOptions::new().send_ops(SendOpsFlags::RDMA_WRITE),
            Mlx5QpAttr::default().send_ops(Mlx5SendOps::RAW_WQE),
        )
        .unwrap();
    let all = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    qp_connect::to_rts(&qp, qp.qp_num(), mlx5_pair::gid(&ctx), 1, all, 7);
    let mr = pd.alloc_mr(4096, all).unwrap();
    mr.write(0, b"raw wqe!").unwrap();
    // An RDMA WRITE of 8 bytes to mr + 1024: ctrl, remote address, data.
    let mut wqe = [0u8; 48];
    wqe[0..4].copy_from_slice(&0x08_u32.to_be_bytes());
    wqe[4..8].copy_from_slice(&(qp.qp_num() << 8 | 3).to_be_bytes());
    wqe[11] = 0x08;
    wqe[16..24].copy_from_slice(&(mr.addr() + 1024).to_be_bytes());
    wqe[24..28].copy_from_slice(&mr.rkey().to_be_bytes());
    wqe[32..36].copy_from_slice(&8u32.to_be_bytes());
    wqe[36..40].copy_from_slice(&mr.lkey().to_be_bytes());
    wqe[40..48].copy_from_slice(&mr.addr().to_be_bytes());
    for round in 0..4u64 {
        mr.write(1024, &[0; 8]).unwrap();
        if round % 2 == 0 {
            let mut s = qp.start_wr::<Rc, Mlx5>().unwrap();
            s.raw_wqe(10 * round, &wqe).unwrap();
            s.complete().unwrap();
        } else {
            qp.begin_send().unwrap();
            uverbs::mlx5::push_raw_wqe(&mut qp, 10 * round, &wqe).unwrap();
            let src = [mr.sge(0, 8).unwrap()];
            let wr = SendWr::new(
                10 * round + 1,
                uverbs::SendOp::RdmaWrite {
                    remote_addr: mr.addr() + 2048,
                    rkey: mr.rkey(),
                },
                &src,
            );
            qp.push_send(&wr).unwrap();
            qp.complete_send().unwrap();
        }
        let n = if round % 2 == 0 { 1 } else { 2 };
        let wc = mlx5_pair::run_and_poll(&model, &mut cq, n);
        assert_eq!(
            (wc[0].wr_id, wc[0].status, wc[0].opcode),
            (10 * round, WcStatus::SUCCESS, WcOpcode::DRIVER2)
        );
        let mut got = [0u8; 8];
        mr.read(1024, &mut got).unwrap();
        assert_eq!(&got, b"raw wqe!", "round {round}");
    }
    mlx5_pair::assert_clean(&model);
}
