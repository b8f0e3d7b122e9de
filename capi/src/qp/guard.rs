//! The one place QPs and SRQs lock: the uverbs object, the buffers its
//! posts convert into, libibverbs' destroy, which waits for the program to
//! acknowledge the object's async events, and (QPs) the `ibv_wr_*`
//! session, which holds the lock from `wr_start` to `wr_complete`.
//!
//! uverbs' posts take `&mut`, so each object sits behind an
//! [`OwnerLock`]: posts, modifies, queries and acknowledgements take it for
//! their call; a QP's `ibv_wr_*` session takes it in `wr_start` and keeps
//! it, as rdma-core's providers keep their send queue's lock, until
//! `wr_complete` or `wr_abort` (the calls in between find the calling
//! thread the owner: [`Guarded::owned`]). The owning thread may call the
//! object's other functions inside its session (a modify, a query): they
//! find the lock theirs already. A QP's receives do not take it: its
//! receive queue is split off at creation (`QueuePair::split_recv`) and
//! posted under a lock of its own (`Qp::rq` in `qp.rs`), so a thread
//! posting receives never waits for one posting sends.
//!
//! The program acknowledges async events by count (`ibv_ack_async_event`),
//! from any thread, through the object's [`EventAcks`], kept beside the
//! lock: an acknowledgement takes no lock, so one that a destroy waits for
//! always gets in. The destroy is uverbs' in libibverbs' form
//! (`destroy_awaiting_acks`: the command, then the wait for the counts the
//! kernel reported), run with the lock released.
//!
//! Nothing that holds the lock calls back into another function of the
//! same object, so the exclusive reference each call makes of the slot is
//! the only one.

#![allow(unsafe_code)]

use core::cell::UnsafeCell;
use std::sync::OnceLock;

use uverbs::{sys::Errno, DestroyError, EventAcks, QueuePair, SharedReceiveQueue};

use super::post::PostBufs;
use crate::{
    errno,
    owner::{thread_token, Entry, OwnerLock},
};

/// A uverbs object whose destroy waits for the program's acknowledgements
/// (uverbs' `destroy_awaiting_acks`, and `event_acks` to acknowledge with).
pub(crate) trait AwaitsAcks: Sized {
    /// The handle acknowledgements go through.
    fn event_acks(&self) -> EventAcks;
    /// Destroys the object in libibverbs' form, giving it back on failure.
    fn destroy_awaiting_acks(self) -> Result<(), DestroyError<Self>>;
}

impl AwaitsAcks for QueuePair {
    fn event_acks(&self) -> EventAcks {
        QueuePair::event_acks(self)
    }
    fn destroy_awaiting_acks(self) -> Result<(), DestroyError<Self>> {
        QueuePair::destroy_awaiting_acks(self)
    }
}

impl AwaitsAcks for SharedReceiveQueue {
    fn event_acks(&self) -> EventAcks {
        SharedReceiveQueue::event_acks(self)
    }
    fn destroy_awaiting_acks(self) -> Result<(), DestroyError<Self>> {
        SharedReceiveQueue::destroy_awaiting_acks(self)
    }
}

/// What the lock guards.
#[derive(Debug, Default)]
pub(crate) struct Slot<T, S> {
    /// `None` before creation and while a destroy holds it.
    pub(crate) obj: Option<T>,
    pub(crate) bufs: PostBufs,
    /// What a session of calls keeps between them (a QP's `ibv_wr_*`
    /// session, `crate::qp_ex`; nothing for an SRQ).
    pub(crate) session: S,
}

/// A uverbs QP or SRQ as its C object holds it.
#[derive(Debug)]
pub(crate) struct Guarded<T, S = ()> {
    lock: OwnerLock,
    slot: UnsafeCell<Slot<T, S>>,
    /// The object's acknowledgements (set with the object).
    acks: OnceLock<EventAcks>,
}

// SAFETY: the slot is reached only by the thread holding `lock` (see
// `Held`), so it is shared between threads as a mutex shares its value.
unsafe impl<T: Send, S: Send> Sync for Guarded<T, S> {}

/// The lock held for one call: the slot, and whether to release at the
/// end (not when the calling thread held it already, inside its session).
pub(crate) struct Held<'a, T, S> {
    g: &'a Guarded<T, S>,
    entry: Entry,
}

impl<T, S> Held<'_, T, S> {
    /// The guarded slot.
    pub(crate) fn slot(&mut self) -> &mut Slot<T, S> {
        // SAFETY: this thread holds the lock, and `&mut self` makes this
        // the only reference made through this `Held`; no other `Held` of
        // this thread is alive meanwhile (the module's rule: no function
        // holding the lock calls another of the same object).
        unsafe { &mut *self.g.slot.get() }
    }

    /// Keeps the lock held after this value is dropped (a session begun:
    /// its last call releases it with [`Guarded::release_session`]).
    pub(crate) fn keep(mut self) {
        self.entry = Entry::Reentered;
    }
}

impl<T, S> Drop for Held<'_, T, S> {
    fn drop(&mut self) {
        if self.entry == Entry::Taken {
            self.g.lock.release();
        }
    }
}

impl<T: AwaitsAcks, S: Default> Guarded<T, S> {
    /// An empty slot (the object comes with [`Guarded::set`]).
    pub(crate) fn new() -> Self {
        Guarded {
            lock: OwnerLock::default(),
            slot: UnsafeCell::new(Slot {
                obj: None,
                bufs: PostBufs::default(),
                session: S::default(),
            }),
            acks: OnceLock::new(),
        }
    }
}

impl<T: AwaitsAcks, S> Guarded<T, S> {
    /// Takes the lock for the calling thread (or finds it held by it).
    #[inline]
    pub(crate) fn hold(&self) -> Held<'_, T, S> {
        Held {
            g: self,
            entry: self.lock.acquire(thread_token()),
        }
    }

    /// The slot, if the calling thread holds the lock (inside its
    /// session); `None` from any other thread.
    ///
    /// # Safety
    /// The caller holds no other reference into the slot while it uses
    /// this one (the module's rule).
    #[inline(always)]
    #[allow(clippy::mut_from_ref, reason = "the lock makes it exclusive")]
    pub(crate) unsafe fn owned(&self) -> Option<&mut Slot<T, S>> {
        if self.lock.held_by(thread_token()) {
            // SAFETY: this thread holds the lock; the caller's contract
            // makes this the only reference into the slot.
            Some(unsafe { &mut *self.slot.get() })
        } else {
            None
        }
    }

    /// Releases the lock a session kept ([`Held::keep`]); the calling
    /// thread holds it.
    pub(crate) fn release_session(&self) {
        self.lock.release();
    }

    /// Puts the created object in.
    pub(crate) fn set(&self, obj: T) {
        let _ = self.acks.set(obj.event_acks());
        self.hold().slot().obj = Some(obj);
    }

    /// Runs `f` on the object (`EINVAL` if there is none).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> R) -> Result<R, Errno> {
        let mut h = self.hold();
        h.slot().obj.as_ref().map(f).ok_or(Errno::EINVAL)
    }

    /// Runs a post: `f` gets the object and the conversion buffers.
    #[inline]
    pub(crate) fn posting<R>(
        &self,
        f: impl FnOnce(&mut T, &mut PostBufs) -> R,
    ) -> Result<R, Errno> {
        let mut h = self.hold();
        let Slot { obj, bufs, .. } = h.slot();
        obj.as_mut().map(|o| f(o, bufs)).ok_or(Errno::EINVAL)
    }

    /// Acknowledges one async event (`ibv_ack_async_event`), waking a
    /// destroy that waits for it; no lock taken.
    pub(crate) fn ack_async_event(&self) -> Result<(), Errno> {
        let acks = self.acks.get().ok_or(Errno::EINVAL)?;
        acks.ack_async_events(1).map_err(|e| errno::of(&e))
    }

    /// Destroys the object as libibverbs does (uverbs'
    /// `destroy_awaiting_acks`: the command, then the wait for the
    /// program's acknowledgements), with the lock released meanwhile; on
    /// failure the object stays (and the errno is returned). `before` runs
    /// on the slot first, with the lock held (a QP's open session is
    /// dropped there).
    pub(crate) fn destroy(&self, before: impl FnOnce(&mut Slot<T, S>)) -> Result<(), Errno> {
        let mut h = self.hold();
        before(h.slot());
        if h.entry == Entry::Reentered {
            // Inside the caller's own session, which `before` ended: the
            // lock is released below as if taken anew.
            h.entry = Entry::Taken;
        }
        let obj = h.slot().obj.take().ok_or(Errno::EINVAL);
        // Not held across the destroy: other threads' calls on the object
        // find it gone (EINVAL) instead of waiting for the acknowledgements.
        drop(h);
        let obj = obj?;
        obj.destroy_awaiting_acks().map_err(|e| {
            let no = errno::of(e.error());
            self.hold().slot().obj = Some(e.into_inner());
            no
        })
    }
}
