//! Creating a queue pair: [`ProtectionDomain::create_qp`] and its
//! options, the `QP_CREATE` method (or the legacy `CREATE_QP` write),
//! the provider's driver data before it and its queues after.

use std::sync::{
    atomic::{AtomicU64, AtomicU8},
    Arc,
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::Verb,
    cq::CompletionQueue,
    error::{Error, ErrorKind, Result},
    event_count::{EventCounts, Target},
    object::{Owned, ParentLink},
    pd::ProtectionDomain,
    providers::{AnyQpLinks, DriverData, QpCreated, QpRequest},
    qp_attr::{QpCap, QpState},
    qp_options::QpCreateOptions,
    sys::Errno,
};

use super::{QpInitAttr, QpInner, QueuePair, GATE_NEVER};

impl ProtectionDomain {
    /// Creates a queue pair, like `ibv_create_qp`.
    #[doc(alias = "ibv_create_qp")]
    pub fn create_qp(&self, init: &QpInitAttr<'_>) -> Result<QueuePair> {
        self.create_qp_with(init, &QpCreateOptions::default())
    }

    /// Creates a queue pair with creation flags or declared send
    /// operations, like `ibv_create_qp_ex` with
    /// `IBV_QP_INIT_ATTR_CREATE_FLAGS` / `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`
    /// (see [`QpCreateOptions`]). Creation flags need the `QP_CREATE`
    /// ioctl method (the legacy write command has no room for them):
    /// without it they fail with `EOPNOTSUPP`.
    #[doc(alias = "ibv_create_qp_ex")]
    pub fn create_qp_with(
        &self,
        init: &QpInitAttr<'_>,
        opts: &QpCreateOptions,
    ) -> Result<QueuePair> {
        self.create_qp_driver(init, opts, None)
    }

    /// [`ProtectionDomain::create_qp_with`] with a driver's own attributes
    /// (mlx5's `mlx5dv_create_qp`), checked by the provider's API that
    /// takes them.
    pub(crate) fn create_qp_driver(
        &self,
        init: &QpInitAttr<'_>,
        opts: &QpCreateOptions,
        driver: Option<crate::providers::DriverQpAttrs>,
    ) -> Result<QueuePair> {
        let op = "UVERBS_METHOD_QP_CREATE";
        let ctx = &self.inner.ctx;
        for cq in [init.send_cq, init.recv_cq] {
            if !Arc::ptr_eq(&cq.inner.ctx, ctx) {
                return Err(Error::new(
                    "ibv_create_qp",
                    ErrorKind::InvalidArgument,
                    "a CQ belongs to another context",
                ));
            }
        }
        // A foreign SRQ's handle would name another object (or none) in
        // this context, while a provider links the QP's receive completions
        // to the foreign SRQ's queue (mlx5: its free list).
        if init.srq.is_some_and(|s| !Arc::ptr_eq(&s.inner.ctx, ctx)) {
            return Err(Error::new(
                "ibv_create_qp",
                ErrorKind::InvalidArgument,
                "the SRQ belongs to another context",
            ));
        }
        // The send operations asked for must be ones the provider posts on
        // the QP's type, as rdma-core's providers check at creation (rxe's
        // `check_qp_init_attr`, libmlx5's `mlx5_qp_fill_wr_pfns`:
        // EOPNOTSUPP).
        if let Some(ops) = opts.send_ops {
            let posts = ctx.provider.send_ops(init.qp_type);
            if !posts.is_some_and(|p| p.contains(ops)) {
                return Err(Error::new(
                    "ibv_create_qp_ex",
                    ErrorKind::UnsupportedProvider,
                    format!(
                        "{ops:?} on a {} QP: the {} provider posts {posts:?} there \
                         (Context::send_ops)",
                        init.qp_type,
                        ctx.provider.name()
                    ),
                ));
            }
        }
        let reserved = ctx.events.reserve();
        let user_handle = reserved.handle();
        let srq_handle = init.srq.map(|s| s.inner.handle);
        let mut cap = abi::IbUverbsQpCap::new_zeroed();
        cap.max_send_wr = init.cap.max_send_wr;
        cap.max_recv_wr = init.cap.max_recv_wr;
        cap.max_send_sge = init.cap.max_send_sge;
        cap.max_recv_sge = init.cap.max_recv_sge;
        cap.max_inline_data = init.cap.max_inline_data;
        if init.srq.is_some() {
            cap.max_recv_wr = 0;
            cap.max_recv_sge = 0;
        }
        let request = QpRequest {
            qp_type: init.qp_type,
            cap: init.cap,
            sq_sig_all: init.sq_sig_all,
            has_srq: init.srq.is_some(),
            create_flags: opts.create_flags,
            send_ops: opts.send_ops,
            driver,
        };
        let mut flags = opts.create_flags.bits();
        if init.sq_sig_all {
            flags |= abi::IB_UVERBS_QP_CREATE_SQ_SIG_ALL;
        }
        let (plan, shared) = ctx.provider.plan_qp(
            ctx.device(),
            &self.inner.driver,
            &request,
            self.any_domain(),
        )?;
        let mut out = (plan, cap, 0u32);
        let handle = ctx
            .ioctl_or_write(
                Verb::CreateQp,
                &mut out,
                |(plan, resp_cap, qp_num)| {
                    // Keeps the async event fd open until the command is done.
                    let fds = ctx.enter()?;
                    let mut cmd =
                        ctx.ioctl_cmd(abi::UVERBS_OBJECT_QP, abi::UVERBS_METHOD_QP_CREATE);
                    let h = cmd.new_object(abi::UVERBS_ATTR_CREATE_QP_HANDLE);
                    cmd.object(abi::UVERBS_ATTR_CREATE_QP_PD_HANDLE, self.inner.handle);
                    if let Some(s) = srq_handle {
                        cmd.object(abi::UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, s);
                    }
                    cmd.object(
                        abi::UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE,
                        init.send_cq.inner.handle,
                    );
                    cmd.object(
                        abi::UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE,
                        init.recv_cq.inner.handle,
                    );
                    cmd.input_u64(abi::UVERBS_ATTR_CREATE_QP_USER_HANDLE, user_handle);
                    cmd.input_struct(abi::UVERBS_ATTR_CREATE_QP_CAP, &cap);
                    cmd.const_in(
                        abi::UVERBS_ATTR_CREATE_QP_TYPE,
                        u64::from(init.qp_type.raw()),
                    );
                    if flags != 0 {
                        cmd.flags_in(abi::UVERBS_ATTR_CREATE_QP_FLAGS, u64::from(flags));
                    }
                    cmd.fd(abi::UVERBS_ATTR_CREATE_QP_EVENT_FD, fds.async_fd());
                    cmd.output(abi::UVERBS_ATTR_CREATE_QP_RESP_CAP, resp_cap.as_mut_bytes());
                    cmd.output(
                        abi::UVERBS_ATTR_CREATE_QP_RESP_QP_NUM,
                        qp_num.as_mut_bytes(),
                    );
                    let (drv_in, drv_out) = plan.driver_bufs();
                    cmd.driver_in(drv_in).driver_out(drv_out);
                    ctx.ioctl(&mut cmd)?;
                    Ok(cmd.new_handle(h))
                },
                |(plan, resp_cap, qp_num)| {
                    if !opts.create_flags.is_empty() {
                        // libibverbs would use EX_CREATE_QP
                        // (`fallback_require_ex`); kernels without the
                        // ioctl method predate 6.1.
                        return Err(Errno::EOPNOTSUPP);
                    }
                    let mut req = abi::IbUverbsCreateQp::new_zeroed();
                    req.user_handle = user_handle;
                    req.pd_handle = self.inner.handle;
                    req.send_cq_handle = init.send_cq.inner.handle;
                    req.recv_cq_handle = init.recv_cq.inner.handle;
                    req.srq_handle = srq_handle.unwrap_or(0);
                    req.max_send_wr = cap.max_send_wr;
                    req.max_recv_wr = cap.max_recv_wr;
                    req.max_send_sge = cap.max_send_sge;
                    req.max_recv_sge = cap.max_recv_sge;
                    req.max_inline_data = cap.max_inline_data;
                    req.sq_sig_all = u8::from(init.sq_sig_all);
                    req.qp_type = init.qp_type.raw();
                    req.is_srq = u8::from(srq_handle.is_some());
                    let mut resp = abi::IbUverbsCreateQpResp::new_zeroed();
                    let (drv_in, drv_out) = plan.driver_bufs();
                    ctx.write_with_resp(
                        abi::IB_USER_VERBS_CMD_CREATE_QP,
                        req.as_bytes(),
                        drv_in,
                        resp.as_mut_bytes(),
                        drv_out,
                    )?;
                    resp_cap.max_send_wr = resp.max_send_wr;
                    resp_cap.max_recv_wr = resp.max_recv_wr;
                    resp_cap.max_send_sge = resp.max_send_sge;
                    resp_cap.max_recv_sge = resp.max_recv_sge;
                    resp_cap.max_inline_data = resp.max_inline_data;
                    *qp_num = resp.qpn;
                    Ok(resp.qp_handle)
                },
            )
            .map_err(|e| {
                let err = Error::sys(op, e);
                if e == Errno::EINVAL {
                    err.with_detail(format!(
                        "the requested capabilities {:?} exceed the device's limits \
                         (max_qp_wr, max_sge; check query_device)",
                        init.cap
                    ))
                } else {
                    err
                }
            })?;
        let (plan, got, qp_num) = out;
        let events = Arc::new(EventCounts::default());
        let cq_link = |cq: &CompletionQueue| ParentLink::new(&cq.inner, &cq.inner.children);
        let inner = Owned::new(QpInner {
            ctx: ctx.clone(),
            _pd: self.inner.clone(),
            _domain: self.domain.clone(),
            _send_cq: cq_link(init.send_cq),
            _recv_cq: cq_link(init.recv_cq),
            _srq: init
                .srq
                .map(|s| ParentLink::new(&s.inner, &s.inner.children)),
            handle,
            user_handle,
            qp_num,
            qp_type: init.qp_type,
            context: init.context,
            port: AtomicU8::new(0),
            events: events.clone(),
            shared,
        });
        ctx.events.insert(reserved, Target::new(events, &inner));
        let cap = inner.shared.granted_cap(&QpCap {
            max_send_wr: got.max_send_wr,
            max_recv_wr: got.max_recv_wr,
            max_send_sge: got.max_send_sge,
            max_recv_sge: got.max_recv_sge,
            max_inline_data: got.max_inline_data,
        });
        let queues = ctx.provider.finish_qp(
            ctx.device(),
            plan,
            &inner.shared,
            &request,
            &QpCreated {
                handle,
                qp_num,
                cap,
            },
            AnyQpLinks {
                send_cq: &init.send_cq.inner.shared,
                recv_cq: &init.recv_cq.inner.shared,
                srq: init.srq.map(|s| &s.inner.shared),
            },
        )?;
        Ok(QueuePair {
            inner,
            queues,
            cap,
            gate: AtomicU64::new(u64::from(QpState::Reset.raw())),
            gate_passed: GATE_NEVER,
            resets_seen: 0,
            qp_type: init.qp_type,
            recv_gate: None,
            send_open: None,
        })
    }
}
