//! Enhanced connection establishment (ECE) over rdma_cm: the options a
//! connection's two sides exchange in the REQ and REP (`struct ibv_ece`,
//! `rdma_ucm_ece`), as librdmacm keeps them per id (`local_ece`,
//! `remote_ece` of `cma_id_private`, `librdmacm/cma.c`).
//!
//! The local options go out with [`CmId::connect`] (`vendor_id`,
//! `attr_mod`) and with [`CmId::accept`] (the peer's vendor id and the local
//! options); the remote ones arrive with CONNECT_REQUEST (on the new id) and
//! CONNECT_RESPONSE. A peer that cannot honour them is refused with
//! [`CmId::reject_ece`].

use crate::error::{Error, ErrorKind, Result};

use super::CmId;

/// ECE options (`struct ibv_ece`): a vendor id (0: none) and its options.
#[doc(alias = "ibv_ece")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Ece {
    /// The IEEE OUI of the vendor (0: no ECE).
    pub vendor_id: u32,
    /// The vendor's options.
    pub options: u32,
}

impl Ece {
    /// The options `options` of vendor `vendor_id`.
    pub const fn new(vendor_id: u32, options: u32) -> Self {
        Ece { vendor_id, options }
    }
}

/// The two sides' options of an id.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EceState {
    pub(crate) local: Ece,
    pub(crate) remote: Ece,
}

/// IBTA's reject reason "vendor option not supported" (35), what
/// `rdma_reject_ece` sends.
pub const REJ_VENDOR_OPTION_NOT_SUPPORTED: u8 = 35;

impl CmId {
    pub(crate) fn ece_state(&self) -> EceState {
        *self.inner.ece.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_remote_ece(&self, ece: Ece) {
        self.inner
            .ece
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remote = ece;
    }

    /// Sets the ECE options this side offers, like `rdma_set_local_ece`
    /// (before the id has a QP; librdmacm refuses it after, the C library
    /// checks that). A vendor id of 0 is refused (`EINVAL`).
    #[doc(alias = "rdma_set_local_ece")]
    pub fn set_local_ece(&self, ece: Ece) -> Result<()> {
        if ece.vendor_id == 0 {
            return Err(Error::new(
                "rdma_set_local_ece",
                ErrorKind::InvalidArgument,
                "an ECE vendor id of 0 means no ECE",
            ));
        }
        self.inner
            .ece
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .local = ece;
        Ok(())
    }

    /// The ECE options this side offers ([`CmId::set_local_ece`]).
    pub fn local_ece(&self) -> Ece {
        self.ece_state().local
    }

    /// The ECE options the peer sent (CONNECT_REQUEST, CONNECT_RESPONSE),
    /// like `rdma_get_remote_ece`; zero before.
    #[doc(alias = "rdma_get_remote_ece")]
    pub fn remote_ece(&self) -> Ece {
        self.ece_state().remote
    }

    /// Rejects a connection request whose ECE options this side cannot
    /// honour, like `rdma_reject_ece`: reason 35
    /// ([`REJ_VENDOR_OPTION_NOT_SUPPORTED`]).
    #[doc(alias = "rdma_reject_ece")]
    pub fn reject_ece(&self, private_data: &[u8]) -> Result<()> {
        self.reject_with_reason(private_data, REJ_VENDOR_OPTION_NOT_SUPPORTED)
    }
}
