//! rxe completion queues: reading `struct ib_uverbs_wc` out of the mmapped
//! CQ ring, as RC `providers/rxe/rxe.c` `rxe_poll_cq` does. The kernel
//! writes each CQE with `memcpy` and then publishes the producer index
//! (K61 rxe_cq.c `rxe_cq_post`).
//!
//! No `unsafe` here: slots are read through [`super::queue::Consumer`].

use std::mem::size_of;

use super::queue::Consumer;
use crate::{
    abi::IbUverbsWc,
    error::Error,
    sys::Mapping,
    wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion},
};

/// A completion queue of rxe.
#[derive(Debug)]
pub(crate) struct RxeCq {
    ring: Consumer,
}

impl RxeCq {
    /// Takes over a CQ mapping (from CREATE_CQ or RESIZE_CQ).
    pub(crate) fn new(map: Mapping) -> Result<Self, Error> {
        let ring = Consumer::new(map, "map rxe completion queue", size_of::<IbUverbsWc>())?;
        Ok(RxeCq { ring })
    }

    /// The number of CQEs the ring holds at once.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> u32 {
        self.ring.ring().mask()
    }

    /// Moves up to `out.len()` completions into `out` and returns how many:
    /// at most one acquire load of the producer index, the CQEs converted,
    /// and one release store handing the slots back. No allocation, no
    /// syscall.
    ///
    /// The emptiness check is inlined into the caller (a busy-poll loop
    /// costs a few instructions per empty poll); the copy-out is not.
    #[inline]
    pub(crate) fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        match self.ring.available() {
            0 => 0,
            avail => self.take(out, avail),
        }
    }

    /// Converts `min(avail, out.len())` CQEs into `out` and hands their
    /// slots back with one release store.
    #[inline(never)]
    fn take(&mut self, out: &mut [WorkCompletion], avail: u32) -> usize {
        let n = (avail as usize).min(out.len());
        for (i, wc) in out[..n].iter_mut().enumerate() {
            // `i < n <= avail`, a u32.
            *wc = convert(&self.ring.read_at::<IbUverbsWc>(i as u32));
        }
        if n > 0 {
            // `n <= avail`, a u32.
            self.ring.consume(n as u32);
        }
        n
    }

    #[cfg(test)]
    /// Whether no completion is waiting.
    pub(crate) fn is_empty(&mut self) -> bool {
        self.ring.available() == 0
    }
}

/// `ib_uverbs_wc` to [`WorkCompletion`]. `wc_flags` are the kernel's
/// `ib_wc_flags` values (K61 rxe_resp.c / rxe_comp.c write them verbatim).
/// The `ex` union is `imm_data` (`__be32`, converted to host order) unless
/// `IB_WC_WITH_INVALIDATE` says it is `invalidate_rkey` (host order already).
#[inline]
pub(crate) fn convert(cqe: &IbUverbsWc) -> WorkCompletion {
    let flags = WcFlags::from_bits_retain(cqe.wc_flags);
    let imm_data = if flags.contains(WcFlags::WITH_INVALIDATE) {
        cqe.ex
    } else {
        u32::from_be(cqe.ex)
    };
    WorkCompletion {
        wr_id: cqe.wr_id,
        status: WcStatus(cqe.status),
        opcode: WcOpcode(cqe.opcode),
        vendor_err: cqe.vendor_err,
        byte_len: cqe.byte_len,
        imm_data,
        qp_num: cqe.qp_num,
        src_qp: cqe.src_qp,
        wc_flags: flags,
        pkey_index: cqe.pkey_index,
        slid: cqe.slid,
        sl: cqe.sl,
        dlid_path_bits: cqe.dlid_path_bits,
    }
}
