//! Multicast over rdma_cm (`rdma_join_multicast(_ex)`,
//! `rdma_leave_multicast`): joins of a UD id, the QP attached to each
//! group when the join completes, as librdmacm does for an id with a QP
//! (`librdmacm/cma.c`: `rdma_join_multicast2`, `ucma_process_join`,
//! `rdma_leave_multicast`).
//!
//! The kernel reports a group's events with the id's uid (this crate joins
//! with it, so they count against the id) and the join's own kernel id
//! (`ucma_create_uevent`: `resp.id = mc->id`), which names the group:
//! [`CmEvent::multicast_group`](super::CmEvent::multicast_group).

use std::net::SocketAddr;

use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    sys::Errno,
    Gid, QueuePair,
};

use super::{addr, CmId};

/// One join of an id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Join {
    /// The kernel's id of the join (events of the group carry it).
    pub(crate) mc_id: u32,
    /// Joined as a send-only full member (no QP attach).
    pub(crate) send_only: bool,
    /// The MGID and MLID the id's QP was attached with.
    pub(crate) attached: Option<(Gid, u16)>,
}

impl CmId {
    /// Joins the multicast group `group`, like `rdma_join_multicast` (UD
    /// ids, after the address is resolved or bound); `send_only` joins as a
    /// send-only full member (`rdma_join_multicast_ex` with
    /// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`). MULTICAST_JOIN follows,
    /// with the group's address vector, QPN and Q_Key in
    /// [`super::CmEvent::ud_param`]; attach the QP with
    /// [`crate::QueuePair::attach_mcast`] to receive, or let
    /// [`super::CmEvent::process_qp`] do it (or join with
    /// [`CmId::join_multicast_qp`]). Events of the group are events of this
    /// id, so its destroy waits for them like for any other. A synchronous
    /// id waits for the join's event.
    ///
    /// A group is joined once per id (the kernel would create a second
    /// membership; [`CmId::leave_multicast`] names groups by address).
    #[doc(alias = "rdma_join_multicast")]
    #[doc(alias = "rdma_join_multicast_ex")]
    pub fn join_multicast(&self, group: SocketAddr, send_only: bool) -> Result<()> {
        self.join(group, send_only, None)
    }

    /// [`CmId::join_multicast`] for an id with the QP `qp`: a synchronous id
    /// attaches it when the join completes (unless `send_only`), as
    /// librdmacm does for `id->qp`.
    pub fn join_multicast_qp(
        &self,
        qp: &QueuePair,
        group: SocketAddr,
        send_only: bool,
    ) -> Result<()> {
        self.join(group, send_only, Some(qp))
    }

    fn join(&self, group: SocketAddr, send_only: bool, qp: Option<&QueuePair>) -> Result<()> {
        let op = "RDMA_USER_CM_CMD_JOIN_MCAST";
        let mut groups = self.inner.groups.lock().unwrap_or_else(|p| p.into_inner());
        if groups.contains_key(&group) {
            return Err(Error::new(
                op,
                ErrorKind::InvalidArgument,
                format!("{group} is already joined by this id"),
            ));
        }
        let mut req = abi::RdmaUcmJoinMcast::new_zeroed();
        req.uid = self.inner.uid;
        req.id = self.inner.kernel_id;
        let (a, size) = addr::encode(&group);
        req.addr = a;
        req.addr_size = size;
        req.join_flags = if send_only {
            abi::RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
        } else {
            abi::RDMA_MC_JOIN_FLAG_FULLMEMBER
        } as u16;
        let mut resp = abi::RdmaUcmCreateIdResp::new_zeroed();
        self.channel()
            .command_op(
                abi::RDMA_USER_CM_CMD_JOIN_MCAST,
                req.as_bytes(),
                Some(0),
                resp.as_mut_bytes(),
            )
            .map_err(|e| match e.kernel_errno() {
                Some(Errno::EINVAL) => e.with_detail(
                    "multicast needs a UD id (PortSpace::Udp) whose address is resolved or bound",
                ),
                _ => e,
            })?;
        groups.insert(
            group,
            Join {
                mc_id: resp.id,
                send_only,
                attached: None,
            },
        );
        drop(groups);
        self.sync_wait("rdma_join_multicast", qp)
    }

    /// The group of a join, by the join's kernel id.
    pub(crate) fn group_of(&self, mc_id: u32) -> Option<(SocketAddr, Join)> {
        self.inner
            .groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|(_, j)| j.mc_id == mc_id)
            .map(|(g, j)| (*g, *j))
    }

    pub(crate) fn set_attached(&self, group: SocketAddr, at: (Gid, u16)) {
        if let Some(j) = self
            .inner
            .groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&group)
        {
            j.attached = Some(at);
        }
    }

    /// Leaves a group joined with [`CmId::join_multicast`], like
    /// `rdma_leave_multicast` (detach the QP first, or use
    /// [`CmId::leave_multicast_qp`]); `EADDRNOTAVAIL` for a group not
    /// joined, as librdmacm. Events of the group already read stay events
    /// of this id until acknowledged.
    #[doc(alias = "rdma_leave_multicast")]
    pub fn leave_multicast(&self, group: SocketAddr) -> Result<()> {
        self.leave(group, None)
    }

    /// [`CmId::leave_multicast`] that first detaches `qp` from the group if
    /// [`super::CmEvent::process_qp`] attached it, as librdmacm does for
    /// `id->qp`.
    pub fn leave_multicast_qp(&self, qp: &QueuePair, group: SocketAddr) -> Result<()> {
        self.leave(group, Some(qp))
    }

    fn leave(&self, group: SocketAddr, qp: Option<&QueuePair>) -> Result<()> {
        let op = "RDMA_USER_CM_CMD_LEAVE_MCAST";
        let join = self
            .inner
            .groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&group)
            .ok_or_else(|| {
                Error::sys(op, Errno::EADDRNOTAVAIL).with_detail(format!("{group} was not joined"))
            })?;
        if let (Some(qp), Some((gid, lid))) = (qp, join.attached) {
            // As librdmacm: a failed detach does not stop the leave.
            let _ = qp.detach_mcast(gid, lid);
        }
        // LEAVE_MCAST shares DESTROY_ID's layout: {response, id, reserved}.
        let mut req = abi::RdmaUcmDestroyId::new_zeroed();
        req.id = join.mc_id;
        let mut resp = abi::RdmaUcmDestroyIdResp::new_zeroed();
        self.channel().command_op(
            abi::RDMA_USER_CM_CMD_LEAVE_MCAST,
            req.as_bytes(),
            Some(0),
            resp.as_mut_bytes(),
        )
    }
}
