//! The model's HCA: the objects it knows, the doorbells it watches, and the
//! send queues it runs (execution is in `exec.rs`, CQEs in `cq.rs`).
//!
//! It watches what real hardware sees: the UAR pages (every 8-byte store a
//! doorbell or BlueFlame register receives, consumed with an atomic swap)
//! and the doorbell records in host memory. A send doorbell names a QP (the
//! `qpn` of the ctrl segment's first 8 bytes); it is obeyed only on the UAR
//! that QP was created with, and then the QP's send queue runs up to the
//! WQE the doorbell names (the doorbell record must already cover it). A
//! BlueFlame copy must equal the WQE in the queue. The CQ arm doorbell at
//! `+0x20` of the CQ's UAR arms it.
#![allow(unsafe_code)]

use std::os::fd::RawFd;
use std::{
    collections::HashMap,
    sync::atomic::{AtomicU64, Ordering},
};

use super::{
    exec::Executed,
    layout::{self, be16, be32, synd},
    memory::{self, dbrec, Mrs},
    order::{self, Late},
};
use zerocopy::FromZeros;

use crate::{abi, sys::Mapping};

/// The CQ arm doorbell in a 4 KiB UAR (`MLX5_CQ_DOORBELL`).
pub(crate) const CQ_DOORBELL: usize = 0x20;
/// Where the doorbell/BlueFlame registers of a 4 KiB UAR start.
pub(crate) const BF_OFFSET: usize = 0x800;
/// The spacing of an NC page's doorbells (`MLX5_DB_BLUEFLAME_BUFFER_SIZE`).
pub(crate) const NC_STRIDE: usize = 0x100;

/// `IB_QPS_*`.
pub(crate) const RESET: u8 = 0;
pub(crate) const RTR: u8 = 2;
pub(crate) const RTS: u8 = 3;
pub(crate) const ERR: u8 = 6;

/// Transport of a QP (`IB_UVERBS_QPT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Rc,
    Uc,
    Ud,
}

/// What kind of registers a UAR page has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UarKind {
    /// Write-combining: bfregs with BlueFlame halves (`bf_reg_size > 0`).
    Bf,
    /// Uncached: four 8-byte doorbells per 4 KiB UAR.
    Nc,
}

/// A UAR page as the device sees it: the model's own mapping of the memfd
/// the library maps.
#[derive(Debug)]
pub(crate) struct UarView {
    pub(crate) map: Mapping,
    /// Its first sub-UAR's id (`page_id`).
    pub(crate) page_id: u32,
    pub(crate) kind: UarKind,
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
    pub(crate) fn take(&self, at: usize) -> [u8; 8] {
        self.word(at).swap(0, Ordering::Acquire).to_ne_bytes()
    }

    /// Its 4 KiB sub-UARs.
    pub(crate) fn subs(&self) -> usize {
        self.map.len() / 4096
    }
}

/// An arm doorbell a CQ received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arm {
    /// The arm sequence number (2 bits).
    pub sn: u32,
    /// Solicited-only (`MLX5_CQ_DB_REQ_NOT_SOL`).
    pub solicited: bool,
    /// The consumer index the library reported (24 bits).
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
    /// The sub-UAR id it was created on (arm doorbells must use it).
    pub(crate) uar: u32,
    /// CQEs written (free-running).
    pub(crate) pi: u32,
    /// Armed: `Some(solicited_only)`.
    pub(crate) armed: Option<bool>,
    pub(crate) arms: Vec<Arm>,
    pub(crate) in_error: bool,
    /// The completion channel it was created with (its fd): the kernel
    /// drops completion events of a CQ without one (`ib_uverbs_comp_handler`).
    pub(crate) channel: Option<RawFd>,
    pub(crate) comp_events: u32,
    pub(crate) async_events: u32,
    /// Made by a DevX `CREATE_CQ` (`devx_fw.rs`): its errors go to the
    /// DevX event subscriptions as EQEs, not to the async event fd.
    pub(crate) devx: bool,
    /// The `IB_UVERBS_CQ_FLAGS_*` it was created with
    /// (`UVERBS_ATTR_CREATE_CQ_FLAGS`).
    pub(crate) create_flags: u32,
}

#[derive(Debug)]
pub(crate) struct Srq {
    pub(crate) handle: u32,
    /// The PD handle it was created on.
    pub(crate) pd: u32,
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
    /// The PD handle of a verbs QP (0: none, a DevX QP's PD is the
    /// firmware's business).
    pub(crate) pd: u32,
    pub(crate) transport: Transport,
    pub(crate) buf: u64,
    pub(crate) db: u64,
    pub(crate) sq_cnt: u32,
    pub(crate) sq_offset: u64,
    pub(crate) rq_cnt: u32,
    pub(crate) rq_shift: u32,
    pub(crate) uidx: Option<u32>,
    /// The sub-UAR id its doorbells must use.
    pub(crate) uar: u32,
    /// The static bfreg the kernel gave it (net numbering), freed at destroy.
    pub(crate) bfreg: Option<u32>,
    pub(crate) send_cq: u32,
    pub(crate) recv_cq: u32,
    pub(crate) srq: Option<u32>,
    /// Scatter-to-CQE room of its responder (`cs_res`: 0, 32 or 64 bytes)
    /// and of its requester's read and atomic responses (`cs_req`).
    pub(crate) scatter_res: u8,
    pub(crate) scatter_req: u8,
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
    /// A doorbell came while the QP could not send yet (INIT, RTR): the
    /// WQEs run once it is in RTS.
    pub(crate) db_pending: bool,
    /// Reported for WQEs no doorbell named (once, until it runs again).
    pub(crate) unrung: bool,
    pub(crate) events: u32,
    /// What QUERY_QP reports besides the state: the attributes last
    /// modified, and the capacities and signaling the QP was created with.
    pub(crate) attrs: abi::IbUverbsQueryQpResp,
    /// Its transport state towards another HCA of the fabric (`remote.rs`).
    pub(crate) wire: super::remote::Wire,
}

/// Everything the device and its kernel driver know.
#[derive(Debug, Default)]
pub(crate) struct Hca {
    pub(crate) cqe_v1: bool,
    /// The last context got a DevX user context.
    pub(crate) devx: bool,
    /// BlueFlame register size (0: no write-combining).
    pub(crate) bf_reg_size: usize,
    /// The GIDs of port 1 (for the GRH of UD receives).
    pub(crate) gids: Vec<[u8; 16]>,
    pub(crate) uars: Vec<UarView>,
    pub(crate) mrs: Mrs,
    pub(crate) cqs: HashMap<u32, Cq>,
    pub(crate) qps: HashMap<u32, Qp>,
    pub(crate) srqs: HashMap<u32, Srq>,
    pub(crate) violations: Vec<String>,
    pub(crate) ignored: Vec<String>,
    /// Event records to queue: on a completion channel's fd, or (async
    /// events, `None`) on the async event fd.
    pub(crate) out_events: Vec<(Option<RawFd>, Vec<u8>)>,
    /// EQEs for the DevX event subscriptions (`Devx::raise`).
    pub(crate) out_eqes: Vec<[u8; 64]>,
    /// Background threads running the device: BlueFlame copies may be in
    /// flight when a doorbell is seen, so they are not compared.
    pub(crate) threaded: u32,
    /// The send WQEs taken, when logging is on (`Mlx5Model::log_wqes`).
    pub(crate) wqe_log: Option<Vec<super::ExecutedWqe>>,
    /// Whether the WQE being executed had an inline data segment (set by
    /// `gather`, which only reads).
    pub(crate) saw_inline: std::cell::Cell<bool>,
    /// RDMA reads and atomics complete late, as fences allow
    /// (`Mlx5Model::reorder_reads`, `order.rs`).
    pub(crate) reorder_reads: bool,
    /// The clock CQEs are stamped with.
    pub(crate) clock: Clock,
    /// Its port on the fabric (`fabric.rs`), if it joined one.
    pub(crate) fabric: Option<super::fabric::Port>,
}

/// The device's free-running clock (`hca_core_clock`), which stamps every
/// CQE the model writes for an executed work request (`mlx5_cqe64`'s
/// `timestamp`; an error CQE has none). Its ticks are the time since the
/// model was made, at [`HCA_CORE_CLOCK_KHZ`], and each stamp is later than
/// the one before (at least one tick: two CQEs written within one tick
/// still get distinct, increasing stamps), wrapping at
/// [`TIMESTAMP_MASK`] as the device's does.
///
/// It also keeps the clock info page the model's mlx5_ib maps
/// (`MLX5_IB_MMAP_CLOCK_INFO`, `kernel.rs`), as mlx5_core keeps it: when
/// the page is first mapped and then whenever a stamp is a second of ticks
/// past the last update ([`CLOCK_INFO_PERIOD_NS`]), `cycles` is the tick
/// count then and `nsec` the host's `CLOCK_REALTIME` read right after it
/// (so the page's anchor is a few hundred ns late at most), `frac` 0,
/// `mult`/`shift` mlx5_core's for [`HCA_CORE_CLOCK_KHZ`], `mask`
/// [`TIMESTAMP_MASK`], written under the `sign` protocol (odd while
/// writing). This is the double's own arithmetic, not the code under test:
/// tests check the library's conversion against the host's clock read
/// around their work, never against this.
#[derive(Debug)]
pub(crate) struct Clock {
    start: std::time::Instant,
    last: u64,
    /// The clock info page's view, and the tick of its last update.
    info: Option<(Mapping, u64)>,
}

/// mlx5_core's `MLX5_CYCLES_SHIFT`: the clock info page's `shift`.
pub(crate) const CLOCK_INFO_SHIFT: u32 = 23;
/// `clocksource_khz2mult(HCA_CORE_CLOCK_KHZ, CLOCK_INFO_SHIFT)`: ns per
/// tick times 2^shift (6.4 ns a tick, 53687091).
pub(crate) const CLOCK_INFO_MULT: u32 =
    ((1_000_000u64 << CLOCK_INFO_SHIFT) / HCA_CORE_CLOCK_KHZ) as u32;
/// How often the model refreshes the clock info page at least, in ns (the
/// page's `overflow_period`).
pub(crate) const CLOCK_INFO_PERIOD_NS: u64 = 1_000_000_000;

/// The core clock the model reports (`hca_core_clock`, kHz): a
/// ConnectX-5's 156.25 MHz.
pub(crate) const HCA_CORE_CLOCK_KHZ: u64 = 156_250;
/// The timestamp mask mlx5_ib reports (`mlx5_ib_query_device`:
/// `timestamp_mask = 0x7FFFFFFFFFFFFFFF`).
pub(crate) const TIMESTAMP_MASK: u64 = 0x7fff_ffff_ffff_ffff;

impl Default for Clock {
    fn default() -> Self {
        Clock {
            start: std::time::Instant::now(),
            last: 0,
            info: None,
        }
    }
}

impl Clock {
    /// A stamp for a CQE written now.
    pub(crate) fn stamp(&mut self) -> u64 {
        let ticks = self.ticks_now();
        self.last = ticks.max(self.last.wrapping_add(1)) & TIMESTAMP_MASK;
        if let Some((_, at)) = &self.info {
            let period = CLOCK_INFO_PERIOD_NS * HCA_CORE_CLOCK_KHZ / 1_000_000;
            if self.last.wrapping_sub(*at) & TIMESTAMP_MASK >= period {
                self.update_info();
            }
        }
        self.last
    }

    /// Ticks since the model was made.
    fn ticks_now(&self) -> u64 {
        let ns = self.start.elapsed().as_nanos();
        (ns * u128::from(HCA_CORE_CLOCK_KHZ) / 1_000_000) as u64 & TIMESTAMP_MASK
    }

    /// Keeps `page` (the model's view of the clock info page mlx5_ib maps;
    /// at least `struct mlx5_ib_clock_info` long) up to date from now on,
    /// starting with an update now.
    pub(crate) fn attach_info(&mut self, page: Mapping) {
        assert!(page.len() >= size_of::<abi::Mlx5IbClockInfo>());
        self.info = Some((page, 0));
        self.update_info();
    }

    /// Rewrites the clock info page as mlx5_core's
    /// `mlx5_update_clock_info_page`: `sign` odd, the fields, `sign` + 2.
    pub(crate) fn update_info(&mut self) {
        let cycles = self.ticks_now();
        let nsec = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let Some((page, at)) = &mut self.info else {
            return;
        };
        let base = page.as_mut_ptr();
        let u64_at = |off: usize| {
            // SAFETY: the page is mapped for as long as `self.info` holds
            // it, `off` is an 8-aligned field offset inside the record
            // (length checked in `attach_info`), and the page is shared
            // with the library, so it is only accessed through atomics.
            unsafe { AtomicU64::from_ptr(base.add(off).cast()) }
        };
        let u32_at = |off: usize| {
            // SAFETY: as `u64_at`, for a 4-aligned u32 field.
            unsafe { std::sync::atomic::AtomicU32::from_ptr(base.add(off).cast()) }
        };
        type C = abi::Mlx5IbClockInfo;
        use std::mem::offset_of;
        let sign = u32_at(offset_of!(C, sign));
        let s = sign.load(Ordering::Relaxed);
        // smp_store_mb: the odd sign is visible before any field changes.
        sign.store(
            s | abi::MLX5_IB_CLOCK_INFO_KERNEL_UPDATING,
            Ordering::Relaxed,
        );
        std::sync::atomic::fence(Ordering::SeqCst);
        u64_at(offset_of!(C, nsec)).store(nsec, Ordering::Relaxed);
        u64_at(offset_of!(C, cycles)).store(cycles, Ordering::Relaxed);
        u64_at(offset_of!(C, frac)).store(0, Ordering::Relaxed);
        u32_at(offset_of!(C, mult)).store(CLOCK_INFO_MULT, Ordering::Relaxed);
        u32_at(offset_of!(C, shift)).store(CLOCK_INFO_SHIFT, Ordering::Relaxed);
        u64_at(offset_of!(C, mask)).store(TIMESTAMP_MASK, Ordering::Relaxed);
        u64_at(offset_of!(C, overflow_period)).store(CLOCK_INFO_PERIOD_NS, Ordering::Relaxed);
        sign.store(
            (s & !abi::MLX5_IB_CLOCK_INFO_KERNEL_UPDATING).wrapping_add(2),
            Ordering::Release,
        );
        *at = cycles;
    }
}

impl Cq {
    /// A CQ of `ncqe` CQEs of `cqe_size` bytes at `buf`, its doorbell
    /// record at `db`, rung on sub-UAR `uar`: empty, unarmed, without a
    /// completion channel, not DevX's (struct update sets the rest).
    pub(crate) fn new(handle: u32, buf: u64, db: u64, ncqe: u32, cqe_size: u32, uar: u32) -> Self {
        Cq {
            handle,
            user_handle: 0,
            buf,
            db,
            ncqe,
            cqe_size,
            uar,
            pi: 0,
            armed: None,
            arms: Vec::new(),
            in_error: false,
            channel: None,
            comp_events: 0,
            async_events: 0,
            devx: false,
            create_flags: 0,
        }
    }
}

impl Qp {
    /// A QP of `transport` rung on sub-UAR `uar`, in RESET with nothing
    /// run: its queues and what it is attached to are set by struct update.
    pub(crate) fn new(handle: u32, transport: Transport, uar: u32) -> Self {
        Qp {
            handle,
            pd: 0,
            transport,
            buf: 0,
            db: 0,
            sq_cnt: 0,
            sq_offset: 0,
            rq_cnt: 0,
            rq_shift: 0,
            uidx: None,
            uar,
            bfreg: None,
            send_cq: 0,
            recv_cq: 0,
            srq: None,
            scatter_res: 0,
            scatter_req: 0,
            state: RESET,
            dest_qpn: 0,
            qkey: 0,
            rnr_retry: 0,
            access: 0,
            sq_ci: 0,
            rq_ci: 0,
            rnr_wait: false,
            db_pending: false,
            unrung: false,
            events: 0,
            attrs: FromZeros::new_zeroed(),
            wire: super::remote::Wire::default(),
        }
    }
}

impl Hca {
    /// Whether `id` names a 4 KiB UAR of a page the device knows.
    pub(crate) fn has_uar(&self, id: u32) -> bool {
        self.uars
            .iter()
            .any(|u| id >= u.page_id && id < u.page_id + u.subs() as u32)
    }

    /// Runs the device until nothing is left to do; returns WQEs executed.
    pub(crate) fn process(&mut self) -> usize {
        let mut total = 0;
        loop {
            let mut did = self.fabric_poll();
            for u in 0..self.uars.len() {
                for j in 0..self.uars[u].subs() {
                    did += self.scan_sub_uar(u, j);
                }
            }
            // QPs waiting for a receive (RNR) retry on every pass, and QPs
            // rung before RTS run once there; others run only when a
            // doorbell on their UAR says so.
            let waiting: Vec<u32> = self
                .qps
                .iter()
                .filter(|(_, q)| {
                    q.rnr_wait || q.wire.fence_wait || (q.db_pending && q.state == RTS)
                })
                .map(|(n, _)| *n)
                .collect();
            for qpn in waiting {
                if let Some(q) = self.qps.get_mut(&qpn) {
                    q.db_pending = false;
                }
                did += self.run_sq(qpn, None);
            }
            total += did;
            if did == 0 {
                if self.threaded == 0 {
                    self.check_unrung();
                }
                return total;
            }
        }
    }

    /// After a `process` call (the library's posts are complete): a QP in
    /// RTS whose doorbell record is ahead of what ran got no doorbell
    /// naming those WQEs (or a doorbell naming an older one).
    fn check_unrung(&mut self) {
        let mut found = Vec::new();
        for (qpn, q) in &self.qps {
            if q.state != RTS || q.rnr_wait || q.sq_cnt == 0 || q.unrung {
                continue;
            }
            let pc = dbrec(q.db, 1) & 0xffff;
            if pc != q.sq_ci & 0xffff {
                found.push((*qpn, pc, q.sq_ci & 0xffff));
            }
        }
        for (qpn, pc, ci) in found {
            self.violations.push(format!(
                "QP {qpn:#x}: the doorbell record says {pc} WQE basic blocks, no doorbell \
                 named the WQEs from {ci}"
            ));
            if let Some(q) = self.qps.get_mut(&qpn) {
                q.unrung = true; // reported once
            }
        }
    }

    /// Clears every register's BlueFlame buffer (what copies seen by a
    /// background thread left behind).
    pub(crate) fn clear_registers(&mut self) {
        for u in &self.uars {
            for j in 0..u.subs() {
                for (reg, buf) in self.registers(u.kind) {
                    for w in (8..buf).step_by(8) {
                        u.take(j * 4096 + reg + w);
                    }
                }
            }
        }
    }

    /// The registers of a sub-UAR, with the BlueFlame buffer behind each.
    fn registers(&self, kind: UarKind) -> Vec<(usize, usize)> {
        let b = self.bf_reg_size;
        if kind == UarKind::Nc || b == 0 {
            return (0..4).map(|k| (BF_OFFSET + k * NC_STRIDE, 0)).collect();
        }
        let mut v = Vec::with_capacity(4);
        for k in 0..2 {
            for h in 0..2 {
                v.push((BF_OFFSET + k * b + h * (b / 2), b / 2));
            }
        }
        v
    }

    fn scan_sub_uar(&mut self, u: usize, j: usize) -> usize {
        let base = j * 4096;
        let id = self.uars[u].page_id + j as u32;
        let mut did = 0;
        let arm = self.uars[u].take(base + CQ_DOORBELL);
        if arm != [0; 8] {
            self.arm(id, arm);
        }
        for (reg, buf) in self.registers(self.uars[u].kind) {
            let first = self.uars[u].take(base + reg);
            if first == [0; 8] {
                continue;
            }
            // The rest of a BlueFlame copy (process() only: the library
            // finished its stores before calling it; a background thread
            // could see a copy in flight).
            let mut rest = Vec::new();
            if self.threaded == 0 {
                for w in (8..buf).step_by(8) {
                    rest.extend_from_slice(&self.uars[u].take(base + reg + w));
                }
            }
            did += self.doorbell(id, first, &rest);
        }
        did
    }

    /// A send doorbell (`first`: the 8 bytes stored at the register, `rest`:
    /// what followed them in the BlueFlame buffer) on sub-UAR `id`.
    fn doorbell(&mut self, id: u32, first: [u8; 8], rest: &[u8]) -> usize {
        let qpn = be32(&first, 4) >> 8;
        let pi = be16(&first, 1);
        let qp = match self.qps.get(&qpn) {
            Some(qp) if qp.uar == id => qp,
            Some(qp) => {
                let msg = format!(
                    "doorbell for QP {qpn:#x} on UAR {id}, created on UAR {}",
                    qp.uar
                );
                self.ignored.push(msg);
                return 0;
            }
            None => {
                let msg = format!("doorbell for unknown QP {qpn:#x} on UAR {id}");
                self.ignored.push(msg);
                return 0;
            }
        };
        if qp.sq_cnt == 0 {
            self.violations.push(format!(
                "QP {qpn:#x}: a send doorbell on a QP without a send queue"
            ));
            return 0;
        }
        if rest.iter().any(|&b| b != 0) {
            self.check_blueflame(qpn, pi, &first, rest);
        }
        let qp = &self.qps[&qpn];
        let posted = (dbrec(qp.db, 1) & 0xffff) as u16;
        if !self.sq_has_index(qpn, pi) {
            self.violations.push(format!(
                "QP {qpn:#x}: the doorbell names WQE {pi}, which is not a WQE"
            ));
        } else if (posted.wrapping_sub(pi) as i16) <= 0 {
            self.violations.push(format!(
                "QP {qpn:#x}: the doorbell names WQE {pi}, the doorbell record covers only \
                 {posted} WQE basic blocks (record not updated first)"
            ));
        }
        let qp = &self.qps[&qpn];
        if !matches!(qp.state, RESET | RTS | ERR) {
            // Hardware holds WQEs posted before RTS (INIT, RTR) or while
            // the send queue is drained (SQD).
            if let Some(q) = self.qps.get_mut(&qpn) {
                q.db_pending = true;
            }
            return 0;
        }
        let mut did = self.run_sq(qpn, Some(pi));
        // Other QPs on this register: hardware saw each of their stores, the
        // model only the last one left in it, so a doorbell on a shared
        // register runs every QP of this UAR whose doorbell record moved.
        did += self.run_uar_peers(id, qpn);
        did
    }

    fn run_uar_peers(&mut self, uar: u32, rang: u32) -> usize {
        let peers: Vec<u32> = self
            .qps
            .iter()
            .filter(|(n, q)| **n != rang && q.uar == uar && q.state != RESET)
            .map(|(n, _)| *n)
            .collect();
        peers.into_iter().map(|n| self.run_sq(n, None)).sum()
    }

    fn sq_has_index(&self, qpn: u32, pi: u16) -> bool {
        let qp = &self.qps[&qpn];
        layout::ctrl(&self.sq_unit(qp, u32::from(pi) * 4)).wqe_index == pi
    }

    /// Reads 16-byte unit `u` (a counter from the start of the SQ, wrapped).
    pub(crate) fn sq_unit(&self, qp: &Qp, u: u32) -> Vec<u8> {
        let units = qp.sq_cnt * 4;
        let at = qp.buf + qp.sq_offset + u64::from(u & (units - 1)) * 16;
        // SAFETY: inside the QP's send queue (the buffer given at create).
        unsafe { memory::read(at, 16) }
    }

    /// The bytes of the WQE starting at WQEBB `pi`, `len` bytes, wrapped.
    fn sq_bytes(&self, qp: &Qp, pi: u32, len: usize) -> Vec<u8> {
        let mut wqe = Vec::with_capacity(len);
        for k in 0..len.div_ceil(16) {
            wqe.extend_from_slice(&self.sq_unit(qp, pi * 4 + k as u32));
        }
        wqe.truncate(len);
        wqe
    }

    fn check_blueflame(&mut self, qpn: u32, pi: u16, first: &[u8; 8], rest: &[u8]) {
        let qp = &self.qps[&qpn];
        let ds = layout::ctrl(&self.sq_unit(qp, u32::from(pi) * 4)).ds as usize;
        let len = (ds * 16).div_ceil(64) * 64;
        let mut copied = first.to_vec();
        copied.extend_from_slice(rest);
        let wqe = self.sq_bytes(qp, u32::from(pi), len);
        if len > copied.len() || copied[..len] != wqe[..] {
            self.violations.push(format!(
                "QP {qpn:#x}: the BlueFlame copy of WQE {pi} differs from the WQE in the queue"
            ));
        }
    }

    /// Executes the QP's send queue up to its doorbell record, or only up to
    /// (and including) WQE `upto`: a doorbell makes the device fetch up to
    /// the WQE it names. Returns the WQEs executed. The responses of reads
    /// and atomics left outstanding (reordering, `order.rs`) land when it
    /// stops.
    pub(crate) fn run_sq(&mut self, qpn: u32, upto: Option<u16>) -> usize {
        let mut late = Late::default();
        let did = self.run_sq_leaving(qpn, upto, &mut late);
        self.land_late(qpn, &mut late);
        did
    }

    /// [`Hca::run_sq`], leaving outstanding responses in `late`.
    fn run_sq_leaving(&mut self, qpn: u32, upto: Option<u16>, late: &mut Late) -> usize {
        let mut did = 0;
        loop {
            let Some(qp) = self.qps.get(&qpn) else {
                return did;
            };
            if qp.sq_cnt == 0 || !matches!(qp.state, RTS | ERR) {
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
            let in_error = qp.state == ERR;
            let remote_responses = qp.wire.response_pending();
            self.saw_inline.set(false);
            if order::waits_for_responses(c.fm_ce_se) {
                self.land_late(qpn, late);
                // A fenced WQE waits for the reads and atomics sent to
                // another HCA (`remote.rs`).
                if !in_error && remote_responses {
                    if let Some(q) = self.qps.get_mut(&qpn) {
                        q.wire.fence_wait = true;
                    }
                    return did;
                }
            }
            if let Some(q) = self.qps.get_mut(&qpn) {
                q.wire.fence_wait = false;
            }
            if in_error {
                self.req_cqe_in_order(qpn, &c, Err(synd::WR_FLUSH_ERR), 0, late);
            } else {
                match self.execute(qpn, at, &c) {
                    Ok(Executed::Done(done)) => {
                        if c.fm_ce_se & layout::CQ_UPDATE != 0
                            && !self.hold_behind_outstanding(qpn, &c, done.clone())
                        {
                            self.req_cqe_in_order(qpn, &c, Ok(done.in_cqe), done.bytes, late);
                        }
                    }
                    Ok(Executed::Response(r)) => self.respond(qpn, &c, r, late),
                    Ok(Executed::Posted) => {}
                    Err(Fail::Rnr) => {
                        if let Some(qp) = self.qps.get_mut(&qpn) {
                            qp.rnr_wait = true;
                        }
                        return did;
                    }
                    Err(Fail::Violation(what)) => {
                        self.violations
                            .push(format!("QP {qpn:#x} WQE {at}: {what}"));
                        self.land_late(qpn, late);
                        self.flush_outstanding(qpn);
                        self.req_cqe(qpn, &c, Err(synd::LOCAL_QP_OP_ERR), 0);
                        self.enter_error(qpn);
                    }
                    Err(Fail::Req(s)) => {
                        self.land_late(qpn, late);
                        self.flush_outstanding(qpn);
                        self.req_cqe(qpn, &c, Err(s), 0);
                        self.enter_error(qpn);
                    }
                }
            }
            if let Some(log) = self.wqe_log.as_mut() {
                log.push(super::ExecutedWqe {
                    qpn,
                    index: c.wqe_index,
                    opcode: c.opcode,
                    fm_ce_se: c.fm_ce_se,
                    ds: c.ds,
                    inline: self.saw_inline.get(),
                });
            }
            if let Some(qp) = self.qps.get_mut(&qpn) {
                qp.sq_ci = at.wrapping_add(nbb);
                qp.rnr_wait = false;
                qp.unrung = false;
            }
            did += 1;
        }
    }

    /// Moves a QP to ERR and flushes its posted receives (one flush CQE
    /// per WQE); its send queue flushes as it runs.
    pub(crate) fn enter_error(&mut self, qpn: u32) {
        self.flush_outstanding(qpn);
        loop {
            let Some(qp) = self.qps.get_mut(&qpn) else {
                return;
            };
            qp.state = ERR;
            qp.rnr_wait = false;
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
                layout::Cqe {
                    opcode: layout::cqe_op::RESP_ERR,
                    wqe_counter: idx as u16,
                    syndrome: synd::WR_FLUSH_ERR,
                    vendor_syndrome: VENDOR_FLUSH,
                    ..q
                },
            );
        }
    }

    /// A QP moved to ERR by a command: its receives and everything posted
    /// on its send queue complete with flush errors at once.
    pub(crate) fn flush(&mut self, qpn: u32) {
        self.enter_error(qpn);
        self.run_sq(qpn, None);
    }

    /// QP number and user index fields of a CQE for `qpn`.
    pub(crate) fn resp_fields(&self, qpn: u32) -> layout::Cqe {
        let qp = &self.qps[&qpn];
        let srqn_uidx = if self.cqe_v1 {
            qp.uidx.unwrap_or(0xff_ffff)
        } else {
            qp.srq.unwrap_or(0)
        };
        layout::Cqe {
            qpn,
            srqn_uidx,
            ..layout::Cqe::default()
        }
    }

    pub(crate) fn req_cqe(
        &mut self,
        qpn: u32,
        c: &layout::Ctrl,
        result: Result<Option<layout::InCqe>, u8>,
        bytes: u32,
    ) {
        let q = self.resp_fields(qpn);
        let cqn = self.qps[&qpn].send_cq;
        let cqe = match result {
            Ok(in_cqe) => layout::Cqe {
                opcode: layout::cqe_op::REQ,
                wqe_counter: c.wqe_index,
                wqe_opcode: c.opcode,
                byte_cnt: bytes,
                in_cqe,
                ..q
            },
            Err(s) => layout::Cqe {
                opcode: layout::cqe_op::REQ_ERR,
                wqe_counter: c.wqe_index,
                wqe_opcode: c.opcode,
                syndrome: s,
                vendor_syndrome: if s == synd::WR_FLUSH_ERR {
                    VENDOR_FLUSH
                } else {
                    VENDOR_OTHER
                },
                ..q
            },
        };
        self.post_cqe(cqn, cqe);
    }
}

/// The vendor syndromes the model reports (firmware-specific values; these
/// are what ConnectX firmware commonly reports for a flush, 0x79, and a
/// stand-in for the rest).
pub(crate) const VENDOR_FLUSH: u8 = 0x79;
pub(crate) const VENDOR_OTHER: u8 = 0x88;

/// Why a WQE did not complete.
#[derive(Debug)]
pub(crate) enum Fail {
    /// Requester error CQE with this syndrome; the QP goes to ERR.
    Req(u8),
    /// No receive posted and RNR retries left: try again later.
    Rnr,
    /// The WQE breaks the rules: recorded, completed as a local QP error.
    Violation(String),
}
