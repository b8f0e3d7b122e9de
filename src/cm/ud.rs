//! UD over rdma_cm (`RDMA_PS_UDP`, `RDMA_PS_IPOIB`): the active side's
//! CONNECT performs a SIDR exchange, and its ESTABLISHED event carries
//! `rdma_ucm_ud_param`: the address vector to the peer, the peer's QP number
//! and Q_Key. [`UdParam::create_ah`] turns it into an address handle and
//! [`UdPeer`] keeps the three together for sends.

use crate::{error::Result, AddressHandle, ProtectionDomain, UdDest};

use super::event::UdParam;

/// The Q_Key rdma_cm gives UD QPs of IP port spaces (`RDMA_UDP_QKEY`).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// Where to send to reach a UD peer.
///
/// librdmacm's `struct rdma_ud_param`.
#[derive(Debug)]
#[non_exhaustive]
pub struct UdPeer {
    /// The address handle.
    pub ah: AddressHandle,
    /// The remote QP number.
    pub qp_num: u32,
    /// The remote Q_Key.
    pub qkey: u32,
}

impl UdPeer {
    /// The destination of a UD send work request.
    pub fn dest(&self) -> UdDest<'_> {
        UdDest {
            ah: &self.ah,
            remote_qpn: self.qp_num,
            remote_qkey: self.qkey,
        }
    }
}

impl UdParam {
    /// Creates an address handle to the peer on `pd` (`ibv_create_ah` on
    /// `event->param.ud.ah_attr`).
    pub fn create_ah(&self, pd: &ProtectionDomain) -> Result<AddressHandle> {
        pd.create_ah(&self.ah_attr)
    }

    /// The address handle, QP number and Q_Key of the peer.
    pub fn peer(&self, pd: &ProtectionDomain) -> Result<UdPeer> {
        Ok(UdPeer {
            ah: self.create_ah(pd)?,
            qp_num: self.qp_num,
            qkey: self.qkey,
        })
    }
}
