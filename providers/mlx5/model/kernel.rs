//! The model's kernel side: what `mlx5_ib` and the uverbs core answer to
//! the commands a context makes (a 6.x kernel: ioctl methods for objects,
//! write commands for PD, MR, MODIFY_QP, AH and completion channels).
//!
//! Facts from Linux `drivers/infiniband/hw/mlx5/main.c`
//! (`mlx5_ib_alloc_ucontext`: `tot_bfregs` 0 with `MLX5_LIB_CAP_DYN_UAR`;
//! `UAR_OBJ_ALLOC`: BF refused without write-combining; `mlx5_ib_mmap`: the
//! command in bits 8..15 of the page offset, the index below, one page),
//! `qp.c` (`set_user_buf_size`: power-of-two counts, the RQ at offset 0 and
//! the SQ after it, `db_addr` with the receive counter first;
//! `get_qp_user_index`), `cq.c` (`entries + 1` rounded to a power of two;
//! `cqe_size` 64 or 128) and `srq.c` (`max_wr + 1` rounded, WQE size
//! `roundup_pow_of_two(max(32, 16 + 16 * max_sge))`).

use std::{
    os::fd::{IntoRawFd, OwnedFd},
    sync::{Arc, Mutex},
};

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::{
    hca::{Cq, Hca, Mr, Qp, Srq, UarView, RESET},
    Options,
};
use crate::{
    abi,
    netlink::{self, Request},
    providers::rxe::fake::{device_attr, port_attr},
    sys::{
        fake::{dummy_fd, FakeKernel},
        Errno, IoctlCmd, Mapping, WriteCmd,
    },
    QpAttrMask,
};

/// GID 1 of port 1 (RoCE v2, IPv4-mapped 192.0.2.1), and GID 0.
const GIDS: [[u8; 16]; 2] = [
    [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0e, 0x42, 0xa1, 0xff, 0xfe, 0x12, 0x34, 0x56,
    ],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1],
];

type Shared = Arc<Mutex<Hca>>;

/// Kernel bookkeeping beyond the HCA: handles, user handles, mmap offsets.
#[derive(Debug, Default)]
struct Books {
    next: u32,
    /// mmap offset -> (page id, memfd) of UARs allocated but not mapped.
    pending: Vec<(u64, u32, Arc<OwnedFd>)>,
    pds: Vec<u32>,
    ahs: Vec<u32>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn netlink_reply(request: &[u8]) -> Result<Vec<Vec<u8>>, Errno> {
    let op = netlink::msg_type(request).ok_or(Errno::EINVAL)? & 0x3ff;
    let mut m = if op == abi::RDMA_NLDEV_CMD_GET {
        let mut m = Request::nldev(abi::RDMA_NLDEV_CMD_GET, 0, 1);
        m.u32(abi::RDMA_NLDEV_ATTR_DEV_INDEX, 0)
            .string(abi::RDMA_NLDEV_ATTR_DEV_NAME, super::DEV)
            .u32(abi::RDMA_NLDEV_ATTR_PORT_INDEX, 1)
            .u64(abi::RDMA_NLDEV_ATTR_NODE_GUID, 0x0c42_a103_0012_3456)
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

fn gid_entry(index: u32) -> abi::IbUverbsGidEntry {
    let g = GIDS[index as usize];
    let mut e = abi::IbUverbsGidEntry::new_zeroed();
    e.gid = [
        u64::from_ne_bytes(g[..8].try_into().unwrap_or_default()),
        u64::from_ne_bytes(g[8..].try_into().unwrap_or_default()),
    ];
    e.gid_index = index;
    e.port_num = 1;
    e.gid_type = 2;
    e.netdev_ifindex = 2;
    e
}

/// A memfd of `len` bytes.
fn memfd(len: usize) -> Result<OwnedFd, Errno> {
    let fd = nix::sys::memfd::memfd_create(
        c"uverbs-mlx5-model-uar",
        nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
    )?;
    nix::unistd::ftruncate(&fd, len as i64)?;
    Ok(fd)
}

fn map(fd: &OwnedFd, len: usize) -> Result<Mapping, Errno> {
    memmap2::MmapOptions::new()
        .len(len)
        .map_raw(fd)
        .map_err(|_| Errno::ENOMEM)
}

pub(crate) fn install(k: &Arc<FakeKernel>, hca: &Shared, o: &Options) {
    k.char_dev(libc::makedev(231, 192));
    k.on_netlink(netlink_reply);
    let books: Arc<Mutex<Books>> = Arc::default();
    let page_len = o.num_uars_per_page.max(1) as usize * 4096;
    {
        let (hca, books, o) = (hca.clone(), books.clone(), o.clone());
        k.on_ioctl(move |cmd| {
            if cmd.driver_id != abi::RDMA_DRIVER_MLX5 {
                return Err(Errno::EINVAL);
            }
            ioctl(&hca, &books, &o, page_len, cmd)
        });
    }
    {
        let (hca, books) = (hca.clone(), books.clone());
        k.on_write(move |cmd| write(&hca, &books, cmd));
    }
    {
        let (hca, books, o) = (hca.clone(), books.clone(), o.clone());
        k.on_mmap(move |offset, len| {
            if len != page_len {
                return Err(Errno::EINVAL);
            }
            let fd = if o.static_uars {
                let pgoff = offset / 4096;
                let (cmd, index) = ((pgoff >> 8) & 0xff, (pgoff & 0xff) as u32);
                if cmd != u64::from(abi::MLX5_IB_MMAP_REGULAR_PAGE)
                    && cmd != u64::from(abi::MLX5_IB_MMAP_NC_PAGE)
                {
                    return Err(Errno::EINVAL);
                }
                let fd = Arc::new(memfd(len)?);
                let id = index * o.num_uars_per_page.max(1);
                let view = map(&fd, len)?;
                lock(&hca).uars.push(UarView {
                    map: view,
                    page_id: id,
                });
                fd
            } else {
                let mut b = lock(&books);
                let i = b
                    .pending
                    .iter()
                    .position(|p| p.0 == offset)
                    .ok_or(Errno::EINVAL)?;
                let (_, id, fd) = b.pending.remove(i);
                let view = map(&fd, len)?;
                lock(&hca).uars.push(UarView {
                    map: view,
                    page_id: id,
                });
                fd
            };
            map(&fd, len)
        });
    }
}

fn new_handle(books: &Mutex<Books>) -> u32 {
    let mut b = lock(books);
    b.next += 1;
    b.next
}

fn ioctl(
    hca: &Shared,
    books: &Mutex<Books>,
    o: &Options,
    page_len: usize,
    cmd: &mut IoctlCmd<'_>,
) -> Result<(), Errno> {
    let value = |cmd: &IoctlCmd<'_>, id| cmd.input_value(id).ok_or(Errno::EINVAL);
    match (cmd.object_id, cmd.method_id) {
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_GET_CONTEXT) => {
            let bytes = cmd
                .input_bytes(abi::UVERBS_ATTR_UHW_IN)
                .ok_or(Errno::EINVAL)?;
            let req = abi::Mlx5IbAllocUcontextReqV2::read_from_prefix(&bytes)
                .map_err(|_| Errno::EINVAL)?
                .0;
            if req.flags & abi::MLX5_IB_ALLOC_UCTX_DEVX != 0 && o.refuse_devx {
                return Err(Errno::EINVAL);
            }
            let mut r = abi::Mlx5IbAllocUcontextResp::new_zeroed();
            r.qp_tab_size = 1 << 18;
            r.bf_reg_size = o.bf_reg_size;
            r.cache_line_size = 64;
            r.max_sq_desc_sz = 1024;
            r.max_rq_desc_sz = 512;
            r.max_send_wqebb = 1 << 15;
            r.max_recv_wr = 1 << 15;
            r.max_srq_recv_wr = 1 << 15;
            r.num_ports = 1;
            r.cqe_version = o.cqe_version.min(req.max_cqe_version as u8);
            r.log_uar_size = 12;
            r.num_uars_per_page = o.num_uars_per_page;
            let dynamic = u64::from(abi::MLX5_LIB_CAP_DYN_UAR);
            if o.static_uars || req.lib_caps & dynamic == 0 {
                r.tot_bfregs = req.total_num_bfregs;
            } else {
                r.num_dyn_bfregs = 128;
            }
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, r.as_bytes());
            cmd.write_output(
                abi::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
                &4u32.to_ne_bytes(),
            );
            lock(hca).cqe_v1 = r.cqe_version == 1;
            Ok(())
        }
        (abi::UVERBS_OBJECT_ASYNC_EVENT, abi::UVERBS_METHOD_ASYNC_EVENT_ALLOC) => {
            cmd.set_new_fd(abi::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, dummy_fd());
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_PORT) => {
            let mut resp = abi::IbUverbsQueryPortRespEx::new_zeroed();
            resp.legacy_resp = port_attr();
            cmd.write_output(abi::UVERBS_ATTR_QUERY_PORT_RESP, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_GID_TABLE) => {
            let entries = [gid_entry(0), gid_entry(1)];
            cmd.write_output(
                abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES,
                entries.as_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES,
                &2u64.to_ne_bytes(),
            );
            Ok(())
        }
        (abi::UVERBS_OBJECT_DEVICE, abi::UVERBS_METHOD_QUERY_GID_ENTRY) => {
            let index = value(cmd, abi::UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX)?;
            if index >= 2 {
                return Err(Errno::ENODATA);
            }
            let e = gid_entry(index as u32);
            cmd.write_output(abi::UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, e.as_bytes());
            Ok(())
        }
        (abi::MLX5_IB_OBJECT_UAR, abi::MLX5_IB_METHOD_UAR_OBJ_ALLOC) => {
            if o.static_uars {
                return Err(Errno::EPROTONOSUPPORT);
            }
            let kind = value(cmd, abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE)?;
            if kind == u64::from(abi::MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF) && o.bf_reg_size == 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            let h = new_handle(books);
            let id = h * o.num_uars_per_page.max(1);
            let offset = (0x1000 + u64::from(h)) * page_len as u64;
            let fd = Arc::new(memfd(page_len)?);
            lock(books).pending.push((offset, id, fd));
            cmd.set_new_object(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, h);
            cmd.write_output(
                abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET,
                &offset.to_ne_bytes(),
            );
            cmd.write_output(
                abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH,
                &(page_len as u32).to_ne_bytes(),
            );
            cmd.write_output(abi::MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, &id.to_ne_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_CREATE) => {
            let uh = value(cmd, abi::UVERBS_ATTR_CREATE_CQ_USER_HANDLE)?;
            let cqe = value(cmd, abi::UVERBS_ATTR_CREATE_CQ_CQE)? as u32;
            let drv = cmd
                .input_bytes(abi::UVERBS_ATTR_UHW_IN)
                .ok_or(Errno::EINVAL)?;
            let d = abi::Mlx5IbCreateCq::read_from_prefix(&drv)
                .map_err(|_| Errno::EINVAL)?
                .0;
            let ncqe = cqe.checked_add(1).ok_or(Errno::EINVAL)?.next_power_of_two();
            if !matches!(d.cqe_size, 64 | 128) || d.buf_addr == 0 || d.db_addr == 0 {
                return Err(Errno::EINVAL);
            }
            let uar = if d.flags & abi::MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX as u16 != 0 {
                u32::from(d.uar_page_index)
            } else {
                0
            };
            let h = new_handle(books);
            let cqn = 0x400 + h;
            lock(hca).cqs.insert(
                cqn,
                Cq {
                    handle: h,
                    user_handle: uh,
                    buf: d.buf_addr,
                    db: d.db_addr,
                    ncqe,
                    cqe_size: d.cqe_size,
                    uar,
                    pi: 0,
                    armed: None,
                    arms: Vec::new(),
                    in_error: false,
                    comp_events: 0,
                    async_events: 0,
                },
            );
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_CQ_HANDLE, h);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_CQ_RESP_CQE,
                &(ncqe - 1).to_ne_bytes(),
            );
            let mut resp = abi::Mlx5IbCreateCqResp::new_zeroed();
            resp.cqn = cqn;
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_CQ_HANDLE)? as u32;
            let mut g = lock(hca);
            let cqn = g
                .cqs
                .iter()
                .find(|(_, c)| c.handle == h)
                .map(|(n, _)| *n)
                .ok_or(Errno::EINVAL)?;
            if g.qps.values().any(|q| q.send_cq == cqn || q.recv_cq == cqn) {
                return Err(Errno::EBUSY);
            }
            let cq = g.cqs.remove(&cqn).ok_or(Errno::EINVAL)?;
            let mut resp = abi::IbUverbsDestroyCqResp::new_zeroed();
            resp.comp_events_reported = cq.comp_events;
            resp.async_events_reported = cq.async_events;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_CQ_RESP, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_CREATE) => create_qp(hca, books, o, cmd),
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_QP_HANDLE)? as u32;
            let mut g = lock(hca);
            let qpn = g
                .qps
                .iter()
                .find(|(_, q)| q.handle == h)
                .map(|(n, _)| *n)
                .ok_or(Errno::EINVAL)?;
            let qp = g.qps.remove(&qpn).ok_or(Errno::EINVAL)?;
            let mut resp = abi::IbUverbsDestroyQpResp::new_zeroed();
            resp.events_reported = qp.events;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_QP_RESP, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_CREATE) => {
            let max_wr = value(cmd, abi::UVERBS_ATTR_CREATE_SRQ_MAX_WR)? as u32;
            let max_sge = value(cmd, abi::UVERBS_ATTR_CREATE_SRQ_MAX_SGE)? as u32;
            let drv = cmd
                .input_bytes(abi::UVERBS_ATTR_UHW_IN)
                .ok_or(Errno::EINVAL)?;
            let d = abi::Mlx5IbCreateSrq::read_from_prefix(&drv)
                .map_err(|_| Errno::EINVAL)?
                .0;
            let wqe_cnt = (max_wr + 1).next_power_of_two();
            let stride = (16 + 16 * max_sge).max(32).next_power_of_two();
            let h = new_handle(books);
            let srqn = 0x800 + h;
            lock(hca).srqs.insert(
                srqn,
                Srq {
                    handle: h,
                    buf: d.buf_addr,
                    db: d.db_addr,
                    wqe_cnt,
                    stride,
                    head: 0,
                    taken: 0,
                },
            );
            cmd.set_new_object(abi::UVERBS_ATTR_CREATE_SRQ_HANDLE, h);
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR,
                &(wqe_cnt - 1).to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE,
                &((stride - 16) / 16).to_ne_bytes(),
            );
            cmd.write_output(
                abi::UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM,
                &srqn.to_ne_bytes(),
            );
            let mut resp = abi::Mlx5IbCreateSrqResp::new_zeroed();
            resp.srqn = srqn;
            cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_SRQ_HANDLE)? as u32;
            let mut g = lock(hca);
            g.srqs.retain(|_, s| s.handle != h);
            let resp = abi::IbUverbsDestroySrqResp::new_zeroed();
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_SRQ_RESP, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_MR, abi::UVERBS_METHOD_MR_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_MR_HANDLE)? as u32;
            lock(hca).mrs.remove(&h).map(|_| ()).ok_or(Errno::EINVAL)
        }
        _ => Err(Errno::EPROTONOSUPPORT),
    }
}

fn create_qp(
    hca: &Shared,
    books: &Mutex<Books>,
    o: &Options,
    cmd: &mut IoctlCmd<'_>,
) -> Result<(), Errno> {
    let value = |cmd: &IoctlCmd<'_>, id| cmd.input_value(id).ok_or(Errno::EINVAL);
    value(cmd, abi::UVERBS_ATTR_CREATE_QP_USER_HANDLE)?;
    let qp_type = value(cmd, abi::UVERBS_ATTR_CREATE_QP_TYPE)? as u32;
    let send_cq_h = value(cmd, abi::UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE)? as u32;
    let recv_cq_h = value(cmd, abi::UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE)? as u32;
    let srq_h = cmd
        .input_value(abi::UVERBS_ATTR_CREATE_QP_SRQ_HANDLE)
        .map(|v| v as u32);
    let cap = cmd
        .input_bytes(abi::UVERBS_ATTR_CREATE_QP_CAP)
        .ok_or(Errno::EINVAL)?;
    let drv = cmd
        .input_bytes(abi::UVERBS_ATTR_UHW_IN)
        .ok_or(Errno::EINVAL)?;
    let d = abi::Mlx5IbCreateQp::read_from_prefix(&drv)
        .map_err(|_| Errno::EINVAL)?
        .0;
    let pow2 = |n: u32| n == 0 || n.is_power_of_two();
    if !pow2(d.sq_wqe_count) || !pow2(d.rq_wqe_count) || d.rq_wqe_shift > 16 {
        return Err(Errno::EINVAL);
    }
    let cqe_v1 = lock(hca).cqe_v1;
    // get_qp_user_index: v1 needs a user index, v0 the default one.
    let uidx = if cqe_v1 {
        if d.uidx & !0xff_ffff != 0 {
            return Err(Errno::EINVAL);
        }
        Some(d.uidx)
    } else {
        if d.uidx != 0xff_ffff {
            return Err(Errno::EINVAL);
        }
        None
    };
    let h = new_handle(books);
    let qpn = 0x100 + h;
    let mut g = lock(hca);
    if d.flags & abi::MLX5_QP_FLAG_SCATTER_CQE != 0 {
        g.violations.push(format!(
            "QP {qpn:#x}: scatter-to-CQE requested, and never handled"
        ));
    }
    // The UAR its doorbells must use.
    let (uar, bfreg_out) = if d.flags & abi::MLX5_QP_FLAG_UAR_PAGE_INDEX != 0 {
        (d.bfreg_index, 0)
    } else if o.static_uars {
        // mlx5_ib's choice, simplified: usable gross bfregs 1, 4, 5, 8, ...
        // round robin (k = 0, 1 of each 4 KiB UAR; bfreg 0 left alone).
        // 16 static bfregs (what the library asks for): n in 1..16.
        let n = (h % 15) + 1;
        let gross = (n / 2) * 4 + n % 2;
        (gross / 4, gross)
    } else {
        return Err(Errno::EINVAL);
    };
    let find = |h: u32| g.cqs.iter().find(|(_, c)| c.handle == h).map(|(n, _)| *n);
    let send_cq = find(send_cq_h).ok_or(Errno::EINVAL)?;
    let recv_cq = find(recv_cq_h).ok_or(Errno::EINVAL)?;
    let srq = match srq_h {
        None => None,
        Some(sh) => Some(
            g.srqs
                .iter()
                .find(|(_, s)| s.handle == sh)
                .map(|(n, _)| *n)
                .ok_or(Errno::EINVAL)?,
        ),
    };
    g.qps.insert(
        qpn,
        Qp {
            handle: h,
            ud: qp_type == abi::IB_UVERBS_QPT_UD,
            buf: d.buf_addr,
            db: d.db_addr,
            sq_cnt: d.sq_wqe_count,
            sq_offset: u64::from(d.rq_wqe_count) << d.rq_wqe_shift,
            rq_cnt: d.rq_wqe_count,
            rq_shift: d.rq_wqe_shift,
            uidx,
            uar,
            send_cq,
            recv_cq,
            srq,
            state: RESET,
            dest_qpn: 0,
            qkey: 0,
            rnr_retry: 0,
            access: 0,
            sq_ci: 0,
            rq_ci: 0,
            rnr_wait: false,
            events: 0,
        },
    );
    drop(g);
    cmd.set_new_object(abi::UVERBS_ATTR_CREATE_QP_HANDLE, h);
    cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_CAP, &cap);
    cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &qpn.to_ne_bytes());
    let mut resp = abi::Mlx5IbCreateQpResp::new_zeroed();
    resp.bfreg_index = bfreg_out;
    cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
    Ok(())
}

fn copy_out(out: &mut [u8], bytes: &[u8]) -> Result<(), Errno> {
    if out.len() < bytes.len() {
        return Err(Errno::ENOSPC);
    }
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(())
}

fn write(hca: &Shared, books: &Mutex<Books>, cmd: &mut WriteCmd<'_>) -> Result<(), Errno> {
    let ex = abi::IB_USER_VERBS_CMD_FLAG_EXTENDED;
    match cmd.command {
        c if c == ex | abi::IB_USER_VERBS_EX_CMD_QUERY_DEVICE => {
            let mut d = device_attr();
            d.base.vendor_id = 0x02c9;
            d.base.vendor_part_id = 4119;
            d.base.fw_ver = (16 << 32) | (35 << 16) | 2000;
            copy_out(cmd.core_out, d.as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_QUERY_PORT => {
            copy_out(cmd.core_out, port_attr().as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_ALLOC_PD => {
            let h = new_handle(books);
            lock(books).pds.push(h);
            let mut resp = abi::IbUverbsAllocPdResp::new_zeroed();
            resp.pd_handle = h;
            copy_out(cmd.core_out, resp.as_bytes())?;
            let mut drv = abi::Mlx5IbAllocPdResp::new_zeroed();
            drv.pdn = 0x10 + h;
            copy_out(cmd.driver_out, drv.as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_DEALLOC_PD => Ok(()),
        c if c == abi::IB_USER_VERBS_CMD_REG_MR => {
            let req = abi::IbUverbsRegMr::read_from_prefix(cmd.core_in)
                .map_err(|_| Errno::EINVAL)?
                .0;
            let h = new_handle(books);
            let mr = Mr {
                addr: req.hca_va,
                len: req.length,
                lkey: h << 8 | 0x11,
                rkey: h << 8 | 0x22,
                access: req.access_flags,
            };
            lock(hca).mrs.insert(h, mr);
            let mut resp = abi::IbUverbsRegMrResp::new_zeroed();
            resp.mr_handle = h;
            resp.lkey = mr.lkey;
            resp.rkey = mr.rkey;
            copy_out(cmd.core_out, resp.as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_MODIFY_QP => {
            let m = abi::IbUverbsModifyQp::read_from_prefix(cmd.core_in)
                .map_err(|_| Errno::EINVAL)?
                .0;
            modify_qp(hca, &m)
        }
        c if c == abi::IB_USER_VERBS_CMD_CREATE_AH => {
            let h = new_handle(books);
            lock(books).ahs.push(h);
            let mut resp = abi::IbUverbsCreateAhResp::new_zeroed();
            resp.ah_handle = h;
            copy_out(cmd.core_out, resp.as_bytes())?;
            let mut drv = abi::Mlx5IbCreateAhResp::new_zeroed();
            drv.response_length = size_of::<abi::Mlx5IbCreateAhResp>() as u32;
            drv.dmac = [0x0c, 0x42, 0xa1, 0x12, 0x34, 0x56];
            copy_out(cmd.driver_out, drv.as_bytes())
        }
        c if c == abi::IB_USER_VERBS_CMD_DESTROY_AH => Ok(()),
        c if c == abi::IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL => {
            let mut resp = abi::IbUverbsCreateCompChannelResp::new_zeroed();
            resp.fd = dummy_fd().into_raw_fd() as u32;
            copy_out(cmd.core_out, resp.as_bytes())
        }
        _ => Err(Errno::EOPNOTSUPP),
    }
}

fn modify_qp(hca: &Shared, m: &abi::IbUverbsModifyQp) -> Result<(), Errno> {
    let mut g = lock(hca);
    let qp = g
        .qps
        .values_mut()
        .find(|q| q.handle == m.qp_handle)
        .ok_or(Errno::EINVAL)?;
    let has = |bit: QpAttrMask| m.attr_mask & bit.bits() != 0;
    if has(QpAttrMask::ACCESS_FLAGS) {
        qp.access = m.qp_access_flags;
    }
    if has(QpAttrMask::QKEY) {
        qp.qkey = m.qkey;
    }
    if has(QpAttrMask::DEST_QPN) {
        qp.dest_qpn = m.dest_qp_num;
    }
    if has(QpAttrMask::RNR_RETRY) {
        qp.rnr_retry = m.rnr_retry;
    }
    if has(QpAttrMask::STATE) {
        qp.state = m.qp_state;
        if m.qp_state == RESET {
            // The device forgets the queues' positions (the library zeroes
            // its doorbell records and restarts from 0).
            qp.sq_ci = 0;
            qp.rq_ci = 0;
        }
    }
    Ok(())
}
