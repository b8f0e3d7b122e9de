//! The `ibv_wr_*` session of one QP (see the parent module): what its calls
//! keep between them, and how each builder and setter reaches the QP's
//! uverbs send session.
//!
//! The state lives in the QP's guarded slot (`qp/guard.rs`) next to the
//! uverbs QP, and only the thread holding the QP's lock (the one inside
//! `wr_start` .. `wr_complete`) reaches it ([`Guarded::owned`]). A
//! request is gathered from its builder and setters into one `SendWr` and
//! pushed into the uverbs session as soon as it is whole: at its data
//! setter (a UD one also waits for its destination), at its builder for
//! an operation that carries its own data, at the next builder or
//! `wr_complete` for one that got no data setter. The program's SGE list
//! and bytes are read where they are, during the setter's call; only what
//! must outlive it (a UD request's data given before its destination) and
//! what must be made contiguous (an inline list, an SGE list's entries) is
//! copied, into buffers kept from session to session.

use crate::handle::Handle;
use uverbs::{
    sys::Errno, Payload, PostError, PostErrorKind, QueuePair, SendFlags, SendOp, SendWr, Sge,
    UdDest,
};

use super::Config;
use crate::{
    ah::Ah,
    errno,
    layout::qp::{ibv_ah, ibv_data_buf, ibv_sge},
    qp::{guard::Slot, Qp},
};

/// The errno of a uverbs refusal, as rxe's `wr_*` report the same
/// conditions (`ENOSPC` for a full queue, too many SGEs or too much
/// inline data) and its kernel the rest (`EINVAL`; the doorbell's own).
pub(super) fn session_errno(e: &PostError) -> Errno {
    match &e.kind {
        PostErrorKind::QueueFull
        | PostErrorKind::TooManySges { .. }
        | PostErrorKind::InlineTooLong { .. } => Errno::ENOSPC,
        PostErrorKind::OpNotSupported(_)
        | PostErrorKind::WrongQpType { .. }
        | PostErrorKind::WrongProvider { .. } => Errno::EOPNOTSUPP,
        PostErrorKind::Doorbell(err) => errno::of(err),
        _ => Errno::EINVAL,
    }
}

/// `ibv_wr_set_ud_addr`'s destination, its AH resolved when the request
/// is pushed (the program keeps it alive until then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UdAddr {
    ah: usize,
    remote_qpn: u32,
    remote_qkey: u32,
}

/// Data kept for a UD request until its destination comes, in the
/// session's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stashed {
    /// The session's `sges`.
    Sges,
    /// The session's `inline` bytes.
    Inline,
}

/// Where the session is in its current request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Req {
    /// No builder since the session began.
    #[default]
    None,
    /// A builder ran ([`Session::wr`]); setters may come.
    Building,
    /// The last request is pushed: a setter now has no request to set.
    Pushed,
}

/// A QP's `ibv_wr_*` session between its calls.
#[derive(Debug)]
pub(crate) struct Session {
    /// `wr_start` ran, and neither `wr_complete` nor `wr_abort` since:
    /// its thread holds the QP's lock.
    open: bool,
    /// The session's first error (rxe's `qp->err`).
    err: Option<Errno>,
    req: Req,
    /// The request being built ([`Req::Building`]): its operation, id and
    /// flags (no payload, no destination: the setters give them).
    wr: SendWr<'static>,
    /// The push made for its operation ([`push_for`]).
    push: PushFn,
    /// Its UD destination, when given.
    ud: Option<UdAddr>,
    /// Its data, when a UD request got it before its destination.
    data: Option<Stashed>,
    /// SGEs of an SGE list (made into uverbs' form) or of a UD request
    /// waiting for its destination.
    sges: Vec<Sge>,
    /// An inline list's pieces gathered, or a UD request's inline bytes
    /// waiting for its destination.
    inline: Vec<u8>,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            open: false,
            err: None,
            req: Req::None,
            wr: SendWr::send(0, &[]),
            push: push_any_op,
            ud: None,
            data: None,
            sges: Vec::new(),
            inline: Vec::new(),
        }
    }
}

type QpSlot = Slot<QueuePair, Session>;

/// Runs `f` on the calling thread's open session of `q` and its uverbs QP;
/// nothing from a thread not inside the QP's session, or after the
/// session's first error (the calls have no way to report it, and
/// `wr_complete` then fails).
#[inline(always)]
pub(super) fn with_open(q: &Qp, f: impl FnOnce(&mut Session, &mut QueuePair, &Config)) {
    // SAFETY: no other reference into the slot is made during this call
    // (`f` calls no function of this QP).
    let Some(slot) = (unsafe { q.qp.owned() }) else {
        return;
    };
    let QpSlot { obj, session, .. } = slot;
    if !session.open || session.err.is_some() {
        return;
    }
    if let Some(uv) = obj {
        f(session, uv, &q.config);
    }
}

/// `wr_start`: takes the QP's lock for the calling thread (waiting while
/// another thread's session or call holds it) and keeps it; begins the
/// uverbs session. Inside the thread's own session, that session's
/// requests are dropped and it starts over.
pub(super) fn start(q: &Qp) {
    let mut h = q.qp.hold();
    let QpSlot { obj, session, .. } = h.slot();
    if session.open {
        if let Some(uv) = obj.as_mut() {
            uv.abort_send();
        }
    }
    session.open = true;
    session.err = None;
    session.req = Req::None;
    match obj {
        Some(uv) => {
            if let Err(e) = uv.begin_send() {
                session.err = Some(session_errno(&e));
            }
        }
        None => session.err = Some(Errno::EINVAL),
    }
    h.keep();
}

/// `wr_complete`: pushes the request still open, then completes the
/// uverbs session (one doorbell), or aborts it and returns the session's
/// first error; ends the session and releases the QP's lock either way.
/// `EINVAL` outside the calling thread's session.
pub(super) fn complete(q: &Qp) -> Result<(), Errno> {
    // SAFETY: no other reference into the slot is made during this call.
    let Some(slot) = (unsafe { q.qp.owned() }) else {
        return Err(Errno::EINVAL);
    };
    let QpSlot { obj, session, .. } = slot;
    if !session.open {
        return Err(Errno::EINVAL);
    }
    let r = match obj.as_mut() {
        Some(uv) => {
            if session.err.is_none() && session.req == Req::Building {
                session.flush(uv);
            }
            match session.err {
                Some(e) => {
                    uv.abort_send();
                    Err(e)
                }
                None => uv.complete_send().map_err(|e| session_errno(&e)),
            }
        }
        None => Err(Errno::EINVAL),
    };
    session.close();
    q.qp.release_session();
    r
}

/// `wr_abort`: ends the calling thread's session, none of its requests
/// posted; nothing outside it.
pub(super) fn abort(q: &Qp) {
    // SAFETY: no other reference into the slot is made during this call.
    let Some(slot) = (unsafe { q.qp.owned() }) else {
        return;
    };
    if slot.session.open {
        slot.session.drop_requests(slot.obj.as_mut());
        q.qp.release_session();
    }
}

/// Ends a session its thread left open when the QP is destroyed
/// (`ibv_destroy_qp` inside it): its requests are dropped.
pub(crate) fn end_for_destroy(slot: &mut QpSlot) {
    if slot.session.open {
        slot.session.drop_requests(slot.obj.as_mut());
    }
}

/// A request of a provider's own kind (mlx5's `mlx5dv_wr_raw_wqe`),
/// written by `push` (given the QP and `qpx->wr_id`) as the session's next
/// request, after the one still open; a setter after it has no request to
/// set. Nothing outside the calling thread's session.
pub(crate) fn push_own(q: &Qp, push: impl FnOnce(&mut QueuePair, u64) -> Result<(), PostError>) {
    with_open(q, |s, uv, _| {
        if s.req == Req::Building {
            s.flush(uv);
        }
        if s.err.is_some() {
            return;
        }
        s.req = Req::Pushed;
        let wr_id = q.c.wr_id.load(core::sync::atomic::Ordering::Relaxed);
        if let Err(e) = push(uv, wr_id) {
            s.fail(session_errno(&e));
        }
    });
}

/// `SendFlags` of a builder's `wr_flags`: `IBV_SEND_INLINE` is the data
/// setter's to say.
#[inline(always)]
pub(super) fn flags(raw: u32) -> SendFlags {
    SendFlags::from_bits_truncate(raw) - SendFlags::INLINE
}

impl Session {
    /// Fails the session with `e` (its first error is the one kept).
    pub(super) fn fail(&mut self, e: Errno) {
        self.err.get_or_insert(e);
    }

    fn close(&mut self) {
        self.open = false;
        self.err = None;
        self.req = Req::None;
        self.sges.clear();
        self.inline.clear();
    }

    fn drop_requests(&mut self, uv: Option<&mut QueuePair>) {
        if let Some(uv) = uv {
            uv.abort_send();
        }
        self.close();
    }

    /// A builder of an operation that takes a data setter: the request
    /// before it, if still open, is pushed as it is. `EOPNOTSUPP` on a UD
    /// QP for what is not a SEND (what UD carries: ibv_wr_post(3), and
    /// rxe's check, which comes before the destination's).
    #[inline(always)]
    pub(super) fn build(
        &mut self,
        uv: &mut QueuePair,
        config: &Config,
        wr_id: u64,
        flags: SendFlags,
        op: SendOp,
    ) {
        if self.req == Req::Building {
            self.flush(uv);
        }
        if config.ud && !matches!(op, SendOp::Send | SendOp::SendWithImm { .. }) {
            return self.fail(Errno::EOPNOTSUPP);
        }
        self.req = Req::Building;
        self.wr.wr_id = wr_id;
        self.wr.flags = flags;
        self.wr.op = op;
        self.push = push_for(op);
        self.ud = None;
        self.data = None;
    }

    /// A builder of an operation that carries its own data (a bind, a
    /// local invalidate, an atomic write): pushed now, with no data; a
    /// setter after it has no request to set.
    pub(super) fn build_whole(
        &mut self,
        uv: &mut QueuePair,
        config: &Config,
        wr_id: u64,
        flags: SendFlags,
        op: SendOp,
    ) {
        if self.req == Req::Building {
            self.flush(uv);
        }
        if config.ud {
            return self.fail(Errno::EOPNOTSUPP);
        }
        self.req = Req::Pushed;
        let wr = SendWr::new(wr_id, op, &[]).flags(flags);
        push_any(&mut self.err, uv, &wr);
    }

    /// Pushes the open request with what it has (no data: a zero-length
    /// message; what a UD one kept without its destination).
    #[cold]
    fn flush(&mut self, uv: &mut QueuePair) {
        self.req = Req::Pushed;
        let payload = match self.data {
            None => Payload::Sges(&[]),
            Some(Stashed::Sges) => Payload::Sges(&self.sges),
            Some(Stashed::Inline) => Payload::Inline(&self.inline),
        };
        let Some(ud) = resolve(&mut self.err, self.ud) else {
            return;
        };
        let wr = self.wr.payload(payload).ud(ud);
        push_any(&mut self.err, uv, &wr);
    }

    /// Whether a data setter may give the open request its data: `EINVAL`
    /// (the session failed) with no request open or for a second data
    /// setter, and for inline data (`inline`) to a read or an atomic.
    #[inline(always)]
    fn takes_data(&mut self, inline: bool) -> bool {
        let ok = self.req == Req::Building
            && self.data.is_none()
            && !(inline
                && (self.wr.op.is_atomic() || matches!(self.wr.op, SendOp::RdmaRead { .. })));
        if !ok {
            self.fail(Errno::EINVAL);
        }
        ok
    }

    /// `ibv_wr_set_sge`: the open request's one SGE (an atomic's is 8
    /// bytes whatever its length says). Pushed now, unless it is a UD
    /// request still without its destination (then it is kept).
    #[inline(always)]
    pub(super) fn set_sge(&mut self, uv: &mut QueuePair, config: &Config, sge: Sge) {
        if !self.takes_data(false) {
            return;
        }
        let sge = if self.wr.op.is_atomic() {
            sge.length(8)
        } else {
            sge
        };
        if config.ud && self.ud.is_none() {
            self.sges.clear();
            self.sges.push(sge);
            self.data = Some(Stashed::Sges);
            return;
        }
        self.req = Req::Pushed;
        let Some(ud) = resolve(&mut self.err, self.ud) else {
            return;
        };
        let wr = self
            .wr
            .payload(Payload::Sges(core::slice::from_ref(&sge)))
            .ud(ud);
        if let Err(e) = (self.push)(uv, &wr) {
            self.err.get_or_insert(session_errno(&e));
        }
    }

    /// `ibv_wr_set_sge_list`: at most the QP's `max_send_sge` SGEs
    /// (`ENOSPC`); an atomic's must be one (`EINVAL`).
    pub(super) fn set_sge_list(&mut self, uv: &mut QueuePair, config: &Config, list: &[ibv_sge]) {
        if list.len() > config.max_sge as usize {
            return self.fail(Errno::ENOSPC);
        }
        if self.wr.op.is_atomic() && self.req == Req::Building {
            let [s] = list else {
                return self.fail(Errno::EINVAL);
            };
            return self.set_sge(uv, config, Sge::new(s.addr, s.length, s.lkey));
        }
        if !self.takes_data(false) {
            return;
        }
        self.sges.clear();
        self.sges
            .extend(list.iter().map(|s| Sge::new(s.addr, s.length, s.lkey)));
        if config.ud && self.ud.is_none() {
            self.data = Some(Stashed::Sges);
            return;
        }
        self.req = Req::Pushed;
        let Some(ud) = resolve(&mut self.err, self.ud) else {
            return;
        };
        let wr = self.wr.payload(Payload::Sges(&self.sges)).ud(ud);
        push_any(&mut self.err, uv, &wr);
    }

    /// `ibv_wr_set_inline_data`: at most the QP's `max_inline_data` bytes
    /// (`ENOSPC`), read during the call (copied only for a UD request
    /// still without its destination).
    #[inline(always)]
    pub(super) fn set_inline(&mut self, uv: &mut QueuePair, config: &Config, bytes: &[u8]) {
        if !self.takes_data(true) {
            return;
        }
        if bytes.len() > config.max_inline as usize {
            return self.fail(Errno::ENOSPC);
        }
        if config.ud && self.ud.is_none() {
            self.inline.clear();
            self.inline.extend_from_slice(bytes);
            self.data = Some(Stashed::Inline);
            return;
        }
        self.req = Req::Pushed;
        let Some(ud) = resolve(&mut self.err, self.ud) else {
            return;
        };
        let wr = self
            .wr
            .payload(Payload::Inline(bytes))
            .ud(ud)
            .flags(self.wr.flags | SendFlags::INLINE);
        if let Err(e) = (self.push)(uv, &wr) {
            self.err.get_or_insert(session_errno(&e));
        }
    }

    /// `ibv_wr_set_inline_data_list`: the pieces gathered (at most the
    /// QP's `max_inline_data` bytes in all, `ENOSPC`).
    ///
    /// # Safety
    /// Each piece names `length` readable bytes (none NULL with a length).
    pub(super) unsafe fn set_inline_list(
        &mut self,
        uv: &mut QueuePair,
        config: &Config,
        pieces: &[ibv_data_buf],
    ) {
        if !self.takes_data(true) {
            return;
        }
        let total = pieces
            .iter()
            .try_fold(0usize, |n, p| n.checked_add(p.length));
        if total.is_none_or(|n| n > config.max_inline as usize) {
            return self.fail(Errno::ENOSPC);
        }
        self.inline.clear();
        for p in pieces.iter().filter(|p| p.length > 0) {
            // SAFETY: the caller's contract: `length` readable bytes.
            let bytes = unsafe { core::slice::from_raw_parts(p.addr.cast::<u8>(), p.length) };
            self.inline.extend_from_slice(bytes);
        }
        if config.ud && self.ud.is_none() {
            self.data = Some(Stashed::Inline);
            return;
        }
        self.req = Req::Pushed;
        let Some(ud) = resolve(&mut self.err, self.ud) else {
            return;
        };
        let wr = self.wr.payload(Payload::Inline(&self.inline)).ud(ud);
        push_any(&mut self.err, uv, &wr);
    }

    /// `ibv_wr_set_ud_addr`: the open UD request's destination (`EINVAL`
    /// on a connected QP, for a NULL AH, with no request open or for a
    /// second one); pushed now if its data is in.
    pub(super) fn set_ud_addr(
        &mut self,
        uv: &mut QueuePair,
        config: &Config,
        ah: *mut ibv_ah,
        remote_qpn: u32,
        remote_qkey: u32,
    ) {
        if !config.ud || ah.is_null() || self.req != Req::Building || self.ud.is_some() {
            return self.fail(Errno::EINVAL);
        }
        self.ud = Some(UdAddr {
            ah: ah as usize,
            remote_qpn,
            remote_qkey,
        });
        if self.data.is_some() {
            self.flush(uv);
        }
    }
}

/// A request's UD destination resolved (`Ok(None)` for none); `None` when
/// its AH is not one (the session failed).
#[inline(always)]
fn resolve<'a>(err: &mut Option<Errno>, ud: Option<UdAddr>) -> Option<Option<UdDest<'a>>> {
    let Some(d) = ud else {
        return Some(None);
    };
    // SAFETY: verbs.h's contract: the AH given to `ibv_wr_set_ud_addr` is
    // a live AH of this library until the request is posted (checked
    // non-NULL by the setter).
    match unsafe { Ah::from_c(d.ah as *mut ibv_ah) } {
        Ok(ah) => Some(Some(UdDest::new(ah.handle(), d.remote_qpn, d.remote_qkey))),
        Err(e) => {
            err.get_or_insert(e);
            None
        }
    }
}

/// Pushes `wr`, failing the session with uverbs' refusal (out of line:
/// the push of any operation, for the uncommon setters).
#[inline(never)]
fn push_any(err: &mut Option<Errno>, uv: &mut QueuePair, wr: &SendWr<'_>) {
    if let Err(e) = uv.push_send(wr) {
        err.get_or_insert(session_errno(&e));
    }
}

/// A push of a request whose operation the builder knew.
type PushFn = fn(&mut QueuePair, &SendWr<'_>) -> Result<(), PostError>;

/// The push of a request of operation `op`: for the common ones a push
/// made for that operation alone (uverbs' push inlined into a function
/// that knows the operation, which folds the other operations' checks and
/// WQE layouts away: `benches/callgrind.sh --cabi`), else the push of any.
fn push_for(op: SendOp) -> PushFn {
    match op {
        SendOp::Send => push_send_op,
        SendOp::SendWithImm { .. } => push_send_imm_op,
        SendOp::RdmaWrite { .. } => push_write_op,
        SendOp::RdmaWriteWithImm { .. } => push_write_imm_op,
        SendOp::RdmaRead { .. } => push_read_op,
        _ => push_any_op,
    }
}

/// The push of any operation.
#[inline(never)]
fn push_any_op(uv: &mut QueuePair, wr: &SendWr<'_>) -> Result<(), PostError> {
    uv.push_send(wr)
}

/// Defines a push made for one operation (its request's operation is
/// that one: [`push_for`] chose it; another goes to the push of any).
macro_rules! push_op {
    ($($(#[$doc:meta])* $name:ident: $pat:pat => $op:expr;)*) => {$(
        $(#[$doc])*
        #[inline(never)]
        fn $name(uv: &mut QueuePair, wr: &SendWr<'_>) -> Result<(), PostError> {
            let $pat = wr.op else {
                return push_any_op(uv, wr);
            };
            uv.push_send(&(*wr)
.op($op))
        }
    )*};
}

push_op! {
    /// A SEND's push.
    push_send_op: SendOp::Send => SendOp::Send;
    /// A SEND with immediate data's push.
    push_send_imm_op: SendOp::SendWithImm { imm } => SendOp::SendWithImm { imm };
    /// An RDMA WRITE's push.
    push_write_op: SendOp::RdmaWrite { remote_addr, rkey } =>
        SendOp::RdmaWrite { remote_addr, rkey };
    /// An RDMA WRITE with immediate data's push.
    push_write_imm_op: SendOp::RdmaWriteWithImm { remote_addr, rkey, imm } =>
        SendOp::RdmaWriteWithImm { remote_addr, rkey, imm };
    /// An RDMA READ's push.
    push_read_op: SendOp::RdmaRead { remote_addr, rkey } =>
        SendOp::RdmaRead { remote_addr, rkey };
}
