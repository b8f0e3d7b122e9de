//! CM ids (`struct rdma_cm_id`) and their commands.
//!
//! Each id has a process-unique, non-zero `uid` that the kernel echoes in
//! every event for it (librdmacm passes a pointer there); a global registry
//! maps it back to the id's event counts and the id itself, so events keep
//! finding their id after [`CmId::migrate`] moves it to another channel.
//!
//! Destroy follows `rdma_destroy_id`: `DESTROY_ID` answers with
//! `events_reported`, the number of events `GET_EVENT` handed out for the
//! id, and the destroy returns only once that many were acknowledged. As for
//! the verbs objects (`event_count`), events hold their id alive, a destroy
//! from a thread that holds one of its events fails with `EBUSY`, and events
//! held by other threads are waited for.

use std::{
    collections::HashMap,
    net::SocketAddr,
    os::fd::{AsFd, AsRawFd},
    sync::{atomic::AtomicBool, Arc, Mutex, OnceLock},
    time::Duration,
};

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    context::Context,
    error::{DestroyError, Error, ErrorKind, Result},
    event_count::{
        destroy_reachable, destroy_unreachable, EventCounts, EventObject, Pending, Registry, Target,
    },
    event_registry::Reserved,
    object::{Destroy, Owned},
    sys::Errno,
    AsyncEvent, AsyncEventType, QpType, QueuePair,
};

use super::{
    addr,
    channel::{ChannelInner, EventChannel},
    event::ConnParam,
};

/// The port space of an id (`enum rdma_port_space`): which QP type and which
/// address namespace it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortSpace {
    /// `RDMA_PS_TCP`: reliable connected (RC) QPs, TCP-like ports.
    Tcp,
    /// `RDMA_PS_UDP`: unreliable datagram (UD) QPs, UDP-like ports.
    Udp,
    /// `RDMA_PS_IPOIB`: UD QPs in the IPoIB namespace.
    Ipoib,
    /// `RDMA_PS_IB`: native IB service ids, with the given QP type.
    Ib(QpType),
}

impl PortSpace {
    /// `RDMA_PS_*`.
    pub fn raw(self) -> u16 {
        (match self {
            PortSpace::Tcp => abi::RDMA_PS_TCP,
            PortSpace::Udp => abi::RDMA_PS_UDP,
            PortSpace::Ipoib => abi::RDMA_PS_IPOIB,
            PortSpace::Ib(_) => abi::RDMA_PS_IB,
        }) as u16
    }

    /// The QP type of ids in this port space.
    pub fn qp_type(self) -> QpType {
        match self {
            PortSpace::Tcp => QpType::Rc,
            PortSpace::Udp | PortSpace::Ipoib => QpType::Ud,
            PortSpace::Ib(t) => t,
        }
    }
}

/// The kernel side of an id; the handle and its events hold an `Arc`.
#[derive(Debug)]
pub(crate) struct IdShared {
    /// The channel whose fd the kernel ties the id to (changes on migrate).
    pub(crate) channel: Mutex<Arc<ChannelInner>>,
    pub(crate) kernel_id: u32,
    pub(crate) uid: u64,
    pub(crate) ps: PortSpace,
    pub(crate) qp_type: QpType,
    pub(crate) counts: Arc<EventCounts>,
    pub(crate) context: Mutex<Option<Context>>,
    /// Joined multicast groups: the kernel's id for each join, its flag,
    /// and where the id's QP was attached for it.
    pub(crate) groups: Mutex<HashMap<SocketAddr, super::multicast::Join>>,
    /// Synchronous operation (`id_priv->sync`) and the event kept for the
    /// program (`id->event`).
    pub(crate) sync: Mutex<super::sync::SyncState>,
    /// A CONNECT_RESPONSE this process failed to complete (librdmacm's
    /// `connect_error`): the REJECTED and DISCONNECTED that follow are
    /// dropped.
    pub(crate) connect_error: AtomicBool,
    /// ECE: the local options sent, the remote ones received.
    pub(crate) ece: Mutex<super::ece::EceState>,
    /// A passive endpoint's QP request (`rdma_create_ep` with init attrs):
    /// what [`CmId::get_request`] creates for each new id.
    pub(crate) ep_qp: Mutex<Option<super::ep::EpRequestQp>>,
    /// The resources asked for (a request's id: by the peer) or accepted.
    pub(crate) resources: Mutex<super::resources::Resources>,
}

impl IdShared {
    pub(crate) fn channel(&self) -> Arc<ChannelInner> {
        self.channel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Destroy for IdShared {
    fn destroy_kernel(&self) -> Result<()> {
        destroy_unreachable(self)
    }
}

impl EventObject for IdShared {
    fn counts(&self) -> &EventCounts {
        &self.counts
    }

    fn registry(&self) -> (&Registry, u64) {
        (registry(), self.uid)
    }

    fn destroy_reporting(&self) -> Result<Option<[u32; 2]>> {
        let mut req = abi::RdmaUcmDestroyId::new_zeroed();
        req.id = self.kernel_id;
        let mut resp = abi::RdmaUcmDestroyIdResp::new_zeroed();
        self.channel().command_op(
            abi::RDMA_USER_CM_CMD_DESTROY_ID,
            req.as_bytes(),
            Some(0),
            resp.as_mut_bytes(),
        )?;
        Ok(Some([0, resp.events_reported]))
    }
}

/// Every id of the process by `uid`: rdma_cm events name their id by it,
/// whichever channel they arrive on.
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

fn register(reserved: Reserved<'static>, arc: &Arc<Owned<IdShared>>) {
    registry().insert(reserved, Target::new(arc.counts.clone(), arc));
}

/// An option of a CM id ([`CmId::set_option`], `rdma_set_option`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CmOption {
    /// IP type of service for the connection (`RDMA_OPTION_ID_TOS`).
    Tos(u8),
    /// Allow binding to a port in use (`RDMA_OPTION_ID_REUSEADDR`); not on a
    /// listening id.
    ReuseAddr(bool),
    /// Bind IPv6 only, not IPv4-mapped (`RDMA_OPTION_ID_AFONLY`); before the
    /// address is resolved.
    AfOnly(bool),
    /// Local ACK timeout exponent of the QP (`RDMA_OPTION_ID_ACK_TIMEOUT`).
    AckTimeout(u8),
}

/// An rdma_cm id (`struct rdma_cm_id`). See the module documentation of
/// [`crate::cm`].
#[derive(Debug)]
pub struct CmId {
    pub(crate) inner: Arc<Owned<IdShared>>,
}

impl CmId {
    pub(crate) fn wrap(
        channel: Arc<ChannelInner>,
        kernel_id: u32,
        reserved: Reserved<'static>,
        ps: PortSpace,
    ) -> CmId {
        let uid = reserved.handle();
        let inner = Owned::new(IdShared {
            channel: Mutex::new(channel),
            kernel_id,
            uid,
            ps,
            qp_type: ps.qp_type(),
            counts: Arc::new(EventCounts::default()),
            context: Mutex::new(None),
            groups: Mutex::new(HashMap::new()),
            sync: Mutex::new(Default::default()),
            connect_error: AtomicBool::new(false),
            ece: Mutex::new(Default::default()),
            ep_qp: Mutex::new(None),
            resources: Mutex::new(Default::default()),
        });
        register(reserved, &inner);
        CmId { inner }
    }

    pub(crate) fn create(channel: Arc<ChannelInner>, ps: PortSpace) -> Result<CmId> {
        let reserved = registry().reserve();
        let mut req = abi::RdmaUcmCreateId::new_zeroed();
        req.uid = reserved.handle();
        req.ps = ps.raw();
        req.qp_type = ps.qp_type().raw();
        let mut resp = abi::RdmaUcmCreateIdResp::new_zeroed();
        channel
            .command(
                abi::RDMA_USER_CM_CMD_CREATE_ID,
                req.as_bytes(),
                Some(8),
                resp.as_mut_bytes(),
            )
            .map_err(|e| {
                let err = Error::sys("RDMA_USER_CM_CMD_CREATE_ID", e);
                if e == Errno::EINVAL {
                    err.with_detail(format!("port space {ps:?} is not supported"))
                } else {
                    err
                }
            })?;
        Ok(Self::wrap(channel, resp.id, reserved, ps))
    }

    /// The id of a connection request (the kernel created it); its uid is
    /// told to the kernel by [`CmId::accept`].
    pub(crate) fn adopt(
        channel: Arc<ChannelInner>,
        kernel_id: u32,
        ps: PortSpace,
        _qp_type: QpType,
    ) -> CmId {
        Self::wrap(channel, kernel_id, registry().reserve(), ps)
    }

    pub(crate) fn channel(&self) -> Arc<ChannelInner> {
        self.inner.channel()
    }

    fn run(&self, cmd: u32, body: &[u8]) -> Result<()> {
        self.channel().command_op(cmd, body, None, &mut [])
    }

    /// The kernel's id number.
    pub fn kernel_id(&self) -> u32 {
        self.inner.kernel_id
    }

    /// The cookie the kernel echoes in this id's events ([`super::CmEvent::uid`]).
    pub fn uid(&self) -> u64 {
        self.inner.uid
    }

    /// The port space.
    pub fn port_space(&self) -> PortSpace {
        self.inner.ps
    }

    /// The QP type a QP for this id must have.
    pub fn qp_type(&self) -> QpType {
        self.inner.qp_type
    }

    /// Binds to a local address (port 0: any free port), like `rdma_bind_addr`.
    #[doc(alias = "rdma_bind_addr")]
    pub fn bind(&self, local: SocketAddr) -> Result<()> {
        let (a, size) = addr::encode(&local);
        let mut req = abi::RdmaUcmBind::new_zeroed();
        req.id = self.inner.kernel_id;
        req.addr_size = size;
        req.addr = a;
        self.run(abi::RDMA_USER_CM_CMD_BIND, req.as_bytes())
            .map_err(|e| match e.kernel_errno() {
                Some(Errno::EADDRINUSE) => {
                    e.with_detail(format!("{local} is already bound by another id"))
                }
                Some(Errno::EADDRNOTAVAIL) | Some(Errno::ENODEV) => {
                    e.with_detail(format!("no RDMA device has the address {}", local.ip()))
                }
                _ => e,
            })
    }

    /// Resolves `dst` (and binds to `src`, or a local address that reaches
    /// `dst`) to an RDMA address, like `rdma_resolve_addr`; ADDR_RESOLVED or
    /// ADDR_ERROR follows.
    #[doc(alias = "rdma_resolve_addr")]
    pub fn resolve_addr(
        &self,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        timeout: Duration,
    ) -> Result<()> {
        let mut req = abi::RdmaUcmResolveAddr::new_zeroed();
        req.id = self.inner.kernel_id;
        req.timeout_ms = timeout.as_millis().min(u32::MAX as u128) as u32;
        if let Some(s) = src {
            let (a, size) = addr::encode(&s);
            req.src_addr = a;
            req.src_size = size;
        }
        let (a, size) = addr::encode(&dst);
        req.dst_addr = a;
        req.dst_size = size;
        self.run(abi::RDMA_USER_CM_CMD_RESOLVE_ADDR, req.as_bytes())?;
        self.sync_wait("rdma_resolve_addr", None)
    }

    /// Resolves the route to the resolved address, like
    /// `rdma_resolve_route`; ROUTE_RESOLVED or ROUTE_ERROR follows.
    #[doc(alias = "rdma_resolve_route")]
    pub fn resolve_route(&self, timeout: Duration) -> Result<()> {
        let mut req = abi::RdmaUcmResolveRoute::new_zeroed();
        req.id = self.inner.kernel_id;
        req.timeout_ms = timeout.as_millis().min(u32::MAX as u128) as u32;
        self.run(abi::RDMA_USER_CM_CMD_RESOLVE_ROUTE, req.as_bytes())?;
        self.sync_wait("rdma_resolve_route", None)
    }

    /// Listens for connection requests, like `rdma_listen` (`backlog` 0:
    /// the kernel's default, `net.rdma_ucm.max_backlog`).
    #[doc(alias = "rdma_listen")]
    pub fn listen(&self, backlog: u32) -> Result<()> {
        let mut req = abi::RdmaUcmListen::new_zeroed();
        req.id = self.inner.kernel_id;
        req.backlog = backlog;
        self.run(abi::RDMA_USER_CM_CMD_LISTEN, req.as_bytes())
    }

    /// Connects (or, in UD port spaces, performs the SIDR exchange), like
    /// `rdma_connect`; `param.qp_num` is the local QP (see
    /// [`CmId::connect_qp`]). CONNECT_RESPONSE (a QP the CM does not own),
    /// ESTABLISHED (UD), REJECTED, UNREACHABLE or CONNECT_ERROR follows.
    #[doc(alias = "rdma_connect")]
    pub fn connect(&self, param: &ConnParam) -> Result<()> {
        self.connect_cmd(param)?;
        self.sync_wait("rdma_connect", None)
    }

    /// The CONNECT command alone, with the local ECE options.
    pub(crate) fn connect_cmd(&self, param: &ConnParam) -> Result<()> {
        let op = "RDMA_USER_CM_CMD_CONNECT";
        let mut req = abi::RdmaUcmConnect::new_zeroed();
        req.conn_param = self.connect_param(param)?.to_abi(op)?;
        req.id = self.inner.kernel_id;
        let ece = self.ece_state();
        req.ece.vendor_id = ece.local.vendor_id;
        req.ece.attr_mod = ece.local.options;
        self.run(abi::RDMA_USER_CM_CMD_CONNECT, req.as_bytes())
    }

    /// Accepts a connection request on the id from a CONNECT_REQUEST event,
    /// like `rdma_accept`: the kernel sends the REP (UD: the SIDR REP) and
    /// from now on reports this id's events. Move the QP to RTS first
    /// ([`CmId::accept_qp`] does both).
    #[doc(alias = "rdma_accept")]
    pub fn accept(&self, param: &ConnParam) -> Result<()> {
        self.accept_cmd(param)?;
        if self.qp_type() == QpType::Ud {
            return Ok(());
        }
        self.sync_wait("rdma_accept", None)
    }

    /// The ACCEPT command alone, with the ECE answer (the peer's vendor,
    /// the local options, as librdmacm's `ucma_copy_ece_param_to_kern_rep`).
    pub(crate) fn accept_cmd(&self, param: &ConnParam) -> Result<()> {
        let op = "RDMA_USER_CM_CMD_ACCEPT";
        let mut req = abi::RdmaUcmAccept::new_zeroed();
        req.uid = self.inner.uid;
        req.conn_param = self.accept_param(param)?.to_abi(op)?;
        req.id = self.inner.kernel_id;
        let ece = self.ece_state();
        req.ece.vendor_id = ece.remote.vendor_id;
        req.ece.attr_mod = ece.local.options;
        self.run(abi::RDMA_USER_CM_CMD_ACCEPT, req.as_bytes())
    }

    /// The active side's last step after CONNECT_RESPONSE (QP in RTS): an
    /// ACCEPT without parameters, which makes the kernel send the RTU, like
    /// `rdma_establish` (librdmacm's `ucma_complete`).
    #[doc(alias = "rdma_establish")]
    pub fn establish(&self) -> Result<()> {
        let mut req = abi::RdmaUcmAccept::new_zeroed();
        req.id = self.inner.kernel_id;
        self.run(abi::RDMA_USER_CM_CMD_ACCEPT, req.as_bytes())
    }

    /// Rejects a connection request, like `rdma_reject`; the peer sees
    /// REJECTED with status 28 (consumer reject) and this private data.
    #[doc(alias = "rdma_reject")]
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        self.reject_with_reason(private_data, 0)
    }

    /// REJECT with a reason for the kernel (0: the consumer's own, as
    /// `rdma_reject`).
    pub(crate) fn reject_with_reason(&self, private_data: &[u8], reason: u8) -> Result<()> {
        let op = "RDMA_USER_CM_CMD_REJECT";
        let mut req = abi::RdmaUcmReject::new_zeroed();
        if private_data.len() > req.private_data.len() {
            return Err(Error::new(
                op,
                ErrorKind::InvalidArgument,
                "at most 256 bytes of private data",
            ));
        }
        req.id = self.inner.kernel_id;
        req.private_data[..private_data.len()].copy_from_slice(private_data);
        req.private_data_len = private_data.len() as u8;
        req.reason = reason;
        self.run(abi::RDMA_USER_CM_CMD_REJECT, req.as_bytes())
    }

    /// Disconnects, like `rdma_disconnect` (move the QP to ERR first, or use
    /// [`CmId::disconnect_qp`]); both sides see DISCONNECTED.
    #[doc(alias = "rdma_disconnect")]
    pub fn disconnect(&self) -> Result<()> {
        let mut req = abi::RdmaUcmDisconnect::new_zeroed();
        req.id = self.inner.kernel_id;
        self.run(abi::RDMA_USER_CM_CMD_DISCONNECT, req.as_bytes())?;
        self.sync_wait("rdma_disconnect", None)
    }

    /// Sets an option of the id, like `rdma_set_option`.
    #[doc(alias = "rdma_set_option")]
    pub fn set_option(&self, option: CmOption) -> Result<()> {
        // The kernel copies `optlen` bytes from the address in `optval`
        // during the write (ucma.c `ucma_set_option`); both live until then.
        let (level, name, value): (u32, u32, [u8; 4]) = match option {
            CmOption::Tos(tos) => (abi::RDMA_OPTION_ID, abi::RDMA_OPTION_ID_TOS, [tos, 0, 0, 0]),
            CmOption::ReuseAddr(on) => (
                abi::RDMA_OPTION_ID,
                abi::RDMA_OPTION_ID_REUSEADDR,
                i32::from(on).to_ne_bytes(),
            ),
            CmOption::AfOnly(on) => (
                abi::RDMA_OPTION_ID,
                abi::RDMA_OPTION_ID_AFONLY,
                i32::from(on).to_ne_bytes(),
            ),
            CmOption::AckTimeout(t) => (
                abi::RDMA_OPTION_ID,
                abi::RDMA_OPTION_ID_ACK_TIMEOUT,
                [t, 0, 0, 0],
            ),
        };
        // TOS and the ACK timeout are a u8 to the kernel, the flags an int.
        let len = match option {
            CmOption::Tos(_) | CmOption::AckTimeout(_) => 1,
            CmOption::ReuseAddr(_) | CmOption::AfOnly(_) => 4,
        };
        let mut req = abi::RdmaUcmSetOption::new_zeroed();
        req.optval = value.as_ptr() as u64;
        req.id = self.inner.kernel_id;
        req.level = level;
        req.optname = name;
        req.optlen = len;
        self.run(abi::RDMA_USER_CM_CMD_SET_OPTION, req.as_bytes())
            .map_err(|e| match e.kernel_errno() {
                Some(crate::sys::Errno::EINVAL) => e.with_detail(format!(
                    "the kernel refused {option:?} in the id's current state (e.g. \
                     REUSEADDR on a listening id, AF-only once the address is resolved)"
                )),
                _ => e,
            })
    }

    /// Forwards a QP async event to the CM, like `rdma_notify`: with
    /// [`AsyncEventType::COMM_EST`] the passive side becomes ESTABLISHED when
    /// data arrived before the RTU (the kernel fails with `EISCONN` when it
    /// already is), with [`AsyncEventType::PATH_MIG`] the CM loads the
    /// alternate path. The kernel takes no other type, and none before the
    /// id has a connection (`EINVAL`; `drivers/infiniband/core/cma.c`
    /// `rdma_notify`, `cm.c` `ib_cm_notify`). See also
    /// [`CmId::forward_event`].
    #[doc(alias = "rdma_notify")]
    pub fn notify(&self, event: AsyncEventType) -> Result<()> {
        let mut req = abi::RdmaUcmNotify::new_zeroed();
        req.id = self.inner.kernel_id;
        req.event = event.0;
        self.run(abi::RDMA_USER_CM_CMD_NOTIFY, req.as_bytes())
            .map_err(|e| match e.kernel_errno() {
                Some(Errno::EINVAL) => e.with_detail(format!(
                    "the CM takes only COMM_EST and PATH_MIG ({event:?} given), and only once \
                     the id is connecting or connected"
                )),
                Some(Errno::EISCONN) => {
                    e.with_detail("the connection is already established (COMM_EST came late)")
                }
                _ => e,
            })
    }

    /// Forwards `event` to the CM if it is one the CM needs and it is about
    /// `qp` (this id's QP): `COMM_EST` (data arrived before the RTU) or
    /// `PATH_MIG`, as the rdma_cm documentation asks of programs that read
    /// async events. Returns whether it was forwarded; a `COMM_EST` that
    /// finds the connection already established (`EISCONN`) counts as
    /// forwarded.
    pub fn forward_event(&self, event: &AsyncEvent, qp: &QueuePair) -> Result<bool> {
        let kind = event.event_type();
        if !matches!(kind, AsyncEventType::COMM_EST | AsyncEventType::PATH_MIG)
            || !event.is_for_qp(qp)
        {
            return Ok(false);
        }
        match self.notify(kind) {
            Err(e)
                if kind == AsyncEventType::COMM_EST && e.kernel_errno() == Some(Errno::EISCONN) =>
            {
                Ok(true)
            }
            r => r.map(|()| true),
        }
    }

    /// The addresses and device of the id (`QUERY` with `RDMA_USER_CM_QUERY_ADDR`).
    pub fn query_addr(&self) -> Result<AddrInfo> {
        let mut req = abi::RdmaUcmQuery::new_zeroed();
        req.id = self.inner.kernel_id;
        req.option = abi::RDMA_USER_CM_QUERY_ADDR;
        let mut resp = abi::RdmaUcmQueryAddrResp::new_zeroed();
        // Kernels that predate ibdev_index leave it as preset.
        resp.ibdev_index = u32::MAX;
        self.channel().command_op(
            abi::RDMA_USER_CM_CMD_QUERY,
            req.as_bytes(),
            Some(0),
            resp.as_mut_bytes(),
        )?;
        Ok(AddrInfo {
            src: addr::decode_storage(&resp.src_addr),
            dst: addr::decode_storage(&resp.dst_addr),
            node_guid: u64::from_be(resp.node_guid),
            port_num: resp.port_num,
            pkey: u16::from_be(resp.pkey),
            ibdev_index: resp.ibdev_index,
        })
    }

    /// The route (`QUERY_ROUTE`): device, port, addresses and path records.
    pub fn query_route(&self) -> Result<RouteInfo> {
        let mut req = abi::RdmaUcmQuery::new_zeroed();
        req.id = self.inner.kernel_id;
        let mut resp = abi::RdmaUcmQueryRouteResp::new_zeroed();
        resp.ibdev_index = u32::MAX;
        self.channel().command_op(
            abi::RDMA_USER_CM_CMD_QUERY_ROUTE,
            req.as_bytes(),
            Some(0),
            resp.as_mut_bytes(),
        )?;
        let n = (resp.num_paths as usize).min(2);
        Ok(RouteInfo {
            node_guid: u64::from_be(resp.node_guid),
            port_num: resp.port_num,
            src: addr::decode(&resp.src_addr),
            dst: addr::decode(&resp.dst_addr),
            paths: resp.ib_route[..n]
                .iter()
                .map(|p| PathRecord {
                    dgid: crate::Gid(p.dgid),
                    sgid: crate::Gid(p.sgid),
                    pkey: u16::from_be(p.pkey),
                    mtu: p.mtu,
                    hop_limit: p.hop_limit,
                    traffic_class: p.traffic_class,
                    sl: p.sl,
                    rate: p.rate,
                    packet_life_time: p.packet_life_time,
                })
                .collect(),
            ibdev_index: resp.ibdev_index,
        })
    }

    /// The verbs context of the id's device (bound, resolved, or from a
    /// connection request), as librdmacm's `id->verbs`: one context per
    /// device for every id of the process, whatever its channel, so the
    /// async events of all QPs created for ids arrive on one fd per
    /// device. QPs for the id are created on it.
    pub fn context(&self) -> Result<Context> {
        if let Some(c) = self
            .inner
            .context
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return Ok(c);
        }
        let a = self.query_addr()?;
        if a.node_guid == 0 {
            return Err(Error::new(
                "rdma_cm id's verbs device",
                ErrorKind::NoDevice,
                "the id is not bound to a device yet: bind it to a local address, resolve \
                 an address, or use the id of a CONNECT_REQUEST",
            ));
        }
        let ctx = self.channel().context_for(a.node_guid, a.ibdev_index)?;
        *self.inner.context.lock().unwrap_or_else(|p| p.into_inner()) = Some(ctx.clone());
        Ok(ctx)
    }

    /// Moves the id (and its queued events) to another channel, like
    /// `rdma_migrate_id`. Events already delivered stay counted against the
    /// id and may be acknowledged at any time.
    #[doc(alias = "rdma_migrate_id")]
    pub fn migrate(&self, to: &EventChannel) -> Result<()> {
        let from = self.channel();
        let mut req = abi::RdmaUcmMigrateId::new_zeroed();
        req.id = self.inner.kernel_id;
        req.fd = from.fd.as_fd().as_raw_fd() as u32;
        let mut resp = abi::RdmaUcmMigrateResp::new_zeroed();
        // Hold the channel slot so no command goes to the old fd meanwhile.
        let mut slot = self.inner.channel.lock().unwrap_or_else(|p| p.into_inner());
        to.inner.command_op(
            abi::RDMA_USER_CM_CMD_MIGRATE_ID,
            req.as_bytes(),
            Some(0),
            resp.as_mut_bytes(),
        )?;
        *slot = to.inner.clone();
        Ok(())
    }

    /// Destroys the id, like `rdma_destroy_id`: returns once every event the
    /// kernel reported for it has been acknowledged. Fails with `EBUSY` when
    /// the calling thread holds one of its events; waits for events other
    /// threads hold ([`CmId::try_destroy`] does not). On failure the id
    /// comes back in the error. (Dropping the id destroys it when its last
    /// event is acknowledged, ignoring errors; that drop waits only for
    /// reads of its events other threads have in progress.)
    #[doc(alias = "rdma_destroy_id")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::Wait)
    }

    /// [`CmId::destroy`] that fails with `EAGAIN` instead of waiting for
    /// events other threads hold.
    pub fn try_destroy(self) -> Result<(), DestroyError<Self>> {
        self.destroy_with(Pending::Refuse)
    }

    fn destroy_with(self, pending: Pending) -> Result<(), DestroyError<Self>> {
        destroy_reachable(&self.inner, || 0, pending, "rdma_destroy_id")
            .map_err(|e| DestroyError::new(self, e))
    }
}

/// What [`CmId::query_addr`] reports (`rdma_ucm_query_addr_resp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddrInfo {
    /// The local address (`None` when unbound or not IP).
    pub src: Option<SocketAddr>,
    /// The remote address (`None` when unresolved or not IP).
    pub dst: Option<SocketAddr>,
    /// The node GUID of the bound device, host order (0: unbound).
    pub node_guid: u64,
    /// The port of the bound device (0: unbound).
    pub port_num: u8,
    /// The P_Key.
    pub pkey: u16,
    /// The ib device index (`u32::MAX`: not reported).
    pub ibdev_index: u32,
}

/// One path record of a route (`struct ib_user_path_rec`, the fields that matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
#[non_exhaustive]
pub struct PathRecord {
    pub dgid: crate::Gid,
    pub sgid: crate::Gid,
    pub pkey: u16,
    /// `enum ibv_mtu` (1: 256 … 5: 4096).
    pub mtu: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub sl: u8,
    pub rate: u8,
    pub packet_life_time: u8,
}

/// What [`CmId::query_route`] reports.
///
/// librdmacm's `struct rdma_route`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouteInfo {
    /// The node GUID of the device, host order.
    pub node_guid: u64,
    /// The port.
    pub port_num: u8,
    /// The local address.
    pub src: Option<SocketAddr>,
    /// The remote address.
    pub dst: Option<SocketAddr>,
    /// The path records (none before the route is resolved).
    pub paths: Vec<PathRecord>,
    /// The ib device index (`u32::MAX`: not reported).
    pub ibdev_index: u32,
}
