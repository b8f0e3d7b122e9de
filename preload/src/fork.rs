//! `fork(2)` without exec: the child gets a device of its own.
//!
//! The kernel gives a forked child a working device for the contexts it
//! opens itself (fork safety on 6.1 and 6.12 is copy-on-fork: the child's
//! copies of pinned pages are its own). The model lives in the process's
//! memory, though, and a child inherits a copy of it frozen at the fork:
//! without the thread that runs the HCA (threads do not survive `fork`),
//! and with whatever locks the parent's threads held at that instant still
//! held, by threads that do not exist in the child.
//!
//! So the child never touches the inherited model. A `pthread_atfork`
//! child handler, which runs in the child before `fork` returns there and
//! does nothing but two stores (it takes no lock and allocates nothing),
//! drops the shim's pointer to it and marks every fd of the fd table
//! [`Fd::Inherited`](crate::fd_table::Fd::Inherited). The child's first
//! open of the device builds a fresh model (the same device, the parent's
//! sysfs tree) and starts its HCA thread, and its contexts work as the
//! parent's do. At exit the child reports what its own model saw; the
//! sysfs tree stays the parent's.
//!
//! What happens to the parent's objects in the child: they live in the
//! parent's model, out of the child's reach. On the command fds and event
//! fds the child inherited, commands (`ioctl`, `write`), reads and `mmap`
//! fail with `EIO`, as on a device that is gone; closing them works
//! (`ibv_close_device`, and the destroys libibverbs treats `EIO` as done
//! for). The inherited mappings (UAR pages, MAP_SHARED memfds) are the
//! parent's pages: a doorbell the child rings on one reaches the parent's
//! HCA, which reads the WQEs from the parent's memory, as a doorbell rung
//! through an inherited UAR mapping reaches the real device. The kernel
//! instead lets a child keep using the parent's contexts (the same uverbs
//! file); the shim cannot, and programs do not rely on it (rdma-core's own
//! fork support, `ibv_fork_init`, is about the parent's memory).
#![allow(unsafe_code)] // pthread_atfork

use std::{ptr::null_mut, sync::atomic::Ordering};

use crate::{fd_table, shim};

/// Registers the child handler (from the ELF constructor).
pub(crate) fn install() {
    // SAFETY: registers a handler that is a plain `extern "C" fn` of this
    // library, which stays loaded (LD_PRELOAD) for the process's life.
    let r = unsafe { libc::pthread_atfork(None, None, Some(child)) };
    if r != 0 {
        eprintln!(
            "uverbs-model-preload: pthread_atfork failed ({r}): a forked child would find the \
             parent's model"
        );
    }
}

/// In the child, before `fork` returns there: the inherited model is
/// forgotten (never dropped: its locks may be held), and so are the fds.
extern "C" fn child() {
    if let Some(s) = shim() {
        s.model.store(null_mut(), Ordering::Release);
    }
    fd_table::inherit_all();
}
