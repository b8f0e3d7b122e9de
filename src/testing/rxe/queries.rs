//! What the fake rxe device answers that makes no object: netlink
//! discovery, GET_CONTEXT and ASYNC_EVENT_ALLOC, the device, port and GID
//! queries (ioctl methods and the write commands older kernels have).

use std::{os::fd::AsRawFd, sync::atomic::Ordering};

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::{copy_out, device_attr, Behaviour, DEV, DEV_T, IPV4_GID, LINK_LOCAL_GID, NODE_GUID};
use crate::{
    abi,
    netlink::{self, Request},
    sys::{Errno, IoctlCmd, WriteCmd},
    testing::{
        device::{gid_entry, port_attr},
        kernel::dummy_fd,
    },
};

fn gids() -> Vec<abi::IbUverbsGidEntry> {
    vec![gid_entry(0, LINK_LOCAL_GID), gid_entry(1, IPV4_GID)]
}

pub(super) fn netlink_reply(request: &[u8]) -> Result<Vec<Vec<u8>>, Errno> {
    let kind = netlink::msg_type(request).ok_or(Errno::EINVAL)?;
    let op = kind & 0x3ff;
    if op == abi::RDMA_NLDEV_CMD_GET {
        let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_GET, 0, 1);
        m.u32(abi::RDMA_NLDEV_ATTR_DEV_INDEX, 3)
            .string(abi::RDMA_NLDEV_ATTR_DEV_NAME, DEV)
            .u32(abi::RDMA_NLDEV_ATTR_PORT_INDEX, 1)
            .u64(abi::RDMA_NLDEV_ATTR_NODE_GUID, NODE_GUID)
            .u8(abi::RDMA_NLDEV_ATTR_DEV_NODE_TYPE, 1);
        return Ok(vec![m.finish().to_vec()]);
    }
    if op == abi::RDMA_NLDEV_CMD_GET_CHARDEV {
        let index = netlink::attrs(request)
            .find(|a| a.kind == abi::RDMA_NLDEV_ATTR_DEV_INDEX)
            .and_then(|a| a.u32());
        if index != Some(3) {
            return Err(Errno::EINVAL);
        }
        let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_GET_CHARDEV, 0, 2);
        m.u64(abi::RDMA_NLDEV_ATTR_CHARDEV, DEV_T)
            .u64(abi::RDMA_NLDEV_ATTR_CHARDEV_ABI, 2)
            .string(abi::RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs0")
            .u32(abi::RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, abi::RDMA_DRIVER_RXE);
        return Ok(vec![m.finish().to_vec()]);
    }
    Err(Errno::EOPNOTSUPP)
}

pub(super) fn ioctl(b: &Behaviour, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    if b.no_ioctl.load(Ordering::Relaxed) {
        return Err(Errno::ENOTTY);
    }
    if cmd.driver_id != abi::RDMA_DRIVER_RXE {
        return Err(Errno::EINVAL);
    }
    match (cmd.object_id, cmd.method_id) {
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_GET_CONTEXT) => {
            if cmd.find(abi::UVERBS_ATTR_UHW_IN).is_some() {
                return Err(Errno::EINVAL); // rxe takes no driver data
            }
            cmd.write_output(
                abi::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
                &2u32.to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT,
                &1u64.to_ne_bytes(),
            );
            Ok(())
        }
        (abi::UVERBS_OBJECT_ASYNC_EVENT, abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC) => {
            cmd.set_new_fd(abi::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, dummy_fd());
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_PORT) => {
            if b.no_query_methods.load(Ordering::Relaxed) {
                return Err(Errno::EPROTONOSUPPORT);
            }
            if cmd.input_value(abi::UVERBS_ATTR_QUERY_PORT_PORT_NUM) != Some(1) {
                return Err(Errno::EINVAL);
            }
            let mut resp = abi::IbUverbsQueryPortRespEx::new_zeroed();
            resp.legacy_resp = port_attr();
            resp.port_cap_flags2 = 0x20;
            cmd.write_output(abi::UVERBS_ATTR_QUERY_PORT_RESP, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_GID_TABLE) => {
            if b.no_query_methods.load(Ordering::Relaxed) {
                return Err(Errno::EPROTONOSUPPORT);
            }
            let entries = gids();
            let bytes = entries.as_slice().as_bytes();
            cmd.write_output(abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, bytes)
                .ok_or(Errno::EINVAL)?;
            cmd.write_output(
                abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
                &(entries.len() as u64).to_ne_bytes(),
            );
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_GID_ENTRY) => {
            if b.no_query_methods.load(Ordering::Relaxed) {
                return Err(Errno::EPROTONOSUPPORT);
            }
            let index = cmd
                .input_value(abi::UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX)
                .ok_or(Errno::EINVAL)?;
            if index >= 1024 {
                return Err(Errno::EINVAL);
            }
            let entry = gids()
                .into_iter()
                .find(|e| u64::from(e.gid_index) == index)
                .ok_or(Errno::ENODATA)?;
            cmd.write_output(
                abi::UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
                entry.as_bytes(),
            );
            Ok(())
        }
        _ => Err(Errno::EPROTONOSUPPORT),
    }
}

pub(super) fn write(cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
    let ex = abi::IB_USER_VERBS_CMD_FLAG_EXTENDED;
    match cmd.command {
        c if c == abi::IB_USER_VERBS_CMD_GET_CONTEXT => {
            let fd = dummy_fd();
            let mut resp = abi::IbUverbsGetContextResp::new_zeroed();
            resp.async_fd = fd.as_raw_fd() as u32;
            resp.num_comp_vectors = 2;
            copy_out(cmd.core_out, resp.as_bytes())?;
            cmd.new_fd = Some(fd);
            Ok(())
        }
        c if c == ex | abi::IB_USER_VERBS_EX_CMD_QUERY_DEVICE => {
            if !cmd.driver_in.is_empty() || !cmd.driver_out.is_empty() {
                return Err(Errno::EINVAL); // rxe_query_device refuses udata
            }
            abi::IbUverbsExQueryDevice::read_from_bytes(cmd.core_in).map_err(|_| Errno::EINVAL)?;
            copy_out(cmd.core_out, device_attr().as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_QUERY_PORT => {
            let req =
                abi::IbUverbsQueryPort::read_from_bytes(cmd.core_in).map_err(|_| Errno::EINVAL)?;
            if req.port_num != 1 {
                return Err(Errno::EINVAL);
            }
            copy_out(cmd.core_out, port_attr().as_bytes())
        }
        _ => Err(Errno::EOPNOTSUPP),
    }
}
