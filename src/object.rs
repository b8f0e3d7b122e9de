//! Ownership of kernel objects.
//!
//! Every kernel object (PD, MR, CQ, QP, SRQ, AH) lives in an [`Owned`]
//! behind an `Arc`: the user's handle holds one reference and each child
//! object holds another (a QP holds its PD and CQs), so a parent cannot be
//! destroyed while the kernel still uses it from a child. The kernel object is
//! destroyed exactly once: by an explicit `destroy()` (which reports errors,
//! and fails with `EBUSY` while other references exist), or when the last
//! reference is dropped (best effort: `Drop` never panics and ignores errors).

use std::{ops::Deref, sync::Arc};

use crate::error::{Error, Result};

/// A kernel object that can be destroyed.
pub(crate) trait Destroy {
    /// Destroys the kernel object. Called at most once.
    fn destroy_kernel(&mut self) -> Result<()>;
}

/// A kernel object with destroy-once semantics.
#[derive(Debug)]
pub(crate) struct Owned<T: Destroy> {
    obj: T,
    destroyed: bool,
}

impl<T: Destroy> Owned<T> {
    pub(crate) fn new(obj: T) -> Arc<Self> {
        Arc::new(Owned {
            obj,
            destroyed: false,
        })
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
        if !self.destroyed {
            self.destroyed = true;
            let _ = self.obj.destroy_kernel();
        }
    }
}

impl<T: Destroy> Owned<T> {
    /// Destroys the kernel object now, reporting the result.
    pub(crate) fn destroy_now(mut self) -> Result<()> {
        self.destroyed = true;
        self.obj.destroy_kernel()
    }
}

/// Destroys the object behind the last reference now; `EBUSY` otherwise.
pub(crate) fn destroy<T: Destroy>(arc: Arc<Owned<T>>, op: &'static str) -> Result<()> {
    match Arc::try_unwrap(arc) {
        Ok(owned) => owned.destroy_now(),
        Err(shared) => Err(busy(op, Arc::strong_count(&shared) - 1)),
    }
}

/// The error for destroying an object that is still referenced.
pub(crate) fn busy(op: &'static str, others: usize) -> Error {
    Error::sys(op, crate::sys::Errno::EBUSY).with_detail(format!(
        "{others} other handle(s), child object(s) or unacknowledged event(s) still use it; \
         it is destroyed when the last of them is dropped"
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Debug)]
    struct Counted(Arc<AtomicUsize>);

    impl Destroy for Counted {
        fn destroy_kernel(&mut self) -> Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn destroyed_exactly_once_explicitly() {
        let n = Arc::new(AtomicUsize::new(0));
        let obj = Owned::new(Counted(n.clone()));
        destroy(obj, "test").unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn busy_while_shared_then_destroyed_by_the_last_drop() {
        let n = Arc::new(AtomicUsize::new(0));
        let obj = Owned::new(Counted(n.clone()));
        let child = obj.clone();
        let err = destroy(obj, "test").unwrap_err();
        assert_eq!(err.errno(), Some(crate::sys::Errno::EBUSY));
        assert_eq!(n.load(Ordering::SeqCst), 0);
        drop(child);
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}
