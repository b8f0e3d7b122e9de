//! The model's HCA: doorbells in, WQEs executed between its QPs in host
//! memory, CQEs and events out.
//!
//! It watches what real hardware sees: the UAR pages (every 8-byte store a
//! doorbell or BlueFlame register receives, consumed with an atomic swap) and
//! the doorbell records in host memory. A send doorbell names a QP (the
//! `qpn` of the ctrl segment's first 8 bytes); it is obeyed only on the UAR
//! that QP was created with, and then the QP's send queue runs up to its
//! doorbell record, as the HCA fetches WQEs up to the producer counter. A
//! BlueFlame copy must equal the WQE in the queue. The CQ arm doorbell at
//! `+0x20` of the CQ's UAR arms it.
#![allow(unsafe_code)]

use std::{
    collections::HashMap,
    sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering},
};

use super::layout::{self, be16, be32, be64, cqe_op, op, synd, Cqe, Data};
use crate::sys::Mapping;

/// Reads `len` bytes of host memory at `addr`.
///
/// # Safety
/// `addr..addr + len` must be live memory of this process (a registered MR
/// or a queue buffer the library gave the kernel), which the model checks
/// against its tables before calling.
unsafe fn read_mem(addr: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: the caller guarantees the range is live; a raw copy forms no
    // reference to memory the library may access at the same time.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), len) };
    out
}

/// Writes `bytes` to host memory at `addr`.
///
/// # Safety
/// As [`read_mem`], and the range must be writable.
unsafe fn write_mem(addr: u64, bytes: &[u8]) {
    // SAFETY: see the function's contract.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
}

/// A big-endian doorbell record word, read with acquire ordering (the
/// library stores it with release after writing the queue).
fn dbrec(addr: u64, i: u64) -> u32 {
    // SAFETY: `addr` is the doorbell record the library gave in the create
    // command (8-aligned, live until the object is destroyed, which removes
    // it from the model first); the words are only accessed atomically.
    let w = unsafe { AtomicU32::from_ptr((addr + 4 * i) as *mut u32) };
    u32::from_be(w.load(Ordering::Acquire))
}

/// A UAR page as the device sees it: the model's own mapping of the memory
/// the library mapped.
#[derive(Debug)]
pub(crate) struct UarView {
    pub(crate) map: Mapping,
    /// Its first sub-UAR's id (`page_id`).
    pub(crate) page_id: u32,
}

impl UarView {
    pub(crate) fn word(&self, at: usize) -> &AtomicU64 {
        assert!(at % 8 == 0 && at + 8 <= self.map.len());
        // SAFETY: aligned and inside the mapping the view owns; UAR memory
        // is only accessed atomically (the library stores with 64-bit
        // atomics).
        unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(at).cast()) }
    }

    /// Takes (and clears) the 8 bytes at `at`.
    fn take(&self, at: usize) -> [u8; 8] {
        self.word(at).swap(0, Ordering::Acquire).to_ne_bytes()
    }
}

/// A memory region.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mr {
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) access: u32,
}

/// `IB_ACCESS_*`.
pub(crate) const LOCAL_WRITE: u32 = 1;
pub(crate) const REMOTE_WRITE: u32 = 2;
pub(crate) const REMOTE_READ: u32 = 4;
pub(crate) const REMOTE_ATOMIC: u32 = 8;

/// An arm doorbell the CQ received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arm {
    /// The arm sequence number (2 bits).
    pub sn: u32,
    /// Solicited-only.
    pub solicited: bool,
    /// The consumer index the library reported.
    pub ci: u32,
}

#[derive(Debug)]
pub(crate) struct Cq {
    pub(crate) handle: u32,
    pub(crate) user_handle: u64,
    pub(crate) buf: u64,
    pub(crate) db: u64,
    pub(crate) ncqe: u32,
    pub(crate) cqe_size: u32,
    /// The sub-UAR id it was created on.
    pub(crate) uar: u32,
    pub(crate) pi: u32,
    pub(crate) armed: Option<bool>,
    pub(crate) arms: Vec<Arm>,
    pub(crate) in_error: bool,
    pub(crate) comp_events: u32,
    pub(crate) async_events: u32,
}

#[derive(Debug)]
pub(crate) struct Srq {
    pub(crate) handle: u32,
    pub(crate) buf: u64,
    pub(crate) db: u64,
    pub(crate) wqe_cnt: u32,
    pub(crate) stride: u32,
    /// The next WQE the device takes (it follows `next_wqe_index`).
    pub(crate) head: u32,
    /// WQEs taken (compared with the 16-bit doorbell record counter).
    pub(crate) taken: u16,
}

#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) handle: u32,
    pub(crate) ud: bool,
    pub(crate) buf: u64,
    pub(crate) db: u64,
    pub(crate) sq_cnt: u32,
    pub(crate) sq_offset: u64,
    pub(crate) rq_cnt: u32,
    pub(crate) rq_shift: u32,
    pub(crate) uidx: Option<u32>,
    /// The sub-UAR id its doorbells must use.
    pub(crate) uar: u32,
    pub(crate) send_cq: u32,
    pub(crate) recv_cq: u32,
    pub(crate) srq: Option<u32>,
    /// `IB_QPS_*`.
    pub(crate) state: u8,
    pub(crate) dest_qpn: u32,
    pub(crate) qkey: u32,
    pub(crate) rnr_retry: u8,
    pub(crate) access: u32,
    /// WQEBB counter the device has executed up to.
    pub(crate) sq_ci: u32,
    /// Receive WQEs taken.
    pub(crate) rq_ci: u32,
    /// Its next WQE waits for a receive at the responder (RNR, retried).
    pub(crate) rnr_wait: bool,
    pub(crate) events: u32,
}

/// `IB_QPS_*`.
pub(crate) const RESET: u8 = 0;
pub(crate) const RTR: u8 = 2;
pub(crate) const RTS: u8 = 3;
pub(crate) const ERR: u8 = 6;

/// Everything the device and its kernel driver know.
#[derive(Debug, Default)]
pub(crate) struct Hca {
    pub(crate) cqe_v1: bool,
    pub(crate) bf_half: usize,
    pub(crate) uars: Vec<UarView>,
    pub(crate) mrs: HashMap<u32, Mr>,
    pub(crate) cqs: HashMap<u32, Cq>,
    pub(crate) qps: HashMap<u32, Qp>,
    pub(crate) srqs: HashMap<u32, Srq>,
    pub(crate) violations: Vec<String>,
    pub(crate) ignored: Vec<String>,
    /// Event records to queue on the event fds (async, completion).
    pub(crate) out_events: Vec<Vec<u8>>,
}

/// Why a WQE did not complete.
enum Fail {
    /// Requester error CQE with this syndrome; the QP goes to ERR.
    Req(u8),
    /// No receive posted and RNR retries left: try again later.
    Rnr,
    /// The WQE breaks the rules: recorded, completed as a local QP error.
    Violation(&'static str),
}

impl Hca {
    fn mr_by(&self, key: u32, remote: bool) -> Option<Mr> {
        self.mrs
            .values()
            .find(|m| if remote { m.rkey == key } else { m.lkey == key })
            .copied()
    }

    /// Checks `len` bytes at `addr` under `key` with `access`.
    fn check(&self, key: u32, remote: bool, addr: u64, len: u64, access: u32) -> bool {
        match self.mr_by(key, remote) {
            Some(m) => {
                addr >= m.addr
                    && addr.checked_add(len).is_some_and(|e| e <= m.addr + m.len)
                    && (access == 0 || m.access & access == access)
            }
            None => false,
        }
    }

    /// Runs the device until nothing is left to do; returns WQEs executed.
    pub(crate) fn process(&mut self) -> usize {
        let mut total = 0;
        loop {
            let mut did = 0;
            for u in 0..self.uars.len() {
                let subs = self.uars[u].map.len() / 4096;
                for j in 0..subs {
                    did += self.scan_sub_uar(u, j);
                }
            }
            // QPs waiting for a receive (RNR) retry on every pass; others
            // run only when a doorbell on their UAR says so.
            let waiting: Vec<u32> = self
                .qps
                .iter()
                .filter(|(_, q)| q.rnr_wait)
                .map(|(n, _)| *n)
                .collect();
            for qpn in waiting {
                did += self.run_sq(qpn);
            }
            total += did;
            if did == 0 {
                return total;
            }
        }
    }

    fn scan_sub_uar(&mut self, u: usize, j: usize) -> usize {
        let base = j * 4096;
        let id = self.uars[u].page_id + j as u32;
        let mut did = 0;
        // CQ arm doorbell.
        let arm = self.uars[u].take(base + 0x20);
        if arm != [0; 8] {
            self.arm(id, arm);
        }
        // Send doorbells and BlueFlame halves (0x100 apart on BF and NC pages).
        for reg in [0x800usize, 0x900, 0xa00, 0xb00] {
            let first = self.uars[u].take(base + reg);
            if first == [0; 8] {
                continue;
            }
            let mut rest = Vec::with_capacity(self.bf_half.max(8));
            for w in (8..self.bf_half.max(8)).step_by(8) {
                if reg + w >= 0x1000 {
                    break;
                }
                rest.extend_from_slice(&self.uars[u].take(base + reg + w));
            }
            let qpn = be32(&first, 4) >> 8;
            let pi = be16(&first, 1);
            match self.qps.get(&qpn) {
                Some(qp) if qp.uar == id => {
                    if rest.iter().any(|&b| b != 0) {
                        self.check_blueflame(qpn, pi, &first, &rest);
                    }
                    did += self.run_sq_upto(qpn, Some(pi));
                    let qp = &self.qps[&qpn];
                    if qp.state != ERR && qp.sq_cnt > 0 {
                        let posted = (dbrec(qp.db, 1) & 0xffff) as u16;
                        if !self.sq_has_index(qpn, pi) {
                            self.violations.push(format!(
                                "QP {qpn:#x}: the doorbell names WQE {pi}, which is not a WQE"
                            ));
                        } else if (posted.wrapping_sub(pi) as i16) <= 0 {
                            self.violations.push(format!(
                                "QP {qpn:#x}: the doorbell names WQE {pi}, the doorbell record \
                                 only {posted} WQE basic blocks (record not updated first)"
                            ));
                        }
                    }
                    // Other QPs on this register: hardware saw each of their
                    // stores, the model only the last one left in it, so a
                    // doorbell on a shared register runs every QP of this
                    // UAR whose doorbell record moved.
                    did += self.run_uar_peers(id, qpn);
                }
                Some(qp) => self.ignored.push(format!(
                    "doorbell for QP {qpn:#x} on UAR {id}, created on UAR {}",
                    qp.uar
                )),
                None => self
                    .ignored
                    .push(format!("doorbell for unknown QP {qpn:#x} on UAR {id}")),
            }
        }
        did
    }

    fn run_uar_peers(&mut self, uar: u32, rang: u32) -> usize {
        let peers: Vec<u32> = self
            .qps
            .iter()
            .filter(|(n, q)| **n != rang && q.uar == uar)
            .map(|(n, _)| *n)
            .collect();
        peers.into_iter().map(|n| self.run_sq(n)).sum()
    }

    fn sq_has_index(&self, qpn: u32, pi: u16) -> bool {
        let qp = &self.qps[&qpn];
        // SAFETY: the SQ lies in the QP's buffer (created with it).
        let seg = unsafe { read_mem(self.sq_addr(qp, u32::from(pi)), 16) };
        layout::ctrl(&seg).wqe_index == pi
    }

    fn sq_addr(&self, qp: &Qp, bb: u32) -> u64 {
        qp.buf + qp.sq_offset + u64::from(bb & (qp.sq_cnt - 1)) * 64
    }

    /// Reads 16-byte unit `u` (a counter from the start of the SQ, wrapped).
    fn sq_unit(&self, qp: &Qp, u: u32) -> Vec<u8> {
        let units = qp.sq_cnt * 4;
        let at = qp.buf + qp.sq_offset + u64::from(u & (units - 1)) * 16;
        // SAFETY: inside the QP's send queue.
        unsafe { read_mem(at, 16) }
    }

    fn check_blueflame(&mut self, qpn: u32, pi: u16, first: &[u8; 8], rest: &[u8]) {
        let qp = &self.qps[&qpn];
        let ds = layout::ctrl(&self.sq_unit(qp, u32::from(pi) * 4)).ds as usize;
        let len = (ds * 16).div_ceil(64) * 64;
        let mut copied = first.to_vec();
        copied.extend_from_slice(rest);
        let mut wqe = Vec::new();
        for k in 0..len / 16 {
            wqe.extend_from_slice(&self.sq_unit(qp, u32::from(pi) * 4 + k as u32));
        }
        if len > copied.len() || copied[..len] != wqe[..] {
            self.violations.push(format!(
                "QP {qpn:#x}: the BlueFlame copy of WQE {pi} differs from the WQE in the queue"
            ));
        }
    }

    fn arm(&mut self, uar: u32, bytes: [u8; 8]) {
        let v = be32(&bytes, 0);
        let cqn = be32(&bytes, 4) & 0xff_ffff;
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            self.ignored.push(format!("arm for unknown CQ {cqn:#x}"));
            return;
        };
        if cq.uar != uar {
            self.ignored.push(format!(
                "arm for CQ {cqn:#x} on UAR {uar}, created on {}",
                cq.uar
            ));
            return;
        }
        let a = Arm {
            sn: v >> 28 & 3,
            solicited: v >> 24 & 1 == 1,
            ci: v & 0xff_ffff,
        };
        if dbrec(cq.db, 1) != v {
            self.violations.push(format!(
                "CQ {cqn:#x}: arm doorbell {v:#x} without its doorbell record"
            ));
        }
        cq.arms.push(a);
        cq.armed = Some(a.solicited);
        // CQEs already past the consumer index fire at once.
        if cq.pi & 0xff_ffff != a.ci {
            cq.armed = None;
            cq.comp_events += 1;
            self.out_events.push(comp_event(cq.user_handle));
        }
    }

    /// Executes the QP's send queue up to its doorbell record.
    fn run_sq(&mut self, qpn: u32) -> usize {
        self.run_sq_upto(qpn, None)
    }

    /// Executes the QP's send queue up to its doorbell record, or only up to
    /// (and including) WQE `upto`: a doorbell makes the device fetch up to
    /// the WQE it names.
    fn run_sq_upto(&mut self, qpn: u32, upto: Option<u16>) -> usize {
        let mut did = 0;
        loop {
            let Some(qp) = self.qps.get(&qpn) else {
                return did;
            };
            if qp.sq_cnt == 0 || qp.state == RESET {
                return did;
            }
            let pc = dbrec(qp.db, 1) & 0xffff;
            if pc == qp.sq_ci & 0xffff {
                return did;
            }
            if let Some(p) = upto {
                if (p.wrapping_sub(qp.sq_ci as u16) as i16) < 0 {
                    return did;
                }
            }
            let at = qp.sq_ci;
            let c = layout::ctrl(&self.sq_unit(qp, at * 4));
            if u32::from(c.wqe_index) != at & 0xffff || c.qpn != qpn {
                self.violations.push(format!(
                    "QP {qpn:#x}: WQE at {at} has index {} and QP {:#x}",
                    c.wqe_index, c.qpn
                ));
            }
            let nbb = c.ds.max(1).div_ceil(4);
            if qp.state == ERR {
                self.req_cqe(qpn, &c, Err(synd::WR_FLUSH_ERR), 0);
            } else {
                match self.execute(qpn, at, &c) {
                    Ok(bytes) => {
                        if c.fm_ce_se & layout::CQ_UPDATE != 0 {
                            self.req_cqe(qpn, &c, Ok(()), bytes);
                        }
                    }
                    Err(Fail::Rnr) => {
                        if let Some(qp) = self.qps.get_mut(&qpn) {
                            qp.rnr_wait = true;
                        }
                        return did;
                    }
                    Err(Fail::Violation(what)) => {
                        self.violations
                            .push(format!("QP {qpn:#x} WQE {at}: {what}"));
                        self.req_cqe(qpn, &c, Err(0x02), 0);
                        self.to_error(qpn);
                    }
                    Err(Fail::Req(s)) => {
                        self.req_cqe(qpn, &c, Err(s), 0);
                        self.to_error(qpn);
                    }
                }
            }
            if let Some(qp) = self.qps.get_mut(&qpn) {
                qp.sq_ci = at.wrapping_add(nbb);
                qp.rnr_wait = false;
            }
            did += 1;
        }
    }

    /// Moves a QP to ERR and flushes its posted receives (one flush CQE
    /// per WQE); its send queue flushes as it runs.
    fn to_error(&mut self, qpn: u32) {
        loop {
            let Some(qp) = self.qps.get_mut(&qpn) else {
                return;
            };
            qp.state = ERR;
            if qp.srq.is_some() || qp.rq_cnt == 0 {
                return;
            }
            let posted = dbrec(qp.db, 0) & 0xffff;
            if qp.rq_ci & 0xffff == posted {
                return;
            }
            let idx = qp.rq_ci;
            qp.rq_ci = qp.rq_ci.wrapping_add(1);
            let cqn = qp.recv_cq;
            let q = self.resp_fields(qpn);
            self.post_cqe(
                cqn,
                Cqe {
                    opcode: cqe_op::RESP_ERR,
                    wqe_counter: idx as u16,
                    syndrome: synd::WR_FLUSH_ERR,
                    vendor_syndrome: 0x79,
                    ..q
                },
            );
        }
    }

    /// QP number and user index fields of a CQE for `qpn`.
    fn resp_fields(&self, qpn: u32) -> Cqe {
        let qp = &self.qps[&qpn];
        let srqn_uidx = if self.cqe_v1 {
            qp.uidx.unwrap_or(0xff_ffff)
        } else {
            qp.srq.unwrap_or(0)
        };
        Cqe {
            qpn,
            srqn_uidx,
            ..Cqe::default()
        }
    }

    fn req_cqe(&mut self, qpn: u32, c: &layout::Ctrl, result: Result<(), u8>, bytes: u32) {
        let q = self.resp_fields(qpn);
        let cqn = self.qps[&qpn].send_cq;
        let cqe = match result {
            Ok(()) => Cqe {
                opcode: cqe_op::REQ,
                wqe_counter: c.wqe_index,
                wqe_opcode: c.opcode,
                byte_cnt: bytes,
                ..q
            },
            Err(s) => Cqe {
                opcode: cqe_op::REQ_ERR,
                wqe_counter: c.wqe_index,
                wqe_opcode: c.opcode,
                syndrome: s,
                vendor_syndrome: if s == synd::WR_FLUSH_ERR { 0x79 } else { 0x88 },
                ..q
            },
        };
        self.post_cqe(cqn, cqe);
    }

    /// Writes a CQE (body, then `op_own` with the owner bit, release), or
    /// on an overrun raises CQ_ERR once and writes nothing.
    fn post_cqe(&mut self, cqn: u32, cqe: Cqe) {
        let Some(cq) = self.cqs.get_mut(&cqn) else {
            return;
        };
        if cq.in_error {
            return;
        }
        let ci = dbrec(cq.db, 0) & 0xff_ffff;
        if cq.pi.wrapping_sub(ci) & 0xff_ffff >= cq.ncqe {
            cq.in_error = true;
            cq.async_events += 1;
            self.out_events.push(async_event(cq.user_handle, 0));
            return;
        }
        let idx = u64::from(cq.pi & (cq.ncqe - 1));
        let at = cq.buf + idx * u64::from(cq.cqe_size) + u64::from(cq.cqe_size) - 64;
        let bytes = cqe.encode();
        let owner = u8::from(cq.pi & cq.ncqe != 0);
        // SAFETY: the CQE slot is inside the CQ buffer the library gave at
        // create time (live until the CQ is destroyed, which removes it
        // here first). The body is written first, then `op_own` with a
        // release store: the library reads `op_own` with acquire first.
        unsafe {
            write_mem(at, &bytes[..63]);
            AtomicU8::from_ptr((at + 63) as *mut u8).store(bytes[63] | owner, Ordering::Release);
        }
        cq.pi = cq.pi.wrapping_add(1);
        let fires = match cq.armed {
            Some(solicited_only) => {
                !solicited_only
                    || cqe.solicited
                    || matches!(cqe.opcode, cqe_op::REQ_ERR | cqe_op::RESP_ERR)
            }
            None => false,
        };
        if fires {
            cq.armed = None;
            cq.comp_events += 1;
            self.out_events.push(comp_event(cq.user_handle));
        }
    }

    /// Gathers a WQE's data segments (or inline data) from unit `u` to
    /// `end`; local keys are checked.
    fn gather(&self, qp: &Qp, mut u: u32, end: u32) -> Result<Vec<u8>, Fail> {
        let mut out = Vec::new();
        while u != end {
            let seg = self.sq_unit(qp, u);
            let w = be32(&seg, 0);
            if w & layout::INLINE != 0 {
                let len = (w & !layout::INLINE) as usize;
                let mut bytes = seg[4..].to_vec();
                let mut k = u + 1;
                while bytes.len() < len {
                    bytes.extend_from_slice(&self.sq_unit(qp, k));
                    k += 1;
                }
                bytes.truncate(len);
                out.extend_from_slice(&bytes);
                u = u.wrapping_add((4 + len as u32).div_ceil(16));
                continue;
            }
            let d = layout::data(&seg);
            if d.len == 0 {
                return Err(Fail::Violation(
                    "a zero-length data segment (rdma-core skips zero-length SGEs)",
                ));
            }
            if !self.check(d.lkey, false, d.addr, u64::from(d.len), 0) {
                return Err(Fail::Req(synd::LOCAL_PROT_ERR));
            }
            // SAFETY: checked against the MR table above.
            out.extend_from_slice(&unsafe { read_mem(d.addr, d.len as usize) });
            u = u.wrapping_add(1);
        }
        Ok(out)
    }

    /// Local scatter entries of a READ/atomic (data segments only).
    fn local_sges(&self, qp: &Qp, mut u: u32, end: u32) -> Vec<Data> {
        let mut v = Vec::new();
        while u != end {
            v.push(layout::data(&self.sq_unit(qp, u)));
            u = u.wrapping_add(1);
        }
        v
    }

    fn scatter_local(&self, sges: &[Data], bytes: &[u8]) -> Result<(), Fail> {
        let mut off = 0usize;
        for s in sges {
            if off >= bytes.len() {
                break;
            }
            let n = (s.len as usize).min(bytes.len() - off);
            if !self.check(s.lkey, false, s.addr, n as u64, LOCAL_WRITE) {
                return Err(Fail::Req(synd::LOCAL_PROT_ERR));
            }
            // SAFETY: checked against the MR table above.
            unsafe { write_mem(s.addr, &bytes[off..off + n]) };
            off += n;
        }
        Ok(())
    }

    /// Executes one WQE; returns the byte count its CQE reports.
    fn execute(&mut self, qpn: u32, at: u32, c: &layout::Ctrl) -> Result<u32, Fail> {
        let qp = &self.qps[&qpn];
        if qp.state != RTS {
            return Err(Fail::Req(synd::WR_FLUSH_ERR));
        }
        let first = at * 4;
        let end = first.wrapping_add(c.ds);
        let mut u = first + 1;
        let (dest, qkey) = if qp.ud {
            let mut av = self.sq_unit(qp, u);
            av.extend_from_slice(&self.sq_unit(qp, u + 1));
            u += 3;
            (be32(&av, 8) & 0xff_ffff, Some(be32(&av, 0)))
        } else {
            (qp.dest_qpn, None)
        };
        let solicited = c.fm_ce_se & layout::SOLICITED != 0;
        match c.opcode {
            op::SEND | op::SEND_IMM => {
                let data = self.gather(qp, u, end)?;
                let imm = (c.opcode == op::SEND_IMM).then_some(c.imm);
                let opcode = if imm.is_some() {
                    cqe_op::RESP_SEND_IMM
                } else {
                    cqe_op::RESP_SEND
                };
                self.deliver(
                    qpn,
                    dest,
                    qkey,
                    Some(&data),
                    data.len() as u32,
                    opcode,
                    imm,
                    solicited,
                )?;
                Ok(0)
            }
            op::RDMA_WRITE | op::RDMA_WRITE_IMM | op::RDMA_READ | op::ATOMIC_CS | op::ATOMIC_FA => {
                let r = self.sq_unit(qp, u);
                let (raddr, rkey) = (be64(&r, 0), be32(&r, 8));
                u += 1;
                let Some(peer) = self.qps.get(&dest) else {
                    return Err(Fail::Req(synd::REMOTE_INVAL_REQ_ERR));
                };
                let peer_access = peer.access;
                match c.opcode {
                    op::RDMA_WRITE | op::RDMA_WRITE_IMM => {
                        let data = self.gather(qp, u, end)?;
                        let len = data.len() as u64;
                        if peer_access & REMOTE_WRITE == 0
                            || !self.check(rkey, true, raddr, len, REMOTE_WRITE)
                        {
                            return Err(Fail::Req(synd::REMOTE_ACCESS_ERR));
                        }
                        if c.opcode == op::RDMA_WRITE_IMM {
                            self.deliver(
                                qpn,
                                dest,
                                None,
                                None,
                                data.len() as u32,
                                cqe_op::RESP_WR_IMM,
                                Some(c.imm),
                                solicited,
                            )?;
                        }
                        // SAFETY: checked against the MR table above.
                        unsafe { write_mem(raddr, &data) };
                        Ok(0)
                    }
                    op::RDMA_READ => {
                        let sges = self.local_sges(qp, u, end);
                        let len: u64 = sges.iter().map(|s| u64::from(s.len)).sum();
                        if peer_access & REMOTE_READ == 0
                            || !self.check(rkey, true, raddr, len, REMOTE_READ)
                        {
                            return Err(Fail::Req(synd::REMOTE_ACCESS_ERR));
                        }
                        // SAFETY: checked against the MR table above.
                        let bytes = unsafe { read_mem(raddr, len as usize) };
                        self.scatter_local(&sges, &bytes)?;
                        Ok(len as u32)
                    }
                    _ => {
                        let a = self.sq_unit(qp, u);
                        let (swap_add, compare) = (be64(&a, 0), be64(&a, 8));
                        u += 1;
                        let sges = self.local_sges(qp, u, end);
                        if peer_access & REMOTE_ATOMIC == 0
                            || raddr % 8 != 0
                            || !self.check(rkey, true, raddr, 8, REMOTE_ATOMIC)
                        {
                            return Err(Fail::Req(synd::REMOTE_ACCESS_ERR));
                        }
                        // SAFETY: checked against the MR table above; 8-aligned.
                        let old = u64::from_ne_bytes(
                            unsafe { read_mem(raddr, 8) }.try_into().unwrap_or([0; 8]),
                        );
                        let new = if c.opcode == op::ATOMIC_CS {
                            if old == compare {
                                swap_add
                            } else {
                                old
                            }
                        } else {
                            old.wrapping_add(swap_add)
                        };
                        self.scatter_local(&sges, &old.to_ne_bytes())?;
                        // SAFETY: as above.
                        unsafe { write_mem(raddr, &new.to_ne_bytes()) };
                        Ok(8)
                    }
                }
            }
            other => {
                self.violations.push(format!(
                    "QP {qpn:#x}: WQE opcode {other:#x} the model does not know"
                ));
                Err(Fail::Req(synd::REMOTE_INVAL_REQ_ERR))
            }
        }
    }

    /// Delivers a message to `dest`'s receive queue (RQ or SRQ): scatters
    /// `data` (for sends) and writes the receive CQE.
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        src: u32,
        dest: u32,
        qkey: Option<u32>,
        data: Option<&[u8]>,
        len: u32,
        opcode: u8,
        imm: Option<[u8; 4]>,
        solicited: bool,
    ) -> Result<(), Fail> {
        let src_ud = self.qps[&src].ud;
        let rnr = self.qps[&src].rnr_retry;
        let Some(peer) = self.qps.get(&dest) else {
            // UD to nobody is dropped; RC/UC to nobody is an error.
            return if src_ud {
                Ok(())
            } else {
                Err(Fail::Req(synd::REMOTE_INVAL_REQ_ERR))
            };
        };
        if peer.state < RTR || peer.state == ERR {
            return if src_ud {
                Ok(())
            } else {
                Err(Fail::Req(synd::REMOTE_INVAL_REQ_ERR))
            };
        }
        if let Some(k) = qkey {
            if k != peer.qkey {
                return Ok(()); // a wrong Q_Key is silently dropped
            }
        }
        // Take a receive WQE.
        let (sges, wqe_counter) = match peer.srq {
            Some(srqn) => {
                let Some(srq) = self.srqs.get_mut(&srqn) else {
                    return Err(Fail::Req(synd::REMOTE_INVAL_REQ_ERR));
                };
                let posted = dbrec(srq.db, 0) as u16;
                if posted == srq.taken {
                    return self.no_receive(src_ud, rnr);
                }
                let idx = srq.head;
                let at = srq.buf + u64::from(idx * srq.stride);
                // SAFETY: inside the SRQ buffer.
                let wqe = unsafe { read_mem(at, srq.stride as usize) };
                srq.head = u32::from(be16(&wqe, 2)) & (srq.wqe_cnt - 1);
                srq.taken = srq.taken.wrapping_add(1);
                (scatter_list(&wqe[16..]), idx as u16)
            }
            None => {
                let posted = dbrec(peer.db, 0) & 0xffff;
                if peer.rq_cnt == 0 || posted == peer.rq_ci & 0xffff {
                    return self.no_receive(src_ud, rnr);
                }
                let idx = peer.rq_ci & (peer.rq_cnt - 1);
                let at = peer.buf + (u64::from(idx) << peer.rq_shift);
                // SAFETY: inside the RQ (offset 0 of the QP buffer).
                let wqe = unsafe { read_mem(at, 1 << peer.rq_shift) };
                let ctr = peer.rq_ci as u16;
                if let Some(p) = self.qps.get_mut(&dest) {
                    p.rq_ci = p.rq_ci.wrapping_add(1);
                }
                (scatter_list(&wqe), ctr)
            }
        };
        let mut byte_cnt = len;
        if let Some(data) = data {
            let mut msg = Vec::with_capacity(data.len() + 40);
            if src_ud {
                msg.extend_from_slice(&[0u8; 40]); // the GRH, as RoCE delivers it
            }
            msg.extend_from_slice(data);
            byte_cnt = msg.len() as u32;
            let room: u64 = sges.iter().map(|s| u64::from(s.len)).sum();
            let mut off = 0usize;
            let mut ok = room >= msg.len() as u64;
            for s in &sges {
                if !ok || off >= msg.len() {
                    break;
                }
                let n = (s.len as usize).min(msg.len() - off);
                if !self.check(s.lkey, false, s.addr, n as u64, LOCAL_WRITE) {
                    ok = false;
                    break;
                }
                // SAFETY: checked against the MR table above.
                unsafe { write_mem(s.addr, &msg[off..off + n]) };
                off += n;
            }
            if !ok {
                let q = self.resp_fields(dest);
                let cqn = self.qps[&dest].recv_cq;
                self.post_cqe(
                    cqn,
                    Cqe {
                        opcode: cqe_op::RESP_ERR,
                        wqe_counter,
                        syndrome: synd::LOCAL_LENGTH_ERR,
                        vendor_syndrome: 0x77,
                        ..q
                    },
                );
                return Err(Fail::Req(synd::REMOTE_INVAL_REQ_ERR));
            }
        }
        let q = self.resp_fields(dest);
        let flags_rqpn = if src_ud { 2 << 28 | src } else { 0 };
        let cqn = self.qps[&dest].recv_cq;
        self.post_cqe(
            cqn,
            Cqe {
                opcode,
                solicited,
                wqe_counter,
                byte_cnt,
                imm: imm.unwrap_or([0; 4]),
                flags_rqpn,
                ..q
            },
        );
        Ok(())
    }

    fn no_receive(&self, src_ud: bool, rnr_retry: u8) -> Result<(), Fail> {
        if src_ud {
            Ok(()) // UD drops it
        } else if rnr_retry == 7 {
            Err(Fail::Rnr)
        } else {
            Err(Fail::Req(synd::RNR_RETRY_EXC_ERR))
        }
    }
}

/// The data segments of a receive WQE, up to the terminator.
fn scatter_list(bytes: &[u8]) -> Vec<Data> {
    bytes
        .chunks_exact(16)
        .map(layout::data)
        .take_while(|d| d.lkey != layout::INVALID_LKEY)
        .collect()
}

pub(crate) fn comp_event(user_handle: u64) -> Vec<u8> {
    user_handle.to_ne_bytes().to_vec()
}

pub(crate) fn async_event(element: u64, event_type: u32) -> Vec<u8> {
    let mut v = element.to_ne_bytes().to_vec();
    v.extend_from_slice(&event_type.to_ne_bytes());
    v.extend_from_slice(&0u32.to_ne_bytes());
    v
}
