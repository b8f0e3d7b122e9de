//! Event accounting: the contract between event delivery and destroy.
//!
//! The kernel counts, per object, the events userspace has *read* from an
//! event fd (`comp_events_reported`, `async_events_reported`,
//! `events_reported`), and returns the totals when the object is destroyed
//! (`drivers/infiniband/core/uverbs_main.c`, `ib_uverbs_event_read`). Like
//! libibverbs (`libibverbs/cmd_cq.c`, `ibv_cmd_destroy_cq`), a destroy then
//! waits until the program has acknowledged that many events, so no event
//! for the object is still being handled when the destroy returns.
//!
//! Each object that can have events owns an [`EventCounts`] (shared with the
//! context's [`Registry`], which maps the 64-bit `user_handle` the kernel puts
//! in every event back to it). Event values hold the object alive; they are
//! `!Send`, and the counts remember which thread holds how many, so a thread
//! that calls `destroy` while it holds an unacknowledged event of that object
//! gets `EBUSY` instead of waiting for itself: a destroy can only wait for
//! acknowledgements that other threads will make.
//!
//! # Events read behind the library's back
//!
//! A program that reads a record from an event fd itself (through `AsFd`)
//! takes an event the kernel counts as reported and the library never sees,
//! so nobody will ever acknowledge it. Only an explicit `destroy()` waits
//! for acknowledgements after the destroy command (as libibverbs does), and
//! it then waits forever. The last drop and `try_destroy` never wait there:
//! when the counts do not match yet they *park* the object's entry
//! ([`EventCounts::settle`]), detached, and the reader that acknowledges the
//! last outstanding event removes it ([`Registry::ack_detached`]). An event
//! stolen that way leaves its parked entry until the context (for rdma_cm
//! ids, the process) goes. Nothing is lost by not waiting: no event value
//! of a destroyed object is made any more, so an event a thread reads
//! meanwhile is acknowledged by that thread without reaching the program.

#[cfg(doc)]
use crate::object::ParentLink;
use crate::object::{busy, Destroy, Owned};
use crate::sync::{fence, AtomicU32, Condvar, Mutex, MutexGuard};
use std::{
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
    sync::{atomic::AtomicU64, atomic::Ordering, Arc, Weak},
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
    /// Async events (the context's async event fd).
    Async,
}

#[derive(Debug, Default)]
struct Counts {
    /// Events acknowledged so far, per stream (wrapping, as the kernel's u32).
    acked: [u32; 2],
    /// Events delivered and not yet acknowledged, by the thread holding them.
    held: Vec<(ThreadId, u32)>,
    /// The counts the kernel reported at a destroy that did not wait for
    /// them ([`EventCounts::settle`]); `None` once reached, or when no
    /// such destroy happened.
    parked: Option<[u32; 2]>,
}

/// Per-object event counts; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct EventCounts {
    counts: Mutex<Counts>,
    changed: Condvar,
    /// Threads waiting on `changed` (destroys). Acknowledgements and
    /// releases wake someone only when this is non-zero, so the common case
    /// (nobody destroying) takes no extra lock and makes no futex call. A
    /// waiter registers before it checks its condition and a notifier reads
    /// this after its change, each behind a `SeqCst` fence, so one of them
    /// sees the other (see `wait_while` and `notify`).
    waiters: AtomicU32,
    /// Acquisitions of `counts` (tests count them).
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) locks: AtomicU32,
}

fn index(stream: Stream) -> usize {
    match stream {
        Stream::Completion => 0,
        Stream::Async => 1,
    }
}

impl EventCounts {
    fn lock(&self) -> MutexGuard<'_, Counts> {
        #[cfg(any(test, feature = "test-utils"))]
        self.locks.fetch_add(1, Ordering::Relaxed);
        // A panic while holding this lock leaves plain counters behind: keep going.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that the current thread now holds one delivered event.
    pub(crate) fn delivered(&self) {
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
    /// reached the counts of a parked destroy ([`EventCounts::settle`]).
    fn ack_counting(&self, stream: Stream, n: u32, holder: Option<ThreadId>) -> (bool, bool) {
        let mut c = self.lock();
        let i = index(stream);
        c.acked[i] = c.acked[i].wrapping_add(n);
        if let Some(t) = holder {
            if let Some(pos) = c.held.iter().position(|(h, _)| *h == t) {
                let left = c.held[pos].1.saturating_sub(n);
                if left == 0 {
                    c.held.swap_remove(pos);
                } else {
                    c.held[pos].1 = left;
                }
            }
        }
        let settled = c.parked.is_some_and(|p| p == c.acked);
        if settled {
            c.parked = None;
        }
        (self.waiters.load(Ordering::Relaxed) > 0, settled)
    }

    /// After a destroy command that reported `reported` events, instead of
    /// waiting for them: true when every one is acknowledged already;
    /// otherwise parks `reported`, and the acknowledgement that reaches it
    /// says so ([`Registry::ack_detached`]). Exactly one of the two sees the
    /// counts settled (both decide under the lock).
    pub(crate) fn settle(&self, reported: [u32; 2]) -> bool {
        let mut c = self.lock();
        if c.acked == reported {
            return true;
        }
        c.parked = Some(reported);
        false
    }

    /// How many delivered events the current thread holds.
    pub(crate) fn held_by_current_thread(&self) -> u32 {
        let me = current_thread();
        self.lock()
            .held
            .iter()
            .find(|(t, _)| *t == me)
            .map_or(0, |(_, n)| *n)
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
        // `waiters`; pairs with the fence in `wait_while`.
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
/// events other threads read and have not looked up yet find the object
/// gone and are acknowledged by those threads, which remove the parked
/// entry ([`EventCounts::settle`]). An event the program read from the fd
/// itself is never acknowledged, and never waited for.
pub(crate) fn destroy_unreachable<T: EventObject>(obj: &T) -> crate::Result<()> {
    let (registry, key) = obj.registry();
    let result = obj.destroy_reporting();
    if let Ok(Some(reported)) = result {
        if !obj.counts().settle(reported) {
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
}

/// Destroys an event object its handle still holds, as `destroy()`
/// promises; on error the object is untouched and usable.
///
/// - `EBUSY` while child objects use it (`children()` > 0) or the calling
///   thread holds one of its unacknowledged events (it would wait for
///   itself);
/// - events other threads hold are waited for ([`Pending::Wait`]) or
///   refused with `EAGAIN` ([`Pending::Refuse`]);
/// - then, under the lock of the map events are delivered through, so no
///   new event value can be made meanwhile, the destroy command runs; if it
///   succeeds the object's entry stops resolving (events read later are
///   acknowledged at once, as for a gone object) and, after the lock,
///   [`Pending::Wait`] waits until every event the kernel reported is
///   acknowledged (other threads finishing a read; forever if the program
///   read one from the fd itself), while [`Pending::Refuse`] parks the
///   entry instead ([`EventCounts::settle`]) and returns. If it fails,
///   nothing changed.
///
/// Every reference to the object besides its handle is an event value or a
/// child's [`ParentLink`](crate::object::ParentLink), made only under that
/// lock or while the handle is borrowed, and each wakes [`EventCounts`]
/// waiters after it is released; so a destroy that waits is woken by the
/// release it waits for.
pub(crate) fn destroy_reachable<T: EventObject>(
    arc: &Arc<Owned<T>>,
    children: impl Fn() -> usize,
    pending: Pending,
    op: &'static str,
) -> crate::Result<()> {
    let counts = arc.counts();
    let mine = counts.held_by_current_thread();
    if mine > 0 {
        return Err(
            crate::Error::sys(op, crate::sys::Errno::EBUSY).with_detail(format!(
                "this thread holds {mine} unacknowledged event(s) of this object: \
                 acknowledge (drop) them first"
            )),
        );
    }
    let (registry, key) = arc.registry();
    loop {
        let n = children();
        if n > 0 {
            return Err(busy(
                op,
                n,
                "destroy those first (the object is given back with this error)",
            ));
        }
        {
            let mut map = registry.lock();
            if Arc::strong_count(arc) == 1 {
                let reported = arc.destroy_reporting()?;
                arc.mark_destroyed();
                if let Some(target) = map.get_mut(&key) {
                    target.detach();
                }
                drop(map);
                if let Some(reported) = reported {
                    if pending == Pending::Refuse {
                        if !counts.settle(reported) {
                            return Ok(());
                        }
                    } else {
                        counts.wait_acked(reported);
                    }
                }
                registry.remove(key);
                return Ok(());
            }
        }
        if pending == Pending::Refuse {
            let others = Arc::strong_count(arc).saturating_sub(1);
            return Err(
                crate::Error::sys(op, crate::sys::Errno::EAGAIN).with_detail(format!(
                    "{others} unacknowledged event(s) held by other threads still use it: \
                     retry once they are acknowledged, or destroy() to wait for them"
                )),
            );
        }
        // Other references are events held by other threads (children were
        // ruled out, and none can be added: the caller owns the handle).
        counts.wait_while(|| Arc::strong_count(arc) > 1 && children() == 0);
    }
}

/// What a `user_handle` refers to.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// A CQ: its counts and the CQ itself (upgraded when an event is delivered).
    Cq(Arc<EventCounts>, Weak<Owned<crate::cq::CqInner>>),
    /// A QP.
    Qp(Arc<EventCounts>, Weak<Owned<crate::qp::QpInner>>),
    /// An SRQ.
    Srq(Arc<EventCounts>, Weak<Owned<crate::srq::SrqInner>>),
    /// An rdma_cm id (in the process-wide map of [`crate::cm`]).
    CmId(Arc<EventCounts>, Weak<Owned<crate::cm::IdShared>>),
}

impl Target {
    /// Stops the entry from resolving to its object (it was destroyed):
    /// events read from now on are acknowledged through the counts it keeps.
    fn detach(&mut self) {
        match self {
            Target::Cq(_, w) => *w = Weak::new(),
            Target::Qp(_, w) => *w = Weak::new(),
            Target::Srq(_, w) => *w = Weak::new(),
            Target::CmId(_, w) => *w = Weak::new(),
        }
    }
}

/// Hashes a `user_handle`: they are distinct sequence numbers, so one
/// multiplication spreads them (the default SipHash costs more than the rest
/// of an event's lookup).
#[derive(Debug, Default)]
struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Maps the `user_handle` of every object of a context to its target.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    next: AtomicU64,
    map: Mutex<HashMap<u64, Target, BuildHasherDefault<HandleHasher>>>,
}

impl Registry {
    /// A fresh `user_handle` (never 0, never reused within a context).
    pub(crate) fn new_handle(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Registers `target` under `user_handle`.
    pub(crate) fn insert(&self, user_handle: u64, target: Target) {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(user_handle, target);
    }

    /// Runs `f` on the target of a `user_handle` under the registry's lock.
    /// Every new reference to an object made from an event is upgraded
    /// here, inside `f` (see [`destroy_reachable`]).
    pub(crate) fn with<R>(&self, user_handle: u64, f: impl FnOnce(Option<&Target>) -> R) -> R {
        f(self.lock().get(&user_handle))
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Target, BuildHasherDefault<HandleHasher>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets a destroyed object.
    pub(crate) fn remove(&self, user_handle: u64) {
        self.lock().remove(&user_handle);
    }

    /// Acknowledges one event of `stream` read for the destroyed object
    /// `user_handle` (found detached, or gone), waking a destroy that waits,
    /// and removes the object's parked entry when this was the last event
    /// its destroy was told of.
    pub(crate) fn ack_detached(&self, user_handle: u64, counts: &EventCounts, stream: Stream) {
        let (waiting, settled) = counts.ack_counting(stream, 1, None);
        if waiting {
            counts.changed.notify_all();
        }
        if settled {
            self.remove(user_handle);
        }
    }

    /// How many objects the map holds (tests).
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn acks_are_counted_per_stream_and_holder() {
        let c = EventCounts::default();
        c.delivered();
        c.delivered();
        assert_eq!(c.held_by_current_thread(), 2);
        c.ack(Stream::Completion, 2, Some(thread::current().id()));
        assert_eq!(c.held_total(), 0);
        c.ack(Stream::Async, 1, None);
        assert_eq!(c.acked(), [2, 1]);
    }

    #[test]
    fn wait_acked_returns_after_another_thread_acks() {
        let c = Arc::new(EventCounts::default());
        let c2 = c.clone();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            c2.ack(Stream::Completion, 3, None);
        });
        c.wait_acked([3, 0]);
        t.join().unwrap();
    }

    #[test]
    fn counters_wrap_like_the_kernels() {
        let c = EventCounts::default();
        c.ack(Stream::Completion, u32::MAX, None);
        c.ack(Stream::Completion, 2, None);
        assert_eq!(c.acked(), [1, 0]);
    }

    #[test]
    fn handles_are_unique_and_nonzero() {
        let r = Registry::default();
        let (a, b) = (r.new_handle(), r.new_handle());
        assert!(a != 0 && b != 0 && a != b);
        assert!(r.with(a, |t| t.is_none()));
    }
}

/// The protocol under loom (`scripts/loom.sh`: `--cfg loom`), every
/// interleaving of the threads each test starts.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc as LoomArc;

    /// A destroy waits while an event value holds its object
    /// (`destroy_reachable`'s `wait_while`); the value's drop acknowledges,
    /// releases its reference and then notifies, as `CqEvent::drop` does.
    /// A lost wake-up (the waiter registered after the notifier looked, and
    /// checked before the release) would leave the destroy asleep, which
    /// loom reports as a deadlock.
    #[test]
    fn loom_a_destroy_waiting_for_an_event_value_is_woken_by_its_drop() {
        loom::model(|| {
            let counts = Arc::new(EventCounts::default());
            let object = LoomArc::new(());
            let event = object.clone();
            let c = counts.clone();
            let holder = loom::thread::spawn(move || {
                c.ack_quiet(Stream::Completion, 1, None);
                drop(event);
                c.notify();
            });
            counts.wait_while(|| LoomArc::strong_count(&object) > 1);
            assert_eq!(LoomArc::strong_count(&object), 1);
            assert_eq!(counts.acked(), [1, 0]);
            holder.join().unwrap();
        });
    }

    /// An explicit destroy waits for the events the kernel reported, which
    /// two readers acknowledge on their own threads (one per stream).
    #[test]
    fn loom_wait_acked_returns_once_both_streams_are_acknowledged() {
        loom::model(|| {
            let counts = Arc::new(EventCounts::default());
            let readers: Vec<_> = [Stream::Completion, Stream::Async]
                .into_iter()
                .map(|stream| {
                    let c = counts.clone();
                    loom::thread::spawn(move || c.ack(stream, 1, None))
                })
                .collect();
            counts.wait_acked([1, 1]);
            assert_eq!(counts.acked(), [1, 1]);
            for r in readers {
                r.join().unwrap();
            }
        });
    }

    /// A destroy that does not wait parks the reported counts; of it and
    /// the two readers acknowledging the events it was told of, exactly
    /// one sees the counts settled (and so removes the object's entry).
    #[test]
    fn loom_a_parked_destroy_and_the_last_acknowledgement_settle_once() {
        loom::model(|| {
            let counts = Arc::new(EventCounts::default());
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let c = counts.clone();
                    loom::thread::spawn(move || c.ack_counting(Stream::Completion, 1, None).1)
                })
                .collect();
            let mut settled = usize::from(counts.settle([2, 0]));
            for r in readers {
                settled += usize::from(r.join().unwrap());
            }
            assert_eq!(settled, 1, "the entry is removed exactly once");
            assert_eq!(counts.acked(), [2, 0]);
        });
    }
}
