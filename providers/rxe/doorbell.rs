//! The rxe send doorbell: a legacy `POST_SEND` write command with no work
//! requests (RC `providers/rxe/rxe.c` `post_send_db`). The kernel then runs
//! the requester on the QP's send queue (K61 rxe_verbs.c `rxe_post_send`:
//! for a user QP it returns EINVAL unless the QP is RTS or later, including
//! ERR, where it flushes the SQ into the CQ).
//!
//! The 32-byte command never changes for a QP, so it is built once when the
//! QP is created and each ring is a single `write()` of those bytes: no
//! per-post marshalling on the hot path.

use zerocopy::IntoBytes;

use crate::{
    abi::{IbUverbsCmdHdr, IbUverbsPostSend, IbUverbsPostSendResp, IB_USER_VERBS_CMD_POST_SEND},
    providers::Device,
    sys::Errno,
};

/// `sizeof(struct ibv_send_wr)`, which RC passes as `wqe_size`; the kernel
/// only requires `wqe_size >= sizeof(struct ib_uverbs_send_wr)` (56).
const WQE_SIZE: u32 = 128;

const HDR: usize = size_of::<IbUverbsCmdHdr>();
const LEN: usize = HDR + size_of::<IbUverbsPostSend>();

/// The prebuilt doorbell of one QP.
#[derive(Debug)]
pub(crate) struct Doorbell {
    cmd: [u8; LEN],
    /// Where the kernel writes `bad_wr` (always 0 here); its address is in
    /// `cmd`, so it lives on the heap and moves with nothing.
    _resp: Box<IbUverbsPostSendResp>,
}

impl Doorbell {
    /// The doorbell of the QP with kernel handle `qp_handle`.
    pub(crate) fn new(qp_handle: u32) -> Self {
        let mut resp = Box::new(IbUverbsPostSendResp::default());
        let hdr = IbUverbsCmdHdr {
            command: IB_USER_VERBS_CMD_POST_SEND,
            in_words: (LEN / 4) as u16,
            out_words: (size_of::<IbUverbsPostSendResp>() / 4) as u16,
        };
        let body = IbUverbsPostSend {
            response: std::ptr::addr_of_mut!(*resp) as u64,
            qp_handle,
            wr_count: 0,
            sge_count: 0,
            wqe_size: WQE_SIZE,
        };
        let mut cmd = [0u8; LEN];
        cmd[..HDR].copy_from_slice(hdr.as_bytes());
        cmd[HDR..].copy_from_slice(body.as_bytes());
        Doorbell { cmd, _resp: resp }
    }

    /// Tells the kernel the SQ has new WQEs: exactly one `write()`.
    #[inline]
    pub(crate) fn ring(&self, dev: Device<'_>) -> Result<(), Errno> {
        match dev.write(&self.cmd)? {
            LEN => Ok(()),
            _ => Err(Errno::EIO),
        }
    }

    /// The command bytes (for tests).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.cmd
    }
}
