//! The DevX scenario of rdma-core's `tests/test_mlx5_devx_async_events.py`,
//! shared by the hardware suite (`tests/device/devx.rs`, on a ConnectX) and
//! the host tests (`tests/mlx5_devx.rs`, on the device model, whose
//! firmware side decodes the PRM mailboxes with its own reader,
//! `src/testing/mlx5/devx_fw.rs`).
//!
//! - A DevX CQ built from PRM commands on UMEM + EQN + UAR, fed by a DevX
//!   UD QP (zero-size RQ) on a verbs PD (`pd_number`), and overrun on
//!   purpose: the QP posts twice as many NOP WQEs, each asking for a
//!   completion, as the CQ holds, and nothing polls it. rdma-core's test
//!   overruns its CQ with RC traffic between two DevX QPs; NOPs produce
//!   completions without a peer, an address path or a packet, so fewer PRM
//!   fields can be wrong. The CQ_ERROR EQE (its CQN, syndrome 1: overrun)
//!   is read once through a cookie subscription on a data-mode channel and
//!   once through an eventfd subscription on an `OMIT_DATA` channel.
//! - `QUERY_CQ` of the DevX CQ; `QUERY_QP` and `RST2INIT_QP` of a verbs QP
//!   through DevX, the verbs query then seeing INIT.
//!
//! PRM layouts: `mlx5_ifc.h` (`create_cq_in`/`cqc`, `create_qp_in`/`qpc`/
//! `ads`, `rst2init_qp_in`, ...); WQE and doorbell: `mlx5dv.h`
//! (`mlx5_wqe_ctrl_seg`, `MLX5_SND_DBR`, the doorbell register at 0x800 of
//! the UAR page, as rdma-core's `mlx5_base.py` rings it). Every scenario
//! takes `settle`, run after the doorbell: nothing on hardware, the
//! model's HCA on the host.

use std::{
    os::fd::{AsFd, OwnedFd},
    time::Duration,
};

use uverbs::{
    mlx5::{
        self, event_type, CmdIn, CmdOut, Devx, DevxObj, DevxUar, DevxUmem, EventChannelFlags,
        Target, UarKind, UmemAccess,
    },
    Context, ProtectionDomain, QpAttrMask, QpState,
};

/// `DEVX_SET` of a field of the PRM layouts below (`mlx5_ifc.h`); the
/// offsets are constants of this program, so a refusal is a bug here.
pub fn set(buf: &mut [u8], off: usize, width: u32, value: u64) {
    assert!(
        mlx5::devx_set(buf, off, width, value),
        "no {width}-bit field at bit {off:#x}"
    );
}

/// PRM command opcodes (`mlx5_ifc.h`).
pub mod op {
    pub const CREATE_CQ: u16 = 0x400;
    pub const QUERY_CQ: u16 = 0x402;
    pub const CREATE_QP: u16 = 0x500;
    pub const RST2INIT_QP: u16 = 0x502;
    pub const INIT2RTR_QP: u16 = 0x503;
    pub const RTR2RTS_QP: u16 = 0x504;
    pub const QUERY_QP: u16 = 0x50b;
}

/// Bit offsets in `create_qp_in` and in the QP modify commands: the QP
/// context starts at 0xc0, and its fields (`qpc`, with the primary address
/// path `ads` at 0xc0 of it) follow. Each address path is 0x160 bits (its
/// 128-bit `rgid_rip` comes before `vhca_port_num`), so the fields after
/// the two paths start at 0x380 of the context, and the WQ UMEM follows the
/// 0x740-bit context (rdma-core `mlx5_ifc.h` `create_qp_in`, `qpc`, `ads`;
/// `tests/mlx5_prm_structs.py` `SwAds`, `CreateQpIn`).
pub mod qpc {
    pub const AT: usize = 0xc0;
    /// The primary address path (`ads`).
    pub const ADS: usize = AT + 0xc0;
    pub const ST: usize = AT + 0x08;
    pub const PM_STATE: usize = AT + 0x13;
    pub const PD: usize = AT + 0x28;
    pub const MTU: usize = AT + 0x40;
    pub const LOG_MSG_MAX: usize = AT + 0x43;
    pub const LOG_RQ_SIZE: usize = AT + 0x49;
    pub const LOG_RQ_STRIDE: usize = AT + 0x4d;
    pub const LOG_SQ_SIZE: usize = AT + 0x51;
    pub const TS_FORMAT: usize = AT + 0x58;
    pub const UAR_PAGE: usize = AT + 0x68;
    pub const REMOTE_QPN: usize = AT + 0xa8;
    pub const PKEY_INDEX: usize = ADS + 0x10;
    pub const GRH: usize = ADS + 0x28;
    pub const ACK_TIMEOUT: usize = ADS + 0x40;
    pub const SRC_ADDR_INDEX: usize = ADS + 0x48;
    pub const HOP_LIMIT: usize = ADS + 0x58;
    /// `rgid_rip`, 16 bytes.
    pub const RGID: usize = ADS + 0x80;
    pub const VHCA_PORT_NUM: usize = ADS + 0x128;
    pub const RETRY_COUNT: usize = AT + 0x38d;
    pub const RNR_RETRY: usize = AT + 0x390;
    pub const NEXT_SEND_PSN: usize = AT + 0x3c8;
    pub const CQN_SND: usize = AT + 0x3e8;
    /// `rre`, `rwe`, `rae`: 3 bits.
    pub const RRE_RWE_RAE: usize = AT + 0x490;
    pub const MIN_RNR_NAK: usize = AT + 0x4a3;
    pub const NEXT_RCV_PSN: usize = AT + 0x4a8;
    pub const CQN_RCV: usize = AT + 0x4e8;
    pub const Q_KEY: usize = AT + 0x540;
    pub const RQ_TYPE: usize = AT + 0x565;
    pub const DBR_UMEM_VALID: usize = AT + 0x683;
    pub const DBR_UMEM_ID: usize = AT + 0x720;
    /// `create_qp_in` after the context (and `wq_umem_offset`).
    pub const WQ_UMEM_ID: usize = 0x840;
    pub const WQ_UMEM_VALID: usize = 0x860;
    /// Bytes of `create_qp_in` and of the modify commands (0x880 bits).
    pub const CMD_LEN: usize = 0x880 / 8;
    /// `MLX5_QPC_ST_UD`, `MLX5_QPC_PM_STATE_MIGRATED`,
    /// `MLX5_QPC_RQ_TYPE_ZERO_SIZE_RQ`, the default timestamp format.
    pub const ST_UD: u64 = 0x2;
    pub const PM_MIGRATED: u64 = 0x3;
    pub const RQ_ZERO_SIZE: u64 = 0x3;
    pub const TS_DEFAULT: u64 = 0x1;
}

/// CQEs of the DevX CQ (log 6) and send WQE basic blocks of the DevX QP
/// (log 8); the overrun posts twice as many NOPs as the CQ holds.
const LOG_NCQE: u32 = 6;
pub const LOG_SQ_WQEBB: u32 = 8;
const NOPS: u32 = 2 << LOG_NCQE;
/// The send doorbell register of a UAR page (`MLX5_BF_OFFSET`), and the
/// send counter's word in the doorbell record (`MLX5_SND_DBR`).
const UAR_DB: usize = 0x800;
const SND_DBR: usize = 1;
const CQ_OVERRUN: u8 = 1;

/// The `CREATE_CQ` mailbox (`create_cq_in`: the CQ context at 0x80; `cqc`
/// fields) of a CQ of `2^log_ncqe` 64-byte CQEs in UMEM `buf_umem`, its
/// doorbell record in UMEM `dbr_umem`, armed on UAR page `uar_page`, its
/// events to EQ `eqn`.
pub fn create_cq_in(
    log_ncqe: u32,
    buf_umem: u32,
    dbr_umem: u32,
    uar_page: u32,
    eqn: u32,
) -> Vec<u8> {
    let mut cmd = vec![0u8; 272];
    CmdIn::new(op::CREATE_CQ).write(&mut cmd);
    let cqc = 0x80;
    set(&mut cmd, cqc + 0x06, 1, 1); // dbr_umem_valid
    set(&mut cmd, cqc + 0x20, 32, u64::from(dbr_umem));
    set(&mut cmd, cqc + 0x63, 5, u64::from(log_ncqe));
    set(&mut cmd, cqc + 0x68, 24, u64::from(uar_page));
    set(&mut cmd, cqc + 0xb8, 8, u64::from(eqn));
    set(&mut cmd, 0x2c0, 32, u64::from(buf_umem)); // cq_umem_id
    set(&mut cmd, 0x2e0, 1, 1); // cq_umem_valid
    cmd
}

/// The `CREATE_QP` mailbox of a UD QP with a send queue of
/// `2^LOG_SQ_WQEBB` basic blocks in UMEM `sq_umem` (no receive queue), its
/// doorbell record in UMEM `dbr_umem`, rung on UAR page `uar_page`, on PD
/// `pdn`, completing to CQ `cqn`.
pub fn create_qp_in(pdn: u32, cqn: u32, sq_umem: u32, dbr_umem: u32, uar_page: u32) -> Vec<u8> {
    let mut cmd = vec![0u8; qpc::CMD_LEN];
    CmdIn::new(op::CREATE_QP).write(&mut cmd);
    set(&mut cmd, qpc::ST, 8, qpc::ST_UD);
    set(&mut cmd, qpc::PM_STATE, 2, qpc::PM_MIGRATED);
    set(&mut cmd, qpc::PD, 24, u64::from(pdn));
    set(&mut cmd, qpc::LOG_SQ_SIZE, 4, u64::from(LOG_SQ_WQEBB));
    set(&mut cmd, qpc::TS_FORMAT, 2, qpc::TS_DEFAULT);
    set(&mut cmd, qpc::UAR_PAGE, 24, u64::from(uar_page));
    set(&mut cmd, qpc::CQN_SND, 24, u64::from(cqn));
    set(&mut cmd, qpc::CQN_RCV, 24, u64::from(cqn));
    set(&mut cmd, qpc::RQ_TYPE, 3, qpc::RQ_ZERO_SIZE);
    set(&mut cmd, qpc::DBR_UMEM_VALID, 1, 1);
    set(&mut cmd, qpc::DBR_UMEM_ID, 32, u64::from(dbr_umem));
    set(&mut cmd, qpc::WQ_UMEM_ID, 32, u64::from(sq_umem));
    set(&mut cmd, qpc::WQ_UMEM_VALID, 1, 1);
    cmd
}

/// A DevX UD QP in RTS (a send queue only) on a verbs PD, whose send
/// completions go to CQ `cqn`; its UMEMs and UAR stay alive with it.
#[derive(Debug)]
pub struct DevxQp {
    qp: DevxObj,
    pub qpn: u32,
    sq: DevxUmem,
    dbr: DevxUmem,
    uar: DevxUar,
}

impl DevxQp {
    pub fn new(devx: &Devx, pdn: u32, cqn: u32) -> Self {
        let sq = devx
            .umem_reg(64 << LOG_SQ_WQEBB, UmemAccess::LOCAL_WRITE)
            .unwrap();
        let dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap();
        let uar = devx.alloc_uar(UarKind::NonCached).unwrap();
        let cmd = create_qp_in(pdn, cqn, sq.id(), dbr.id(), uar.page_id());
        let mut out = vec![0u8; 16];
        let qp = devx
            .obj_create_using(&cmd, &mut out, &[&sq, &dbr, &uar])
            .unwrap_or_else(|e| panic!("DevX CREATE_QP: {e}"));
        let qpn = CmdOut::read(&out).unwrap().obj_id & 0x00ff_ffff;

        // RESET -> INIT (port 1, P_Key index 0, a Q_Key) -> RTR -> RTS,
        // with the MTU and message size mlx5_ib gives a UD QP in every
        // transition (`__mlx5_ib_modify_qp`: 4096-byte MTU, 2^12 bytes).
        for (opcode, port) in [
            (op::RST2INIT_QP, true),
            (op::INIT2RTR_QP, false),
            (op::RTR2RTS_QP, false),
        ] {
            let mut cmd = vec![0u8; qpc::CMD_LEN];
            CmdIn::general(opcode, 0, qpn).write(&mut cmd);
            set(&mut cmd, qpc::MTU, 3, 5);
            set(&mut cmd, qpc::LOG_MSG_MAX, 5, 12);
            if port {
                set(&mut cmd, qpc::VHCA_PORT_NUM, 8, 1);
                set(&mut cmd, qpc::PKEY_INDEX, 16, 0);
                set(&mut cmd, qpc::Q_KEY, 32, 0x1111_1111);
            }
            if opcode == op::RTR2RTS_QP {
                set(&mut cmd, qpc::NEXT_SEND_PSN, 24, 0);
            }
            let mut out = vec![0u8; 16];
            qp.modify(&cmd, &mut out)
                .unwrap_or_else(|e| panic!("DevX modify QP {opcode:#x}: {e}"));
        }
        DevxQp {
            qp,
            qpn,
            sq,
            dbr,
            uar,
        }
    }

    /// Posts `n` NOP WQEs (one basic block each, every one asking for a
    /// completion) and rings the send doorbell once, as rdma-core's
    /// `mlx5_base.py` `post_send` does: the WQEs, a barrier, the doorbell
    /// record, a barrier, the first 8 bytes of the last WQE to the UAR.
    #[allow(unsafe_code)] // WQEs are written into the UMEM the QP reads
    pub fn post_nops(&self, n: u32) {
        assert!(n <= 1 << LOG_SQ_WQEBB);
        let base = self.sq.as_ptr().expect("the UMEM's own memory");
        let mut last = [0u8; 8];
        for idx in 0..n {
            // `mlx5_wqe_ctrl_seg`: opmod_idx_opcode (NOP = 0), qpn_ds (one
            // 16-byte unit), fm_ce_se = CQ_UPDATE.
            let mut wqe = [0u8; 64];
            wqe[0..4].copy_from_slice(&(idx << 8).to_be_bytes());
            wqe[4..8].copy_from_slice(&(self.qpn << 8 | 1).to_be_bytes());
            wqe[11] = 0x08;
            // SAFETY: WQE `idx < 2^LOG_SQ_WQEBB` lies inside the UMEM of
            // `64 << LOG_SQ_WQEBB` bytes this struct keeps registered and
            // allocated; only the device reads it, after the doorbell.
            unsafe {
                base.add(64 * idx as usize)
                    .cast::<[u8; 64]>()
                    .write_volatile(wqe)
            };
            last.copy_from_slice(&wqe[..8]);
        }
        uverbs::barrier::udma_to_device_barrier();
        let dbr = self.dbr.as_ptr().expect("the UMEM's own memory");
        // SAFETY: word `SND_DBR` of the doorbell record is inside the
        // 4096-byte UMEM this struct keeps; the device reads it.
        unsafe {
            dbr.add(4 * SND_DBR)
                .cast::<[u8; 4]>()
                .write_volatile((n & 0xffff).to_be_bytes())
        };
        uverbs::barrier::udma_to_device_barrier();
        self.uar.write64(UAR_DB, last).unwrap();
        uverbs::barrier::mmio_flush_writes();
    }

    pub fn destroy(self) {
        self.qp.destroy().unwrap();
    }
}

/// A DevX CQ on UMEM + EQN + UAR and a DevX UD QP in RTS whose send
/// completions go to it; the UMEMs and UARs stay alive with the objects.
#[derive(Debug)]
pub struct DevxCqQp {
    qp: DevxQp,
    cq: DevxObj,
    cqn: u32,
}

impl DevxCqQp {
    pub fn new(devx: &Devx, pdn: u32) -> Self {
        let buf = devx
            .umem_reg(64 << LOG_NCQE, UmemAccess::LOCAL_WRITE)
            .unwrap();
        let dbr = devx.umem_reg(4096, UmemAccess::LOCAL_WRITE).unwrap();
        let uar = devx.alloc_uar(UarKind::NonCached).unwrap();
        let eqn = devx.query_eqn(0).unwrap();
        let cmd = create_cq_in(LOG_NCQE, buf.id(), dbr.id(), uar.page_id(), eqn);
        let mut out = vec![0u8; 16];
        let cq = devx
            .obj_create_using(&cmd, &mut out, &[&buf, &dbr, &uar])
            .unwrap_or_else(|e| panic!("DevX CREATE_CQ: {e}"));
        let cqn = CmdOut::read(&out).unwrap().obj_id & 0x00ff_ffff;
        let qp = DevxQp::new(devx, pdn, cqn);
        DevxCqQp { qp, cq, cqn }
    }

    pub fn post_nops(&self, n: u32) {
        self.qp.post_nops(n);
    }

    pub fn destroy(self) {
        self.qp.destroy();
        self.cq.destroy().unwrap();
    }
}

/// The CQ_ERROR of an overrun, read through a cookie subscription on a
/// data-mode channel: the EQE names the CQ and syndrome 1.
pub fn cq_overrun_by_cookie(devx: &Devx, pdn: u32, settle: &dyn Fn()) {
    let res = DevxCqQp::new(devx, pdn);
    let ch = devx
        .create_event_channel(EventChannelFlags::empty())
        .unwrap();
    ch.subscribe(Some(&res.cq), &[event_type::CQ_ERROR], Target::Cookie(100))
        .unwrap();
    assert_eq!(ch.try_get_event().unwrap(), None, "nothing happened yet");
    res.post_nops(NOPS);
    settle();
    let ev = ch
        .get_event_timeout(Some(Duration::from_secs(10)))
        .unwrap()
        .expect("a CQ_ERROR event within 10 s of overrunning the CQ");
    assert_eq!(ev.cookie, 100);
    assert_eq!(ev.event_type(), Some(event_type::CQ_ERROR as u8));
    assert_eq!(ev.cqn(), Some(res.cqn));
    assert_eq!(ev.cq_error_syndrome(), Some(CQ_OVERRUN));
    res.destroy();
}

/// The same overrun reported through an eventfd subscription on an
/// `OMIT_DATA` channel: the eventfd counts one event, the channel none.
pub fn cq_overrun_by_eventfd(devx: &Devx, pdn: u32, settle: &dyn Fn()) {
    let res = DevxCqQp::new(devx, pdn);
    let ch = devx
        .create_event_channel(EventChannelFlags::OMIT_DATA)
        .unwrap();
    let efd: OwnedFd = nix::sys::eventfd::EventFd::new().unwrap().into();
    ch.subscribe(
        Some(&res.cq),
        &[event_type::CQ_ERROR],
        Target::EventFd(efd.as_fd()),
    )
    .unwrap();
    res.post_nops(NOPS);
    settle();
    let mut fds = [nix::poll::PollFd::new(
        efd.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(10_000u16)).unwrap();
    assert_eq!(ready, 1, "the eventfd within 10 s of overrunning the CQ");
    let mut count = [0u8; 8];
    std::io::Read::read_exact(&mut std::fs::File::from(efd), &mut count).unwrap();
    assert_eq!(u64::from_ne_bytes(count), 1);
    assert_eq!(ch.try_get_event().unwrap(), None, "redirected, not queued");
    res.destroy();
}

/// `QUERY_CQ` of a DevX CQ through its object.
pub fn query_devx_cq(devx: &Devx, pdn: u32) {
    let res = DevxCqQp::new(devx, pdn);
    let mut c = vec![0u8; 16];
    CmdIn::general(op::QUERY_CQ, 0, res.cqn).write(&mut c);
    let mut q = vec![0u8; 0x110];
    res.cq.query(&c, &mut q).unwrap();
    assert_eq!(CmdOut::read(&q).unwrap().status, 0);
    res.destroy();
}

/// `QUERY_QP` and `RST2INIT_QP` of a verbs RC QP through DevX; the verbs
/// query then reports the state the device has: INIT.
pub fn verbs_qp_through_devx(ctx: &Context, pd: &ProtectionDomain, devx: &Devx) {
    let vcq = ctx.create_cq(8, uverbs::CqOptions::default()).unwrap();
    let qp = small_rc_qp(pd, &vcq);
    let mut c = vec![0u8; 16];
    CmdIn::general(op::QUERY_QP, 0, qp.qp_num()).write(&mut c);
    let mut qout = vec![0u8; 0x100];
    devx.qp_query(&qp, &c, &mut qout).unwrap();
    assert_eq!(CmdOut::read(&qout).unwrap().status, 0);
    let mut cmd = vec![0u8; qpc::CMD_LEN];
    CmdIn::general(op::RST2INIT_QP, 0, qp.qp_num()).write(&mut cmd);
    set(&mut cmd, qpc::VHCA_PORT_NUM, 8, 1);
    set(&mut cmd, qpc::PKEY_INDEX, 16, 0);
    let mut out = vec![0u8; 16];
    devx.qp_modify(&qp, &cmd, &mut out)
        .unwrap_or_else(|e| panic!("DevX RST2INIT of a verbs QP: {e}"));
    let (attr, _) = qp.query(QpAttrMask::STATE).unwrap();
    assert_eq!(
        attr.qp_state,
        QpState::Init,
        "the device's state after DevX moved it"
    );
}

/// A verbs RC QP of 4 WRs and 1 SGE each way on `cq`, in RESET.
pub fn small_rc_qp(pd: &ProtectionDomain, cq: &uverbs::CompletionQueue) -> uverbs::QueuePair {
    pd.create_qp(&uverbs::QpInitAttr::rc(cq, cq).cap(uverbs::QpCap::new(4, 4, 1, 1)))
        .unwrap()
}
