//! Importing a context, its PD and its MR (`ibv_import_device`,
//! `ibv_import_pd`, `ibv_import_mr`) on the mlx5 device model, which
//! answers `QUERY_CONTEXT`, mlx5's `PD_QUERY` and `QUERY_MR` as Linux 6.1
//! does: pyverbs' test_shared_pd in Rust (a QP of the imported context,
//! on the imported PD, takes an RDMA write into the imported region, whose
//! memory is the exporter's), the handles' release semantics, and the
//! refusals (rxe, bad handles, an fd that is no device).

use std::os::fd::{AsFd, OwnedFd};

use uverbs::sys::Errno;
use uverbs::testing::mlx5::fake_mlx5;
use uverbs::testing::rxe::fake_rxe;
use uverbs::{AccessFlags, Context, CqOptions, ErrorKind, SendOp, SendWr};

use uverbs_test_support::mlx5_pair::*;

const ALL: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ);

#[test]
fn an_imported_context_uses_the_exporters_pd_and_region() {
    let model = fake_mlx5();
    let kernel = model.dyn_kernel();
    // The exporter: a PD and a region it owns.
    let server = open(&model);
    let pd = server.alloc_pd().unwrap();
    let mr = pd.alloc_mr(4096, ALL).unwrap();
    // The importer, on a duplicate of the exporter's command fd.
    let imported = Context::import(kernel.clone(), server.dup_cmd_fd().unwrap().as_fd()).unwrap();
    assert!(imported.is_imported() && !server.is_imported());
    assert_eq!(imported.num_comp_vectors(), server.num_comp_vectors());
    assert_eq!(imported.device().name, server.device().name);
    let ipd = imported.import_pd(pd.handle()).unwrap();
    assert!(ipd.is_imported() && !pd.is_imported());
    assert_eq!(ipd.handle(), pd.handle());
    let imr = ipd.import_mr(mr.handle()).unwrap();
    assert!(imr.is_imported());
    assert_eq!(
        (imr.lkey(), imr.rkey(), imr.len(), imr.addr(), imr.handle()),
        (mr.lkey(), mr.rkey(), mr.len(), mr.addr(), mr.handle())
    );
    assert!(imr.as_ptr().is_none(), "the memory is the exporter's");

    // A client on a context of its own RDMA-writes into the region through
    // a QP of the imported context on the imported PD.
    let mut icq = imported.create_cq(8, CqOptions::default()).unwrap();
    let iqp = create_qp(&ipd, uverbs::QpType::Rc, &icq, None, cap(4, 1, 0));
    let client = open(&model);
    let cpd = client.alloc_pd().unwrap();
    let mut ccq = client.create_cq(8, CqOptions::default()).unwrap();
    let cqp = create_qp(&cpd, uverbs::QpType::Rc, &ccq, None, cap(4, 1, 0));
    let cmr = cpd.alloc_mr(4096, ALL).unwrap();
    let g = gid(&client);
    connect(&cqp, iqp.qp_num(), g, 7);
    connect(&iqp, cqp.qp_num(), g, 7);
    cmr.write(0, b"written through an imported MR").unwrap();
    let sge = [cmr.sge(0, 30).unwrap()];
    let op = SendOp::RdmaWrite {
        remote_addr: imr.addr() + 100,
        rkey: imr.rkey(),
    };
    let mut cqp = cqp;
    cqp.post_send(&[SendWr::new(1, op, &sge)]).unwrap();
    let wc = run_and_poll(&model, &mut ccq, 1);
    assert_eq!(wc[0].status, uverbs::WcStatus::SUCCESS);
    let mut got = [0u8; 30];
    mr.read(100, &mut got).unwrap();
    assert_eq!(&got, b"written through an imported MR");
    // The importer's QP sends from the imported region with its lkey: the
    // same bytes go back into the client's region.
    let sge = [imr.sge(100, 30).unwrap()];
    let op = SendOp::RdmaWrite {
        remote_addr: cmr.addr() + 200,
        rkey: cmr.rkey(),
    };
    let mut iqp = iqp;
    iqp.post_send(&[SendWr::new(2, op, &sge)]).unwrap();
    let wc = run_and_poll(&model, &mut icq, 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (2, uverbs::WcStatus::SUCCESS));
    let mut back = [0u8; 30];
    cmr.read(200, &mut back).unwrap();
    assert_eq!(&back, b"written through an imported MR");
    drop((iqp, icq));

    // Letting go of the imported handles leaves the kernel objects.
    let regions = model.mr_count();
    imr.unimport().unwrap();
    ipd.unimport().unwrap();
    assert_eq!(model.mr_count(), regions);
    drop(imported);
    // The exporter's still work, and destroy as usual.
    mr.destroy().unwrap();
    assert_eq!(model.mr_count(), regions - 1);
    pd.destroy().unwrap();
    assert_clean(&model);
}

#[test]
fn destroying_an_imported_region_deregisters_it_for_its_owner_too() {
    let model = fake_mlx5();
    let server = open(&model);
    let pd = server.alloc_pd().unwrap();
    let mr = pd.alloc_mr(4096, ALL).unwrap();
    let imported =
        Context::import(model.dyn_kernel(), server.dup_cmd_fd().unwrap().as_fd()).unwrap();
    let imr = imported
        .import_pd(pd.handle())
        .unwrap()
        .import_mr(mr.handle())
        .unwrap();
    let regions = model.mr_count();
    imr.destroy().unwrap();
    assert_eq!(
        model.mr_count(),
        regions - 1,
        "ibv_dereg_mr on an imported MR"
    );
    // The owner's deregistration now finds no region (EINVAL).
    assert_eq!(mr.destroy().unwrap_err().errno(), Errno::EINVAL);
}

#[test]
fn unimport_gives_back_what_was_not_imported() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(4096, ALL).unwrap();
    let e = mr.unimport().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let mr = e.into_inner();
    let e = pd.unimport().unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL);
    let pd = e.into_inner();
    // Both still owned, and destroyed by their owner.
    mr.destroy().unwrap();
    pd.destroy().unwrap();
    assert_eq!(model.mr_count(), 0);
}

/// The kernel's answers for a handle of no object (ENOENT) and of another
/// type (EINVAL; 6.1 rdma_core.c `uverbs_get_uobject_from_file`).
#[test]
fn bad_handles_are_the_kernels_enoent_or_einval() {
    let model = fake_mlx5();
    let ctx = open(&model);
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(4096, ALL).unwrap();
    let fd = ctx.dup_cmd_fd().unwrap();
    let imported = Context::import(model.dyn_kernel(), fd.as_fd()).unwrap();
    let e = imported.import_pd(pd.handle() + 100).unwrap_err();
    assert_eq!(e.errno(), Errno::ENOENT, "{e}");
    let e = imported.import_pd(mr.handle()).unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL, "{e}");
    let ipd = imported.import_pd(pd.handle()).unwrap();
    assert_eq!(ipd.import_mr(12345).unwrap_err().errno(), Errno::ENOENT);
    assert_eq!(
        ipd.import_mr(pd.handle()).unwrap_err().errno(),
        Errno::EINVAL
    );
}

/// rdma-core's rxe has no import ops: EOPNOTSUPP, which pyverbs takes for
/// "not supported" (its rxe kernel driver has no `query_ucontext` either).
#[test]
fn rxe_imports_nothing() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), None).unwrap();
    let e = Context::import(fake.dyn_kernel(), ctx.dup_cmd_fd().unwrap().as_fd()).unwrap_err();
    assert_eq!(
        (e.kind(), e.errno()),
        (ErrorKind::UnsupportedProvider, Errno::EOPNOTSUPP),
        "{e}"
    );
    let e = ctx.import_pd(1).unwrap_err();
    assert_eq!(e.errno(), Errno::EOPNOTSUPP, "{e}");
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    assert_eq!(
        pd.import_mr(mr.handle()).unwrap_err().errno(),
        Errno::EOPNOTSUPP
    );
}

/// On the running kernel: an fd that is no character device is EINVAL,
/// and a character device no RDMA device has (`/dev/null`) is ENODEV, as
/// libibverbs answers; nothing is sent to the fd.
#[test]
fn an_fd_that_is_no_rdma_device_is_refused() {
    let (r, _w) = nix::unistd::pipe().unwrap();
    let e = Context::import(uverbs::sys::linux(), r.as_fd()).unwrap_err();
    assert_eq!(e.errno(), Errno::EINVAL, "{e}");
    let null: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    let e = Context::import(uverbs::sys::linux(), null.as_fd()).unwrap_err();
    assert_eq!(e.errno(), Errno::ENODEV, "{e}");
}
