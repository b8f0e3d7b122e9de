//! `SYSFS_PATH`, as libibverbs honours it (`ibv_get_sysfs_path`,
//! `libibverbs/sysfs.c`): every sysfs read goes below it. A test binary of
//! its own, since it sets the process's environment.

use std::sync::atomic::Ordering;

use uverbs::testing::rxe::{fake_rxe, DEV, NODE_GUID};

#[test]
fn discovery_and_gid_reads_go_below_sysfs_path() {
    assert_eq!(uverbs::sysfs_path(), std::path::Path::new("/sys"));
    // The rxe fake's tree, moved below /model.
    let fake = fake_rxe();
    fake.behaviour.no_netlink.store(true, Ordering::Relaxed);
    let k = &fake.kernel;
    let sys = "/model/class/infiniband_verbs/uverbs0";
    let ib = "/model/class/infiniband/rxe0";
    k.file(format!("{sys}/ibdev"), "rxe0\n")
        .file(format!("{sys}/abi_version"), "2\n")
        .file(format!("{sys}/dev"), "231:192\n")
        .file(format!("{ib}/node_type"), "1: CA\n")
        .file(format!("{ib}/node_guid"), "0000:0000:0000:0007\n")
        .file(format!("{ib}/parent"), "dummy0\n");
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("SYSFS_PATH", "/model//");
    assert_eq!(uverbs::sysfs_path(), std::path::Path::new("/model"));
    let devs = uverbs::devices_with(&fake.dyn_kernel()).unwrap();
    assert_eq!(devs.len(), 1);
    assert_eq!((devs[0].name.as_str(), devs[0].node_guid), (DEV, 7));
    std::env::remove_var("SYSFS_PATH");
    let devs = uverbs::devices_with(&fake.dyn_kernel()).unwrap();
    assert_eq!(devs[0].node_guid, NODE_GUID, "back to /sys");
}
