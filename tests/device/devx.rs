//! mlx5 DevX on the device under test.
//!
//! On rxe (the test guest) these check what a user of another driver gets:
//! DevX and the mlx5 view refused with an error naming the driver, before
//! any command reaches the kernel. On a ConnectX (`UVERBS_TEST_DEVICE=mlx5_0
//! scripts/guest-test.sh --host`) they run the hardware suite's DevX part:
//! the scenario after rdma-core's `tests/test_mlx5_devx_async_events.py`
//! in `tests/shared/devx_overrun.rs` (a DevX CQ overrun on purpose by a
//! DevX UD QP posting NOPs, its CQ_ERROR read by cookie and by eventfd,
//! DevX commands on verbs objects). The host tests run the same scenario
//! on the device model; here it has not run on hardware.

use uverbs::{
    mlx5::{self, OpenFlags},
    Context, ErrorKind,
};

use crate::support;

#[path = "../shared/devx_overrun.rs"]
mod devx_overrun;

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

/// The hardware part (mlx5 only): the scenario shared with the host
/// tests, on the device under test.
fn mlx5_devx(_opened_without_devx: Context) {
    let k = uverbs::sys::linux();
    let dev = uverbs::find_device(&k, Some(&crate::test_device())).unwrap();
    let ctx = mlx5::open_device(k, dev, OpenFlags::DEVX).unwrap_or_else(|e| panic!("{e}"));
    let mlx5 = ctx.mlx5().unwrap();
    let devx = mlx5.devx().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let pdn = mlx5.pd_number(&pd).unwrap();
    devx_overrun::query_devx_cq(&devx, pdn);
    devx_overrun::cq_overrun_by_cookie(&devx, pdn, &|| {});
    devx_overrun::cq_overrun_by_eventfd(&devx, pdn, &|| {});
    devx_overrun::verbs_qp_through_devx(&ctx, &pd, &devx);
}
