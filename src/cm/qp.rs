//! QPs for CM ids: creating them on the id's device and moving them through
//! their states with the attributes the kernel's CM computes
//! (`RDMA_USER_CM_CMD_INIT_QP_ATTR`), as librdmacm's `rdma_create_qp`,
//! `ucma_modify_qp_rtr/rts`, `rdma_accept` and `ucma_complete` do.
//!
//! The kernel's CM never touches a userspace QP: the active side moves its
//! QP to RTR and RTS when CONNECT_RESPONSE arrives and then tells the kernel
//! to send the RTU ([`CmId::complete_connect`]); the passive side moves its
//! QP to RTR and RTS before it accepts ([`CmId::accept_qp`]).

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    qp_attr::decode_init_qp_attr,
    ProtectionDomain, QpAttr, QpAttrMask, QpInitAttr, QpState, QpType, QueuePair,
};

use super::{event::ConnParam, id::CmId};

impl CmId {
    /// The attributes and mask to move a QP of this id to `state`, like
    /// `rdma_init_qp_attr`.
    #[doc(alias = "rdma_init_qp_attr")]
    pub fn init_qp_attr(&self, state: QpState) -> Result<(QpAttr, QpAttrMask)> {
        let mut req = abi::RdmaUcmInitQpAttr::new_zeroed();
        req.id = self.kernel_id();
        req.qp_state = u32::from(state.raw());
        let mut resp = abi::IbUverbsQpAttr::new_zeroed();
        self.channel()
            .command_op(
                abi::RDMA_USER_CM_CMD_INIT_QP_ATTR,
                req.as_bytes(),
                Some(0),
                resp.as_mut_bytes(),
            )
            .map_err(|e| {
                if e.kernel_errno() == Some(crate::sys::Errno::EINVAL) {
                    e.with_detail(format!(
                        "the CM has no {state:?} attributes for this id in its current state \
                         (RTR/RTS need a connection request or response)"
                    ))
                } else {
                    e
                }
            })?;
        Ok(decode_init_qp_attr(&resp))
    }

    /// Moves `qp` to `state` with the CM's attributes.
    pub fn modify_qp(&self, qp: &QueuePair, state: QpState) -> Result<()> {
        let (attr, mask) = self.init_qp_attr(state)?;
        qp.modify(&attr, mask)
    }

    /// Creates a QP for this id on `pd` (which must be on the id's device,
    /// [`CmId::context`]) and readies it as `rdma_create_qp` does: connected
    /// QPs go to INIT; UD QPs to INIT, RTR and RTS (the Q_Key is the CM's).
    #[doc(alias = "rdma_create_qp")]
    pub fn create_qp(&self, pd: &ProtectionDomain, init: &QpInitAttr<'_>) -> Result<QueuePair> {
        let op = "rdma_create_qp";
        if init.qp_type != self.qp_type() {
            return Err(Error::new(
                op,
                ErrorKind::InvalidArgument,
                format!(
                    "the id's port space {:?} needs a {:?} QP, not {:?}",
                    self.port_space(),
                    self.qp_type(),
                    init.qp_type
                ),
            ));
        }
        let ctx = self.context()?;
        if ctx.device().node_guid != pd.context().device().node_guid {
            return Err(Error::new(
                op,
                ErrorKind::InvalidArgument,
                "the PD is on another device than the id",
            ));
        }
        let qp = pd.create_qp(init)?;
        self.modify_qp(&qp, QpState::Init)?;
        if init.qp_type == QpType::Ud {
            // As librdmacm's ucma_init_ud_qp: RTR and RTS need nothing from the CM.
            qp.modify(&QpAttr::with_state(QpState::Rtr), QpAttrMask::STATE)?;
            let mut attr = QpAttr::with_state(QpState::Rts);
            attr.sq_psn = 0;
            qp.modify(&attr, QpAttrMask::STATE | QpAttrMask::SQ_PSN)?;
        }
        Ok(qp)
    }

    /// [`CmId::connect`] for `qp` (its number and SRQ use go into `param`).
    ///
    /// On a synchronous id ([`CmId::create_sync`]) it then waits for the
    /// answer and completes a CONNECT_RESPONSE with `qp` as librdmacm does
    /// for an id with a QP ([`CmEvent::complete_connect`]): it returns once
    /// the connection is ESTABLISHED.
    ///
    /// [`CmEvent::complete_connect`]: super::CmEvent::complete_connect
    pub fn connect_qp(&self, qp: &QueuePair, param: &ConnParam) -> Result<()> {
        let mut p = param.clone();
        p.qp_num = qp.qp_num();
        self.connect_cmd(&p)?;
        self.sync_wait("rdma_connect", Some(qp))
    }

    /// INIT again (the CM's INIT attributes change once a connection exists:
    /// remote read and atomic access follow the negotiated responder
    /// resources), then RTR and RTS, as librdmacm's `ucma_modify_qp_rtr` and
    /// `ucma_modify_qp_rts` do.
    pub fn modify_qp_to_rts(&self, qp: &QueuePair) -> Result<()> {
        self.modify_qp(qp, QpState::Init)?;
        self.modify_qp(qp, QpState::Rtr)?;
        self.modify_qp(qp, QpState::Rts)
    }

    /// The active side's answer to CONNECT_RESPONSE: QP to RTR and RTS, then
    /// [`CmId::establish`] (the RTU). On failure the QP is moved to ERR,
    /// as librdmacm does.
    pub fn complete_connect(&self, qp: &QueuePair) -> Result<()> {
        let result = self.modify_qp_to_rts(qp).and_then(|()| self.establish());
        if result.is_err() {
            let _ = qp.modify(&QpAttr::with_state(QpState::Err), QpAttrMask::STATE);
        }
        result
    }

    /// The passive side's accept with a QP: RTR and RTS (connected QPs),
    /// then [`CmId::accept`] with the QP's number; on failure the QP is
    /// moved to ERR. As librdmacm's `rdma_accept`, the QP gets the accepted
    /// resources (RTR's `max_dest_rd_atomic` = `responder_resources`, RTS's
    /// `max_rd_atomic` = `initiator_depth`; 255, [`super::RDMA_MAX_RESP_RES`],
    /// takes the request's value capped by the device).
    pub fn accept_qp(&self, qp: &QueuePair, param: &ConnParam) -> Result<()> {
        let mut p = param.clone();
        p.qp_num = qp.qp_num();
        let ud = qp.qp_type() == QpType::Ud;
        let result = if ud {
            self.accept_cmd(&p)
        } else {
            self.accept_param(&p).and_then(|p| {
                let r = super::resources::Resources {
                    responder_resources: p.responder_resources,
                    initiator_depth: p.initiator_depth,
                };
                self.modify_qp_to_rts_with(qp, r)?;
                self.accept_cmd(&p)
            })
        };
        if result.is_err() {
            let _ = qp.modify(&QpAttr::with_state(QpState::Err), QpAttrMask::STATE);
        }
        result?;
        if ud {
            return Ok(());
        }
        // A synchronous id waits for ESTABLISHED (librdmacm's ucma_complete
        // after the ACCEPT; the QP stays as it is if that fails).
        self.sync_wait("rdma_accept", None)
    }

    /// Moves `qp` to ERR (flushing its work requests) and disconnects, as
    /// librdmacm's `rdma_disconnect` does for IB and RoCE.
    pub fn disconnect_qp(&self, qp: &QueuePair) -> Result<()> {
        qp.modify(&QpAttr::with_state(QpState::Err), QpAttrMask::STATE)?;
        self.disconnect()
    }
}
