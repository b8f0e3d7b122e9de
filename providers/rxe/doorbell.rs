//! The rxe send doorbell: a legacy `POST_SEND` write command with no work
//! requests (RC `providers/rxe/rxe.c` `post_send_db`). The kernel then runs
//! the requester on the QP's send queue (K61 rxe_verbs.c `rxe_post_send`:
//! for a user QP it returns EINVAL unless the QP is RTS or later, including
//! ERR, where it flushes the SQ into the CQ).
//!
//! The 32-byte command never changes for a QP, so it is built once when the
//! QP is created and each ring is a single `write()` of those bytes: no
//! per-post marshalling on the hot path.
//!
//! Arming a CQ ([`arm`]) is the same kind of command: `REQ_NOTIFY_CQ`, 16
//! bytes with no response (RC `libibverbs/cmd.c` `ibv_cmd_req_notify_cq`;
//! the kernel's `ib_uverbs_req_notify_cq` takes `struct
//! ib_uverbs_req_notify_cq` and answers nothing), built in place and
//! written the same way: an arm is on every completion event's path.

use zerocopy::IntoBytes;

use crate::{
    abi::{
        IbUverbsCmdHdr, IbUverbsPostSend, IbUverbsPostSendResp, IbUverbsReqNotifyCq,
        IB_USER_VERBS_CMD_POST_SEND, IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
    },
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

const ARM_LEN: usize = HDR + size_of::<IbUverbsReqNotifyCq>();

/// The `REQ_NOTIFY_CQ` command that arms CQ `cq_handle`: header and body,
/// no response (`out_words` 0), so it carries no address.
#[inline]
pub(crate) fn arm_command(cq_handle: u32, solicited_only: bool) -> [u8; ARM_LEN] {
    let hdr = IbUverbsCmdHdr {
        command: IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
        in_words: (ARM_LEN / 4) as u16,
        out_words: 0,
    };
    let body = IbUverbsReqNotifyCq {
        cq_handle,
        solicited_only: u32::from(solicited_only),
    };
    let mut cmd = [0u8; ARM_LEN];
    cmd[..HDR].copy_from_slice(hdr.as_bytes());
    cmd[HDR..].copy_from_slice(body.as_bytes());
    cmd
}

/// Arms CQ `cq_handle` (`ibv_req_notify_cq`): exactly one `write()` of
/// [`arm_command`].
#[inline]
pub(crate) fn arm(dev: Device<'_>, cq_handle: u32, solicited_only: bool) -> Result<(), Errno> {
    match dev.write(&arm_command(cq_handle, solicited_only))? {
        ARM_LEN => Ok(()),
        _ => Err(Errno::EIO),
    }
}
