//! RDMA read/atomic resources of a connection, as librdmacm negotiates them
//! (`librdmacm/cma.c`: `rdma_connect`, `rdma_accept`,
//! `ucma_modify_qp_rtr`/`_rts`, `ucma_process_conn_req`).
//!
//! - [`RDMA_MAX_RESP_RES`] / [`RDMA_MAX_INIT_DEPTH`] (255) in a
//!   [`ConnParam`] ask for the device's limits (`max_qp_rd_atom`,
//!   `max_qp_init_rd_atom`) on connect; on accept for the request's values
//!   capped by those limits. [`ConnParam::max_resources`] is what
//!   `rdma_connect` / `rdma_accept` use for a NULL `conn_param`.
//! - A request's id remembers the values the peer asked for; the passive
//!   side's accept puts the accepted values into the QP (RTR's
//!   `max_dest_rd_atomic`, RTS's `max_rd_atomic`), as librdmacm does.

use crate::{error::Result, QpAttr, QpState, QueuePair};

use super::{event::ConnParam, CmId};

/// `responder_resources` of 255: the device's maximum (`RDMA_MAX_RESP_RES`).
pub const RDMA_MAX_RESP_RES: u8 = 0xFF;
/// `initiator_depth` of 255: the device's maximum (`RDMA_MAX_INIT_DEPTH`).
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xFF;

/// The resources an id negotiated: (responder resources, initiator depth).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Resources {
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
}

impl ConnParam {
    /// What `rdma_connect` and `rdma_accept` use for a NULL `conn_param`:
    /// the most resources the device (or, on accept, the request) allows,
    /// 7 retries, 7 RNR retries (infinite), no private data.
    pub const fn max_resources() -> Self {
        let mut p = ConnParam::new();
        p.responder_resources = RDMA_MAX_RESP_RES;
        p.initiator_depth = RDMA_MAX_INIT_DEPTH;
        p.retry_count = 7;
        p.rnr_retry_count = 7;
        p
    }
}

impl CmId {
    fn resources(&self) -> Resources {
        *self
            .inner
            .resources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_resources(&self, r: Resources) {
        *self
            .inner
            .resources
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = r;
    }

    /// The device's (responder resources, initiator depth) limits, as
    /// librdmacm keeps them per device (`max_responder_resources`,
    /// `max_initiator_depth`, truncated to 8 bits).
    fn device_limits(&self) -> Result<Resources> {
        let a = self.context()?.query_device()?;
        Ok(Resources {
            responder_resources: a.max_qp_rd_atom as u8,
            initiator_depth: a.max_qp_init_rd_atom as u8,
        })
    }

    /// `param` for CONNECT: 255 means the device's limit.
    pub(crate) fn connect_param(&self, param: &ConnParam) -> Result<ConnParam> {
        let mut p = param.clone();
        if p.responder_resources == RDMA_MAX_RESP_RES || p.initiator_depth == RDMA_MAX_INIT_DEPTH {
            let max = self.device_limits()?;
            if p.responder_resources == RDMA_MAX_RESP_RES {
                p.responder_resources = max.responder_resources;
            }
            if p.initiator_depth == RDMA_MAX_INIT_DEPTH {
                p.initiator_depth = max.initiator_depth;
            }
        }
        self.set_resources(Resources {
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
        });
        Ok(p)
    }

    /// `param` for ACCEPT: 255 means what the request asked for, capped by
    /// the device's limit.
    pub(crate) fn accept_param(&self, param: &ConnParam) -> Result<ConnParam> {
        let mut p = param.clone();
        if p.responder_resources == RDMA_MAX_RESP_RES || p.initiator_depth == RDMA_MAX_INIT_DEPTH {
            let max = self.device_limits()?;
            let asked = self.resources();
            if p.responder_resources == RDMA_MAX_RESP_RES {
                p.responder_resources = asked.responder_resources.min(max.responder_resources);
            }
            if p.initiator_depth == RDMA_MAX_INIT_DEPTH {
                p.initiator_depth = asked.initiator_depth.min(max.initiator_depth);
            }
        }
        self.set_resources(Resources {
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
        });
        Ok(p)
    }

    /// INIT, RTR and RTS with the CM's attributes and, as librdmacm's
    /// `rdma_accept`, the accepted resources in RTR's `max_dest_rd_atomic`
    /// and RTS's `max_rd_atomic`.
    pub(crate) fn modify_qp_to_rts_with(&self, qp: &QueuePair, r: Resources) -> Result<()> {
        self.modify_qp(qp, QpState::Init)?;
        let (mut attr, mask) = self.init_qp_attr(QpState::Rtr)?;
        attr.max_dest_rd_atomic = r.responder_resources;
        qp.modify(&attr, mask)?;
        let (mut attr, mask): (QpAttr, _) = self.init_qp_attr(QpState::Rts)?;
        attr.max_rd_atomic = r.initiator_depth;
        qp.modify(&attr, mask)
    }
}
