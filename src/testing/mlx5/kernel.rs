//! The model's kernel side: what `mlx5_ib` and the uverbs core answer to
//! the commands a context makes (a 6.x kernel: ioctl methods for objects,
//! write commands for PD, MR, MODIFY_QP and AH, as the library sends them).
//! Queue objects are in `objects.rs`, UAR bookkeeping in `uar.rs`.
//!
//! Facts from Linux 6.1 `drivers/infiniband/hw/mlx5/main.c`:
//! `mlx5_ib_alloc_ucontext` (request v0 at 8 bytes, v2 from 16; unknown
//! flags, a comp_mask or reserved bytes are EOPNOTSUPP; `total_num_bfregs`
//! aligned to 2, `num_low_latency_bfregs > total - 1` EINVAL; DevX refused
//! with EINVAL by firmware without `log_max_uctx`; `cqe_version` =
//! min(firmware, request)), `set_ucontext_resp` (the response fields,
//! `cmds_supp_uhw` QUERY_DEVICE | CREATE_AH, `response_length` = min(outlen,
//! size)), `mlx5_ib_query_device` (the limits of `device_attr`).
//!
//! One limit: the fake kernel's handlers do not see which file a command
//! came on, so the model keeps one user context; with several contexts the
//! last GET_CONTEXT's settings (CQE version, static bfregs) apply.

use std::{
    os::fd::{AsRawFd, RawFd},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, MutexGuard, Weak,
    },
};

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::{
    fabric::Identity,
    hca::{Hca, UarKind, UarView},
    objects,
    uar::{self, DynUar, Uars, Uctx},
    Options,
};
use crate::{
    abi,
    netlink::{self, Request},
    sys::{Errno, IoctlCmd, Mapping, WriteCmd},
    testing::{
        device::{device_attr as soft_roce_device_attr, gid_entry, port_attr, sysfs_gid},
        kernel::FakeKernel,
    },
};

/// GID 0 (link-local, from the MAC) and GID 1 (RoCE v2, IPv4-mapped
/// 192.0.2.1) of port 1 of a model without a fabric (identity
/// [`fabric::DEFAULT_ID`](super::fabric::DEFAULT_ID)); a fabric HCA has
/// its own (`Shared::identity`).
#[cfg(test)]
pub(crate) const GIDS: [[u8; 16]; 2] = [
    [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0e, 0x42, 0xa1, 0xff, 0xfe, 0x12, 0x34, 0x56,
    ],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1],
];
const NODE_GUID: u64 = 0x0c42_a103_0012_3456;
/// The completion vectors the device has (GET_CONTEXT's answer).
pub(crate) const NUM_COMP_VECTORS: u32 = 4;

/// Kernel bookkeeping beyond the HCA: handles and UARs.
#[derive(Debug, Default)]
pub(crate) struct Books {
    next: u32,
    pub(crate) uars: Uars,
    pub(crate) pds: Vec<u32>,
    /// Address handles and the PD each was created on.
    pub(crate) ahs: Vec<(u32, u32)>,
    /// Raw packet QPs (`Options::raw_packet_qps`): handles the kernel
    /// gave, which the HCA never sees.
    pub(crate) raw_qps: Vec<u32>,
    /// The last GET_CONTEXT's driver response, which QUERY_CONTEXT repeats.
    pub(crate) uctx_resp: Option<abi::Mlx5IbAllocUcontextResp>,
    /// The device's clock info page (one per device, as mlx5_core's
    /// `mdev->clock_info`), made when first mapped; `hca.clock` updates it.
    pub(crate) clock_info: Option<Arc<std::os::fd::OwnedFd>>,
}

impl Books {
    pub(crate) fn new_handle(&mut self) -> u32 {
        self.next += 1;
        self.next
    }
}

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) hca: Arc<Mutex<Hca>>,
    /// Locked before `hca` when both are needed.
    pub(crate) books: Mutex<Books>,
    pub(crate) options: Options,
    /// DevX objects, UMEMs, fds and subscriptions (`devx.rs`); locked
    /// before `books` and `hca` when several are needed.
    pub(crate) devx: Mutex<super::devx::Devx>,
    /// `PAGE_SIZE` of the host the model plays (UARs per page × 4 KiB).
    pub(crate) page_len: usize,
    pub(crate) kernel: Weak<FakeKernel>,
    /// Answer the CQ, QP, SRQ, MR, PD, AH and DevX object destroys with
    /// `EBUSY`, leaving the objects in place, as the kernel does for an
    /// object something else still uses ([`super::Mlx5Model::refuse_destroys`]).
    pub(crate) refuse_destroys: AtomicBool,
    /// The HCA's node GUID, MAC and GIDs.
    pub(crate) identity: Identity,
}

impl Shared {
    /// Whether `cmd` is a destroy [`Shared::refuse_destroys`] refuses.
    fn refused_ioctl(&self, cmd: &IoctlCmd<'_>) -> bool {
        self.refuse_destroys.load(Ordering::Relaxed)
            && matches!(
                (cmd.object_id, cmd.method_id),
                (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_DESTROY)
                    | (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_DESTROY)
                    | (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_DESTROY)
                    | (abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_MR_DESTROY)
                    | (abi::UVERBS_OBJECT_PD, abi::UVERBS_METHOD_PD_DESTROY)
                    | (abi::UVERBS_OBJECT_AH, abi::UVERBS_METHOD_AH_DESTROY)
                    | (
                        abi::MLX5_IB_OBJECT_DEVX_OBJ,
                        abi::MLX5_IB_METHOD_DEVX_OBJ_DESTROY
                    )
            )
    }

    /// The same for the legacy write commands.
    fn refused_write(&self, cmd: &WriteCmd<'_>) -> bool {
        self.refuse_destroys.load(Ordering::Relaxed)
            && matches!(
                cmd.command,
                abi::IB_USER_VERBS_CMD_DESTROY_CQ
                    | abi::IB_USER_VERBS_CMD_DESTROY_QP
                    | abi::IB_USER_VERBS_CMD_DESTROY_SRQ
                    | abi::IB_USER_VERBS_CMD_DEREG_MR
                    | abi::IB_USER_VERBS_CMD_DEALLOC_PD
                    | abi::IB_USER_VERBS_CMD_DESTROY_AH
            )
    }
}

/// The PD number ALLOC_PD reports for PD handle `h`.
pub(crate) fn pdn_of(h: u32) -> u32 {
    0x10 + h
}

/// Queues event records on the fds they are for.
pub(crate) fn deliver(k: &FakeKernel, events: Vec<(Option<RawFd>, Vec<u8>)>) {
    for (fd, e) in events {
        match fd {
            Some(fd) => k.push_read_to(fd, Ok(e)),
            None => k.push_read(Ok(e)),
        };
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Queues the events the HCA produced during a command.
    pub(crate) fn push_events(&self) {
        let mut h = lock(&self.hca);
        if let Some(k) = self.kernel.upgrade() {
            // Under the HCA's lock: see `run` in mod.rs.
            deliver(&k, std::mem::take(&mut h.out_events));
        }
    }
}

/// The model's answers to `RDMA_NLDEV_CMD_GET` and `GET_CHARDEV`: one
/// device, `mlx5_0` (uverbs0, driver id mlx5, port 1); for fakes of mlx5_ib
/// that need discovery without the rest of the model.
pub fn netlink_reply(request: &[u8]) -> Result<Vec<Vec<u8>>, Errno> {
    netlink_reply_of(request, NODE_GUID)
}

fn netlink_reply_of(request: &[u8], node_guid: u64) -> Result<Vec<Vec<u8>>, Errno> {
    let op = netlink::msg_type(request).ok_or(Errno::EINVAL)? & 0x3ff;
    let mut m = if op == abi::RDMA_NLDEV_CMD_GET {
        let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_GET, 0, 1);
        m.u32(abi::RDMA_NLDEV_ATTR_DEV_INDEX, 0)
            .string(abi::RDMA_NLDEV_ATTR_DEV_NAME, super::DEV)
            .u32(abi::RDMA_NLDEV_ATTR_PORT_INDEX, 1)
            .u64(abi::RDMA_NLDEV_ATTR_NODE_GUID, node_guid)
            .u8(abi::RDMA_NLDEV_ATTR_DEV_NODE_TYPE, 1);
        m
    } else if op == abi::RDMA_NLDEV_CMD_GET_CHARDEV {
        let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_GET_CHARDEV, 0, 2);
        m.u64(abi::RDMA_NLDEV_ATTR_CHARDEV, (231 << 8) | 192)
            .u64(abi::RDMA_NLDEV_ATTR_CHARDEV_ABI, 1)
            .string(abi::RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs0")
            .u32(abi::RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, abi::RDMA_DRIVER_MLX5);
        m
    } else {
        return Err(Errno::EOPNOTSUPP);
    };
    Ok(vec![m.finish().to_vec()])
}

/// The sysfs files of `mlx5_0` (uverbs0, ABI version 1) on a RoCE port,
/// with what libibverbs 44 reads when netlink is missing: the global
/// uverbs ABI, 3..6 (`libibverbs/init.c:467-491`); `device/modalias`,
/// the only way it matches libmlx5 then (`init.c:277-298`,
/// `providers/mlx5/mlx5.c:67-90`; a ConnectX-5, 15b3:1017); P_Key 0
/// (`ibv_query_pkey`); firmware version, system image GUID and board id
/// (`ibv_devinfo`).
fn sysfs(k: &FakeKernel, id: Identity) {
    let sys = "/sys/class/infiniband_verbs/uverbs0";
    let ib = "/sys/class/infiniband/mlx5_0";
    k.file("/sys/class/infiniband_verbs/abi_version", "6\n")
        .file(
            format!("{ib}/device/modalias"),
            "pci:v000015B3d00001017sv000015B3sd00000020bc02sc00i00\n",
        )
        .file(format!("{ib}/ports/1/pkeys/0"), "0xffff\n")
        .file(format!("{ib}/fw_ver"), "16.35.2000\n")
        .file(format!("{ib}/sys_image_guid"), guid_text(id.node_guid()))
        .file(format!("{ib}/board_id"), "MT_0000000008\n");
    k.file(format!("{sys}/ibdev"), "mlx5_0\n")
        .file(format!("{sys}/abi_version"), "1\n")
        .file(format!("{sys}/dev"), "231:192\n")
        .file(format!("{ib}/node_type"), "1: CA\n")
        .file(format!("{ib}/node_guid"), guid_text(id.node_guid()))
        .file(format!("{ib}/ports/1/link_layer"), "Ethernet\n")
        .file("/sys/class/net/eth0/ifindex", "2\n")
        .char_dev(libc::makedev(231, 192));
    for (i, g) in id.gids().iter().enumerate() {
        k.file(format!("{ib}/ports/1/gids/{i}"), sysfs_gid(g))
            .file(format!("{ib}/ports/1/gid_attrs/types/{i}"), "RoCE v2\n")
            .file(format!("{ib}/ports/1/gid_attrs/ndevs/{i}"), "eth0\n");
    }
}

/// A GUID as sysfs prints it (`0c42:a103:0012:3456`).
fn guid_text(g: u64) -> String {
    let b = g.to_be_bytes();
    format!(
        "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}\n",
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

pub(crate) fn install(
    k: &Arc<FakeKernel>,
    hca: &Arc<Mutex<Hca>>,
    o: &Options,
    identity: Identity,
) -> Arc<Shared> {
    sysfs(k, identity);
    let guid = identity.node_guid();
    k.on_netlink(move |r| netlink_reply_of(r, guid));
    let s = Arc::new(Shared {
        hca: hca.clone(),
        books: Mutex::default(),
        devx: Mutex::default(),
        options: o.clone(),
        page_len: o.num_uars_per_page.max(1) as usize * 4096,
        kernel: Arc::downgrade(k),
        refuse_destroys: AtomicBool::new(false),
        identity,
    });
    lock(hca).gids = identity.gids().to_vec();
    let s2 = s.clone();
    k.on_ioctl(move |cmd| {
        if cmd.driver_id != abi::RDMA_DRIVER_MLX5 {
            return Err(Errno::EINVAL);
        }
        if s2.refused_ioctl(cmd) {
            return Err(Errno::EBUSY);
        }
        let r = ioctl(&s2, cmd);
        s2.push_events();
        r
    });
    let s2 = s.clone();
    k.on_write(move |cmd| {
        if s2.refused_write(cmd) {
            return Err(Errno::EBUSY);
        }
        let r = write(&s2, cmd);
        s2.push_events();
        r
    });
    let s2 = s.clone();
    // SAFETY: `mmap` maps a memfd of exactly `len` bytes read-write (UAR
    // and clock pages, `uar::map`); the memfds are sized once when made
    // (`uar::memfd`) and never truncated, and the mapping lives until the
    // returned `Mapping` is dropped. The model's own views of the same
    // pages are raw mappings too, read with volatile accesses.
    #[allow(unsafe_code)]
    unsafe {
        k.on_mmap(move |offset, len| mmap(&s2, offset, len));
    }
    s
}

fn ioctl(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let value = |cmd: &IoctlCmd<'_>, id| cmd.input_value(id).ok_or(Errno::EINVAL);
    match (cmd.object_id, cmd.method_id) {
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_GET_CONTEXT) => get_context(s, cmd),
        (abi::UVERBS_OBJECT_ASYNC_EVENT, abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC) => {
            let fd = event_fd(s)?;
            cmd.set_new_fd(abi::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, fd);
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_PORT) => {
            if cmd.input_value(abi::UVERBS_ATTR_QUERY_PORT_PORT_NUM) != Some(1) {
                return Err(Errno::EINVAL);
            }
            let mut resp = abi::IbUverbsQueryPortRespEx::new_zeroed();
            resp.legacy_resp = port_attr();
            cmd.write_output(abi::UVERBS_ATTR_QUERY_PORT_RESP, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_GID_TABLE) => {
            // Linux 6.1 uverbs_std_types_device.c:312-360: the caller's
            // entry size (0 is EINVAL) divides the buffer into entries
            // (uverbs_attr_ptr_get_array_size: a remainder or none is
            // EINVAL); a table with more entries than fit is EINVAL
            // (rdma_query_gid_table, cache.c:1273); each entry is copied
            // at the caller's stride (copy_gid_entries_to_user).
            let size = value(cmd, abi::UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE)? as usize;
            let len = cmd
                .find(abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES)
                .map_or(0, |a| usize::from(a.len));
            let gids = s.identity.gids();
            if size == 0 || len % size != 0 || len / size < gids.len() {
                return Err(Errno::EINVAL);
            }
            let mut out = vec![0u8; gids.len() * size];
            for (i, g) in gids.iter().enumerate() {
                let e = gid_entry(i as u32, *g);
                let b = e.as_bytes();
                let n = b.len().min(size);
                out[i * size..i * size + n].copy_from_slice(&b[..n]);
            }
            cmd.write_output(abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, &out);
            cmd.write_output(
                abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
                &(gids.len() as u64).to_ne_bytes(),
            );
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_GID_ENTRY) => {
            let index = value(cmd, abi::UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX)? as usize;
            let gids = s.identity.gids();
            let gid = gids.get(index).ok_or(Errno::ENODATA)?;
            let e = gid_entry(index as u32, *gid);
            cmd.write_output(abi::UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, e.as_bytes());
            Ok(())
        }
        // What ibv_import_device, ibv_import_pd and ibv_import_mr ask.
        // Linux 6.1 uverbs_std_types_device.c (QUERY_CONTEXT: the comp
        // vectors, core support OPTIONAL_MR_ACCESS, then the driver's
        // mlx5_ib_query_ucontext, main.c:1993-2010: the context response
        // again, its response_length the attribute's), std_types.c
        // (MLX5_IB_METHOD_PD_QUERY: the PD number), uverbs_std_types_mr.c
        // (QUERY_MR: lkey, rkey, length, iova).
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_CONTEXT) => {
            let mut r = lock(&s.books).uctx_resp.ok_or(Errno::EINVAL)?;
            let len = cmd
                .find(abi::MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX)
                .map_or(0, |a| usize::from(a.len));
            r.response_length = len.min(size_of::<abi::Mlx5IbAllocUcontextResp>()) as u32;
            cmd.write_output(
                abi::UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS,
                &NUM_COMP_VECTORS.to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT,
                &u64::from(abi::IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS).to_ne_bytes(),
            );
            cmd.write_output(abi::MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX, r.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_PD, abi::MLX5_IB_METHOD_PD_QUERY) => {
            let h = value(cmd, abi::MLX5_IB_ATTR_QUERY_PD_HANDLE)? as u32;
            if !lock(&s.books).pds.contains(&h) {
                return Err(lookup_error(s, h));
            }
            cmd.write_output(
                abi::MLX5_IB_ATTR_QUERY_PD_RESP_PDN,
                &pdn_of(h).to_ne_bytes(),
            );
            Ok(())
        }
        (abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_QUERY_MR) => {
            let h = value(cmd, abi::UVERBS_ATTR_QUERY_MR_HANDLE)? as u32;
            let mr = lock(&s.hca).mrs.get(h);
            let mr = mr.ok_or_else(|| lookup_error(s, h))?;
            cmd.write_output(abi::UVERBS_ATTR_QUERY_MR_RESP_LKEY, &mr.lkey.to_ne_bytes());
            cmd.write_output(abi::UVERBS_ATTR_QUERY_MR_RESP_RKEY, &mr.rkey.to_ne_bytes());
            cmd.write_output(abi::UVERBS_ATTR_QUERY_MR_RESP_LENGTH, &mr.len.to_ne_bytes());
            cmd.write_output(abi::UVERBS_ATTR_QUERY_MR_RESP_IOVA, &mr.iova.to_ne_bytes());
            Ok(())
        }
        (abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_ALLOC) => uar_alloc(s, cmd),
        (abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_DESTROY) => {
            if s.options.static_uars {
                return Err(Errno::EPROTONOSUPPORT);
            }
            let h = value(cmd, abi::MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE)? as u32;
            let mut b = lock(&s.books);
            let o = b.uars.objects.remove(&h).ok_or(Errno::EINVAL)?;
            b.uars.fds.remove(&o.page_id);
            lock(&s.hca).uars.retain(|u| u.page_id != o.page_id);
            Ok(())
        }
        (abi::UVERBS_OBJECT_PD, abi::UVERBS_METHOD_PD_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_PD_HANDLE)? as u32;
            dealloc_pd(s, h)
        }
        (abi::UVERBS_OBJECT_AH, abi::UVERBS_METHOD_AH_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_AH_HANDLE)? as u32;
            destroy_ah(s, h)
        }
        (abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_MR_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_MR_HANDLE)? as u32;
            lock(&s.hca).mrs.remove(h).map(|_| ()).ok_or(Errno::EINVAL)
        }
        (
            abi::MLX5_IB_OBJECT_DEVX
            | abi::MLX5_IB_OBJECT_DEVX_OBJ
            | abi::MLX5_IB_OBJECT_DEVX_UMEM
            | abi::MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD
            | abi::MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD,
            _,
        ) => super::devx::ioctl(s, cmd),
        _ => objects::ioctl(s, cmd),
    }
}

/// Why an IDR attribute's handle names no object of the method's type
/// (6.1 rdma_core.c `uverbs_get_uobject_from_file`,
/// `lookup_get_idr_uobject`): `ENOENT` for a handle that names nothing
/// (never given, or destroyed), `EINVAL` for one that names an object of
/// another type. The model knows the verbs objects' handles (not DevX
/// objects', which it answers `ENOENT` for).
pub(crate) fn lookup_error(s: &Shared, h: u32) -> Errno {
    let b = lock(&s.books);
    let g = lock(&s.hca);
    let live = b.pds.contains(&h)
        || b.ahs.iter().any(|&(a, _)| a == h)
        || b.raw_qps.contains(&h)
        || b.uars.objects.contains_key(&h)
        || g.mrs.get(h).is_some()
        || g.cqs.values().any(|c| c.handle == h)
        || g.qps.values().any(|q| q.handle == h)
        || g.srqs.values().any(|q| q.handle == h);
    if live {
        Errno::EINVAL
    } else {
        Errno::ENOENT
    }
}

/// `mlx5_ib_alloc_ucontext`.
fn get_context(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let o = &s.options;
    let bytes = cmd
        .input_bytes(abi::UVERBS_ATTR_UHW_IN)
        .ok_or(Errno::EINVAL)?;
    let ver = match bytes.len() {
        8 => 0,
        n if n >= 16 => 2,
        _ => return Err(Errno::EINVAL),
    };
    let mut padded = [0u8; size_of::<abi::Mlx5IbAllocUcontextReqV2>()];
    let n = bytes.len().min(padded.len());
    padded[..n].copy_from_slice(&bytes[..n]);
    let req = abi::Mlx5IbAllocUcontextReqV2::read_from_bytes(&padded).map_err(|_| Errno::EINVAL)?;
    if req.flags & !abi::MLX5_IB_ALLOC_UCTX_DEVX != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if req.comp_mask != 0 || req.reserved0 != 0 || req.reserved1 != 0 || req.reserved2 != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let total = req.total_num_bfregs.div_ceil(2) * 2;
    if req.num_low_latency_bfregs > total.wrapping_sub(1) {
        return Err(Errno::EINVAL);
    }
    let devx = req.flags & abi::MLX5_IB_ALLOC_UCTX_DEVX != 0;
    if devx && o.refuse_devx {
        return Err(Errno::EINVAL); // firmware without log_max_uctx
    }
    let nupp = o.num_uars_per_page.max(1);
    let lib_4k = req.lib_caps & u64::from(abi::MLX5_LIB_CAP_4K_UAR) != 0;
    let lib_dyn = req.lib_caps & u64::from(abi::MLX5_LIB_CAP_DYN_UAR) != 0;
    // A kernel without dynamic UARs does not know the capability.
    let dynamic = lib_dyn && !o.static_uars;
    let mut books = lock(&s.books);
    let mut uctx = if dynamic {
        Uctx {
            dynamic: true,
            ..Uctx::default()
        }
    } else {
        let per_page = if lib_4k { nupp } else { 1 };
        Uctx::static_layout(total, req.num_low_latency_bfregs, per_page, s.page_len)?
    };
    uctx.ver = ver;
    uctx.low_lat = req.num_low_latency_bfregs;
    // allocate_uars: the static pages, each a memfd the model also maps.
    for i in 0..uctx.num_static_sys_pages as usize {
        let id = books.uars.new_page_id(nupp);
        let fd = uar::memfd(s.page_len)?;
        let view = uar::map(&fd, s.page_len)?;
        lock(&s.hca).uars.push(UarView {
            map: view,
            page_id: id,
            kind: UarKind::Bf,
        });
        books.uars.fds.insert(id, fd);
        uctx.sys_pages[i] = Some(id);
    }
    let cqe_version = o.cqe_version.min(req.max_cqe_version);
    let mut r = abi::Mlx5IbAllocUcontextResp::new_zeroed();
    r.qp_tab_size = 1 << 18;
    r.bf_reg_size = o.bf_reg_size;
    r.tot_bfregs = uctx.tot_bfregs();
    r.cache_line_size = 64;
    // ConnectX-4/5 firmware's max_wqe_sz_sq / max_wqe_sz_rq.
    r.max_sq_desc_sz = 1024;
    r.max_rq_desc_sz = 512;
    r.max_send_wqebb = 1 << 15;
    r.max_recv_wr = 1 << 15;
    r.max_srq_recv_wr = 1 << 15;
    r.num_ports = 1;
    r.comp_mask = abi::MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_MKEY_UPDATE_TAG;
    if s.page_len <= 4096 {
        r.comp_mask |= abi::MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET;
        r.hca_core_clock_offset = 0x1000 % s.page_len as u64;
    }
    // `mlx5_ib_alloc_ucontext`: the clock info page exists.
    if !s.options.no_clock_info {
        r.clock_info_versions = 1 << abi::MLX5_IB_CLOCK_INFO_V1;
    }
    r.cqe_version = cqe_version;
    r.cmds_supp_uhw =
        (abi::MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE | abi::MLX5_USER_CMDS_SUPP_UHW_CREATE_AH) as u8;
    r.eth_min_inline = 1; // MLX5_INLINE_MODE_NONE + 1 (a ConnectX-5)
    r.log_uar_size = 12;
    r.num_uars_per_page = nupp;
    r.num_dyn_bfregs = uctx.num_dyn_bfregs;
    let outlen = cmd
        .find(abi::UVERBS_ATTR_UHW_OUT)
        .map_or(0, |a| usize::from(a.len));
    r.response_length = outlen.min(size_of::<abi::Mlx5IbAllocUcontextResp>()) as u32;
    books.uars.uctx = uctx;
    books.uctx_resp = Some(r);
    drop(books);
    cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, r.as_bytes());
    cmd.write_output(
        abi::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
        &NUM_COMP_VECTORS.to_ne_bytes(),
    );
    cmd.write_output(
        abi::UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT,
        &1u64.to_ne_bytes(),
    );
    let mut h = lock(&s.hca);
    h.cqe_v1 = cqe_version == 1;
    h.devx = devx;
    Ok(())
}

/// `MLX5_IB_METHOD_UAR_OBJ_ALLOC`.
fn uar_alloc(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    if s.options.static_uars {
        // A kernel without dynamic UARs has no such object.
        return Err(Errno::EPROTONOSUPPORT);
    }
    let kind = cmd
        .input_value(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE)
        .ok_or(Errno::EINVAL)?;
    let kind = match u32::try_from(kind) {
        Ok(abi::MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF) if s.options.bf_reg_size == 0 => {
            return Err(Errno::EOPNOTSUPP)
        }
        Ok(abi::MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF) => UarKind::Bf,
        Ok(abi::MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC) => UarKind::Nc,
        _ => return Err(Errno::EOPNOTSUPP),
    };
    let nupp = s.options.num_uars_per_page.max(1);
    let mut b = lock(&s.books);
    let h = b.new_handle();
    let id = b.uars.new_page_id(nupp);
    let pgoff = uar::entry_pgoff(b.uars.entries);
    b.uars.entries += 1;
    let fd = uar::memfd(s.page_len)?;
    let view = uar::map(&fd, s.page_len)?;
    lock(&s.hca).uars.push(UarView {
        map: view,
        page_id: id,
        kind,
    });
    b.uars.fds.insert(id, fd.clone());
    b.uars.objects.insert(
        h,
        DynUar {
            start_pgoff: pgoff,
            page_id: id,
            fd,
        },
    );
    drop(b);
    let offset = uar::entry_offset(pgoff, s.page_len);
    cmd.set_new_object(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, h);
    cmd.write_output(
        abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET,
        &offset.to_ne_bytes(),
    );
    cmd.write_output(
        abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH,
        &(s.page_len as u32).to_ne_bytes(),
    );
    cmd.write_output(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, &id.to_ne_bytes());
    Ok(())
}

/// `mlx5_ib_mmap`: UAR pages (static, ALLOC_WC, dynamic objects).
fn mmap(s: &Shared, offset: u64, len: usize) -> Result<Mapping, Errno> {
    let page = s.page_len as u64;
    if offset % page != 0 {
        return Err(Errno::EINVAL);
    }
    let pgoff = offset / page;
    let wc = s.options.bf_reg_size != 0;
    let mut b = lock(&s.books);
    let fd = match uar::command(pgoff) {
        uar::WC_PAGE | uar::ALLOC_WC if !wc => return Err(Errno::EPERM),
        c @ (uar::REGULAR_PAGE | uar::WC_PAGE | uar::NC_PAGE | uar::ALLOC_WC) => {
            let nupp = s.options.num_uars_per_page.max(1);
            let u = &b.uars.uctx;
            if u.dynamic || u.sys_pages.is_empty() || len != s.page_len {
                return Err(Errno::EINVAL);
            }
            if c == uar::ALLOC_WC {
                let idx = uar::extended_index(pgoff) + u64::from(u.num_static_sys_pages);
                if idx >= u64::from(u.num_sys_pages) {
                    return Err(Errno::EINVAL);
                }
                let first = (idx * u64::from(u.uars_per_sys_page) * 2) as usize;
                if first >= u.count.len() || u.count[first] != 0 {
                    return Err(Errno::EINVAL);
                }
                let id = b.uars.new_page_id(nupp);
                let fd = uar::memfd(s.page_len)?;
                let view = uar::map(&fd, s.page_len)?;
                lock(&s.hca).uars.push(UarView {
                    map: view,
                    page_id: id,
                    kind: UarKind::Bf,
                });
                b.uars.uctx.count[first] += 1;
                b.uars.uctx.sys_pages[idx as usize] = Some(id);
                b.uars.fds.insert(id, fd.clone());
                fd
            } else {
                let idx = (pgoff & 0xff) as usize;
                if idx >= u.num_static_sys_pages as usize {
                    return Err(Errno::EINVAL);
                }
                let id = u.sys_pages[idx].ok_or(Errno::EINVAL)?;
                b.uars.fds.get(&id).cloned().ok_or(Errno::EINVAL)?
            }
        }
        uar::GET_CONTIGUOUS_PAGES => return Err(Errno::ENOSYS),
        uar::CORE_CLOCK => {
            if len != s.page_len {
                return Err(Errno::EINVAL);
            }
            if s.page_len > 4096 {
                return Err(Errno::EOPNOTSUPP);
            }
            uar::memfd(s.page_len)? // the clock page: reads as zero
        }
        // `mlx5_ib_mmap_clock_info_page`: one page, index V1 only.
        uar::CLOCK_INFO => {
            if len != s.page_len {
                return Err(Errno::EINVAL);
            }
            if pgoff & 0xff != u64::from(abi::MLX5_IB_CLOCK_INFO_V1) || s.options.no_clock_info {
                return Err(Errno::EOPNOTSUPP);
            }
            match &b.clock_info {
                Some(fd) => fd.clone(),
                None => {
                    let fd = uar::memfd(s.page_len)?;
                    let view = uar::map(&fd, s.page_len)?;
                    lock(&s.hca).clock.attach_info(view);
                    b.clock_info = Some(fd.clone());
                    fd
                }
            }
        }
        _ => {
            let key = uar::entry_key(pgoff);
            let o = b
                .uars
                .objects
                .values()
                .find(|o| o.start_pgoff == key)
                .ok_or(Errno::EINVAL)?;
            if len != s.page_len {
                return Err(Errno::EINVAL);
            }
            o.fd.clone()
        }
    };
    drop(b);
    uar::map(&fd, len)
}

/// A completion channel's or the async event queue's fd: readable (to
/// `poll`, `epoll` and reads) exactly while an event is queued for it, as
/// the kernel's `ib_uverbs_event_poll` reports (`uverbs_main.c`).
fn event_fd(s: &Shared) -> Result<std::os::fd::OwnedFd, Errno> {
    match s.kernel.upgrade() {
        Some(k) => k.event_fd(),
        None => Err(Errno::ENODEV),
    }
}

fn copy_out(out: &mut [u8], bytes: &[u8]) -> Result<(), Errno> {
    if out.len() < bytes.len() {
        return Err(Errno::ENOSPC);
    }
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// A handle at the start of a destroy command's request.
fn handle_in(core_in: &[u8]) -> Result<u32, Errno> {
    let b = core_in.get(..4).ok_or(Errno::EINVAL)?;
    Ok(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// DEALLOC_PD, refused with `EBUSY` while a QP, SRQ, MR or AH uses the
/// PD: Linux 6.1 `uverbs_free_pd` (`uverbs_std_types.c:121-130`) checks
/// `pd->usecnt`, which `ib_qp_usecnt_inc` (`verbs.c:1306`, QPs),
/// `ib_create_srq_user` (`verbs.c:1038`), `ib_uverbs_reg_mr`
/// (`uverbs_cmd.c:741`), `ib_uverbs_alloc_mw` (`uverbs_cmd.c:953`; the
/// model has no memory windows) and `_rdma_create_ah` (`verbs.c:544`)
/// count. The refused PD stays as it was.
fn dealloc_pd(s: &Shared, h: u32) -> Result<(), Errno> {
    let mut b = lock(&s.books);
    let i = b.pds.iter().position(|&p| p == h).ok_or(Errno::EINVAL)?;
    let g = lock(&s.hca);
    let used = g.qps.values().any(|q| q.pd == h)
        || g.srqs.values().any(|q| q.pd == h)
        || g.mrs.on_pd(h)
        || b.ahs.iter().any(|&(_, pd)| pd == h);
    drop(g);
    if used {
        return Err(Errno::EBUSY);
    }
    b.pds.remove(i);
    Ok(())
}

fn destroy_ah(s: &Shared, h: u32) -> Result<(), Errno> {
    let mut b = lock(&s.books);
    let i = b
        .ahs
        .iter()
        .position(|&(a, _)| a == h)
        .ok_or(Errno::EINVAL)?;
    b.ahs.remove(i);
    Ok(())
}

/// The device attributes `mlx5_ib_query_device` reports for a ConnectX-5
/// (typical firmware caps: `log_max_qp` 18, `log_max_qp_sz` 15,
/// `log_max_cq_sz` 22, `log_max_srq_sz` 15; `max_send_sge` 30 from the
/// 512-byte SQ descriptor clamp, `max_recv_sge` 32).
fn device_attr(node_guid: u64) -> abi::IbUverbsExQueryDeviceResp {
    let mut d = soft_roce_device_attr(node_guid);
    let b = &mut d.base;
    b.fw_ver = (16 << 32) | (35 << 16) | 2000;
    b.vendor_id = 0x02c9;
    b.vendor_part_id = 4119;
    b.max_qp = 1 << 18;
    b.max_qp_wr = 1 << 15;
    b.max_sge = 30;
    b.max_sge_rd = 30;
    b.max_cq = 1 << 24;
    b.max_cqe = (1 << 22) - 1;
    b.max_mr = 1 << 24;
    b.max_pd = 1 << 24;
    b.max_qp_rd_atom = 16;
    b.max_qp_init_rd_atom = 16;
    b.max_res_rd_atom = 16 << 18;
    b.atomic_cap = 1; // IB_ATOMIC_HCA (host-endian 8-byte atomics)
    b.max_srq = 1 << 23;
    b.max_srq_wr = (1 << 15) - 1;
    b.max_srq_sge = 31;
    b.max_pkeys = 128;
    b.local_ca_ack_delay = 16;
    // `mlx5_ib_query_device`: the CQE timestamps' width and clock.
    d.timestamp_mask = super::hca::TIMESTAMP_MASK;
    d.hca_core_clock = super::hca::HCA_CORE_CLOCK_KHZ;
    d
}

/// Linux 6.1 `ib_check_mr_access` (`include/rdma/ib_verbs.h:4289-4307`),
/// which `ib_uverbs_reg_mr` runs first: remote write or remote atomic
/// access needs local write; on-demand paging needs a device that has it
/// (this one has not).
fn check_mr_access(access: u32) -> Result<(), Errno> {
    let remote = abi::IB_UVERBS_ACCESS_REMOTE_WRITE | abi::IB_UVERBS_ACCESS_REMOTE_ATOMIC;
    if access & remote != 0 && access & abi::IB_UVERBS_ACCESS_LOCAL_WRITE == 0 {
        return Err(Errno::EINVAL);
    }
    if access & abi::IB_UVERBS_ACCESS_ON_DEMAND != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

fn write(s: &Shared, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
    let ex = abi::IB_USER_VERBS_CMD_FLAG_EXTENDED;
    match cmd.command {
        c if c == ex | abi::IB_USER_VERBS_EX_CMD_QUERY_DEVICE => {
            copy_out(cmd.core_out, device_attr(s.identity.node_guid()).as_bytes())
        }
        // The legacy command `ibv_query_device()` sends (libibverbs
        // `verbs.c:163-172`, `cmd_device.c`): Linux 6.1 `ib_uverbs_query_device`
        // answers `ib_uverbs_query_device_resp`, the same fields as the
        // extended response's `base` (`copy_query_dev_fields`).
        c if c == abi::IB_USER_VERBS_CMD_QUERY_DEVICE => copy_out(
            cmd.core_out,
            device_attr(s.identity.node_guid()).base.as_bytes(),
        ),
        c if c == abi::IB_USER_VERBS_CMD_QUERY_PORT => {
            copy_out(cmd.core_out, port_attr().as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_ALLOC_PD => {
            let h = {
                let mut b = lock(&s.books);
                let h = b.new_handle();
                b.pds.push(h);
                h
            };
            let mut resp = abi::IbUverbsAllocPdResp::new_zeroed();
            resp.pd_handle = h;
            copy_out(cmd.core_out, resp.as_bytes())?;
            let mut drv = abi::Mlx5IbAllocPdResp::new_zeroed();
            drv.pdn = pdn_of(h);
            copy_out(cmd.driver_out, drv.as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_DEALLOC_PD => dealloc_pd(s, handle_in(cmd.core_in)?),
        // mlx5 has `alloc_mw` (Linux 6.1 `mlx5_ib_alloc_mw`), so the
        // kernel takes the command and checks it before the driver sees
        // it: an unknown PD is EINVAL (`uobj_get_obj_read`), a type other
        // than 1 or 2 EINVAL (`ib_uverbs_alloc_mw`, `uverbs_cmd.c:933`).
        // The model executes no memory window, so a valid request is
        // answered EOPNOTSUPP.
        c if c == abi::IB_USER_VERBS_CMD_ALLOC_MW => {
            let req = abi::IbUverbsAllocMw::read_from_prefix(cmd.core_in)
                .map_err(|_| Errno::EINVAL)?
                .0;
            if !lock(&s.books).pds.contains(&req.pd_handle) || !matches!(req.mw_type, 1 | 2) {
                return Err(Errno::EINVAL);
            }
            Err(Errno::EOPNOTSUPP)
        }
        c if c == abi::IB_USER_VERBS_CMD_REG_MR => {
            let req = abi::IbUverbsRegMr::read_from_prefix(cmd.core_in)
                .map_err(|_| Errno::EINVAL)?
                .0;
            check_mr_access(req.access_flags)?;
            // `ib_uverbs_reg_mr`: an unknown PD is EINVAL
            // (`uobj_get_obj_read` fails); the books stay locked until
            // the MR is in place, so a DEALLOC_PD sees it.
            let mut b = lock(&s.books);
            if !b.pds.contains(&req.pd_handle) {
                return Err(Errno::EINVAL);
            }
            let h = b.new_handle();
            let mr = super::memory::Mr {
                pd: req.pd_handle,
                start: req.start,
                iova: req.hca_va,
                len: req.length,
                lkey: h << 8 | 0x11,
                rkey: h << 8 | 0x22,
                access: req.access_flags,
            };
            lock(&s.hca).mrs.insert(h, mr);
            drop(b);
            let mut resp = abi::IbUverbsRegMrResp::new_zeroed();
            resp.mr_handle = h;
            resp.lkey = mr.lkey;
            resp.rkey = mr.rkey;
            copy_out(cmd.core_out, resp.as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_DEREG_MR => {
            let h = handle_in(cmd.core_in)?;
            lock(&s.hca).mrs.remove(h).map(|_| ()).ok_or(Errno::EINVAL)
        }
        c if c == abi::IB_USER_VERBS_CMD_QUERY_QP => {
            // The state as the device has it (DevX may have moved it), and
            // the attributes as created and modified.
            let q = abi::IbUverbsQueryQp::read_from_prefix(cmd.core_in)
                .map_err(|_| Errno::EINVAL)?
                .0;
            let mut resp = lock(&s.hca)
                .qps
                .values()
                .find(|qp| qp.handle == q.qp_handle)
                .map(|qp| {
                    let mut a = qp.attrs;
                    a.qp_state = qp.state;
                    a.cur_qp_state = qp.state;
                    a
                })
                .ok_or(Errno::EINVAL)?;
            // Every attribute, whatever the mask asked (mlx5_ib answers
            // them all; the mask only tells the library what to copy).
            resp.reserved = [0; 5];
            copy_out(cmd.core_out, resp.as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_MODIFY_QP => {
            let m = abi::IbUverbsModifyQp::read_from_prefix(cmd.core_in)
                .map_err(|_| Errno::EINVAL)?
                .0;
            objects::modify_qp(s, &m)
        }
        c if c == ex | abi::IB_USER_VERBS_EX_CMD_MODIFY_QP => {
            let m = abi::IbUverbsExModifyQp::read_from_prefix(cmd.core_in)
                .map_err(|_| Errno::EINVAL)?
                .0;
            objects::modify_qp(s, &m.base)
        }
        c if c == abi::IB_USER_VERBS_CMD_CREATE_AH => {
            // mlx5_ib_create_ah: a RoCE AH needs a GRH, and its driver
            // response (the destination MAC) needs 10 bytes.
            let req = abi::IbUverbsCreateAh::read_from_prefix(cmd.core_in)
                .map_err(|_| Errno::EINVAL)?
                .0;
            if req.attr.is_global == 0 || cmd.driver_out.len() < 10 {
                return Err(Errno::EINVAL);
            }
            let h = {
                // `ib_uverbs_create_ah`: an unknown PD is EINVAL.
                let mut b = lock(&s.books);
                if !b.pds.contains(&req.pd_handle) {
                    return Err(Errno::EINVAL);
                }
                let h = b.new_handle();
                b.ahs.push((h, req.pd_handle));
                h
            };
            let mut resp = abi::IbUverbsCreateAhResp::new_zeroed();
            resp.ah_handle = h;
            copy_out(cmd.core_out, resp.as_bytes())?;
            let mut drv = abi::Mlx5IbCreateAhResp::new_zeroed();
            drv.response_length = 10;
            // The destination's MAC: a fabric HCA's, from its GID (what
            // the kernel's neighbour lookup would find), else our own.
            let to = Identity::of_gid(&req.attr.grh.dgid).unwrap_or(s.identity);
            drv.dmac = to.mac();
            cmd.driver_out[..10].copy_from_slice(&drv.as_bytes()[..10]);
            Ok(())
        }
        c if c == abi::IB_USER_VERBS_CMD_DESTROY_AH => destroy_ah(s, handle_in(cmd.core_in)?),
        c if c == abi::IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL => {
            let fd = event_fd(s)?;
            let mut resp = abi::IbUverbsCreateCompChannelResp::new_zeroed();
            resp.fd = fd.as_raw_fd() as u32;
            copy_out(cmd.core_out, resp.as_bytes())?;
            cmd.new_fd = Some(fd);
            Ok(())
        }
        _ => Err(Errno::EOPNOTSUPP),
    }
}
