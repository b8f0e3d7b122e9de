//! A fake Linux 6.1 kernel with one rxe device, built on `uverbs::sys::fake`.
//!
//! It answers what the real kernel answers for the calls a context makes
//! (netlink discovery, GET_CONTEXT, ASYNC_EVENT_ALLOC, QUERY_PORT,
//! EX_QUERY_DEVICE, the GID queries), with values taken from the rxe test
//! guest, and can be told to behave like older kernels (no ioctl at all, or
//! no QUERY_PORT method) so the write fallbacks run.
#![allow(dead_code)]

use std::{
    collections::HashMap,
    os::fd::IntoRawFd,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
};

use uverbs::{
    abi,
    netlink::{self, Request},
    sys::{
        fake::{dummy_fd, FakeKernel},
        Errno, IoctlCmd, Kernel, WriteCmd,
    },
};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

pub const DEV: &str = "rxe0";
pub const NODE_GUID: u64 = 0x5054_00ff_fe12_3456;
pub const DEV_T: u64 = (231 << 8) | 192; // makedev(231, 192) on glibc/musl
pub const IPV4_GID: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1];
pub const LINK_LOCAL_GID: [u8; 16] = [
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x52, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56,
];

/// Knobs for kernel behaviour.
#[derive(Debug, Default)]
pub struct Behaviour {
    /// Every ioctl fails with ENOTTY (a kernel without the ioctl interface).
    pub no_ioctl: AtomicBool,
    /// QUERY_PORT and the GID methods fail with EPROTONOSUPPORT.
    pub no_query_methods: AtomicBool,
    /// Netlink fails (discovery must use sysfs).
    pub no_netlink: AtomicBool,
    /// The device is gone (disassociated, as mlx5 after a removal): every
    /// command fails with EIO.
    pub removed: AtomicBool,
}

pub struct FakeRxe {
    pub kernel: Arc<FakeKernel>,
    pub behaviour: Arc<Behaviour>,
    pub objects: Arc<Objects>,
}

impl FakeRxe {
    pub fn dyn_kernel(&self) -> Arc<dyn Kernel> {
        self.kernel.clone()
    }

    /// The `user_handle` the library gave the object with kernel `handle`.
    pub fn user_handle(&self, kind: Kind, handle: u32) -> u64 {
        let s = self.objects.lock();
        *s.user_handles
            .get(&(kind, handle))
            .unwrap_or_else(|| panic!("no {kind:?} with handle {handle}"))
    }

    /// Queues one async event record (what a `read` of the async fd returns)
    /// and, for an event about an object, counts it as reported for that
    /// object, as the kernel counts events read (returned by its destroy).
    pub fn push_event(&self, event_type: u32, element: u64) {
        let mut d = abi::IbUverbsAsyncEventDesc::new_zeroed();
        d.element = element;
        d.event_type = event_type;
        let about_object = matches!(event_type, 0..=7 | 14..=16);
        if about_object {
            *self.objects.lock().reported.entry(element).or_default() += 1;
        }
        self.kernel.push_read(Ok(d.as_bytes().to_vec()));
    }

    /// Kernel handles destroyed so far, of `kind`.
    pub fn destroyed(&self, kind: Kind) -> Vec<u32> {
        self.objects
            .lock()
            .destroyed
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, h)| *h)
            .collect()
    }
}

/// Object kinds the fake creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Pd,
    Mr,
    Cq,
    Qp,
    Srq,
}

/// Objects created on the fake: handles, user handles, events reported.
#[derive(Debug, Default)]
pub struct Objects {
    state: Mutex<ObjState>,
}

#[derive(Debug, Default)]
pub struct ObjState {
    next_handle: u32,
    user_handles: HashMap<(Kind, u32), u64>,
    reported: HashMap<u64, u32>,
    destroyed: Vec<(Kind, u32)>,
}

impl Objects {
    fn lock(&self) -> std::sync::MutexGuard<'_, ObjState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn create(&self, kind: Kind, user_handle: u64) -> u32 {
        let mut s = self.lock();
        s.next_handle += 1;
        let h = s.next_handle;
        s.user_handles.insert((kind, h), user_handle);
        h
    }

    /// Destroys the object; returns the async events reported for it.
    fn destroy(&self, kind: Kind, handle: u32) -> Result<u32, Errno> {
        let mut s = self.lock();
        let uh = s
            .user_handles
            .remove(&(kind, handle))
            .ok_or(Errno::EINVAL)?;
        s.destroyed.push((kind, handle));
        Ok(s.reported.remove(&uh).unwrap_or(0))
    }
}

/// The rxe queue geometry the fake's mmaps describe: 16 slots of 2 KiB
/// after the 384-byte `rxe_queue_buf` header.
pub const RING_LOG2_STRIDE: u32 = 11;
pub const RING_SLOTS: u32 = 16;
pub const RING_LEN: u32 = 384 + (RING_SLOTS << RING_LOG2_STRIDE);

fn ring_mi(offset_slot: u32) -> abi::Mminfo {
    let mut mi = abi::Mminfo::new_zeroed();
    mi.offset = u64::from(offset_slot) << 20;
    mi.size = RING_LEN;
    mi
}

/// Writes the `rxe_queue_buf` header (log2_elem_size, index_mask) into a
/// new mapping, as the kernel's queue memory has it.
fn fill_ring(_offset: u64, map: &mut [u8]) -> Result<(), Errno> {
    if map.len() < RING_LEN as usize {
        return Err(Errno::EINVAL);
    }
    map[0..4].copy_from_slice(&RING_LOG2_STRIDE.to_ne_bytes());
    map[4..8].copy_from_slice(&(RING_SLOTS - 1).to_ne_bytes());
    Ok(())
}

/// CQ, QP and SRQ create/destroy (ioctl methods, as 6.1 has them).
fn objects_ioctl(objects: &Objects, cmd: &mut IoctlCmd<'_>) -> Option<Result<(), Errno>> {
    let handle_in = |cmd: &IoctlCmd<'_>, id| cmd.input_value(id).map(|v| v as u32);
    let r = match (cmd.object_id, cmd.method_id) {
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_CREATE) => (|| {
            let uh = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_CQ_USER_HANDLE)
                .ok_or(Errno::EINVAL)?;
            let cqe = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_CQ_CQE)
                .ok_or(Errno::EINVAL)? as u32;
            if cqe == 0 || cqe >= RING_SLOTS {
                return Err(Errno::EINVAL);
            }
            let h = objects.create(Kind::Cq, uh);
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_CQ_HANDLE, h);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_CQ_RESP_CQE,
                &(RING_SLOTS - 1).to_ne_bytes(),
            );
            let mut resp = abi::RxeCreateCqResp::new_zeroed();
            resp.mi = ring_mi(h);
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_CQ_HANDLE).ok_or(Errno::EINVAL)?;
            let mut resp = abi::IbUverbsDestroyCqResp::new_zeroed();
            resp.async_events_reported = objects.destroy(Kind::Cq, h)?;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_CQ_RESP, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_CREATE) => (|| {
            let uh = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_QP_USER_HANDLE)
                .ok_or(Errno::EINVAL)?;
            let cap = cmd
                .input_bytes(abi::UVERBS_ATTR_CREATE_QP_CAP)
                .ok_or(Errno::EINVAL)?;
            let on_srq = cmd.find(abi::UVERBS_ATTR_CREATE_QP_SRQ_HANDLE).is_some();
            let h = objects.create(Kind::Qp, uh);
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_QP_HANDLE, h);
            cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_CAP, &cap);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_QP_RESP_QP_NUM,
                &(0x10 + h).to_ne_bytes(),
            );
            let mut resp = abi::RxeCreateQpResp::new_zeroed();
            resp.sq_mi = ring_mi(h);
            if !on_srq {
                resp.rq_mi = ring_mi(h);
                resp.rq_mi.offset += 1 << 12;
            }
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_QP_HANDLE).ok_or(Errno::EINVAL)?;
            let mut resp = abi::IbUverbsDestroyQpResp::new_zeroed();
            resp.events_reported = objects.destroy(Kind::Qp, h)?;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_QP_RESP, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_CREATE) => (|| {
            let uh = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_SRQ_USER_HANDLE)
                .ok_or(Errno::EINVAL)?;
            let max_wr = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_SRQ_MAX_WR)
                .ok_or(Errno::EINVAL)? as u32;
            let max_sge = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_SRQ_MAX_SGE)
                .ok_or(Errno::EINVAL)? as u32;
            let h = objects.create(Kind::Srq, uh);
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_SRQ_HANDLE, h);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR,
                &max_wr.to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE,
                &max_sge.to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM,
                &(0x40 + h).to_ne_bytes(),
            );
            let mut resp = abi::RxeCreateSrqResp::new_zeroed();
            resp.mi = ring_mi(h);
            resp.srq_num = 0x40 + h;
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_SRQ_HANDLE).ok_or(Errno::EINVAL)?;
            let mut resp = abi::IbUverbsDestroySrqResp::new_zeroed();
            resp.events_reported = objects.destroy(Kind::Srq, h)?;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_SRQ_RESP, resp.as_bytes());
            Ok(())
        })(),
        (abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_MR_DESTROY) => (|| {
            let h = handle_in(cmd, abi::UVERBS_ATTR_DESTROY_MR_HANDLE).ok_or(Errno::EINVAL)?;
            objects.destroy(Kind::Mr, h).map(|_| ())
        })(),
        _ => return None,
    };
    Some(r)
}

/// PD allocation (write commands only, as on 6.1).
fn objects_write(objects: &Objects, cmd: &mut WriteCmd<'_>) -> Option<Result<(), Errno>> {
    match cmd.command {
        c if c == abi::IB_USER_VERBS_CMD_ALLOC_PD => {
            let h = objects.create(Kind::Pd, 0);
            let mut resp = abi::IbUverbsAllocPdResp::new_zeroed();
            resp.pd_handle = h;
            Some(copy_out(cmd.core_out, resp.as_bytes()))
        }
        c if c == abi::IB_USER_VERBS_CMD_DEALLOC_PD => {
            let h = u32::from_ne_bytes(cmd.core_in.get(..4)?.try_into().ok()?);
            Some(objects.destroy(Kind::Pd, h).map(|_| ()))
        }
        c if c == abi::IB_USER_VERBS_CMD_REG_MR => {
            let h = objects.create(Kind::Mr, 0);
            let mut resp = abi::IbUverbsRegMrResp::new_zeroed();
            resp.mr_handle = h;
            resp.lkey = 0x100 + h;
            resp.rkey = 0x200 + h;
            Some(copy_out(cmd.core_out, resp.as_bytes()))
        }
        // rxe accepts every transition the library lets through.
        c if c == abi::IB_USER_VERBS_CMD_MODIFY_QP => Some(Ok(())),
        _ => None,
    }
}

pub fn device_attr() -> abi::IbUverbsExQueryDeviceResp {
    let mut r = abi::IbUverbsExQueryDeviceResp::new_zeroed();
    let b = &mut r.base;
    b.fw_ver = 0;
    b.node_guid = NODE_GUID.to_be();
    b.sys_image_guid = NODE_GUID.to_be();
    b.max_mr_size = u64::MAX;
    b.page_size_cap = 0xffff_f000;
    b.vendor_id = 0xffffff;
    b.max_qp = 1_048_560;
    b.max_qp_wr = 1_048_576;
    b.device_cap_flags = 0x0122_3c76;
    b.max_sge = 32;
    b.max_sge_rd = 32;
    b.max_cq = 1_048_576;
    b.max_cqe = 32767;
    b.max_mr = 524_287;
    b.max_pd = 1_048_576;
    b.max_qp_rd_atom = 128;
    b.max_res_rd_atom = 258_048;
    b.max_qp_init_rd_atom = 128;
    b.atomic_cap = 1;
    b.max_mw = 524_287;
    b.max_srq = 917_503;
    b.max_srq_wr = 1_048_576;
    b.max_srq_sge = 27;
    b.max_pkeys = 64;
    b.local_ca_ack_delay = 15;
    b.phys_port_cnt = 1;
    r.device_cap_flags_ex = 0x0122_3c76;
    r.response_length = size_of::<abi::IbUverbsExQueryDeviceResp>() as u32;
    r
}

pub fn port_attr() -> abi::IbUverbsQueryPortResp {
    let mut p = abi::IbUverbsQueryPortResp::new_zeroed();
    p.port_cap_flags = 0x0001_0000;
    p.max_msg_sz = 0x80_0000;
    p.gid_tbl_len = 1024;
    p.pkey_tbl_len = 1;
    p.state = 4;
    p.max_mtu = 5;
    p.active_mtu = 3;
    p.max_vl_num = 1;
    p.active_width = 1;
    p.active_speed = 1;
    p.phys_state = 5;
    p.link_layer = 2;
    p
}

fn gid_entry(index: u32, gid: [u8; 16]) -> abi::IbUverbsGidEntry {
    let mut e = abi::IbUverbsGidEntry::new_zeroed();
    e.gid = [
        u64::from_ne_bytes(gid[..8].try_into().unwrap()),
        u64::from_ne_bytes(gid[8..].try_into().unwrap()),
    ];
    e.gid_index = index;
    e.port_num = 1;
    e.gid_type = 2; // RoCE v2
    e.netdev_ifindex = 2;
    e
}

fn gids() -> Vec<abi::IbUverbsGidEntry> {
    vec![gid_entry(0, LINK_LOCAL_GID), gid_entry(1, IPV4_GID)]
}

fn sysfs_gid(gid: &[u8; 16]) -> String {
    let groups: Vec<String> = gid
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect();
    format!("{}\n", groups.join(":"))
}

fn netlink_reply(request: &[u8]) -> Result<Vec<Vec<u8>>, Errno> {
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

fn ioctl(b: &Behaviour, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
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

fn write(cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
    let ex = abi::IB_USER_VERBS_CMD_FLAG_EXTENDED;
    match cmd.command {
        c if c == abi::IB_USER_VERBS_CMD_GET_CONTEXT => {
            let mut resp = abi::IbUverbsGetContextResp::new_zeroed();
            resp.async_fd = dummy_fd().into_raw_fd() as u32;
            resp.num_comp_vectors = 2;
            copy_out(cmd.core_out, resp.as_bytes())
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

fn copy_out(out: &mut [u8], bytes: &[u8]) -> Result<(), Errno> {
    if out.len() < bytes.len() {
        return Err(Errno::ENOSPC);
    }
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// A fake kernel with rxe0 (uverbs0) on a 6.1-like kernel.
pub fn fake_rxe() -> FakeRxe {
    let kernel = Arc::new(FakeKernel::new());
    let behaviour = Arc::new(Behaviour::default());
    let sys = "/sys/class/infiniband_verbs/uverbs0";
    let ib = "/sys/class/infiniband/rxe0";
    kernel
        .file(format!("{sys}/ibdev"), "rxe0\n")
        .file(format!("{sys}/abi_version"), "2\n")
        .file(format!("{sys}/dev"), "231:192\n")
        .file(format!("{ib}/node_type"), "1: CA\n")
        .file(format!("{ib}/node_guid"), "5054:00ff:fe12:3456\n")
        .file(format!("{ib}/parent"), "dummy0\n")
        .file(format!("{ib}/ports/1/gids/0"), sysfs_gid(&LINK_LOCAL_GID))
        .file(format!("{ib}/ports/1/gids/1"), sysfs_gid(&IPV4_GID))
        .file(format!("{ib}/ports/1/gids/2"), sysfs_gid(&[0; 16]))
        .file(format!("{ib}/ports/1/gid_attrs/types/0"), "RoCE v2\n")
        .file(format!("{ib}/ports/1/gid_attrs/types/1"), "RoCE v2\n")
        .file(format!("{ib}/ports/1/gid_attrs/ndevs/0"), "dummy0\n")
        .file(format!("{ib}/ports/1/gid_attrs/ndevs/1"), "dummy0\n")
        .file("/sys/class/net/dummy0/ifindex", "2\n")
        .char_dev(libc::makedev(231, 192));
    // Empty slots beyond index 2 read as zero GIDs, as sysfs shows them.
    for i in 3..1024 {
        kernel.file(format!("{ib}/ports/1/gids/{i}"), sysfs_gid(&[0; 16]));
    }
    let b = behaviour.clone();
    kernel.on_netlink(move |req| {
        if b.no_netlink.load(Ordering::Relaxed) {
            return Err(Errno::EPROTONOSUPPORT);
        }
        netlink_reply(req)
    });
    let objects = Arc::new(Objects::default());
    let (b, o) = (behaviour.clone(), objects.clone());
    kernel.on_ioctl(move |cmd| {
        if b.removed.load(Ordering::Relaxed) {
            return Err(Errno::EIO);
        }
        objects_ioctl(&o, cmd).unwrap_or_else(|| ioctl(&b, cmd))
    });
    let (b, o) = (behaviour.clone(), objects.clone());
    kernel.on_write(move |cmd| {
        if b.removed.load(Ordering::Relaxed) {
            return Err(Errno::EIO);
        }
        objects_write(&o, cmd).unwrap_or_else(|| write(cmd))
    });
    kernel.on_mmap(fill_ring);
    // The rxe send doorbell (a 32-byte POST_SEND write) is accepted.
    kernel.on_raw_write(|buf| Ok(buf.len()));
    FakeRxe {
        kernel,
        behaviour,
        objects,
    }
}
