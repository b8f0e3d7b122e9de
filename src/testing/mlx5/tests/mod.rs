//! Tests of the device model itself.
//!
//! The library only creates the objects here (context, PD, MRs, CQs, QPs
//! and their state changes): WQEs, receive WQEs, doorbells, doorbell
//! records and CQEs are written and read by the tests' own encoders below
//! (from the structs of `mlx5dv.h`), so the model is checked against the
//! format facts, not against the provider it will judge. `library.rs` adds
//! two tests through the provider's data path.
#![allow(unsafe_code)]

use std::{
    os::fd::AsFd,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
};

use super::{fake_mlx5_with, memory, Mlx5Model, Options};
use crate::{
    sys::{Errno, Kernel},
    testing::kernel::dummy_fd,
    AccessFlags, AhAttr, CompletionChannel, CompletionQueue, Context, CqOptions, GlobalRoute,
    MemoryRegion, Mtu, ProtectionDomain, QpAttr, QpCap, QpInitAttr, QpState, QpType, QueuePair,
    SharedReceiveQueue,
};

mod data;
mod errors;
mod kernel;
mod library;
mod order;
mod scatter;

pub(super) const QKEY: u32 = 0x1111_1111;
pub(super) const ALL: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

/// `MLX5_OPCODE_*`.
pub(super) mod op {
    pub(in super::super) const NOP: u8 = 0x00;
    pub(in super::super) const RDMA_WRITE: u8 = 0x08;
    pub(in super::super) const RDMA_WRITE_IMM: u8 = 0x09;
    pub(in super::super) const SEND: u8 = 0x0a;
    pub(in super::super) const SEND_IMM: u8 = 0x0b;
    pub(in super::super) const RDMA_READ: u8 = 0x10;
    pub(in super::super) const ATOMIC_CS: u8 = 0x11;
    pub(in super::super) const ATOMIC_FA: u8 = 0x12;
}

/// `fm_ce_se` bits.
pub(super) const CE: u8 = 0x08;
pub(super) const SE: u8 = 0x02;

// The tests' own encoders (mlx5dv.h: all fields big-endian).

/// `mlx5_wqe_data_seg`.
pub(super) fn dseg(len: u32, lkey: u32, addr: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&len.to_be_bytes());
    b.extend_from_slice(&lkey.to_be_bytes());
    b.extend_from_slice(&addr.to_be_bytes());
    b
}

/// `mlx5_wqe_raddr_seg`.
pub(super) fn raddr(addr: u64, rkey: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&addr.to_be_bytes());
    b.extend_from_slice(&rkey.to_be_bytes());
    b.extend_from_slice(&[0; 4]);
    b
}

/// `mlx5_wqe_atomic_seg`.
pub(super) fn aseg(swap_add: u64, compare: u64) -> Vec<u8> {
    let mut b = swap_add.to_be_bytes().to_vec();
    b.extend_from_slice(&compare.to_be_bytes());
    b
}

/// `mlx5_wqe_inl_data_seg` and its bytes, padded to 16.
pub(super) fn inl(data: &[u8]) -> Vec<u8> {
    let mut b = (data.len() as u32 | 0x8000_0000).to_be_bytes().to_vec();
    b.extend_from_slice(data);
    b.resize(b.len().div_ceil(16) * 16, 0);
    b
}

/// `mlx5_wqe_av` (extended, RoCE).
pub(super) fn av(qkey: u32, dqpn: u32, sgid_index: u8, rgid: [u8; 16]) -> Vec<u8> {
    let mut b = vec![0u8; 48];
    b[0..4].copy_from_slice(&qkey.to_be_bytes());
    b[8..12].copy_from_slice(&(dqpn | 0x8000_0000).to_be_bytes());
    b[28..32].copy_from_slice(&(1u32 << 30 | u32::from(sgid_index) << 20).to_be_bytes());
    b[32..48].copy_from_slice(&rgid);
    b
}

/// Stores a big-endian doorbell record word with release ordering.
pub(super) fn set_dbrec(addr: u64, i: u64, v: u32) {
    // SAFETY: a doorbell record of an object the test created (live while
    // the object is); its words are only accessed atomically.
    unsafe { AtomicU32::from_ptr((addr + 4 * i) as *mut u32) }.store(v.to_be(), Ordering::Release);
}

/// A decoded `mlx5_cqe64` / `mlx5_err_cqe`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cqe {
    pub(super) opcode: u8,
    pub(super) solicited: bool,
    pub(super) syndrome: u8,
    pub(super) vendor: u8,
    pub(super) wqe_counter: u16,
    pub(super) qpn: u32,
    pub(super) wqe_opcode: u8,
    pub(super) byte_cnt: u32,
    pub(super) imm: [u8; 4],
    pub(super) srqn_uidx: u32,
    pub(super) flags_rqpn: u32,
    pub(super) l3: u8,
    /// The 64 bytes as written.
    pub(super) raw: [u8; 64],
}

pub(super) struct Rig {
    pub(super) model: Arc<Mlx5Model>,
    pub(super) ctx: Context,
    pub(super) pd: ProtectionDomain,
}

/// A CQ read by hand.
pub(super) struct HCq {
    pub(super) cq: CompletionQueue,
    pub(super) cqn: u32,
    pub(super) ncqe: u32,
    pub(super) buf: u64,
    pub(super) db: u64,
    pub(super) size: u32,
    pub(super) uar: u32,
    /// Consumer index (free-running).
    pub(super) ci: u32,
}

/// A QP written by hand.
pub(super) struct HQp {
    pub(super) qp: QueuePair,
    pub(super) qpn: u32,
    pub(super) buf: u64,
    pub(super) db: u64,
    pub(super) sq_cnt: u32,
    pub(super) sq_offset: u64,
    pub(super) rq_cnt: u32,
    pub(super) rq_shift: u32,
    pub(super) uar: u32,
    /// Send producer in WQEBBs.
    pub(super) pi: u32,
    /// Receive producer in WQEs.
    pub(super) rq_head: u32,
}

impl Rig {
    pub(super) fn new(options: Options) -> Rig {
        let model = fake_mlx5_with(options);
        let ctx = Context::open_with(model.dyn_kernel(), None).expect("open");
        let pd = ctx.alloc_pd().expect("PD");
        Rig { model, ctx, pd }
    }

    pub(super) fn cq(&self, cqe: u32) -> HCq {
        self.cq_on(cqe, None)
    }

    /// A CQ signalling `channel` when armed.
    pub(super) fn cq_on(&self, cqe: u32, channel: Option<&CompletionChannel>) -> HCq {
        let opts = CqOptions {
            channel,
            ..CqOptions::default()
        };
        let cq = self.ctx.create_cq(cqe, opts).expect("CQ");
        let cqn = self.model.cqn_of_handle(cq.handle()).expect("cqn");
        let i = self.model.cq(cqn).expect("CQ info");
        HCq {
            cq,
            cqn,
            ncqe: i.ncqe,
            buf: i.buf,
            db: i.db,
            size: i.cqe_size,
            uar: i.uar,
            ci: 0,
        }
    }

    pub(super) fn mr(&self, len: usize, access: AccessFlags) -> MemoryRegion {
        self.pd.alloc_mr(len, access).expect("MR")
    }

    pub(super) fn qp(
        &self,
        qp_type: QpType,
        cq: &HCq,
        srq: Option<&SharedReceiveQueue>,
        depth: u32,
    ) -> HQp {
        let qp = self
            .pd
            .create_qp(&QpInitAttr {
                context: 0,
                qp_type,
                send_cq: &cq.cq,
                recv_cq: &cq.cq,
                srq,
                cap: QpCap {
                    max_send_wr: depth,
                    max_recv_wr: depth,
                    max_send_sge: 2,
                    max_recv_sge: 2,
                    max_inline_data: 64,
                },
                sq_sig_all: false,
            })
            .expect("QP");
        let qpn = qp.qp_num();
        let i = self.model.qp(qpn).expect("QP info");
        HQp {
            qp,
            qpn,
            buf: i.buf,
            db: i.db,
            sq_cnt: i.sq_wqe_cnt,
            sq_offset: u64::from(i.rq_wqe_cnt) << i.rq_wqe_shift,
            rq_cnt: i.rq_wqe_cnt,
            rq_shift: i.rq_wqe_shift,
            uar: i.uar,
            pi: 0,
            rq_head: 0,
        }
    }

    /// Async and completion event records queued so far.
    pub(super) fn events(&self) -> Vec<Vec<u8>> {
        let fd = dummy_fd();
        // Read as a program polling would: without waiting.
        Kernel::set_nonblocking(&*self.model.kernel, fd.as_fd(), true).unwrap();
        let mut out = Vec::new();
        loop {
            let mut buf = [0u8; 64];
            match Kernel::read(&*self.model.kernel, fd.as_fd(), &mut buf) {
                Ok(n) => out.push(buf[..n].to_vec()),
                Err(Errno::EAGAIN) => return out,
                Err(e) => panic!("event read: {e}"),
            }
        }
    }

    /// Stores 8 bytes at `offset` of the 4 KiB UAR `uar`, as the library's
    /// 64-bit store does.
    pub(super) fn uar_store(&self, uar: u32, offset: usize, bytes: [u8; 8]) {
        let h = self.model.hca();
        let page = h
            .uars
            .iter()
            .find(|u| uar >= u.page_id && uar < u.page_id + u.subs() as u32)
            .expect("UAR mapped");
        let at = (uar - page.page_id) as usize * 4096 + offset;
        page.word(at)
            .store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
    }
}

/// RESET -> INIT -> RTR -> RTS towards `remote` (UD: no remote).
pub(super) fn connect(qp: &QueuePair, remote: u32, rnr_retry: u8) {
    let mut a = QpAttr::with_state(QpState::Init);
    a.port_num = 1;
    a.qp_access_flags = ALL;
    a.qkey = QKEY;
    qp.modify_to(&a).expect("INIT");
    a.qp_state = QpState::Rtr;
    a.path_mtu = Mtu(3);
    a.dest_qp_num = remote;
    a.max_dest_rd_atomic = 4;
    a.ah_attr = AhAttr {
        grh: Some(GlobalRoute {
            dgid: crate::Gid(super::kernel::GIDS[1]),
            sgid_index: 1,
            hop_limit: 1,
            ..GlobalRoute::default()
        }),
        port_num: 1,
        ..AhAttr::default()
    };
    qp.modify_to(&a).expect("RTR");
    a.qp_state = QpState::Rts;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = rnr_retry;
    a.max_rd_atomic = 4;
    qp.modify_to(&a).expect("RTS");
}

impl HQp {
    /// Writes a WQE (ctrl + `segs`) at the producer, wrapping at the end
    /// of the SQ, and updates the doorbell record. Returns its index.
    pub(super) fn post(&mut self, opcode: u8, fm_ce_se: u8, imm: [u8; 4], segs: &[u8]) -> u16 {
        assert_eq!(segs.len() % 16, 0);
        let idx = (self.pi & 0xffff) as u16;
        let ds = 1 + segs.len() as u32 / 16;
        let mut wqe = Vec::with_capacity(16 + segs.len());
        wqe.extend_from_slice(&(u32::from(idx) << 8 | u32::from(opcode)).to_be_bytes());
        wqe.extend_from_slice(&(self.qpn << 8 | ds).to_be_bytes());
        wqe.extend_from_slice(&[0, 0, 0, fm_ce_se]);
        wqe.extend_from_slice(&imm);
        wqe.extend_from_slice(segs);
        self.write_units(self.pi * 4, &wqe);
        self.pi = self.pi.wrapping_add(ds.div_ceil(4));
        set_dbrec(self.db, 1, self.pi & 0xffff);
        idx
    }

    /// Writes bytes at 16-byte unit `u` of the SQ, wrapping.
    pub(super) fn write_units(&self, u: u32, bytes: &[u8]) {
        let units = self.sq_cnt * 4;
        for (k, chunk) in bytes.chunks(16).enumerate() {
            let at = self.buf + self.sq_offset + u64::from((u + k as u32) & (units - 1)) * 16;
            // SAFETY: inside the QP's send queue (the library's buffer).
            unsafe { memory::write(at, chunk) };
        }
    }

    /// The bytes of the WQE at `idx`, rounded up to 64 (a BlueFlame copy).
    pub(super) fn wqe_bytes(&self, idx: u16) -> Vec<u8> {
        let units = self.sq_cnt * 4;
        let read = |u: u32| {
            let at = self.buf + self.sq_offset + u64::from(u & (units - 1)) * 16;
            // SAFETY: inside the QP's send queue.
            unsafe { memory::read(at, 16) }
        };
        let ds = read(u32::from(idx) * 4)[7] & 0x3f;
        let len = (usize::from(ds) * 16).div_ceil(64) * 64;
        (0..len / 16)
            .flat_map(|k| read(u32::from(idx) * 4 + k as u32))
            .collect()
    }

    /// The 8-byte doorbell naming WQE `idx`: at the QP's register.
    pub(super) fn ring(&self, rig: &Rig, idx: u16) {
        let first: [u8; 8] = self.wqe_bytes(idx)[..8].try_into().expect("8 bytes");
        rig.uar_store(self.uar, 0x800, first);
    }

    /// A BlueFlame ring: the WQE copied to the register with ascending
    /// 64-bit stores (`corrupt`: one byte of the copy changed).
    pub(super) fn ring_bf(&self, rig: &Rig, idx: u16, corrupt: bool) {
        let mut w = self.wqe_bytes(idx);
        if corrupt {
            w[20] ^= 0xff;
        }
        for (k, c) in w.chunks(8).enumerate() {
            rig.uar_store(self.uar, 0x800 + 8 * k, c.try_into().expect("8 bytes"));
        }
    }

    /// Posts a receive WQE (data segments and a terminator).
    pub(super) fn recv(&mut self, sges: &[(u64, u32, u32)]) -> u32 {
        let stride = 1u64 << self.rq_shift;
        let at = self.buf + u64::from(self.rq_head & (self.rq_cnt - 1)) * stride;
        let mut w = Vec::new();
        for &(addr, len, lkey) in sges {
            w.extend_from_slice(&dseg(len, lkey, addr));
        }
        if (w.len() as u64) < stride {
            w.extend_from_slice(&dseg(0, 0x100, 0));
        }
        // SAFETY: inside the QP's receive queue (offset 0 of its buffer).
        unsafe { memory::write(at, &w) };
        let idx = self.rq_head;
        self.rq_head = self.rq_head.wrapping_add(1);
        set_dbrec(self.db, 0, self.rq_head & 0xffff);
        idx
    }
}

impl HCq {
    /// The next CQE, if the device wrote it (`get_sw_cqe`), consumed.
    pub(super) fn poll(&mut self) -> Option<Cqe> {
        let slot = self.buf
            + u64::from(self.ci & (self.ncqe - 1)) * u64::from(self.size)
            + u64::from(self.size)
            - 64;
        // SAFETY: inside the CQ buffer.
        let b = unsafe { memory::read(slot, 64) };
        let op_own = b[63];
        if op_own >> 4 == 15 || (op_own & 1 == 1) != (self.ci & self.ncqe != 0) {
            return None;
        }
        self.ci = self.ci.wrapping_add(1);
        set_dbrec(self.db, 0, self.ci & 0xff_ffff);
        let be32 = |at: usize| u32::from_be_bytes(b[at..at + 4].try_into().expect("4"));
        Some(Cqe {
            opcode: op_own >> 4,
            solicited: op_own & 2 != 0,
            // Only an error CQE (`struct mlx5_err_cqe`, opcodes 13 and 14)
            // has these; elsewhere bytes 48..56 are the timestamp.
            syndrome: if op_own >> 4 >= 13 { b[55] } else { 0 },
            vendor: if op_own >> 4 >= 13 { b[54] } else { 0 },
            wqe_counter: u16::from_be_bytes([b[60], b[61]]),
            qpn: be32(56) & 0xff_ffff,
            wqe_opcode: b[56],
            byte_cnt: be32(44),
            imm: b[36..40].try_into().expect("4"),
            srqn_uidx: be32(32) & 0xff_ffff,
            flags_rqpn: be32(24),
            l3: (b[29] >> 2) & 3,
            raw: b[..].try_into().expect("64"),
        })
    }

    /// Everything the device wrote so far.
    pub(super) fn drain(&mut self) -> Vec<Cqe> {
        std::iter::from_fn(|| self.poll()).collect()
    }

    /// Arms the CQ as `mlx5_arm_cq` does.
    pub(super) fn arm(&self, rig: &Rig, sn: u32, solicited: bool) {
        let v = (sn & 3) << 28 | u32::from(solicited) << 24 | (self.ci & 0xff_ffff);
        set_dbrec(self.db, 1, v);
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&v.to_be_bytes());
        b[4..].copy_from_slice(&self.cqn.to_be_bytes());
        rig.uar_store(self.uar, 0x20, b);
    }
}

/// Two RC (or UC) QPs connected to each other, each with its own CQ, and
/// one MR with every access.
pub(super) struct Pair {
    pub(super) rig: Rig,
    pub(super) ca: HCq,
    pub(super) cb: HCq,
    pub(super) a: HQp,
    pub(super) b: HQp,
    pub(super) mr: MemoryRegion,
}

pub(super) fn pair(options: Options, qp_type: QpType, depth: u32, rnr_retry: u8) -> Pair {
    let rig = Rig::new(options);
    let ca = rig.cq(depth * 2);
    let cb = rig.cq(depth * 2);
    let a = rig.qp(qp_type, &ca, None, depth);
    let b = rig.qp(qp_type, &cb, None, depth);
    connect(&a.qp, b.qpn, rnr_retry);
    connect(&b.qp, a.qpn, rnr_retry);
    let mr = rig.mr(1 << 16, ALL);
    Pair {
        rig,
        ca,
        cb,
        a,
        b,
        mr,
    }
}

/// Fails the test with the model's complaints, if any.
pub(super) fn assert_clean(model: &Mlx5Model) {
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    assert!(
        model.ignored_doorbells().is_empty(),
        "{:?}",
        model.ignored_doorbells()
    );
}
