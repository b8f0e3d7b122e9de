//! QP creation with options (`ProtectionDomain::create_qp_with`:
//! `ibv_create_qp_ex`'s creation flags and send operations) and the
//! capacities a QP reports, against the mlx5 device model (which answers
//! QP_CREATE as mlx5_ib 6.1 does on its HCA) and the rxe fake. The
//! capacities are libmlx5's for the same requests (worked by hand in
//! `providers/mlx5/qp_size/tests.rs`; `scripts/qp-sizing-model.sh` runs
//! libmlx5 itself on the model with them).

use uverbs::sys::Errno;
use uverbs::testing::mlx5::{fake_mlx5, fake_mlx5_with, Options};
use uverbs::testing::rxe::fake_rxe;
use uverbs::{
    CompletionQueue, Context, CqOptions, ErrorKind, PostErrorKind, ProtectionDomain, QpCap,
    QpCreateFlags, QpCreateOptions, QpInitAttr, QpType, QueuePair, SendOpsFlags, SendWr,
};

fn cap(send: u32, recv: u32, ssge: u32, rsge: u32, inline: u32) -> QpCap {
    QpCap::new(send, recv, ssge, rsge).max_inline_data(inline)
}

fn create(
    pd: &ProtectionDomain,
    cq: &CompletionQueue,
    qp_type: QpType,
    cap: QpCap,
    opts: QpCreateOptions,
) -> uverbs::Result<QueuePair> {
    pd.create_qp_with(&QpInitAttr::new(qp_type, cq, cq).cap(cap), &opts)
}

fn mlx5() -> (std::sync::Arc<uverbs::testing::mlx5::Mlx5Model>, Context) {
    let model = fake_mlx5();
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    (model, ctx)
}

#[test]
fn mlx5_qps_report_the_capacities_libmlx5_reports() {
    let (model, ctx) = mlx5();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64, CqOptions::default()).unwrap();
    let none = QpCreateOptions::new();
    let qp = create(&pd, &cq, QpType::Rc, cap(16, 16, 4, 4, 64), none).unwrap();
    assert_eq!(qp.cap(), cap(25, 16, 4, 4, 124));
    let qp = create(&pd, &cq, QpType::Ud, cap(4096, 4096, 15, 15, 0), none).unwrap();
    assert_eq!(qp.cap(), cap(6553, 4096, 15, 16, 252));
    // Declared operations size the send WQE: SEND alone leaves room for
    // 63 SGEs where RC's defaults (memory-window binds) leave 52.
    let e = create(&pd, &cq, QpType::Rc, cap(16, 16, 53, 4, 0), none).unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL, "{e}");
    let send = QpCreateOptions::new().send_ops(SendOpsFlags::SEND);
    let qp = create(&pd, &cq, QpType::Rc, cap(16, 16, 63, 4, 0), send).unwrap();
    assert_eq!(qp.cap(), cap(16, 16, 63, 4, 1004));
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

#[test]
fn an_mlx5_qp_without_a_send_queue_is_created_and_takes_no_send() {
    let (model, ctx) = mlx5();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let mut qp = create(
        &pd,
        &cq,
        QpType::Rc,
        cap(0, 1, 100, 1, 5000),
        QpCreateOptions::new(),
    )
    .unwrap();
    // libmlx5: no send queue, the inline size as asked, 4 receive WQEs.
    assert_eq!(qp.cap(), cap(0, 4, 100, 1, 5000));
    let e = qp.post_send(&[SendWr::send(1, &[])]).unwrap_err();
    assert!(
        matches!(
            e.kind,
            PostErrorKind::QueueFull | PostErrorKind::BadState(_)
        ),
        "{e}"
    );
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

#[test]
fn mlx5_creation_flags_are_the_kernels_to_check() {
    let (model, ctx) = mlx5();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let flags = |f| QpCreateOptions::new().create_flags(f);
    let small = cap(4, 4, 1, 1, 0);
    // The model's HCA has block_lb_mc: UD takes the flag.
    create(
        &pd,
        &cq,
        QpType::Ud,
        small,
        flags(QpCreateFlags::BLOCK_SELF_MCAST_LB),
    )
    .unwrap();
    // The core takes flags on UD and raw packet QPs only, SCATTER_FCS on
    // raw packet ones only (check_creation_flags: EINVAL).
    for (t, f) in [
        (QpType::Rc, QpCreateFlags::BLOCK_SELF_MCAST_LB),
        (QpType::Ud, QpCreateFlags::SCATTER_FCS),
        (QpType::Ud, QpCreateFlags::from_bits_retain(1 << 20)),
    ] {
        let e = create(&pd, &cq, t, small, flags(f)).unwrap_err();
        assert_eq!(e.errno(), Errno::EINVAL, "{t} {f:?}: {e}");
    }
    // A flag the device lacks (end_pad): EOPNOTSUPP.
    let e = create(
        &pd,
        &cq,
        QpType::Ud,
        small,
        flags(QpCreateFlags::PCI_WRITE_END_PADDING),
    )
    .unwrap_err();
    assert_eq!(e.errno(), Errno::EOPNOTSUPP, "{e}");
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

/// libmlx5 sizes a raw packet QP and sends the create; the model's device
/// has no raw Ethernet and refuses it with EOPNOTSUPP, which is the answer
/// rdma-core's programs get there, and so is ours. A capacity libmlx5
/// refuses is refused before (EINVAL).
#[test]
fn raw_packet_qps_get_the_devices_answer() {
    let (model, ctx) = mlx5();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let none = QpCreateOptions::new();
    let e = create(&pd, &cq, QpType::RawPacket, cap(16, 16, 1, 1, 0), none).unwrap_err();
    assert_eq!(e.errno(), Errno::EOPNOTSUPP, "{e}");
    assert_eq!(
        e.kernel_errno(),
        Some(Errno::EOPNOTSUPP),
        "the device's answer: {e}"
    );
    let e = create(&pd, &cq, QpType::RawPacket, cap(16, 16, 62, 1, 0), none).unwrap_err();
    assert_eq!(
        (e.kind(), e.errno()),
        (ErrorKind::InvalidArgument, Errno::EINVAL),
        "{e}"
    );
    // Nothing is left behind: the PD and CQ still destroy.
    cq.destroy().unwrap();
    pd.destroy().unwrap();
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

/// rdma-core's rxe takes no creation flag (`RXE_QP_CREATE_FLAGS_SUP` is
/// 0): EOPNOTSUPP before the kernel is asked.
#[test]
fn rxe_refuses_every_creation_flag() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let opts = QpCreateOptions::new().create_flags(QpCreateFlags::BLOCK_SELF_MCAST_LB);
    let e = create(&pd, &cq, QpType::Ud, cap(4, 4, 1, 1, 0), opts).unwrap_err();
    assert_eq!(e.errno(), Errno::EOPNOTSUPP, "{e}");
    // Without flags, and with declared operations (rxe sizes in the
    // kernel), the same QP is created.
    let opts = QpCreateOptions::new().send_ops(SendOpsFlags::SEND);
    create(&pd, &cq, QpType::Ud, cap(4, 4, 1, 1, 0), opts).unwrap();
}

/// A device that creates raw packet QPs (a ConnectX with Ethernet ports):
/// the provider, which has no raw Ethernet send path, destroys the QP it
/// got and says so (EOPNOTSUPP); nothing is left on the device.
#[test]
fn a_raw_packet_qp_the_device_creates_is_destroyed_again() {
    let model = fake_mlx5_with(Options {
        raw_packet_qps: true,
        ..Options::default()
    });
    let ctx = Context::open_with(model.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
    let e = create(
        &pd,
        &cq,
        QpType::RawPacket,
        cap(16, 16, 1, 1, 0),
        QpCreateOptions::new(),
    )
    .unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::UnsupportedProvider,
        "refused after the create: {e}"
    );
    assert_eq!(e.kernel_errno(), None);
    assert_eq!(model.raw_packet_qp_count(), 0, "destroyed");
    cq.destroy().unwrap();
    pd.destroy().unwrap();
    assert!(model.violations().is_empty(), "{:?}", model.violations());
}

/// The send operations a QP may be created with are the ones its provider
/// posts on its type (`Context::send_ops`), as rdma-core's providers
/// refuse the others at creation with EOPNOTSUPP: rxe's sets
/// (`RXE_SUP_*_QP_SEND_OPS_FLAGS`), mlx5's without windows,
/// invalidations and atomic writes; nothing on a type without a send
/// queue posted to.
#[test]
fn send_operations_are_the_providers_for_the_qp_type() {
    let all = SendOpsFlags::all() - SendOpsFlags::TSO;
    let sends = SendOpsFlags::SEND | SendOpsFlags::SEND_WITH_IMM;
    let writes = SendOpsFlags::RDMA_WRITE | SendOpsFlags::RDMA_WRITE_WITH_IMM;
    let rc_mlx5 = sends
        | writes
        | SendOpsFlags::RDMA_READ
        | SendOpsFlags::ATOMIC_CMP_AND_SWP
        | SendOpsFlags::ATOMIC_FETCH_AND_ADD;
    let windows = SendOpsFlags::BIND_MW | SendOpsFlags::SEND_WITH_INV;
    let rxe = fake_rxe();
    let rxe_ctx = Context::open_with(rxe.dyn_kernel(), None).unwrap();
    let (_model, mlx5_ctx) = mlx5();
    let table = [
        (
            &rxe_ctx,
            QpType::Rc,
            Some(all & SendOpsFlags::from_bits_truncate(0x13ff)),
        ),
        (&rxe_ctx, QpType::Uc, Some(sends | writes | windows)),
        (&rxe_ctx, QpType::Ud, Some(sends)),
        (&rxe_ctx, QpType::RawPacket, None),
        (&mlx5_ctx, QpType::Rc, Some(rc_mlx5)),
        (&mlx5_ctx, QpType::Uc, Some(sends | writes)),
        (&mlx5_ctx, QpType::Ud, Some(sends)),
        (&mlx5_ctx, QpType::RawPacket, None),
    ];
    for (ctx, qp_type, want) in table {
        assert_eq!(
            ctx.send_ops(qp_type),
            want,
            "{} {qp_type}",
            ctx.provider_name()
        );
    }
    for ctx in [&rxe_ctx, &mlx5_ctx] {
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(16, CqOptions::default()).unwrap();
        for qp_type in [QpType::Rc, QpType::Uc, QpType::Ud] {
            let posts = ctx.send_ops(qp_type).unwrap();
            // Everything it posts: created.
            let opts = QpCreateOptions::new().send_ops(posts);
            create(&pd, &cq, qp_type, cap(4, 4, 1, 1, 0), opts).unwrap();
            // Each operation it does not: refused, nothing created.
            for op in (SendOpsFlags::all() - posts).iter() {
                let opts = QpCreateOptions::new().send_ops(op);
                let e = create(&pd, &cq, qp_type, cap(4, 4, 1, 1, 0), opts).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::UnsupportedProvider, "{e}");
                assert_eq!(e.errno(), Errno::EOPNOTSUPP, "{e}");
            }
        }
    }
}
