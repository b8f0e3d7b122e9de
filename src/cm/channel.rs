//! The event channel (`struct rdma_event_channel`): one open
//! `/dev/infiniband/rdma_cm`, the commands written to it, and the events
//! read from it (`rdma_get_cm_event`, `rdma_ack_cm_event`).
//!
//! `RDMA_USER_CM_CMD_GET_EVENT` is a `write()` that blocks in the kernel
//! until an event is queued, or fails with `EAGAIN` on an `O_NONBLOCK` fd
//! (the fd is readable while events are queued). Events are read through
//! `event_fd`, as the verbs event fds are: [`EventChannel::get_event`] is one
//! blocking command, as in librdmacm; the first
//! [`EventChannel::try_get_event`] or timed get switches the fd to
//! `O_NONBLOCK`, after which one channel serves blocking callers,
//! non-blocking callers, callers with a timeout and event loops (`AsFd`) at
//! once.
#![allow(unsafe_code)] // the two calls into the transport's `unsafe fn ucma`

use std::{
    os::fd::{AsFd, BorrowedFd},
    path::Path,
    sync::{atomic::Ordering, Arc, Mutex, MutexGuard, Weak},
    time::Duration,
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::{Context, ContextInner},
    device_list::devices_with,
    error::{Error, ErrorKind, Result},
    event_count::{Lookup, Stream},
    event_fd::{EventFd, Wait},
    object::Owned,
    sys::{Errno, Kernel, UcmaCmd},
};

use super::{
    event::{CmEvent, CmEventKind},
    id::{registry, CmId, IdShared},
};

/// The rdma_cm character device.
pub const RDMA_CM_PATH: &str = "/dev/infiniband/rdma_cm";

/// The name of an `RDMA_USER_CM_CMD_*` command, for errors.
pub(crate) fn cmd_name(cmd: u32) -> &'static str {
    match cmd {
        abi::RDMA_USER_CM_CMD_CREATE_ID => "RDMA_USER_CM_CMD_CREATE_ID",
        abi::RDMA_USER_CM_CMD_DESTROY_ID => "RDMA_USER_CM_CMD_DESTROY_ID",
        abi::RDMA_USER_CM_CMD_BIND_IP => "RDMA_USER_CM_CMD_BIND_IP",
        abi::RDMA_USER_CM_CMD_RESOLVE_IP => "RDMA_USER_CM_CMD_RESOLVE_IP",
        abi::RDMA_USER_CM_CMD_RESOLVE_ROUTE => "RDMA_USER_CM_CMD_RESOLVE_ROUTE",
        abi::RDMA_USER_CM_CMD_QUERY_ROUTE => "RDMA_USER_CM_CMD_QUERY_ROUTE",
        abi::RDMA_USER_CM_CMD_CONNECT => "RDMA_USER_CM_CMD_CONNECT",
        abi::RDMA_USER_CM_CMD_LISTEN => "RDMA_USER_CM_CMD_LISTEN",
        abi::RDMA_USER_CM_CMD_ACCEPT => "RDMA_USER_CM_CMD_ACCEPT",
        abi::RDMA_USER_CM_CMD_REJECT => "RDMA_USER_CM_CMD_REJECT",
        abi::RDMA_USER_CM_CMD_DISCONNECT => "RDMA_USER_CM_CMD_DISCONNECT",
        abi::RDMA_USER_CM_CMD_INIT_QP_ATTR => "RDMA_USER_CM_CMD_INIT_QP_ATTR",
        abi::RDMA_USER_CM_CMD_GET_EVENT => "RDMA_USER_CM_CMD_GET_EVENT",
        abi::RDMA_USER_CM_CMD_GET_OPTION => "RDMA_USER_CM_CMD_GET_OPTION",
        abi::RDMA_USER_CM_CMD_SET_OPTION => "RDMA_USER_CM_CMD_SET_OPTION",
        abi::RDMA_USER_CM_CMD_NOTIFY => "RDMA_USER_CM_CMD_NOTIFY",
        abi::RDMA_USER_CM_CMD_JOIN_IP_MCAST => "RDMA_USER_CM_CMD_JOIN_IP_MCAST",
        abi::RDMA_USER_CM_CMD_LEAVE_MCAST => "RDMA_USER_CM_CMD_LEAVE_MCAST",
        abi::RDMA_USER_CM_CMD_MIGRATE_ID => "RDMA_USER_CM_CMD_MIGRATE_ID",
        abi::RDMA_USER_CM_CMD_QUERY => "RDMA_USER_CM_CMD_QUERY",
        abi::RDMA_USER_CM_CMD_BIND => "RDMA_USER_CM_CMD_BIND",
        abi::RDMA_USER_CM_CMD_RESOLVE_ADDR => "RDMA_USER_CM_CMD_RESOLVE_ADDR",
        abi::RDMA_USER_CM_CMD_JOIN_MCAST => "RDMA_USER_CM_CMD_JOIN_MCAST",
        _ => "RDMA_USER_CM_CMD_(unknown)",
    }
}

/// The open device; ids hold an `Arc` of it (their commands go to its fd).
#[derive(Debug)]
pub(crate) struct ChannelInner {
    /// The rdma_cm fd: commands are written to it, events read from it.
    pub(crate) fd: EventFd,
    /// Contexts given to [`EventChannel::use_context`], kept alive with
    /// the channel.
    pinned: Mutex<Vec<Context>>,
}

/// The verbs contexts rdma_cm ids use, one per device and transport for
/// the whole process, whatever channel an id is on: librdmacm's
/// `cma_dev_array`, whose `verbs` every `id->verbs` of a device points to
/// (`librdmacm/cma.c`, `ucma_get_device`). A QP created for any id of a
/// device thus reports its async events on that one context's fd.
///
/// Held weakly: a context lives while an id, a QP or the program holds it
/// (ids keep theirs once resolved), and the next id opens a new one after
/// that. Keyed by the transport too, so that fake kernels never share.
fn shared_contexts() -> MutexGuard<'static, Vec<(usize, Weak<ContextInner>)>> {
    static CONTEXTS: Mutex<Vec<(usize, Weak<ContextInner>)>> = Mutex::new(Vec::new());
    CONTEXTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The key of a transport in [`shared_contexts`]: its address, which
/// cannot be reused while a context (which holds it) lives.
fn transport_key(kernel: &Arc<dyn Kernel>) -> usize {
    Arc::as_ptr(kernel).cast::<()>() as usize
}

impl ChannelInner {
    /// Writes one command; `response_at` is the offset of the body's
    /// `response` field for commands that answer.
    pub(crate) fn command(
        &self,
        cmd: u32,
        body: &[u8],
        response_at: Option<usize>,
        response: &mut [u8],
    ) -> Result<(), Errno> {
        let mut c = UcmaCmd {
            cmd,
            body,
            response_at,
            response,
        };
        // SAFETY: the rdma_cm requests of this crate carry no address the
        // kernel keeps: besides the response buffer the transport fills in,
        // the only one is SET_OPTION's `optval`, a slice `CmId::set_option`
        // borrows across this synchronous write (`src/cm/id.rs`). `uid`s
        // are opaque numbers the kernel only echoes back.
        unsafe { self.fd.kernel().ucma(self.fd.as_fd(), &mut c) }
    }

    /// [`ChannelInner::command`] with the error naming the command.
    pub(crate) fn command_op(
        &self,
        cmd: u32,
        body: &[u8],
        response_at: Option<usize>,
        response: &mut [u8],
    ) -> Result<()> {
        self.command(cmd, body, response_at, response)
            .map_err(|e| Error::sys(cmd_name(cmd), e))
    }

    /// The verbs context of the device with this node GUID (host order) and
    /// ib device index (`u32::MAX`: unknown): the one every id of the
    /// process uses for it ([`shared_contexts`]), opened if none is open.
    pub(crate) fn context_for(&self, node_guid: u64, ibdev_index: u32) -> Result<Context> {
        let op = "rdma_cm: open the id's verbs device";
        let matches = |guid: u64, index: Option<u32>| {
            guid == node_guid && (ibdev_index == u32::MAX || index.is_none_or(|i| i == ibdev_index))
        };
        let key = transport_key(self.fd.kernel());
        // Held across the open, so that two ids never open one device twice.
        let mut cache = shared_contexts();
        cache.retain(|(_, w)| w.strong_count() > 0);
        let found = cache
            .iter()
            .filter(|(k, _)| *k == key)
            .filter_map(|(_, w)| w.upgrade())
            .find(|c| matches(c.device.node_guid, c.device.index));
        if let Some(inner) = found {
            return Ok(Context::from_inner(inner));
        }
        let devs = devices_with(self.fd.kernel())?;
        let Some(dev) = devs.into_iter().find(|d| matches(d.node_guid, d.index)) else {
            return Err(Error::new(
                op,
                ErrorKind::NoDevice,
                format!(
                    "no verbs device has node GUID {node_guid:016x} (ib device index \
                     {ibdev_index}); is its uverbs node present?"
                ),
            ));
        };
        let ctx = Context::open_device(self.fd.kernel().clone(), dev)?;
        cache.push((key, Arc::downgrade(&ctx.inner)));
        Ok(ctx)
    }
}

/// An rdma_cm event channel (`struct rdma_event_channel`).
///
/// Its gets, `O_NONBLOCK`, `EINTR` and acknowledgement follow [the event
/// rules](crate::events) of every event fd.
#[derive(Debug, Clone)]
pub struct EventChannel {
    pub(crate) inner: Arc<ChannelInner>,
}

/// The channel's fd, to `poll`/`epoll` for readiness before getting an
/// event.
///
/// Never `read` it yourself: a record read that way is an event the kernel
/// counts as delivered and the library never sees, so nobody can
/// acknowledge it. An explicit `destroy()` of its id then waits for it
/// forever (as `rdma_destroy_id` does for an event never acknowledged);
/// `try_destroy()` and dropping the id do not wait.
impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}

impl EventChannel {
    /// Opens `/dev/infiniband/rdma_cm`, like `rdma_create_event_channel`.
    #[doc(alias = "rdma_create_event_channel")]
    pub fn open() -> Result<Self> {
        Self::open_with(crate::sys::linux())
    }

    /// [`EventChannel::open`] through a chosen transport.
    pub fn open_with(kernel: Arc<dyn Kernel>) -> Result<Self> {
        let fd = kernel.open_rdwr(Path::new(RDMA_CM_PATH)).map_err(|e| {
            let err = Error::sys(format!("open {RDMA_CM_PATH}"), e);
            if matches!(e, Errno::ENOENT | Errno::ENODEV | Errno::ENXIO) {
                err.with_detail("is the rdma_ucm module loaded (`modprobe rdma_ucm`)?")
            } else {
                err
            }
        })?;
        Ok(EventChannel {
            inner: Arc::new(ChannelInner {
                fd: EventFd::new(kernel, fd, "rdma_cm event channel"),
                pinned: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Makes every rdma_cm id of the process (on this channel's transport)
    /// use `ctx` for its device from now on, instead of the context
    /// rdma_cm shares otherwise (e.g. to share PDs with QPs created
    /// elsewhere). Ids that already have their context keep it.
    pub fn use_context(&self, ctx: Context) {
        let key = transport_key(self.inner.fd.kernel());
        let guid = ctx.device().node_guid;
        let mut cache = shared_contexts();
        cache.retain(|(k, w)| {
            w.upgrade()
                .is_some_and(|c| !(*k == key && c.device.node_guid == guid))
        });
        cache.push((key, Arc::downgrade(&ctx.inner)));
        // The program's context may be the only holder: keep it alive as
        // long as this channel is, as before.
        self.inner
            .pinned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(ctx);
    }

    /// Waits for the next event, like `rdma_get_cm_event`: a
    /// [`WouldBlock`](crate::ErrorKind::WouldBlock) error at once on a
    /// channel the program made `O_NONBLOCK` with nothing queued (see [the
    /// event rules](crate::events)).
    #[doc(alias = "rdma_get_cm_event")]
    pub fn get_event(&self) -> Result<CmEvent> {
        loop {
            if let Some(ev) = self.read(Wait::Forever)? {
                return Ok(ev);
            }
        }
    }

    /// The next event if one is queued; `Ok(None)` when none is ("would block").
    pub fn try_get_event(&self) -> Result<Option<CmEvent>> {
        self.read(Wait::Never)
    }

    /// Waits at most `timeout` (`None`: forever) for the next event.
    pub fn get_event_timeout(&self, timeout: Option<Duration>) -> Result<Option<CmEvent>> {
        self.read(Wait::timeout(timeout))
    }

    fn read(&self, wait: Wait) -> Result<Option<CmEvent>> {
        let get_event = |k: &dyn Kernel, fd: BorrowedFd<'_>| {
            let req = abi::RdmaUcmGetEvent::new_zeroed();
            let mut resp = Box::new(abi::RdmaUcmEventResp::new_zeroed());
            let mut cmd = UcmaCmd {
                cmd: abi::RDMA_USER_CM_CMD_GET_EVENT,
                body: req.as_bytes(),
                response_at: Some(0),
                response: resp.as_mut_bytes(),
            };
            // SAFETY: GET_EVENT carries no address but its response, which
            // the transport fills in from `resp`.
            unsafe { k.ucma(fd, &mut cmd) }.map(|()| resp)
        };
        self.inner
            .fd
            .next(wait, "RDMA_USER_CM_CMD_GET_EVENT", get_event, |resp| {
                self.deliver(resp)
            })
    }

    /// Turns a read event into a [`CmEvent`]; `None` (after acknowledging it)
    /// when its id is gone or being destroyed, or unknown to this process.
    fn deliver(&self, resp: Box<abi::RdmaUcmEventResp>) -> Option<CmEvent> {
        let kind = CmEventKind::from_raw(resp.event);
        // The id, claimed for this thread; its counts even when it is gone
        // or destroyed.
        let target = if resp.uid == 0 {
            Lookup::Unknown
        } else {
            registry().lookup::<Owned<IdShared>>(resp.uid, Stream::Async)
        };
        let new_id = (kind == CmEventKind::ConnectRequest).then(|| {
            // The kernel created a new id for the connection; it is ours to
            // destroy whatever happens to the event.
            let (ps, qp_type) = match &target {
                Lookup::Live(l) => (l.object().ps, l.object().qp_type),
                _ => (super::PortSpace::Tcp, crate::QpType::Rc),
            };
            CmId::adopt(self.inner.clone(), resp.id, ps, qp_type)
        });
        let remote_ece = super::Ece::new(resp.ece.vendor_id, resp.ece.attr_mod);
        match target {
            Lookup::Live(id) => {
                let obj = id.object();
                if matches!(kind, CmEventKind::Rejected | CmEventKind::Disconnected)
                    && obj.connect_error.load(Ordering::Relaxed)
                {
                    // The connection already failed here (CONNECT_ERROR,
                    // `CmEvent::complete_connect`): what the peer's CM says
                    // after it is not reported (librdmacm's connect_error).
                    return None;
                }
                match (&new_id, kind) {
                    // The peer's ECE options: the new id's for a request
                    // (ucma_process_conn_req), the id's for a response.
                    (Some(n), _) => {
                        n.set_remote_ece(remote_ece);
                        // What the peer asks for, for an accept that
                        // leaves it to the library (ucma_process_conn_req).
                        let (conn, _) = super::event::split_param(&resp.param);
                        n.set_resources(super::resources::Resources {
                            responder_resources: conn.responder_resources,
                            initiator_depth: conn.initiator_depth,
                        });
                    }
                    (None, CmEventKind::ConnectResponse) => {
                        obj.ece.lock().unwrap_or_else(|p| p.into_inner()).remote = remote_ece;
                    }
                    _ => {}
                }
                Some(CmEvent::new(id, resp, new_id))
            }
            Lookup::Detached(counts) => {
                // Its id is being destroyed or gone: acknowledged at once
                // (a connection request's new id is destroyed with it).
                registry().ack_detached(resp.uid, &counts, Stream::Async);
                drop(new_id);
                None
            }
            Lookup::Unknown => None,
        }
    }

    /// Creates an id on this channel, like `rdma_create_id`.
    #[doc(alias = "rdma_create_id")]
    pub fn create_id(&self, ps: super::PortSpace) -> Result<CmId> {
        CmId::create(self.inner.clone(), ps)
    }
}

/// Keeps `Owned` in scope for the event module.
pub(crate) type IdArc = Arc<Owned<IdShared>>;
