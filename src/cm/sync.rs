//! Synchronous ids: `rdma_create_id` with no channel (librdmacm's
//! `id_priv->sync`, `librdmacm/cma.c`).
//!
//! A synchronous id gets a private event channel. Its
//! [`resolve_addr`](CmId::resolve_addr), [`resolve_route`](CmId::resolve_route),
//! [`connect`](CmId::connect) / [`connect_qp`](CmId::connect_qp),
//! [`accept`](CmId::accept) / [`accept_qp`](CmId::accept_qp) (connected
//! port spaces), [`disconnect`](CmId::disconnect) and
//! [`join_multicast`](CmId::join_multicast) then wait for the event that
//! answers them and fail as librdmacm's `ucma_complete` does: `REJECTED` →
//! `ECONNREFUSED`, a negative status → that errno, a positive one → itself.
//! The event stays with the id (C's `id->event`, [`CmId::sync_event`]) until
//! the next such call, a migration or the destroy; it is acknowledged to the
//! kernel as soon as it is read, so a destroy never waits for it.
//!
//! A synchronous listener takes connections with [`CmId::get_request`]:
//! each new id is synchronous too (librdmacm migrates it to a channel of its
//! own) and keeps its CONNECT_REQUEST.

use std::{fmt, sync::Arc};

use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    sys::{Errno, Kernel},
    QueuePair,
};

use super::{
    ece::Ece,
    ep::CmEndpoint,
    event::{self, CmEvent, CmEventKind, ConnParam, UdParam},
    CmId, EventChannel, PortSpace,
};

/// Whether an id is synchronous, and the event it keeps.
#[derive(Debug, Default)]
pub(crate) struct SyncState {
    pub(crate) on: bool,
    pub(crate) event: Option<SyncEvent>,
}

/// The event a synchronous id keeps (C's `id->event`): a copy of what the
/// kernel reported (and librdmacm made of it: a CONNECT_RESPONSE completed
/// with the id's QP reads ESTABLISHED), already acknowledged.
#[derive(Clone, PartialEq, Eq)]
pub struct SyncEvent {
    resp: Box<abi::RdmaUcmEventResp>,
    ud: bool,
}

impl fmt::Debug for SyncEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncEvent")
            .field("kind", &self.kind())
            .field("status", &self.status())
            .field("private_data_len", &self.private_data().len())
            .finish_non_exhaustive()
    }
}

impl SyncEvent {
    pub(crate) fn of(ev: &CmEvent) -> Self {
        SyncEvent {
            resp: Box::new(*ev.raw()),
            ud: ev.is_ud(),
        }
    }

    /// What happened.
    pub fn kind(&self) -> CmEventKind {
        CmEventKind::from_raw(self.resp.event)
    }

    /// The status (see [`CmEvent::status`]).
    pub fn status(&self) -> i32 {
        self.resp.status as i32
    }

    /// The connection parameters (connected port spaces).
    pub fn conn_param(&self) -> Option<ConnParam> {
        event::conn_param_of(&self.resp, self.ud)
    }

    /// The UD parameters (UD port spaces).
    pub fn ud_param(&self) -> Option<UdParam> {
        event::ud_param_of(&self.resp, self.ud)
    }

    /// The private data the peer sent (empty if none).
    pub fn private_data(&self) -> Vec<u8> {
        event::private_data_of(&self.resp, self.ud)
    }

    /// The peer's ECE options.
    pub fn ece(&self) -> Ece {
        Ece::new(self.resp.ece.vendor_id, self.resp.ece.attr_mod)
    }

    /// The raw response, as the kernel wrote it (`event` and `status` as
    /// the processing left them).
    pub fn raw(&self) -> &abi::RdmaUcmEventResp {
        &self.resp
    }
}

/// librdmacm's `ucma_complete` verdict on the event a synchronous call got.
pub(crate) fn verdict(op: &'static str, kind: CmEventKind, status: i32) -> Result<()> {
    if status == 0 {
        return Ok(());
    }
    let errno = if kind == CmEventKind::Rejected {
        Errno::ECONNREFUSED
    } else {
        Errno::from_raw(status.unsigned_abs() as i32)
    };
    Err(Error::sys(op, errno).with_detail(format!("the CM answered {kind} with status {status}")))
}

impl CmId {
    /// Creates a synchronous id, like `rdma_create_id` with a NULL channel
    /// (see the [module documentation](self)).
    #[doc(alias = "rdma_create_id")]
    pub fn create_sync(ps: PortSpace) -> Result<CmId> {
        Self::create_sync_with(crate::sys::linux(), ps)
    }

    /// [`CmId::create_sync`] through a chosen transport.
    pub fn create_sync_with(kernel: Arc<dyn Kernel>, ps: PortSpace) -> Result<CmId> {
        let ch = EventChannel::open_with(kernel)?;
        let id = CmId::create(ch.inner, ps)?;
        id.set_sync(true);
        Ok(id)
    }

    fn set_sync(&self, on: bool) {
        let mut s = self.inner.sync.lock().unwrap_or_else(|p| p.into_inner());
        s.on = on;
        s.event = None;
    }

    /// Whether the id is synchronous ([`CmId::create_sync`]).
    pub fn is_sync(&self) -> bool {
        self.inner.sync.lock().unwrap_or_else(|p| p.into_inner()).on
    }

    /// The event the last synchronous call got (C's `id->event`), if any.
    pub fn sync_event(&self) -> Option<SyncEvent> {
        self.inner
            .sync
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .event
            .clone()
    }

    fn keep_event(&self, ev: Option<SyncEvent>) {
        self.inner
            .sync
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .event = ev;
    }

    /// The private channel of a synchronous id.
    fn sync_channel(&self) -> EventChannel {
        EventChannel {
            inner: self.channel(),
        }
    }

    /// After a command of a synchronous id: waits for its answer, keeps it,
    /// and judges it as `ucma_complete` does; `qp` completes a
    /// CONNECT_RESPONSE. Nothing for other ids.
    pub(crate) fn sync_wait(&self, op: &'static str, qp: Option<&QueuePair>) -> Result<()> {
        if !self.is_sync() {
            return Ok(());
        }
        // The previous event is released first, as librdmacm acks it.
        self.keep_event(None);
        let mut ev = self.sync_channel().get_event()?;
        if let Some(qp) = qp {
            // A failure is in the event (CONNECT_ERROR and its status),
            // judged below like any other.
            let _ = ev.complete_connect(qp);
        }
        let (kind, status) = (ev.kind(), ev.status());
        self.keep_event(Some(SyncEvent::of(&ev)));
        drop(ev);
        verdict(op, kind, status)
    }

    /// Moves a synchronous id to `to` (it becomes asynchronous), or an
    /// asynchronous one to a private channel of its own (it becomes
    /// synchronous), like `rdma_migrate_id` with a channel or with NULL. A
    /// synchronous id's kept event is dropped; `to: None` on a synchronous id
    /// is refused (`EINVAL`).
    #[doc(alias = "rdma_migrate_id")]
    pub fn migrate_to(&self, to: Option<&EventChannel>) -> Result<()> {
        match to {
            Some(ch) => {
                self.migrate(ch)?;
                self.set_sync(false);
            }
            None => {
                if self.is_sync() {
                    return Err(Error::new(
                        "rdma_migrate_id",
                        ErrorKind::InvalidArgument,
                        "the id is synchronous already",
                    ));
                }
                let ch = EventChannel::open_with(self.channel().fd.kernel().clone())?;
                self.migrate(&ch)?;
                self.set_sync(true);
            }
        }
        Ok(())
    }

    /// Waits for the next connection request of a synchronous listener, like
    /// `rdma_get_request`: the new id, synchronous, keeping the
    /// CONNECT_REQUEST ([`CmId::sync_event`]); with the QP of a passive
    /// endpoint ([`super::create_ep`] with QP attributes), created as
    /// `rdma_create_qp` would on the new id.
    ///
    /// Fails with `EINVAL` on an asynchronous id or when another event
    /// arrives (which the listener then keeps, as librdmacm's
    /// `listen->event`), `ECONNREFUSED` for REJECTED, and the status's errno.
    #[doc(alias = "rdma_get_request")]
    pub fn get_request(&self) -> Result<CmEndpoint> {
        let op = "rdma_get_request";
        if !self.is_sync() {
            return Err(Error::new(
                op,
                ErrorKind::InvalidArgument,
                "get_request takes requests of a synchronous listener (CmId::create_sync)",
            ));
        }
        self.keep_event(None);
        let mut ev = self.sync_channel().get_event()?;
        let (kind, status) = (ev.kind(), ev.status());
        let kept = SyncEvent::of(&ev);
        let fail = |e: Error| {
            self.keep_event(Some(kept.clone()));
            Err(e)
        };
        if kind == CmEventKind::Rejected || status != 0 {
            drop(ev);
            return fail(verdict(op, kind, status).unwrap_err());
        }
        let new_id = match (kind, ev.take_new_id()) {
            (CmEventKind::ConnectRequest, Some(id)) => id,
            _ => {
                drop(ev);
                return fail(Error::new(
                    op,
                    ErrorKind::InvalidArgument,
                    format!("the listener got {kind}, not a connection request"),
                ));
            }
        };
        drop(ev);
        // The new id gets a channel of its own (ucma_process_conn_req).
        if let Err(e) = new_id.migrate_to(None) {
            return fail(e);
        }
        new_id.keep_event(Some(kept.clone()));
        let request = self
            .inner
            .ep_qp
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let qp = match request {
            Some(r) => match new_id.create_ep_qp(r.pd.as_ref(), &r.init, None, None, None) {
                Ok(q) => Some(q),
                Err(e) => return fail(e),
            },
            None => None,
        };
        Ok(CmEndpoint { id: new_id, qp })
    }
}
