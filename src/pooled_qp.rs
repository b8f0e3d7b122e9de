//! A queue pair that posts [`BufferPool`] buffers by value and gives each
//! back with the completion that finished it ([`PooledQp`]).
//!
//! # Where a posted buffer lives
//!
//! Posting moves the [`PoolBuf`] into the QP's table of posted slots, one
//! entry per slot of the pool, and the request's `wr_id` names the entry:
//! the slot index in the low 24 bits, above it a sequence number the QP
//! counts up at every post (never 0). The table keeps the sequence number
//! and whether the request was a receive or a send; a completion whose
//! `wr_id` names a slot whose entry holds that same number ends the entry,
//! and the slot comes back as a [`PoolBuf`] in the [`PoolCompletion`].
//!
//! # Completions
//!
//! A buffer comes back only from a completion that is certainly the one
//! of the request that named it, since the device may write the buffer
//! until then. A [`WorkCompletion`] value proves nothing (anyone can make
//! one), so completions are read by [`PooledQp::poll`] itself from the
//! QP's own CQ, and one is the pool's only if all of these hold:
//!
//! - it comes from the CQ the QP was created with (checked at each poll);
//! - its `qp_num` is this QP's. While the QP exists no other QP has its
//!   number, and [`BufferPool::create_qp`] drained the CQ after creating
//!   the QP and before its first post, so a completion left behind by an
//!   earlier QP of the same number (rxe leaves a destroyed or reset QP's
//!   completions in the CQ; mlx5 removes them) is not read as this one's;
//! - every request on the QP was posted by this `PooledQp`: it created the
//!   QP, in the pool's own protection domain, never hands out `&mut` to it
//!   ([`PooledQp::qp`] is `&QueuePair`, whose methods do not post), and
//!   posts only pool buffers, so each `wr_id` of the QP is one it made;
//! - the `wr_id` names a slot posted here with the same sequence number.
//!   Anything else ([`PoolCompletion::Other`]: another QP's completion on a
//!   shared CQ) carries no buffer.
//!
//! Each request completes once, so a slot comes back once per post.
//!
//! # Error completions and lengths
//!
//! A failed completion (a flush after the QP moved to the error state, a
//! local length error, ...) still ends the request: the device is done
//! with the buffer, so it comes back, but what it holds is not trusted: a
//! receive's buffer comes back with length 0 (the bytes are still there,
//! [`PoolBuf::set_len`] shows them), a send's with the length it was
//! posted with. A successful receive's buffer has the completion's
//! `byte_len` as its length, and 0 if that is more than the buffer holds
//! (a device never reports that; the buffer never shows bytes outside
//! itself).
//!
//! # Destroyed or dropped with buffers posted
//!
//! The buffers of requests that never complete stay in the table: a QP
//! reset to RESET discards its requests without completions, and a QP
//! destroyed or dropped takes its table with it. Those slots never come
//! back to the program (the pool has fewer free buffers from then on);
//! their memory stays registered until the pool's last reference goes,
//! and is freed after the region is deregistered. To get every buffer
//! back, move the QP to ERR, [`poll`](PooledQp::poll) until
//! [`posted`](PooledQp::posted) is 0 (each request completes with
//! `WR_FLUSH_ERR`), then destroy it.
//!
//! # The pool dropped first
//!
//! The table holds a reference to the pool's memory, as each [`PoolBuf`]
//! does, so dropping the [`BufferPool`] handle while buffers are posted
//! changes nothing for them: the region stays registered until the last
//! buffer, QP and handle are gone.
use std::{fmt, sync::Arc};

use crate::{
    cq::CompletionQueue,
    error::{DestroyError, Error, ErrorKind, Result},
    mr::pool::{PoolInner, MAX_SLOTS},
    qp::{QpInitAttr, QueuePair},
    qp_attr::{QpCap, QpType},
    wc::{WcOpcode, WorkCompletion},
    wr::{PostError, PostErrorKind, RecvWr, SendFlags, SendOp, SendWr, Sge},
    BufferPool, PoolBuf,
};

const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// Sequence numbers run 1..=SEQ_MAX and wrap to 1.
const SEQ_MAX: u64 = u64::MAX >> SLOT_BITS;

/// One slot's entry in a QP's table: the sequence number of the request
/// that holds it (0: not posted here), and whether it is a send.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    seq: u64,
    send: bool,
    len: u32,
}

/// The posted slots of one QP (or, in the model-checked tests, of a
/// simulated device), and the hand-off in and out of them.
pub(crate) struct Posted {
    pool: Arc<PoolInner>,
    entries: Vec<Entry>,
    next_seq: u64,
    posted: usize,
}

/// What [`Posted::finish`] gives back.
pub(crate) struct Finished {
    pub(crate) buf: PoolBuf,
    pub(crate) send: bool,
}

impl Posted {
    pub(crate) fn new(pool: Arc<PoolInner>) -> Self {
        let entries = vec![Entry::default(); pool.count() as usize];
        Posted {
            pool,
            entries,
            next_seq: 1,
            posted: 0,
        }
    }

    /// Moves `buf` in and returns the `wr_id` that names it; the slot is
    /// held here until [`Posted::finish`] with that `wr_id`. The caller
    /// posts the request after this and undoes it with [`Posted::unpark`]
    /// if the post fails.
    pub(crate) fn park(&mut self, buf: PoolBuf, send: bool) -> u64 {
        let (slot, len) = buf.into_slot();
        let seq = self.next_seq;
        self.next_seq = if seq == SEQ_MAX { 1 } else { seq + 1 };
        self.entries[slot as usize] = Entry { seq, send, len };
        self.posted += 1;
        (seq << SLOT_BITS) | u64::from(slot)
    }

    /// Takes a parked buffer back whose request was never posted.
    pub(crate) fn unpark(&mut self, wr_id: u64) -> PoolBuf {
        match self.finish(wr_id) {
            Some(f) => f.buf,
            // Unreachable: `wr_id` came from `park` and nothing finished it.
            None => unreachable!("a parked slot vanished"),
        }
    }

    /// The buffer of the request `wr_id` names, if it is parked here.
    pub(crate) fn finish(&mut self, wr_id: u64) -> Option<Finished> {
        let slot = (wr_id & SLOT_MASK) as u32;
        let seq = wr_id >> SLOT_BITS;
        let entry = self.entries.get_mut(slot as usize)?;
        if seq == 0 || entry.seq != seq {
            return None;
        }
        let Entry { send, len, .. } = std::mem::take(entry);
        self.posted -= 1;
        Some(Finished {
            buf: self.pool.rebuild(slot, len),
            send,
        })
    }

    pub(crate) fn posted(&self) -> usize {
        self.posted
    }
}

/// The bytes a receive's completion shows in its buffer of `capacity`
/// bytes: `byte_len` after a successful receive that wrote the buffer, if
/// it fits (a device never reports more; nothing outside the buffer is
/// ever shown), and 0 for a failed one (its contents are not trusted) or
/// one consumed by an RDMA write with immediate (whose data went to the
/// writer's target, not the buffer).
fn received_len(wc: &WorkCompletion, capacity: usize) -> usize {
    let wrote = wc.status.is_success() && wc.opcode != WcOpcode::RECV_RDMA_WITH_IMM;
    if wrote && wc.byte_len as usize <= capacity {
        wc.byte_len as usize
    } else {
        0
    }
}

/// A completion read by [`PooledQp::poll`].
#[derive(Debug)]
#[non_exhaustive]
pub enum PoolCompletion {
    /// A receive finished: `buf` holds `wc.byte_len` bytes if `wc.status`
    /// is success, and is empty otherwise (its contents not trusted).
    Recv {
        /// The completion.
        wc: WorkCompletion,
        /// The buffer, the program's again.
        buf: PoolBuf,
    },
    /// A send (or another operation with the buffer as its local data)
    /// finished, successfully or not: the buffer is the program's again.
    Sent {
        /// The completion.
        wc: WorkCompletion,
        /// The buffer, with the length it was posted with.
        buf: PoolBuf,
    },
    /// A completion with no buffer of this QP (another QP's, on a shared
    /// CQ).
    Other(WorkCompletion),
}

impl PoolCompletion {
    /// The completion.
    pub fn wc(&self) -> &WorkCompletion {
        match self {
            PoolCompletion::Recv { wc, .. }
            | PoolCompletion::Sent { wc, .. }
            | PoolCompletion::Other(wc) => wc,
        }
    }
}

/// A post that was refused, with the buffer, which stays the program's.
#[derive(Debug)]
#[non_exhaustive]
pub struct PostRefused {
    /// Why.
    pub error: PostError,
    /// The buffer, not posted.
    pub buf: PoolBuf,
}

impl fmt::Display for PostRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for PostRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<PostRefused> for Error {
    fn from(e: PostRefused) -> Self {
        e.error.into()
    }
}

/// A queue pair of a [`BufferPool`] ([`BufferPool::create_qp`]): it posts
/// the pool's buffers by value and gives each back with the completion
/// that finished it, so received bytes are read in place as `&[u8]` and
/// sends are filled in place through `&mut [u8]`, without `unsafe` (see
/// the module documentation, [`crate::pooled_qp`], for the rules that make
/// it sound).
///
/// Before (a region read by copy):
///
/// ```no_run
/// # fn f(qp: &mut uverbs::QueuePair, cq: &mut uverbs::CompletionQueue, mr: &uverbs::MemoryRegion) -> uverbs::Result<()> {
/// qp.post_recv(&[uverbs::RecvWr::new(7, &[mr.sge(0, 4096)?])])?;
/// let mut wc = [uverbs::WorkCompletion::default(); 1];
/// while cq.poll(&mut wc) == 0 {}
/// let mut bytes = vec![0u8; wc[0].byte_len as usize];
/// mr.read(0, &mut bytes)?; // a copy
/// # Ok(()) }
/// ```
///
/// After (the buffer itself):
///
/// ```no_run
/// # fn f(qp: &mut uverbs::PooledQp, cq: &mut uverbs::CompletionQueue, pool: &uverbs::BufferPool) -> uverbs::Result<()> {
/// qp.post_recv(pool.take().expect("a free buffer"))?;
/// let mut done = Vec::new();
/// while qp.poll(cq, &mut done)? == 0 {}
/// if let Some(uverbs::PoolCompletion::Recv { buf, .. }) = done.pop() {
///     let bytes: &[u8] = &buf; // no copy; `buf` cannot be posted while borrowed
/// #   let _ = bytes;
/// }
/// # Ok(()) }
/// ```
///
/// The QP's CQ serves both queues; RC and UC (a UD send needs an address
/// handle in the pool's protection domain, which is not offered yet).
pub struct PooledQp {
    qp: QueuePair,
    posted: Posted,
    /// The CQ the QP was created with, by identity (the QP keeps it alive).
    cq: usize,
}

impl fmt::Debug for PooledQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledQp")
            .field("qp_num", &self.qp.qp_num())
            .field("posted", &self.posted.posted())
            .finish()
    }
}

fn cq_id(cq: &CompletionQueue) -> usize {
    Arc::as_ptr(&cq.inner) as usize
}

const CREATE: &str = "BufferPool::create_qp";

impl BufferPool {
    /// Creates a queue pair of `qp_type` (RC or UC) in the pool's
    /// protection domain, with `cq` for both its sends and receives, like
    /// `ibv_create_qp`, and returns it in RESET with the completions that
    /// were waiting in `cq` (other QPs'; see "Completions" in
    /// [`crate::pooled_qp`]: the CQ is drained once, before the first post).
    /// Bring it up through [`PooledQp::qp`]. `cap`'s scatter/gather counts
    /// are raised to 1 if 0.
    ///
    /// Give each `PooledQp` a CQ of its own: completions another
    /// `PooledQp` polls from a shared CQ come to it as
    /// [`PoolCompletion::Other`], and their buffers never come back.
    #[doc(alias = "ibv_create_qp")]
    pub fn create_qp(
        &self,
        qp_type: QpType,
        cap: QpCap,
        cq: &mut CompletionQueue,
    ) -> Result<(PooledQp, Vec<WorkCompletion>)> {
        if !matches!(qp_type, QpType::Rc | QpType::Uc) {
            return Err(Error::new(
                CREATE,
                ErrorKind::InvalidArgument,
                format!("{qp_type}: a pool's QP is RC or UC"),
            ));
        }
        let Some(pd) = self.pd() else {
            return Err(Error::new(CREATE, ErrorKind::InvalidArgument, "no kernel"));
        };
        let cap = QpCap {
            max_send_sge: cap.max_send_sge.max(1),
            max_recv_sge: cap.max_recv_sge.max(1),
            ..cap
        };
        let qp = pd.create_qp(&QpInitAttr {
            qp_type,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            cap,
            sq_sig_all: false,
            context: 0,
        })?;
        debug_assert!(self.inner.count() as usize <= MAX_SLOTS);
        let mut drained = Vec::new();
        let mut wc = [WorkCompletion::default(); 16];
        loop {
            let n = cq.poll(&mut wc);
            if n == 0 {
                break;
            }
            drained.extend_from_slice(&wc[..n]);
        }
        let pooled = PooledQp {
            qp,
            posted: Posted::new(self.inner.clone()),
            cq: cq_id(cq),
        };
        Ok((pooled, drained))
    }
}

impl PooledQp {
    /// The queue pair, to bring up, modify, query (no `&QueuePair` method
    /// posts).
    pub fn qp(&self) -> &QueuePair {
        &self.qp
    }

    /// Requests posted and not yet completed (their buffers are the
    /// device's).
    pub fn posted(&self) -> usize {
        self.posted.posted()
    }

    fn check_pool(&self, buf: &PoolBuf) -> Result<(), PostError> {
        if Arc::ptr_eq(buf.pool(), &self.posted.pool) {
            Ok(())
        } else {
            Err(PostError {
                index: 0,
                kind: PostErrorKind::OpNotSupported(
                    "the buffer belongs to another BufferPool than the QP's",
                ),
            })
        }
    }

    /// Posts a receive into the whole of `buf` (its capacity), like
    /// `ibv_post_recv`, and keeps `buf` until the completion that finishes
    /// it ([`PooledQp::poll`]). On an error nothing was posted and the
    /// buffer comes back in it.
    #[doc(alias = "ibv_post_recv")]
    pub fn post_recv(&mut self, buf: PoolBuf) -> Result<(), PostRefused> {
        if let Err(error) = self.check_pool(&buf) {
            return Err(PostRefused { error, buf });
        }
        let pool = &self.posted.pool;
        let sge = Sge::new(
            pool.slot_addr(buf.slot()),
            buf.capacity() as u32,
            pool.lkey(),
        );
        let wr_id = self.posted.park(buf, false);
        match self.qp.post_recv(&[RecvWr::new(wr_id, &[sge])]) {
            Ok(()) => Ok(()),
            Err(error) => Err(PostRefused {
                error,
                buf: self.posted.unpark(wr_id),
            }),
        }
    }

    /// Takes up to `n` free buffers from the pool and posts a receive into
    /// each; returns how many were posted (fewer when the pool runs out).
    /// Stops at the first refused post, with its error (the buffers posted
    /// before it stay posted).
    pub fn post_recvs_from_pool(&mut self, n: usize) -> Result<usize, PostError> {
        let pool = BufferPool {
            inner: self.posted.pool.clone(),
        };
        for i in 0..n {
            let Some(buf) = pool.take() else {
                return Ok(i);
            };
            self.post_recv(buf).map_err(|e| PostError {
                index: i,
                kind: e.error.kind,
            })?;
        }
        Ok(n)
    }

    /// Sends the first [`len`](PoolBuf::len) bytes of `buf` (`SEND`,
    /// signaled), like `ibv_post_send`, and keeps `buf` until the
    /// completion ([`PooledQp::poll`]).
    #[doc(alias = "ibv_post_send")]
    pub fn post_send(&mut self, buf: PoolBuf) -> Result<(), PostRefused> {
        self.post_send_op(buf, SendOp::Send, SendFlags::SIGNALED)
    }

    /// Posts `op` with the first [`len`](PoolBuf::len) bytes of `buf` as
    /// its local data (`SEND_WITH_IMM`, `RDMA_WRITE` from the buffer,
    /// `RDMA_READ` into it, an atomic's 8-byte result, ...) and `flags`
    /// (`SIGNALED` is always added: the completion gives the buffer back).
    pub fn post_send_op(
        &mut self,
        buf: PoolBuf,
        op: SendOp,
        flags: SendFlags,
    ) -> Result<(), PostRefused> {
        if let Err(error) = self.check_pool(&buf) {
            return Err(PostRefused { error, buf });
        }
        let pool = &self.posted.pool;
        let sge = Sge::new(pool.slot_addr(buf.slot()), buf.len() as u32, pool.lkey());
        let wr_id = self.posted.park(buf, true);
        let sges = [sge];
        let wr = SendWr::new(wr_id, op, &sges).flags(flags | SendFlags::SIGNALED);
        match self.qp.post_send(&[wr]) {
            Ok(()) => Ok(()),
            Err(error) => Err(PostRefused {
                error,
                buf: self.posted.unpark(wr_id),
            }),
        }
    }

    /// Polls `cq`, which must be the CQ the QP was created with, like
    /// `ibv_poll_cq`, and appends what it read to `out`, each of this
    /// QP's completions with its buffer (see "Completions" in
    /// [`crate::pooled_qp`]); returns how many it appended (at most 16 per
    /// call). `InvalidArgument` for another CQ.
    #[doc(alias = "ibv_poll_cq")]
    pub fn poll(
        &mut self,
        cq: &mut CompletionQueue,
        out: &mut Vec<PoolCompletion>,
    ) -> Result<usize> {
        if cq_id(cq) != self.cq {
            return Err(Error::new(
                "PooledQp::poll",
                ErrorKind::InvalidArgument,
                "not the CQ the QP was created with",
            ));
        }
        let mut wcs = [WorkCompletion::default(); 16];
        let n = cq.poll(&mut wcs);
        let qp_num = self.qp.qp_num();
        for wc in &wcs[..n] {
            let finished = if wc.qp_num == qp_num {
                self.posted.finish(wc.wr_id)
            } else {
                None
            };
            out.push(match finished {
                None => PoolCompletion::Other(*wc),
                Some(Finished { buf, send: true }) => PoolCompletion::Sent { wc: *wc, buf },
                Some(Finished {
                    mut buf,
                    send: false,
                }) => {
                    // Within the capacity (`received_len`): cannot fail.
                    let _ = buf.set_len(received_len(wc, buf.capacity()));
                    PoolCompletion::Recv { wc: *wc, buf }
                }
            });
        }
        Ok(n)
    }

    /// Destroys the QP, like `ibv_destroy_qp` ([`QueuePair::destroy`]).
    /// Buffers still posted never come back (see "Destroyed or dropped
    /// with buffers posted" in [`crate::pooled_qp`]). On a refusal the
    /// `PooledQp` comes back unchanged.
    #[doc(alias = "ibv_destroy_qp")]
    pub fn destroy(self) -> Result<(), DestroyError<Self>> {
        let PooledQp { qp, posted, cq } = self;
        qp.destroy().map_err(|e| {
            let (qp, err) = e.into_parts();
            DestroyError::new(PooledQp { qp, posted, cq }, err)
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A request's `wr_id` gives its buffer back once; a `wr_id` of
    /// another sequence number, of no slot, or of sequence 0 gives
    /// nothing; a buffer comes back with its length.
    #[test]
    fn a_wr_id_finishes_its_own_request_once() {
        let pool = PoolInner::heap(3, 40);
        let mut posted = Posted::new(pool.clone());
        let mut a = pool.take_for_test().unwrap();
        a.copy_from(b"abc").unwrap();
        let b = pool.take_for_test().unwrap();
        let (sa, sb) = (a.slot(), b.slot());
        let wa = posted.park(a, true);
        let wb = posted.park(b, false);
        assert_eq!(wa & SLOT_MASK, u64::from(sa));
        assert_ne!(wa >> SLOT_BITS, wb >> SLOT_BITS, "sequence numbers differ");
        assert_eq!(posted.posted(), 2);
        assert_eq!(pool.available(), 1);
        // Not the pool's, or a stale sequence number of a posted slot.
        for bad in [
            0,
            u64::from(sa),
            wa + (1 << SLOT_BITS),
            wb ^ (1 << 40),
            7,
            u64::MAX,
        ] {
            assert!(posted.finish(bad).is_none(), "{bad:#x}");
        }
        let f = posted.finish(wa).unwrap();
        assert!(f.send);
        assert_eq!(&f.buf[..], b"abc");
        assert!(posted.finish(wa).is_none(), "once");
        drop(f);
        let f = posted.finish(wb).unwrap();
        assert!(!f.send);
        assert_eq!(f.buf.slot(), sb);
        assert_eq!(f.buf.len(), 40);
        drop(f);
        assert_eq!(posted.posted(), 0);
        assert_eq!(pool.available(), 3);
        // Reposting the slot gives a new `wr_id`; the old one stays dead.
        let again = pool.take_for_test().unwrap();
        let slot = again.slot();
        let w = posted.park(again, false);
        let stale = (1 << SLOT_BITS) | u64::from(slot);
        assert_ne!(w, stale);
        assert!(posted.finish(stale).is_none());
        assert!(posted.finish(w).is_some());
    }

    /// Sequence numbers wrap from their maximum to 1, never 0.
    #[test]
    fn sequence_numbers_skip_zero_when_they_wrap() {
        let pool = PoolInner::heap(1, 8);
        let mut posted = Posted::new(pool.clone());
        posted.next_seq = SEQ_MAX;
        let w = posted.park(pool.take_for_test().unwrap(), false);
        assert_eq!(w >> SLOT_BITS, SEQ_MAX);
        drop(posted.finish(w).unwrap());
        let w = posted.park(pool.take_for_test().unwrap(), false);
        assert_eq!(w >> SLOT_BITS, 1);
    }

    /// A receive's length: `byte_len` on success within the buffer, else 0.
    #[test]
    fn a_receive_never_shows_more_than_its_buffer() {
        let ok = |byte_len| WorkCompletion {
            byte_len,
            opcode: WcOpcode::RECV,
            ..WorkCompletion::default()
        };
        assert_eq!(received_len(&ok(10), 64), 10);
        assert_eq!(received_len(&ok(64), 64), 64);
        assert_eq!(received_len(&ok(65), 64), 0);
        assert_eq!(received_len(&ok(u32::MAX), 64), 0);
        let failed = WorkCompletion {
            status: crate::WcStatus::WR_FLUSH_ERR,
            ..ok(10)
        };
        assert_eq!(received_len(&failed, 64), 0);
        let imm = WorkCompletion {
            opcode: WcOpcode::RECV_RDMA_WITH_IMM,
            ..ok(10)
        };
        assert_eq!(
            received_len(&imm, 64),
            0,
            "an RDMA write's data is elsewhere"
        );
    }
}
