//! rxe receive queues (a QP's RQ or an SRQ): writing `struct rxe_recv_wqe`
//! into the mmapped ring, as RC `providers/rxe/rxe.c` `rxe_post_one_recv`
//! does. Receives need no kernel call: the responder reads the ring when a
//! packet arrives (K61 rxe_resp.c `get_srq_wqe`/`check_resource`, which
//! bounds `dma.num_sge` by the queue's `max_sge`).
//!
//! No `unsafe` here: slots are written through [`super::queue::Slot`].

use std::mem::size_of;

use super::queue::Producer;
use crate::{
    abi::{RxeDmaInfo, RxeRecvWqe, RxeSge},
    error::Error,
    sys::Mapping,
    wr::{PostError, PostErrorKind, RecvWr},
};

/// `sizeof(struct rxe_recv_wqe)`: the SGE array starts here.
pub(crate) const RECV_WQE_LEN: usize = size_of::<RxeRecvWqe>();
/// `sizeof(struct rxe_sge)`.
const SGE_LEN: usize = size_of::<RxeSge>();

/// A receive queue or shared receive queue of rxe.
#[derive(Debug)]
pub(crate) struct RxeRq {
    ring: Producer,
    /// `max_recv_sge` / `max_sge` as the kernel returned it.
    max_sge: u32,
}

impl RxeRq {
    /// Takes over an RQ or SRQ mapping; `max_sge` is the cap the kernel
    /// returned. A slot too small for `max_sge` SGEs is an error.
    pub(crate) fn new(map: Mapping, max_sge: u32) -> Result<Self, Error> {
        let min_slot = (max_sge as usize)
            .saturating_mul(SGE_LEN)
            .saturating_add(RECV_WQE_LEN);
        let ring = Producer::new(map, "map rxe receive queue", min_slot)?;
        Ok(RxeRq { ring, max_sge })
    }

    /// The number of WQEs the ring holds at once.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> u32 {
        self.ring.ring().mask()
    }

    /// Writes and publishes one WQE per request. On a failure at `i`,
    /// requests before `i` stay posted and `PostError { index: i, .. }` is
    /// returned. No syscall, no allocation.
    pub(crate) fn post(&mut self, wrs: &[RecvWr<'_>]) -> Result<(), PostError> {
        for (index, wr) in wrs.iter().enumerate() {
            self.post_one(wr)
                .map_err(|kind| PostError { index, kind })?;
        }
        Ok(())
    }

    #[inline]
    fn post_one(&mut self, wr: &RecvWr<'_>) -> Result<(), PostErrorKind> {
        if wr.sges.len() > self.max_sge as usize {
            return Err(PostErrorKind::TooManySges {
                given: wr.sges.len(),
                max: self.max_sge,
            });
        }
        let total = wr.sges.iter().map(|s| u64::from(s.length)).sum::<u64>();
        let length = u32::try_from(total).map_err(|_| {
            PostErrorKind::OpNotSupported(
                "the scatter/gather list totals more than 4 GiB - 1 bytes",
            )
        })?;
        let wqe = RxeRecvWqe {
            wr_id: wr.wr_id,
            reserved: 0,
            padding: 0,
            dma: RxeDmaInfo {
                length,
                resid: length,
                cur_sge: 0,
                // Bounded by max_sge, a u32, above.
                num_sge: wr.sges.len() as u32,
                sge_offset: 0,
                reserved: 0,
            },
        };
        let mut slot = self.ring.next_slot().ok_or(PostErrorKind::QueueFull)?;
        slot.write(0, &wqe);
        for (i, s) in wr.sges.iter().enumerate() {
            let sge = RxeSge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
            slot.write(RECV_WQE_LEN + i * SGE_LEN, &sge);
        }
        slot.publish();
        Ok(())
    }
}
