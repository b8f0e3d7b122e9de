//! Device, port and GID queries (`ibv_query_device_ex`, `ibv_query_port`,
//! `ibv_query_gid_table`, `ibv_query_gid_ex`).
//!
//! - Device attributes: the `EX_QUERY_DEVICE` write command (there is no
//!   ioctl method in 6.1), falling back to the legacy `QUERY_DEVICE`.
//! - Ports: `UVERBS_METHOD_QUERY_PORT`, falling back to the `QUERY_PORT`
//!   write command.
//! - GIDs: `UVERBS_METHOD_QUERY_GID_TABLE` / `QUERY_GID_ENTRY`, falling back
//!   to sysfs (`ports/N/gids/I`, `gid_attrs/types/I`) as libibverbs does.

use crate::abi;
use zerocopy::{FromZeros, IntoBytes};

use crate::{
    context::{Context, Verb},
    error::{Context as _, Error, ErrorKind, Result},
    ioctl::IoctlCmd,
    sys::{Errno, WriteCmd},
};

use crate::query_types::{DeviceAttr, Gid, GidEntry, GidType, LinkLayer, PortAttr, RtValues};

impl Context {
    /// Queries the device's attributes, like `ibv_query_device_ex`.
    #[doc(alias = "ibv_query_device_ex")]
    #[doc(alias = "ibv_query_device")]
    pub fn query_device(&self) -> Result<DeviceAttr> {
        self.query_device_driver(&mut [])
    }

    /// [`Context::query_device`] with the provider's part of the extended
    /// command's response (the driver's `udata` out: mlx5's
    /// `mlx5_ib_query_device_resp`) written to `driver_out`; left as it
    /// was when the kernel has no extended command.
    pub(crate) fn query_device_driver(&self, driver_out: &mut [u8]) -> Result<DeviceAttr> {
        let ctx = &self.inner;
        let req = abi::IbUverbsExQueryDevice {
            comp_mask: 0,
            reserved: 0,
        };
        let mut resp = abi::IbUverbsExQueryDeviceResp::new_zeroed();
        let mut cmd = WriteCmd {
            command: abi::IB_USER_VERBS_CMD_FLAG_EXTENDED | abi::IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
            core_in: req.as_bytes(),
            driver_in: &[],
            core_out: resp.as_mut_bytes(),
            driver_out,
            ..WriteCmd::default()
        };
        match ctx.write_cmd(&mut cmd) {
            Ok(()) => {}
            Err(Errno::EOPNOTSUPP | Errno::ENOSYS) => {
                // Kernels or drivers without the extended command.
                let req = abi::IbUverbsQueryDevice { response: 0 };
                let mut base = abi::IbUverbsQueryDeviceResp::new_zeroed();
                let mut cmd = WriteCmd {
                    command: abi::IB_USER_VERBS_CMD_QUERY_DEVICE,
                    core_in: req.as_bytes(),
                    driver_in: &[],
                    core_out: base.as_mut_bytes(),
                    driver_out: &mut [],
                    ..WriteCmd::default()
                };
                ctx.write_cmd(&mut cmd)
                    .op("IB_USER_VERBS_CMD_QUERY_DEVICE")?;
                resp = abi::IbUverbsExQueryDeviceResp::new_zeroed();
                resp.base = base;
            }
            Err(e) => return Err(Error::sys("IB_USER_VERBS_EX_CMD_QUERY_DEVICE", e)),
        }
        Ok(DeviceAttr::from_abi(
            &resp,
            self.provider_fw_ver(resp.base.fw_ver),
        ))
    }

    /// The device's real-time values, like `ibv_query_rt_values_ex` with
    /// `IBV_VALUES_MASK_RAW_CLOCK`: the free-running clock that stamps
    /// completions ([`crate::CqPoll::completion_ts`]), read from the page
    /// the provider maps (mlx5's core clock; no system call). Fails with
    /// [`ErrorKind::UnsupportedProvider`] (`EOPNOTSUPP`) where the provider
    /// has none (rxe, as rdma-core's) or the kernel maps no clock.
    #[doc(alias = "ibv_query_rt_values_ex")]
    pub fn query_rt_values(&self) -> Result<RtValues> {
        match self.inner.provider.read_raw_clock() {
            Some(raw_clock) => Ok(RtValues { raw_clock }),
            None => Err(Error::new(
                "ibv_query_rt_values_ex",
                ErrorKind::UnsupportedProvider,
                format!(
                    "the {} provider reads no device clock on this context (none, or the \
                     kernel maps none)",
                    self.provider_name()
                ),
            )),
        }
    }

    fn provider_fw_ver(&self, raw: u64) -> String {
        // rdma-core's providers format it differently (`rxe_query_device`,
        // `mlx5_query_device_ex`).
        self.inner.provider.fw_ver(raw)
    }

    /// Queries one port (numbered from 1), like `ibv_query_port`.
    #[doc(alias = "ibv_query_port")]
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        let ctx = &self.inner;
        if !ctx.fallback.use_write(Verb::QueryPort) {
            let mut resp = abi::IbUverbsQueryPortRespEx::new_zeroed();
            let mut cmd: IoctlCmd<'_> =
                ctx.ioctl_cmd(abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_PORT);
            cmd.const_in(abi::UVERBS_ATTR_QUERY_PORT_PORT_NUM, u64::from(port));
            cmd.output(abi::UVERBS_ATTR_QUERY_PORT_RESP, resp.as_mut_bytes());
            match ctx.ioctl(&mut cmd) {
                Ok(()) => {
                    drop(cmd);
                    return Ok(PortAttr::from_abi(&resp.legacy_resp, resp.port_cap_flags2));
                }
                Err(e) if ctx.fallback.record(Verb::QueryPort, e) => {}
                Err(e) => return Err(port_error("UVERBS_METHOD_QUERY_PORT", port, e)),
            }
        }
        let mut req = abi::IbUverbsQueryPort::new_zeroed();
        req.port_num = port;
        let mut resp = abi::IbUverbsQueryPortResp::new_zeroed();
        let mut cmd = WriteCmd {
            command: abi::IB_USER_VERBS_CMD_QUERY_PORT,
            core_in: req.as_bytes(),
            driver_in: &[],
            core_out: resp.as_mut_bytes(),
            driver_out: &mut [],
            ..WriteCmd::default()
        };
        ctx.write_cmd(&mut cmd)
            .map_err(|e| port_error("IB_USER_VERBS_CMD_QUERY_PORT", port, e))?;
        Ok(PortAttr::from_abi(&resp, 0))
    }

    /// Every valid GID of every port, like `ibv_query_gid_table`.
    #[doc(alias = "ibv_query_gid_table")]
    pub fn query_gid_table(&self) -> Result<Vec<GidEntry>> {
        let ctx = &self.inner;
        let ports = self.query_device()?.phys_port_cnt;
        let mut capacity = 0usize;
        for port in 1..=ports {
            capacity = capacity.saturating_add(self.query_port(port)?.gid_tbl_len as usize);
        }
        if !ctx.fallback.use_write(Verb::QueryGid) {
            // One ioctl attribute carries at most u16::MAX bytes, so a larger
            // table cannot come back from this method (the command would be
            // refused with E2BIG); say so before allocating for it, whatever
            // size the ports report.
            let most = usize::from(u16::MAX) / size_of::<abi::IbUverbsGidEntry>();
            if capacity > most {
                return Err(
                    Error::sys("UVERBS_METHOD_QUERY_GID_TABLE", Errno::E2BIG).with_detail(format!(
                        "the ports report {capacity} GID table entries; one query returns at \
                         most {most}"
                    )),
                );
            }
            let mut entries = vec![abi::IbUverbsGidEntry::new_zeroed(); capacity.max(1)];
            let mut count = 0u64;
            let mut cmd: IoctlCmd<'_> = ctx.ioctl_cmd(
                abi::UVERBS_OBJECT_DEVICE,
                abi::UVERBS_METHOD_QUERY_GID_TABLE,
            );
            cmd.const_in(
                abi::UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE,
                size_of::<abi::IbUverbsGidEntry>() as u64,
            );
            cmd.flags_in(abi::UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0);
            cmd.optional();
            cmd.output(
                abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES,
                entries.as_mut_slice().as_mut_bytes(),
            );
            cmd.output(
                abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
                count.as_mut_bytes(),
            );
            match ctx.ioctl(&mut cmd) {
                Ok(()) => {
                    drop(cmd);
                    let n = (count as usize).min(entries.len());
                    return Ok(entries[..n].iter().map(GidEntry::from_abi).collect());
                }
                Err(e) if ctx.fallback.record(Verb::QueryGid, e) => {}
                Err(e) => return Err(Error::sys("UVERBS_METHOD_QUERY_GID_TABLE", e)),
            }
        }
        let mut table = Vec::new();
        for port in 1..=ports {
            let len = self.query_port(port)?.gid_tbl_len;
            for index in 0..len {
                if let Some(entry) = self.gid_from_sysfs(port, index)? {
                    table.push(entry);
                }
            }
        }
        Ok(table)
    }

    /// One GID table entry, like `ibv_query_gid_ex`; `Ok(None)` for an empty slot.
    #[doc(alias = "ibv_query_gid_ex")]
    #[doc(alias = "ibv_query_gid")]
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Option<GidEntry>> {
        let ctx = &self.inner;
        if !ctx.fallback.use_write(Verb::QueryGid) {
            let mut entry = abi::IbUverbsGidEntry::new_zeroed();
            let mut cmd: IoctlCmd<'_> = ctx.ioctl_cmd(
                abi::UVERBS_OBJECT_DEVICE,
                abi::UVERBS_METHOD_QUERY_GID_ENTRY,
            );
            cmd.const_in(abi::UVERBS_ATTR_QUERY_GID_ENTRY_PORT, u64::from(port));
            cmd.const_in(abi::UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, u64::from(index));
            cmd.flags_in(abi::UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0);
            cmd.output(
                abi::UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
                entry.as_mut_bytes(),
            );
            match ctx.ioctl(&mut cmd) {
                Ok(()) => {
                    drop(cmd);
                    return Ok(Some(GidEntry::from_abi(&entry)));
                }
                Err(Errno::ENODATA) => return Ok(None),
                Err(e) if ctx.fallback.record(Verb::QueryGid, e) => {}
                Err(e) => {
                    return Err(Error::sys("UVERBS_METHOD_QUERY_GID_ENTRY", e).with_detail(
                        format!(
                        "port {port} index {index}: check both against query_port's gid_tbl_len"
                    ),
                    ))
                }
            }
        }
        self.gid_from_sysfs(port, index)
    }

    /// The sysfs view of one GID: `ports/N/gids/I` and its type and netdev.
    fn gid_from_sysfs(&self, port: u8, index: u32) -> Result<Option<GidEntry>> {
        let k = &self.inner.kernel;
        let base = crate::device_list::sysfs_ib()
            .join(&self.device().name)
            .join("ports")
            .join(port.to_string());
        let op = "read GID from sysfs";
        let text = k
            .read_to_string(&base.join("gids").join(index.to_string()))
            .map_err(|e| Error::sys(op, Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))?;
        let gid = parse_sysfs_gid(&text).ok_or_else(|| {
            Error::new(
                op,
                ErrorKind::Malformed,
                format!("unparsable GID {:?}", text.trim()),
            )
        })?;
        if gid == [0; 16] {
            return Ok(None);
        }
        let gid_type = match k.read_to_string(&base.join("gid_attrs/types").join(index.to_string()))
        {
            Ok(t) if t.trim() == "RoCE v2" => GidType::RoceV2,
            Ok(t) if t.trim() == "IB/RoCE v1" => {
                let ll = self.query_port(port)?.link_layer;
                if ll == LinkLayer::Ethernet {
                    GidType::RoceV1
                } else {
                    GidType::Ib
                }
            }
            _ => GidType::Ib,
        };
        let ifindex = k
            .read_to_string(&base.join("gid_attrs/ndevs").join(index.to_string()))
            .ok()
            .and_then(|name| {
                k.read_to_string(
                    &crate::sysfs_path()
                        .join("class/net")
                        .join(name.trim())
                        .join("ifindex"),
                )
                .ok()
            })
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        Ok(Some(GidEntry {
            gid: Gid(gid),
            index,
            port: u32::from(port),
            gid_type,
            netdev_ifindex: ifindex,
        }))
    }
}

fn port_error(op: &'static str, port: u8, e: Errno) -> Error {
    let err = Error::sys(op, e);
    if e == Errno::EINVAL {
        err.with_detail(format!(
            "port {port} does not exist (ports are numbered from 1 to phys_port_cnt)"
        ))
    } else {
        err
    }
}

/// `"fe80:0000:0000:0000:5054:00ff:fe12:3456"` to 16 bytes.
pub(crate) fn parse_sysfs_gid(s: &str) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    let mut groups = s.trim().split(':');
    for pair in out.chunks_exact_mut(2) {
        let g = u16::from_str_radix(groups.next()?, 16).ok()?;
        pair.copy_from_slice(&g.to_be_bytes());
    }
    groups.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_gid_parsing() {
        let g = parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:3456\n").unwrap();
        assert_eq!(g[0..2], [0xfe, 0x80]);
        assert_eq!(g[14..16], [0x34, 0x56]);
        assert!(parse_sysfs_gid("fe80::1").is_none());
        assert!(parse_sysfs_gid("fe80:0000:0000:0000:5054:00ff:fe12:3456:0000").is_none());
    }
}
