//! A DevX RC QP from PRM commands: its `CREATE_QP` mailbox and its bring-up
//! (`RST2INIT_QP`, `INIT2RTR_QP`, `RTR2RTS_QP`), for the fabric test
//! (`tests/mlx5_fabric.rs`: a DevX QP against a verbs QP on another model
//! HCA) and `devx-pingpong` (against Debian's `ibv_rc_pingpong` in another
//! process). Field offsets: [`qpc`] (rdma-core `mlx5_ifc.h` `qpc`, `ads`).

use uverbs::mlx5::CmdIn;

use crate::devx_overrun::{op, qpc, set};

/// What `CREATE_QP` of an RC QP needs: its PD, UAR page and CQ (for both
/// queues), `2^log_sq` send WQE basic blocks, and a receive queue of
/// `2^log_rq` WQEs of `16 << log_rq_stride` bytes first in the WQ UMEM (or
/// none: a zero-size RQ).
#[derive(Clone, Copy, Debug)]
pub struct RcQp {
    pub pdn: u32,
    pub uar_page: u32,
    pub cqn: u32,
    pub log_sq: u32,
    /// `(log_rq_size, log_rq_stride)`.
    pub rq: Option<(u32, u32)>,
    pub dbr_umem: u32,
    pub wq_umem: u32,
}

/// The `CREATE_QP` mailbox (`create_qp_in`) of `qp`.
pub fn create_rc_qp_in(qp: &RcQp) -> Vec<u8> {
    let mut cmd = vec![0u8; qpc::CMD_LEN];
    CmdIn::new(op::CREATE_QP).write(&mut cmd);
    // st 0: RC.
    set(&mut cmd, qpc::PM_STATE, 2, qpc::PM_MIGRATED);
    set(&mut cmd, qpc::PD, 24, u64::from(qp.pdn));
    match qp.rq {
        Some((log_rq, log_stride)) => {
            set(&mut cmd, qpc::LOG_RQ_SIZE, 4, u64::from(log_rq));
            set(&mut cmd, qpc::LOG_RQ_STRIDE, 3, u64::from(log_stride));
        }
        None => set(&mut cmd, qpc::RQ_TYPE, 3, qpc::RQ_ZERO_SIZE),
    }
    set(&mut cmd, qpc::LOG_SQ_SIZE, 4, u64::from(qp.log_sq));
    set(&mut cmd, qpc::TS_FORMAT, 2, qpc::TS_DEFAULT);
    set(&mut cmd, qpc::UAR_PAGE, 24, u64::from(qp.uar_page));
    set(&mut cmd, qpc::CQN_SND, 24, u64::from(qp.cqn));
    set(&mut cmd, qpc::CQN_RCV, 24, u64::from(qp.cqn));
    set(&mut cmd, qpc::DBR_UMEM_VALID, 1, 1);
    set(&mut cmd, qpc::DBR_UMEM_ID, 32, u64::from(qp.dbr_umem));
    set(&mut cmd, qpc::WQ_UMEM_ID, 32, u64::from(qp.wq_umem));
    set(&mut cmd, qpc::WQ_UMEM_VALID, 1, 1);
    cmd
}

/// The peer an RC QP is brought up towards, over RoCE from GID index 1 of
/// port 1 with a 1024-byte MTU, 7 retries and 7 RNR retries, ack timeout
/// 14.
#[derive(Clone, Copy, Debug)]
pub struct RcPeer {
    pub remote_qpn: u32,
    pub rgid: [u8; 16],
    /// The first PSN the peer sends (`next_rcv_psn`).
    pub rq_psn: u32,
    /// The first PSN this QP sends (`next_send_psn`).
    pub sq_psn: u32,
    /// The RNR NAK timer this QP's responder asks for.
    pub min_rnr_nak: u8,
    /// RDMA read, write and atomics allowed to the peer.
    pub remote_access: bool,
}

/// The three modify commands, in order, that take DevX QP `qpn` from RESET
/// to RTS towards `peer`: each `(opcode, mailbox)`.
pub fn rc_bring_up(qpn: u32, peer: &RcPeer) -> [(u16, Vec<u8>); 3] {
    let command = |opcode| {
        let mut c = vec![0u8; qpc::CMD_LEN];
        CmdIn::general(opcode, 0, qpn).write(&mut c);
        c
    };
    let mut init = command(op::RST2INIT_QP);
    set(&mut init, qpc::VHCA_PORT_NUM, 8, 1);
    if peer.remote_access {
        set(&mut init, qpc::RRE_RWE_RAE, 3, 0b111);
    }
    let mut rtr = command(op::INIT2RTR_QP);
    set(&mut rtr, qpc::MTU, 3, 3);
    set(&mut rtr, qpc::LOG_MSG_MAX, 5, 30);
    set(&mut rtr, qpc::REMOTE_QPN, 24, u64::from(peer.remote_qpn));
    set(&mut rtr, qpc::GRH, 1, 1);
    set(&mut rtr, qpc::SRC_ADDR_INDEX, 8, 1);
    set(&mut rtr, qpc::HOP_LIMIT, 8, 1);
    for (i, byte) in peer.rgid.iter().enumerate() {
        set(&mut rtr, qpc::RGID + 8 * i, 8, u64::from(*byte));
    }
    set(&mut rtr, qpc::MIN_RNR_NAK, 5, u64::from(peer.min_rnr_nak));
    set(&mut rtr, qpc::NEXT_RCV_PSN, 24, u64::from(peer.rq_psn));
    let mut rts = command(op::RTR2RTS_QP);
    set(&mut rts, qpc::ACK_TIMEOUT, 5, 14);
    set(&mut rts, qpc::RETRY_COUNT, 3, 7);
    set(&mut rts, qpc::RNR_RETRY, 3, 7);
    set(&mut rts, qpc::NEXT_SEND_PSN, 24, u64::from(peer.sq_psn));
    [
        (op::RST2INIT_QP, init),
        (op::INIT2RTR_QP, rtr),
        (op::RTR2RTS_QP, rts),
    ]
}
