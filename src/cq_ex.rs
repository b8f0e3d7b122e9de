//! Extended CQ polling: libibverbs' `ibv_cq_ex` session (`ibv_start_poll`,
//! `ibv_next_poll`, `ibv_end_poll`) and its per-field readers
//! (`ibv_wc_read_*`), as [`CompletionQueue::start_poll`] and [`CqPoll`].
//!
//! | libibverbs (`ibv_cq_ex`) | uverbs |
//! |---|---|
//! | `ibv_create_cq_ex` with `wc_flags` (`IBV_WC_EX_WITH_*`) | [`crate::Context::create_cq`] with [`crate::CqOptions::wc_flags`] ([`WcExFlags`]) |
//! | `ibv_start_poll(cq, &attr)` (`ENOENT`: empty) | [`CompletionQueue::start_poll`] (`None`: empty) |
//! | `ibv_next_poll(cq)` | [`CqPoll::next`] (`false`: no more) |
//! | `ibv_end_poll(cq)` | drop of the [`CqPoll`], or [`CqPoll::end`] |
//! | `cq->wr_id`, `cq->status` | [`CqPoll::wr_id`], [`CqPoll::status`] |
//! | `ibv_wc_read_opcode`, `ibv_wc_read_vendor_err`, `ibv_wc_read_byte_len` | [`CqPoll::opcode`], [`CqPoll::vendor_err`], [`CqPoll::byte_len`] |
//! | `ibv_wc_read_imm_data`, `ibv_wc_read_invalidated_rkey` | [`CqPoll::imm_data`], [`CqPoll::invalidated_rkey`] (`Option`, by the completion's flags) |
//! | `ibv_wc_read_qp_num`, `ibv_wc_read_src_qp`, `ibv_wc_read_wc_flags` | [`CqPoll::qp_num`], [`CqPoll::src_qp`], [`CqPoll::wc_flags`] |
//! | `ibv_wc_read_slid`, `ibv_wc_read_sl`, `ibv_wc_read_dlid_path_bits` | [`CqPoll::slid`], [`CqPoll::sl`], [`CqPoll::dlid_path_bits`] |
//! | `ibv_wc_read_completion_ts`, `ibv_wc_read_completion_wallclock_ns` | [`CqPoll::completion_ts`], [`CqPoll::completion_wallclock_ns`] (mlx5; `None` unless asked for at create) |
//! | (all of `struct ibv_wc` at once) | [`CqPoll::work_completion`], [`CqPoll::pkey_index`] |
//!
//! # How it works, and why
//!
//! libibverbs' providers read each field out of the CQE in place, with the
//! CQ's lock held from `start_poll` to `end_poll`. uverbs' providers have a
//! batch poll ([`CompletionQueue::poll`]) whose inner loops are the
//! optimised part of the data path (mlx5: one barrier per run of CQEs, the
//! send queue freed once per run, receives of an SRQ taken under one lock
//! per run). A session reuses it instead of a second, per-CQE decoder: the
//! CQ keeps [`BATCH`] completions (and their timestamps), allocated with
//! the CQ, that `start_poll` and [`CqPoll::next`] fill with one batch poll
//! (a copy of the provider's poll compiled for the batch's length) when
//! they are used up, and the accessors read the current one. Per
//! completion that is the batch poll's cost and a few instructions, no
//! allocation and no system call; a batch of 64 spreads the poll's fixed
//! cost (the ownership run, the barrier, the consumer index) thinner than
//! the 16 a program typically polls at once, which pays for part of the session's
//! bookkeeping (`benches/callgrind.sh --mlx5`). A per-CQE reader could not keep the
//! per-run work (the SRQ's lock cannot be held across the program's code
//! between two `next` calls), and it would need a barrier per CQE.
//!
//! The session keeps its position in the batch in itself (in registers,
//! in a loop) and writes it back to the CQ when it ends. The batch poll
//! takes its completions off the ring (and frees the work requests they
//! complete), so completions a session leaves unread stay in the CQ's
//! batch: the next session returns them first, and so does
//! [`CompletionQueue::poll`]; none is lost.
//!
//! # Destroyed and reset QPs
//!
//! libmlx5 removes the CQEs of a QP that is destroyed or reset from its
//! CQs (`__mlx5_cq_clean`, called by `mlx5_destroy_qp` and by
//! `mlx5_modify_qp` to RESET, under the CQ's lock, so after any session
//! open at the time). uverbs' mlx5 provider drops those still in the ring
//! as its poller meets them (`providers/mlx5/cq/poll.rs`), and the
//! completions a session already took off the ring go too: the provider
//! sets a flag the CQ shares with its batch (one relaxed load, checked
//! before a completion taken earlier is handed out: at `start_poll`, at
//! each [`CqPoll::next`] inside a batch, and in [`CompletionQueue::poll`]
//! before what a session left), and on seeing it the batch drops the
//! QPs' completions it holds (the provider's `take_cq_cleans`). So once the
//! destroy or the reset has returned, no session, open or new, and no
//! `poll` hands out a completion of the QP from before; with the common
//! `wr_id = (uintptr_t)request` idiom a program may free the QP's
//! requests then. (A completion handed out while the destroy runs on
//! another thread is the program's to order, as with any poll racing a
//! destroy.) A reset QP's new work completes after the reset published
//! its state, so none of its new completions is in the batch when the
//! flag is seen. The QP is named by its number in the batch, which holds
//! work completions only: a QP created with the destroyed one's number
//! before its destroy returned (the device's numbering makes that rare)
//! could lose completions it made in that window. rxe removes nothing:
//! rdma-core's rxe leaves a destroyed QP's completions in the CQ
//! (`rxe_destroy_qp`), and so do the kernel and uverbs' rxe provider, whose
//! flag is never set.

use std::{
    fmt,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use crate::{
    providers::{AnyCq, SESSION_BATCH as BATCH},
    wc::{WcExFlags, WcFlags, WcOpcode, WcStatus, WorkCompletion},
    CompletionQueue,
};

/// The completions a CQ's sessions have taken off the ring, and which of
/// them no session has handed out yet.
pub(crate) struct PollBuf {
    state: PollState,
    entries: Box<Entries>,
    /// The CQ's clean flag (the provider's): set, a QP was destroyed or
    /// reset, and its completions in the batch must go before another is
    /// handed out (see [`CqPoll`]).
    stale: Arc<AtomicBool>,
}

/// What of a CQ's [`PollBuf`] is unread (written when a session ends).
#[derive(Debug, Clone, Copy)]
struct PollState {
    /// The first entry not handed out.
    next: u32,
    /// Entries from `next` on not handed out (`next + left <= BATCH`).
    left: u32,
    /// The CQ was created with either timestamp
    /// ([`WcExFlags::COMPLETION_TIMESTAMP`],
    /// [`WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK`]): the batch poll keeps
    /// timestamps.
    stamped: bool,
    /// [`WcExFlags::COMPLETION_TIMESTAMP`]: [`CqPoll::completion_ts`]
    /// reports them.
    raw_ts: bool,
    /// [`WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK`]: each batch refreshes
    /// the provider's conversion, and [`CqPoll::completion_wallclock_ns`]
    /// reports it.
    wallclock: bool,
}

/// The batch itself, on the heap (3.5 KiB with its timestamps: the CQ
/// handle stays small to move).
struct Entries {
    wc: [WorkCompletion; BATCH],
    ts: [u64; BATCH],
}

impl Entries {
    /// Drops the completions of QP `qp_num` among entries `from..to`,
    /// moving the others (with their timestamps) together from `from` on,
    /// in order; returns where they end.
    fn drop_qp(&mut self, from: usize, to: usize, qp_num: u32) -> usize {
        let mut kept = from;
        for i in from..to.min(BATCH) {
            if self.wc[i].qp_num == qp_num {
                continue;
            }
            if kept != i {
                self.wc[kept] = self.wc[i];
                self.ts[kept] = self.ts[i];
            }
            kept += 1;
        }
        kept
    }
}

/// Entries `from..end` of a batch, after the completions of the QPs
/// destroyed or reset since they were taken off the ring are dropped
/// (the provider's [`AnyCq::take_cleans`]); returns their new end. Cold:
/// only when the CQ's clean flag is set.
#[cold]
#[inline(never)]
fn drop_stale(entries: &mut Entries, ring: &mut AnyCq, from: u32, end: u32) -> u32 {
    let from = from as usize;
    let mut to = end as usize;
    ring.take_cleans(&mut |qp_num| to = entries.drop_qp(from, to, qp_num));
    // At most `end`, itself at most `BATCH`.
    to as u32
}

impl PollBuf {
    /// An empty batch, for a CQ created with `wc_flags` whose clean flag
    /// is `stale` ([`AnyCqShared::clean_flag`](crate::providers::AnyCqShared::clean_flag)).
    pub(crate) fn new(wc_flags: WcExFlags, stale: Arc<AtomicBool>) -> Self {
        PollBuf {
            state: PollState {
                next: 0,
                left: 0,
                stamped: wc_flags.intersects(WcExFlags::TIMESTAMPS),
                raw_ts: wc_flags.contains(WcExFlags::COMPLETION_TIMESTAMP),
                wallclock: wc_flags.contains(WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK),
            },
            entries: Box::new(Entries {
                wc: [WorkCompletion::default(); BATCH],
                ts: [0; BATCH],
            }),
            stale,
        }
    }

    /// Whether a session left completions unread (the check
    /// [`CompletionQueue::poll`] makes first).
    #[inline(always)]
    pub(crate) fn has_unread(&self) -> bool {
        self.state.left != 0
    }

    /// [`CompletionQueue::poll`] when a session left completions unread:
    /// those first (but a destroyed or reset QP's, `stale` being set),
    /// then the ring for the rest of `out`.
    #[cold]
    #[inline(never)]
    pub(crate) fn poll_unread(&mut self, ring: &mut AnyCq, out: &mut [WorkCompletion]) -> usize {
        let st = &mut self.state;
        if self.stale.load(Ordering::Relaxed) {
            let end = drop_stale(&mut self.entries, ring, st.next, st.next + st.left);
            st.left = end - st.next;
        }
        let from = st.next as usize;
        let k = (st.left as usize).min(out.len());
        let (head, rest) = out.split_at_mut(k);
        if let Some(unread) = self.entries.wc.get(from..from + k) {
            head.copy_from_slice(unread);
        }
        // `k <= left <= BATCH`.
        st.next += k as u32;
        st.left -= k as u32;
        if rest.is_empty() {
            k
        } else {
            k + ring.poll(rest)
        }
    }

    /// [`CompletionQueue::start_poll`] on the CQ's ring and batch.
    #[inline]
    pub(crate) fn start<'a>(&'a mut self, ring: &'a mut AnyCq) -> Option<CqPoll<'a>> {
        let st = self.state;
        let (cur, end) = if st.left != 0 && !self.stale.load(Ordering::Relaxed) {
            (st.next, st.next + st.left)
        } else {
            match restart(&mut self.state, &mut self.entries, ring) {
                (_, 0) => return None,
                r => r,
            }
        };
        Some(CqPoll {
            ring,
            state: &mut self.state,
            entries: &mut self.entries,
            stale: &self.stale,
            cur,
            end,
        })
    }
}

impl fmt::Debug for PollBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let PollBuf {
            state,
            entries: _,
            stale,
        } = self;
        f.debug_struct("PollBuf")
            .field("unread", &state.left)
            .field("stamped", &state.stamped)
            .field("wallclock", &state.wallclock)
            .field("stale", &stale.load(Ordering::Relaxed))
            .finish()
    }
}

/// Where a session starts when the batch has nothing to hand out at once
/// (out of line, rarely): what is left of it once the completions of QPs
/// destroyed or reset since it was taken are gone, else the next batch
/// ([`refill`]); `(cur, end)`, `end` 0 when the CQ is empty.
#[inline(never)]
fn restart(st: &mut PollState, entries: &mut Entries, ring: &mut AnyCq) -> (u32, u32) {
    if st.left != 0 {
        let end = drop_stale(entries, ring, st.next, st.next + st.left);
        st.left = end - st.next;
        if st.left != 0 {
            return (st.next, end);
        }
    }
    // At most `BATCH`.
    (0, refill(*st, entries, ring) as u32)
}

/// One batch poll into the whole batch (and its timestamps, on a CQ that
/// has them): out of line, once per [`BATCH`] completions, a provider
/// poll compiled for the batch's length. Leaves the batch as it was when
/// the ring is empty. On a CQ with wall-clock timestamps, a batch that
/// found completions then refreshes the provider's conversion (libmlx5
/// reads the clock info page in `start_poll` once it found a CQE).
#[inline(never)]
fn refill(st: PollState, entries: &mut Entries, ring: &mut AnyCq) -> usize {
    let Entries { wc, ts } = entries;
    let n = ring.poll_batch(wc, st.stamped.then_some(ts));
    if st.wallclock && n != 0 {
        ring.refresh_clock();
    }
    n
}

/// A polling session on a CQ (`ibv_start_poll` .. `ibv_end_poll` on an
/// `ibv_cq_ex`) and its current completion, whose fields the accessors
/// read (`ibv_wc_read_*`); from [`CompletionQueue::start_poll`].
///
/// The session borrows the CQ: nothing else polls it until the session
/// ends, which is when it is dropped (or [`CqPoll::end`]). As in
/// libibverbs, each completion the session moves to (its first, and each
/// [`CqPoll::next`] that returned `true`) is taken from the CQ, read or
/// not; those it did not move to stay in the CQ, first in line for the
/// next session and for [`CompletionQueue::poll`]. (A session leaked with
/// `std::mem::forget` does not end: the completions it took from its last
/// batch are returned again.)
///
/// ```no_run
/// # fn main() -> uverbs::Result<()> {
/// # let ctx = uverbs::Context::open(None)?;
/// use uverbs::{CqOptions, WcExFlags, WcStatus};
///
/// let mut cq = ctx.create_cq(256, CqOptions::default())?;
/// // ... post work ...
/// if let Some(mut poll) = cq.start_poll() {
///     loop {
///         if poll.status() != WcStatus::SUCCESS {
///             eprintln!("request {} failed: {}", poll.wr_id(), poll.status());
///         } else if poll.opcode().is_recv() {
///             println!("received {} bytes, immediate {:?}", poll.byte_len(), poll.imm_data());
///         }
///         if !poll.next() {
///             break;
///         }
///     }
/// } // ibv_end_poll
/// # Ok(())
/// # }
/// ```
///
/// Every accessor is valid for every completion (uverbs decodes all fields
/// of each): one for a field not chosen at create time
/// ([`CqOptions::wc_flags`](crate::CqOptions::wc_flags), which libibverbs
/// leaves undefined) returns the field anyway, and one for a field that a
/// completion does not carry (a send's source QP) returns what
/// [`CompletionQueue::poll`] reports (0). As in `struct ibv_wc`, a failed
/// completion's fields other than `wr_id`, `status`, `qp_num` and
/// `vendor_err` mean nothing. After [`CqPoll::next`] returned `false`, the
/// accessors still describe the last completion.
#[doc(alias = "ibv_cq_ex")]
pub struct CqPoll<'a> {
    ring: &'a mut AnyCq,
    /// The CQ's record of what is unread, written when the session ends.
    state: &'a mut PollState,
    entries: &'a mut Entries,
    /// The CQ's clean flag: set, a QP was destroyed or reset since the
    /// batch was taken off the ring, and its completions in the batch are
    /// dropped before the next one is handed out.
    stale: &'a AtomicBool,
    /// The current completion's index in the batch (`< end`).
    cur: u32,
    /// The batch's entries `cur + 1..end` are the session's next ones
    /// (`end <= BATCH`).
    end: u32,
}

impl CqPoll<'_> {
    #[inline(always)]
    fn wc(&self) -> &WorkCompletion {
        &self.entries.wc[self.cur as usize % BATCH]
    }

    /// Moves to the next completion, like `ibv_next_poll`; `false` when the
    /// CQ has none (`ENOENT`), and the session may still end or try again.
    /// No system call; no allocation.
    #[doc(alias = "ibv_next_poll")]
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> bool {
        let cur = self.cur + 1;
        // One relaxed load more than the batch's bound: whether a QP was
        // destroyed or reset since the batch was taken.
        if cur < self.end && !self.stale.load(Ordering::Relaxed) {
            self.cur = cur;
            return true;
        }
        if cur < self.end {
            // A QP was destroyed or reset (cold): its completions go.
            self.end = drop_stale(self.entries, self.ring, cur, self.end);
            if cur < self.end {
                self.cur = cur;
                return true;
            }
        }
        // The batch is used up: the next one from the ring. (The call
        // takes the session's parts, not the session: its position stays
        // in registers in a loop.)
        match refill(*self.state, self.entries, self.ring) {
            0 => false,
            n => {
                self.cur = 0;
                // At most `BATCH`.
                self.end = n as u32;
                true
            }
        }
    }

    /// Ends the session, like `ibv_end_poll` (dropping it does the same).
    #[doc(alias = "ibv_end_poll")]
    #[inline]
    pub fn end(self) {}

    /// The `wr_id` of the work request (`ibv_cq_ex::wr_id`).
    #[inline]
    pub fn wr_id(&self) -> u64 {
        self.wc().wr_id
    }

    /// The completion's status (`ibv_cq_ex::status`).
    #[inline]
    pub fn status(&self) -> WcStatus {
        self.wc().status
    }

    /// What completed, like `ibv_wc_read_opcode`.
    #[doc(alias = "ibv_wc_read_opcode")]
    #[inline]
    pub fn opcode(&self) -> WcOpcode {
        self.wc().opcode
    }

    /// The vendor's error syndrome, like `ibv_wc_read_vendor_err`.
    #[doc(alias = "ibv_wc_read_vendor_err")]
    #[inline]
    pub fn vendor_err(&self) -> u32 {
        self.wc().vendor_err
    }

    /// Bytes received (receives) or transferred (RDMA reads, atomics),
    /// like `ibv_wc_read_byte_len` ([`WcExFlags::BYTE_LEN`]).
    #[doc(alias = "ibv_wc_read_byte_len")]
    #[inline]
    pub fn byte_len(&self) -> u32 {
        self.wc().byte_len
    }

    /// The immediate data, in host order, when the completion carries one
    /// ([`WcFlags::WITH_IMM`]), like `ibv_wc_read_imm_data`
    /// ([`WcExFlags::IMM`]; libibverbs returns it in network order).
    #[doc(alias = "ibv_wc_read_imm_data")]
    #[inline]
    pub fn imm_data(&self) -> Option<u32> {
        let wc = self.wc();
        wc.wc_flags
            .contains(WcFlags::WITH_IMM)
            .then_some(wc.imm_data)
    }

    /// The rkey a SEND with invalidate invalidated, when the completion
    /// carries one ([`WcFlags::WITH_INVALIDATE`]), like
    /// `ibv_wc_read_invalidated_rkey`.
    #[doc(alias = "ibv_wc_read_invalidated_rkey")]
    #[inline]
    pub fn invalidated_rkey(&self) -> Option<u32> {
        let wc = self.wc();
        wc.wc_flags
            .contains(WcFlags::WITH_INVALIDATE)
            .then_some(wc.imm_data)
    }

    /// The local QP number, like `ibv_wc_read_qp_num` ([`WcExFlags::QP_NUM`]).
    #[doc(alias = "ibv_wc_read_qp_num")]
    #[inline]
    pub fn qp_num(&self) -> u32 {
        self.wc().qp_num
    }

    /// The remote QP number (UD receives), like `ibv_wc_read_src_qp`
    /// ([`WcExFlags::SRC_QP`]).
    #[doc(alias = "ibv_wc_read_src_qp")]
    #[inline]
    pub fn src_qp(&self) -> u32 {
        self.wc().src_qp
    }

    /// The completion's flags, like `ibv_wc_read_wc_flags`, in the
    /// kernel's numbering as [`WorkCompletion::wc_flags`] has them (see
    /// [`WcFlags`]).
    #[doc(alias = "ibv_wc_read_wc_flags")]
    #[inline]
    pub fn wc_flags(&self) -> WcFlags {
        self.wc().wc_flags
    }

    /// The source LID (UD receives on InfiniBand), like
    /// `ibv_wc_read_slid` ([`WcExFlags::SLID`]).
    #[doc(alias = "ibv_wc_read_slid")]
    #[inline]
    pub fn slid(&self) -> u16 {
        self.wc().slid
    }

    /// The service level, like `ibv_wc_read_sl` ([`WcExFlags::SL`]).
    #[doc(alias = "ibv_wc_read_sl")]
    #[inline]
    pub fn sl(&self) -> u8 {
        self.wc().sl
    }

    /// The DLID path bits, like `ibv_wc_read_dlid_path_bits`
    /// ([`WcExFlags::DLID_PATH_BITS`]).
    #[doc(alias = "ibv_wc_read_dlid_path_bits")]
    #[inline]
    pub fn dlid_path_bits(&self) -> u8 {
        self.wc().dlid_path_bits
    }

    /// The P_Key index (GSI QPs), as [`WorkCompletion::pkey_index`]
    /// (`ibv_cq_ex` has no reader of it).
    #[inline]
    pub fn pkey_index(&self) -> u16 {
        self.wc().pkey_index
    }

    /// The device's timestamp of the completion in its clock's raw ticks,
    /// like `ibv_wc_read_completion_ts`: `None` unless the CQ was created
    /// with [`WcExFlags::COMPLETION_TIMESTAMP`] (mlx5 only). The ticks run
    /// at [`DeviceAttr::hca_core_clock`](crate::DeviceAttr::hca_core_clock)
    /// kHz and wrap at
    /// [`DeviceAttr::completion_timestamp_mask`](crate::DeviceAttr::completion_timestamp_mask).
    /// A failed completion has none (mlx5's error CQE has no timestamp
    /// field; libibverbs' value is undefined there): 0.
    #[doc(alias = "ibv_wc_read_completion_ts")]
    #[inline]
    pub fn completion_ts(&self) -> Option<u64> {
        self.state
            .raw_ts
            .then(|| self.entries.ts[self.cur as usize % BATCH])
    }

    /// The completion's timestamp in nanoseconds of the kernel's real-time
    /// clock (`CLOCK_REALTIME`, since the Unix epoch), like
    /// `ibv_wc_read_completion_wallclock_ns`: `None` unless the CQ was
    /// created with [`WcExFlags::COMPLETION_TIMESTAMP_WALLCLOCK`] (mlx5
    /// with the kernel's clock info page only).
    ///
    /// The device's ticks are converted as libmlx5 does
    /// (`mlx5dv_ts_to_ns`, [`crate::mlx5::ClockInfo::ts_to_ns`]), with a
    /// copy of the kernel's clock info page the session took when it last
    /// took completions off the ring: a few arithmetic instructions, no
    /// system call. Like the raw timestamp, a failed completion has none,
    /// and its value means nothing. uverbs never asks the device for
    /// real-time CQE timestamps (libmlx5 does, with
    /// `MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS`, on devices that have them,
    /// when only the wall clock was asked for): the CQE holds ticks.
    #[doc(alias = "ibv_wc_read_completion_wallclock_ns")]
    #[inline]
    pub fn completion_wallclock_ns(&self) -> Option<u64> {
        if !self.state.wallclock {
            return None;
        }
        self.ring
            .ts_to_ns(self.entries.ts[self.cur as usize % BATCH])
    }

    /// The current completion whole, as [`CompletionQueue::poll`] would
    /// have written it.
    #[inline]
    pub fn work_completion(&self) -> WorkCompletion {
        *self.wc()
    }
}

impl Drop for CqPoll<'_> {
    /// `ibv_end_poll`: the completions after the current one stay unread.
    #[inline]
    fn drop(&mut self) {
        let next = self.cur + 1;
        self.state.next = next;
        self.state.left = self.end.saturating_sub(next);
    }
}

impl fmt::Debug for CqPoll<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CqPoll")
            .field("current", self.wc())
            .field("completion_ts", &self.completion_ts())
            .field("completion_wallclock_ns", &self.completion_wallclock_ns())
            .field("batch_left", &self.end.saturating_sub(self.cur + 1))
            .finish()
    }
}

impl CompletionQueue {
    /// Starts a polling session on the CQ with its first completion, like
    /// `ibv_start_poll`: `None` when the CQ is empty (`ENOENT`). Read the
    /// completion with the [`CqPoll`] accessors, move on with
    /// [`CqPoll::next`], and end the session by dropping it
    /// (`ibv_end_poll`). Completions a session left unread come first in
    /// the next session, and in [`CompletionQueue::poll`].
    ///
    /// A session takes the CQ's completions off its ring up to 64 at a time
    /// (with the same code as [`CompletionQueue::poll`]), into a buffer
    /// the CQ allocated when it was created: no system call and no
    /// allocation here. Those of a QP destroyed or reset since are dropped
    /// from the buffer before the next is handed out, as libmlx5 removes
    /// them from its CQ (mlx5; rxe removes none, as rdma-core's rxe: see
    /// the module documentation, "Destroyed and reset QPs").
    #[doc(alias = "ibv_start_poll")]
    #[inline]
    pub fn start_poll(&mut self) -> Option<CqPoll<'_>> {
        let (ring, buf) = self.ring_and_poll_buf();
        buf.start(ring)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch's unread entries without a QP's: the others move up in
    /// order, each with its own timestamp; entries outside the range stay.
    #[test]
    fn dropping_a_qps_entries_keeps_the_others_in_order_with_their_timestamps() {
        let mut e = Entries {
            wc: [WorkCompletion::default(); BATCH],
            ts: [0; BATCH],
        };
        let qps = [5u32, 5, 1, 5, 2, 5, 3, 5];
        for (i, &qp_num) in qps.iter().enumerate() {
            e.wc[i].qp_num = qp_num;
            e.wc[i].wr_id = i as u64;
            e.ts[i] = 1000 + i as u64;
        }
        // Entry 0 was handed out already; 1..8 are unread.
        let end = e.drop_qp(1, 8, 5);
        assert_eq!(end, 4);
        let ids: Vec<u64> = e.wc[1..end].iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, [2, 4, 6]);
        assert_eq!(e.ts[1..end], [1002, 1004, 1006]);
        assert_eq!((e.wc[0].wr_id, e.ts[0]), (0, 1000), "outside the range");
        // Nothing of another QP: unchanged.
        assert_eq!(e.drop_qp(1, end, 9), end);
        assert_eq!(e.drop_qp(1, 1, 2), 1, "an empty range");
    }
}
