//! Device discovery: which RDMA devices exist, their uverbs nodes and drivers.
//!
//! Like libibverbs (`libibverbs/ibdev_nl.c`, `libibverbs/init.c`), netlink is
//! asked first: an `RDMA_NLDEV_CMD_GET` dump lists every device of this
//! network namespace (index, name, node GUID, node type, port count), and an
//! `RDMA_NLDEV_CMD_GET_CHARDEV` per device names its `uverbsN` node, the
//! driver's ABI version and the driver id the ioctl header must carry. When
//! netlink is unavailable the sysfs class `infiniband_verbs` is walked instead
//! and the driver is recognised by name.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use crate::abi;

use crate::{
    error::{Error, ErrorKind, Result},
    netlink::{self, Request, NLM_F_DUMP, NLM_F_REQUEST},
    sys::{self, Kernel},
};

/// Where the device nodes live (`RDMA_CDEV_DIR`, compiled into
/// libibverbs too).
const DEV_DIR: &str = "/dev/infiniband";

/// Where sysfs is, as libibverbs decides it (`ibv_get_sysfs_path`,
/// `libibverbs/sysfs.c`): `SYSFS_PATH` from the environment, trailing
/// slashes dropped, unless the program runs set-user-ID (real and
/// effective user differ); `/sys` otherwise. Read at every call. Every
/// sysfs read of this crate goes below it, so a program can be pointed at
/// a sysfs tree that describes another device, as rdma-core's own test
/// harnesses do.
#[doc(alias = "ibv_get_sysfs_path")]
pub fn sysfs_path() -> PathBuf {
    let from_env = (nix::unistd::getuid() == nix::unistd::geteuid())
        .then(|| std::env::var_os("SYSFS_PATH"))
        .flatten()
        .map(PathBuf::from)
        .map(|p| {
            let t = p.to_string_lossy().trim_end_matches('/').to_string();
            PathBuf::from(t)
        })
        .filter(|p| !p.as_os_str().is_empty());
    from_env.unwrap_or_else(|| PathBuf::from("/sys"))
}

/// `<sysfs>/class/infiniband_verbs`.
fn sysfs_verbs() -> PathBuf {
    sysfs_path().join("class/infiniband_verbs")
}

/// `<sysfs>/class/infiniband`.
pub(crate) fn sysfs_ib() -> PathBuf {
    sysfs_path().join("class/infiniband")
}

/// The kind of RDMA node (`enum rdma_node_type` in `include/rdma/ib_verbs.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeType {
    /// An InfiniBand (or RoCE) channel adapter (`RDMA_NODE_IB_CA`, 1).
    Ca,
    /// An InfiniBand switch (2).
    Switch,
    /// An InfiniBand router (3).
    Router,
    /// An iWARP RNIC (4).
    Rnic,
    /// Cisco usNIC (5).
    Usnic,
    /// Cisco usNIC over UDP (6).
    UsnicUdp,
    /// Unspecified (7).
    Unspecified,
    /// A value this crate does not know.
    Other(u8),
}

impl NodeType {
    /// From the kernel's numeric node type.
    pub fn from_raw(raw: u8) -> Self {
        match raw {
            1 => NodeType::Ca,
            2 => NodeType::Switch,
            3 => NodeType::Router,
            4 => NodeType::Rnic,
            5 => NodeType::Usnic,
            6 => NodeType::UsnicUdp,
            7 => NodeType::Unspecified,
            other => NodeType::Other(other),
        }
    }

    /// The transport as `ibv_devinfo` names it.
    pub fn transport_name(self) -> &'static str {
        match self {
            NodeType::Ca | NodeType::Switch | NodeType::Router => "InfiniBand",
            NodeType::Rnic => "iWARP",
            NodeType::Usnic => "usNIC",
            NodeType::UsnicUdp => "usNIC UDP",
            NodeType::Unspecified => "unspecified",
            NodeType::Other(_) => "invalid transport",
        }
    }

    /// The `ibv_transport_type` number `ibv_devinfo` prints in parentheses.
    pub fn transport_number(self) -> i32 {
        match self {
            NodeType::Ca | NodeType::Switch | NodeType::Router => 0,
            NodeType::Rnic => 1,
            NodeType::Usnic => 2,
            NodeType::UsnicUdp => 3,
            NodeType::Unspecified => 4,
            NodeType::Other(_) => -1,
        }
    }
}

/// One RDMA device with a uverbs node.
///
/// libibverbs' `struct ibv_device` (an entry of `ibv_get_device_list`);
/// its `name` is what `ibv_get_device_name` returns.
#[doc(alias = "ibv_get_device_name")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// The RDMA device name (`rxe0`, `mlx5_0`).
    pub name: String,
    /// The uverbs character device name (`uverbs0`).
    pub uverbs_name: String,
    /// The node to open (`/dev/infiniband/uverbs0`).
    pub path: PathBuf,
    /// The expected device number of that node, when known.
    pub dev: Option<u64>,
    /// The node GUID in host byte order.
    pub node_guid: u64,
    /// The node type.
    pub node_type: NodeType,
    /// The driver id (`RDMA_DRIVER_*`) the ioctl header must carry, when known.
    pub driver_id: Option<u32>,
    /// The driver's uverbs ABI version (`uverbsN/abi_version`).
    pub abi_version: u32,
    /// The netlink device index (`ibv_get_device_index`), when known.
    pub index: Option<u32>,
    /// Number of ports, when known.
    pub port_count: Option<u32>,
}

/// Lists the RDMA devices that have a uverbs node, sorted by name, like
/// `ibv_get_device_list` (the list is owned: nothing to free).
#[doc(alias = "ibv_get_device_list")]
pub fn devices() -> Result<Vec<DeviceInfo>> {
    devices_with(&sys::linux())
}

/// [`devices`] through a chosen transport.
pub fn devices_with(kernel: &Arc<dyn Kernel>) -> Result<Vec<DeviceInfo>> {
    // libibverbs' ibverbs_init, at the first device listing:
    // RDMAV_FORK_SAFE / IBV_FORK_SAFE turn fork protection on.
    crate::fork::init_from_env();
    // An answer from netlink is final, even an empty one (as in libibverbs);
    // sysfs is only asked when netlink itself fails.
    let mut list = match from_netlink(kernel.as_ref()) {
        Ok(list) => list,
        Err(_) => from_sysfs(kernel.as_ref())?,
    };
    list.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(list)
}

/// Finds one device by name; `None` picks the first device.
pub fn find_device(kernel: &Arc<dyn Kernel>, name: Option<&str>) -> Result<DeviceInfo> {
    let list = devices_with(kernel)?;
    let found = match name {
        Some(n) => list.iter().find(|d| d.name == n),
        None => list.first(),
    };
    found.cloned().ok_or_else(|| {
        let have: Vec<&str> = list.iter().map(|d| d.name.as_str()).collect();
        let what = match name {
            Some(n) => format!("no RDMA device named {n:?}"),
            None => "no RDMA device".to_string(),
        };
        Error::new(
            "find RDMA device",
            ErrorKind::NoDevice,
            if have.is_empty() {
                format!(
                    "{what}: none has a uverbs node (load ib_uverbs and the driver, \
                     or create a soft-RoCE device with `rdma link add rxe0 type rxe netdev IF`)"
                )
            } else {
                format!("{what}; available: {}", have.join(", "))
            },
        )
    })
}

fn from_netlink(kernel: &dyn Kernel) -> Result<Vec<DeviceInfo>> {
    let mut found = Vec::new();
    let mut req = Request::nldev(abi::RDMA_NLDEV_CMD_GET, NLM_F_REQUEST | NLM_F_DUMP, 1);
    kernel
        .netlink_rdma(req.finish(), &mut |msg| {
            if let Some(d) = parse_dev(msg) {
                found.push(d);
            }
        })
        .map_err(|e| Error::sys("netlink RDMA_NLDEV_CMD_GET", e))?;

    let mut list = Vec::with_capacity(found.len());
    for (index, name, node_guid, node_type, ports) in found {
        let mut req = Request::nldev(abi::RDMA_NLDEV_CMD_GET_CHARDEV, NLM_F_REQUEST, 2);
        req.u32(abi::RDMA_NLDEV_ATTR_DEV_INDEX, index)
            .string(abi::RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs");
        let mut chardev = None;
        let res = kernel.netlink_rdma(req.finish(), &mut |msg| {
            chardev = parse_chardev(msg);
        });
        // A device without a uverbs node (or a kernel that refuses) is skipped.
        let Some((uverbs_name, dev, abi_version, driver_id)) = res.ok().and(chardev) else {
            continue;
        };
        let abi_version = match abi_version {
            Some(v) => v,
            None => read_u32(
                kernel,
                &sysfs_verbs().join(&uverbs_name).join("abi_version"),
            )
            .unwrap_or(0),
        };
        list.push(DeviceInfo {
            path: Path::new(DEV_DIR).join(&uverbs_name),
            uverbs_name,
            dev,
            node_guid,
            node_type,
            driver_id: driver_id.or_else(|| driver_id_by_name(kernel, &name)),
            abi_version,
            index: Some(index),
            port_count: Some(ports),
            name,
        });
    }
    Ok(list)
}

type NlDev = (u32, String, u64, NodeType, u32);

fn parse_dev(msg: &[u8]) -> Option<NlDev> {
    let (mut index, mut name, mut guid, mut node_type, mut ports) = (None, None, None, None, None);
    for a in netlink::attrs(msg) {
        match a.kind {
            abi::RDMA_NLDEV_ATTR_DEV_INDEX => index = a.u32(),
            abi::RDMA_NLDEV_ATTR_DEV_NAME => name = a.str().map(str::to_owned),
            abi::RDMA_NLDEV_ATTR_NODE_GUID => guid = a.u64(),
            abi::RDMA_NLDEV_ATTR_DEV_NODE_TYPE => node_type = a.u8().map(NodeType::from_raw),
            abi::RDMA_NLDEV_ATTR_PORT_INDEX => ports = a.u32(),
            _ => {}
        }
    }
    Some((index?, name?, guid?, node_type?, ports?))
}

type NlChardev = (String, Option<u64>, Option<u32>, Option<u32>);

fn parse_chardev(msg: &[u8]) -> Option<NlChardev> {
    let (mut name, mut dev, mut abi_version, mut driver_id) = (None, None, None, None);
    for a in netlink::attrs(msg) {
        match a.kind {
            abi::RDMA_NLDEV_ATTR_CHARDEV_NAME => name = a.str().map(str::to_owned),
            abi::RDMA_NLDEV_ATTR_CHARDEV => dev = a.u64().map(decode_huge_dev),
            abi::RDMA_NLDEV_ATTR_CHARDEV_ABI => abi_version = a.u64().map(|v| v as u32),
            abi::RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID => driver_id = a.u32(),
            _ => {}
        }
    }
    Some((name?, dev, abi_version, driver_id))
}

/// The kernel's `huge_encode_dev` form (`include/linux/kdev_t.h`) to a
/// userspace `dev_t` (`makedev`).
fn decode_huge_dev(v: u64) -> u64 {
    let major = (v & 0xfff00) >> 8;
    let minor = (v & 0xff) | ((v >> 12) & 0xfff00);
    libc::makedev(major as u32, minor as u32)
}

fn from_sysfs(kernel: &dyn Kernel) -> Result<Vec<DeviceInfo>> {
    let verbs = sysfs_verbs();
    let entries = kernel.read_dir(&verbs).map_err(|e| {
        Error::sys(
            "read the sysfs class infiniband_verbs",
            crate::sys::Errno::from_raw(e.raw_os_error().unwrap_or(libc::ENOENT)),
        )
        .with_detail("no uverbs devices: is the ib_uverbs module loaded?")
    })?;
    let mut list = Vec::new();
    for entry in entries {
        let Some(uverbs_name) = entry.to_str().filter(|n| n.starts_with("uverbs")) else {
            continue;
        };
        let dir = verbs.join(uverbs_name);
        let Ok(name) = kernel.read_to_string(&dir.join("ibdev")) else {
            continue;
        };
        let name = name.trim().to_string();
        let ib = sysfs_ib().join(&name);
        let node_type = kernel
            .read_to_string(&ib.join("node_type"))
            .ok()
            .and_then(|s| s.split(':').next()?.trim().parse::<u8>().ok())
            .map_or(NodeType::Other(0), NodeType::from_raw);
        let node_guid = kernel
            .read_to_string(&ib.join("node_guid"))
            .ok()
            .and_then(|s| parse_guid(&s))
            .unwrap_or(0);
        let dev = kernel
            .read_to_string(&dir.join("dev"))
            .ok()
            .and_then(|s| parse_dev_t(&s));
        list.push(DeviceInfo {
            path: Path::new(DEV_DIR).join(uverbs_name),
            uverbs_name: uverbs_name.to_string(),
            dev,
            node_guid,
            node_type,
            driver_id: driver_id_by_name(kernel, &name),
            abi_version: read_u32(kernel, &dir.join("abi_version")).unwrap_or(0),
            index: None,
            port_count: kernel
                .read_dir(&ib.join("ports"))
                .ok()
                .map(|p| p.len() as u32),
            name,
        });
    }
    Ok(list)
}

/// Without netlink, the providers recognise their devices from sysfs (the
/// name, and whether the device has a `parent` network device).
fn driver_id_by_name(kernel: &dyn Kernel, name: &str) -> Option<u32> {
    let has_parent = kernel
        .read_to_string(&sysfs_ib().join(name).join("parent"))
        .is_ok();
    crate::providers::ProviderKind::from_sysfs(name, has_parent).map(|k| k.driver_id())
}

fn read_u32(kernel: &dyn Kernel, path: &Path) -> Option<u32> {
    kernel.read_to_string(path).ok()?.trim().parse().ok()
}

/// `"xxxx:xxxx:xxxx:xxxx"` (sysfs `node_guid`) to a host-order u64.
pub(crate) fn parse_guid(s: &str) -> Option<u64> {
    let groups: Vec<&str> = s.trim().split(':').collect();
    if groups.len() != 4 {
        return None;
    }
    groups.iter().try_fold(0u64, |acc, g| {
        Some((acc << 16) | u64::from(u16::from_str_radix(g, 16).ok()?))
    })
}

/// `"231:192"` (sysfs `dev`) to a `dev_t`.
pub(crate) fn parse_dev_t(s: &str) -> Option<u64> {
    let (major, minor) = s.trim().split_once(':')?;
    Some(libc::makedev(major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_and_dev_parsing() {
        assert_eq!(
            parse_guid("5054:00ff:fe12:3456\n"),
            Some(0x5054_00ff_fe12_3456)
        );
        assert_eq!(parse_guid("5054:00ff:fe12"), None);
        assert_eq!(parse_guid("zzzz:00ff:fe12:3456"), None);
        assert_eq!(parse_dev_t("231:192\n"), Some(libc::makedev(231, 192)));
        assert_eq!(parse_dev_t("231"), None);
    }

    #[test]
    fn huge_dev_decoding_matches_makedev() {
        // uverbs0: major 231, minor 192 -> huge_encode_dev = (major << 8) | minor.
        assert_eq!(decode_huge_dev((231 << 8) | 192), libc::makedev(231, 192));
        // A minor above 255 lands in bits 20.. of the huge encoding.
        let (major, minor) = (231u64, 0x1234u64);
        let huge = (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
        assert_eq!(decode_huge_dev(huge), libc::makedev(231, 0x1234));
    }

    #[test]
    fn node_type_names() {
        assert_eq!(NodeType::from_raw(1).transport_name(), "InfiniBand");
        assert_eq!(NodeType::from_raw(4).transport_number(), 1);
        assert_eq!(NodeType::from_raw(99), NodeType::Other(99));
    }
}
