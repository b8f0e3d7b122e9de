//! The create commands' driver data and the objects made from their
//! answers: `plan_*` writes `mlx5_ib_create_{cq,qp,srq}` (queue buffers,
//! doorbell records, the UAR or bfreg, the user index) before the kernel
//! command, `finish_*` builds the provider's CQ, QP or SRQ from
//! `mlx5_ib_create_*_resp` after it, as libmlx5's `create_cq`,
//! `create_qp` and `mlx5_create_srq` do (`providers/mlx5/verbs.c`). The
//! `Provider` impl in `mod.rs` hands these over.

use std::sync::{atomic::Ordering, Arc, Mutex, OnceLock};

use zerocopy::FromZeros;

use super::{
    alloc::{self, AllocType, BufSpec, Component},
    buf::QueueBuf,
    context,
    cq::{self, CqCore, Mlx5Cq},
    huge_key,
    qp::{QpTrack, NO_UIDX},
    qp_size,
    rq::{Mlx5Rq, Mlx5Srq, RqTrack, SrqTrack},
    sizing_bug,
    sq::{Mlx5Sq, SqGeometry, SqTrack},
    uidx_for,
    wqe::{self, SEND_WQE_BB},
    Drv, Mlx5, Mlx5Ctx, Mlx5Qp, Mlx5QpShared, Mlx5SrqShared, Mlx5Td,
};
use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    providers::{
        CqPd, CqRequest, Device, Domain, Provider, QpCreated, QpLinks, QpRequest, SrqRequest,
    },
    wc::WcExFlags,
    QpType, QueueResource,
};

/// `Provider::plan_cq`: the CQ's buffer (CQE size from the device or
/// `MLX5_CQE_SIZE`), doorbell record and UAR, as `mlx5_ib_create_cq`.
pub(super) fn plan_cq(
    ctx: &Mlx5Ctx,
    dev: Device<'_>,
    req: &CqRequest,
    domain: Domain<'_, Mlx5Td>,
) -> Result<(<Mlx5 as Provider>::CqPlan, Arc<CqCore>)> {
    // libmlx5 (`CREATE_CQ_SUPPORTED_WC_FLAGS`) also takes CVLAN, FLOW_TAG
    // and TM_INFO; this provider decodes none of them.
    let supported = WcExFlags::STANDARD
        | WcExFlags::COMPLETION_TIMESTAMP
        | WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK;
    let extra = req.wc_flags - supported;
    if !extra.is_empty() {
        return Err(Error::new(
            "ibv_create_cq_ex",
            ErrorKind::UnsupportedProvider,
            format!(
                "uverbs' mlx5 provider does not report {extra:?}: it reports the \
                 standard completion fields and the completion timestamps \
                 (WcExFlags::STANDARD | WcExFlags::COMPLETION_TIMESTAMP | \
                 WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK)"
            ),
        ));
    }
    // libmlx5 `mlx5_cq_fill_pfns`: the wall clock converts the CQE's
    // ticks with the clock info page, `EOPNOTSUPP` without one.
    if req
        .wc_flags
        .contains(WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK)
        && ctx.clock.is_none()
    {
        return Err(Error::new(
            "ibv_create_cq_ex",
            ErrorKind::UnsupportedProvider,
            "COMPLETION_TIMESTAMP_WALLCLOCK: the kernel maps no mlx5 clock info page \
             (clock_info_versions lacks MLX5_IB_CLOCK_INFO_V1, or its mmap failed), \
             which converts device ticks to nanoseconds",
        ));
    }
    // `create_cq`: a PD that is not a parent domain is EINVAL.
    if req.pd == CqPd::ProtectionDomain {
        return Err(Error::new(
            "ibv_create_cq_ex",
            ErrorKind::InvalidArgument,
            "IBV_CQ_INIT_ATTR_MASK_PD: the PD is no parent domain (libmlx5 takes a \
             parent domain only)",
        ));
    }
    let ncqe = req
        .cqe
        .checked_add(1)
        .map(u32::next_power_of_two)
        .filter(|&n| n <= 1 << 24)
        .ok_or_else(|| {
            Error::new(
                "ibv_create_cq",
                ErrorKind::InvalidArgument,
                format!("{} CQEs: an mlx5 CQ holds at most 2^24 - 1", req.cqe),
            )
        })?;
    let dv = req.driver.unwrap_or_default();
    let cqe_size = cq::cqe_size(dv.cqe_size, std::env::var_os("MLX5_CQE_SIZE").as_deref())?;
    // `mlx5_alloc_cq_buf`: whole pages, page aligned.
    let core = Arc::new(CqCore::new_in(ncqe, cqe_size, |len| {
        let spec = BufSpec {
            len: len.div_ceil(alloc::PAGE) * alloc::PAGE,
            alignment: alloc::PAGE,
            resource: QueueResource::Cq,
            alloc_type: AllocType::from_env(Component::Cq, Some("HUGE_CQ")),
            component: Component::Cq,
            allocator: domain.allocator,
            what: "allocate mlx5 CQ buffer",
        };
        QueueBuf::alloc(Some(dev), &spec)
    })?);
    let mut input = abi::Mlx5IbCreateCq::new_zeroed();
    input.buf_addr = core.buf.addr();
    input.db_addr = core.buf.db_addr();
    input.cqe_size = cqe_size as u32;
    if let Some(format) = dv.compressed_format {
        input.cqe_comp_en = 1;
        input.cqe_comp_res_format = format;
    }
    let mut flags = 0;
    if dv.pad {
        flags |= abi::MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD;
    }
    // `create_cq`: wall-clock stamps from the device itself, when the
    // kernel says it stamps in real time and the CQ wants only those.
    if ctx.state.resp.comp_mask & abi::MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS != 0
        && !req.wc_flags.contains(WcExFlags::COMPLETION_TIMESTAMP)
        && req
            .wc_flags
            .contains(WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK)
    {
        flags |= abi::MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS;
    }
    if let Some(page) = ctx.uars.cq_page_index() {
        flags |= abi::MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX;
        input.uar_page_index = page;
    }
    input.flags = flags as u16;
    let plan = Drv {
        input,
        output: abi::Mlx5IbCreateCqResp::new_zeroed(),
    };
    Ok((plan, core))
}

/// `Provider::finish_cq`: the CQ from its plan once the kernel made it.
pub(super) fn finish_cq(
    ctx: &Mlx5Ctx,
    plan: <Mlx5 as Provider>::CqPlan,
    shared: &Arc<CqCore>,
) -> Result<Mlx5Cq> {
    shared.cqn.store(plan.output.cqn, Ordering::Release);
    Ok(Mlx5Cq::new(
        shared.clone(),
        ctx.uars.cq_page.clone(),
        ctx.resources.clone(),
        ctx.state.cqe_version == 1,
    )
    .with_clock(ctx.clock.clone()))
}

/// `Provider::plan_qp`: libmlx5's queue sizing, the buffer, doorbell
/// record, bfreg and user index, as `mlx5_ib_create_qp`.
pub(super) fn plan_qp(
    ctx: &Mlx5Ctx,
    dev: Device<'_>,
    req: &QpRequest,
    domain: Domain<'_, Mlx5Td>,
) -> Result<(<Mlx5 as Provider>::QpPlan, Mlx5QpShared)> {
    let s = &ctx.state;
    let limits = qp_size::QpLimits {
        max_sq_desc_sz: i32::from(s.max_sq_desc_sz),
        max_rq_desc_sz: i32::from(s.max_rq_desc_sz),
        max_send_wqebb: s.resp.max_send_wqebb as i32,
        max_recv_wr: s.resp.max_recv_wr as i32,
    };
    let g = qp_size::geometry(req.qp_type, &req.cap, req.has_srq, req.send_ops, &limits)?;
    // A QP without a send queue (max_send_wr 0) still gets a ring of
    // one WQEBB past the receive queue, never posted to (max_post 0)
    // and never told to the kernel (sq_wqe_count 0).
    let len = g.buf_len.max(g.sq.offset + SEND_WQE_BB);
    // `mlx5_alloc_qp_buf`: an allocator is asked for the buffer rounded
    // up to libmlx5's alignment for it; the others round it to pages.
    let max_stride = wqe::SEND_WQE_BB.max(1 << g.rq_wqe_shift);
    let alignment = match domain.allocator {
        Some(_) => alloc::custom_qp_alignment(len, max_stride),
        None => alloc::PAGE,
    };
    let spec = BufSpec {
        len: len.next_multiple_of(alignment),
        alignment,
        resource: QueueResource::Qp,
        alloc_type: AllocType::from_env(Component::Qp, Some(huge_key(req.qp_type))),
        component: Component::Qp,
        allocator: domain.allocator,
        what: "allocate mlx5 QP buffer",
    };
    let buf = Arc::new(QueueBuf::alloc(Some(dev), &spec)?);
    let uidx = uidx_for(ctx)?;
    // `mlx5_create_qp`: a thread domain's bfreg, else the context's.
    let td_bfreg = domain.td.and_then(|td| td.bfreg.clone());
    let from_td = td_bfreg.is_some();
    let bfreg = match td_bfreg {
        Some(b) => Some(b),
        None => ctx.uars.qp_bfreg(dev)?,
    };
    let mut input = abi::Mlx5IbCreateQp::new_zeroed();
    input.buf_addr = buf.addr();
    input.db_addr = buf.db_addr();
    input.sq_wqe_count = g.sq.wqe_cnt;
    input.rq_wqe_count = g.rq_wqe_cnt;
    input.rq_wqe_shift = g.rq_wqe_shift;
    if g.separate_sq {
        input.sq_buf_addr = buf.addr() + g.sq.offset as u64;
    }
    input.uidx = uidx.unwrap_or(NO_UIDX);
    if let Some(b) = &bfreg {
        input.bfreg_index = b.index;
        input.flags |= abi::MLX5_QP_FLAG_UAR_PAGE_INDEX;
    }
    // `mlx5dv_create_qp`'s flags the kernel decides on.
    if let Some(d) = req.driver {
        input.flags |= d.flags;
    }
    let shared = Mlx5QpShared {
        buf,
        sq: Arc::new(SqTrack::new(g.sq.wqe_cnt)),
        rq: (g.rq_wqe_cnt > 0).then(|| Arc::new(RqTrack::new(g.rq_wqe_cnt))),
        uidx,
        bfreg: Mutex::new(bfreg),
        td_bfreg: from_td,
        track: OnceLock::new(),
        cqs: OnceLock::new(),
        resources: ctx.resources.clone(),
        uars: ctx.uars.clone(),
        geometry: g,
    };
    let plan = Drv {
        input,
        output: abi::Mlx5IbCreateQpResp::new_zeroed(),
    };
    Ok((plan, shared))
}

/// `Provider::finish_qp`: the QP's send and receive queues from its plan
/// and the kernel's answer (its bfreg, its number).
pub(super) fn finish_qp(
    ctx: &Mlx5Ctx,
    plan: <Mlx5 as Provider>::QpPlan,
    shared: &Mlx5QpShared,
    req: &QpRequest,
    created: &QpCreated,
    links: QpLinks<'_, Mlx5>,
) -> Result<Mlx5Qp> {
    if req.qp_type == QpType::RawPacket {
        // The kernel (and the device) took it, sized as libmlx5 sizes
        // it; this provider cannot post to it (a raw packet send WQE
        // carries an Ethernet segment with the packet's inline headers,
        // `set_eth_seg`). The core destroys the QP on this error.
        return Err(Error::new(
            "ibv_create_qp",
            ErrorKind::UnsupportedProvider,
            "raw packet QPs: the mlx5 provider has no raw Ethernet send path",
        ));
    }
    let bfreg = {
        let mut slot = shared.bfreg.lock().unwrap_or_else(|p| p.into_inner());
        match &*slot {
            Some(b) => b.clone(),
            None => {
                let gross = plan.output.bfreg_index;
                let b = ctx
                    .uars
                    .static_bfreg(
                        gross,
                        context::LOW_LATENCY_BFREGS,
                        ctx.state.resp.tot_bfregs,
                    )
                    .ok_or_else(|| {
                        Error::new(
                            "ibv_create_qp",
                            ErrorKind::Malformed,
                            format!(
                                "the kernel gave the QP bfreg {gross}, not a register \
                                 inside the context's UAR pages"
                            ),
                        )
                    })?;
                *slot = Some(b.clone());
                b
            }
        }
    };
    let rsn = shared.uidx.unwrap_or(created.qp_num);
    let track = Arc::new(QpTrack::new(
        rsn,
        created.qp_num,
        shared.sq.clone(),
        shared.rq.clone(),
        links.srq.map(|s| s.track.clone()),
    ));
    let _ = shared.track.set(track.clone());
    let _ = shared
        .cqs
        .set([links.send_cq.clone(), links.recv_cq.clone()]);
    let g = &shared.geometry;
    let sq_ring = SqGeometry {
        wqe_cnt: g.sq.wqe_cnt.max(1),
        ..g.sq
    };
    let sq = Mlx5Sq::new(
        shared.buf.clone(),
        sq_ring,
        created.qp_num,
        req.qp_type,
        req.sq_sig_all,
        bfreg,
        shared.sq.clone(),
    )
    .ok_or_else(|| sizing_bug("ibv_create_qp", "send queue"))?;
    let rq = match &shared.rq {
        Some(t) => Some(
            Mlx5Rq::new(shared.buf.clone(), g.rq_wqe_cnt, g.rq_wqe_shift, t.clone())
                .ok_or_else(|| sizing_bug("ibv_create_qp", "receive queue"))?,
        ),
        None => None,
    };
    ctx.resources.insert(track);
    Ok(Mlx5Qp { sq, rq })
}

/// `Provider::plan_srq`: the SRQ's buffer and doorbell record, as
/// `mlx5_ib_create_srq`.
pub(super) fn plan_srq(
    ctx: &Mlx5Ctx,
    dev: Device<'_>,
    req: &SrqRequest,
    domain: Domain<'_, Mlx5Td>,
) -> Result<(<Mlx5 as Provider>::SrqPlan, Mlx5SrqShared)> {
    let invalid = |d: String| Error::new("ibv_create_srq", ErrorKind::InvalidArgument, d);
    let max = req
        .max_wr
        .checked_add(1)
        .map(u32::next_power_of_two)
        .filter(|&n| n <= 1 << 20)
        .ok_or_else(|| invalid(format!("max_wr {} is too large", req.max_wr)))?;
    let stride = (16 + 16 * req.max_sge as usize).max(32).next_power_of_two();
    if stride > usize::from(ctx.state.max_rq_desc_sz) {
        return Err(invalid(format!(
            "max_sge {} needs {stride}-byte SRQ WQEs; the device takes {}",
            req.max_sge, ctx.state.max_rq_desc_sz
        )));
    }
    // `mlx5_alloc_srq_buf`: the WQEs' bytes, page aligned.
    let spec = BufSpec {
        len: max as usize * stride,
        alignment: alloc::PAGE,
        resource: QueueResource::Srq,
        alloc_type: AllocType::from_env(Component::Srq, None),
        component: Component::Srq,
        allocator: domain.allocator,
        what: "allocate mlx5 SRQ buffer",
    };
    let buf = Arc::new(QueueBuf::alloc(Some(dev), &spec)?);
    let uidx = uidx_for(ctx)?;
    let mut input = abi::Mlx5IbCreateSrq::new_zeroed();
    input.buf_addr = buf.addr();
    input.db_addr = buf.db_addr();
    input.uidx = uidx.unwrap_or(NO_UIDX);
    let track = Arc::new(
        SrqTrack::new(buf, max, stride.trailing_zeros())
            .ok_or_else(|| sizing_bug("ibv_create_srq", "SRQ"))?,
    );
    let shared = Mlx5SrqShared {
        track,
        uidx,
        resources: ctx.resources.clone(),
    };
    let plan = Drv {
        input,
        output: abi::Mlx5IbCreateSrqResp::new_zeroed(),
    };
    Ok((plan, shared))
}

/// `Provider::finish_srq`: the SRQ and its number from the kernel's answer.
pub(super) fn finish_srq(
    plan: <Mlx5 as Provider>::SrqPlan,
    shared: &Mlx5SrqShared,
) -> Result<(Mlx5Srq, u32)> {
    Ok((Mlx5Srq::new(shared.track.clone()), plan.output.srqn))
}
