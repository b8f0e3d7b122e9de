//! mlx5 send queues: WQE building and the send doorbell.
//!
//! Behaviour follows rdma-core `providers/mlx5/qp.c` (`_mlx5_post_send`,
//! `set_data_ptr_seg`, `set_data_ptr_seg_atomic`, `set_data_inl_seg`,
//! `post_send_db`, `mlx5_bf_copy`); segment bytes come from `wqe.rs`.
//!
//! A WQE is a ctrl segment, then by opcode a datagram segment (UD), a
//! remote-address segment (RDMA, atomics), an atomic segment, and the data:
//! inline bytes or data segments. It occupies whole 64-byte basic blocks
//! (WQEBBs); segments are written 16 bytes at a time at `(unit) mod (queue
//! units)`, so a WQE, an inline segment or a data list may wrap from the end
//! of the queue to its start, as the device reads it.
//!
//! The doorbell, once per posted batch: [`udma_to_device_barrier`], the
//! doorbell record (`db[1]`, in WQEBBs), [`mmio_wc_start`] (under the lock
//! of a shared bfreg), then either a BlueFlame copy of the single WQE (only
//! for one inline WQE of more than one 16-byte unit that fits half the BF
//! register; ascending 64-bit stores, 64 bytes at a time) or one 64-bit
//! store of the first 8 bytes of the **last** WQE's ctrl segment, then
//! [`mmio_flush_writes`], and the register half toggled on every ring.
//!
//! # Resets
//!
//! A RESET restarts the ring: the device takes WQEs from WQEBB 0 again and
//! `on_qp_state` zeroes the doorbell record, so the poster's WQEBB counter
//! (`cur_post`) goes back to 0. Its work-request counter (`head`, recorded
//! in each WQE's slot; the poller's tail is the slot's value plus one) does
//! not: it runs on across resets. rdma-core restarts both counters and the
//! tail under the CQ's lock; here the poller takes no lock, so a poller
//! inside a run of the QP's CQEs when the QP is reset may store the tail it
//! computed from them after the poster restarted (the CQ's clean request
//! drops the QP's CQEs still in it, but that run was under way). With the
//! counters back at 0, that stale tail was ahead of the restarted counter
//! (the queue looked full for good) or behind it (WQEs the device had not
//! executed looked free).
//!
//! With a counter that runs on, the tail only has to move forward
//! ([`SqTrack::free`]: a compare-exchange that stores a tail only ahead of
//! the one there), and the restart moves it up to the counter: every WQE
//! posted before it is dead (the device dropped them at the reset, their
//! CQEs are cleaned), none is outstanding. A stale tail is that of a WQE
//! posted before the restart, so at most the counter there. Each store is
//! a compare-exchange, which reads the latest value in the tail's
//! modification order: if the restart's comes first, the stale one finds
//! the tail ahead and stores nothing; if the stale one comes first, the
//! restart's moves the tail past it. (A tail read that is not the latest is
//! at most the latest: the word only grows.) Tails of the WQEs posted since
//! lie ahead and move it on. From the restart on, the tail is exact,
//! whatever the poller stores late: the send path's room is what it was
//! before resets were looked at (one acquire load, one subtraction, no
//! epoch, no check), and no reset or clean request stores or restarts this
//! tail. (The receive queue's tail is tagged with an epoch instead, `Tail`
//! in `qp.rs`: a receive's CQE does not name its WQE, the poller finds it
//! at the tail, whose counter so restarts with the ring.)
//!
//! Forward is in wrapping order: `new` is ahead of `cur` if `new - cur` is
//! in `1..2^31`. A valid tail is at most `max_post` ahead of the tail there
//! (the poster keeps at most `max_post` outstanding). A stale tail meets
//! the restart's tail or an older one (the poller stores tails in CQE
//! order, and there is one poller at a time: polling takes the CQ's
//! `&mut`; so it stores a stale tail before any of the new epoch), and it
//! lies less than `max_post` behind the restart's: it follows a WQE whose
//! completion was not yet stored at the reset, one of the at most
//! `max_post` the poster had outstanding. Only a poller stalled inside one
//! run across several resets holds an older one, each reset moving the
//! counter at most `max_post` on (while the poller stores nothing, the
//! poster posts at most `max_post` after a restart). To be taken for ahead
//! it would have to fall 2^31 behind: with `max_post` at most 2^16 (a CQE
//! names its WQE by a 16-bit WQEBB counter), 2^15 resets, each four
//! commands to the kernel, during one run.
//!
//! The cost is the poller's: its one release store per run of completions
//! became a compare-exchange loop (`lock cmpxchg` on x86_64, `casl` on
//! aarch64; about as many instructions, one locked instruction more). On
//! the poster's side, correcting a late stale tail instead (counting a
//! tail behind the restart's counter as that counter, out of line, only
//! once the room it read ran out) cost the one-request send batches 5 to
//! 16 instructions in every form tried (`benches/callgrind.sh --mlx5`:
//! with a call there, LLVM keeps fewer of the batch's values in
//! registers), and with a 32-bit counter it would misread a valid tail
//! once the counter had gone 2^32 past the restart.
//!
//! What the counter does not cover: the slots are indexed by the WQEBB
//! counter, which does restart. A poller that checked the CQ's clean
//! requests before the reset and reads the slot of an old CQE only after
//! the poster, past a whole RESET..RTS cycle, wrote it again in the new
//! epoch, reads a value of the new epoch: the wrong `wr_id`, and a tail up
//! to a WQE that may not have executed. That window is the poller's
//! (between its check and its read of the slot), shared with the receive
//! queue's `wr_id`s, and only the poller can close it (a check after its
//! reads).
//!
//! [`udma_to_device_barrier`]: crate::providers::barrier::udma_to_device_barrier
//! [`mmio_wc_start`]: crate::providers::barrier::mmio_wc_start
//! [`mmio_flush_writes`]: crate::providers::barrier::mmio_flush_writes

use std::{
    borrow::Borrow,
    sync::{atomic::Ordering, Arc},
};

mod session;
mod track;

use session::Cursor;
pub(crate) use session::SqSession;
pub(crate) use track::{SqSlot, SqTrack};

/// What the caller of a push knows of its request before any check: on
/// the typed path ([`crate::WrSession`]) the QP's type was checked once
/// for the session and the request's operation is one that type carries
/// (its builder exists only for such types), so the per-request checks of
/// the operation against the QP type fold away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// Nothing: a [`SendWr`] from `post_send` or a send batch, any
    /// operation, any destination.
    Nothing,
    /// A request of a typed session on a QP of that type: a UD QP's
    /// requests carry a destination, a connected QP's none, and the
    /// operation is one the type carries.
    Typed {
        /// The session is for a UD QP.
        ud: bool,
    },
}

use super::{
    buf::{QueueBuf, Units, UnitsView},
    uar::{Bfreg, Ring},
    wqe::{self, opcode, Av, DS, SEND_WQE_BB},
};
use crate::{
    providers::barrier,
    wr::{Payload, PostErrorKind, SendFlags, SendOp, SendWr, Sge},
    QpType,
};

/// 16-byte units in a 64-byte send WQE basic block.
const UNITS_PER_BB: u32 = (SEND_WQE_BB / DS) as u32;

/// The send queue of an mlx5 QP (the poster's side).
#[derive(Debug)]
pub(crate) struct Mlx5Sq {
    /// What does not change after creation.
    shape: SqShape,
    /// What the device was given, and the send session's cursor.
    state: SqState,
}

/// What a send queue's posting changes: what the device was given, and
/// where the open send session is (`sq/session.rs`).
#[derive(Debug, Clone, Copy, Default)]
struct SqState {
    posted: Posted,
    /// The send session's cursor (meaningful while one is open: set when
    /// it begins, written back by views that suspend).
    open: Cursor,
}

/// A send queue's counters: what was handed to the device.
#[derive(Debug, Clone, Copy, Default)]
struct Posted {
    /// WQEBB counter of the next WQE (back to 0 at a restart, as the
    /// device's).
    cur_post: u32,
    /// Work requests posted since the queue was made: it runs on across
    /// restarts ("Resets" in the module's documentation).
    head: u32,
}

/// The parts of a send queue fixed at creation.
#[derive(Debug)]
struct SqShape {
    /// The queue, in 16-byte units (it starts after the RQ).
    units: Units,
    /// Most work requests outstanding at once.
    max_post: u32,
    /// What a request is checked against and its WQE made with.
    rules: SqRules,
    bfreg: Arc<Bfreg>,
    track: Arc<SqTrack>,
}

/// The queue's settings a WQE is checked against and written with, copied
/// into a send batch's [`Writer`]: in a local they stay in registers over a
/// batch, where read through a reference they are reloaded after every
/// store to the queue (the compiler must assume the store may change
/// them). `post_send`'s writer reads them by reference (see [`Writer`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SqRules {
    max_gs: u32,
    max_inline: u32,
    qpn: u32,
    /// A UD QP (an address vector per request).
    ud: bool,
    /// The widest class of operation the QP type carries ([`OpClass`]).
    carries: OpClass,
    /// The ctrl segment's `fm_ce_se` byte for each combination of the
    /// FENCE, SIGNALED and SOLICITED flags (`sq_sig_all` folded in), byte
    /// `flags & 7` of the word (a shift, no memory access).
    fm_ce_se: u64,
}

/// The classes of send operations, each carried by fewer QP types than
/// the one before: sends by every type, RDMA writes by RC and UC, reads and
/// atomics by RC only. A QP type carries the classes up to its widest, so
/// whether it carries an operation is one comparison with a constant (the
/// compiler hoists it out of a loop of requests as one flag per class,
/// where a bit mask of opcodes became a vector test of every opcode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum OpClass {
    Send,
    Write,
    ReadAtomic,
}

impl OpClass {
    /// The widest class QP type `qp_type` carries.
    fn widest(qp_type: QpType) -> Self {
        match qp_type {
            QpType::Rc => OpClass::ReadAtomic,
            QpType::Uc => OpClass::Write,
            // UD (the only other type an mlx5 send queue is made for).
            _ => OpClass::Send,
        }
    }
}

/// `fm_ce_se` by the low three `IBV_SEND_*` bits (FENCE 1, SIGNALED 2,
/// SOLICITED 4), as `_mlx5_post_send` sets it: byte `bits` of the word.
fn fm_ce_se_table(sig_all: bool) -> u64 {
    let mut t = [0u8; 8];
    for (bits, fm) in t.iter_mut().enumerate() {
        let f = SendFlags::from_bits_truncate(bits as u32);
        if f.contains(SendFlags::SIGNALED) || sig_all {
            *fm |= wqe::CTRL_CQ_UPDATE;
        }
        if f.contains(SendFlags::SOLICITED) {
            *fm |= wqe::CTRL_SOLICITED;
        }
        if f.contains(SendFlags::FENCE) {
            *fm |= wqe::CTRL_FENCE;
        }
    }
    u64::from_le_bytes(t)
}

/// What writing WQEs touches: the ring and the completion slots copied out
/// of the queue's structures, so they stay in registers over a batch (the
/// compiler cannot keep fields read through a reference there across
/// writes to the queue, which it must assume may alias them; see
/// [`UnitsView`]), and the queue's settings, `R`: either a copy
/// ([`SqRules`]), for the same reason, or a reference (`&SqRules`).
///
/// Which one is a trade (`benches/callgrind.sh --mlx5`, `benches/mlx5.sh`):
/// a copy is loaded whole when the batch starts, which a loop of requests
/// repays (a send batch of 64 RDMA writes: 45 instructions per request
/// against 57 by reference, 3.1 against 3.9 ns), but one request alone
/// pays for it in registers spilled to the stack. `post_send` reads them
/// by reference: its requests are decoded one by one, whatever their
/// number, and by reference it was faster at 1, 8 and 64 requests.
#[derive(Debug, Clone, Copy)]
struct Writer<'a, R> {
    q: UnitsView<'a>,
    slots: &'a [SqSlot],
    slot_mask: u32,
    rules: R,
}

impl<R: Borrow<SqRules>> Writer<'_, R> {
    /// Records the work request of the WQE at WQEBB counter `at`. (Not
    /// through [`Slots`](track::Slots): making one per batch costs a batch of one six
    /// instructions, and the poster's check per request stays anyway.)
    #[inline(always)]
    fn record(&self, at: u32, wr_id: u64, head: u32) {
        if let Some(slot) = self.slots.get((at & self.slot_mask) as usize) {
            slot.wrid.store(wr_id, Ordering::Relaxed);
            slot.head.store(head, Ordering::Relaxed);
            slot.raw.store(false, Ordering::Relaxed);
        }
    }

    /// Writes a WQE the program built (`mlx5_wr_raw_wqe`) at WQEBB counter
    /// `at`, as work request number `head`: its `ds` 16-byte units, the
    /// ring wrapping under them, with the WQE index in its ctrl segment's
    /// `opmod_idx_opcode` replaced by `at` (everything else, the QP number,
    /// DS, flags and opcode included, is the program's); the completion
    /// slot marks it raw.
    #[inline]
    fn write_raw(&self, wqe: &[u8], ds: u32, at: u32, wr_id: u64, head: u32) -> Last {
        let first = at.wrapping_mul(UNITS_PER_BB);
        let mut ctrl = [0u8; 16];
        ctrl.copy_from_slice(&wqe[..16]);
        let idx_opcode = u32::from_be_bytes([ctrl[0], ctrl[1], ctrl[2], ctrl[3]]);
        let fixed = (idx_opcode & 0xff00_00ff) | ((at & 0xffff) << 8);
        ctrl[..4].copy_from_slice(&fixed.to_be_bytes());
        let seg = |b: &[u8]| {
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&b[i..i + 8]);
                u64::from_ne_bytes(w)
            };
            wqe::Seg([word(0), word(8)])
        };
        for i in 1..ds {
            let o = i as usize * DS;
            self.q.put(first.wrapping_add(i), seg(&wqe[o..o + DS]));
        }
        let ctrl = seg(&ctrl);
        self.q.put(first, ctrl);
        if let Some(slot) = self.slots.get((at & self.slot_mask) as usize) {
            slot.wrid.store(wr_id, Ordering::Relaxed);
            slot.head.store(head, Ordering::Relaxed);
            slot.raw.store(true, Ordering::Relaxed);
        }
        Last {
            at,
            ds,
            head: ctrl.head(),
            inline: false,
        }
    }

    /// Checks a request (RC `_mlx5_post_send`'s checks) and writes its WQE
    /// at WQEBB counter `at`, as work request number `head`, in one pass;
    /// returns what the doorbell needs of it. Publishes nothing (the
    /// doorbell record does).
    #[inline(always)]
    fn write_wqe(
        &self,
        wr: &SendWr<'_>,
        av_of: &impl for<'w> Fn(&SendWr<'w>) -> Result<&'w Av, PostErrorKind>,
        at: u32,
        head: u32,
        known: Known,
    ) -> Result<Last, PostErrorKind> {
        let rules: &SqRules = self.rules.borrow();
        let q = self.q;
        let first = at.wrapping_mul(UNITS_PER_BB);
        let mut u = first + 1; // after the ctrl segment
        let ud = match known {
            Known::Nothing => rules.ud,
            Known::Typed { ud } => ud,
        };
        if ud {
            let Some(dest) = wr.ud else {
                return Err(PostErrorKind::BadDestination(
                    "a send on a UD QP needs a destination (SendWr::to)",
                ));
            };
            let mut av = *av_of(wr)?;
            av.dqp_dct = dest.remote_qpn & 0x00ff_ffff;
            av.ext = true;
            av.key = u64::from(dest.remote_qkey) << 32;
            for seg in av.segs() {
                q.put(u, seg);
                u += 1;
            }
        } else if wr.ud.is_some() {
            return Err(PostErrorKind::BadDestination(
                "a UD destination was given for a connected (RC/UC) QP",
            ));
        }
        // Whether the QP type carries the opcode, checked in each arm
        // before its segments are written (checked after them, the
        // compiler merged it with the SGE count's check into one branch and
        // chose the error before it, on every request).
        let carried = |class: OpClass, op: u8| {
            if known == Known::Nothing && class > rules.carries {
                return Err(PostErrorKind::OpNotSupported(if rules.ud {
                    "UD QPs support only SEND and SEND_WITH_IMM"
                } else {
                    "UC QPs support no RDMA read and no atomics"
                }));
            }
            Ok(op)
        };
        let (opcode, imm) = match wr.op {
            SendOp::Send => (carried(OpClass::Send, opcode::SEND)?, 0),
            SendOp::SendWithImm { imm } => (carried(OpClass::Send, opcode::SEND_IMM)?, imm),
            SendOp::RdmaWrite { remote_addr, rkey } => {
                let op = carried(OpClass::Write, opcode::RDMA_WRITE)?;
                q.put(u, wqe::raddr(remote_addr, rkey));
                u += 1;
                (op, 0)
            }
            SendOp::RdmaWriteWithImm {
                remote_addr,
                rkey,
                imm,
            } => {
                let op = carried(OpClass::Write, opcode::RDMA_WRITE_IMM)?;
                q.put(u, wqe::raddr(remote_addr, rkey));
                u += 1;
                (op, imm)
            }
            SendOp::RdmaRead { remote_addr, rkey } => {
                let op = carried(OpClass::ReadAtomic, opcode::RDMA_READ)?;
                q.put(u, wqe::raddr(remote_addr, rkey));
                u += 1;
                (op, 0)
            }
            SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                let op = carried(OpClass::ReadAtomic, opcode::ATOMIC_CS)?;
                q.put(u, wqe::raddr(remote_addr, rkey));
                q.put(u + 1, wqe::atomic(swap, compare));
                u += 2;
                (op, 0)
            }
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                let op = carried(OpClass::ReadAtomic, opcode::ATOMIC_FA)?;
                q.put(u, wqe::raddr(remote_addr, rkey));
                q.put(u + 1, wqe::atomic(add, 0));
                u += 2;
                (op, 0)
            }
            SendOp::LocalInvalidate { .. }
            | SendOp::SendWithInvalidate { .. }
            | SendOp::BindMw(_)
            | SendOp::AtomicWrite { .. } => return Err(mlx5_lacks(wr.op)),
        };
        let atomic = matches!(opcode, opcode::ATOMIC_CS | opcode::ATOMIC_FA);
        match wr.payload {
            Payload::Inline(data) => {
                if atomic || opcode == opcode::RDMA_READ {
                    return Err(PostErrorKind::OpNotSupported(
                        "inline data is for sends and RDMA writes, not reads or atomics",
                    ));
                }
                if data.len() > rules.max_inline as usize {
                    return Err(PostErrorKind::InlineTooLong {
                        given: data.len(),
                        max: rules.max_inline,
                    });
                }
                if !data.is_empty() {
                    u += q.put_stream(u, wqe::inline_header(data.len() as u32), data);
                }
            }
            Payload::Sges(sges) => {
                if sges.len() > rules.max_gs as usize {
                    return Err(PostErrorKind::TooManySges {
                        given: sges.len(),
                        max: rules.max_gs,
                    });
                }
                if atomic {
                    // The local SGE of an atomic is always 8 bytes
                    // (`set_data_ptr_seg_atomic`).
                    let [s] = sges else {
                        return Err(PostErrorKind::BadAtomic(
                            "an atomic needs exactly one 8-byte local SGE for the old value",
                        ));
                    };
                    q.put(u, wqe::data(8, s.lkey, s.addr));
                    u += 1;
                } else {
                    // No branch per SGE: each is written, and counted
                    // (kept) unless empty. An empty SGE's segment is
                    // written over by the next one, or lies past the WQE's
                    // end (its DS), unread. It stays in this WQE's room:
                    // the geometry (`qp.rs`) sizes every WQE for the
                    // largest op's segments plus `max_gs` data segments,
                    // checked above, and the room check keeps that many
                    // blocks free from `at` (`max_post` WQEs of that size
                    // fit the ring), so no WQE the device may read is hit.
                    let put = |u: &mut u32, s: &Sge| {
                        q.put(*u, wqe::data(s.length, s.lkey, s.addr));
                        *u += u32::from(s.length != 0);
                    };
                    // One SGE, the common case, without the loop's setup.
                    if let [s] = sges {
                        put(&mut u, s);
                    } else {
                        for s in sges {
                            put(&mut u, s);
                        }
                    }
                }
            }
        }
        let ds = u.wrapping_sub(first);
        let fm_ce_se = (rules.fm_ce_se >> ((wr.flags.bits() & 7) * 8)) as u8;
        let pi = (at & 0xffff) as u16;
        let ctrl = wqe::ctrl(
            pi,
            opcode,
            0,
            rules.qpn,
            ds as u8,
            fm_ce_se,
            imm.to_be_bytes(),
        );
        q.put(first, ctrl);
        self.record(at, wr.wr_id, head);
        Ok(Last {
            at,
            ds,
            head: ctrl.head(),
            inline: matches!(wr.payload, Payload::Inline(_)),
        })
    }
}

/// The refusal of the operations this provider builds no WQE for. libmlx5
/// binds windows and invalidates locally through UMR WQEs, sends with
/// invalidate as `MLX5_OPCODE_SEND_INVAL` and writes atomically with its
/// own opcode (rdma-core providers/mlx5/qp.c); none of them is built here.
#[cold]
fn mlx5_lacks(op: SendOp) -> PostErrorKind {
    PostErrorKind::OpNotSupported(match op {
        SendOp::BindMw(_) => "uverbs' mlx5 provider does not bind memory windows (UMR WQEs)",
        SendOp::AtomicWrite { .. } => "uverbs' mlx5 provider does not post atomic writes",
        _ => "uverbs' mlx5 provider does not post invalidations (local or with a send)",
    })
}

/// WQE basic blocks of a WQE of `ds` 16-byte units. A WQE has at most 63
/// units (the ctrl segment's DS field), so the sum cannot overflow; written
/// out because `div_ceil` takes three instructions more.
#[inline(always)]
#[allow(clippy::manual_div_ceil)]
fn wqebbs(ds: u32) -> u32 {
    (ds + UNITS_PER_BB - 1) / UNITS_PER_BB
}

/// What the doorbell needs of the last WQE of a batch, kept from its
/// writing (read back from the queue, it cost a batch of one five more
/// instructions).
#[derive(Debug, Clone, Copy)]
struct Last {
    /// WQEBB counter of its ctrl segment.
    at: u32,
    /// 16-byte units.
    ds: u32,
    /// The first 8 bytes of its ctrl segment, as written.
    head: [u8; 8],
    inline: bool,
}

/// The queue geometry a send queue is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SqGeometry {
    pub(crate) offset: usize,
    pub(crate) wqe_cnt: u32,
    pub(crate) max_post: u32,
    pub(crate) max_gs: u32,
    pub(crate) max_inline: u32,
}

impl SqShape {
    /// The writer of this queue's WQEs, with the queue's settings as
    /// `rules` gives them (a copy or a reference: see [`Writer`]).
    #[inline(always)]
    fn writer<'a, R>(&'a self, rules: impl FnOnce(&'a SqRules) -> R) -> Writer<'a, R> {
        Writer {
            q: self.units.view(),
            slots: &self.track.slots,
            slot_mask: self.track.mask,
            rules: rules(&self.rules),
        }
    }

    /// The 16-byte units a WQE may take: [`SqShape::max_post`] WQEs of
    /// that many whole basic blocks fit the ring (at most 63, the ctrl
    /// segment's DS field).
    pub(crate) fn max_ds(&self) -> u32 {
        let bbs = (self.track.mask + 1) / self.max_post.max(1);
        (bbs * UNITS_PER_BB).min(63)
    }

    /// How many more requests fit, with `head` posted so far.
    #[inline(always)]
    fn room(&self, head: u32) -> u32 {
        let outstanding = head.wrapping_sub(self.track.tail.load(Ordering::Acquire));
        self.max_post.saturating_sub(outstanding)
    }

    /// Rings the doorbell for a batch of `nreq` WQEs ending with `last`,
    /// the queue posted up to WQEBB counter `cur_post`; a BlueFlame copy
    /// reads the WQE through `q`, the batch's view of the ring (its base
    /// and mask already in registers).
    #[inline(always)]
    fn ring(&self, cur_post: u32, last: Last, nreq: usize, q: UnitsView<'_>) {
        barrier::udma_to_device_barrier();
        self.units.buf().set_dbrec(1, cur_post & 0xffff);
        let ring = self.bfreg.begin();
        barrier::mmio_wc_start();
        // BlueFlame only for one inline WQE that fits half the register;
        // the common case (not inline) decided by the first test.
        let bytes = (last.ds as usize * DS).next_multiple_of(SEND_WQE_BB);
        if last.inline && nreq == 1 && last.ds > 1 && bytes <= ring.bf_size() {
            Self::blueflame(q, last.at, bytes, &ring);
        } else {
            // The first 8 bytes of the last WQE's ctrl segment.
            ring.doorbell(last.head);
        }
        barrier::mmio_flush_writes();
        ring.end();
    }

    /// Copies the WQE at WQEBB counter `at` to the BlueFlame register:
    /// ascending 64-bit stores, 64 bytes at a time, wrapping the source at
    /// the end of the queue (`mlx5_bf_copy`).
    #[inline(always)]
    fn blueflame(q: UnitsView<'_>, at: u32, bytes: usize, ring: &Ring<'_>) {
        for bb in 0..bytes / SEND_WQE_BB {
            let Some(block) = q.read_bb(at.wrapping_add(bb as u32)) else {
                return;
            };
            ring.bf_block(bb, &block);
        }
    }
}

impl Mlx5Sq {
    /// The send queue of geometry `g` in `buf`; `None` if the geometry does
    /// not fit the buffer.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        buf: Arc<QueueBuf>,
        g: SqGeometry,
        qpn: u32,
        qp_type: QpType,
        sig_all: bool,
        bfreg: Arc<Bfreg>,
        track: Arc<SqTrack>,
    ) -> Option<Self> {
        let units = Units::new(buf, g.offset, g.wqe_cnt.checked_mul(UNITS_PER_BB)?)?;
        Some(Mlx5Sq {
            shape: SqShape {
                units,
                max_post: g.max_post,
                rules: SqRules {
                    max_gs: g.max_gs,
                    max_inline: g.max_inline,
                    qpn,
                    ud: qp_type == QpType::Ud,
                    carries: OpClass::widest(qp_type),
                    fm_ce_se: fm_ce_se_table(sig_all),
                },
                bfreg,
                track,
            },
            state: SqState::default(),
        })
    }

    /// The completion side of the queue (unit tests complete by hand).
    #[cfg(test)]
    pub(crate) fn track(&self) -> &Arc<SqTrack> {
        &self.shape.track
    }

    /// Moves the work-request counter on to `head`, as if that many
    /// requests had been posted and completed (tests reach the counter's
    /// wrap this way).
    #[cfg(test)]
    pub(crate) fn skip_to(&mut self, head: u32) {
        self.state.posted.head = head;
        self.shape.track.tail.store(head, Ordering::Release);
    }

    /// Restarts the queue (the QP went through RESET): the WQEBB counter
    /// back to 0, as the device's; the work-request counter runs on, and
    /// the tail moves up to it, every WQE posted before being dead ("Resets"
    /// in the module's documentation).
    pub(crate) fn reset(&mut self) {
        self.state.posted.cur_post = 0;
        self.shape.track.free(self.state.posted.head);
    }

    /// Writes one WQE per request and rings the doorbell once for those
    /// written (`post_send`): a send batch of the requests. On a failure at
    /// `i`, WQEs before `i` are rung and `Err((i, kind))` returned; nothing
    /// of request `i` is published (its checks may fail after some of its
    /// segments were written, into its WQE's room, which the device does
    /// not read: the doorbell record stops before it).
    ///
    /// Through a send session's push, not a loop of its own: the session's
    /// view holds the queue's counters in registers (`benches/callgrind.sh --mlx5`: 265
    /// instructions instead of 287 for one RDMA write, 327 instead of 355
    /// for an inline SEND, the same per request in 64). Its settings it
    /// reads by reference ([`Writer`]).
    #[inline]
    pub(crate) fn post(
        &mut self,
        wrs: &[SendWr<'_>],
        av_of: impl for<'w> Fn(&SendWr<'w>) -> Result<&'w Av, PostErrorKind>,
    ) -> Result<(), (usize, PostErrorKind)> {
        let mut batch = self.start_with(|rules| rules);
        for (i, wr) in wrs.iter().enumerate() {
            if let Err(kind) = batch.push(wr, &av_of, Known::Nothing) {
                batch.complete(i);
                return Err((i, kind));
            }
        }
        batch.complete(wrs.len());
        Ok(())
    }
}
