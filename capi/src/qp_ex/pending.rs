//! The requests of one `ibv_wr_*` session as the builders and setters
//! record them, until `wr_complete` writes them (`post.rs`).
//!
//! The program's buffers are copied when its call gives them: SGE lists
//! and inline bytes go into buffers this session reuses (cleared, never
//! shrunk), so a session allocates nothing once they have grown to the
//! program's largest. Inline data has to be copied: ibv_wr_post(3) lets
//! the program reuse it as soon as the setter returns.

use core::ops::Range;
use std::thread::ThreadId;

use uverbs::{sys::Errno, MwBind, Sge};

use super::Config;

/// A builder's operation (`imm` in host order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Send,
    SendImm(u32),
    Write {
        rkey: u32,
        addr: u64,
    },
    WriteImm {
        rkey: u32,
        addr: u64,
        imm: u32,
    },
    Read {
        rkey: u32,
        addr: u64,
    },
    CmpSwp {
        rkey: u32,
        addr: u64,
        compare: u64,
        swap: u64,
    },
    FetchAdd {
        rkey: u32,
        addr: u64,
        add: u64,
    },
    /// `ibv_wr_send_inv`: the receiver's key to invalidate.
    SendInv(u32),
    /// `ibv_wr_local_inv`.
    LocalInv(u32),
    /// `ibv_wr_bind_mw`, read from the program's objects when it was
    /// built (as rxe's `wr_bind_mw` writes them into its WQE).
    BindMw(MwBind),
    /// `ibv_wr_atomic_write`: its 8 bytes, copied when it was built.
    AtomicWrite {
        rkey: u32,
        addr: u64,
        data: [u8; 8],
    },
}

impl Op {
    fn is_atomic(self) -> bool {
        matches!(self, Op::CmpSwp { .. } | Op::FetchAdd { .. })
    }
}

/// A request's data, as ranges of the session's buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Data {
    Sges(Range<usize>),
    Inline(Range<usize>),
}

/// `ibv_wr_set_ud_addr`'s destination; the AH as its address (resolved at
/// `wr_complete`, while the program keeps it alive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct UdAddr {
    pub(super) ah: usize,
    pub(super) remote_qpn: u32,
    pub(super) remote_qkey: u32,
}

/// One request: `qpx->wr_id` and `qpx->wr_flags` when its builder ran,
/// its operation and what the setters gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Req {
    pub(super) wr_id: u64,
    pub(super) flags: u32,
    pub(super) op: Op,
    /// No setter: no data (a zero-length message, as rxe sends).
    pub(super) data: Data,
    pub(super) ud: Option<UdAddr>,
}

/// The open session's requests (or none, between sessions).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// The thread inside `wr_start` .. `wr_complete`/`wr_abort`.
    pub(super) owner: Option<ThreadId>,
    /// The session's first error (rxe's `qp->err`).
    pub(super) err: Option<Errno>,
    pub(super) reqs: Vec<Req>,
    sges: Vec<Sge>,
    inline: Vec<u8>,
}

impl Pending {
    /// Opens a session for `owner`, empty.
    pub(super) fn open(&mut self, owner: ThreadId) {
        self.clear();
        self.owner = Some(owner);
    }

    /// Ends the session.
    pub(super) fn close(&mut self) {
        self.clear();
        self.owner = None;
    }

    fn clear(&mut self) {
        self.err = None;
        self.reqs.clear();
        self.sges.clear();
        self.inline.clear();
    }

    /// Fails the session with `e` (its first error is the one kept).
    pub(super) fn fail(&mut self, e: Errno) {
        self.err.get_or_insert(e);
    }

    /// A builder: a request with no data yet.
    pub(super) fn build(&mut self, wr_id: u64, flags: u32, op: Op) {
        self.reqs.push(Req {
            wr_id,
            flags,
            op,
            data: Data::Sges(0..0),
            ud: None,
        });
    }

    /// The request the setters apply to: the last one built (the session
    /// fails with `EINVAL` before any).
    fn last(&mut self) -> Option<&mut Req> {
        if self.reqs.is_empty() {
            self.fail(Errno::EINVAL);
        }
        self.reqs.last_mut()
    }

    /// `ibv_wr_set_sge`: one SGE; none for a zero length (as rxe), except
    /// for an atomic, whose old value lands at the SGE's address whatever
    /// its length says.
    pub(super) fn set_sge(&mut self, sge: Sge) {
        let start = self.sges.len();
        let Some(last) = self.last() else { return };
        if sge.length == 0 && !last.op.is_atomic() {
            last.data = Data::Sges(start..start);
            return;
        }
        last.data = Data::Sges(start..start + 1);
        self.sges.push(sge);
    }

    /// `ibv_wr_set_sge_list`, after the caller checked the count against
    /// the QP's `max_send_sge` (`ENOSPC`).
    pub(super) fn set_sge_list(&mut self, list: impl ExactSizeIterator<Item = Sge>) {
        let start = self.sges.len();
        let end = start + list.len();
        let Some(last) = self.last() else { return };
        last.data = Data::Sges(start..end);
        self.sges.extend(list.take(end - start));
    }

    /// `ibv_wr_set_inline_data(_list)`: the pieces concatenated, at most
    /// the QP's `max_inline_data` bytes in all (`ENOSPC`, as rxe checks,
    /// before anything is copied).
    pub(super) fn set_inline<'a>(
        &mut self,
        config: &Config,
        pieces: impl Iterator<Item = &'a [u8]> + Clone,
    ) {
        let total = pieces
            .clone()
            .try_fold(0usize, |n, p| n.checked_add(p.len()));
        match total {
            Some(n) if n <= config.max_inline as usize => {}
            _ => return self.fail(Errno::ENOSPC),
        }
        if self.last().is_none() {
            return;
        }
        let start = self.inline.len();
        for p in pieces {
            self.inline.extend_from_slice(p);
        }
        let end = self.inline.len();
        if let Some(last) = self.reqs.last_mut() {
            last.data = Data::Inline(start..end);
        }
    }

    /// `ibv_wr_set_ud_addr`.
    pub(super) fn set_ud_addr(&mut self, ud: UdAddr) {
        if let Some(last) = self.last() {
            last.ud = Some(ud);
        }
    }

    /// A request's SGEs (empty for a range not of this session).
    pub(super) fn sges(&self, r: &Range<usize>) -> &[Sge] {
        self.sges.get(r.clone()).unwrap_or(&[])
    }

    /// A request's inline bytes (empty for a range not of this session).
    pub(super) fn inline(&self, r: &Range<usize>) -> &[u8] {
        self.inline.get(r.clone()).unwrap_or(&[])
    }
}
