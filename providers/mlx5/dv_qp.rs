//! mlx5 QPs beyond the verbs: creating a QP with mlx5's own attributes,
//! as `mlx5dv_create_qp` does (rdma-core 44's `create_qp` in
//! `providers/mlx5/verbs.c` with a `struct mlx5dv_qp_init_attr`, and
//! `mlx5_qp_fill_wr_pfns` in `providers/mlx5/qp.c` for its send
//! operations), and the raw WQE of `mlx5dv_wr_raw_wqe` written into the
//! QP's send session call by call.

use bitflags::bitflags;

use super::{dv::Mlx5Context, Mlx5};
use crate::{
    abi,
    error::{Error, ErrorKind, Result},
    providers::{DriverQpAttrs, Member},
    wr::{PostError, PostErrorKind},
    ProtectionDomain, QpCreateOptions, QpInitAttr, QpType, QueuePair,
};

bitflags! {
    /// mlx5 QP creation flags (`enum mlx5dv_qp_create_flags`,
    /// `MLX5DV_QP_CREATE_*`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct Mlx5QpCreateFlags: u32 {
        /// Tunnel offloads (`MLX5DV_QP_CREATE_TUNNEL_OFFLOADS`): the kernel
        /// decides (`MLX5_QP_FLAG_TUNNEL_OFFLOADS`).
        const TUNNEL_OFFLOADS = 1 << 0;
        /// Unicast loopback to the QP's own TIR
        /// (`MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC`): the kernel
        /// decides.
        const TIR_ALLOW_SELF_LOOPBACK_UC = 1 << 1;
        /// Multicast loopback (`MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC`):
        /// the kernel decides.
        const TIR_ALLOW_SELF_LOOPBACK_MC = 1 << 2;
        /// No small receives scattered into the CQE
        /// (`MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`): what uverbs does
        /// anyway (it never asks for scatter-to-CQE).
        const DISABLE_SCATTER_TO_CQE = 1 << 3;
        /// Scatter-to-CQE allowed (`MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE`):
        /// nothing for uverbs, whose CQ polls read no data from CQEs, so it
        /// asks for none.
        const ALLOW_SCATTER_TO_CQE = 1 << 4;
        /// Packet-based credits (`MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE`):
        /// the kernel decides.
        const PACKET_BASED_CREDIT_MODE = 1 << 5;
        /// Signature pipelining (`MLX5DV_QP_CREATE_SIG_PIPELINING`): needs
        /// a context whose kernel moves QPs from SQD to RTS.
        const SIG_PIPELINING = 1 << 6;
    }
}

bitflags! {
    /// The mlx5 send operations a QP will post (`enum
    /// mlx5dv_qp_create_send_ops_flags`, `MLX5DV_QP_EX_WITH_*`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct Mlx5SendOps: u64 {
        /// `MLX5DV_QP_EX_WITH_MR_INTERLEAVED` (a UMR WQE; not here).
        const MR_INTERLEAVED = 1 << 0;
        /// `MLX5DV_QP_EX_WITH_MR_LIST` (a UMR WQE; not here).
        const MR_LIST = 1 << 1;
        /// `MLX5DV_QP_EX_WITH_MKEY_CONFIGURE` (a UMR WQE; not here).
        const MKEY_CONFIGURE = 1 << 2;
        /// WQEs the program builds (`MLX5DV_QP_EX_WITH_RAW_WQE`,
        /// `mlx5dv_wr_raw_wqe`: [`crate::WrSession::raw_wqe`],
        /// [`push_raw_wqe`]).
        const RAW_WQE = 1 << 3;
        /// `MLX5DV_QP_EX_WITH_MEMCPY` (an MMO WQE; not here).
        const MEMCPY = 1 << 4;
        const _ = !0;
    }
}

/// The kinds of dynamically connected QP (`enum mlx5dv_dc_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DcType {
    /// A DC target (`MLX5DV_DCTYPE_DCT`).
    Dct,
    /// A DC initiator (`MLX5DV_DCTYPE_DCI`).
    Dci,
}

/// What an mlx5 QP is created with beyond [`QpInitAttr`] and
/// [`QpCreateOptions`] (`struct mlx5dv_qp_init_attr`). The default is
/// `ibv_create_qp_ex`'s QP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Mlx5QpAttr {
    /// Creation flags (`MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`).
    pub create_flags: Mlx5QpCreateFlags,
    /// mlx5 send operations (`MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS`):
    /// only [`Mlx5SendOps::RAW_WQE`] is posted here.
    pub send_ops: Mlx5SendOps,
    /// A dynamically connected QP (`MLX5DV_QP_INIT_ATTR_MASK_DC`, on a QP
    /// of type [`QpType::Driver`]): refused, uverbs has no DC transport.
    pub dc: Option<DcType>,
}

impl Mlx5QpAttr {
    /// With these creation flags.
    pub fn create_flags(mut self, flags: Mlx5QpCreateFlags) -> Self {
        self.create_flags = flags;
        self
    }

    /// With these mlx5 send operations.
    pub fn send_ops(mut self, ops: Mlx5SendOps) -> Self {
        self.send_ops = ops;
        self
    }

    /// A dynamically connected QP of this kind.
    pub fn dc(mut self, dc: DcType) -> Self {
        self.dc = Some(dc);
        self
    }
}

fn refused(kind: ErrorKind, detail: String) -> Error {
    Error::new("mlx5dv_create_qp", kind, detail)
}

impl Mlx5Context<'_> {
    /// Creates a QP with mlx5's attributes, like `mlx5dv_create_qp`: what
    /// [`ProtectionDomain::create_qp_with`] does, plus `attr`, checked in
    /// libmlx5 44's order (`create_qp`, `mlx5_qp_fill_wr_pfns`):
    ///
    /// - `InvalidArgument` (`EINVAL`): both scatter-to-CQE flags; a DC
    ///   kind on a QP not of type [`QpType::Driver`], or that type
    ///   without one;
    /// - `UnsupportedProvider` (`EOPNOTSUPP`): signature pipelining on a
    ///   context whose kernel does not move QPs from SQD to RTS
    ///   (`MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS`); a DC QP (uverbs has
    ///   no DC transport: what the device model answers libmlx5 too); an
    ///   mlx5 send operation other than [`Mlx5SendOps::RAW_WQE`] (UMR and
    ///   MMO WQEs are not built here), or one on a QP type other than RC,
    ///   UC or UD.
    ///
    /// The flags the kernel decides on (tunnel offloads, the TIR loopbacks,
    /// packet-based credits) go to it in the create command's driver data
    /// (`MLX5_QP_FLAG_*`), as libmlx5 sends them; the scatter-to-CQE flags
    /// change nothing (uverbs never asks for scatter-to-CQE).
    #[doc(alias = "mlx5dv_create_qp")]
    pub fn create_qp(
        &self,
        pd: &ProtectionDomain,
        init: &QpInitAttr<'_>,
        opts: &QpCreateOptions,
        attr: Mlx5QpAttr,
    ) -> Result<QueuePair> {
        let f = attr.create_flags;
        let scatter =
            Mlx5QpCreateFlags::DISABLE_SCATTER_TO_CQE | Mlx5QpCreateFlags::ALLOW_SCATTER_TO_CQE;
        if f.contains(scatter) {
            return Err(refused(
                ErrorKind::InvalidArgument,
                "scatter-to-CQE both disabled and allowed".into(),
            ));
        }
        let sqd2rts = self.state.resp.comp_mask & abi::MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS;
        if f.contains(Mlx5QpCreateFlags::SIG_PIPELINING) && sqd2rts == 0 {
            return Err(refused(
                ErrorKind::UnsupportedProvider,
                "signature pipelining needs a kernel that moves QPs from SQD to RTS \
                 (MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_SQD2RTS)"
                    .into(),
            ));
        }
        match (init.qp_type, attr.dc) {
            (QpType::Driver, Some(dc)) => {
                return Err(refused(
                    ErrorKind::UnsupportedProvider,
                    format!("a {dc:?} QP: uverbs' mlx5 provider has no DC transport"),
                ))
            }
            (QpType::Driver, None) => {
                return Err(refused(
                    ErrorKind::InvalidArgument,
                    "a QP of the driver type needs a DC kind (MLX5DV_QP_INIT_ATTR_MASK_DC)".into(),
                ))
            }
            (t, Some(_)) => {
                return Err(refused(
                    ErrorKind::InvalidArgument,
                    format!("a DC kind on a {t} QP: DC QPs are of the driver type"),
                ))
            }
            (_, None) => {}
        }
        let ops = attr.send_ops;
        if !ops.is_empty() {
            let posted = matches!(init.qp_type, QpType::Rc | QpType::Uc | QpType::Ud);
            if !posted || !(ops - Mlx5SendOps::RAW_WQE).is_empty() {
                return Err(refused(
                    ErrorKind::UnsupportedProvider,
                    format!(
                        "mlx5 send operations {ops:?} on a {} QP: uverbs posts raw WQEs \
                         (RAW_WQE) on RC, UC and UD QPs, and builds no UMR or MMO WQE",
                        init.qp_type
                    ),
                ));
            }
        }
        let mut flags = 0;
        for (dv, kernel) in [
            (
                Mlx5QpCreateFlags::TUNNEL_OFFLOADS,
                abi::MLX5_QP_FLAG_TUNNEL_OFFLOADS,
            ),
            (
                Mlx5QpCreateFlags::TIR_ALLOW_SELF_LOOPBACK_UC,
                abi::MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_UC,
            ),
            (
                Mlx5QpCreateFlags::TIR_ALLOW_SELF_LOOPBACK_MC,
                abi::MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_MC,
            ),
            (
                Mlx5QpCreateFlags::PACKET_BASED_CREDIT_MODE,
                abi::MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE,
            ),
        ] {
            if f.contains(dv) {
                flags |= kernel;
            }
        }
        if !std::sync::Arc::ptr_eq(&pd.inner.ctx, &self.context().inner) {
            return Err(refused(
                ErrorKind::InvalidArgument,
                "the PD belongs to another context".into(),
            ));
        }
        pd.create_qp_driver(init, opts, Some(DriverQpAttrs { flags }))
    }
}

/// Writes a WQE the program built into `qp`'s open send session (opened
/// by [`QueuePair::begin_send`]), like `mlx5dv_wr_raw_wqe` between
/// `ibv_wr_start` and `ibv_wr_complete`: the call-by-call form of
/// [`WrSession::raw_wqe`](crate::WrSession::raw_wqe), whose rules it
/// follows (the WQE's size its ctrl segment's DS, its WQE index set to
/// its place, its completion `wr_id` with [`crate::WcOpcode::DRIVER2`]).
/// Refused, nothing taken: no session open
/// ([`PostErrorKind::BadState`]), a QP of another provider
/// ([`PostErrorKind::WrongProvider`]), and what `raw_wqe` refuses.
#[doc(alias = "mlx5dv_wr_raw_wqe")]
pub fn push_raw_wqe(qp: &mut QueuePair, wr_id: u64, wqe: &[u8]) -> Result<(), PostError> {
    let provider = qp.inner.ctx.provider.name();
    qp.push_open_with(|s| match Mlx5::send_session_of(s) {
        Some(s) => s.push_raw(wr_id, wqe),
        None => Err(PostErrorKind::WrongProvider {
            qp: provider,
            session: <Mlx5 as crate::providers::Provider>::NAME,
        }),
    })
}
