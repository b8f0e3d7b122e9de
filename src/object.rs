//! Ownership of kernel objects.
//!
//! Every kernel object (PD, MR, CQ, QP, SRQ, AH) lives in an [`Owned`]
//! behind an `Arc`: the user's handle holds one reference and each child
//! object holds another (a QP holds its PD and CQs), so a parent cannot be
//! destroyed while the kernel still uses it from a child. The kernel object is
//! destroyed exactly once: by an explicit `destroy()` (which reports errors,
//! and fails with `EBUSY` while other references exist), or when the last
//! reference is dropped (best effort: `Drop` never panics and ignores errors),
//! unless it was imported from another context (`crate::import`), whose
//! last drop releases only this process's handle.
//! CQs, QPs and SRQs, which receive events, follow the protocol of
//! [`crate::event_count`] instead of [`try_destroy`].
//!
//! # A destroy the kernel refuses
//!
//! An explicit destroy that fails gives the handle back, whatever failed:
//! `EBUSY` for other references, or the kernel's refusal (rxe refuses to
//! deregister a region while a memory window is bound to it, `EINVAL`;
//! the kernel refuses to deallocate a PD another context's objects use,
//! `EBUSY`). The object is then as it was, as libibverbs leaves it when
//! `ibv_dereg_mr`, `ibv_dealloc_pd`, `ibv_dealloc_mw` or `ibv_destroy_ah`
//! return the kernel's errno: usable, and destroyed by a later destroy or
//! its last drop. Every public `destroy()` returns
//! `Result<(), DestroyError<Self>>` for that.
//!
//! When the last attempt to destroy the kernel object fails (the drop's),
//! the object is *leaked*: none of its fields is dropped. They hold what the
//! kernel object may still use: memory the device reads and writes (mlx5's
//! queue buffers and doorbell records, an MR's own mapping), the mlx5 user
//! index its completions are attributed by and its dedicated bfreg, and the
//! references to its parents and its context. Giving any of them back while
//! the kernel object lives would let the device write memory the process
//! reuses (an on-demand MR pins nothing; the device model pins nothing;
//! mlx5_ib caches doorbell pages by virtual address), or attribute its
//! completions to the next object given the same user index. The kernel
//! releases everything when the context's fd is closed, which the leaked
//! reference to the context keeps open until the process exits (unless
//! `Context::close` closed it: the leaked memory stays allocated either
//! way, so what the kernel still writes lands nowhere the process reuses).
//! This is what `UmemInner::drop` does for a DevX UMEM.
#![allow(unsafe_code)] // `Owned::drop` drops its `ManuallyDrop` field once

use std::{
    mem::ManuallyDrop,
    ops::Deref,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
};

use crate::error::{Error, Result};

/// A kernel object that can be destroyed.
pub(crate) trait Destroy {
    /// Destroys the kernel object. Called at most once, when nothing else
    /// can reach the object any more (its last reference is being dropped,
    /// or an explicit destroy proved it was the only one).
    fn destroy_kernel(&self) -> Result<()>;

    /// Whether dropping the last reference destroys the kernel object:
    /// not for an imported one, which another context created and owns
    /// (`ibv_unimport_pd`); its explicit destroy still does.
    fn owns_kernel_object(&self) -> bool {
        true
    }
}

/// A kernel object with destroy-once semantics; leaked when its kernel
/// object outlives it (see the module documentation).
#[derive(Debug)]
pub(crate) struct Owned<T: Destroy> {
    /// Dropped only after the kernel object is gone.
    obj: ManuallyDrop<T>,
    destroyed: AtomicBool,
}

impl<T: Destroy> Owned<T> {
    pub(crate) fn new(obj: T) -> Arc<Self> {
        Arc::new(Owned {
            obj: ManuallyDrop::new(obj),
            destroyed: AtomicBool::new(false),
        })
    }

    /// Records that the kernel object was destroyed by an explicit destroy,
    /// so the last drop does not destroy it again.
    pub(crate) fn mark_destroyed(&self) {
        self.destroyed.store(true, Ordering::Release);
    }
}

impl<T: Destroy> Deref for Owned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.obj
    }
}

impl<T: Destroy> Drop for Owned<T> {
    fn drop(&mut self) {
        if !*self.destroyed.get_mut() && self.obj.owns_kernel_object() {
            *self.destroyed.get_mut() = true;
            if self.obj.destroy_kernel().is_err() {
                // The kernel object lives on: so does everything it may use.
                #[cfg(any(test, feature = "test-utils"))]
                LEAKED.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        // SAFETY: `drop` runs once and nothing uses `obj` after it; the
        // early return above is the only path that leaves it undropped.
        unsafe { ManuallyDrop::drop(&mut self.obj) }
    }
}

/// Objects leaked because their kernel destroy failed (tests read it).
#[cfg(any(test, feature = "test-utils"))]
pub(crate) static LEAKED: AtomicUsize = AtomicUsize::new(0);

/// Destroys the object behind the last reference now, giving the
/// reference back on any failure: `EBUSY` while other references exist
/// (the object is then destroyed when the last of them is dropped, unless
/// a destroy comes first), or the kernel's refusal (the object is then as
/// it was, and its last drop tries again; see the module documentation).
pub(crate) fn try_destroy<T: Destroy>(
    arc: Arc<Owned<T>>,
    op: &'static str,
) -> std::result::Result<(), (Arc<Owned<T>>, Error)> {
    match Arc::try_unwrap(arc) {
        Ok(owned) => match owned.destroy_kernel() {
            Ok(()) => {
                owned.mark_destroyed();
                Ok(())
            }
            Err(e) => Err((Arc::new(owned), e)),
        },
        Err(shared) => {
            let others = Arc::strong_count(&shared) - 1;
            Err((
                shared,
                busy(
                    op,
                    others,
                    "destroy them first; dropped, it is destroyed when the last of them is",
                ),
            ))
        }
    }
}

/// The error for destroying an object that is still referenced.
pub(crate) fn busy(op: &'static str, others: usize, then: &str) -> Error {
    Error::sys(op, crate::sys::Errno::EBUSY).with_detail(format!(
        "{others} other handle(s), child object(s) or unacknowledged event(s) still use it; \
         {then}"
    ))
}

/// A child object's reference to a parent that counts its children (a
/// QP's CQs and SRQ): the parent's destroy fails with `EBUSY` while the
/// count is not zero.
///
/// Dropping the link releases the reference *before* it lowers the count:
/// a destroy that sees no children therefore never finds a reference a
/// child still holds.
#[derive(Debug)]
pub(crate) struct ParentLink<T: Destroy> {
    parent: Option<Arc<Owned<T>>>,
    children: Arc<AtomicUsize>,
}

impl<T: Destroy> ParentLink<T> {
    /// Links to `parent`, counting one more child in `children`.
    pub(crate) fn new(parent: &Arc<Owned<T>>, children: &Arc<AtomicUsize>) -> Self {
        children.fetch_add(1, Ordering::AcqRel);
        ParentLink {
            parent: Some(parent.clone()),
            children: children.clone(),
        }
    }
}

impl<T: Destroy> Deref for ParentLink<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.parent {
            Some(p) => p,
            None => unreachable!("the parent is only released in drop"),
        }
    }
}

impl<T: Destroy> Drop for ParentLink<T> {
    fn drop(&mut self) {
        drop(self.parent.take());
        self.children.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Debug)]
    struct Counted(Arc<AtomicUsize>);

    impl Destroy for Counted {
        fn destroy_kernel(&self) -> Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn destroyed_exactly_once_explicitly() {
        let n = Arc::new(AtomicUsize::new(0));
        let obj = Owned::new(Counted(n.clone()));
        try_destroy(obj, "test").map_err(|(_, e)| e).unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    /// A parent whose destroy records how many children it still counted.
    #[derive(Debug)]
    struct Parent {
        children: Arc<AtomicUsize>,
        seen: Arc<AtomicUsize>,
    }

    impl Destroy for Parent {
        fn destroy_kernel(&self) -> Result<()> {
            self.seen
                .store(self.children.load(Ordering::SeqCst), Ordering::SeqCst);
            Ok(())
        }
    }

    /// The invariant a CQ destroy relies on: a child stops counting only
    /// after its reference is gone. Here the link holds the parent's last
    /// reference, so the parent is destroyed inside the link's drop and
    /// must still see the child counted (the old order, count first, let a
    /// destroy see no children while a reference remained, and sleep).
    #[test]
    fn a_parent_link_releases_its_reference_before_it_stops_counting() {
        let children = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let parent = Owned::new(Parent {
            children: children.clone(),
            seen: seen.clone(),
        });
        let link = ParentLink::new(&parent, &children);
        assert_eq!(children.load(Ordering::SeqCst), 1);
        drop(parent);
        drop(link);
        assert_eq!(seen.load(Ordering::SeqCst), 1, "released while counted");
        assert_eq!(children.load(Ordering::SeqCst), 0);
    }

    /// An object another context owns (imported): its drop leaves the
    /// kernel object, its explicit destroy does not.
    #[derive(Debug)]
    struct Imported(Arc<AtomicUsize>);

    impl Destroy for Imported {
        fn destroy_kernel(&self) -> Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }

        fn owns_kernel_object(&self) -> bool {
            false
        }
    }

    #[test]
    fn an_imported_object_is_destroyed_only_explicitly() {
        let n = Arc::new(AtomicUsize::new(0));
        drop(Owned::new(Imported(n.clone())));
        assert_eq!(n.load(Ordering::SeqCst), 0, "dropped: released only");
        try_destroy(Owned::new(Imported(n.clone())), "test")
            .map_err(|(_, e)| e)
            .unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 1, "destroyed explicitly");
    }

    #[test]
    fn busy_while_shared_then_destroyed_by_the_last_drop() {
        let n = Arc::new(AtomicUsize::new(0));
        let obj = Owned::new(Counted(n.clone()));
        let child = obj.clone();
        let (obj, err) = try_destroy(obj, "test").unwrap_err();
        assert_eq!(err.errno(), crate::sys::Errno::EBUSY);
        assert_eq!(n.load(Ordering::SeqCst), 0);
        drop(obj);
        drop(child);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    /// A kernel object whose destroy the kernel refuses while `refuse`
    /// is set; counts the destroys that went through.
    #[derive(Debug)]
    struct Refusing {
        refuse: Arc<AtomicBool>,
        destroyed: Arc<AtomicUsize>,
    }

    impl Destroy for Refusing {
        fn destroy_kernel(&self) -> Result<()> {
            if self.refuse.load(Ordering::SeqCst) {
                return Err(Error::sys("test", crate::sys::Errno::EINVAL));
            }
            self.destroyed.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    /// The kernel's refusal gives the reference back, the object whole:
    /// the retry destroys it, and nothing is destroyed twice or leaked.
    #[test]
    fn a_refused_destroy_gives_the_object_back_and_a_retry_destroys_it() {
        let refuse = Arc::new(AtomicBool::new(true));
        let destroyed = Arc::new(AtomicUsize::new(0));
        let obj = Owned::new(Refusing {
            refuse: refuse.clone(),
            destroyed: destroyed.clone(),
        });
        let (obj, err) = try_destroy(obj, "test").unwrap_err();
        assert_eq!(err.errno(), crate::sys::Errno::EINVAL);
        assert_eq!(destroyed.load(Ordering::SeqCst), 0);
        refuse.store(false, Ordering::SeqCst);
        try_destroy(obj, "test").map_err(|(_, e)| e).unwrap();
        assert_eq!(destroyed.load(Ordering::SeqCst), 1, "destroyed once");
    }
}
