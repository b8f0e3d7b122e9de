//! Discovery, opening and queries on the real kernel, compared with what the
//! kernel exports in sysfs and with the write-command paths.

use std::{fs, net::Ipv4Addr, os::fd::AsRawFd, path::Path};

use uverbs::{abi, CommandMode, Context, GidType, LinkLayer, NodeType, PortState};

use crate::{test_device, test_env};

fn sysfs(path: &str) -> String {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {path}: {e}"))
        .trim()
        .to_string()
}

fn open(mode: CommandMode) -> Context {
    let name = test_device();
    let dev =
        uverbs::find_device(&uverbs::sys::linux(), Some(&name)).unwrap_or_else(|e| panic!("{e}"));
    Context::open_device_with_mode(uverbs::sys::linux(), dev, mode)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn discovery_matches_sysfs() {
    let name = test_device();
    let devs = uverbs::devices().unwrap_or_else(|e| panic!("{e}"));
    let d = devs
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("{name} not in {devs:?}"));
    let class = format!("/sys/class/infiniband_verbs/{}", d.uverbs_name);
    assert_eq!(sysfs(&format!("{class}/ibdev")), name);
    assert_eq!(
        sysfs(&format!("{class}/abi_version"))
            .parse::<u32>()
            .unwrap(),
        d.abi_version
    );
    let (major, minor) = sysfs(&format!("{class}/dev"))
        .split_once(':')
        .map(|(a, b)| (a.parse::<u32>().unwrap(), b.parse::<u32>().unwrap()))
        .unwrap();
    assert_eq!(d.dev, Some(libc::makedev(major, minor)), "netlink CHARDEV");
    let guid = sysfs(&format!("/sys/class/infiniband/{name}/node_guid")).replace(':', "");
    assert_eq!(format!("{:016x}", d.node_guid), guid);
    assert_eq!(d.node_type, NodeType::Ca);
    assert!(d.index.is_some(), "netlink discovery must have been used");
    assert!(Path::new(&d.path).exists());
    if name.starts_with("rxe") {
        assert_eq!(d.driver_id, Some(abi::RDMA_DRIVER_RXE));
        assert_eq!(d.abi_version, 2);
    }
}

#[test]
fn open_and_query_device() {
    let ctx = open(CommandMode::Auto);
    assert_eq!(ctx.command_mode(), CommandMode::Auto);
    assert!(ctx.num_comp_vectors() >= 1);
    let a = ctx.query_device().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.node_guid, ctx.device().node_guid);
    assert_eq!(Some(u32::from(a.phys_port_cnt)), ctx.device().port_count);
    assert!(a.max_qp > 0 && a.max_cqe > 0 && a.max_sge > 0);
    if ctx.provider_name() == "rxe" {
        // Values from drivers/infiniband/sw/rxe/rxe_param.h.
        assert_eq!(a.vendor_id, 0xffffff);
        assert_eq!(a.max_sge, 32);
        assert_eq!(a.max_srq_sge, 27);
        assert_eq!(a.max_pkeys, 64);
        assert_eq!(a.local_ca_ack_delay, 15);
        assert_eq!(a.atomic_cap, 1);
        assert_eq!(a.fw_ver, "0.0.0");
    }
}

/// The provider-specific API answers for its own driver only: on mlx5 the
/// view reports the context's geometry, on any other driver the error names
/// the provider the device has.
#[test]
fn the_mlx5_view_is_only_for_mlx5_devices() {
    let ctx = open(CommandMode::Auto);
    match ctx.provider_name() {
        "mlx5" => {
            let attr = ctx.mlx5().unwrap_or_else(|e| panic!("{e}")).attr();
            assert!(attr.cqe_version <= 1);
            assert!(attr.num_uars_per_page >= 1);
        }
        other => {
            let err = ctx.mlx5().unwrap_err();
            assert_eq!(err.kind(), uverbs::ErrorKind::UnsupportedProvider);
            let text = err.to_string();
            assert!(text.contains(other) && text.contains("mlx5_ib"), "{text}");
        }
    }
}

#[test]
fn query_port_matches_sysfs() {
    let ctx = open(CommandMode::Auto);
    let name = &ctx.device().name;
    let p = ctx.query_port(1).unwrap_or_else(|e| panic!("{e}"));
    let state: u8 = sysfs(&format!("/sys/class/infiniband/{name}/ports/1/state"))
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(p.state.raw(), state);
    assert_eq!(p.state, PortState::Active, "the guest waits for ACTIVE");
    let ll = sysfs(&format!("/sys/class/infiniband/{name}/ports/1/link_layer"));
    let expected = if ll == "Ethernet" {
        LinkLayer::Ethernet
    } else {
        LinkLayer::InfiniBand
    };
    assert_eq!(p.link_layer, expected);
    assert!(p.gid_tbl_len > 0);
    assert!(p.active_mtu <= p.max_mtu);
    let err = ctx.query_port(99).unwrap_err();
    assert!(err.to_string().contains("port 99 does not exist"), "{err}");
}

#[test]
fn write_commands_agree_with_ioctls() {
    let ioctl = open(CommandMode::Auto);
    let write = open(CommandMode::WriteOnly);
    assert_eq!(write.command_mode(), CommandMode::WriteOnly);
    assert_eq!(ioctl.num_comp_vectors(), write.num_comp_vectors());
    assert_eq!(ioctl.query_device().unwrap(), write.query_device().unwrap());
    let (a, b) = (ioctl.query_port(1).unwrap(), write.query_port(1).unwrap());
    // The write response has no port_cap_flags2.
    assert_eq!(
        {
            let mut v = a;
            v.port_cap_flags2 = uverbs::PortCapFlags2::empty();
            v
        },
        b
    );
    let ta = ioctl.query_gid_table().unwrap();
    let tb = write.query_gid_table().unwrap(); // sysfs path
    assert_eq!(ta, tb, "ioctl GID table vs sysfs");
}

#[test]
fn gid_table_has_the_roce_v2_ipv4_gid() {
    let ctx = open(CommandMode::Auto);
    let index: u32 = test_env("UVERBS_TEST_GID_INDEX");
    let ip: Ipv4Addr = test_env("UVERBS_TEST_IP");
    let table = ctx.query_gid_table().unwrap_or_else(|e| panic!("{e}"));
    let entry = table
        .iter()
        .find(|e| e.index == index && e.port == 1)
        .unwrap_or_else(|| panic!("no GID {index} in {table:?}"));
    assert_eq!(entry.gid.to_string(), format!("::ffff:{ip}"));
    assert_eq!(entry.gid_type, GidType::RoceV2);
    assert!(entry.netdev_ifindex > 0);
    let one = ctx.query_gid(1, index).unwrap().unwrap();
    assert_eq!(&one, entry);
    // Past the valid entries: empty slots read as None, not errors.
    let empty = (0..ctx.query_port(1).unwrap().gid_tbl_len)
        .find(|i| !table.iter().any(|e| e.index == *i))
        .unwrap();
    assert_eq!(ctx.query_gid(1, empty).unwrap(), None);
    assert!(ctx.query_gid(1, 1 << 20).is_err());
}

fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn contexts_are_independent_and_close_their_fds() {
    let before = open_fds();
    {
        let a = open(CommandMode::Auto);
        let b = open(CommandMode::Auto);
        // SAFETY: only the numbers are compared; nothing is sent.
        #[allow(unsafe_code)]
        let (fa, fb) = unsafe { (a.cmd_fd().as_raw_fd(), b.cmd_fd().as_raw_fd()) };
        assert_ne!(fa, fb);
        assert_ne!(a.async_fd().as_raw_fd(), b.async_fd().as_raw_fd());
        assert_eq!(open_fds(), before + 4, "a command fd and an async fd each");
        let clone = a.clone();
        drop(a);
        clone.query_port(1).unwrap();
    }
    assert_eq!(open_fds(), before, "dropping the contexts closes every fd");
}

/// An optional FD_NEW attribute the kernel does not know is ignored
/// (`uverbs_ioctl.c`: unknown optional attributes are skipped); the
/// transport must then hand back no descriptor (it used to take the 0 it
/// sent for one, and close stdin on drop).
#[test]
fn an_ignored_new_fd_attribute_yields_no_descriptor() {
    let ctx = open(CommandMode::Auto);
    let stdin_open = nix::fcntl::fcntl(0, nix::fcntl::FcntlArg::F_GETFD).is_ok();
    use zerocopy::{FromZeros, IntoBytes};
    let mut resp = abi::IbUverbsQueryPortRespEx::new_zeroed();
    let mut cmd = uverbs::ioctl::IoctlCmd::new(
        abi::UVERBS_OBJECT_DEVICE,
        abi::UVERBS_METHOD_QUERY_PORT,
        ctx.device().driver_id.unwrap(),
    );
    cmd.const_in(abi::UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1);
    cmd.output(abi::UVERBS_ATTR_QUERY_PORT_RESP, resp.as_mut_bytes());
    // Core attribute ids are below 32 (`uapi_key_attr`); QUERY_PORT has 0 and 1.
    let extra = cmd.new_fd(30);
    cmd.optional();
    // SAFETY: QUERY_PORT carries no address as a value; its output is the
    // borrowed `resp`, and the fd is the context's own command fd.
    #[allow(unsafe_code)]
    let r = unsafe { uverbs::sys::Kernel::ioctl(&uverbs::sys::Linux, ctx.cmd_fd(), &mut cmd) };
    r.expect("QUERY_PORT with an unknown optional attribute");
    assert!(cmd.take_fd(extra).is_none(), "the kernel created no fd");
    assert!(!cmd.is_valid_output(extra));
    drop(cmd);
    assert_ne!(resp.legacy_resp.state, 0, "the port answer arrived");
    // fd 0 is as it was (dropping a taken 0 would have closed it).
    assert_eq!(
        nix::fcntl::fcntl(0, nix::fcntl::FcntlArg::F_GETFD).is_ok(),
        stdin_open
    );
}

#[test]
fn the_async_fd_is_an_empty_event_queue() {
    let ctx = open(CommandMode::Auto);
    let k = uverbs::sys::linux();
    assert_eq!(
        k.wait_readable(ctx.async_fd(), Some(std::time::Duration::from_millis(50)))
            .unwrap(),
        uverbs::sys::Readiness::TimedOut
    );
    k.set_nonblocking(ctx.async_fd(), true).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(
        k.read(ctx.async_fd(), &mut buf),
        Err(uverbs::sys::Errno::EAGAIN)
    );
}
