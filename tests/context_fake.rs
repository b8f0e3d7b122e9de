//! Discovery, context creation, queries and the ioctl → write fallback,
//! driven through the fake kernel (`uverbs::testing::rxe`). The same
//! paths run against the real kernel in `tests/device/`.

use std::sync::atomic::Ordering;

use uverbs::testing::rxe::*;
use uverbs::{
    abi,
    sys::{fake::Call, Errno},
    CommandMode, Context, ErrorKind, GidType, LinkLayer, Mtu, NodeType, PortState,
};

fn ioctl_calls(calls: &[Call]) -> Vec<(u16, u16)> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Ioctl { object, method } => Some((*object, *method)),
            _ => None,
        })
        .collect()
}

fn write_calls(calls: &[Call]) -> Vec<u32> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Write(cmd) => Some(*cmd),
            _ => None,
        })
        .collect()
}

#[test]
fn discovery_uses_netlink_first() {
    let fake = fake_rxe();
    let devs = uverbs::devices_with(&fake.dyn_kernel()).unwrap();
    assert_eq!(devs.len(), 1);
    let d = &devs[0];
    assert_eq!(d.name, DEV);
    assert_eq!(d.uverbs_name, "uverbs0");
    assert_eq!(d.path.to_str(), Some("/dev/infiniband/uverbs0"));
    assert_eq!(d.node_guid, NODE_GUID);
    assert_eq!(d.node_type, NodeType::Ca);
    assert_eq!(d.driver_id, Some(abi::RDMA_DRIVER_RXE));
    assert_eq!(d.abi_version, 2);
    assert_eq!(d.index, Some(3));
    assert_eq!(d.port_count, Some(1));
    assert_eq!(d.dev, Some(libc::makedev(231, 192)));
}

#[test]
fn discovery_falls_back_to_sysfs_without_netlink() {
    let fake = fake_rxe();
    fake.behaviour.no_netlink.store(true, Ordering::Relaxed);
    let devs = uverbs::devices_with(&fake.dyn_kernel()).unwrap();
    assert_eq!(devs.len(), 1);
    let d = &devs[0];
    assert_eq!((d.name.as_str(), d.uverbs_name.as_str()), (DEV, "uverbs0"));
    assert_eq!(d.node_guid, NODE_GUID);
    assert_eq!(d.driver_id, Some(abi::RDMA_DRIVER_RXE));
    assert_eq!(d.abi_version, 2);
    assert_eq!(d.index, None);
    assert_eq!(d.dev, Some(libc::makedev(231, 192)));
}

#[test]
fn open_uses_ioctls_and_allocates_the_async_fd_first() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    assert_eq!(ctx.num_comp_vectors(), 2);
    assert_eq!(ctx.core_support(), 1);
    assert_eq!(ctx.provider_name(), "rxe");
    assert_eq!(ctx.command_mode(), CommandMode::Auto);
    assert_eq!(
        ioctl_calls(&fake.kernel.calls()),
        vec![
            (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_GET_CONTEXT),
            (
                abi::UVERBS_OBJECT_ASYNC_EVENT,
                abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC
            ),
        ]
    );
    assert!(write_calls(&fake.kernel.calls()).is_empty());
}

#[test]
fn without_ioctl_support_everything_falls_back_to_write() {
    let fake = fake_rxe();
    fake.behaviour.no_ioctl.store(true, Ordering::Relaxed);
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    assert_eq!(ctx.num_comp_vectors(), 2);
    // The write-mode GET_CONTEXT created the async fd; no ASYNC_EVENT_ALLOC.
    assert_eq!(ctx.command_mode(), CommandMode::WriteOnly);
    let port = ctx.query_port(1).unwrap();
    assert_eq!(port.state, PortState::Active);
    let calls = fake.kernel.calls();
    // One ioctl tried (GET_CONTEXT, ENOTTY), then writes only.
    assert_eq!(ioctl_calls(&calls).len(), 1);
    assert_eq!(
        write_calls(&calls),
        vec![
            abi::IB_USER_VERBS_CMD_GET_CONTEXT,
            abi::IB_USER_VERBS_CMD_QUERY_PORT
        ]
    );
}

#[test]
fn a_missing_method_falls_back_for_that_verb_and_is_remembered() {
    let fake = fake_rxe();
    fake.behaviour
        .no_query_methods
        .store(true, Ordering::Relaxed);
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    fake.kernel.clear_calls();
    let first = ctx.query_port(1).unwrap();
    let second = ctx.query_port(1).unwrap();
    assert_eq!(first, second);
    let calls = fake.kernel.calls();
    assert_eq!(
        ioctl_calls(&calls),
        vec![(abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_PORT)],
        "the second query must go straight to write()"
    );
    assert_eq!(write_calls(&calls).len(), 2);
    // The GID table comes from sysfs then, with the same content.
    let table = ctx.query_gid_table().unwrap();
    assert_eq!(table.len(), 2);
    assert_eq!(table[1].gid.0, IPV4_GID);
    assert_eq!(table[1].gid_type, GidType::RoceV2);
    assert_eq!(table[1].netdev_ifindex, 2);
}

#[test]
fn write_only_mode_gives_the_same_answers_as_ioctl_mode() {
    let fake = fake_rxe();
    let dev = uverbs::find_device(&fake.dyn_kernel(), Some(DEV)).unwrap();
    let a = Context::open_device(fake.dyn_kernel(), dev.clone()).unwrap();
    let b = Context::open_device_with_mode(fake.dyn_kernel(), dev, CommandMode::WriteOnly).unwrap();
    assert_eq!(a.query_device().unwrap(), b.query_device().unwrap());
    let (pa, pb) = (a.query_port(1).unwrap(), b.query_port(1).unwrap());
    // port_cap_flags2 only exists in the ioctl response.
    assert_eq!(pa.port_cap_flags2.bits(), 0x20);
    assert_eq!(pb.port_cap_flags2.bits(), 0);
    assert_eq!(
        {
            let mut v = pa;
            v.port_cap_flags2 = uverbs::PortCapFlags2::empty();
            v
        },
        pb
    );
    let ta = a.query_gid_table().unwrap();
    let tb = b.query_gid_table().unwrap();
    assert_eq!(ta, tb);
}

#[test]
fn device_attributes_are_decoded() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), None).unwrap();
    let a = ctx.query_device().unwrap();
    assert_eq!(a.fw_ver, "0.0.0");
    assert_eq!(a.node_guid, NODE_GUID);
    assert_eq!(a.vendor_id, 0xffffff);
    assert_eq!(a.max_qp_wr, 1_048_576);
    assert_eq!(a.device_cap_flags.bits(), 0x0122_3c76);
    assert_eq!(a.device_cap_flags_ex.bits(), 0x0122_3c76);
    assert_eq!(a.max_srq_sge, 27);
    assert_eq!(a.phys_port_cnt, 1);
    let p = ctx.query_port(1).unwrap();
    assert_eq!(p.max_mtu, Mtu(5));
    assert_eq!(p.active_mtu.bytes(), Some(1024));
    assert_eq!(p.link_layer, LinkLayer::Ethernet);
    assert_eq!(p.gid_tbl_len, 1024);
}

#[test]
fn gid_queries() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), None).unwrap();
    let g = ctx.query_gid(1, 1).unwrap().unwrap();
    assert_eq!(g.gid.to_string(), "::ffff:192.0.2.1");
    assert_eq!(ctx.query_gid(1, 7).unwrap(), None, "an empty slot is None");
    let err = ctx.query_gid(1, 5000).unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL);
    assert!(err.to_string().contains("port 1 index 5000"), "{err}");
}

#[test]
fn a_bad_port_number_is_explained() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), None).unwrap();
    let err = ctx.query_port(2).unwrap_err();
    assert_eq!(err.errno(), Errno::EINVAL);
    // The one-line report (`{:#}`, what the CLI prints) names the errno;
    // `Display` is the short form.
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with("UVERBS_METHOD_QUERY_PORT failed: EINVAL"),
        "{msg}"
    );
    assert!(msg.contains("port 2 does not exist"), "{msg}");
    assert_eq!(
        err.to_string(),
        "UVERBS_METHOD_QUERY_PORT failed: port 2 does not exist \
         (ports are numbered from 1 to phys_port_cnt)"
    );
}

#[test]
fn unknown_device_names_list_the_available_ones() {
    let fake = fake_rxe();
    let err = Context::open_with(fake.dyn_kernel(), Some("mlx5_9")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoDevice);
    assert!(err.to_string().contains("available: rxe0"), "{err}");
}

#[test]
fn open_errors_name_the_node_and_the_fix() {
    let fake = fake_rxe();
    fake.kernel.fail_open(Errno::EACCES);
    let err = Context::open_with(fake.dyn_kernel(), None).unwrap_err();
    assert_eq!(err.errno(), Errno::EACCES);
    assert!(
        err.to_string()
            .contains("/dev/infiniband/uverbs0 needs read-write access"),
        "{err}"
    );
}

#[test]
fn a_renamed_node_is_detected_by_its_device_number() {
    let fake = fake_rxe();
    fake.kernel.char_dev(libc::makedev(231, 193));
    let err = Context::open_with(fake.dyn_kernel(), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoDevice);
    assert!(err.to_string().contains("device number changed"), "{err}");
}

#[test]
fn unsupported_drivers_and_abi_versions_are_refused_before_any_command() {
    let fake = fake_rxe();
    let mut dev = uverbs::find_device(&fake.dyn_kernel(), None).unwrap();
    fake.kernel.clear_calls();
    let mut siw = dev.clone();
    siw.driver_id = Some(abi::RDMA_DRIVER_SIW);
    let err = Context::open_device(fake.dyn_kernel(), siw).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnsupportedProvider);
    assert!(err.to_string().contains("driver id 18 (siw)"), "{err}");
    dev.abi_version = 7;
    let err = Context::open_device(fake.dyn_kernel(), dev).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AbiVersion);
    assert!(
        fake.kernel.calls().is_empty(),
        "nothing may reach the kernel"
    );
}

/// A QP type rxe has no queues for is refused with `EOPNOTSUPP`, the
/// kernel's answer (rxe_qp.c `rxe_qp_chk_init`), so that C programs read it
/// as "not supported here" (pyverbs' raw packet tests skip on it), before
/// any command.
#[test]
fn rxe_refuses_other_qp_types_as_the_kernel_does() {
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), Some(DEV)).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, uverbs::CqOptions::default()).unwrap();
    fake.kernel.clear_calls();
    let err = pd
        .create_qp(
            &uverbs::QpInitAttr::new(uverbs::QpType::RawPacket, &cq, &cq)
                .cap(uverbs::QpCap::new(4, 4, 1, 1)),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnsupportedProvider, "{err}");
    assert_eq!(err.errno(), Errno::EOPNOTSUPP);
    assert!(
        fake.kernel.calls().is_empty(),
        "nothing may reach the kernel"
    );
}

/// `Context::close` with objects alive (issue 39 item 4; what
/// `ibv_close_device` does): every handle sees it closed, handles the
/// objects make afterwards lend a placeholder fd that never polls readable
/// (the one every closed context lends), and no command of theirs reaches
/// the kernel (`EBADF`); dropping the objects then leaks them (their
/// destroys are refused) without panicking. That the fds themselves are
/// closed is `providers::context_fds`' unit and loom tests, and over the rxe
/// kernel `capi/tests/c/close_device.c` (tests/device/cabi.rs).
#[test]
fn close_ends_the_context_while_its_objects_live() {
    use std::os::fd::{AsFd, AsRawFd};
    let fake = fake_rxe();
    let ctx = Context::open_with(fake.dyn_kernel(), None).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(4, uverbs::CqOptions::default()).unwrap();
    let async_fd = ctx.async_fd().as_raw_fd();
    let clone = ctx.clone();
    assert!(!clone.is_closed());
    ctx.close().unwrap();
    assert!(clone.is_closed(), "every handle sees the close");
    drop(clone);
    let calls = fake.kernel.calls().len();
    let again = pd.context();
    assert!(again.is_closed());
    let lent = again.async_fd();
    assert_ne!(
        lent.as_raw_fd(),
        async_fd,
        "made while the async fd was open"
    );
    let mut p = [nix::poll::PollFd::new(
        lent.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    assert_eq!(nix::poll::poll(&mut p, 0u8), Ok(0), "never readable");
    let e = again.alloc_pd().unwrap_err();
    assert_eq!(e.kernel_errno(), Some(Errno::EBADF), "{e}");
    let e = again.try_get_async_event().unwrap_err();
    assert_eq!(e.kernel_errno(), Some(Errno::EBADF), "{e}");
    // A second closed context lends the same placeholder.
    let other = Context::open_with(fake.dyn_kernel(), None).unwrap();
    let other_pd = other.alloc_pd().unwrap();
    other.close().unwrap();
    assert_eq!(
        other_pd.context().async_fd().as_raw_fd(),
        again.async_fd().as_raw_fd()
    );
    let calls_after = fake.kernel.calls().len();
    drop((cq, pd, again, other_pd));
    assert_eq!(
        fake.kernel.calls().len(),
        calls_after,
        "the drops send no destroy"
    );
    assert!(calls_after > calls, "the second context was opened");
}
