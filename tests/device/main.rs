//! Tests against a real RDMA device: the rxe test guest (`scripts/guest-test.sh`
//! boots kernels 6.1 and 6.12 and runs this binary there), or hardware named
//! by `UVERBS_TEST_DEVICE` on a host that has one.
//!
//! Built only with `--features device-tests`. Without a device these tests
//! fail: they are never skipped.
//!
//! Environment (exported by the guest's init):
//! - `UVERBS_TEST_DEVICE`: the device to test (`rxe0`);
//! - `UVERBS_TEST_GID_INDEX`: the RoCE v2 GID of `UVERBS_TEST_IP`;
//! - `UVERBS_TEST_IP`: the IPv4 address of the netdev under the device;
//! - `UVERBS_BIN`: the `uverbs` CLI to test;
//! - `UVERBS_CABI_DIR`: the C library and its stubs (capi/), for `cabi*.rs`.

use uverbs_test_support::{bounded, devinfo_compare, qp_connect, typed_wr};

mod async_events;
#[cfg(feature = "tokio")]
mod async_tokio;
mod buffer_pool;
mod cabi;
mod cabi_perftest;
mod cabi_run;
mod channel;
mod cm;
mod cm_ep;
mod context;
mod cq_ex;
mod devinfo;
mod devx;
mod event_stream;
mod faults;
mod import_fork;
mod memory_window;
mod objects;
mod owned_mr;
mod parent_domain;
mod perf;
mod pingpong;
mod porting;
mod resize_cq;
mod send_batch;
mod send_flags;
mod shared_qp;
mod soak;
mod split_recv;
mod static_cli;
mod stress;
mod support;
mod typed_post;
mod verbs;

/// The device under test; panics with instructions when none is configured.
pub fn test_device() -> String {
    std::env::var("UVERBS_TEST_DEVICE").unwrap_or_else(|_| {
        panic!(
            "UVERBS_TEST_DEVICE is not set: the device tests need an RDMA device. Run them \
             with scripts/guest-test.sh (rxe in a QEMU guest), or set UVERBS_TEST_DEVICE=<dev> \
             on a host with a real device"
        )
    })
}

/// An environment variable the guest exports, parsed.
pub fn test_env<T: std::str::FromStr>(name: &str) -> T {
    let raw = std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    raw.parse()
        .unwrap_or_else(|_| panic!("{name}={raw:?} does not parse"))
}

/// The directory of the example binaries: `UVERBS_EXAMPLES_DIR` (set by
/// scripts/guest-test.sh in the guest), else cargo's layout next to this
/// test binary (`target/<profile>/deps/device-*` -> `target/<profile>/examples`).
pub fn example(name: &str) -> std::path::PathBuf {
    let dir = match std::env::var_os("UVERBS_EXAMPLES_DIR").filter(|d| !d.is_empty()) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .join("../examples"),
    };
    let p = dir.join(name);
    assert!(
        p.is_file(),
        "example {} not found (build with `cargo build --examples`, or set UVERBS_EXAMPLES_DIR)",
        p.display()
    );
    p
}
