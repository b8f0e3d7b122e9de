//! The model's kernel side for queues: CQ, QP and SRQ create/destroy
//! (ioctl methods) and MODIFY_QP (write), as mlx5_ib answers them.
//!
//! Facts (Linux 6.1 `drivers/infiniband/hw/mlx5/`): `cq.c`
//! `mlx5_ib_create_cq` (entries = `roundup_pow_of_two(cqe + 1)`, at most
//! `1 << log_max_cq_sz`; the core answers `entries - 1`) and
//! `create_cq_user` (driver data shorter than `offsetof(flags)` is EINVAL;
//! unknown flags, a CQE size other than 64/128, reserved bytes are EINVAL;
//! the UAR is `uar_page_index` with `UAR_PAGE_INDEX`, EINVAL without it in
//! a dynamic-UAR context, else the first static page); `qp.c`
//! `process_udata_size` (at least `offsetof(ece_options)` bytes),
//! `_create_user_qp` (UAR flags, static bfreg, `MLX5_IB_INVALID_BFREG` in
//! the response otherwise), `set_user_buf_size` (SQ count a power of two, at
//! most `1 << log_max_qp_sz`; RQ first, then the SQ in 64-byte WQEBBs),
//! `set_rq_size` (the RQ geometry taken verbatim; no RQ with an SRQ or
//! `max_recv_wr` 0), `get_qp_user_index` (mlx5_ib.h); `srq.c`
//! `mlx5_ib_create_srq` (`max = roundup_pow_of_two(max_wr + 1)`, WQE
//! `max(32, roundup_pow_of_two(16 + 16 * max_sge))`, `max_wr` answered as
//! `max - 1`, `max_sge` as asked).

use std::os::fd::RawFd;

use zerocopy::{FromBytes, FromZeros, IntoBytes};

use super::{
    cq::{async_event, comp_event, IB_EVENT_CQ_ERR},
    hca::{Cq, Hca, Qp, Srq, Transport, ERR, RESET},
    kernel::{lock, Shared},
    uar,
};
use crate::{abi, sys::Errno, sys::IoctlCmd, QpAttrMask};

pub(super) const LOG_MAX_QP_SZ: u32 = 15;
pub(super) const LOG_MAX_CQ_SZ: u32 = 22;
pub(super) const LOG_MAX_SRQ_SZ: u32 = 15;
/// `max_wqe_sz_rq / 16`.
const MAX_RQ_SGE: u32 = 32;

/// The first `N` bytes of a driver-data attribute, zero-padded.
fn padded<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut b = [0u8; N];
    let n = bytes.len().min(N);
    b[..n].copy_from_slice(&bytes[..n]);
    b
}

pub(crate) fn ioctl(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let value = |cmd: &IoctlCmd<'_>, id| cmd.input_value(id).ok_or(Errno::EINVAL);
    match (cmd.object_id, cmd.method_id) {
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_CREATE) => create_cq(s, cmd),
        (abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_CQ_HANDLE)? as u32;
            let mut g = lock(&s.hca);
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
            // The kernel drops the CQ's events nobody read and reports the
            // ones read (`ib_uverbs_release_ucq`).
            let comp = comp_event(cq.user_handle);
            let cq_err = async_event(cq.user_handle, IB_EVENT_CQ_ERR);
            let unread_comp = discard_events(s, &mut g, cq.channel, |r| r == comp);
            let unread_async = discard_events(s, &mut g, None, |r| r == cq_err);
            drop(g);
            let mut resp = abi::IbUverbsDestroyCqResp::new_zeroed();
            resp.comp_events_reported = cq.comp_events - unread_comp;
            resp.async_events_reported = cq.async_events - unread_async;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_CQ_RESP, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_CREATE) => create_qp(s, cmd),
        (abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_QP_HANDLE)? as u32;
            let mut b = lock(&s.books);
            if let Some(at) = b.raw_qps.iter().position(|&r| r == h) {
                b.raw_qps.swap_remove(at);
                let resp = abi::IbUverbsDestroyQpResp::new_zeroed();
                cmd.write_output(abi::UVERBS_ATTR_DESTROY_QP_RESP, resp.as_bytes());
                return Ok(());
            }
            let mut g = lock(&s.hca);
            let qpn = g
                .qps
                .iter()
                .find(|(_, q)| q.handle == h)
                .map(|(n, _)| *n)
                .ok_or(Errno::EINVAL)?;
            let qp = g.qps.remove(&qpn).ok_or(Errno::EINVAL)?;
            if let Some(n) = qp.bfreg {
                b.uars.uctx.free_bfreg(n);
            }
            drop((g, b));
            let mut resp = abi::IbUverbsDestroyQpResp::new_zeroed();
            resp.events_reported = qp.events;
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_QP_RESP, resp.as_bytes());
            Ok(())
        }
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_CREATE) => create_srq(s, cmd),
        (abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_DESTROY) => {
            let h = value(cmd, abi::UVERBS_ATTR_DESTROY_SRQ_HANDLE)? as u32;
            let mut g = lock(&s.hca);
            let srqn = g
                .srqs
                .iter()
                .find(|(_, q)| q.handle == h)
                .map(|(n, _)| *n)
                .ok_or(Errno::EINVAL)?;
            if g.qps.values().any(|q| q.srq == Some(srqn)) {
                return Err(Errno::EBUSY);
            }
            g.srqs.remove(&srqn);
            drop(g);
            let resp = abi::IbUverbsDestroySrqResp::new_zeroed();
            cmd.write_output(abi::UVERBS_ATTR_DESTROY_SRQ_RESP, resp.as_bytes());
            Ok(())
        }
        _ => Err(Errno::EPROTONOSUPPORT),
    }
}

/// Removes the event records `matches` accepts that were not read yet (on
/// the fd `fd`, `None`: the async event fd), whether still in the HCA or
/// already queued on the fake's fds; returns how many.
fn discard_events(
    s: &Shared,
    h: &mut Hca,
    fd: Option<RawFd>,
    matches: impl Fn(&[u8]) -> bool,
) -> u32 {
    let before = h.out_events.len();
    h.out_events.retain(|(f, r)| !(*f == fd && matches(r)));
    let mut n = before - h.out_events.len();
    if let Some(k) = s.kernel.upgrade() {
        n += k.discard_reads(fd, &matches);
    }
    n as u32
}

fn create_cq(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let uh = cmd
        .input_value(abi::UVERBS_ATTR_CREATE_CQ_USER_HANDLE)
        .ok_or(Errno::EINVAL)?;
    let cqe = cmd
        .input_value(abi::UVERBS_ATTR_CREATE_CQ_CQE)
        .ok_or(Errno::EINVAL)? as u32;
    let channel = cmd
        .find(abi::UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL)
        .map(|a| a.to_raw().data as RawFd);
    let drv = cmd
        .input_bytes(abi::UVERBS_ATTR_UHW_IN)
        .ok_or(Errno::EINVAL)?;
    if drv.len() < 22 {
        return Err(Errno::EINVAL); // shorter than offsetof(flags)
    }
    let d = abi::Mlx5IbCreateCq::read_from_bytes(&padded::<32>(&drv)).map_err(|_| Errno::EINVAL)?;
    // The uverbs core refuses a completion vector the device does not have
    // (Linux 6.1 uverbs_std_types_cq.c:107, uverbs_cmd.c:1021).
    let vector = cmd
        .input_value(abi::UVERBS_ATTR_CREATE_CQ_COMP_VECTOR)
        .ok_or(Errno::EINVAL)?;
    if vector >= u64::from(super::kernel::NUM_COMP_VECTORS) {
        return Err(Errno::EINVAL);
    }
    // The core reads the flags with `uverbs_get_flags32` (EINVAL for a bit
    // it does not know), mlx5_ib refuses what it does not support
    // (`check_cq_create_flags`: EOPNOTSUPP); mlx5_ib takes both core flags.
    // Linux 6.1 uverbs_std_types_cq.c:89, mlx5_ib.h:1483.
    let create_flags = match cmd.find(abi::UVERBS_ATTR_CREATE_CQ_FLAGS).map(|a| a.len) {
        None => 0,
        Some(len @ (4 | 8)) => {
            let v = cmd
                .input_value(abi::UVERBS_ATTR_CREATE_CQ_FLAGS)
                .ok_or(Errno::EINVAL)?;
            if len == 4 {
                v & 0xffff_ffff
            } else {
                v
            }
        }
        Some(_) => return Err(Errno::EINVAL),
    };
    let known =
        abi::IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION | abi::IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN;
    if create_flags & !u64::from(known) != 0 {
        return Err(Errno::EINVAL);
    }
    if cqe > 1 << LOG_MAX_CQ_SZ {
        return Err(Errno::EINVAL);
    }
    let ncqe = (cqe + 1).next_power_of_two();
    if ncqe > 1 << LOG_MAX_CQ_SZ {
        return Err(Errno::EINVAL);
    }
    let known = abi::MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD
        | abi::MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX
        | abi::MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS;
    if u32::from(d.flags) & !known != 0
        || !matches!(d.cqe_size, 64 | 128)
        || d.reserved0 != 0
        || d.reserved1 != 0
    {
        return Err(Errno::EINVAL);
    }
    if d.buf_addr == 0 || d.db_addr == 0 {
        return Err(Errno::EFAULT);
    }
    // Not modelled: CQE compression, 128-byte padding, real-time stamps
    // (a device without those capabilities refuses them).
    if d.cqe_comp_en != 0 || u32::from(d.flags) & !abi::MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX != 0
    {
        return Err(Errno::EOPNOTSUPP);
    }
    let mut b = lock(&s.books);
    let uar = if u32::from(d.flags) & abi::MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX != 0 {
        u32::from(d.uar_page_index)
    } else if b.uars.uctx.dynamic {
        return Err(Errno::EINVAL);
    } else {
        b.uars
            .uctx
            .sys_pages
            .first()
            .copied()
            .flatten()
            .ok_or(Errno::EINVAL)?
    };
    let h = b.new_handle();
    let mut g = lock(&s.hca);
    if !g.has_uar(uar) {
        return Err(Errno::EINVAL); // the firmware refuses an unknown UAR
    }
    let cqn = 0x400 + h;
    g.cqs.insert(
        cqn,
        Cq {
            user_handle: uh,
            channel,
            create_flags: create_flags as u32,
            ..Cq::new(h, d.buf_addr, d.db_addr, ncqe, d.cqe_size, uar)
        },
    );
    drop((g, b));
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

fn create_qp(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let value = |cmd: &IoctlCmd<'_>, id| cmd.input_value(id).ok_or(Errno::EINVAL);
    value(cmd, abi::UVERBS_ATTR_CREATE_QP_USER_HANDLE)?;
    let qp_type = value(cmd, abi::UVERBS_ATTR_CREATE_QP_TYPE)? as u32;
    let create_flags = core_create_flags(cmd, qp_type)?;
    let transport = match qp_type {
        abi::IB_UVERBS_QPT_RC => Some(Transport::Rc),
        abi::IB_UVERBS_QPT_UC => Some(Transport::Uc),
        abi::IB_UVERBS_QPT_UD => Some(Transport::Ud),
        // Refused below, after the checks mlx5_ib makes first.
        abi::IB_UVERBS_QPT_RAW_PACKET => None,
        _ => return Err(Errno::EOPNOTSUPP), // not modelled
    };
    // check_valid_flow: "Raw Packet QP is only supported for CQE version
    // > 0".
    if transport.is_none() && !lock(&s.hca).cqe_v1 {
        return Err(Errno::EINVAL);
    }
    let pd = value(cmd, abi::UVERBS_ATTR_CREATE_QP_PD_HANDLE)? as u32;
    let send_cq_h = value(cmd, abi::UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE)? as u32;
    let recv_cq_h = value(cmd, abi::UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE)? as u32;
    let srq_h = cmd
        .input_value(abi::UVERBS_ATTR_CREATE_QP_SRQ_HANDLE)
        .map(|v| v as u32);
    let cap_bytes = cmd
        .input_bytes(abi::UVERBS_ATTR_CREATE_QP_CAP)
        .ok_or(Errno::EINVAL)?;
    let mut cap = abi::IbUverbsQpCap::read_from_bytes(&padded::<20>(&cap_bytes))
        .map_err(|_| Errno::EINVAL)?;
    let drv = cmd
        .input_bytes(abi::UVERBS_ATTR_UHW_IN)
        .ok_or(Errno::EINVAL)?;
    if drv.len() < 48 {
        return Err(Errno::EINVAL); // shorter than offsetof(ece_options)
    }
    let d = abi::Mlx5IbCreateQp::read_from_bytes(&padded::<56>(&drv)).map_err(|_| Errno::EINVAL)?;
    driver_create_flags(create_flags)?;
    // The device the model plays executes no raw Ethernet (no flow
    // steering, no Ethernet segment in its send WQEs): it refuses the type
    // as mlx5_ib refuses a QP type a device lacks (`check_qp_type`,
    // EOPNOTSUPP). On a ConnectX with Ethernet ports mlx5_ib creates raw
    // packet QPs (`create_raw_packet_qp`), for CAP_NET_RAW (the core's
    // `UVERBS_HANDLER(UVERBS_METHOD_QP_CREATE)`, EPERM without it).
    let Some(transport) = transport else {
        if !s.options.raw_packet_qps {
            return Err(Errno::EOPNOTSUPP);
        }
        return create_raw_qp(s, cmd, &cap);
    };
    let mut violations = Vec::new();
    let known = abi::MLX5_QP_FLAG_SIGNATURE
        | abi::MLX5_QP_FLAG_SCATTER_CQE
        | abi::MLX5_QP_FLAG_BFREG_INDEX
        | abi::MLX5_QP_FLAG_UAR_PAGE_INDEX
        | abi::MLX5_QP_FLAG_ALLOW_SCATTER_CQE;
    if d.flags & !known != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if d.flags & abi::MLX5_QP_FLAG_SIGNATURE != 0 {
        violations.push("WQE signatures requested (not modelled)".to_string());
    }
    if (d.sq_wqe_count != 0 && !d.sq_wqe_count.is_power_of_two())
        || d.sq_wqe_count > 1 << LOG_MAX_QP_SZ
        || cap.max_recv_wr > 1 << LOG_MAX_QP_SZ
    {
        return Err(Errno::EINVAL);
    }
    let has_rq = srq_h.is_none() && cap.max_recv_wr > 0;
    let (rq_cnt, rq_shift) = if has_rq {
        if d.rq_wqe_shift < 4 || d.rq_wqe_shift > 16 {
            return Err(Errno::EINVAL);
        }
        if !d.rq_wqe_count.is_power_of_two() {
            violations.push(format!(
                "RQ of {} WQEs: the device takes log2 sizes",
                d.rq_wqe_count
            ));
        }
        (d.rq_wqe_count, d.rq_wqe_shift)
    } else {
        if d.rq_wqe_count != 0 {
            violations.push(format!(
                "rq_wqe_count {} for a QP without an RQ: the kernel ignores it and puts \
                 the SQ at offset 0",
                d.rq_wqe_count
            ));
        }
        cap.max_recv_wr = 0;
        cap.max_recv_sge = 0;
        (0, 0)
    };
    let mut b = lock(&s.books);
    // The core looks the PD up first (an unknown handle: ENOENT,
    // `lookup_get_idr_uobject`); the books stay locked until the QP is in
    // place, so a DEALLOC_PD sees it.
    if !b.pds.contains(&pd) {
        return Err(Errno::ENOENT);
    }
    let cqe_v1 = lock(&s.hca).cqe_v1;
    // get_qp_user_index: v1 needs a user index, v0 the default one.
    let uidx = if cqe_v1 {
        if d.uidx == 0xff_ffff || d.uidx & !0xff_ffff != 0 {
            return Err(Errno::EINVAL);
        }
        Some(d.uidx)
    } else {
        if d.uidx != 0xff_ffff {
            return Err(Errno::EINVAL);
        }
        None
    };
    let uar_flags = d.flags & (abi::MLX5_QP_FLAG_UAR_PAGE_INDEX | abi::MLX5_QP_FLAG_BFREG_INDEX);
    let (uar, bfreg) = match uar_flags {
        abi::MLX5_QP_FLAG_UAR_PAGE_INDEX => (d.bfreg_index, None),
        abi::MLX5_QP_FLAG_BFREG_INDEX => (b.uars.uctx.uar_of_bfreg(d.bfreg_index, true)?, None),
        0 => {
            let n = b.uars.uctx.alloc_bfreg()?;
            match b.uars.uctx.uar_of_bfreg(n, false) {
                Ok(u) => (u, Some(n)),
                Err(e) => {
                    b.uars.uctx.free_bfreg(n);
                    return Err(e);
                }
            }
        }
        _ => return Err(Errno::EINVAL),
    };
    let mut g = lock(&s.hca);
    let find = |h: u32| g.cqs.iter().find(|(_, c)| c.handle == h).map(|(n, _)| *n);
    let send_cq = find(send_cq_h);
    let recv_cq = find(recv_cq_h);
    let srq = match srq_h {
        None => Ok(None),
        Some(sh) => g
            .srqs
            .iter()
            .find(|(_, s)| s.handle == sh)
            .map(|(n, _)| Some(*n))
            .ok_or(Errno::EINVAL),
    };
    let (Some(send_cq), Some(recv_cq), Ok(srq), true) = (send_cq, recv_cq, srq, g.has_uar(uar))
    else {
        // An unknown CQ or SRQ, or a UAR the firmware does not know.
        if let Some(n) = bfreg {
            b.uars.uctx.free_bfreg(n);
        }
        return Err(Errno::EINVAL);
    };
    let sig_all = cmd
        .input_value(abi::UVERBS_ATTR_CREATE_QP_FLAGS)
        .is_some_and(|f| f as u32 & abi::IB_UVERBS_QP_CREATE_SQ_SIG_ALL != 0);
    let (scatter_res, scatter_req) = scatter_rooms(
        transport,
        d.flags,
        sig_all,
        g.cqs[&recv_cq].cqe_size,
        g.cqs[&send_cq].cqe_size,
    );
    let h = b.new_handle();
    let qpn = 0x100 + h;
    for v in violations {
        g.violations.push(format!("QP {qpn:#x}: {v}"));
    }
    g.qps.insert(
        qpn,
        Qp {
            pd,
            buf: d.buf_addr,
            db: d.db_addr,
            sq_cnt: d.sq_wqe_count,
            sq_offset: u64::from(rq_cnt) << rq_shift,
            rq_cnt,
            rq_shift,
            uidx,
            bfreg,
            send_cq,
            recv_cq,
            srq,
            scatter_res,
            scatter_req,
            attrs: created_attrs(&cap, rq_cnt, rq_shift, sig_all),
            ..Qp::new(h, transport, uar)
        },
    );
    drop((g, b));
    cmd.set_new_object(abi::UVERBS_ATTR_CREATE_QP_HANDLE, h);
    cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_CAP, cap.as_bytes());
    cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &qpn.to_ne_bytes());
    let mut resp = abi::Mlx5IbCreateQpResp::new_zeroed();
    resp.bfreg_index = bfreg.map_or(uar::INVALID_BFREG, uar::gross);
    cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
    Ok(())
}

/// A raw packet QP on a device with raw Ethernet
/// (`Options::raw_packet_qps`): a handle and a QP number, the capacities
/// as asked, no bfreg of the context's (the library names a UAR page);
/// the HCA never sees it.
fn create_raw_qp(
    s: &Shared,
    cmd: &mut IoctlCmd<'_>,
    cap: &abi::IbUverbsQpCap,
) -> Result<(), Errno> {
    let mut b = lock(&s.books);
    let h = b.new_handle();
    b.raw_qps.push(h);
    drop(b);
    let qpn = 0x100 + h;
    cmd.set_new_object(abi::UVERBS_ATTR_CREATE_QP_HANDLE, h);
    cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_CAP, cap.as_bytes());
    cmd.write_output(abi::UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &qpn.to_ne_bytes());
    let mut resp = abi::Mlx5IbCreateQpResp::new_zeroed();
    resp.bfreg_index = uar::INVALID_BFREG;
    cmd.write_output(abi::UVERBS_ATTR_UHW_OUT, resp.as_bytes());
    Ok(())
}

/// The creation flags a QP create carries, checked as the 6.1 core
/// checks them (uverbs_std_types_qp.c): `uverbs_get_flags32` takes only
/// BLOCK_MULTICAST_LOOPBACK, SCATTER_FCS, CVLAN_STRIPPING,
/// PCI_WRITE_END_PADDING and SQ_SIG_ALL (EINVAL for any other bit);
/// `check_creation_flags` takes flags other than SQ_SIG_ALL only on UD and
/// raw packet QPs, SCATTER_FCS and CVLAN_STRIPPING only on raw packet
/// ones (EINVAL); a SOURCE_QPN attribute adds `IB_QP_CREATE_SOURCE_QPN`.
/// Returns the flags the driver is left to take (SQ_SIG_ALL is the
/// core's own).
fn core_create_flags(cmd: &IoctlCmd<'_>, qp_type: u32) -> Result<u32, Errno> {
    const IB_QP_CREATE_SOURCE_QPN: u32 = 1 << 10;
    let flags = cmd
        .input_value(abi::UVERBS_ATTR_CREATE_QP_FLAGS)
        .unwrap_or(0);
    let known = abi::IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK
        | abi::IB_UVERBS_QP_CREATE_SCATTER_FCS
        | abi::IB_UVERBS_QP_CREATE_CVLAN_STRIPPING
        | abi::IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING
        | abi::IB_UVERBS_QP_CREATE_SQ_SIG_ALL;
    if flags & !u64::from(known) != 0 {
        return Err(Errno::EINVAL);
    }
    let mut flags = flags as u32 & !abi::IB_UVERBS_QP_CREATE_SQ_SIG_ALL;
    let raw = qp_type == abi::IB_UVERBS_QPT_RAW_PACKET;
    if flags != 0 && !raw && qp_type != abi::IB_UVERBS_QPT_UD {
        return Err(Errno::EINVAL);
    }
    let eth_only = abi::IB_UVERBS_QP_CREATE_SCATTER_FCS | abi::IB_UVERBS_QP_CREATE_CVLAN_STRIPPING;
    if flags & eth_only != 0 && !raw {
        return Err(Errno::EINVAL);
    }
    if cmd.find(abi::UVERBS_ATTR_CREATE_QP_SOURCE_QPN).is_some() {
        flags |= IB_QP_CREATE_SOURCE_QPN;
    }
    Ok(flags)
}

/// mlx5_ib's `process_create_flags` (6.1 qp.c 2905-2954) on the model's
/// HCA (`hca_cap.rs`): each flag needs its device capability, and the
/// model has only `block_lb_mc` (BLOCK_MULTICAST_LOOPBACK, kept trivially:
/// the model delivers no multicast); end_pad (PCI_WRITE_END_PADDING),
/// eth_net_offloads (SCATTER_FCS, CVLAN_STRIPPING) are off and SOURCE_QPN
/// needs an InfiniBand port: a flag left over is EOPNOTSUPP.
fn driver_create_flags(flags: u32) -> Result<(), Errno> {
    if flags & !abi::IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

/// What QUERY_QP reports of a new user QP, as `mlx5_ib_query_qp` (6.1
/// qp.c) does: the send capacities 0 (the library fills in its own), the
/// receive queue's WQE count and the SGEs its stride holds
/// (`set_rq_size`: `(1 << wqe_shift) / 16`), the inline size asked for,
/// and whether every WQE is signaled.
fn created_attrs(
    cap: &abi::IbUverbsQpCap,
    rq_cnt: u32,
    rq_shift: u32,
    sig_all: bool,
) -> abi::IbUverbsQueryQpResp {
    let mut a = abi::IbUverbsQueryQpResp::new_zeroed();
    a.max_recv_wr = rq_cnt;
    a.max_recv_sge = if rq_cnt == 0 { 0 } else { (1 << rq_shift) / 16 };
    a.max_inline_data = cap.max_inline_data;
    a.sq_sig_all = u8::from(sig_all);
    a
}

/// The scatter-to-CQE rooms of a QP's responder and requester (bytes;
/// 0: off), set in the QP context as mlx5_ib 6.1 sets them (qp.c
/// `create_qp_common`, 2286-2297, and `configure_requester_scat_cqe`,
/// 1887-1909; the model's HCA has `sctr_data_cqe`, so
/// `process_vendor_flag` keeps the flag). With `MLX5_QP_FLAG_SCATTER_CQE`,
/// an RC or UC responder puts a received message of up to 32 bytes in a
/// 64-byte CQE, up to 64 with 128-byte CQEs (`cs_res`); an RC requester
/// does the same with read and atomic responses (`cs_req`), but only when
/// every WQE is signaled (`IB_UVERBS_QP_CREATE_SQ_SIG_ALL`) or the library
/// said it copes (`MLX5_QP_FLAG_ALLOW_SCATTER_CQE`).
pub(crate) fn scatter_rooms(
    transport: Transport,
    flags: u32,
    sig_all: bool,
    recv_cqe_size: u32,
    send_cqe_size: u32,
) -> (u8, u8) {
    let scatter = flags & abi::MLX5_QP_FLAG_SCATTER_CQE != 0;
    let allow = flags & abi::MLX5_QP_FLAG_ALLOW_SCATTER_CQE != 0;
    let room = |cqe_size: u32| if cqe_size == 128 { 64 } else { 32 };
    let res = match transport {
        Transport::Rc | Transport::Uc if scatter => room(recv_cqe_size),
        _ => 0,
    };
    let req = match transport {
        Transport::Rc if scatter && (sig_all || allow) => room(send_cqe_size),
        _ => 0,
    };
    (res, req)
}

fn create_srq(s: &Shared, cmd: &mut IoctlCmd<'_>) -> Result<(), Errno> {
    let value = |cmd: &IoctlCmd<'_>, id| cmd.input_value(id).ok_or(Errno::EINVAL);
    let pd = value(cmd, abi::UVERBS_ATTR_CREATE_SRQ_PD_HANDLE)? as u32;
    let max_wr = value(cmd, abi::UVERBS_ATTR_CREATE_SRQ_MAX_WR)? as u32;
    let max_sge = value(cmd, abi::UVERBS_ATTR_CREATE_SRQ_MAX_SGE)? as u32;
    let drv = cmd
        .input_bytes(abi::UVERBS_ATTR_UHW_IN)
        .ok_or(Errno::EINVAL)?;
    let d =
        abi::Mlx5IbCreateSrq::read_from_bytes(&padded::<32>(&drv)).map_err(|_| Errno::EINVAL)?;
    if d.reserved0 != 0 || d.reserved1 != 0 {
        return Err(Errno::EINVAL);
    }
    if max_wr >= 1 << LOG_MAX_SRQ_SZ || max_sge > MAX_RQ_SGE {
        return Err(Errno::EINVAL);
    }
    if d.buf_addr == 0 || d.db_addr == 0 {
        return Err(Errno::EFAULT);
    }
    let wqe_cnt = (max_wr + 1).next_power_of_two();
    let stride = (16 + 16 * max_sge).next_power_of_two().max(32);
    // As for a QP: the PD is looked up first, and stays while the SRQ is
    // put in place.
    let mut b = lock(&s.books);
    if !b.pds.contains(&pd) {
        return Err(Errno::ENOENT);
    }
    let h = b.new_handle();
    let srqn = 0x800 + h;
    let mut g = lock(&s.hca);
    if d.flags & abi::MLX5_SRQ_FLAG_SIGNATURE != 0 {
        g.violations.push(format!(
            "SRQ {srqn:#x}: WQE signatures requested (not modelled)"
        ));
    }
    g.srqs.insert(
        srqn,
        Srq {
            handle: h,
            pd,
            buf: d.buf_addr,
            db: d.db_addr,
            wqe_cnt,
            stride,
            head: 0,
            taken: 0,
        },
    );
    drop((g, b));
    cmd.set_new_object(abi::UVERBS_ATTR_CREATE_SRQ_HANDLE, h);
    cmd.write_output(
        abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR,
        &(wqe_cnt - 1).to_ne_bytes(),
    );
    cmd.write_output(
        abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE,
        &max_sge.to_ne_bytes(),
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

/// MODIFY_QP: the attributes the device uses; RESET forgets the queues'
/// positions (the library zeroes its doorbell records), ERR flushes.
/// Keeps the attributes a modify sets, for QUERY_QP (the firmware's QP
/// context holds them; `mlx5_ib_query_qp` reads them back).
fn remember(
    a: &mut abi::IbUverbsQueryQpResp,
    m: &abi::IbUverbsModifyQp,
    has: impl Fn(QpAttrMask) -> bool,
) {
    if has(QpAttrMask::ACCESS_FLAGS) {
        a.qp_access_flags = m.qp_access_flags;
    }
    if has(QpAttrMask::PKEY_INDEX) {
        a.pkey_index = m.pkey_index;
    }
    if has(QpAttrMask::PORT) {
        a.port_num = m.port_num;
    }
    if has(QpAttrMask::QKEY) {
        a.qkey = m.qkey;
    }
    if has(QpAttrMask::AV) {
        a.dest = m.dest;
    }
    if has(QpAttrMask::PATH_MTU) {
        a.path_mtu = m.path_mtu;
    }
    if has(QpAttrMask::TIMEOUT) {
        a.timeout = m.timeout;
    }
    if has(QpAttrMask::RETRY_CNT) {
        a.retry_cnt = m.retry_cnt;
    }
    if has(QpAttrMask::RNR_RETRY) {
        a.rnr_retry = m.rnr_retry;
    }
    if has(QpAttrMask::RQ_PSN) {
        a.rq_psn = m.rq_psn;
    }
    if has(QpAttrMask::MAX_QP_RD_ATOMIC) {
        a.max_rd_atomic = m.max_rd_atomic;
    }
    if has(QpAttrMask::ALT_PATH) {
        a.alt_dest = m.alt_dest;
        a.alt_pkey_index = m.alt_pkey_index;
        a.alt_port_num = m.alt_port_num;
        a.alt_timeout = m.alt_timeout;
    }
    if has(QpAttrMask::MIN_RNR_TIMER) {
        a.min_rnr_timer = m.min_rnr_timer;
    }
    if has(QpAttrMask::SQ_PSN) {
        a.sq_psn = m.sq_psn;
    }
    if has(QpAttrMask::MAX_DEST_RD_ATOMIC) {
        a.max_dest_rd_atomic = m.max_dest_rd_atomic;
    }
    if has(QpAttrMask::PATH_MIG_STATE) {
        a.path_mig_state = m.path_mig_state;
    }
    if has(QpAttrMask::DEST_QPN) {
        a.dest_qp_num = m.dest_qp_num;
    }
}

pub(crate) fn modify_qp(s: &Shared, m: &abi::IbUverbsModifyQp) -> Result<(), Errno> {
    let mut g = lock(&s.hca);
    let qpn = g
        .qps
        .iter()
        .find(|(_, q)| q.handle == m.qp_handle)
        .map(|(n, _)| *n)
        .ok_or(Errno::EINVAL)?;
    let qp = g.qps.get_mut(&qpn).ok_or(Errno::EINVAL)?;
    let has = |bit: QpAttrMask| m.attr_mask & bit.bits() != 0;
    remember(&mut qp.attrs, m, has);
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
    if has(QpAttrMask::SQ_PSN) {
        qp.wire.next_psn = m.sq_psn & 0xff_ffff;
    }
    if has(QpAttrMask::RQ_PSN) {
        qp.wire.expected = m.rq_psn & 0xff_ffff;
    }
    if has(QpAttrMask::STATE) {
        let was = qp.state;
        qp.state = m.qp_state;
        if m.qp_state == RESET {
            qp.wire = super::remote::Wire::default();
            qp.sq_ci = 0;
            qp.rq_ci = 0;
            qp.rnr_wait = false;
            qp.db_pending = false;
        } else if m.qp_state == ERR && was != ERR {
            g.flush(qpn);
        }
    }
    Ok(())
}
