//! `uverbs::mlx5`'s direct-verbs API (the counterpart of `mlx5dv.h`)
//! against the device model (`uverbs::testing::mlx5`): what
//! `mlx5dv_query_device` reports, the raw clock of `ibv_query_rt_values_ex`.
//! The C library's libmlx5.so.1 is these functions; its transcripts are
//! compared with rdma-core's libmlx5 in scripts/rdma-core-on-model.sh.

use uverbs::mlx5::{self, Mlx5DeviceFlags};
use uverbs::testing::mlx5::{fake_mlx5, fake_mlx5_with, Options};
use uverbs::{Context, ErrorKind};

#[path = "shared/mlx5_pair.rs"]
mod mlx5_pair;
#[path = "shared/qp_connect.rs"]
mod qp_connect;
use mlx5_pair::open;

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
        assert_eq!(a.max_dynamic_bfregs, m.attr().num_dyn_bfregs);
        assert_eq!(a.num_lag_ports, None);
        assert_eq!(a.max_wr_memcpy_length, 0);
        // The model maps both clock pages.
        assert!(a.hca_core_clock);
        assert!(m.core_clock_ptr().is_some());
        assert_eq!(
            a.max_clock_info_update_nsec,
            m.attr().max_clock_info_update_nsec
        );
        assert!(a.max_clock_info_update_nsec.is_some());
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
