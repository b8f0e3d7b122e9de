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
//! Three files, by concern: this one, the CQ's shared state ([`CqCore`]:
//! the ring, the arm sequence, the clean requests of destroyed or reset
//! QPs), the CQE size, and arming; `cq/parse.rs`, a CQE into a work
//! completion (the general parser and the fast paths of the common
//! cases); `cq/poll.rs`, the poll loop (ownership and barriers, clean
//! requests taken, the consumer index published) and the batches of
//! polling sessions, with timestamps.
//!
//! [`udma_from_device_barrier`]: crate::providers::barrier::udma_from_device_barrier

use std::sync::{
    atomic::{AtomicBool, AtomicU32, Ordering},
    Arc, Mutex,
};

use super::{
    buf::{CqeGeometry, QueueBuf},
    clock::{ClockInfo, ClockPage},
    qp::{QpTrack, Resources},
    rq::RqTrack,
    uar::{UarPage, CQ_DOORBELL},
};
use crate::{
    error::{Error, ErrorKind},
    providers::barrier,
};

mod parse;
mod poll;

use parse::cqe_is_valid;

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
