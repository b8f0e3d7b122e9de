//! The map from the 64-bit `user_handle` the kernel puts in every event
//! (`ib_uverbs_comp_event_desc.cq_handle`,
//! `ib_uverbs_async_event_desc.element`, `rdma_ucm_event_resp.uid`) back to
//! the object it was created with, for the event readers.
//!
//! The map knows its objects only as `dyn Any` and their
//! [`EventCounts`]: the readers (completion channels, the async fd,
//! rdma_cm channels) ask for the type they expect and downcast, so event
//! accounting and the object types do not import each other.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
    sync::{atomic::AtomicU64, atomic::Ordering, Arc, Weak},
};

use crate::event_count::{EventCounts, Held, Stream};
use crate::spin_lock::{SpinGuard, SpinLock};

/// What a `user_handle` refers to: an object of any kind (CQ, QP, SRQ, CM
/// id) and its counts, which outlive it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    counts: Arc<EventCounts>,
    kind: TypeId,
    /// Upgraded when an event is delivered; dangling once detached.
    object: Weak<dyn Any + Send + Sync>,
}

impl Target {
    /// The entry of `object` with its `counts`.
    pub(crate) fn new<T: Any + Send + Sync>(counts: Arc<EventCounts>, object: &Arc<T>) -> Self {
        let weak: Weak<T> = Arc::downgrade(object);
        Target {
            counts,
            kind: TypeId::of::<T>(),
            object: weak,
        }
    }
}

/// The object of an entry whose `kind` is `T`'s, as a `T`: the check of
/// `Arc::downcast` (a call through the `dyn Any` vtable on every event)
/// was done by the caller against the entry's `kind`.
#[allow(unsafe_code)]
#[inline]
fn downcast<T: Any + Send + Sync>(object: Arc<dyn Any + Send + Sync>) -> Arc<T> {
    debug_assert!(object.is::<T>());
    // SAFETY: the caller found this object under an entry whose `kind` is
    // `TypeId::of::<T>()`, and `Target::new` sets `kind` and `object` from
    // one `Arc<T>` (they are never changed apart: `detach` empties
    // `object`), so the allocation holds a `T`; dropping the vtable keeps
    // the data pointer, which is what `Arc::from_raw` of a `T` expects.
    unsafe { Arc::from_raw(Arc::into_raw(object).cast::<T>()) }
}

/// What an event's `user_handle` resolves to, for an object of type `T`.
pub(crate) enum Lookup<T> {
    /// The object: the event's value holds it.
    Live(Held<T>),
    /// An object of type `T` being destroyed or gone (its entry is
    /// detached): the reader acknowledges the event itself
    /// ([`Registry::ack_detached`]) with these counts.
    Detached(Arc<EventCounts>),
    /// No object of type `T` has this handle.
    Unknown,
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

type Map = HashMap<u64, Target, BuildHasherDefault<HandleHasher>>;

/// Maps the `user_handle` of every object of a context to its target.
///
/// Behind a spinlock ([`SpinLock`]): every event takes it for one hash
/// probe and a reference count, shorter than the sleep and wake of a
/// mutex, and `std::sync::Mutex` cost about 14 instructions an event more
/// (its unlock's swap, its poison checks; `benches/event-path.sh`).
#[derive(Debug)]
pub(crate) struct Registry {
    next: AtomicU64,
    map: SpinLock<Map>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            next: AtomicU64::new(0),
            map: SpinLock::new(Map::default()),
        }
    }
}

impl Registry {
    /// A fresh `user_handle` (never 0, never reused within a context).
    pub(crate) fn new_handle(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Registers `target` under `user_handle`.
    pub(crate) fn insert(&self, user_handle: u64, target: Target) {
        self.lock().insert(user_handle, target);
    }

    fn lock(&self) -> SpinGuard<'_, Map> {
        self.map.lock()
    }

    /// Resolves the `user_handle` of an event of `stream` just read to an
    /// object of type `T`; a live one is claimed for the calling thread.
    ///
    /// Under the lock: the entry, its object upgraded (and its counts
    /// cloned for the claim); the object's type is checked by one downcast
    /// after the lock (`kind` is compared for detached entries only).
    #[inline]
    pub(crate) fn lookup<T: Any + Send + Sync>(
        &self,
        user_handle: u64,
        stream: Stream,
    ) -> Lookup<T> {
        let (object, counts) = {
            let map = self.lock();
            let Some(t) = map.get(&user_handle) else {
                return Lookup::Unknown;
            };
            if t.kind != TypeId::of::<T>() {
                return Lookup::Unknown;
            }
            match t.object.upgrade() {
                Some(object) => (object, t.counts.clone()),
                None => return Lookup::Detached(t.counts.clone()),
            }
        };
        Lookup::Live(Held::new(downcast::<T>(object), counts, stream))
    }

    /// Resolves the `user_handle` of an event of `stream` just read to a
    /// live object of type `T` and counts the event as deferred at once, as
    /// [`Held::defer`] would right after [`Registry::lookup`], without an
    /// event value in between: no holder is recorded and released, the
    /// counts are not cloned, and the object is referenced only for the
    /// call. `f` gets the object and returns its counts and what the caller
    /// keeps of the event. An event of a detached object is acknowledged
    /// here; `None` then, and for a handle of no object of type `T`.
    #[inline]
    pub(crate) fn deliver_deferred<T: Any + Send + Sync, R>(
        &self,
        user_handle: u64,
        stream: Stream,
        f: impl FnOnce(&T) -> (&Arc<EventCounts>, R),
    ) -> Option<R> {
        let object = {
            let map = self.lock();
            let t = map.get(&user_handle)?;
            if t.kind != TypeId::of::<T>() {
                return None;
            }
            match t.object.upgrade() {
                Some(object) => object,
                None => {
                    let counts = t.counts.clone();
                    drop(map);
                    self.ack_detached(user_handle, &counts, stream);
                    return None;
                }
            }
        };
        let object = downcast::<T>(object);
        let (counts, kept) = f(&object);
        // Counted before the object is released (as `Held::defer`), so a
        // destroy that finds the last reference gone finds the event
        // counted too; woken after the release.
        let counts = counts.clone();
        if counts.defer_releasing(stream, None, object) {
            // A destroy that did not wait closed the counts after this
            // read and parked them; this was the last event it was told of.
            self.remove(user_handle);
        }
        Some(kept)
    }

    /// Stops `user_handle`'s entry from resolving to its object (it was
    /// destroyed): events read from now on are acknowledged through the
    /// counts it keeps.
    pub(crate) fn detach(&self, user_handle: u64) {
        if let Some(t) = self.lock().get_mut(&user_handle) {
            t.object = Weak::<()>::new();
        }
    }

    /// Forgets a destroyed object.
    pub(crate) fn remove(&self, user_handle: u64) {
        self.lock().remove(&user_handle);
    }

    /// Acknowledges one event of `stream` read for the destroyed object
    /// `user_handle` (found detached, or gone), waking a destroy that waits,
    /// and removes the object's parked entry when this was the last event
    /// its destroy was told of.
    #[cold]
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
    use super::*;

    #[test]
    fn handles_are_unique_and_nonzero() {
        let r = Registry::default();
        let (a, b) = (r.new_handle(), r.new_handle());
        assert!(a != 0 && b != 0 && a != b);
        assert!(matches!(r.lookup::<u32>(a, Stream::Async), Lookup::Unknown));
    }

    /// The registry resolves a handle only to an object of the asked type;
    /// a detached entry resolves to its counts.
    #[test]
    fn lookups_check_the_kind_and_see_detached_entries() {
        let r = Registry::default();
        let counts = Arc::new(EventCounts::default());
        let object = Arc::new(7u64);
        let h = r.new_handle();
        r.insert(h, Target::new(counts.clone(), &object));
        assert!(matches!(r.lookup::<u32>(h, Stream::Async), Lookup::Unknown));
        match r.lookup::<u64>(h, Stream::Async) {
            Lookup::Live(held) => assert_eq!(**held.object(), 7),
            _ => panic!("the live object"),
        }
        assert_eq!(counts.acked(), [0, 1], "the dropped value acknowledged");
        r.detach(h);
        match r.lookup::<u64>(h, Stream::Async) {
            Lookup::Detached(c) => r.ack_detached(h, &c, Stream::Async),
            _ => panic!("detached"),
        }
        assert_eq!(counts.acked(), [0, 2]);
        assert_eq!(r.len(), 1);
        r.remove(h);
        assert_eq!(r.len(), 0);
    }
}
