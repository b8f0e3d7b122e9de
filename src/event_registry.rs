//! The map from the 64-bit `user_handle` the kernel puts in every event
//! (`ib_uverbs_comp_event_desc.cq_handle`,
//! `ib_uverbs_async_event_desc.element`, `rdma_ucm_event_resp.uid`) back to
//! the object it was created with, for the event readers.
//!
//! The map knows its objects only as `dyn Any` and their
//! [`EventCounts`]: the readers (completion channels, the async fd,
//! rdma_cm channels) ask for the type they expect and downcast, so event
//! accounting and the object types do not import each other.
//!
//! The handle is the map's index: a slot number in its low 32 bits and the
//! slot's generation in the high ones, so an event's lookup is one bounds
//! check and one comparison (no hash), and a handle of a removed object
//! never finds the slot's next tenant. A slot is reserved ([`Reserved`])
//! before the object's create command, which carries the handle, and is
//! given back if the creation fails.

use std::{
    any::{Any, TypeId},
    sync::{atomic::AtomicU64, atomic::Ordering, Arc, Weak},
};

use crate::event_count::{EventCounts, Held, Stream};
use crate::providers::CompletionHook;
use crate::spin_lock::{SpinGuard, SpinLock};

/// What a `user_handle` refers to: an object of any kind (CQ, QP, SRQ, CM
/// id) and its counts, which outlive it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    counts: Arc<EventCounts>,
    kind: TypeId,
    /// Upgraded when an event is delivered; dangling once detached.
    object: Weak<dyn Any + Send + Sync>,
    /// The object's address (`Arc::as_ptr`), kept apart from `object`
    /// (whose address, through the `dyn` vtable, costs more to get).
    address: usize,
    /// What a reader that takes no reference reports of the object
    /// ([`Registry::deliver_deferred`]).
    facts: Facts,
    /// Run for every completion event read for the object, under the map's
    /// lock (mlx5 advances its CQ's arm sequence number, as
    /// `mlx5_cq_event`).
    on_completion: Option<CompletionHook>,
}

/// The object's kernel handle and the program's context value: fixed when
/// the object is registered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    pub(crate) handle: u32,
    pub(crate) context: u64,
}

impl Target {
    /// The entry of `object` with its `counts`.
    pub(crate) fn new<T: Any + Send + Sync>(counts: Arc<EventCounts>, object: &Arc<T>) -> Self {
        let weak: Weak<T> = Arc::downgrade(object);
        Target {
            counts,
            kind: TypeId::of::<T>(),
            object: weak,
            address: Arc::as_ptr(object) as usize,
            facts: Facts::default(),
            on_completion: None,
        }
    }

    /// With the facts a reader reports without the object.
    pub(crate) fn facts(mut self, handle: u32, context: u64) -> Self {
        self.facts = Facts { handle, context };
        self
    }

    /// With a step for every completion event.
    pub(crate) fn on_completion(mut self, hook: Option<CompletionHook>) -> Self {
        self.on_completion = hook;
        self
    }

    /// Runs the step for an event of `stream` read for the live object.
    #[inline]
    fn read_one(&self, stream: Stream) {
        if let (Stream::Completion, Some(hook)) = (stream, &self.on_completion) {
            (hook.0)();
        }
    }
}

/// A completion event [`Registry::deliver_deferred`] counted: the object's
/// address (to tell objects apart; it stays put while the count is
/// unacknowledged) and its facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deferred {
    pub(crate) object: usize,
    pub(crate) facts: Facts,
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

/// One slot of the map: the generation its current handle carries, and
/// what it holds.
#[derive(Debug)]
struct Slot {
    generation: u32,
    entry: Entry,
}

#[derive(Debug)]
enum Entry {
    Free,
    /// Reserved for an object being created ([`Reserved`]).
    Reserved,
    Taken(Target),
}

/// The slots, and the indexes of the free ones.
#[derive(Debug, Default)]
struct Slots {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// The slot index and generation a handle carries (`None`: its low half is
/// 0, the handle of no slot).
#[inline]
fn decode(handle: u64) -> Option<(usize, u32)> {
    let index = (handle as u32).checked_sub(1)?;
    Some((index as usize, (handle >> 32) as u32))
}

impl Slots {
    /// The slot `handle` names, if it still does.
    #[inline]
    fn get(&self, handle: u64) -> Option<&Slot> {
        let (index, generation) = decode(handle)?;
        self.slots.get(index).filter(|s| s.generation == generation)
    }

    fn get_mut(&mut self, handle: u64) -> Option<&mut Slot> {
        let (index, generation) = decode(handle)?;
        self.slots
            .get_mut(index)
            .filter(|s| s.generation == generation)
    }

    /// Frees the slot `handle` names if it holds what `holds` accepts.
    fn free_if(&mut self, handle: u64, holds: impl FnOnce(&Entry) -> bool) {
        if let Some(slot) = self.get_mut(handle) {
            if holds(&slot.entry) {
                slot.entry = Entry::Free;
                self.free.push(handle as u32 - 1);
            }
        }
    }
}

/// A `user_handle` reserved for an object being created: the handle its
/// create command carries. [`Registry::insert`] registers the object under
/// it; dropped instead (the creation failed), it frees the slot.
#[derive(Debug)]
#[must_use = "a reserved handle is freed when dropped"]
pub(crate) struct Reserved<'r> {
    registry: &'r Registry,
    handle: u64,
}

impl Reserved<'_> {
    /// The handle, for the create command.
    pub(crate) fn handle(&self) -> u64 {
        self.handle
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.registry
            .lock()
            .free_if(self.handle, |e| matches!(e, Entry::Reserved));
    }
}

/// Maps the `user_handle` of every object of a context to its target.
///
/// Behind a spinlock ([`SpinLock`]): every event takes it for one index
/// and a reference count, shorter than the sleep and wake of a mutex, and
/// `std::sync::Mutex` cost about 14 instructions an event more (its
/// unlock's swap, its poison checks; `benches/event-path.sh`).
#[derive(Debug)]
pub(crate) struct Registry {
    /// The last handle given to an object that is never registered.
    unregistered: AtomicU64,
    map: SpinLock<Slots>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            unregistered: AtomicU64::new(0),
            map: SpinLock::new(Slots::default()),
        }
    }
}

impl Registry {
    /// Reserves a slot, and so a handle (never 0), for an object being
    /// created.
    pub(crate) fn reserve(&self) -> Reserved<'_> {
        let mut map = self.lock();
        let index = match map.free.pop() {
            Some(i) => {
                let slot = &mut map.slots[i as usize];
                slot.generation = slot.generation.wrapping_add(1);
                slot.entry = Entry::Reserved;
                i
            }
            None => {
                let i = u32::try_from(map.slots.len())
                    .ok()
                    .filter(|&i| i < u32::MAX)
                    .expect("fewer than 2^32 - 1 objects with events at once");
                map.slots.push(Slot {
                    generation: 0,
                    entry: Entry::Reserved,
                });
                i
            }
        };
        let generation = map.slots[index as usize].generation;
        Reserved {
            registry: self,
            handle: u64::from(generation) << 32 | u64::from(index + 1),
        }
    }

    /// A handle for an object that never has events (an address handle):
    /// never 0, and never one of a slot's (its low half is 0).
    pub(crate) fn unregistered_handle(&self) -> u64 {
        (self.unregistered.fetch_add(1, Ordering::Relaxed) + 1) << 32
    }

    /// Registers `target` under the handle `reserved` holds.
    pub(crate) fn insert(&self, reserved: Reserved<'_>, target: Target) {
        let handle = reserved.handle;
        std::mem::forget(reserved);
        let mut map = self.lock();
        match map.get_mut(handle) {
            Some(slot) if matches!(slot.entry, Entry::Reserved) => {
                slot.entry = Entry::Taken(target)
            }
            _ => debug_assert!(false, "insert under a handle not reserved"),
        }
    }

    fn lock(&self) -> SpinGuard<'_, Slots> {
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
            let Some(Slot {
                entry: Entry::Taken(t),
                ..
            }) = map.get(user_handle)
            else {
                return Lookup::Unknown;
            };
            if t.kind != TypeId::of::<T>() {
                return Lookup::Unknown;
            }
            match t.object.upgrade() {
                Some(object) => {
                    t.read_one(stream);
                    (object, t.counts.clone())
                }
                None => return Lookup::Detached(t.counts.clone()),
            }
        };
        Lookup::Live(Held::new(downcast::<T>(object), counts, stream))
    }

    /// Resolves the `user_handle` of an event of `stream` just read to a
    /// live object of type `T` and counts the event as deferred at once, as
    /// [`Held::defer`] would right after [`Registry::lookup`], without an
    /// event value and without a reference to the object: the count is
    /// taken under the map's lock, while the entry is attached. A destroy
    /// detaches the entry under that lock before it closes the counts (and
    /// a drop finds no strong reference left here), so it finds this count
    /// or this reader finds the entry detached and acknowledges the event
    /// ([`Registry::ack_detached`]); `None` then, and for a handle of no
    /// object of type `T`. Counts already closed (the last reference was
    /// dropped after the check) take the event as acknowledged, as
    /// [`EventCounts::defer`] does.
    #[inline]
    pub(crate) fn deliver_deferred<T: Any + Send + Sync>(
        &self,
        user_handle: u64,
        stream: Stream,
    ) -> Option<Deferred> {
        let map = self.lock();
        let Some(Slot {
            entry: Entry::Taken(t),
            ..
        }) = map.get(user_handle)
        else {
            return None;
        };
        if t.kind != TypeId::of::<T>() {
            return None;
        }
        if t.object.strong_count() == 0 {
            let counts = t.counts.clone();
            drop(map);
            self.ack_detached(user_handle, &counts, stream);
            return None;
        }
        t.read_one(stream);
        let kept = Deferred {
            object: t.address,
            facts: t.facts,
        };
        if t.counts.try_defer(stream) {
            return Some(kept);
        }
        // Closed: counted as acknowledged, under the counts' own lock.
        let counts = t.counts.clone();
        drop(map);
        if counts.defer(stream, None) {
            // The destroy parked the counts, and this was the last event it
            // was told of.
            self.remove(user_handle);
        }
        Some(kept)
    }

    /// Stops `user_handle`'s entry from resolving to its object (it was
    /// destroyed): events read from now on are acknowledged through the
    /// counts it keeps.
    pub(crate) fn detach(&self, user_handle: u64) {
        if let Some(Slot {
            entry: Entry::Taken(t),
            ..
        }) = self.lock().get_mut(user_handle)
        {
            t.object = Weak::<()>::new();
        }
    }

    /// Forgets a destroyed object; its slot is free for the next one.
    pub(crate) fn remove(&self, user_handle: u64) {
        self.lock()
            .free_if(user_handle, |e| matches!(e, Entry::Taken(_)));
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

    /// How many slots are taken or reserved (tests).
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn len(&self) -> usize {
        let map = self.lock();
        map.slots
            .iter()
            .filter(|s| !matches!(s.entry, Entry::Free))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_unique_and_nonzero() {
        let r = Registry::default();
        let (a, b) = (r.reserve(), r.reserve());
        let (ha, hb) = (a.handle(), b.handle());
        assert!(ha != 0 && hb != 0 && ha != hb);
        let u = r.unregistered_handle();
        assert!(u != 0 && u != ha && u != hb && u != r.unregistered_handle());
        for h in [ha, u] {
            assert!(matches!(r.lookup::<u32>(h, Stream::Async), Lookup::Unknown));
        }
    }

    /// A failed creation gives its slot back; the slot's next handle is
    /// another, and the old one never finds the new tenant.
    #[test]
    fn slots_are_reused_under_new_handles() {
        let r = Registry::default();
        let object = Arc::new(1u32);
        let failed = r.reserve().handle();
        let next = r.reserve();
        assert_ne!(
            next.handle(),
            failed,
            "the slot came back with a new handle"
        );
        assert_eq!(next.handle() as u32, failed as u32, "the same slot");
        let h = next.handle();
        r.insert(next, Target::new(Arc::default(), &object));
        assert_eq!(r.len(), 1);
        r.remove(h);
        r.remove(h);
        assert_eq!(r.len(), 0);
        let again = r.reserve();
        let h2 = again.handle();
        r.insert(again, Target::new(Arc::default(), &object));
        assert!(matches!(r.lookup::<u32>(h, Stream::Async), Lookup::Unknown));
        assert!(matches!(
            r.lookup::<u32>(failed, Stream::Async),
            Lookup::Unknown
        ));
        assert!(matches!(
            r.lookup::<u32>(h2, Stream::Async),
            Lookup::Live(_)
        ));
        // A removed handle frees nothing of the slot's next tenant.
        r.remove(h);
        assert_eq!(r.len(), 1);
        // Handles beyond the slots, or of no slot, find nothing.
        for stray in [u64::MAX, 0, 1 << 32, h2 + 1] {
            assert!(matches!(
                r.lookup::<u32>(stray, Stream::Async),
                Lookup::Unknown
            ));
        }
    }

    /// The registry resolves a handle only to an object of the asked type;
    /// a detached entry resolves to its counts.
    #[test]
    fn lookups_check_the_kind_and_see_detached_entries() {
        let r = Registry::default();
        let counts = Arc::new(EventCounts::default());
        let object = Arc::new(7u64);
        let reserved = r.reserve();
        let h = reserved.handle();
        r.insert(reserved, Target::new(counts.clone(), &object));
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
