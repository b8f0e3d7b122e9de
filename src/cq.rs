//! Completion queues (`ibv_create_cq`, `ibv_create_cq_ex`, `ibv_poll_cq`,
//! `ibv_req_notify_cq`, `ibv_resize_cq`, `ibv_destroy_cq`; the extended
//! polling session is in `cq_ex.rs`).
//!
//! Creation is `UVERBS_METHOD_CQ_CREATE` (falling back to the `CREATE_CQ`
//! write command) with the provider's driver data; destruction is
//! `UVERBS_METHOD_CQ_DESTROY` (or `DESTROY_CQ`), whose response carries the
//! number of completion and async events the kernel handed out for the CQ;
//! the destroy then waits until that many were acknowledged (see
//! `event_count`).

use std::{
    os::fd::AsFd,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    comp_channel::{ChannelInner, CompletionChannel},
    context::{Context, ContextInner, DestroyReporting, Verb},
    cq_ex::PollBuf,
    error::{DestroyError, Error, ErrorKind, Result},
    event_count::{
        ack_deferred, destroy_reachable, destroy_unreachable, EventCounts, EventObject, Pending,
        Registry, Stream, Target,
    },
    object::{Destroy, Owned},
    parent_domain::DomainInner,
    pd::ProtectionDomain,
    providers::{AnyCq, AnyCqShared, CqCreated, CqPd, CqRequest, DriverData},
    sys::Errno,
    wc::{WcExFlags, WorkCompletion},
};

mod shared;

pub use shared::{CqLock, SharedCompletionQueue};

/// A CQ's kernel object; QPs and events hold an `Arc` of it.
#[derive(Debug)]
pub(crate) struct CqInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) handle: u32,
    pub(crate) user_handle: u64,
    pub(crate) events: Arc<EventCounts>,
    /// QPs and SRQs using this CQ.
    pub(crate) children: Arc<AtomicUsize>,
    /// Keeps the channel (and its fd) alive while the CQ may signal it.
    _channel: Option<Arc<ChannelInner>>,
    /// The parent domain it was made in ([`CqOptions::parent_domain`]),
    /// which its queue memory may come from.
    _domain: Option<Arc<DomainInner>>,
    /// `CqOptions::context`.
    pub(crate) context: u64,
    /// The provider's state kept with the kernel CQ: dropped after the CQ
    /// is destroyed (it may own memory the device writes).
    pub(crate) shared: AnyCqShared,
}

impl Destroy for CqInner {
    fn destroy_kernel(&self) -> Result<()> {
        destroy_unreachable(self)
    }
}

impl EventObject for CqInner {
    fn counts(&self) -> &EventCounts {
        &self.events
    }

    fn registry(&self) -> (&Registry, u64) {
        (&self.ctx.events, self.user_handle)
    }

    fn destroy_reporting(&self) -> Result<Option<[u32; 2]>> {
        let mut req = abi::IbUverbsDestroyCq::new_zeroed();
        req.cq_handle = self.handle;
        let mut resp = abi::IbUverbsDestroyCqResp::new_zeroed();
        let gone = self.ctx.destroy_reporting(
            &DestroyReporting {
                verb: Verb::DestroyCq,
                op: "UVERBS_METHOD_CQ_DESTROY",
                object: abi::UVERBS_OBJECT_CQ,
                method: abi::UVERBS_METHOD_CQ_DESTROY,
                handle_attr: abi::UVERBS_ATTR_DESTROY_CQ_HANDLE,
                resp_attr: abi::UVERBS_ATTR_DESTROY_CQ_RESP,
                write_command: abi::IB_USER_VERBS_CMD_DESTROY_CQ,
            },
            self.handle,
            req.as_bytes(),
            resp.as_mut_bytes(),
        )?;
        Ok((!gone).then_some([resp.comp_events_reported, resp.async_events_reported]))
    }
}

/// A completion queue (`struct ibv_cq`).
///
/// The handle owns the consumer side of the queue, so polling takes
/// `&mut self` and needs no lock; share it behind a `Mutex` to poll from
/// several threads.
#[derive(Debug)]
pub struct CompletionQueue {
    pub(crate) inner: Arc<Owned<CqInner>>,
    pub(crate) ring: AnyCq,
    cqe: u32,
    wc_flags: WcExFlags,
    /// Completions polling sessions took off the ring (`cq_ex.rs`).
    polled: PollBuf,
}

/// Options for [`Context::create_cq`].
///
/// The optional arguments of `ibv_create_cq` / `ibv_create_cq_ex` (`struct ibv_cq_init_attr_ex`).
///
/// `CqOptions::new()` (no channel, vector 0, context 0, the standard
/// completion fields, no parent domain; as `Default`) and the setters:
/// `CqOptions::new().channel(&ch).comp_vector(0)`.
#[doc(alias = "ibv_cq_init_attr_ex")]
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct CqOptions<'a> {
    /// The channel to signal when the CQ is armed and gets a completion.
    pub channel: Option<&'a CompletionChannel>,
    /// Completion vector (`< num_comp_vectors`).
    pub comp_vector: u32,
    /// A value of the program's choice that the CQ and each of its
    /// completion events carry ([`CompletionQueue::context`],
    /// [`crate::CqEvent::cq_context`]): `ibv_create_cq`'s `cq_context`, e.g.
    /// an index into the program's own table of CQs.
    pub context: u64,
    /// The completion fields to report (`ibv_create_cq_ex`'s `wc_flags`),
    /// read in a [`CompletionQueue::start_poll`] session; the default,
    /// [`WcExFlags::STANDARD`], is what `ibv_create_cq` gives. Asking for
    /// [`WcExFlags::COMPLETION_TIMESTAMP`] or
    /// [`WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK`] creates the kernel CQ
    /// with completion timestamps (mlx5; rxe has none; the wall clock also
    /// needs the kernel's mlx5 clock info page, and is refused with
    /// [`ErrorKind::UnsupportedProvider`] saying so without it). See
    /// [`WcExFlags`] for what each provider supports.
    pub wc_flags: WcExFlags,
    /// The parent domain whose queue allocator the CQ's memory comes from
    /// (`ibv_create_cq_ex`'s `parent_domain`, `IBV_CQ_INIT_ATTR_MASK_PD`):
    /// a parent domain of the same context
    /// ([`ProtectionDomain::alloc_parent_domain`]). mlx5 refuses a plain
    /// protection domain with [`ErrorKind::InvalidArgument`] (`EINVAL`, as
    /// libmlx5); rxe ignores it, as rdma-core's rxe. The CQ holds a parent
    /// domain: its destroy fails with `EBUSY` while the CQ exists.
    pub parent_domain: Option<&'a ProtectionDomain>,
}

impl<'a> CqOptions<'a> {
    /// The options of a plain `ibv_create_cq` (as [`Default`]).
    #[inline]
    pub const fn new() -> Self {
        CqOptions {
            channel: None,
            comp_vector: 0,
            context: 0,
            wc_flags: WcExFlags::STANDARD,
            parent_domain: None,
        }
    }

    /// Signals `channel` (`&channel`, or an `Option`) when the armed CQ
    /// gets a completion.
    #[inline]
    #[must_use]
    pub fn channel(mut self, channel: impl Into<Option<&'a CompletionChannel>>) -> Self {
        self.channel = channel.into();
        self
    }

    /// Takes the CQ's memory from the parent domain `pd`'s allocator
    /// (`&pd`, or an `Option`).
    #[inline]
    #[must_use]
    pub fn parent_domain(mut self, pd: impl Into<Option<&'a ProtectionDomain>>) -> Self {
        self.parent_domain = pd.into();
        self
    }

    crate::setters::setters! {
        /// Sets the completion vector.
        comp_vector: u32,
        /// Sets the program's own value the CQ and its events carry.
        context: u64,
        /// Sets the completion fields to report.
        wc_flags: WcExFlags,
    }
}

impl Context {
    /// Creates a CQ with room for at least `cqe` completions, like
    /// `ibv_create_cq`, and `ibv_create_cq_ex` with
    /// [`CqOptions::wc_flags`]: every CQ is polled with
    /// [`CompletionQueue::poll`] (`ibv_poll_cq`) or in
    /// [`CompletionQueue::start_poll`] sessions (`ibv_start_poll`).
    ///
    /// A completion field the provider does not report
    /// ([`WcExFlags`]: completion timestamps on rxe) fails with
    /// [`ErrorKind::UnsupportedProvider`] (`EOPNOTSUPP`).
    ///
    /// Size it for every completion the program may leave unpolled: a
    /// send or receive queue slot is free again once its completion is
    /// written, not once it is polled, so posts that only wait for queue
    /// room can outrun the pollers. A completion the CQ has no room for is
    /// lost, and the device reports
    /// [`AsyncEventType::CQ_ERR`](crate::AsyncEventType::CQ_ERR)
    /// (rxe: `rxe_cq_post`; the verbs contract leaves the sizing to the
    /// program).
    #[doc(alias = "ibv_create_cq")]
    #[doc(alias = "ibv_create_cq_ex")]
    pub fn create_cq(&self, cqe: u32, opts: CqOptions<'_>) -> Result<CompletionQueue> {
        self.create_cq_with(cqe, opts, None)
    }

    /// [`Context::create_cq`] with a driver's own attributes, checked by
    /// the provider's API that asks for them.
    pub(crate) fn create_cq_with(
        &self,
        cqe: u32,
        opts: CqOptions<'_>,
        driver: Option<crate::providers::DriverCqAttrs>,
    ) -> Result<CompletionQueue> {
        let ctx = &self.inner;
        let unknown = opts.wc_flags - WcExFlags::KNOWN;
        if !unknown.is_empty() {
            return Err(Error::new(
                "ibv_create_cq_ex",
                ErrorKind::InvalidArgument,
                format!(
                    "wc_flags {:#x}: bits {:#x} are no IBV_WC_EX_WITH_* flag",
                    opts.wc_flags.bits(),
                    unknown.bits()
                ),
            ));
        }
        if opts.comp_vector >= ctx.num_comp_vectors.max(1) {
            return Err(Error::new(
                "ibv_create_cq",
                ErrorKind::InvalidArgument,
                format!(
                    "completion vector {} does not exist (the device has {})",
                    opts.comp_vector, ctx.num_comp_vectors
                ),
            ));
        }
        if let Some(ch) = opts.channel {
            if !Arc::ptr_eq(&ch.inner.ctx, ctx) {
                return Err(Error::new(
                    "ibv_create_cq",
                    ErrorKind::InvalidArgument,
                    "the completion channel belongs to another context",
                ));
            }
        }
        if let Some(pd) = opts.parent_domain {
            if !Arc::ptr_eq(&pd.inner.ctx, ctx) {
                return Err(Error::new(
                    "ibv_create_cq_ex",
                    ErrorKind::InvalidArgument,
                    "the parent domain belongs to another context",
                ));
            }
        }
        let domain = opts.parent_domain.and_then(|pd| pd.domain.clone());
        let request = CqRequest {
            pd: match opts.parent_domain {
                None => CqPd::None,
                Some(pd) if pd.is_parent_domain() => CqPd::ParentDomain,
                Some(_) => CqPd::ProtectionDomain,
            },
            cqe,
            comp_vector: opts.comp_vector,
            wc_flags: opts.wc_flags,
            driver,
        };
        // libibverbs `ibv_cmd_create_cq_ex`: either timestamp asks the
        // kernel for completion timestamps (ioctl only: the write fallback
        // has no flags, and libmlx5 creates the CQ without them there,
        // `CREATE_CQ_CMD_FLAGS_TS_IGNORED_EX`).
        let create_flags = if opts.wc_flags.intersects(WcExFlags::TIMESTAMPS) {
            abi::IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
        } else {
            0
        };
        let any_domain = domain
            .as_deref()
            .map(DomainInner::as_any)
            .unwrap_or_default();
        let (mut plan, shared) = ctx.provider.plan_cq(ctx.device(), &request, any_domain)?;
        let reserved = ctx.events.reserve();
        let user_handle = reserved.handle();
        let (handle, actual) = ctx
            .ioctl_or_write(
                Verb::CreateCq,
                &mut plan,
                |plan| {
                    // Keeps the async event fd open until the command is done.
                    let fds = ctx.enter()?;
                    let mut resp_cqe = 0u32;
                    let mut cmd =
                        ctx.ioctl_cmd(abi::UVERBS_OBJECT_CQ, abi::UVERBS_METHOD_CQ_CREATE);
                    let h = cmd.new_object(abi::UVERBS_ATTR_CREATE_CQ_HANDLE);
                    cmd.input_u32(abi::UVERBS_ATTR_CREATE_CQ_CQE, cqe);
                    cmd.input_u64(abi::UVERBS_ATTR_CREATE_CQ_USER_HANDLE, user_handle);
                    if let Some(ch) = opts.channel {
                        cmd.fd(abi::UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, ch.inner.fd.as_fd());
                    }
                    cmd.input_u32(abi::UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, opts.comp_vector);
                    if create_flags != 0 {
                        cmd.input_u32(abi::UVERBS_ATTR_CREATE_CQ_FLAGS, create_flags);
                    }
                    cmd.output(abi::UVERBS_ATTR_CREATE_CQ_RESP_CQE, resp_cqe.as_mut_bytes());
                    // Optional, as libibverbs sends it: older kernels lack it;
                    // but not for an imported context, whose CQs must
                    // report to its own async fd (`fallback_require_ioctl`).
                    cmd.fd(abi::UVERBS_ATTR_CREATE_CQ_EVENT_FD, fds.async_fd());
                    if !ctx.imported {
                        cmd.optional();
                    }
                    let (drv_in, drv_out) = plan.driver_bufs();
                    cmd.driver_in(drv_in).driver_out(drv_out);
                    ctx.ioctl(&mut cmd)?;
                    let handle = cmd.new_handle(h);
                    drop(cmd);
                    Ok((handle, resp_cqe))
                },
                |plan| {
                    let mut req = abi::IbUverbsCreateCq::new_zeroed();
                    req.user_handle = user_handle;
                    req.cqe = cqe;
                    req.comp_vector = opts.comp_vector;
                    req.comp_channel = opts.channel.map_or(-1, |ch| {
                        use std::os::fd::AsRawFd;
                        ch.inner.fd.as_fd().as_raw_fd()
                    });
                    let mut resp = abi::IbUverbsCreateCqResp::new_zeroed();
                    let (drv_in, drv_out) = plan.driver_bufs();
                    ctx.write_with_resp(
                        abi::IB_USER_VERBS_CMD_CREATE_CQ,
                        req.as_bytes(),
                        drv_in,
                        resp.as_mut_bytes(),
                        drv_out,
                    )?;
                    Ok((resp.cq_handle, resp.cqe))
                },
            )
            .map_err(|e| {
                let err = Error::sys("UVERBS_METHOD_CQ_CREATE", e);
                if e == Errno::EINVAL {
                    err.with_detail(format!("cqe {cqe} is 0 or above the device's max_cqe"))
                } else {
                    err
                }
            })?;
        let events = Arc::new(EventCounts::default());
        let inner = Owned::new(CqInner {
            ctx: ctx.clone(),
            handle,
            user_handle,
            events: events.clone(),
            children: Arc::new(AtomicUsize::new(0)),
            _channel: opts.channel.map(|c| c.inner.clone()),
            _domain: domain,
            context: opts.context,
            shared,
        });
        let target = Target::new(events, &inner)
            .facts(inner.handle, inner.context)
            .on_completion(inner.shared.completion_hook());
        ctx.events.insert(reserved, target);
        // From here on, dropping `inner` destroys the kernel CQ.
        let ring = ctx.provider.finish_cq(
            ctx.device(),
            plan,
            &inner.shared,
            &CqCreated {
                handle,
                cqe: actual,
            },
        )?;
        let polled = PollBuf::new(opts.wc_flags, inner.shared.clean_flag());
        Ok(CompletionQueue {
            inner,
            ring,
            cqe: actual,
            wc_flags: opts.wc_flags,
            polled,
        })
    }
}

impl CompletionQueue {
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// How many times the CQ's event counts were locked (feature
    /// `test-utils`: tests of the acknowledgement paths count them).
    #[cfg(feature = "test-utils")]
    #[doc(hidden)]
    pub fn event_count_locks(&self) -> u32 {
        self.inner
            .events
            .locks
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The value given as [`CqOptions::context`] (`cq->cq_context`).
    pub fn context(&self) -> u64 {
        self.inner.context
    }

    /// The number of completions the CQ holds (what the kernel granted).
    pub fn cqe(&self) -> u32 {
        self.cqe
    }

    /// The completion fields it was created with ([`CqOptions::wc_flags`]).
    pub fn wc_flags(&self) -> WcExFlags {
        self.wc_flags
    }

    /// Polls up to `out.len()` completions, like `ibv_poll_cq`; returns how
    /// many were written. No system call and no allocation. Completions a
    /// [`CompletionQueue::start_poll`] session left unread come first.
    #[doc(alias = "ibv_poll_cq")]
    #[inline(always)]
    pub fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        if self.polled.has_unread() {
            return self.polled.poll_unread(&mut self.ring, out);
        }
        self.ring.poll(out)
    }

    /// The ring and the session buffer, borrowed apart (`cq_ex.rs`).
    #[inline(always)]
    pub(crate) fn ring_and_poll_buf(&mut self) -> (&mut AnyCq, &mut PollBuf) {
        (&mut self.ring, &mut self.polled)
    }

    /// Arms the CQ: the next completion (or the next solicited one) queues an
    /// event on its channel, like `ibv_req_notify_cq`. Poll again after
    /// arming: completions that arrived before it raise no event, and
    /// neither do those a polling session ([`CompletionQueue::start_poll`])
    /// took off the ring and left unread (a device may raise one at once
    /// for completions still in its ring; the CQ holds those apart), so
    /// the poll after arming is what finds them.
    #[doc(alias = "ibv_req_notify_cq")]
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        let inner = &self.inner;
        match self.ring.req_notify(
            &inner.shared,
            inner.ctx.device(),
            inner.handle,
            solicited_only,
        ) {
            Ok(()) => Ok(()),
            Err(e) => Err(arm_failed(e)),
        }
    }

    /// Resizes the CQ to hold at least `cqe` completions, like
    /// `ibv_resize_cq`: the `RESIZE_CQ` write command (the kernel has no
    /// ioctl method for it), after which [`CompletionQueue::cqe`] is the
    /// size the kernel granted (rounded up by the driver). Completions
    /// waiting in the CQ stay and are polled after it, in order.
    ///
    /// # Errors
    ///
    /// - `EINVAL` from the kernel when `cqe` is 0, above the device's
    ///   `max_cqe`, or below the number of completions waiting in the CQ
    ///   (rxe's `rxe_cq_chk_attr`): poll some first. The CQ is unchanged.
    /// - [`ErrorKind::UnsupportedProvider`] (`EOPNOTSUPP`) on mlx5, whose
    ///   resize (a new CQE buffer the waiting CQEs are copied into) is not
    ///   implemented yet; nothing is sent and the CQ is unchanged.
    /// - On rxe, a failure to map the new ring after the kernel resized the
    ///   CQ (the error says so): the CQ then reports no further completion
    ///   and should be destroyed, as rdma-core's rxe is left without a ring.
    #[doc(alias = "ibv_resize_cq")]
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        let inner = &self.inner;
        let ctx = &inner.ctx;
        let handle = inner.handle;
        let mut granted = None;
        let mut run = |drv_in: &[u8], drv_out: &mut [u8]| -> Result<()> {
            let mut req = abi::IbUverbsResizeCq::new_zeroed();
            req.cq_handle = handle;
            req.cqe = cqe;
            let mut resp = abi::IbUverbsResizeCqResp::new_zeroed();
            ctx.write_with_resp(
                abi::IB_USER_VERBS_CMD_RESIZE_CQ,
                req.as_bytes(),
                drv_in,
                resp.as_mut_bytes(),
                drv_out,
            )
            .map_err(|e| {
                let err = Error::sys("IB_USER_VERBS_CMD_RESIZE_CQ", e);
                if e == Errno::EINVAL {
                    err.with_detail(format!(
                        "cqe {cqe} is 0, above the device's max_cqe, or below the number of \
                         completions waiting in the CQ"
                    ))
                } else {
                    err
                }
            })?;
            granted = Some(resp.cqe);
            Ok(())
        };
        self.ring.resize(&inner.shared, ctx.device(), &mut run)?;
        if let Some(n) = granted {
            self.cqe = n;
        }
        Ok(())
    }

    /// Acknowledges `n` completion events left unacknowledged with
    /// [`CqEvent::defer_ack`](crate::CqEvent::defer_ack), like
    /// `ibv_ack_cq_events(cq, n)`; from any thread. `InvalidArgument` (and
    /// nothing acknowledged) when fewer than `n` are deferred.
    #[doc(alias = "ibv_ack_cq_events")]
    pub fn ack_events(&self, n: u32) -> Result<()> {
        ack_deferred(
            &self.inner.events,
            Stream::Completion,
            n,
            "ibv_ack_cq_events",
        )
    }

    /// Completion events deferred with
    /// [`CqEvent::defer_ack`](crate::CqEvent::defer_ack) and not yet
    /// acknowledged.
    pub fn deferred_events(&self) -> u32 {
        self.inner.events.deferred(Stream::Completion)
    }

    /// Acknowledges `n` async events of this CQ left unacknowledged with
    /// [`AsyncEvent::defer_ack`](crate::AsyncEvent::defer_ack), from any
    /// thread (libibverbs acknowledges async events one at a time:
    /// `ibv_ack_async_event`).
    pub fn ack_async_events(&self, n: u32) -> Result<()> {
        ack_deferred(&self.inner.events, Stream::Async, n, "ibv_ack_async_event")
    }

    /// Async events of this CQ deferred and not yet acknowledged.
    pub fn deferred_async_events(&self) -> u32 {
        self.inner.events.deferred(Stream::Async)
    }

    /// Destroys the CQ, like `ibv_destroy_cq`.
    ///
    /// Fails with `EBUSY` while QPs use it, or while the calling thread holds
    /// an unacknowledged event of it. Events held by other threads are waited
    /// for: the destroy returns once they are acknowledged (use
    /// [`CompletionQueue::try_destroy`] where that must not block). On any
    /// failure the CQ comes back in the error, unchanged: it can still be
    /// polled, and destroyed again.
    ///
    /// Dropping the handle instead destroys the CQ when its last reference
    /// goes (QPs and events hold one), ignoring errors; that drop waits only
    /// for other threads to finish reads of its events already in progress.
    #[doc(alias = "ibv_destroy_cq")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::Wait)
    }

    /// [`CompletionQueue::destroy`] that never waits for events other
    /// threads hold: it fails with `EAGAIN` (and gives the CQ back) instead.
    /// For async code, which must not block an executor thread.
    pub fn try_destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::Refuse)
    }

    /// [`CompletionQueue::destroy`] in libibverbs' form (`ibv_destroy_cq`), for callers that
    /// acknowledge by count from other threads through
    /// [`CompletionQueue::event_acks`]: events deferred and not yet acknowledged do
    /// not refuse it. The destroy command runs first; then it waits until
    /// every event the kernel reported for the object is acknowledged,
    /// deferred ones included (forever, as libibverbs, for one nobody
    /// acknowledges). `EBUSY`, the object given back unchanged, as for
    /// [`CompletionQueue::destroy`] (while QPs use it) or while the calling thread holds an event
    /// value of it.
    #[doc(alias = "ibv_destroy_cq")]
    pub fn destroy_awaiting_acks(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::WaitDeferred)
    }

    /// A handle that acknowledges this object's deferred events from any
    /// thread, also while [`CompletionQueue::destroy_awaiting_acks`] waits for them
    /// (see [`EventAcks`](crate::EventAcks)).
    pub fn event_acks(&self) -> crate::EventAcks {
        crate::EventAcks::new(&self.inner.events)
    }

    fn destroy_with(self, pending: Pending) -> Result<(), DestroyError<Self>> {
        let children = &self.inner.children;
        let result = destroy_reachable(
            &self.inner,
            || children.load(Ordering::Acquire),
            pending,
            "ibv_destroy_cq",
        );
        // On success `self` drops here: the kernel CQ is gone first, then
        // the memory the device wrote (`shared`) and the ring.
        result.map_err(|e| DestroyError::new(self, e))
    }
}

/// The error of a refused arm, out of the arm's path (every completion
/// event's; `benches/event-path.sh`).
#[cold]
#[inline(never)]
fn arm_failed(e: Errno) -> Error {
    Error::sys("ibv_req_notify_cq", e)
}
