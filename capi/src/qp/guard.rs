//! The one place QPs and SRQs lock: the uverbs object, the buffers its
//! posts convert into, and libibverbs' destroy, which waits for the
//! program to acknowledge the object's async events.
//!
//! uverbs' posts take `&mut`, so each object sits behind a mutex that the
//! posts, modifies, queries and acknowledgements take. A QP's receives do
//! not: its receive queue is split off at creation
//! (`QueuePair::split_recv`) and posted under a lock of its own (`Qp::rq`
//! in `qp.rs`), so a thread posting receives never waits for one posting
//! sends.
//!
//! The program acknowledges async events by count (`ibv_ack_async_event`),
//! from any thread, through the object: uverbs' destroy refuses while
//! acknowledgements are deferred (`EBUSY`), libibverbs' destroy waits for
//! them. So a destroy waits here, with the uverbs object in place so the
//! acknowledgements reach it, and destroys once none is outstanding.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use uverbs::{sys::Errno, DestroyError, QueuePair, SharedReceiveQueue};

use super::post::PostBufs;
use crate::errno;

/// A uverbs object with async events that libibverbs' destroy waits for.
pub(crate) trait EventObject: Sized {
    /// Events deferred and not yet acknowledged.
    fn deferred(&self) -> u32;
    /// Acknowledges `n` deferred events.
    fn ack(&self, n: u32) -> uverbs::Result<()>;
    /// Destroys the object, giving it back on failure.
    fn destroy(self) -> Result<(), DestroyError<Self>>;
}

impl EventObject for QueuePair {
    fn deferred(&self) -> u32 {
        self.deferred_async_events()
    }
    fn ack(&self, n: u32) -> uverbs::Result<()> {
        self.ack_async_events(n)
    }
    fn destroy(self) -> Result<(), DestroyError<Self>> {
        QueuePair::destroy(self)
    }
}

impl EventObject for SharedReceiveQueue {
    fn deferred(&self) -> u32 {
        self.deferred_async_events()
    }
    fn ack(&self, n: u32) -> uverbs::Result<()> {
        self.ack_async_events(n)
    }
    fn destroy(self) -> Result<(), DestroyError<Self>> {
        SharedReceiveQueue::destroy(self)
    }
}

#[derive(Debug)]
struct Slot<T> {
    /// `None` before creation and while a destroy holds it.
    obj: Option<T>,
    bufs: PostBufs,
    /// Acknowledgements that arrived while a destroy held the object,
    /// applied when it comes back.
    missed: u32,
}

/// A uverbs QP or SRQ as its C object holds it.
#[derive(Debug)]
pub(crate) struct Guarded<T> {
    slot: Mutex<Slot<T>>,
    acked: Condvar,
}

impl<T: EventObject> Guarded<T> {
    /// An empty slot (the object comes with [`Guarded::set`]).
    pub(crate) fn new() -> Self {
        Guarded {
            slot: Mutex::new(Slot {
                obj: None,
                bufs: PostBufs::default(),
                missed: 0,
            }),
            acked: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot<T>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts the created object in.
    pub(crate) fn set(&self, obj: T) {
        self.lock().obj = Some(obj);
    }

    /// Runs `f` on the object (`EINVAL` if there is none).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> R) -> Result<R, Errno> {
        let g = self.lock();
        g.obj.as_ref().map(f).ok_or(Errno::EINVAL)
    }

    /// Runs a post: `f` gets the object and the conversion buffers.
    pub(crate) fn posting<R>(
        &self,
        f: impl FnOnce(&mut T, &mut PostBufs) -> R,
    ) -> Result<R, Errno> {
        let mut g = self.lock();
        let Slot { obj, bufs, .. } = &mut *g;
        obj.as_mut().map(|o| f(o, bufs)).ok_or(Errno::EINVAL)
    }

    /// Acknowledges one async event (`ibv_ack_async_event`).
    pub(crate) fn ack_async_event(&self) -> Result<(), Errno> {
        let mut g = self.lock();
        let r = match g.obj.as_ref() {
            Some(o) => o.ack(1).map_err(|e| errno::of(&e)),
            None => {
                g.missed += 1;
                Ok(())
            }
        };
        drop(g);
        self.acked.notify_all();
        r
    }

    /// Destroys the object as libibverbs does: waits until the program has
    /// acknowledged every async event it was given, then destroys; on
    /// failure the object stays (and the errno is returned).
    pub(crate) fn destroy(&self) -> Result<(), Errno> {
        let mut g = self.lock();
        loop {
            let Some(obj) = g.obj.as_ref() else {
                return Err(Errno::EINVAL);
            };
            if obj.deferred() > 0 {
                g = self.acked.wait(g).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let Some(obj) = g.obj.take() else {
                return Err(Errno::EINVAL);
            };
            // Not held across the destroy: it may wait for event values
            // other threads hold, whose acknowledgements come through here.
            drop(g);
            let e = match obj.destroy() {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let no = errno::of(e.error());
            let obj = e.into_inner();
            g = self.lock();
            let missed = core::mem::take(&mut g.missed);
            if missed > 0 {
                // Best effort: they were deferred before (they were counted).
                let _ = obj.ack(missed);
            }
            let again = no == Errno::EBUSY && (missed > 0 || obj.deferred() > 0);
            g.obj = Some(obj);
            if !again {
                return Err(no);
            }
        }
    }
}
