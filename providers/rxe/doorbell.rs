//! The rxe send doorbell: a legacy `POST_SEND` write command with no work
//! requests (RC `providers/rxe/rxe.c` `post_send_db`). The kernel then runs
//! the requester on the QP's send queue (K61 rxe_verbs.c `rxe_post_send`:
//! for a user QP it returns EINVAL unless the QP is RTS or later, including
//! ERR, where it flushes the SQ into the CQ).

use zerocopy::IntoBytes;

use crate::{
    abi::{IbUverbsPostSend, IbUverbsPostSendResp, IB_USER_VERBS_CMD_POST_SEND},
    context::ContextInner,
    sys::Errno,
};

/// `sizeof(struct ibv_send_wr)`, which RC passes as `wqe_size`; the kernel
/// only requires `wqe_size >= sizeof(struct ib_uverbs_send_wr)` (56).
const WQE_SIZE: u32 = 128;

/// Tells the kernel the SQ of `qp_handle` has new WQEs: exactly one
/// `write()` of `{response, qp_handle, wr_count = 0, sge_count = 0,
/// wqe_size = 128}` with a 4-byte `bad_wr` response.
pub(crate) fn kick(ctx: &ContextInner, qp_handle: u32) -> Result<(), Errno> {
    let cmd = IbUverbsPostSend {
        response: 0, // the transport stores the response buffer's address
        qp_handle,
        wr_count: 0,
        sge_count: 0,
        wqe_size: WQE_SIZE,
    };
    let mut resp = IbUverbsPostSendResp::default();
    ctx.write_with_resp(
        IB_USER_VERBS_CMD_POST_SEND,
        cmd.as_bytes(),
        &[],
        resp.as_mut_bytes(),
        &mut [],
    )
}
