//! Endpoints: `rdma_create_ep` and the QPs librdmacm makes for ids
//! (`rdma_create_qp` with no CQs named, `librdmacm/cma.c`:
//! `rdma_create_ep`, `ucma_passive_ep`, `rdma_create_qp_ex`,
//! `ucma_create_cqs`).
//!
//! [`create_ep`] makes a synchronous id from an [`RdmaAddrInfo`]: a
//! passive entry binds it to the source address; an active one resolves
//! the destination and the route (2000 ms each, as librdmacm) and, given
//! QP attributes, creates the id's QP. A passive endpoint keeps the
//! attributes, and [`CmId::get_request`] creates each new id's QP from
//! them.
//!
//! The QP, and the CQs and completion channels made for it when the
//! attributes name none (one channel and one CQ per direction, sized by
//! `max_send_wr` / `max_recv_wr`), are handed back as owned values
//! ([`EpQp`]): the caller keeps them with the id (the C library in
//! `rdma_cm_id`'s `qp`, `send_cq`, `recv_cq`, `send_cq_channel`,
//! `recv_cq_channel`) and destroys them before the id, as
//! `rdma_destroy_ep` does. Without a PD the id's device PD is used
//! ([`CmId::device_pd`], librdmacm's `id->pd`).

use std::{
    sync::{Arc, Mutex, MutexGuard, Weak},
    time::Duration,
};

use crate::{
    error::{Error, ErrorKind, Result},
    object::Owned,
    pd::PdInner,
    sys::Kernel,
    CompletionChannel, CompletionQueue, CqOptions, ProtectionDomain, QpCap, QpInitAttr, QueuePair,
    SharedReceiveQueue,
};

use super::{CmId, RdmaAddrInfo};

/// librdmacm's timeout for the address and route resolution of an active
/// endpoint.
pub const EP_RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);

/// The QP attributes of an endpoint (`struct ibv_qp_init_attr` as
/// `rdma_create_ep` takes it, less the CQs and SRQ, which
/// [`CmId::create_ep_qp`] takes as arguments): `EpQpInit::new(cap)` and the
/// setters.
#[doc(alias = "ibv_qp_init_attr")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EpQpInit {
    /// The queue sizes; `max_send_wr` / `max_recv_wr` also size the CQs made
    /// for the QP.
    pub cap: QpCap,
    /// Generate a completion for every send.
    pub sq_sig_all: bool,
    /// The QP's `qp_context`.
    pub qp_context: u64,
    /// The `cq_context` of the CQs made for the QP (librdmacm passes the
    /// `rdma_cm_id` pointer).
    pub cq_context: u64,
}

impl EpQpInit {
    /// Queue sizes `cap`, no contexts, completions as requested per send.
    pub const fn new(cap: QpCap) -> Self {
        EpQpInit {
            cap,
            sq_sig_all: false,
            qp_context: 0,
            cq_context: 0,
        }
    }

    crate::setters::setters! {
        /// Sets the queue sizes.
        cap: QpCap,
        /// Sets whether every send completes.
        sq_sig_all: bool,
        /// Sets the QP's context.
        qp_context: u64,
        /// Sets the context of the CQs made for the QP.
        cq_context: u64,
    }
}

/// A QP made for an id, with the CQs and channels made for it (`None`
/// where the caller named its own CQ).
#[derive(Debug)]
#[non_exhaustive]
pub struct EpQp {
    /// The QP, in INIT (connected) or RTS (UD), as `rdma_create_qp` leaves it.
    pub qp: QueuePair,
    /// The send CQ made for it (`id->send_cq`).
    pub send_cq: Option<CompletionQueue>,
    /// The receive CQ made for it (`id->recv_cq`).
    pub recv_cq: Option<CompletionQueue>,
    /// The send CQ's channel (`id->send_cq_channel`).
    pub send_channel: Option<CompletionChannel>,
    /// The receive CQ's channel (`id->recv_cq_channel`).
    pub recv_channel: Option<CompletionChannel>,
}

/// An id with the QP made for it, from [`create_ep`] and
/// [`CmId::get_request`].
#[derive(Debug)]
#[non_exhaustive]
pub struct CmEndpoint {
    /// The (synchronous) id.
    pub id: CmId,
    /// Its QP, when QP attributes were given.
    pub qp: Option<EpQp>,
}

/// What a passive endpoint keeps for [`CmId::get_request`].
#[derive(Debug, Clone)]
pub(crate) struct EpRequestQp {
    pub(crate) pd: Option<ProtectionDomain>,
    pub(crate) init: EpQpInit,
}

/// The PD of each device for ids that were given none: librdmacm's
/// `cma_dev->pd`, held by the ids that use it.
fn device_pds() -> MutexGuard<'static, Vec<(usize, Weak<Owned<PdInner>>)>> {
    static PDS: Mutex<Vec<(usize, Weak<Owned<PdInner>>)>> = Mutex::new(Vec::new());
    PDS.lock().unwrap_or_else(|p| p.into_inner())
}

impl CmId {
    /// The PD of the id's device that ids share when given none, like
    /// librdmacm's `id->pd` (allocated with the first id that asks, freed
    /// with the last holder).
    pub fn device_pd(&self) -> Result<ProtectionDomain> {
        let ctx = self.context()?;
        let key = Arc::as_ptr(&ctx.inner).cast::<()>() as usize;
        let mut pds = device_pds();
        pds.retain(|(_, w)| w.strong_count() > 0);
        if let Some(inner) = pds
            .iter()
            .filter(|(k, _)| *k == key)
            .find_map(|(_, w)| w.upgrade())
        {
            return Ok(ProtectionDomain {
                inner,
                domain: None,
            });
        }
        let pd = ctx.alloc_pd()?;
        pds.push((key, Arc::downgrade(&pd.inner)));
        Ok(pd)
    }

    /// Creates the id's QP as `rdma_create_qp` does when the attributes
    /// may name no CQs: a completion channel and a CQ for each direction
    /// whose CQ is not given (sized by `max_send_wr` / `max_recv_wr`, with
    /// `init.cq_context`), then the QP on `pd` (`None`: [`CmId::device_pd`])
    /// readied as [`CmId::create_qp`] does. On failure everything made here
    /// is destroyed again.
    #[doc(alias = "rdma_create_qp")]
    pub fn create_ep_qp(
        &self,
        pd: Option<&ProtectionDomain>,
        init: &EpQpInit,
        send_cq: Option<&CompletionQueue>,
        recv_cq: Option<&CompletionQueue>,
        srq: Option<&SharedReceiveQueue>,
    ) -> Result<EpQp> {
        let op = "rdma_create_qp";
        let ctx = self.context()?;
        let own_pd;
        let pd = match pd {
            Some(p) => p,
            None => {
                own_pd = self.device_pd()?;
                &own_pd
            }
        };
        let make = |given: Option<&CompletionQueue>, size: u32, what: &str| {
            if given.is_some() {
                return Ok((None, None));
            }
            if size == 0 {
                return Err(Error::new(
                    op,
                    ErrorKind::InvalidArgument,
                    format!("no {what} CQ given and max_{what}_wr is 0: nothing to size one by"),
                ));
            }
            let ch = ctx.create_comp_channel()?;
            let cq = ctx.create_cq(size, CqOptions::new().channel(&ch).context(init.cq_context))?;
            Ok((Some(cq), Some(ch)))
        };
        let (recv_own, recv_channel) = make(recv_cq, init.cap.max_recv_wr, "recv")?;
        let (send_own, send_channel) = make(send_cq, init.cap.max_send_wr, "send")?;
        let (Some(send), Some(recv)) =
            (send_cq.or(send_own.as_ref()), recv_cq.or(recv_own.as_ref()))
        else {
            unreachable!("each CQ is given or was just made")
        };
        let mut attr = QpInitAttr::new(self.qp_type(), send, recv);
        attr.srq = srq;
        attr.cap = init.cap;
        attr.sq_sig_all = init.sq_sig_all;
        attr.context = init.qp_context;
        let qp = self.create_qp(pd, &attr)?;
        Ok(EpQp {
            qp,
            send_cq: send_own,
            recv_cq: recv_own,
            send_channel,
            recv_channel,
        })
    }
}

/// Creates an endpoint from `info`, like `rdma_create_ep` (see the [module
/// documentation](self)); `pd` and `init` as there (`init` names no CQs: they
/// are made for the QP).
///
/// ```no_run
/// # fn main() -> uverbs::Result<()> {
/// use uverbs::{cm::{create_ep, getaddrinfo, ConnParam, EpQpInit}, QpCap};
/// let info = &getaddrinfo(Some("192.0.2.1"), Some("7471"), None)?[0];
/// let ep = create_ep(info, None, Some(&EpQpInit::new(QpCap::new(16, 16, 1, 1))))?;
/// let qp = ep.qp.as_ref().unwrap();
/// ep.id.connect_qp(&qp.qp, &ConnParam::new())?; // returns once ESTABLISHED
/// # Ok(()) }
/// ```
#[doc(alias = "rdma_create_ep")]
pub fn create_ep(
    info: &RdmaAddrInfo,
    pd: Option<&ProtectionDomain>,
    init: Option<&EpQpInit>,
) -> Result<CmEndpoint> {
    create_ep_with(crate::sys::linux(), info, pd, init)
}

/// [`create_ep`] through a chosen transport.
pub fn create_ep_with(
    kernel: Arc<dyn Kernel>,
    info: &RdmaAddrInfo,
    pd: Option<&ProtectionDomain>,
    init: Option<&EpQpInit>,
) -> Result<CmEndpoint> {
    let op = "rdma_create_ep";
    let ps = match info.port_space {
        super::PortSpace::Ib(_) => super::PortSpace::Ib(info.qp_type),
        ps => ps,
    };
    let id = CmId::create_sync_with(kernel, ps)?;
    if info.is_passive() {
        let Some(src) = info.src_addr else {
            return Err(Error::new(
                op,
                ErrorKind::InvalidArgument,
                "a passive entry needs a source address",
            ));
        };
        id.bind(src)?;
        if let Some(init) = init {
            *id.inner.ep_qp.lock().unwrap_or_else(|p| p.into_inner()) = Some(EpRequestQp {
                pd: pd.cloned(),
                init: *init,
            });
        }
        return Ok(CmEndpoint { id, qp: None });
    }
    let Some(dst) = info.dst_addr else {
        return Err(Error::new(
            op,
            ErrorKind::InvalidArgument,
            "an active entry needs a destination address",
        ));
    };
    id.resolve_addr(info.src_addr, dst, EP_RESOLVE_TIMEOUT)?;
    id.resolve_route(EP_RESOLVE_TIMEOUT)?;
    let qp = match init {
        Some(init) => Some(id.create_ep_qp(pd, init, None, None, None)?),
        None => None,
    };
    Ok(CmEndpoint { id, qp })
}
