//! What a QP is created with beyond [`crate::QpInitAttr`]: creation flags
//! (`ibv_qp_init_attr_ex::create_flags`, `IBV_QP_INIT_ATTR_CREATE_FLAGS`)
//! and the send operations it will post (`send_ops_flags`,
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`), for
//! [`ProtectionDomain::create_qp_with`](crate::ProtectionDomain::create_qp_with).
//!
//! The flags go to the kernel (`UVERBS_ATTR_CREATE_QP_FLAGS`), which
//! checks them as the 6.1 core's `check_creation_flags` does (`EINVAL` for
//! a flag on a QP type that cannot have it) and then as the driver does
//! (mlx5_ib's `process_create_flags`: `EOPNOTSUPP` for a flag the device
//! lacks); the rxe provider refuses every flag with `EOPNOTSUPP` first, as
//! rdma-core's rxe does (`RXE_QP_CREATE_FLAGS_SUP` is 0) and as the kernel
//! would (`rxe_create_qp`).
//!
//! The send operations size the send queue: libmlx5 reserves room in every
//! send WQE for the largest operation the QP may post (`_sq_overhead` in
//! `providers/mlx5/verbs.c`), the memory-window bind's UMR WQE for an RC QP
//! that does not say, and the mlx5 provider sizes as it does.

use bitflags::bitflags;

use crate::abi;

bitflags! {
    /// QP creation flags (`enum ibv_qp_create_flags`; the kernel's
    /// `IB_UVERBS_QP_CREATE_*` have the same values).
    ///
    /// Bits this crate does not name are kept and sent: the kernel refuses
    /// them (`EINVAL`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct QpCreateFlags: u32 {
        /// Multicast sent by this QP does not loop back to it
        /// (`IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`; UD and raw packet QPs).
        #[doc(alias = "IBV_QP_CREATE_BLOCK_SELF_MCAST_LB")]
        const BLOCK_SELF_MCAST_LB = abi::IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK;
        /// Received packets keep their FCS (`IBV_QP_CREATE_SCATTER_FCS`;
        /// raw packet QPs).
        #[doc(alias = "IBV_QP_CREATE_SCATTER_FCS")]
        const SCATTER_FCS = abi::IB_UVERBS_QP_CREATE_SCATTER_FCS;
        /// The device strips customer VLAN tags
        /// (`IBV_QP_CREATE_CVLAN_STRIPPING`; raw packet QPs).
        #[doc(alias = "IBV_QP_CREATE_CVLAN_STRIPPING")]
        const CVLAN_STRIPPING = abi::IB_UVERBS_QP_CREATE_CVLAN_STRIPPING;
        /// Writes are padded to the cache line
        /// (`IBV_QP_CREATE_PCI_WRITE_END_PADDING`).
        #[doc(alias = "IBV_QP_CREATE_PCI_WRITE_END_PADDING")]
        const PCI_WRITE_END_PADDING = abi::IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING;
        const _ = !0;
    }
}

bitflags! {
    /// The send operations a QP will post (`enum ibv_qp_create_send_ops_flags`,
    /// `IBV_QP_EX_WITH_*`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct SendOpsFlags: u64 {
        /// `IBV_QP_EX_WITH_RDMA_WRITE`.
        const RDMA_WRITE = 1 << 0;
        /// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
        const RDMA_WRITE_WITH_IMM = 1 << 1;
        /// `IBV_QP_EX_WITH_SEND`.
        const SEND = 1 << 2;
        /// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
        const SEND_WITH_IMM = 1 << 3;
        /// `IBV_QP_EX_WITH_RDMA_READ`.
        const RDMA_READ = 1 << 4;
        /// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
        const ATOMIC_CMP_AND_SWP = 1 << 5;
        /// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
        const ATOMIC_FETCH_AND_ADD = 1 << 6;
        /// `IBV_QP_EX_WITH_LOCAL_INV`.
        const LOCAL_INV = 1 << 7;
        /// `IBV_QP_EX_WITH_BIND_MW`.
        const BIND_MW = 1 << 8;
        /// `IBV_QP_EX_WITH_SEND_WITH_INV`.
        const SEND_WITH_INV = 1 << 9;
        /// `IBV_QP_EX_WITH_TSO`.
        const TSO = 1 << 10;
        /// `IBV_QP_EX_WITH_ATOMIC_WRITE`.
        const ATOMIC_WRITE = 1 << 12;
        const _ = !0;
    }
}

/// Options of [`ProtectionDomain::create_qp_with`](crate::ProtectionDomain::create_qp_with)
/// (the extended fields of `struct ibv_qp_init_attr_ex`). `Default` is what
/// [`ProtectionDomain::create_qp`](crate::ProtectionDomain::create_qp) uses:
/// no flags, send operations not said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QpCreateOptions {
    /// Creation flags (`create_flags`).
    pub create_flags: QpCreateFlags,
    /// The send operations the QP will post (`send_ops_flags`); `None`:
    /// not said, the provider sizes for every operation the QP's type
    /// carries.
    pub send_ops: Option<SendOpsFlags>,
}

impl QpCreateOptions {
    /// No flags, send operations not said.
    pub fn new() -> Self {
        Self::default()
    }

    /// With these creation flags.
    pub fn create_flags(mut self, flags: QpCreateFlags) -> Self {
        self.create_flags = flags;
        self
    }

    /// With these send operations.
    pub fn send_ops(mut self, ops: SendOpsFlags) -> Self {
        self.send_ops = Some(ops);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values of rdma-core 44's verbs.h (`enum ibv_qp_create_flags`,
    /// `enum ibv_qp_create_send_ops_flags`), written out.
    #[test]
    fn the_flags_have_verbs_h_values() {
        assert_eq!(QpCreateFlags::BLOCK_SELF_MCAST_LB.bits(), 1 << 1);
        assert_eq!(QpCreateFlags::SCATTER_FCS.bits(), 1 << 8);
        assert_eq!(QpCreateFlags::CVLAN_STRIPPING.bits(), 1 << 9);
        assert_eq!(QpCreateFlags::PCI_WRITE_END_PADDING.bits(), 1 << 11);
        assert_eq!(SendOpsFlags::SEND.bits(), 1 << 2);
        assert_eq!(SendOpsFlags::BIND_MW.bits(), 1 << 8);
        assert_eq!(SendOpsFlags::TSO.bits(), 1 << 10);
        assert_eq!(SendOpsFlags::ATOMIC_WRITE.bits(), 1 << 12);
        let o = QpCreateOptions::new()
            .create_flags(QpCreateFlags::BLOCK_SELF_MCAST_LB)
            .send_ops(SendOpsFlags::SEND);
        assert_eq!(o.send_ops, Some(SendOpsFlags::SEND));
        assert_eq!(QpCreateOptions::default().send_ops, None);
    }
}
