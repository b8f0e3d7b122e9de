//! mlx5 DevX on the device under test.
//!
//! On rxe (the test guest) these check what a user of another driver gets:
//! DevX and the mlx5 view refused with an error naming the driver, before
//! any command reaches the kernel. On a ConnectX (`UVERBS_TEST_DEVICE=mlx5_0
//! scripts/guest-test.sh --host`) they run the hardware suite's DevX part:
//! the scenario after rdma-core's `tests/test_mlx5_devx_async_events.py`
//! in `tests/support/src/devx_overrun.rs` (a DevX CQ overrun on purpose by a
//! DevX UD QP posting NOPs, its CQ_ERROR read by cookie and by eventfd,
//! DevX commands on verbs objects), and the UMEM lifetimes of
//! `tests/support/src/devx_umem.rs`: a DevX CQ keeping the UMEMs its command
//! names although their handles went first, and the firmware's own answer
//! to `DESTROY_UMEM` of a UMEM a live CQ names (printed; the device model
//! answers `EINVAL`, a guess at the status: no public source gives it),
//! with the library leaking the memory of a UMEM whose deregistration is
//! refused. The host tests run the same scenarios on the device model;
//! here they have not run on hardware.

use uverbs::{
    mlx5::{self, OpenFlags},
    Context, ErrorKind,
};

use crate::support;

use uverbs_test_support::{devx_overrun, devx_umem};

#[test]
fn devx_on_the_device_under_test() {
    let ctx = support::open();
    match ctx.provider_name() {
        "mlx5" => mlx5_devx(ctx),
        other => {
            // Not mlx5: refused, naming the driver, before the kernel.
            let err = ctx.mlx5().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::UnsupportedProvider);
            assert!(err.to_string().contains(other), "{err}");
            let k = uverbs::sys::linux();
            let dev = uverbs::find_device(&k, Some(&crate::test_device())).unwrap();
            let err = mlx5::open_device(k, dev, OpenFlags::DEVX).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::UnsupportedProvider, "{err}");
        }
    }
}

/// The hardware part (mlx5 only): the scenarios shared with the host
/// tests, on the device under test.
fn mlx5_devx(_opened_without_devx: Context) {
    let k = uverbs::sys::linux();
    let dev = uverbs::find_device(&k, Some(&crate::test_device())).unwrap();
    let ctx = mlx5::open_device(k.clone(), dev, OpenFlags::DEVX).unwrap_or_else(|e| panic!("{e}"));
    let mlx5 = ctx.mlx5().unwrap();
    let devx = mlx5.devx().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let pdn = mlx5.pd_number(&pd).unwrap();
    devx_overrun::query_devx_cq(&devx, pdn);
    devx_overrun::cq_overrun_by_cookie(&devx, pdn, &|| {});
    devx_overrun::cq_overrun_by_eventfd(&devx, pdn, &|| {});
    devx_overrun::verbs_qp_through_devx(&ctx, &pd, &devx);
    devx_umem::cq_keeps_the_umems_its_command_names(&devx, pdn, &|| {}, &|| {});
    let refused = devx_umem::umem_dereg_while_a_cq_uses_it(&devx, &*k, pdn, &|| {});
    eprintln!(
        "firmware: DESTROY_UMEM of a UMEM a live DevX CQ names is refused, \
         UMEM_DEREG answering {refused:?} (the device model answers EINVAL)"
    );
}
