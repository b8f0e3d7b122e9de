//! mlx5 completion queues: CQE parsing, the consumer index, arming, and
//! cleaning a QP's CQEs.
//!
//! Facts (rdma-core `providers/mlx5/cq.c`: `get_sw_cqe`, `mlx5_parse_cqe`,
//! `handle_good_req`, `handle_responder`, `mlx5_handle_error_cqe`,
//! `update_cons_index`, `mlx5_arm_cq`, `mlx5_cq_event`, `__mlx5_cq_clean`):
//!
//! - The CQE at consumer index `ci` is valid when its opcode is not
//!   `INVALID` (15) and its owner bit equals `(ci / ncqe) & 1`; in a
//!   128-byte CQE the 64-byte CQE is the second half. The ownership byte is
//!   read first (acquire), then [`udma_from_device_barrier`], then the rest.
//!   rdma-core places a barrier after each CQE's ownership check; a poll
//!   here checks the ownership of the whole run of valid CQEs it will take
//!   (a run ends at the ring's end, so its owner bit is one value) and then
//!   places one barrier before reading any of them, which orders every
//!   body load after its own ownership load just the same. Successful
//!   requester CQEs of the QP seen last (the common case) are taken in a
//!   tight loop that reads only words 4, 5 and 7 of each (its QP, byte
//!   count and counter) and frees the send queue once, after the last
//!   `wr_id`; any other CQE goes through the general parser.
//! - A requester CQE names the last WQE it completes by `wqe_counter`, which
//!   frees the send queue up to it; a responder CQE of an RQ completes the
//!   oldest receive, of an SRQ the WQE it names. CQE v1 names the QP by the
//!   user index it was created with, v0 by QP number.
//! - After a batch, `dbrec[0] = ci & 0xffffff` (the device uses it to detect
//!   overruns: it never overwrites an unconsumed CQE, it raises CQ_ERR).
//! - Arming writes `dbrec[1]` and rings the CQ doorbell with the arm
//!   sequence number, which only advances when a completion event is read.
//! - When a QP is destroyed or reset, its CQEs already in the CQ must not
//!   surface. rdma-core compacts the CQ under the CQ's lock; here the
//!   destroying thread records "skip CQEs of this QP before index X" (X: the
//!   first CQE not yet written) and the poller, which owns the consumer
//!   side, drops them as it meets them: the same result without a lock on
//!   the poll path (one relaxed load per run of CQEs). A reset's request
//!   also restarts the tail of the QP's receive queue if it completes on
//!   this CQ (rdma-core resets the tails under the CQ's lock): the poller,
//!   its only writer, does it when it takes the request, before it takes
//!   any CQE of the QP's new epoch (see `Tail` in `qp.rs` and
//!   [`Mlx5Cq::poll`]). The send queue's tail needs no restart: its
//!   counter runs on across resets and the tail only moves forward
//!   ("Resets" in `sq.rs`).
//!
//! [`udma_from_device_barrier`]: crate::providers::barrier::udma_from_device_barrier

use std::sync::{
    atomic::{AtomicBool, AtomicU32, Ordering},
    Arc, Mutex,
};

use super::{
    buf::{CqeGeometry, CqeRun, QueueBuf},
    clock::{ClockInfo, ClockPage},
    cqe::{cqe_opcode, status_of_syndrome, Cqe64, CqeTail, CqeView},
    qp::{QpTrack, Resources},
    rq::{RecvRun, RqTrack},
    uar::{UarPage, CQ_DOORBELL},
    wqe::opcode,
};
use crate::{
    error::{Error, ErrorKind},
    providers::{barrier, SESSION_BATCH},
    wc::{WcFlags, WcOpcode, WcStatus, WorkCompletion},
};

/// The completion opcode and byte count of a successful requester CQE, by
/// its WQE opcode (`handle_good_req`; an RDMA read's byte count is the
/// CQE's): a table, so the poll loop does not branch on it.
const REQ_COMPLETION: [(WcOpcode, u8); 256] = {
    let mut t = [(WcOpcode::SEND, 0u8); 256];
    t[opcode::RDMA_WRITE as usize] = (WcOpcode::RDMA_WRITE, 0);
    t[opcode::RDMA_WRITE_IMM as usize] = (WcOpcode::RDMA_WRITE, 0);
    t[opcode::RDMA_READ as usize] = (WcOpcode::RDMA_READ, 0);
    t[opcode::ATOMIC_CS as usize] = (WcOpcode::COMP_SWAP, 8);
    t[opcode::ATOMIC_FA as usize] = (WcOpcode::FETCH_ADD, 8);
    t
};

/// Writes the work completion of a successful requester CQE (of either
/// view of it; `byte_cnt` reads its byte count, used by RDMA reads only)
/// of work request `wr_id` into `wc`.
#[inline(always)]
fn requester_wc(
    wc: &mut WorkCompletion,
    wr_id: u64,
    qp_num: u32,
    wqe_opcode: u8,
    byte_cnt: impl FnOnce() -> u32,
) {
    let (opcode, len) = REQ_COMPLETION[usize::from(wqe_opcode)];
    *wc = WorkCompletion {
        wr_id,
        status: WcStatus::SUCCESS,
        opcode,
        byte_len: if wqe_opcode == opcode::RDMA_READ {
            byte_cnt()
        } else {
            u32::from(len)
        },
        qp_num,
        ..WorkCompletion::default()
    };
}

/// The completion opcode and flags of a successful responder CQE by its
/// opcode, and the mask of its `imm_inval_pkey` that is the completion's
/// immediate (`handle_responder`; the invalidated rkey for
/// `RESP_SEND_INV`): a table, so the poll loop does not branch on it.
const RESP_COMPLETION: [(WcOpcode, WcFlags, u32); 16] = {
    let mut t = [(WcOpcode::RECV, WcFlags::empty(), 0u32); 16];
    t[cqe_opcode::RESP_WR_IMM as usize] = (WcOpcode::RECV_RDMA_WITH_IMM, WcFlags::WITH_IMM, !0);
    t[cqe_opcode::RESP_SEND_IMM as usize] = (WcOpcode::RECV, WcFlags::WITH_IMM, !0);
    t[cqe_opcode::RESP_SEND_INV as usize] = (WcOpcode::RECV, WcFlags::WITH_INVALIDATE, !0);
    t
};

/// Writes the work completion of a successful responder CQE (opcodes
/// `RESP_WR_IMM` to `RESP_SEND_INV`, of either view of it) of work request
/// `wr_id` into `wc`, as rdma-core's `handle_responder` fills it.
#[inline(always)]
fn responder_wc(wc: &mut WorkCompletion, wr_id: u64, qp_num: u32, op: u8, cqe: &impl CqeView) {
    let imm = cqe.imm_inval_pkey();
    let (opcode, mut wc_flags, imm_mask) = RESP_COMPLETION[usize::from(op & 15)];
    if cqe.grh() {
        wc_flags |= WcFlags::GRH;
    }
    *wc = WorkCompletion {
        wr_id,
        status: WcStatus::SUCCESS,
        opcode,
        vendor_err: 0,
        byte_len: cqe.byte_cnt(),
        imm_data: imm & imm_mask,
        qp_num,
        src_qp: cqe.src_qp(),
        wc_flags,
        pkey_index: (imm & 0xffff) as u16,
        slid: cqe.slid(),
        sl: cqe.sl(),
        dlid_path_bits: cqe.ml_path(),
    };
}

/// The opcode and QP number of `cqe` if it is a successful responder CQE
/// of the QP whose resource number is `rsn`.
#[inline(always)]
fn responder_of<const CQE_V1: bool>(cqe: &impl CqeView, rsn: u32) -> Option<(u8, u32)> {
    let op = cqe.opcode();
    let qp_num = cqe.qpn();
    let owner = if CQE_V1 { cqe.srqn_uidx() } else { qp_num };
    ((cqe_opcode::RESP_WR_IMM..=cqe_opcode::RESP_SEND_INV).contains(&op) && owner == rsn)
        .then_some((op, qp_num))
}

/// Entries `k..ready` of a checked run that are successful responder CQEs
/// of the QP whose resource number is `rsn`, each into `out[n]` (`n`
/// advanced) with the work request `recv` gives; stops at the first other
/// CQE and returns its index.
#[inline(always)]
fn responder_loop<const CQE_V1: bool, R: RecvRun>(
    rsn: u32,
    mut recv: R,
    run: CqeRun<'_>,
    mut k: u32,
    ready: u32,
    out: &mut [WorkCompletion],
    n: &mut usize,
) -> u32 {
    let from = k;
    let room = out.get_mut(*n..).unwrap_or_default();
    for (cqe, wc) in run.iter(k, ready).zip(room) {
        // Words 2 to 5 loaded once each (a field's word is otherwise
        // loaded per field: the loads are volatile).
        let head = [cqe.word(2), cqe.word(3), cqe.word(4), cqe.word(5)];
        let view = CqeTail::new(|i| match i {
            2..=5 => head[i - 2],
            _ => cqe.word(i),
        });
        let Some((op, qp_num)) = responder_of::<CQE_V1>(&view, rsn) else {
            break;
        };
        responder_wc(wc, recv.take(view.wqe_counter()), qp_num, op, &view);
        k += 1;
    }
    recv.finish();
    *n += (k - from) as usize;
    k
}

/// Whether a CQE whose `op_own` byte is `op_own` was handed over by the
/// device, which writes `owner` (0 or 1) as its owner bit in this pass over
/// the ring: its opcode is not `INVALID` (15) and its owner bit is
/// `owner`. In one comparison: with the owner bit cleared by the XOR when
/// it matches and rotated to the top, the byte is below `0x78` exactly when
/// it matched (bit 7 clear) and the opcode is below 15.
#[inline(always)]
fn cqe_is_valid(op_own: u8, owner: u8) -> bool {
    (op_own ^ owner).rotate_right(1) < (cqe_opcode::INVALID << 3)
}

/// Where a poll puts the device's timestamp of each completion it writes:
/// nowhere ([`NoStamps`], `ibv_poll_cq`), or a slice beside the
/// completions (`stamps[i]` for `out[i]`, a CQ created with completion
/// timestamps). A type parameter passed by value, so the plain poll is
/// compiled as it was before timestamps (`S::ON` is a constant, and
/// `NoStamps` is no argument at all).
pub(crate) trait Stamps {
    /// Whether timestamps are kept.
    const ON: bool;
    /// The timestamp of completion `i` of the poll.
    fn set(&mut self, i: usize, ts: u64);
    /// Moves the timestamp of completion `from` to `to` (`to < from`: the
    /// completions in between were dropped).
    fn shift(&mut self, from: usize, to: usize);
}

/// No timestamps (every poll but a timestamped CQ's `start_poll`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NoStamps;

impl Stamps for NoStamps {
    const ON: bool = false;
    #[inline(always)]
    fn set(&mut self, _: usize, _: u64) {}
    #[inline(always)]
    fn shift(&mut self, _: usize, _: usize) {}
}

impl Stamps for &mut [u64] {
    const ON: bool = true;
    #[inline(always)]
    fn set(&mut self, i: usize, ts: u64) {
        if let Some(s) = self.get_mut(i) {
            *s = ts;
        }
    }
    #[inline(always)]
    fn shift(&mut self, from: usize, to: usize) {
        if let Some(&ts) = self.get(from) {
            self.set(to, ts);
        }
    }
}

/// A request to drop a QP's CQEs.
#[derive(Debug, Clone, Copy)]
struct Clean {
    /// The QP's resource number (user index or QP number).
    rsn: u32,
    /// Its QP number: the completions a poll already wrote, and a polling
    /// session's buffer, are dropped by it.
    qp_num: u32,
    /// Drop its CQEs at consumer indexes before this one.
    before: u32,
}

/// The receive queue of a reset QP, which completes on this CQ, whose
/// tail the CQ's poller restarts ([`Tail::restart`](super::qp::Tail::restart))
/// in the epoch the reset began for it. The track itself, not a resource
/// number, which a QP created after this one was destroyed could have.
/// (Only receive queues: a send queue's tail only moves forward, "Resets"
/// in `sq.rs`.)
#[derive(Debug)]
pub(crate) struct Restart {
    pub(crate) rq: Arc<RqTrack>,
    pub(crate) epoch: u32,
}

/// A [`Clean`] as a QP's destroyer or resetter hands it over.
#[derive(Debug)]
struct CleanRequest {
    clean: Clean,
    restart: Option<Restart>,
}

/// A CQ's state shared by its poller, the event reader and QPs (kept until
/// the kernel CQ is destroyed).
#[derive(Debug)]
pub(crate) struct CqCore {
    pub(crate) buf: QueueBuf,
    /// How many CQEs of what size, checked.
    geometry: CqeGeometry,
    pub(crate) cqn: AtomicU32,
    /// The arm sequence number (`arm_sn`).
    pub(crate) arm_sn: AtomicU32,
    /// The consumer index the poller last published.
    ci: AtomicU32,
    clean: Mutex<Vec<CleanRequest>>,
    /// Whether `clean` has requests (set under its lock, with release).
    /// Shared with the CQ's polling session buffer ([`CqCore::clean_flag`]).
    clean_pending: Arc<AtomicBool>,
    /// The program took the CQ's direct view (`mlx5dv_init_obj`): it polls
    /// the ring itself, so a destroyed or reset QP's CQEs are left for it
    /// (libmlx5's `MLX5_CQ_FLAGS_DV_OWNED`, which `__mlx5_cq_clean` honours).
    pub(crate) dv_owned: AtomicBool,
}

impl CqCore {
    /// Set while QPs destroyed or reset have clean requests the CQ's
    /// poller has not taken ([`CqCore::clean`], [`Mlx5Cq::take_cleans`]):
    /// what a polling session checks before it hands out a completion it
    /// took off the ring earlier. Set with release under the list's lock,
    /// cleared by the poller.
    #[inline(always)]
    pub(crate) fn clean_flag(&self) -> &Arc<AtomicBool> {
        &self.clean_pending
    }

    /// CQEs in the ring and bytes per CQE.
    pub(crate) fn shape(&self) -> (u32, usize) {
        (self.geometry.ncqe(), self.geometry.cqe_size())
    }

    /// A CQ of `ncqe` (a power of two) CQEs of `cqe_size` bytes, each
    /// marked invalid (`op_own = 0xF0`).
    #[cfg(test)]
    pub(crate) fn new(ncqe: u32, cqe_size: usize) -> crate::Result<Self> {
        Self::new_in(ncqe, cqe_size, |len| {
            QueueBuf::new(len, "allocate mlx5 CQ buffer")
        })
    }

    /// [`CqCore::new`] with the buffer `alloc` makes for the CQEs' bytes
    /// (`mlx5_alloc_cq_buf`: an allocation type, or a parent domain's
    /// allocator); it must hold them all.
    pub(crate) fn new_in(
        ncqe: u32,
        cqe_size: usize,
        alloc: impl FnOnce(usize) -> crate::Result<QueueBuf>,
    ) -> crate::Result<Self> {
        let geometry = CqeGeometry::new(ncqe, cqe_size).ok_or_else(|| {
            Error::new(
                "ibv_create_cq",
                ErrorKind::InvalidArgument,
                format!(
                    "{ncqe} CQEs of {cqe_size} bytes: an mlx5 CQ has a power of two \
                     of 64- or 128-byte CQEs"
                ),
            )
        })?;
        let buf = alloc(ncqe as usize * cqe_size)?;
        if buf.cqes(geometry).is_none() {
            return Err(Error::new(
                "ibv_create_cq",
                ErrorKind::Malformed,
                "the CQ buffer is smaller than its CQEs (a bug in the mlx5 sizing)",
            ));
        }
        for i in 0..ncqe as usize {
            buf.fill(i * cqe_size + cqe_size - 1, 1, 0xf0);
        }
        Ok(CqCore {
            buf,
            geometry,
            cqn: AtomicU32::new(0),
            arm_sn: AtomicU32::new(0),
            ci: AtomicU32::new(0),
            clean: Mutex::new(Vec::new()),
            clean_pending: Arc::new(AtomicBool::new(false)),
            dv_owned: AtomicBool::new(false),
        })
    }

    /// Offset of the 64-byte CQE of consumer index `ci`.
    #[inline(always)]
    fn cqe64_at(&self, ci: u32) -> usize {
        let g = self.geometry;
        (ci & (g.ncqe() - 1)) as usize * g.cqe_size() + g.cqe_size() - 64
    }

    /// Whether the CQE at `ci` has been written by the device.
    #[inline(always)]
    fn owned(&self, ci: u32) -> Option<usize> {
        let at = self.cqe64_at(ci);
        let op_own = self.buf.load_u8(at + 63)?;
        cqe_is_valid(op_own, u8::from(ci & self.geometry.ncqe() != 0)).then_some(at)
    }

    /// Marks the CQEs of QP `rsn` (QP number `qp_num`) now in the CQ for
    /// dropping (a QP was destroyed or reset: the device writes no more of
    /// them), and after a reset has the poller `restart` the tail of the
    /// QP's receive queue, if it completes here, before it takes any CQE
    /// after them. Called before the reset is published to posts (so
    /// before the device can complete a WQE of the new epoch): the release
    /// store here is what the poller's check in [`Mlx5Cq::poll`] sees. The
    /// poller drops the QP's completions it already took off the ring too
    /// (a polling session's buffer: [`Mlx5Cq::take_cleans`]).
    pub(crate) fn clean(&self, rsn: u32, qp_num: u32, restart: Option<Restart>) {
        if self.dv_owned.load(Ordering::Acquire) {
            return;
        }
        let mut ci = self.ci.load(Ordering::Acquire);
        let end = ci.wrapping_add(self.geometry.ncqe());
        while ci != end && self.owned(ci).is_some() {
            ci = ci.wrapping_add(1);
        }
        let mut list = self.clean.lock().unwrap_or_else(|p| p.into_inner());
        list.push(CleanRequest {
            clean: Clean {
                rsn,
                qp_num,
                before: ci,
            },
            restart,
        });
        self.clean_pending.store(true, Ordering::Release);
    }
}

/// The CQE size of a new CQ, as libmlx5's `get_cqe_size`: the size asked
/// for, else the `MLX5_CQE_SIZE` environment variable (read as C's `atoi`
/// reads it), else 64; anything but 64 or 128 is `EINVAL`.
pub(crate) fn cqe_size(asked: Option<u16>, env: Option<&std::ffi::OsStr>) -> crate::Result<usize> {
    let size = match (asked, env) {
        (Some(s), _) => i64::from(s),
        (None, Some(v)) => atoi(v.as_encoded_bytes()),
        (None, None) => 64,
    };
    match size {
        64 | 128 => Ok(size as usize),
        _ => Err(Error::new(
            "ibv_create_cq",
            ErrorKind::InvalidArgument,
            format!(
                "a CQE of {size} bytes{}: mlx5 CQEs are 64 or 128 bytes",
                if asked.is_none() {
                    " (MLX5_CQE_SIZE)"
                } else {
                    ""
                }
            ),
        )),
    }
}

/// C's `atoi`: leading white space, a sign, then decimal digits; 0 when
/// none (and, unlike C, no overflow: it saturates).
fn atoi(b: &[u8]) -> i64 {
    let mut it = b
        .iter()
        .copied()
        .skip_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .peekable();
    let neg = match it.peek() {
        Some(b'-') => {
            it.next();
            true
        }
        Some(b'+') => {
            it.next();
            false
        }
        _ => false,
    };
    let mut v: i64 = 0;
    for c in it.take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(c - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

/// The consumer side of an mlx5 CQ.
#[derive(Debug)]
pub(crate) struct Mlx5Cq {
    pub(crate) core: Arc<CqCore>,
    pub(crate) uar: Arc<UarPage>,
    ci: u32,
    parser: Parser,
    /// The context's clock info page (`clock.rs`), when the kernel maps
    /// one, and the copy of it the CQ converts timestamps with (rdma-core's
    /// `mlx5_cq::last_clock_info`).
    clock: Option<(Arc<ClockPage>, ClockInfo)>,
}

/// What turning CQEs into work completions needs (apart from the CQ's
/// memory, so both can be borrowed at once).
#[derive(Debug)]
struct Parser {
    resources: Arc<Resources>,
    /// The QP of the last CQE (most CQs serve one or two QPs).
    last: Option<Arc<QpTrack>>,
    /// Clean requests taken from the shared list.
    cleaning: Vec<Clean>,
    cqe_v1: bool,
}

impl Mlx5Cq {
    pub(crate) fn new(
        core: Arc<CqCore>,
        uar: Arc<UarPage>,
        resources: Arc<Resources>,
        cqe_v1: bool,
    ) -> Self {
        Mlx5Cq {
            core,
            uar,
            ci: 0,
            parser: Parser {
                resources,
                last: None,
                cleaning: Vec::new(),
                cqe_v1,
            },
            clock: None,
        }
    }

    /// The CQ with the context's clock info page, and a first copy of it
    /// (waiting out an update in progress).
    pub(crate) fn with_clock(mut self, page: Option<Arc<ClockPage>>) -> Self {
        self.clock = page.map(|p| {
            let info = p.read_blocking();
            (p, info)
        });
        self
    }

    /// Takes a fresh copy of the clock info page, as libmlx5's `start_poll`
    /// does on a CQ with wall-clock timestamps once it found a CQE
    /// (`mlx5dv_get_clock_info`). When the kernel is updating the page
    /// on every try (where libmlx5's `start_poll` fails with `EBUSY`), the
    /// previous copy stays: it converts correctly, only from further back.
    /// A few atomic loads; no system call.
    #[inline]
    pub(crate) fn refresh_clock(&mut self) {
        if let Some((page, info)) = &mut self.clock {
            if let Some(fresh) = page.read() {
                *info = fresh;
            }
        }
    }

    /// Device ticks to the kernel's real-time nanoseconds with the CQ's
    /// copy of the clock info ([`ClockInfo::ts_to_ns`]); `None` without a
    /// clock info page.
    #[inline]
    pub(crate) fn ts_to_ns(&self, ticks: u64) -> Option<u64> {
        self.clock.as_ref().map(|(_, info)| info.ts_to_ns(ticks))
    }

    /// Takes the CQ's clean requests now, as the next poll would (the
    /// ring's side is the same: the poll drops the QPs' CQEs still in the
    /// ring as it meets them, and restarts the receive queues' tails here),
    /// and reports each request's QP number to `stale`: a polling session
    /// drops the completions of that QP it took off the ring before the
    /// request (`src/cq_poll.rs`). Only when [`CqCore::clean_flag`] is set.
    #[cold]
    #[inline(never)]
    pub(crate) fn take_cleans(&mut self, stale: &mut dyn FnMut(u32)) {
        let from = self.parser.cleaning.len();
        take_clean(&self.core, &mut self.parser);
        for c in self.parser.cleaning.get(from..).unwrap_or_default() {
            stale(c.qp_num);
        }
        // Requests whose CQEs are all behind the consumer index are done
        // (the poll prunes them the same way once it moved).
        let ci = self.ci;
        self.parser
            .cleaning
            .retain(|c| (c.before.wrapping_sub(ci) as i32) > 0);
    }

    /// Moves up to `out.len()` completions into `out`.
    ///
    /// Clean requests ([`CqCore::clean`]) are taken after each run's
    /// barrier, before any of its CQEs is read, not once when the poll
    /// starts: a poll that began before a QP was reset may meet the CQEs of
    /// the QP's new epoch, and must restart its receive queue's tail first
    /// (else it frees the new epoch's receives from the old epoch's tail).
    /// The chain that makes the check see the request: the resetter stores
    /// `clean_pending` with release, then publishes the reset to posts
    /// with release (the QP's gate word, `src/qp.rs`); the poster loads the
    /// gate with acquire before it writes any WQE of the new epoch, and
    /// rings its doorbell after `udma_to_device_barrier` and
    /// `mmio_wc_start` (cumulative barriers: every store the poster has
    /// seen, the request included, is visible before the doorbell); the
    /// device writes the CQE after it executed the WQE; the poller loads
    /// the CQE's ownership byte (acquire) and then
    /// `udma_from_device_barrier` (`providers/barrier.rs`: `lfence` on
    /// x86_64, `dmb oshld` on aarch64, orders the loads before it, the
    /// ownership bytes, before the loads after it) before loading
    /// `clean_pending`, which so cannot be older than the request. A relaxed
    /// load, one per run: the lock is taken only when it is set (cold).
    /// (A run whose check came before a reset may still read a slot the
    /// restarted poster wrote again: see "Resets" in `sq.rs`.)
    #[inline(always)]
    pub(crate) fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        self.poll_with(out, NoStamps)
    }

    /// One batch of a polling session ([`Provider::poll_cq_batch`]):
    /// [`Mlx5Cq::poll`] into the session's buffer, and with `stamps` the
    /// timestamp of `out[i]` into `stamps[i]` (`mlx5_cqe64`'s `timestamp`;
    /// 0 for a completion in error: an error CQE has none, `struct
    /// mlx5_err_cqe`). Copies of the poll of their own, compiled for the
    /// buffer's length.
    ///
    /// [`Provider::poll_cq_batch`]: crate::providers::Provider::poll_cq_batch
    #[inline(always)]
    pub(crate) fn poll_batch(
        &mut self,
        out: &mut [WorkCompletion; SESSION_BATCH],
        stamps: Option<&mut [u64; SESSION_BATCH]>,
    ) -> usize {
        match stamps {
            None => self.poll_batch_plain(out),
            Some(ts) => self.poll_batch_stamped(out, ts),
        }
    }

    /// [`Mlx5Cq::poll_batch`] without timestamps.
    #[inline(never)]
    fn poll_batch_plain(&mut self, out: &mut [WorkCompletion; SESSION_BATCH]) -> usize {
        self.poll_with(out, NoStamps)
    }

    /// [`Mlx5Cq::poll_batch`] with timestamps.
    #[inline(never)]
    fn poll_batch_stamped(
        &mut self,
        out: &mut [WorkCompletion; SESSION_BATCH],
        stamps: &mut [u64; SESSION_BATCH],
    ) -> usize {
        self.poll_with(out, &mut stamps[..])
    }

    /// [`Mlx5Cq::poll`] into `out` (a slice, or the session's array),
    /// keeping timestamps in `stamps`.
    ///
    /// The fast paths know nothing of timestamps: each CQE they take gives
    /// one completion, in order, so the timestamps of what they took are
    /// read afterwards, from the same CQEs (still the library's: the
    /// consumer index is published at the end of the poll).
    #[inline]
    fn poll_with<S: Stamps, O: AsMut<[WorkCompletion]> + ?Sized>(
        &mut self,
        out: &mut O,
        mut stamps: S,
    ) -> usize {
        let out = out.as_mut();
        let core = &*self.core;
        let Some(ring) = core.buf.cqes(core.geometry) else {
            return 0;
        };
        let ncqe = core.geometry.ncqe();
        let start = self.ci;
        let mut ci = start;
        let mut n = 0;
        while n < out.len() {
            // The run of CQEs the device has handed over, up to what `out`
            // still takes and the ring's end (so the owner bit the device
            // writes is the same for all): their ownership bytes first,
            // then one barrier for the whole run, then their bodies. Every
            // body load follows the barrier, which follows its own CQE's
            // ownership load: the ordering rdma-core gets with a barrier
            // per CQE (`mlx5_get_next_cqe`), at the cost of one per run.
            let run = ring.run(ci, (out.len() - n).min(ncqe as usize) as u32);
            let owner = u8::from(ci & ncqe != 0);
            let mut ready = 0;
            for cqe in run.iter(0, run.len()) {
                if !cqe_is_valid(cqe.op_own(), owner) {
                    break;
                }
                ready += 1;
            }
            if ready == 0 {
                break;
            }
            barrier::udma_from_device_barrier();
            // After the barrier: see the function's comment.
            if core.clean_pending.load(Ordering::Relaxed) {
                let from = self.parser.cleaning.len();
                take_clean(core, &mut self.parser);
                if n != 0 {
                    let taken = self.parser.cleaning.get(from..).unwrap_or_default();
                    n = drop_taken(taken, out.get_mut(..n).unwrap_or_default(), &mut stamps);
                }
            }
            let mut k = 0;
            while k < ready {
                // The common cases in tight loops (one copy per CQE
                // format, so the loop does not test it), then one CQE of
                // any kind (which may change the cached QP).
                let (k0, n0) = (k, n);
                k = if self.parser.cqe_v1 {
                    self.parser.fast_runs::<true>(run, k, ready, out, &mut n)
                } else {
                    self.parser.fast_runs::<false>(run, k, ready, out, &mut n)
                };
                if S::ON {
                    debug_assert_eq!((k - k0) as usize, n - n0, "one completion per CQE");
                    for (j, cqe) in run.iter(k0, k).enumerate() {
                        stamps.set(n0 + j, u64::from_be(cqe.word(6)));
                    }
                }
                if k >= ready {
                    break;
                }
                let (Some(cqe), Some(wc)) = (run.get(k), out.get_mut(n)) else {
                    break;
                };
                // Receive fields only for responder CQEs (opcodes 1..=4).
                let op = cqe.op_own() >> 4;
                let whole = Cqe64(cqe.read((1..=4).contains(&op)));
                let parsed = self.parser.parse(&whole, ci.wrapping_add(k), wc);
                if S::ON && parsed {
                    let failed = matches!(op, cqe_opcode::REQ_ERR | cqe_opcode::RESP_ERR);
                    stamps.set(n, if failed { 0 } else { whole.timestamp() });
                }
                n += usize::from(parsed);
                k += 1;
            }
            ci = ci.wrapping_add(k);
            if k < run.len() {
                break;
            }
        }
        if ci != start {
            self.ci = ci;
            self.core.buf.set_dbrec(0, ci & 0x00ff_ffff);
            self.core.ci.store(ci, Ordering::Release);
            if !self.parser.cleaning.is_empty() {
                self.parser
                    .cleaning
                    .retain(|c| (c.before.wrapping_sub(ci) as i32) > 0);
            }
        }
        n
    }
}

/// The completions of `out` (this poll's so far) of no QP `taken` names,
/// moved to its front in order with their timestamps; returns how many.
/// A QP destroyed or reset while the poll ran (its request taken between
/// two runs) may have completions in the runs before: they were written
/// before the request was taken, so all of that QP's are old (its new
/// epoch's CQEs come after the request, "Resets" in `sq.rs`).
#[cold]
#[inline(never)]
fn drop_taken<S: Stamps>(taken: &[Clean], out: &mut [WorkCompletion], stamps: &mut S) -> usize {
    let mut kept = 0;
    for i in 0..out.len() {
        if taken.iter().any(|c| c.qp_num == out[i].qp_num) {
            continue;
        }
        if kept != i {
            out[kept] = out[i];
            stamps.shift(i, kept);
        }
        kept += 1;
    }
    kept
}

/// Takes the CQ's clean requests into the poller's list, restarting the
/// tails of reset QPs' receive queues in the epochs the requests carry.
#[cold]
fn take_clean(core: &CqCore, parser: &mut Parser) {
    let mut list = core.clean.lock().unwrap_or_else(|p| p.into_inner());
    for req in list.drain(..) {
        if let Some(r) = req.restart {
            r.rq.tail.restart(r.epoch);
        }
        parser.cleaning.push(req.clean);
    }
    core.clean_pending.store(false, Ordering::Relaxed);
    parser.last = None;
}

impl Parser {
    /// The QP a CQE belongs to: the last one seen (no lock, no reference
    /// count touched), or one looked up in the context's table.
    #[inline]
    fn qp_of(&mut self, rsn: u32) -> Option<&QpTrack> {
        let hit = self
            .last
            .as_ref()
            .is_some_and(|t| t.rsn == rsn && t.is_alive());
        if !hit {
            self.last = Some(self.resources.find(rsn)?);
        }
        self.last.as_deref()
    }

    /// The cached QP, if the fast paths may take its CQEs: no QP's CQEs
    /// are being cleaned, and it is still alive.
    #[inline(always)]
    fn fast_qp(&self) -> Option<&QpTrack> {
        let qp = self.last.as_deref()?;
        (self.cleaning.is_empty() && qp.is_alive()).then_some(qp)
    }

    /// The fast paths, one after the other, from entry `k` of a run whose
    /// ownership was checked: requester CQEs, then receives of a receive
    /// queue, then of an SRQ; returns the index of the first CQE none of
    /// them took (`ready` if they took all).
    #[inline(always)]
    fn fast_runs<const CQE_V1: bool>(
        &self,
        run: CqeRun<'_>,
        mut k: u32,
        ready: u32,
        out: &mut [WorkCompletion],
        n: &mut usize,
    ) -> u32 {
        k = self.requester_run::<CQE_V1>(run, k, ready, out, n);
        if k < ready {
            k = self.responder_run::<CQE_V1>(run, k, ready, out, n);
        }
        if k < ready {
            k = self.srq_run::<CQE_V1>(run, k, ready, out, n);
        }
        k
    }

    /// The fast path over entries `k..ready` of a run whose ownership was
    /// checked: successful requester CQEs of the cached QP, none of them
    /// cleaned, each into `out[n]` (`n` advanced), read from their words 4,
    /// 5 and 7 alone, as [`Parser::parse`] would; stops at the first other
    /// CQE and returns its index. The send queue is freed once, after the
    /// last `wr_id` was read (one compare-exchange with release per run,
    /// [`SqTrack::free`](super::sq::SqTrack::free): a release makes the
    /// compiler reload what it holds in registers).
    #[inline(always)]
    fn requester_run<const CQE_V1: bool>(
        &self,
        run: CqeRun<'_>,
        mut k: u32,
        ready: u32,
        out: &mut [WorkCompletion],
        n: &mut usize,
    ) -> u32 {
        let Some(qp) = self.fast_qp() else {
            return k;
        };
        let sq = &*qp.sq;
        let Some(slots) = sq.slots() else {
            return k;
        };
        // The tail to free to, valid once `k` moved: as an `Option` it made
        // the compiler peel the loop's first CQE (the call's fixed part
        // grew by about 60 instructions).
        let mut freed = 0;
        let from = k;
        let room = out.get_mut(*n..).unwrap_or_default();
        for (cqe, wc) in run.iter(k, ready).zip(room) {
            let tail = CqeTail::new(|i| cqe.word(i));
            let qp_num = tail.qpn();
            let rsn = if CQE_V1 { tail.srqn_uidx() } else { qp_num };
            if tail.opcode() != cqe_opcode::REQ || rsn != qp.rsn {
                break;
            }
            let Some((wr_id, to, raw)) = slots.take(tail.wqe_counter()) else {
                break;
            };
            requester_wc(wc, wr_id, qp_num, tail.wqe_opcode(), || tail.byte_cnt());
            if raw {
                wc.opcode = WcOpcode::DRIVER2;
            }
            freed = to;
            k += 1;
        }
        *n += (k - from) as usize;
        if k != from {
            sq.free(freed);
        }
        k
    }

    /// The fast path over entries `k..ready` of a run whose ownership was
    /// checked, for receives: successful responder CQEs of the cached QP,
    /// none of them cleaned, each into `out[n]` (`n` advanced), as
    /// [`Parser::parse`] would; stops at the first other CQE and returns
    /// its index. The receives come from the QP's receive queue, in order
    /// (a QP on an SRQ: [`Parser::srq_run`]).
    #[inline(always)]
    fn responder_run<const CQE_V1: bool>(
        &self,
        run: CqeRun<'_>,
        k: u32,
        ready: u32,
        out: &mut [WorkCompletion],
        n: &mut usize,
    ) -> u32 {
        let Some(qp) = self.fast_qp() else {
            return k;
        };
        match (&qp.srq, &qp.rq) {
            (None, Some(rq)) => match rq.run() {
                Some(rq) => responder_loop::<CQE_V1, _>(qp.rsn, rq, run, k, ready, out, n),
                None => k,
            },
            _ => k,
        }
    }

    /// [`Parser::responder_run`] for a QP on an SRQ: each CQE's receive is
    /// the WQE it names, linked back onto the SRQ's free list under its
    /// lock, taken once for the run (out of line: SRQs are the rarer case,
    /// and a loop for them in the poll made the others' register
    /// allocation worse).
    #[inline(never)]
    fn srq_run<const CQE_V1: bool>(
        &self,
        run: CqeRun<'_>,
        k: u32,
        ready: u32,
        out: &mut [WorkCompletion],
        n: &mut usize,
    ) -> u32 {
        let Some(qp) = self.fast_qp() else {
            return k;
        };
        let Some(srq) = &qp.srq else {
            return k;
        };
        // The SRQ's lock only for a run that starts with one of its
        // receives (a CQ shared by QPs may alternate between them).
        let starts = run.get(k).is_some_and(|c| {
            responder_of::<CQE_V1>(&CqeTail::new(|i| c.word(i)), qp.rsn).is_some()
        });
        if !starts {
            return k;
        }
        match srq.run() {
            Some(recv) => responder_loop::<CQE_V1, _>(qp.rsn, recv, run, k, ready, out, n),
            None => k,
        }
    }

    /// Turns a CQE into the work completion `wc` (every field written);
    /// false, with `wc` untouched, for a CQE that does not surface (a
    /// cleaned QP's, one naming no known QP, or a kind this library never
    /// asks for).
    #[inline]
    fn parse(&mut self, cqe: &Cqe64, ci: u32, wc: &mut WorkCompletion) -> bool {
        let qp_num = cqe.qpn();
        let rsn = if self.cqe_v1 { cqe.srqn_uidx() } else { qp_num };
        if !self.cleaning.is_empty()
            && self
                .cleaning
                .iter()
                .any(|c| c.rsn == rsn && (c.before.wrapping_sub(ci) as i32) > 0)
        {
            return false;
        }
        let Some(qp) = self.qp_of(rsn) else {
            return false;
        };
        match cqe.opcode() {
            cqe_opcode::REQ => {
                let (wr_id, raw) = qp.sq.complete(cqe.wqe_counter());
                requester_wc(wc, wr_id, qp_num, cqe.wqe_opcode(), || cqe.byte_cnt());
                if raw {
                    wc.opcode = WcOpcode::DRIVER2;
                }
            }
            op @ (cqe_opcode::RESP_WR_IMM
            | cqe_opcode::RESP_SEND
            | cqe_opcode::RESP_SEND_IMM
            | cqe_opcode::RESP_SEND_INV) => {
                let wr_id = qp.complete_recv(cqe.wqe_counter());
                responder_wc(wc, wr_id, qp_num, op, cqe);
            }
            op @ (cqe_opcode::REQ_ERR | cqe_opcode::RESP_ERR) => {
                let wr_id = if op == cqe_opcode::REQ_ERR {
                    qp.sq.complete(cqe.wqe_counter()).0
                } else {
                    qp.complete_recv(cqe.wqe_counter())
                };
                *wc = WorkCompletion {
                    wr_id,
                    status: status_of_syndrome(cqe.syndrome()),
                    vendor_err: u32::from(cqe.vendor_err_synd()),
                    qp_num,
                    ..WorkCompletion::default()
                };
            }
            // Resize and other CQEs this library never asks for.
            _ => return false,
        }
        true
    }
}

impl Mlx5Cq {
    /// Arms the CQ (`mlx5_arm_cq`).
    pub(crate) fn arm(&self, solicited_only: bool) {
        let sn = self.core.arm_sn.load(Ordering::Acquire) & 3;
        let cmd = if solicited_only { 1 << 24 } else { 0 };
        let v = sn << 28 | cmd | (self.ci & 0x00ff_ffff);
        self.core.buf.set_dbrec(1, v);
        barrier::mmio_wc_start();
        let cqn = self.core.cqn.load(Ordering::Relaxed);
        let doorbell = (u64::from(v) << 32 | u64::from(cqn)).to_be_bytes();
        self.uar.store64(CQ_DOORBELL, doorbell);
        barrier::mmio_flush_writes();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cqe_size_is_libmlx5s() {
        use std::ffi::OsStr;
        assert_eq!(cqe_size(None, None).unwrap(), 64);
        assert_eq!(cqe_size(Some(128), Some(OsStr::new("64"))).unwrap(), 128);
        assert_eq!(cqe_size(None, Some(OsStr::new("128"))).unwrap(), 128);
        // atoi: white space, a sign, digits, then anything.
        assert_eq!(cqe_size(None, Some(OsStr::new("  +128abc"))).unwrap(), 128);
        for bad in ["", "abc", "100", "-64", "256"] {
            let e = cqe_size(None, Some(OsStr::new(bad))).unwrap_err();
            assert_eq!(e.errno(), crate::sys::Errno::EINVAL, "{bad:?}");
        }
        assert!(cqe_size(Some(100), None).is_err());
        assert!(cqe_size(Some(0), None).is_err());
    }

    /// The one-comparison test against the two-part definition, for every
    /// `op_own` byte and both owner values.
    #[test]
    fn cqe_validity_is_opcode_not_invalid_and_owner_bit_matching() {
        for owner in [0u8, 1] {
            for op_own in 0..=u8::MAX {
                let expected = op_own >> 4 != 15 && op_own & 1 == owner;
                assert_eq!(cqe_is_valid(op_own, owner), expected, "{op_own:#x} {owner}");
            }
        }
    }

    /// A receive's completion, by CQE opcode, as rdma-core's
    /// `handle_responder` fills it (expected values written by hand from
    /// it), through both views of the CQE.
    #[test]
    fn responder_completions_carry_what_handle_responder_reports() {
        use super::super::cqe::tail_of;
        let cases = [
            (
                cqe_opcode::RESP_WR_IMM,
                WcOpcode::RECV_RDMA_WITH_IMM,
                WcFlags::WITH_IMM,
                true,
            ),
            (
                cqe_opcode::RESP_SEND,
                WcOpcode::RECV,
                WcFlags::empty(),
                false,
            ),
            (
                cqe_opcode::RESP_SEND_IMM,
                WcOpcode::RECV,
                WcFlags::WITH_IMM,
                true,
            ),
            (
                cqe_opcode::RESP_SEND_INV,
                WcOpcode::RECV,
                WcFlags::WITH_INVALIDATE,
                true,
            ),
        ];
        for (op, opcode, flags, has_imm) in cases {
            for grh in [false, true] {
                let mut b = [0u8; 64];
                b[17] = 0x85; // ml_path: bits 0..7 are the path bits
                b[22..24].copy_from_slice(&0x1234u16.to_be_bytes()); // slid
                let flags_rqpn = u32::from(grh) << 28 | 0x7 << 24 | 0x00ab_cdef;
                b[24..28].copy_from_slice(&flags_rqpn.to_be_bytes());
                b[36..40].copy_from_slice(&0xdead_beefu32.to_be_bytes());
                b[44..48].copy_from_slice(&77u32.to_be_bytes());
                b[63] = op << 4;
                let cqe = Cqe64(b);
                let expected = WorkCompletion {
                    wr_id: 9,
                    status: WcStatus::SUCCESS,
                    opcode,
                    vendor_err: 0,
                    byte_len: 77,
                    imm_data: if has_imm { 0xdead_beef } else { 0 },
                    qp_num: 0x42,
                    src_qp: 0x00ab_cdef,
                    wc_flags: if grh { flags | WcFlags::GRH } else { flags },
                    pkey_index: 0xbeef,
                    slid: 0x1234,
                    sl: 7,
                    dlid_path_bits: 5,
                };
                let mut wc = WorkCompletion::default();
                responder_wc(&mut wc, 9, 0x42, op, &cqe);
                assert_eq!(wc, expected, "op {op}, grh {grh}");
                let mut wc = WorkCompletion::default();
                responder_wc(&mut wc, 9, 0x42, op, &tail_of(&cqe));
                assert_eq!(wc, expected, "op {op}, grh {grh}, tail view");
            }
        }
    }

    /// The completions a poll wrote before it took a clean request: the
    /// named QPs' go, the others move up in order with their timestamps.
    #[test]
    fn a_poll_drops_what_it_wrote_of_a_qp_whose_clean_it_took() {
        let qps = [1u32, 7, 2, 7, 7, 3, 9, 1];
        let mut out: Vec<WorkCompletion> = qps
            .iter()
            .enumerate()
            .map(|(i, &qp_num)| WorkCompletion {
                wr_id: i as u64,
                qp_num,
                ..WorkCompletion::default()
            })
            .collect();
        let mut ts: Vec<u64> = (0..8).map(|i| 100 + i).collect();
        let taken = [
            Clean {
                rsn: 70,
                qp_num: 7,
                before: 5,
            },
            Clean {
                rsn: 90,
                qp_num: 9,
                before: 5,
            },
        ];
        let n = drop_taken(&taken, &mut out, &mut &mut ts[..]);
        let kept: Vec<(u64, u32)> = out[..n].iter().map(|w| (w.wr_id, w.qp_num)).collect();
        assert_eq!(kept, [(0, 1), (2, 2), (5, 3), (7, 1)]);
        assert_eq!(ts[..n], [100, 102, 105, 107], "each its own timestamp");
        let mut none = out.clone();
        assert_eq!(drop_taken(&[], &mut none, &mut NoStamps), 8);
        assert_eq!(none, out);
    }

    /// A CQ's shape is checked when it is made (a poll then checks only
    /// that the buffer holds it).
    #[test]
    fn a_cq_of_a_shape_no_cq_has_is_refused() {
        for (ncqe, size) in [(12, 64), (0, 64), (16, 96), (16, 32)] {
            let e = CqCore::new(ncqe, size).expect_err("not a CQ's shape");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{ncqe} x {size}: {e}");
        }
        for (ncqe, size) in [(1, 64), (16, 64), (16, 128)] {
            let core = CqCore::new(ncqe, size).expect("a CQ's shape");
            assert!(core.buf.cqes(core.geometry).is_some(), "{ncqe} x {size}");
        }
    }
}
