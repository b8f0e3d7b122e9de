//! Shared receive queues (`ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//! `ibv_post_srq_recv`, `ibv_destroy_srq`).
//!
//! Creation is `UVERBS_METHOD_SRQ_CREATE` (or `CREATE_SRQ`); modify and query
//! are write commands; destruction is `UVERBS_METHOD_SRQ_DESTROY` (or
//! `DESTROY_SRQ`) and waits for the acknowledgement of its async events
//! (`SRQ_LIMIT_REACHED`, `SRQ_ERR`).

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::{ContextInner, DestroyReporting, Verb},
    error::{DestroyError, Error, ErrorKind, Result},
    event_count::{
        ack_deferred, destroy_reachable, destroy_unreachable, EventCounts, EventObject, Pending,
        Registry, Stream, Target,
    },
    object::{Destroy, Owned},
    parent_domain::DomainInner,
    pd::{PdInner, ProtectionDomain},
    providers::{AnySrq, AnySrqShared, DriverData, SrqCreated, SrqRequest},
    sys::Errno,
    wr::{PostError, RecvWr},
};

/// `IB_SRQ_LIMIT` of `enum ib_srq_attr_mask` (`include/rdma/ib_verbs.h`; not
/// in the UAPI headers): the attribute mask bit for the limit.
const SRQ_LIMIT: u32 = 1 << 1;

/// Sizes of an SRQ (`struct ibv_srq_attr`): `SrqAttr::new(max_wr, max_sge)`,
/// and `.srq_limit(n)` to arm the limit event.
#[doc(alias = "ibv_srq_attr")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SrqAttr {
    /// Receive work requests it holds.
    pub max_wr: u32,
    /// Scatter/gather entries per work request.
    pub max_sge: u32,
    /// When fewer than this many requests remain, `SRQ_LIMIT_REACHED` fires
    /// once (0: disarmed).
    pub srq_limit: u32,
}

impl SrqAttr {
    /// Room for `max_wr` receive work requests of up to `max_sge` entries;
    /// the limit disarmed.
    #[inline]
    pub const fn new(max_wr: u32, max_sge: u32) -> Self {
        SrqAttr {
            max_wr,
            max_sge,
            srq_limit: 0,
        }
    }

    crate::setters::setters! {
        /// Sets the receive work requests it holds.
        max_wr: u32,
        /// Sets the scatter/gather entries per work request.
        max_sge: u32,
        /// Sets the limit (0: disarmed).
        srq_limit: u32,
    }
}

/// An SRQ's kernel object; QPs on it and its async events hold an `Arc`.
#[derive(Debug)]
pub(crate) struct SrqInner {
    pub(crate) ctx: Arc<ContextInner>,
    _pd: Arc<Owned<PdInner>>,
    /// The parent domain it was made in, which its queue memory may come
    /// from.
    _domain: Option<Arc<DomainInner>>,
    pub(crate) handle: u32,
    pub(crate) user_handle: u64,
    /// `SrqOptions::context`.
    pub(crate) context: u64,
    pub(crate) events: Arc<EventCounts>,
    /// QPs receiving from this SRQ.
    pub(crate) children: Arc<AtomicUsize>,
    /// The provider's state kept with the kernel SRQ: dropped after the SRQ
    /// is destroyed (it may own memory the device reads and writes).
    pub(crate) shared: AnySrqShared,
}

impl Destroy for SrqInner {
    fn destroy_kernel(&self) -> Result<()> {
        destroy_unreachable(self)
    }
}

impl EventObject for SrqInner {
    fn counts(&self) -> &EventCounts {
        &self.events
    }

    fn registry(&self) -> (&Registry, u64) {
        (&self.ctx.events, self.user_handle)
    }

    fn destroy_reporting(&self) -> Result<Option<[u32; 2]>> {
        let mut req = abi::IbUverbsDestroySrq::new_zeroed();
        req.srq_handle = self.handle;
        let mut resp = abi::IbUverbsDestroySrqResp::new_zeroed();
        let gone = self.ctx.destroy_reporting(
            &DestroyReporting {
                verb: Verb::DestroySrq,
                op: "UVERBS_METHOD_SRQ_DESTROY",
                object: abi::UVERBS_OBJECT_SRQ,
                method: abi::UVERBS_METHOD_SRQ_DESTROY,
                handle_attr: abi::UVERBS_ATTR_DESTROY_SRQ_HANDLE,
                resp_attr: abi::UVERBS_ATTR_DESTROY_SRQ_RESP,
                write_command: abi::IB_USER_VERBS_CMD_DESTROY_SRQ,
            },
            self.handle,
            req.as_bytes(),
            resp.as_mut_bytes(),
        )?;
        Ok((!gone).then_some([0, resp.events_reported]))
    }
}

/// A shared receive queue (`struct ibv_srq`).
#[derive(Debug)]
pub struct SharedReceiveQueue {
    pub(crate) inner: Arc<Owned<SrqInner>>,
    pub(crate) ring: AnySrq,
    attr: SrqAttr,
    srq_num: u32,
}

/// How to create an SRQ beyond its sizes ([`ProtectionDomain::create_srq_with`]):
/// `SrqOptions::new().context(7)`; the rest of `struct ibv_srq_init_attr`.
#[doc(alias = "ibv_srq_init_attr")]
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct SrqOptions {
    /// A value of the program's own that the SRQ's async events carry
    /// ([`SharedReceiveQueue::context`], [`crate::AsyncEvent::context`]):
    /// `ibv_srq_init_attr`'s `srq_context`.
    pub context: u64,
}

impl SrqOptions {
    /// No options (as [`Default`]).
    #[inline]
    pub const fn new() -> Self {
        SrqOptions { context: 0 }
    }

    crate::setters::setters! {
        /// Sets the program's own value the SRQ's events carry.
        context: u64,
    }
}

impl ProtectionDomain {
    /// Creates a shared receive queue, like `ibv_create_srq`.
    #[doc(alias = "ibv_create_srq")]
    pub fn create_srq(&self, attr: SrqAttr) -> Result<SharedReceiveQueue> {
        self.create_srq_with(attr, SrqOptions::default())
    }

    /// [`create_srq`](Self::create_srq) with [`SrqOptions`]: the SRQ's
    /// context (`ibv_srq_init_attr.srq_context`).
    pub fn create_srq_with(&self, attr: SrqAttr, opts: SrqOptions) -> Result<SharedReceiveQueue> {
        let ctx = &self.inner.ctx;
        let (plan, shared) = ctx.provider.plan_srq(
            ctx.device(),
            &self.inner.driver,
            &SrqRequest {
                max_wr: attr.max_wr,
                max_sge: attr.max_sge,
            },
            self.any_domain(),
        )?;
        let reserved = ctx.events.reserve();
        let user_handle = reserved.handle();
        let mut out = (plan, 0u32, 0u32);
        let handle = ctx
            .ioctl_or_write(
                Verb::CreateSrq,
                &mut out,
                |(plan, max_wr, max_sge)| {
                    // Keeps the async event fd open until the command is done.
                    let fds = ctx.enter()?;
                    let mut srq_num = 0u32;
                    let mut cmd =
                        ctx.ioctl_cmd(abi::UVERBS_OBJECT_SRQ, abi::UVERBS_METHOD_SRQ_CREATE);
                    let h = cmd.new_object(abi::UVERBS_ATTR_CREATE_SRQ_HANDLE);
                    cmd.object(abi::UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, self.inner.handle);
                    cmd.input_u64(abi::UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, user_handle);
                    cmd.input_u32(abi::UVERBS_ATTR_CREATE_SRQ_MAX_WR, attr.max_wr);
                    cmd.input_u32(abi::UVERBS_ATTR_CREATE_SRQ_MAX_SGE, attr.max_sge);
                    cmd.input_u32(abi::UVERBS_ATTR_CREATE_SRQ_LIMIT, attr.srq_limit);
                    cmd.const_in(
                        abi::UVERBS_ATTR_CREATE_SRQ_TYPE,
                        u64::from(abi::IB_UVERBS_SRQT_BASIC),
                    );
                    cmd.fd(abi::UVERBS_ATTR_CREATE_SRQ_EVENT_FD, fds.async_fd());
                    cmd.output(
                        abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR,
                        max_wr.as_mut_bytes(),
                    );
                    cmd.output(
                        abi::UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE,
                        max_sge.as_mut_bytes(),
                    );
                    cmd.output(
                        abi::UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM,
                        srq_num.as_mut_bytes(),
                    );
                    cmd.optional();
                    let (drv_in, drv_out) = plan.driver_bufs();
                    cmd.driver_in(drv_in).driver_out(drv_out);
                    ctx.ioctl(&mut cmd)?;
                    Ok(cmd.new_handle(h))
                },
                |(plan, max_wr, max_sge)| {
                    let mut req = abi::IbUverbsCreateSrq::new_zeroed();
                    req.user_handle = user_handle;
                    req.pd_handle = self.inner.handle;
                    req.max_wr = attr.max_wr;
                    req.max_sge = attr.max_sge;
                    req.srq_limit = attr.srq_limit;
                    let mut resp = abi::IbUverbsCreateSrqResp::new_zeroed();
                    let (drv_in, drv_out) = plan.driver_bufs();
                    ctx.write_with_resp(
                        abi::IB_USER_VERBS_CMD_CREATE_SRQ,
                        req.as_bytes(),
                        drv_in,
                        resp.as_mut_bytes(),
                        drv_out,
                    )?;
                    *max_wr = resp.max_wr;
                    *max_sge = resp.max_sge;
                    Ok(resp.srq_handle)
                },
            )
            .map_err(|e| {
                let err = Error::sys("UVERBS_METHOD_SRQ_CREATE", e);
                if e == Errno::EINVAL {
                    err.with_detail(format!(
                        "{attr:?} exceeds the device's max_srq_wr/max_srq_sge, or the limit \
                         is not below max_wr"
                    ))
                } else {
                    err
                }
            })?;
        let (plan, max_wr, max_sge) = out;
        let events = Arc::new(EventCounts::default());
        let inner = Owned::new(SrqInner {
            ctx: ctx.clone(),
            _pd: self.inner.clone(),
            _domain: self.domain.clone(),
            handle,
            user_handle,
            context: opts.context,
            events: events.clone(),
            children: Arc::new(AtomicUsize::new(0)),
            shared,
        });
        ctx.events.insert(reserved, Target::new(events, &inner));
        // From here on, dropping `inner` destroys the kernel SRQ.
        let (ring, srq_num) = ctx.provider.finish_srq(
            ctx.device(),
            plan,
            &inner.shared,
            &SrqCreated {
                handle,
                max_wr,
                max_sge,
            },
        )?;
        Ok(SharedReceiveQueue {
            inner,
            ring,
            attr: SrqAttr {
                max_wr,
                max_sge,
                srq_limit: attr.srq_limit,
            },
            srq_num,
        })
    }
}

impl SharedReceiveQueue {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The value given as [`SrqOptions::context`] (`srq->srq_context`).
    pub fn context(&self) -> u64 {
        self.inner.context
    }

    /// The SRQ number (XRC peers address it).
    pub fn srq_num(&self) -> u32 {
        self.srq_num
    }

    /// The sizes it was created with (as granted).
    pub fn attr(&self) -> SrqAttr {
        self.attr
    }

    /// Arms the limit event: when fewer than `limit` receive requests remain,
    /// the async event `SRQ_LIMIT_REACHED` fires once (like `ibv_modify_srq`
    /// with `IBV_SRQ_LIMIT`). 0 disarms it.
    #[doc(alias = "ibv_modify_srq")]
    pub fn set_limit(&self, limit: u32) -> Result<()> {
        if limit >= self.attr.max_wr && limit != 0 {
            return Err(Error::new(
                "ibv_modify_srq",
                ErrorKind::InvalidArgument,
                format!("limit {limit} must be below max_wr {}", self.attr.max_wr),
            ));
        }
        let mut req = abi::IbUverbsModifySrq::new_zeroed();
        req.srq_handle = self.inner.handle;
        req.attr_mask = SRQ_LIMIT;
        req.srq_limit = limit;
        let ctx = &self.inner.ctx;
        self.ring
            .modify(&mut |driver_in| {
                ctx.write_with_resp(
                    abi::IB_USER_VERBS_CMD_MODIFY_SRQ,
                    req.as_bytes(),
                    driver_in,
                    &mut [],
                    &mut [],
                )
            })
            .map_err(|e| Error::sys("IB_USER_VERBS_CMD_MODIFY_SRQ", e))
    }

    /// Queries the SRQ, like `ibv_query_srq`.
    #[doc(alias = "ibv_query_srq")]
    pub fn query(&self) -> Result<SrqAttr> {
        let mut req = abi::IbUverbsQuerySrq::new_zeroed();
        req.srq_handle = self.inner.handle;
        let mut resp = abi::IbUverbsQuerySrqResp::new_zeroed();
        self.inner
            .ctx
            .write_with_resp(
                abi::IB_USER_VERBS_CMD_QUERY_SRQ,
                req.as_bytes(),
                &[],
                resp.as_mut_bytes(),
                &mut [],
            )
            .map_err(|e| Error::sys("IB_USER_VERBS_CMD_QUERY_SRQ", e))?;
        Ok(SrqAttr {
            max_wr: resp.max_wr,
            max_sge: resp.max_sge,
            srq_limit: resp.srq_limit,
        })
    }

    /// Posts receive work requests, like `ibv_post_srq_recv` (no system call).
    #[doc(alias = "ibv_post_srq_recv")]
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        self.ring.post_recv(wrs)
    }

    /// Destroys the SRQ, like `ibv_destroy_srq`: `EBUSY` while QPs use it or
    /// the calling thread holds one of its events; waits for events other
    /// threads hold ([`SharedReceiveQueue::try_destroy`] does not). On any
    /// failure the SRQ comes back in the error, unchanged and still usable.
    /// Dropping the handle destroys it when its last reference goes (see
    /// [`crate::CompletionQueue::destroy`]).
    #[doc(alias = "ibv_destroy_srq")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::Wait)
    }

    /// [`SharedReceiveQueue::destroy`] that fails with `EAGAIN` instead of
    /// waiting for events other threads hold.
    pub fn try_destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::Refuse)
    }

    /// [`SharedReceiveQueue::destroy`] in libibverbs' form (`ibv_destroy_srq`), for callers that
    /// acknowledge by count from other threads through
    /// [`SharedReceiveQueue::event_acks`]: events deferred and not yet acknowledged do
    /// not refuse it. The destroy command runs first; then it waits until
    /// every event the kernel reported for the object is acknowledged,
    /// deferred ones included (forever, as libibverbs, for one nobody
    /// acknowledges). `EBUSY`, the object given back unchanged, as for
    /// [`SharedReceiveQueue::destroy`] (while QPs use it) or while the calling thread holds an event
    /// value of it.
    #[doc(alias = "ibv_destroy_srq")]
    pub fn destroy_awaiting_acks(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::WaitDeferred)
    }

    /// A handle that acknowledges this object's deferred events from any
    /// thread, also while [`SharedReceiveQueue::destroy_awaiting_acks`] waits for them
    /// (see [`EventAcks`](crate::EventAcks)).
    pub fn event_acks(&self) -> crate::EventAcks {
        crate::EventAcks::new(&self.inner.events)
    }

    /// Acknowledges `n` async events of this SRQ left unacknowledged with
    /// [`AsyncEvent::defer_ack`](crate::AsyncEvent::defer_ack), from any
    /// thread (libibverbs acknowledges async events one at a time:
    /// `ibv_ack_async_event`). `InvalidArgument` (and nothing
    /// acknowledged) when fewer than `n` are deferred.
    pub fn ack_async_events(&self, n: u32) -> Result<()> {
        ack_deferred(&self.inner.events, Stream::Async, n, "ibv_ack_async_event")
    }

    /// Async events of this SRQ deferred and not yet acknowledged.
    pub fn deferred_async_events(&self) -> u32 {
        self.inner.events.deferred(Stream::Async)
    }

    fn destroy_with(self, pending: Pending) -> Result<(), DestroyError<Self>> {
        let children = &self.inner.children;
        let result = destroy_reachable(
            &self.inner,
            || children.load(Ordering::Acquire),
            pending,
            "ibv_destroy_srq",
        );
        result.map_err(|e| DestroyError::new(self, e))
    }
}
