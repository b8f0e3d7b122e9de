//! Event accounting: the contract between event delivery and destroy.
//!
//! The kernel counts, per object, the events userspace has *read* from an
//! event fd (`comp_events_reported`, `async_events_reported`,
//! `events_reported`), and returns the totals when the object is destroyed
//! (`drivers/infiniband/core/uverbs_main.c`, `ib_uverbs_event_read`; the
//! destroy also drops the object's events still queued,
//! `uverbs_free_cq`/`uverbs_free_qp` in `uverbs_std_types_*.c`). Like
//! libibverbs (`libibverbs/cmd_cq.c`, `ibv_cmd_destroy_cq`), a destroy sends
//! its command first and then waits until the program has acknowledged that
//! many events, so no event of the object is still being handled when the
//! destroy returns. Nothing is locked across the command that event
//! delivery needs: events of every other object keep flowing.
//!
//! Each object that can have events owns an [`EventCounts`] (shared with the
//! context's [`Registry`], which maps the 64-bit `user_handle` the kernel puts
//! in every event back to it). This module knows the objects only as
//! `dyn Any` ([`Target`]): the event readers downcast what they find.
//!
//! An event is acknowledged in one of two ways:
//!
//! - its value is dropped ([`Held`]): the value keeps the object alive and
//!   is `!Send`; the counts remember which thread holds how many, so a
//!   thread that calls `destroy` while it holds one gets `EBUSY` instead of
//!   waiting for itself;
//! - its value is turned into a count kept by the object
//!   ([`Held::defer`]), which any thread acknowledges later by number, as
//!   `ibv_ack_cq_events(cq, n)` does ([`EventCounts::ack_deferred`]). Only
//!   the owner of the object's handle can do that, and a destroy owns the
//!   handle, so a destroy that finds deferred counts fails with `EBUSY`
//!   (nobody could ever acknowledge them).
//!
//! A destroy that waits ([`destroy_reachable`] with [`Pending::Wait`]) thus
//! waits only for events other threads hold as values or are reading right
//! now: it is woken by their drops.
//!
//! libibverbs' own form ([`Pending::WaitDeferred`], the objects'
//! `destroy_awaiting_acks`) lifts the refusal for deferred counts: their
//! acknowledgements come through an [`EventAcks`](crate::EventAcks), which
//! holds the counts and not the handle, so other threads acknowledge while
//! the destroy, its command sent, waits for them (a C library over this
//! crate destroys that way, as `ibv_destroy_cq` does).
//!
//! # Events read behind the library's back
//!
//! A program that reads a record from an event fd itself (through `AsFd`)
//! takes an event the kernel counts as reported and the library never sees,
//! so nobody will ever acknowledge it. Only an explicit `destroy()` waits
//! for acknowledgements after the destroy command (as libibverbs does), and
//! it then waits forever. The last drop and `try_destroy` never wait there:
//! when the counts do not match yet they *park* the object's entry
//! ([`EventCounts::close`]), detached, and the reader that acknowledges the
//! last outstanding event removes it ([`Registry::ack_detached`]). An event
//! stolen that way leaves its parked entry until the context (for rdma_cm
//! ids, the process) goes. Events read after the entry is detached are
//! acknowledged by the reading thread without reaching the program.

pub(crate) use crate::event_registry::{Lookup, Registry, Target};
use crate::object::{busy, Destroy, Owned};
use crate::sync::{fence, AtomicU32, Condvar, Mutex, MutexGuard};
use std::{
    sync::{atomic::Ordering, Arc},
    thread::{self, ThreadId},
};

/// The calling thread's id, without the reference count traffic of
/// `thread::current()` (it is asked for on every delivered event).
pub(crate) fn current_thread() -> ThreadId {
    thread_local! {
        static ME: ThreadId = thread::current().id();
    }
    ME.with(|me| *me)
}

/// The two streams an object can receive events on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// Completion events (completion channel; CQs only).
    Completion,
    /// Async events (the context's async event fd; rdma_cm events).
    Async,
}

fn index(stream: Stream) -> usize {
    match stream {
        Stream::Completion => 0,
        Stream::Async => 1,
    }
}

#[derive(Debug, Default)]
struct Counts {
    /// Events acknowledged so far, per stream (wrapping, as the kernel's u32).
    acked: [u32; 2],
    /// Event values delivered and not yet acknowledged, by the thread
    /// holding them.
    held: Vec<(ThreadId, u32)>,
    /// Events turned into counts ([`Held::defer`]) and not yet
    /// acknowledged, per stream, besides those still in
    /// [`EventCounts::pending`] (folded in here under the lock by every
    /// reader of this count).
    deferred: [u32; 2],
    /// The destroy command has run ([`EventCounts::close`]): deferring
    /// acknowledges at once, since no handle is left to acknowledge with.
    closed: bool,
    /// The counts the kernel reported at a destroy that did not wait for
    /// them ([`EventCounts::close`]); `None` once reached, or when no
    /// such destroy happened.
    parked: Option<[u32; 2]>,
}

impl Counts {
    /// Drops one from `holder`'s held events (`n` of them).
    fn release(&mut self, holder: ThreadId, n: u32) {
        if let Some(pos) = self.held.iter().position(|(h, _)| *h == holder) {
            let left = self.held[pos].1.saturating_sub(n);
            if left == 0 {
                self.held.swap_remove(pos);
            } else {
                self.held[pos].1 = left;
            }
        }
    }

    /// Adds `n` acknowledgements of `stream`; true when they reach the
    /// counts of a parked destroy (which is then over).
    fn add_acked(&mut self, stream: Stream, n: u32) -> bool {
        let i = index(stream);
        self.acked[i] = self.acked[i].wrapping_add(n);
        let settled = self.parked.is_some_and(|p| p == self.acked);
        if settled {
            self.parked = None;
        }
        settled
    }
}

/// What a destroy found outstanding before its command
/// ([`EventCounts::outstanding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outstanding {
    /// Event values the calling thread holds.
    pub(crate) mine: u32,
    /// Event values other threads hold.
    pub(crate) others: u32,
    /// Deferred counts, both streams.
    pub(crate) deferred: u32,
}

/// Per-object event counts; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct EventCounts {
    counts: Mutex<Counts>,
    /// Deferred counts taken without the lock, per stream: an event read
    /// and counted at once ([`EventCounts::defer`] with no holder, what
    /// `ibv_get_cq_event` does on every event) is one compare-exchange
    /// here. [`PENDING_CLOSED`] is set by [`EventCounts::close`], after
    /// which deferring takes the lock (it acknowledges instead). Whoever
    /// reads the deferred counts moves these into [`Counts::deferred`]
    /// under the lock first ([`EventCounts::lock_folded`]); each move and
    /// each increment is one read-modify-write of the same atomic, so every
    /// increment is either moved or sees the close.
    pending: [AtomicU32; 2],
    pub(crate) changed: Condvar,
    /// Threads waiting on `changed` (destroys). Acknowledgements and
    /// releases wake someone only when this is non-zero, so the common case
    /// (nobody destroying) takes no extra lock and makes no futex call. A
    /// waiter registers before it checks its condition and a notifier reads
    /// this after its change, each behind a `SeqCst` fence, so one of them
    /// sees the other (see `wait_while_locked` and `notify`).
    waiters: AtomicU32,
    /// Acquisitions of `counts` (tests count them).
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) locks: AtomicU32,
}

/// Set in [`EventCounts::pending`] once the counts are closed.
const PENDING_CLOSED: u32 = 1 << 31;

impl EventCounts {
    /// The counts with the lock-free deferrals moved into them.
    fn lock_folded(&self) -> MutexGuard<'_, Counts> {
        let mut c = self.lock();
        for (d, p) in c.deferred.iter_mut().zip(&self.pending) {
            *d += p.fetch_and(PENDING_CLOSED, Ordering::Relaxed) & !PENDING_CLOSED;
        }
        c
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        #[cfg(any(test, feature = "test-utils"))]
        self.locks.fetch_add(1, Ordering::Relaxed);
        // A panic while holding this lock leaves plain counters behind: keep going.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that the current thread now holds one delivered event.
    fn delivered(&self) {
        let me = current_thread();
        let mut c = self.lock();
        match c.held.iter_mut().find(|(t, _)| *t == me) {
            Some((_, n)) => *n += 1,
            None => c.held.push((me, 1)),
        }
    }

    /// Acknowledges `n` events of `stream` held by `holder` (`None`: events
    /// that were read but never delivered, e.g. for an object being destroyed),
    /// and wakes waiters.
    #[cfg(test)]
    pub(crate) fn ack(&self, stream: Stream, n: u32, holder: Option<ThreadId>) {
        if self.ack_quiet(stream, n, holder) {
            self.changed.notify_all();
        }
    }

    /// [`EventCounts::ack`] without waking anyone: for an event value that
    /// still has to release its reference and then calls [`EventCounts::notify`].
    /// Returns whether a destroy is waiting.
    pub(crate) fn ack_quiet(&self, stream: Stream, n: u32, holder: Option<ThreadId>) -> bool {
        self.ack_counting(stream, n, holder).0
    }

    /// Acknowledges `n` events as [`EventCounts::ack_quiet`] does; returns
    /// whether a destroy is waiting, and whether this acknowledgement
    /// reached the counts of a parked destroy ([`EventCounts::close`]).
    pub(crate) fn ack_counting(
        &self,
        stream: Stream,
        n: u32,
        holder: Option<ThreadId>,
    ) -> (bool, bool) {
        let mut c = self.lock();
        if let Some(t) = holder {
            c.release(t, n);
        }
        let settled = c.add_acked(stream, n);
        (self.waiters.load(Ordering::Relaxed) > 0, settled)
    }

    /// Turns one event value `holder` holds (`None`: an event read and
    /// never made a value, [`Registry::deliver_deferred`]) into a deferred
    /// count (or acknowledges it, once the object's destroy command has
    /// run: no handle is left to acknowledge it with). Returns true when
    /// that acknowledgement reached the counts of a parked destroy (the
    /// object's parked entry can go, as in [`Registry::ack_detached`]).
    /// Wakes nobody: a caller holding a reference to the object releases it
    /// and then calls [`EventCounts::notify`] ([`EventCounts::defer_releasing`]);
    /// [`Registry::deliver_deferred`] holds none.
    #[inline]
    pub(crate) fn defer(&self, stream: Stream, holder: Option<ThreadId>) -> bool {
        if holder.is_none() && self.try_defer(stream) {
            return false;
        }
        self.defer_locked(stream, holder)
    }

    /// Counts one event of `stream` read and never made a value as
    /// deferred, without the lock; false (nothing counted) once the counts
    /// are closed.
    #[inline]
    pub(crate) fn try_defer(&self, stream: Stream) -> bool {
        let pending = &self.pending[index(stream)];
        let mut v = pending.load(Ordering::Relaxed);
        // Far below the closed bit: a deferred count is an event the
        // kernel delivered and nobody acknowledged.
        while v & PENDING_CLOSED == 0 {
            match pending.compare_exchange_weak(v, v + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
        false
    }

    /// [`EventCounts::defer`] of an event value, or of any event once the
    /// counts are closed.
    #[inline(never)]
    fn defer_locked(&self, stream: Stream, holder: Option<ThreadId>) -> bool {
        let mut c = self.lock();
        if let Some(holder) = holder {
            c.release(holder, 1);
        }
        if c.closed {
            c.add_acked(stream, 1)
        } else {
            c.deferred[index(stream)] += 1;
            false
        }
    }

    /// [`EventCounts::defer`], then releases the reader's reference to the
    /// object (`claim`) and wakes a destroy waiting for that release.
    ///
    /// Whether anyone waits is read after the release ([`EventCounts::notify`]),
    /// never at the count: a destroy may close the counts, find them
    /// settled and register as a waiter for the references between the two
    /// (`loom_a_deferring_reader_releases_and_wakes_a_waiting_destroy`).
    #[inline]
    pub(crate) fn defer_releasing<T>(
        &self,
        stream: Stream,
        holder: Option<ThreadId>,
        claim: T,
    ) -> bool {
        let settled = self.defer(stream, holder);
        drop(claim);
        self.notify();
        settled
    }

    /// Acknowledges `n` deferred events of `stream`, as
    /// `ibv_ack_cq_events(cq, n)` does, and wakes a destroy waiting for
    /// them ([`Pending::WaitDeferred`]); `Err(deferred)` (nothing
    /// acknowledged) when fewer than `n` are deferred.
    pub(crate) fn ack_deferred(&self, stream: Stream, n: u32) -> Result<(), u32> {
        let mut c = self.lock_folded();
        let i = index(stream);
        if n > c.deferred[i] {
            return Err(c.deferred[i]);
        }
        c.deferred[i] -= n;
        c.add_acked(stream, n);
        // Read under the lock a waiter registers under: it is either
        // counted here or checks after this change.
        let waiting = self.waiters.load(Ordering::Relaxed) > 0;
        drop(c);
        if waiting {
            self.changed.notify_all();
        }
        Ok(())
    }

    /// The deferred count of `stream`.
    pub(crate) fn deferred(&self, stream: Stream) -> u32 {
        self.lock_folded().deferred[index(stream)]
    }

    /// What is outstanding, as a destroy checks it before its command.
    pub(crate) fn outstanding(&self) -> Outstanding {
        let me = current_thread();
        let c = self.lock_folded();
        let (mut mine, mut others) = (0, 0);
        for &(t, n) in &c.held {
            if t == me {
                mine += n;
            } else {
                others += n;
            }
        }
        Outstanding {
            mine,
            others,
            deferred: c.deferred[0].saturating_add(c.deferred[1]),
        }
    }

    /// After a destroy command that reported `reported` events: from now on
    /// deferring acknowledges, and deferred counts are given up
    /// (acknowledged: no handle can acknowledge them any more). With
    /// `park`, when not every reported event is acknowledged yet, parks
    /// `reported`, and the acknowledgement that reaches it says so
    /// ([`Registry::ack_detached`]). Returns true when every one is
    /// acknowledged already; exactly one of this and the acknowledgements
    /// sees the counts settled (all decide under the lock).
    pub(crate) fn close(&self, reported: [u32; 2], park: bool) -> bool {
        let mut c = self.lock();
        c.closed = true;
        for (d, p) in c.deferred.iter_mut().zip(&self.pending) {
            *d += p.swap(PENDING_CLOSED, Ordering::Relaxed) & !PENDING_CLOSED;
        }
        let deferred = std::mem::take(&mut c.deferred);
        c.add_acked(Stream::Completion, deferred[0]);
        c.add_acked(Stream::Async, deferred[1]);
        if c.acked == reported {
            return true;
        }
        if park {
            c.parked = Some(reported);
        }
        false
    }

    #[cfg(test)]
    /// How many delivered events are held in total.
    pub(crate) fn held_total(&self) -> u32 {
        self.lock().held.iter().map(|(_, n)| *n).sum()
    }

    /// Wakes the threads waiting in a destroy (after an event released its
    /// reference to the object). Taking the lock orders the release before
    /// any waiter's next check, so no wake-up is lost.
    pub(crate) fn notify(&self) {
        // Orders the caller's change (an Arc released) before the read of
        // `waiters`; pairs with the fence in `wait_while_locked`.
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::Relaxed) > 0 {
            // A waiter is between its check and its wait, or waiting: the
            // lock makes it finish either before this change is checked
            // again or in the wait that this wakes.
            drop(self.lock());
            self.changed.notify_all();
        }
    }

    /// Blocks until as many events were acknowledged as the kernel reported.
    pub(crate) fn wait_acked(&self, reported: [u32; 2]) {
        self.wait_while_locked(|c| c.acked != reported, || false);
    }

    /// Blocks while `busy()` is true, re-checking after every acknowledgement
    /// and every [`EventCounts::notify`].
    pub(crate) fn wait_while(&self, busy: impl FnMut() -> bool) {
        self.wait_while_locked(|_| false, busy);
    }

    /// Waits while `counted(counts)` or `busy()`, registered as a waiter
    /// before the first check.
    fn wait_while_locked(
        &self,
        mut counted: impl FnMut(&Counts) -> bool,
        mut busy: impl FnMut() -> bool,
    ) {
        let mut c = self.lock();
        self.waiters.fetch_add(1, Ordering::Relaxed);
        // Pairs with the fence in `notify`: either that notifier sees this
        // waiter, or the check below sees its change.
        fence(Ordering::SeqCst);
        while counted(&c) || busy() {
            c = self.changed.wait(c).unwrap_or_else(|p| p.into_inner());
        }
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        drop(c);
    }

    #[cfg(test)]
    /// The acknowledged counts (completion, async).
    pub(crate) fn acked(&self) -> [u32; 2] {
        self.lock().acked
    }
}

/// The `ack_events` of CQs, QPs and SRQs: acknowledges `n` deferred events
/// of `stream` ([`Held::defer`]); nothing is acknowledged when fewer are
/// deferred.
pub(crate) fn ack_deferred(
    counts: &EventCounts,
    stream: Stream,
    n: u32,
    op: &'static str,
) -> crate::Result<()> {
    counts.ack_deferred(stream, n).map_err(|have| {
        crate::Error::new(
            op,
            crate::ErrorKind::InvalidArgument,
            format!(
                "asked to acknowledge {n} event(s) but {have} are deferred (defer_ack) and \
                 unacknowledged: nothing was acknowledged"
            ),
        )
    })
}

/// An event value's claim on its object: keeps the object alive, and is
/// acknowledged when dropped (or turned into a deferred count).
#[derive(Debug)]
pub(crate) struct Held<T> {
    // `Some` until dropped or deferred: the reference is released after
    // the acknowledgement and before waking destroyers.
    object: Option<Arc<T>>,
    counts: Arc<EventCounts>,
    stream: Stream,
    holder: ThreadId,
}

impl<T> Held<T> {
    /// The claim of an event of `stream` just read for `object`, held by
    /// the calling thread.
    #[inline]
    pub(crate) fn new(object: Arc<T>, counts: Arc<EventCounts>, stream: Stream) -> Self {
        counts.delivered();
        Held {
            object: Some(object),
            counts,
            stream,
            holder: current_thread(),
        }
    }

    /// The object.
    pub(crate) fn object(&self) -> &Arc<T> {
        match &self.object {
            Some(o) => o,
            None => unreachable!(
                "the object is released only by drop or defer, which consume the claim"
            ),
        }
    }

    /// Leaves the event unacknowledged, counted by its object, for a later
    /// [`EventCounts::ack_deferred`] from any thread.
    #[inline]
    pub(crate) fn defer(mut self) {
        if let Some(object) = self.object.take() {
            // A value's object is alive, so no destroy parked its counts.
            self.counts
                .defer_releasing(self.stream, Some(self.holder), object);
        }
    }

    /// Acknowledges every claim of `batch` (all on `self`'s object, by its
    /// holder) with one lock of the counts, then releases them and wakes a
    /// waiting destroy once.
    pub(crate) fn ack_batch(batch: &mut [&mut Held<T>]) {
        let Some(first) = batch.first() else { return };
        let counts = first.counts.clone();
        let n = batch.iter().filter(|h| h.object.is_some()).count() as u32;
        counts.ack_quiet(first.stream, n, Some(first.holder));
        for h in batch.iter_mut() {
            h.object = None;
        }
        counts.notify();
    }
}

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        if let Some(object) = self.object.take() {
            // Acknowledge before releasing the object: if this is the last
            // reference, its destroy then finds every event acknowledged.
            self.counts.ack_quiet(self.stream, 1, Some(self.holder));
            drop(object);
            self.counts.notify();
        }
    }
}

/// An object the kernel reports events for (CQ, QP, SRQ, CM id), as its
/// destroy sees it.
pub(crate) trait EventObject: Destroy {
    /// Its event counts.
    fn counts(&self) -> &EventCounts;
    /// The map its events are delivered through, and its key there.
    fn registry(&self) -> (&Registry, u64);
    /// The destroy command alone: the event counts the kernel reported
    /// (completion, async), or `None` when the device is gone (the kernel
    /// destroyed everything; no event will need acknowledging).
    fn destroy_reporting(&self) -> crate::Result<Option<[u32; 2]>>;
}

/// The destroy of an event object nothing can reach any more (its last
/// reference is being dropped): `Destroy::destroy_kernel` of CQs, QPs, SRQs
/// and CM ids.
///
/// No event value of it exists (they hold it), and it waits for nothing:
/// deferred counts are given up (no handle is left to acknowledge them),
/// and events other threads read and have not looked up yet find the
/// object gone and are acknowledged by those threads, which remove the
/// parked entry ([`EventCounts::close`]). An event the program read from
/// the fd itself is never acknowledged, and never waited for.
pub(crate) fn destroy_unreachable<T: EventObject>(obj: &T) -> crate::Result<()> {
    let (registry, key) = obj.registry();
    let result = obj.destroy_reporting();
    if let Ok(Some(reported)) = result {
        if !obj.counts().close(reported, true) {
            return Ok(());
        }
    }
    registry.remove(key);
    result.map(|_| ())
}

/// Whether an explicit destroy waits for events other threads hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pending {
    /// Wait until they are acknowledged (`destroy`).
    Wait,
    /// Fail with `EAGAIN` instead (`try_destroy`).
    Refuse,
    /// libibverbs' destroy exactly (`destroy_awaiting_acks`): deferred
    /// counts do not refuse it, the command runs, and it waits until every
    /// event the kernel reported is acknowledged, deferred ones included,
    /// which other threads acknowledge through an
    /// [`EventAcks`](crate::EventAcks) meanwhile.
    WaitDeferred,
}

/// Destroys an event object its handle still holds, as `destroy()`
/// promises, in libibverbs' order: the command first, then the wait for
/// the events the kernel reported. On error the object is untouched and
/// usable.
///
/// Before the command:
/// - `EBUSY` while child objects use it (`children()` > 0), while the
///   calling thread holds one of its event values (it would wait for
///   itself), and while deferred counts are unacknowledged (the caller owns
///   the handle they are acknowledged through, so nobody else can), except
///   with [`Pending::WaitDeferred`], whose caller acknowledges through an
///   [`EventAcks`](crate::EventAcks) and which waits for them after the
///   command;
/// - [`Pending::Refuse`]: `EAGAIN` while other threads hold event values.
///
/// Then the destroy command runs with no lock held that event delivery
/// takes; if it fails, nothing changed. If it succeeds, the object's entry
/// stops resolving (events read later are acknowledged by their readers, as
/// for a gone object), and [`Pending::Wait`] waits until every event the
/// kernel reported is acknowledged (values other threads hold or are
/// making right now; forever if the program read one from the fd itself)
/// and the values have released the object, while [`Pending::Refuse`]
/// parks the entry instead ([`EventCounts::close`]) and returns.
///
/// Every reference to the object besides its handle is an event value or
/// a child's [`ParentLink`](crate::object::ParentLink); children are ruled
/// out and none can be added (the caller owns the handle), and event values
/// wake [`EventCounts`] waiters after they release the object, so a destroy
/// that waits is woken by the release it waits for.
pub(crate) fn destroy_reachable<T: EventObject>(
    arc: &Arc<Owned<T>>,
    children: impl Fn() -> usize,
    pending: Pending,
    op: &'static str,
) -> crate::Result<()> {
    let counts = arc.counts();
    let out = counts.outstanding();
    let ebusy =
        |detail: String| crate::Error::sys(op, crate::sys::Errno::EBUSY).with_detail(detail);
    if out.mine > 0 {
        return Err(ebusy(format!(
            "this thread holds {} unacknowledged event(s) of this object: \
             acknowledge (drop) them first",
            out.mine
        )));
    }
    if out.deferred > 0 && pending != Pending::WaitDeferred {
        return Err(ebusy(format!(
            "{} event(s) of this object were deferred (defer_ack) and are not acknowledged: \
             acknowledge them by count first (ack_events / ack_async_events); nobody else can \
             once destroy owns the handle",
            out.deferred
        )));
    }
    let n = children();
    if n > 0 {
        return Err(busy(
            op,
            n,
            "destroy those first (the object is given back with this error)",
        ));
    }
    if pending == Pending::Refuse && out.others > 0 {
        return Err(
            crate::Error::sys(op, crate::sys::Errno::EAGAIN).with_detail(format!(
                "{} unacknowledged event(s) held by other threads still use it: \
                 retry once they are acknowledged, or destroy() to wait for them",
                out.others
            )),
        );
    }
    let reported = arc.destroy_reporting()?;
    arc.mark_destroyed();
    let (registry, key) = arc.registry();
    registry.detach(key);
    let Some(reported) = reported else {
        // The device is gone: nothing will be acknowledged or waited for.
        registry.remove(key);
        return Ok(());
    };
    match pending {
        Pending::Wait => {
            if !counts.close(reported, false) {
                counts.wait_acked(reported);
            }
            // Acknowledged values release the object right after.
            counts.wait_while(|| Arc::strong_count(arc) > 1);
        }
        Pending::Refuse => {
            if !counts.close(reported, true) {
                return Ok(());
            }
        }
        Pending::WaitDeferred => {
            // Not closed: an event deferred from now on stays counted for
            // the program to acknowledge, as libibverbs' waits for it, and
            // deferred counts are waited for, not given up.
            counts.wait_acked(reported);
            counts.wait_while(|| Arc::strong_count(arc) > 1);
        }
    }
    registry.remove(key);
    Ok(())
}

#[cfg(test)]
mod tests;

/// The protocol under loom (`scripts/loom.sh`: `--cfg loom`).
#[cfg(all(test, loom))]
mod loom_tests;
