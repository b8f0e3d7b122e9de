//! The mlx5 send session (`ibv_wr_start` .. `ibv_wr_complete`): its cursor
//! ([`Cursor`]: where the next WQE goes, the work requests written, the
//! room left, the last WQE for the doorbell) lives in the send queue
//! ([`Mlx5Sq`]'s `open`), as libmlx5 keeps `cur_post` and `nreq` in its
//! `mlx5_qp`; what the device was given ([`Posted`]) moves only at
//! complete.
//!
//! A view of the session ([`SqSession`]) holds the queue borrowed and takes
//! the cursor out of it into itself, so that over requests written in one
//! function the cursor and what writing needs stay in registers (read
//! through the queue, they would be reloaded after every store to the
//! ring, which the compiler must assume may alias them). The view gives the
//! cursor back when it is suspended ([`SqSession::suspend`]: the session
//! stays open, as between two C calls of `ibv_wr_*`) or completed; an
//! aborted, dropped or forgotten view leaves the queue as it was: its WQEs,
//! written past the doorbell record, are overwritten by the next ones.

use std::borrow::Borrow;

use super::{wqebbs, Av, Known, Last, Mlx5Sq, Posted, SqRules, SqShape, SqState, Writer};
use crate::wr::{PostErrorKind, SendWr};

/// Where an open send session is: the queue's counters with the session's
/// requests written, the room left, and the last WQE written.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cursor {
    /// WQEBB counter of the next WQE.
    cur: u32,
    /// Work requests written, the session's included.
    head: u32,
    /// Requests the queue takes before the poller's tail is read again.
    room: u32,
    /// The last WQE written.
    last: Last,
}

impl Cursor {
    /// A session with nothing written, after `posted`, `room` requests
    /// known to fit.
    #[inline(always)]
    fn at(posted: Posted, room: u32) -> Self {
        Cursor {
            cur: posted.cur_post,
            head: posted.head,
            room,
            last: Last {
                at: posted.cur_post,
                ds: 0,
                head: [0; 8],
                inline: false,
            },
        }
    }
}

impl Cursor {
    /// Makes sure the queue takes one more request: the room counted
    /// down, the poller's tail read again when it runs out. A full queue's
    /// next blocks may still be read by the device, so nothing may be
    /// written there: `QueueFull`, nothing taken.
    #[inline(always)]
    fn take_room(&mut self, shape: &SqShape) -> Result<(), PostErrorKind> {
        if self.room == 0 {
            self.room = shape.room(self.head);
            if self.room == 0 {
                return Err(PostErrorKind::QueueFull);
            }
        }
        Ok(())
    }

    /// Moves past the WQE just written.
    #[inline(always)]
    fn advance(&mut self, last: Last) {
        self.last = last;
        self.room -= 1;
        self.head = self.head.wrapping_add(1);
        self.cur = self.cur.wrapping_add(wqebbs(last.ds));
    }

    /// Checks and writes one WQE at the cursor (the one push every way
    /// into the session takes): on an error nothing of it is taken.
    #[inline(always)]
    fn push<R: Borrow<SqRules>>(
        &mut self,
        shape: &SqShape,
        w: &Writer<'_, R>,
        wr: &SendWr<'_>,
        av_of: impl for<'w> Fn(&SendWr<'w>) -> Result<&'w Av, PostErrorKind>,
        known: Known,
    ) -> Result<(), PostErrorKind> {
        self.take_room(shape)?;
        let last = w.write_wqe(wr, &av_of, self.cur, self.head, known)?;
        self.advance(last);
        Ok(())
    }
}

impl Default for Cursor {
    fn default() -> Self {
        Cursor::at(Posted::default(), 0)
    }
}

impl Mlx5Sq {
    /// Opens the send session (`ibv_wr_start`): the queue's cursor at the
    /// end of what the device was given; an open one is dropped.
    #[inline]
    pub(crate) fn begin(&mut self) {
        self.state.open = self.shape.cursor_after(self.state.posted);
    }

    /// Opens the send session and views it ([`Mlx5Sq::begin`], then
    /// [`Mlx5Sq::resume`], the cursor going straight into the view).
    #[inline(always)]
    pub(crate) fn start(&mut self) -> SqSession<'_> {
        self.start_with(|rules| *rules)
    }

    /// [`Mlx5Sq::start`] with the queue's settings held as `rules` gives
    /// them: copied or by reference (see [`Writer`]).
    #[inline(always)]
    pub(super) fn start_with<'q, R>(
        &'q mut self,
        rules: impl FnOnce(&'q SqRules) -> R,
    ) -> SqSession<'q, R> {
        let Mlx5Sq { shape, state } = self;
        // The writer first, then the room (its acquire load): the writer's
        // loads may then be scheduled before it (`benches/callgrind.sh
        // --mlx5`: the other order cost the typed loop two moves per
        // request).
        let w = shape.writer(rules);
        let c = shape.cursor_after(state.posted);
        SqSession { w, shape, state, c }
    }

    /// The open session as a view: its cursor taken out of the queue.
    #[inline(always)]
    pub(crate) fn resume(&mut self) -> SqSession<'_> {
        let Mlx5Sq { shape, state } = self;
        SqSession {
            w: shape.writer(|rules| *rules),
            shape,
            c: state.open,
            state,
        }
    }
}

impl Mlx5Sq {
    /// One request into the open session, on its own (a session of
    /// calls): the queue's settings read by reference (one request does
    /// not repay copying them), the cursor moved where it is.
    #[inline(always)]
    pub(crate) fn push_open(
        &mut self,
        wr: &SendWr<'_>,
        av_of: impl for<'w> Fn(&SendWr<'w>) -> Result<&'w Av, PostErrorKind>,
    ) -> Result<(), PostErrorKind> {
        // The cursor written in place (not copied out and back).
        let Mlx5Sq { shape, state } = self;
        let w = shape.writer(|rules| rules);
        state.open.push(shape, &w, wr, av_of, Known::Nothing)
    }
}

impl SqShape {
    /// The cursor of a session opened after `posted`.
    #[inline(always)]
    fn cursor_after(&self, posted: Posted) -> Cursor {
        Cursor::at(posted, self.room(posted.head))
    }
}

/// A view of the send session ([the module](self)): WQEs written past the
/// doorbell record, invisible to the device until [`SqSession::complete`].
#[derive(Debug)]
pub(crate) struct SqSession<'q, R = SqRules> {
    w: Writer<'q, R>,
    shape: &'q SqShape,
    /// The queue's counters and the cursor's place: what the device was
    /// given, updated at complete.
    state: &'q mut SqState,
    /// The session's cursor, out of the queue while the view lives.
    c: Cursor,
}

impl<R: Borrow<SqRules>> SqSession<'_, R> {
    /// Checks and writes one WQE, as [`Mlx5Sq::post`] does for each of its
    /// requests; the doorbell record stays where it was, so the device
    /// does not see it before [`SqSession::complete`]. On an error nothing
    /// of it is taken. `known`: what the caller's types already checked.
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        wr: &SendWr<'_>,
        av_of: impl for<'w> Fn(&SendWr<'w>) -> Result<&'w Av, PostErrorKind>,
        known: Known,
    ) -> Result<(), PostErrorKind> {
        self.c.push(self.shape, &self.w, wr, av_of, known)
    }

    /// Writes a WQE the program built (`mlx5dv_wr_raw_wqe`), as the next
    /// request of the session: its ctrl segment's DS (`qpn_ds & 0x3f`) says
    /// how many 16-byte units of `wqe` it has. Refused (nothing taken): a
    /// full queue; a DS of 0, more than `wqe` holds, or more than this
    /// queue's WQEs were sized for (the ring's room is counted in WQEs of
    /// that size, so a larger one could overwrite one the device reads).
    pub(crate) fn push_raw(&mut self, wr_id: u64, wqe: &[u8]) -> Result<(), PostErrorKind> {
        let ds = wqe.get(4..8).map_or(0, |b| u32::from(b[3] & 0x3f));
        if ds == 0 || ds as usize * 16 > wqe.len() {
            return Err(PostErrorKind::OpNotSupported(
                "a raw WQE's ctrl segment must count its 16-byte units (qpn_ds & 0x3f), \
                 all of them in the buffer given",
            ));
        }
        if ds > self.shape.max_ds() {
            return Err(PostErrorKind::OpNotSupported(
                "a raw WQE larger than the WQEs the send queue was sized for",
            ));
        }
        self.c.take_room(self.shape)?;
        let last = self.w.write_raw(wqe, ds, self.c.cur, wr_id, self.c.head);
        self.c.advance(last);
        Ok(())
    }

    /// Puts the cursor back into the queue: the session stays open with
    /// what this view wrote, for the next [`Mlx5Sq::resume`].
    #[inline(always)]
    pub(crate) fn suspend(self) {
        self.state.open = self.c;
    }

    /// Ends the session (`ibv_wr_complete`) of `nreq` requests (the pushes
    /// that succeeded, as the caller counts them: counted here too, the
    /// count would be reloaded from the queue after the WQE stores): the
    /// queue takes its WQEs and the doorbell is rung once for them, if
    /// there are any.
    #[inline(always)]
    pub(crate) fn complete(&mut self, nreq: usize) {
        debug_assert_eq!(
            nreq,
            self.c.head.wrapping_sub(self.state.posted.head) as usize
        );
        if nreq != 0 {
            self.state.posted = Posted {
                cur_post: self.c.cur,
                head: self.c.head,
            };
            self.shape.ring(self.c.cur, self.c.last, nreq, self.w.q);
        }
    }
}
