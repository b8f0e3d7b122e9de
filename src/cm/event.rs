//! CM events (`struct rdma_cm_event`): kinds, status, connection and UD
//! parameters, and acknowledgement.
//!
//! The kernel answers `GET_EVENT` with a 336-byte `rdma_ucm_event_resp`:
//! `uid` (the cookie the id was created or accepted with), `id` (the kernel
//! id; for CONNECT_REQUEST the NEW id of the connection), `event`,
//! `status`, a union of `rdma_ucm_conn_param` (connected port spaces) and
//! `rdma_ucm_ud_param` (UD port spaces), and the ECE options. Which member
//! applies follows the id's QP type, as in the kernel's `ucma_create_uevent`.
//!
//! Each event counts against the id it was reported for (for
//! CONNECT_REQUEST: the listener, as the kernel's `events_reported` does),
//! keeps that id alive, and is acknowledged when dropped.

use std::{fmt, marker::PhantomData};

use crate::{abi, event_count::Held, qp_attr::AhAttr, QpType, QueuePair};

use super::{
    channel::IdArc,
    id::{CmId, IdShared},
};

/// The kind of a CM event (`enum rdma_cm_event_type`); numbers this crate
/// does not know are kept in [`CmEventKind::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum CmEventKind {
    AddrResolved,
    AddrError,
    RouteResolved,
    RouteError,
    ConnectRequest,
    ConnectResponse,
    ConnectError,
    Unreachable,
    Rejected,
    Established,
    Disconnected,
    DeviceRemoval,
    MulticastJoin,
    MulticastError,
    AddrChange,
    TimewaitExit,
    /// A number this crate does not know.
    Unknown(u32),
}

impl CmEventKind {
    /// From the kernel's number.
    pub fn from_raw(v: u32) -> Self {
        use CmEventKind::*;
        match v {
            abi::RDMA_CM_EVENT_ADDR_RESOLVED => AddrResolved,
            abi::RDMA_CM_EVENT_ADDR_ERROR => AddrError,
            abi::RDMA_CM_EVENT_ROUTE_RESOLVED => RouteResolved,
            abi::RDMA_CM_EVENT_ROUTE_ERROR => RouteError,
            abi::RDMA_CM_EVENT_CONNECT_REQUEST => ConnectRequest,
            abi::RDMA_CM_EVENT_CONNECT_RESPONSE => ConnectResponse,
            abi::RDMA_CM_EVENT_CONNECT_ERROR => ConnectError,
            abi::RDMA_CM_EVENT_UNREACHABLE => Unreachable,
            abi::RDMA_CM_EVENT_REJECTED => Rejected,
            abi::RDMA_CM_EVENT_ESTABLISHED => Established,
            abi::RDMA_CM_EVENT_DISCONNECTED => Disconnected,
            abi::RDMA_CM_EVENT_DEVICE_REMOVAL => DeviceRemoval,
            abi::RDMA_CM_EVENT_MULTICAST_JOIN => MulticastJoin,
            abi::RDMA_CM_EVENT_MULTICAST_ERROR => MulticastError,
            abi::RDMA_CM_EVENT_ADDR_CHANGE => AddrChange,
            abi::RDMA_CM_EVENT_TIMEWAIT_EXIT => TimewaitExit,
            other => Unknown(other),
        }
    }

    /// The kernel's number.
    pub fn raw(self) -> u32 {
        use CmEventKind::*;
        match self {
            AddrResolved => abi::RDMA_CM_EVENT_ADDR_RESOLVED,
            AddrError => abi::RDMA_CM_EVENT_ADDR_ERROR,
            RouteResolved => abi::RDMA_CM_EVENT_ROUTE_RESOLVED,
            RouteError => abi::RDMA_CM_EVENT_ROUTE_ERROR,
            ConnectRequest => abi::RDMA_CM_EVENT_CONNECT_REQUEST,
            ConnectResponse => abi::RDMA_CM_EVENT_CONNECT_RESPONSE,
            ConnectError => abi::RDMA_CM_EVENT_CONNECT_ERROR,
            Unreachable => abi::RDMA_CM_EVENT_UNREACHABLE,
            Rejected => abi::RDMA_CM_EVENT_REJECTED,
            Established => abi::RDMA_CM_EVENT_ESTABLISHED,
            Disconnected => abi::RDMA_CM_EVENT_DISCONNECTED,
            DeviceRemoval => abi::RDMA_CM_EVENT_DEVICE_REMOVAL,
            MulticastJoin => abi::RDMA_CM_EVENT_MULTICAST_JOIN,
            MulticastError => abi::RDMA_CM_EVENT_MULTICAST_ERROR,
            AddrChange => abi::RDMA_CM_EVENT_ADDR_CHANGE,
            TimewaitExit => abi::RDMA_CM_EVENT_TIMEWAIT_EXIT,
            Unknown(v) => v,
        }
    }

    /// The name librdmacm's `rdma_event_str` gives it.
    #[doc(alias = "rdma_event_str")]
    pub fn as_str(self) -> &'static str {
        use CmEventKind::*;
        match self {
            AddrResolved => "RDMA_CM_EVENT_ADDR_RESOLVED",
            AddrError => "RDMA_CM_EVENT_ADDR_ERROR",
            RouteResolved => "RDMA_CM_EVENT_ROUTE_RESOLVED",
            RouteError => "RDMA_CM_EVENT_ROUTE_ERROR",
            ConnectRequest => "RDMA_CM_EVENT_CONNECT_REQUEST",
            ConnectResponse => "RDMA_CM_EVENT_CONNECT_RESPONSE",
            ConnectError => "RDMA_CM_EVENT_CONNECT_ERROR",
            Unreachable => "RDMA_CM_EVENT_UNREACHABLE",
            Rejected => "RDMA_CM_EVENT_REJECTED",
            Established => "RDMA_CM_EVENT_ESTABLISHED",
            Disconnected => "RDMA_CM_EVENT_DISCONNECTED",
            DeviceRemoval => "RDMA_CM_EVENT_DEVICE_REMOVAL",
            MulticastJoin => "RDMA_CM_EVENT_MULTICAST_JOIN",
            MulticastError => "RDMA_CM_EVENT_MULTICAST_ERROR",
            AddrChange => "RDMA_CM_EVENT_ADDR_CHANGE",
            TimewaitExit => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
            Unknown(_) => "UNKNOWN EVENT",
        }
    }
}

impl fmt::Display for CmEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Connection parameters (`struct rdma_conn_param`): what
/// [`CmId::connect`] and [`CmId::accept`] send, and what connection events
/// report about the peer.
///
/// `ConnParam::new()` (everything zero, as `Default`) and the setters:
/// `ConnParam::new().responder_resources(1).initiator_depth(1).private_data(b"hello")`.
#[doc(alias = "rdma_conn_param")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnParam {
    /// Private data (at most 256 bytes in the ABI; the CM limits it
    /// further: 56 bytes in a REQ, 196 in a REP, 148 in a REJ on IB/RoCE).
    pub private_data: Vec<u8>,
    /// RDMA reads/atomics the local side accepts as responder.
    pub responder_resources: u8,
    /// RDMA reads/atomics the local side issues as initiator.
    pub initiator_depth: u8,
    /// Whether end-to-end flow control is used.
    pub flow_control: u8,
    /// Transport retries (0..=7).
    pub retry_count: u8,
    /// RNR retries (0..=7; 7 = infinite).
    pub rnr_retry_count: u8,
    /// Whether the QP uses an SRQ.
    pub srq: bool,
    /// The QP number (in events: the remote QP number).
    pub qp_num: u32,
    /// The Q_Key (`AF_IB` only).
    pub qkey: u32,
}

impl ConnParam {
    /// No private data, no resources, no retries (as [`Default`]).
    #[inline]
    pub const fn new() -> Self {
        ConnParam {
            private_data: Vec::new(),
            responder_resources: 0,
            initiator_depth: 0,
            flow_control: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            srq: false,
            qp_num: 0,
            qkey: 0,
        }
    }

    /// Sets the private data.
    #[must_use]
    pub fn private_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.private_data = data.into();
        self
    }

    crate::setters::setters! {
        /// Sets the RDMA reads/atomics accepted as responder.
        responder_resources: u8,
        /// Sets the RDMA reads/atomics issued as initiator.
        initiator_depth: u8,
        /// Sets whether end-to-end flow control is used.
        flow_control: u8,
        /// Sets the transport retries.
        retry_count: u8,
        /// Sets the RNR retries.
        rnr_retry_count: u8,
        /// Sets whether the QP uses an SRQ.
        srq: bool,
        /// Sets the QP number.
        qp_num: u32,
        /// Sets the Q_Key (`AF_IB` only).
        qkey: u32,
    }

    /// As `rdma_ucm_conn_param`, `valid` set.
    pub(crate) fn to_abi(&self, op: &'static str) -> crate::Result<abi::RdmaUcmConnParam> {
        use zerocopy::FromZeros;
        let mut p = abi::RdmaUcmConnParam::new_zeroed();
        if self.private_data.len() > p.private_data.len() {
            return Err(crate::Error::new(
                op,
                crate::ErrorKind::InvalidArgument,
                format!(
                    "{} bytes of private data; the ABI carries at most 256",
                    self.private_data.len()
                ),
            ));
        }
        p.private_data[..self.private_data.len()].copy_from_slice(&self.private_data);
        p.private_data_len = self.private_data.len() as u8;
        p.qp_num = self.qp_num;
        p.qkey = self.qkey;
        p.srq = u8::from(self.srq);
        p.responder_resources = self.responder_resources;
        p.initiator_depth = self.initiator_depth;
        p.flow_control = self.flow_control;
        p.retry_count = self.retry_count;
        p.rnr_retry_count = self.rnr_retry_count;
        p.valid = 1;
        Ok(p)
    }

    pub(crate) fn from_abi(p: &abi::RdmaUcmConnParam) -> Self {
        let len = usize::from(p.private_data_len).min(p.private_data.len());
        ConnParam {
            private_data: p.private_data[..len].to_vec(),
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            flow_control: p.flow_control,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            srq: p.srq != 0,
            qp_num: p.qp_num,
            qkey: p.qkey,
        }
    }
}

/// UD parameters of an event (`struct rdma_ud_param`): where to send to
/// reach the peer's UD QP.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdParam {
    /// The remote QP number.
    pub qp_num: u32,
    /// The remote Q_Key.
    pub qkey: u32,
    /// The address vector to the peer (create an AH from it).
    pub ah_attr: AhAttr,
    /// Private data.
    pub private_data: Vec<u8>,
}

impl UdParam {
    pub(crate) fn from_abi(p: &abi::RdmaUcmUdParam) -> Self {
        let len = usize::from(p.private_data_len).min(p.private_data.len());
        UdParam {
            qp_num: p.qp_num,
            qkey: p.qkey,
            ah_attr: AhAttr::from_abi(&p.ah_attr),
            private_data: p.private_data[..len].to_vec(),
        }
    }
}

/// One CM event (`struct rdma_cm_event`), from [`super::EventChannel::get_event`].
///
/// It keeps its id alive and is acknowledged when dropped (or with
/// [`CmEvent::ack`]). An id's destroy waits until every event reported for
/// it is acknowledged; events are not `Send`, so the thread that got one
/// acknowledges it, and a destroy from that thread while it holds one fails
/// with `EBUSY` instead of waiting for itself.
#[must_use = "an event is acknowledged when dropped; inspect it first"]
pub struct CmEvent {
    id: Held<crate::object::Owned<IdShared>>,
    resp: Box<abi::RdmaUcmEventResp>,
    new_id: Option<CmId>,
    _not_send: PhantomData<*const ()>,
}

impl fmt::Debug for CmEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CmEvent")
            .field("kind", &self.kind())
            .field("status", &self.status())
            .field("uid", &self.resp.uid)
            .field("id", &self.resp.id)
            .field("private_data_len", &self.private_data().len())
            .finish_non_exhaustive()
    }
}

impl CmEvent {
    pub(crate) fn new(
        id: Held<crate::object::Owned<IdShared>>,
        resp: Box<abi::RdmaUcmEventResp>,
        new_id: Option<CmId>,
    ) -> Self {
        CmEvent {
            id,
            resp,
            new_id,
            _not_send: PhantomData,
        }
    }

    fn id_arc(&self) -> &IdArc {
        self.id.object()
    }

    /// What happened.
    pub fn kind(&self) -> CmEventKind {
        CmEventKind::from_raw(self.resp.event)
    }

    /// The status: 0, a negative errno (e.g. `-ETIMEDOUT`, `-ECONNRESET`),
    /// or for REJECTED the positive IB CM reject reason (28: consumer reject).
    pub fn status(&self) -> i32 {
        self.resp.status as i32
    }

    /// Whether the event is for `id` (for CONNECT_REQUEST: the listener).
    pub fn is_for(&self, id: &CmId) -> bool {
        std::sync::Arc::ptr_eq(self.id_arc(), &id.inner)
    }

    /// The uid of the id the event is for (see [`CmId::uid`]).
    pub fn uid(&self) -> u64 {
        self.resp.uid
    }

    /// The kernel id from the event (for CONNECT_REQUEST: the new id).
    pub fn kernel_id(&self) -> u32 {
        self.resp.id
    }

    pub(crate) fn is_ud(&self) -> bool {
        self.id_arc().qp_type == QpType::Ud
    }

    /// The connection parameters (connected port spaces): the peer's
    /// private data and QP number, and the resources as seen from here.
    pub fn conn_param(&self) -> Option<ConnParam> {
        conn_param_of(&self.resp, self.is_ud())
    }

    /// The UD parameters (UD port spaces: `RDMA_PS_UDP`, `RDMA_PS_IPOIB`).
    pub fn ud_param(&self) -> Option<UdParam> {
        ud_param_of(&self.resp, self.is_ud())
    }

    /// The private data the peer sent (empty if none).
    pub fn private_data(&self) -> Vec<u8> {
        private_data_of(&self.resp, self.is_ud())
    }

    /// The id the event is for (for CONNECT_REQUEST: the listener), as a
    /// second handle (dropping it does not destroy the id while another
    /// handle or event holds it).
    pub(crate) fn id_handle(&self) -> CmId {
        CmId {
            inner: self.id_arc().clone(),
        }
    }

    /// What librdmacm does with a CONNECT_RESPONSE for an id that has a QP
    /// (`ucma_process_conn_resp_ece` in `rdma_get_cm_event`): checks the
    /// peer's ECE vendor against the local one, moves `qp` to RTR and RTS
    /// and sends the RTU ([`CmId::complete_connect`]); the event then reads
    /// ESTABLISHED (status 0), or CONNECT_ERROR with the failure's negative
    /// errno as status (librdmacm puts -1 there), the QP in ERR and the
    /// REJECTED or DISCONNECTED that follow dropped, as librdmacm's
    /// `connect_error` does. Any other event is left as it is (`Ok`).
    ///
    /// For programs (and the C library) that get events of ids with a QP
    /// from a channel; synchronous ids do it in [`CmId::connect_qp`].
    pub fn complete_connect(&mut self, qp: &QueuePair) -> crate::Result<()> {
        if self.kind() != CmEventKind::ConnectResponse {
            return Ok(());
        }
        let id = self.id_handle();
        let remote = self.resp.ece.vendor_id;
        let result = if remote != 0 && remote != id.local_ece().vendor_id {
            let _ = qp.modify(
                &crate::QpAttr::with_state(crate::QpState::Err),
                crate::QpAttrMask::STATE,
            );
            Err(crate::Error::sys(
                "rdma_cm: complete the connection",
                crate::sys::Errno::EINVAL,
            )
            .with_detail(format!(
                "the peer answered with ECE vendor {remote:#x}, not the local one"
            )))
        } else {
            id.complete_connect(qp)
        };
        match &result {
            Ok(()) => {
                self.resp.event = abi::RDMA_CM_EVENT_ESTABLISHED;
                self.resp.status = 0;
            }
            Err(e) => {
                self.resp.event = abi::RDMA_CM_EVENT_CONNECT_ERROR;
                self.resp.status = (-(e.errno() as i32)) as u32;
                id.inner
                    .connect_error
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        result
    }

    /// The ECE options (`vendor_id`, `attr_mod`).
    pub fn ece(&self) -> (u32, u32) {
        (self.resp.ece.vendor_id, self.resp.ece.attr_mod)
    }

    /// What a synchronous id would keep of this event (a copy, for the C
    /// library's `struct rdma_cm_event` and for programs that keep events
    /// past their acknowledgement).
    pub fn to_sync_event(&self) -> super::SyncEvent {
        super::SyncEvent::of(self)
    }

    /// The raw response, as the kernel wrote it.
    pub fn raw(&self) -> &abi::RdmaUcmEventResp {
        &self.resp
    }

    /// For CONNECT_REQUEST: the new id of the incoming connection (once;
    /// later calls return `None`). Accept or reject it; dropping it
    /// destroys it (the kernel then rejects the connection).
    pub fn take_new_id(&mut self) -> Option<CmId> {
        self.new_id.take()
    }

    /// Acknowledges the event, like `rdma_ack_cm_event`.
    #[doc(alias = "rdma_ack_cm_event")]
    pub fn ack(self) {
        drop(self);
    }
}

/// The `conn` member of an event's param union, for connected port spaces.
pub(crate) fn conn_param_of(resp: &abi::RdmaUcmEventResp, ud: bool) -> Option<ConnParam> {
    if ud {
        return None;
    }
    let (conn, _) = split_param(&resp.param);
    Some(ConnParam::from_abi(&conn))
}

/// The `ud` member, for UD port spaces.
pub(crate) fn ud_param_of(resp: &abi::RdmaUcmEventResp, ud: bool) -> Option<UdParam> {
    ud.then(|| UdParam::from_abi(&resp.param))
}

/// The private data of whichever member applies.
pub(crate) fn private_data_of(resp: &abi::RdmaUcmEventResp, ud: bool) -> Vec<u8> {
    match ud_param_of(resp, ud) {
        Some(u) => u.private_data,
        None => conn_param_of(resp, ud)
            .map(|c| c.private_data)
            .unwrap_or_default(),
    }
}

/// The `conn` member of the param union (a prefix of the `ud` member's bytes).
pub(crate) fn split_param(p: &abi::RdmaUcmUdParam) -> (abi::RdmaUcmConnParam, ()) {
    use zerocopy::{FromBytes, IntoBytes};
    let bytes = p.as_bytes();
    let n = size_of::<abi::RdmaUcmConnParam>();
    match abi::RdmaUcmConnParam::read_from_bytes(&bytes[..n]) {
        Ok(c) => (c, ()),
        Err(_) => unreachable!("conn_param is a prefix of ud_param"),
    }
}

impl Drop for CmEvent {
    fn drop(&mut self) {
        // An untaken new id is destroyed first (it is not counted here);
        // the id's claim acknowledges the event after this.
        drop(self.new_id.take());
    }
}
