//! Signals: the shim must never break a program a signal handler
//! interrupts.
//!
//! - **Critical sections.** Whatever the shim does while it holds a lock
//!   (the model's, the fake kernel's, the HCA thread handle's) runs inside
//!   a [`Critical`], with every signal blocked on the thread. A handler can
//!   then never run on a thread that holds one of those locks, so a handler
//!   that calls an interposed function (`write(2)`, `read(2)` of a channel:
//!   both async-signal-safe) never waits for a lock its own thread holds.
//!   The lookups that decide whether a call is the shim's at all take no
//!   lock (`fd_table.rs`). Signals stay blocked only for the time the model
//!   needs to answer a command; one that arrives meanwhile is delivered as
//!   the section ends. A handler's call on an fd that is not the shim's
//!   takes no lock and allocates nothing; one on the shim's own fds runs
//!   model code, which allocates (safe unless the handler interrupted
//!   `malloc` itself).
//! - **Blocking reads.** A blocking read of an event fd sleeps outside any
//!   critical section, in the kernel, on the pipe that backs the fd
//!   ([`wait_readable`]): a signal ends it with `EINTR` when its handler has
//!   no `SA_RESTART`, and the kernel restarts it otherwise, as it does for
//!   the read of a uverbs event file (`ib_uverbs_event_read` answers
//!   `-ERESTARTSYS`).
#![allow(unsafe_code)] // sigprocmask, tee, pipe2, poll on raw fds

use std::mem::MaybeUninit;

use libc::c_int;
use uverbs::sys::Errno;

use crate::real::{self, Guard};

/// Inside the shim with every signal blocked, until dropped: the shim's
/// own libc calls pass through (see [`Guard`]) and no signal handler runs
/// on this thread.
#[derive(Debug)]
pub(crate) struct Critical {
    /// The mask to restore (`None`: blocking failed, nothing to restore).
    old: Option<libc::sigset_t>,
    /// Left before the mask is restored (`drop`), so that a signal
    /// delivered then finds the thread outside the shim.
    guard: Option<Guard>,
}

impl Critical {
    pub(crate) fn enter() -> Critical {
        let mut all = MaybeUninit::<libc::sigset_t>::uninit();
        let mut old = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: both sets are this frame's; sigfillset initialises
        // `all`, and pthread_sigmask fills `old` when it returns 0.
        let old = unsafe {
            libc::sigfillset(all.as_mut_ptr());
            match libc::pthread_sigmask(libc::SIG_BLOCK, all.as_ptr(), old.as_mut_ptr()) {
                0 => Some(old.assume_init()),
                _ => None,
            }
        };
        Critical {
            old,
            guard: Some(Guard::enter()),
        }
    }
}

impl Drop for Critical {
    fn drop(&mut self) {
        drop(self.guard.take());
        if let Some(old) = &self.old {
            // SAFETY: restores the mask this thread had at `enter`.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
        }
    }
}

/// What [`wait_readable`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// A byte is in the pipe: a record is queued.
    Readable,
    /// The write end is closed (the model dropped the fd): nothing will
    /// ever be queued.
    NoWriter,
    /// The file is non-blocking after all (`FIONBIO`, which the shim does
    /// not see): no wait, the read answers.
    NonBlocking,
}

/// Sleeps until the pipe read end `fd` (an event fd of the model, which
/// holds a byte while a record is queued) has a byte, without taking it;
/// `Err(EINTR)`: a signal handler without `SA_RESTART` ran.
///
/// The sleep is a `tee(2)` of one byte into a pipe of its own: `tee` waits
/// for data in the input pipe without consuming it (`ipipe_prep`, which
/// answers `-ERESTARTSYS` to a signal, so the kernel applies the handler's
/// `SA_RESTART` as it does for the read of a uverbs event file). Without a
/// pipe to spare (`EMFILE`), it is a `poll(2)`, which a signal always ends
/// with `EINTR`.
pub(crate) fn wait_readable(fd: c_int) -> Result<Ready, Errno> {
    let mut scratch = [0 as c_int; 2];
    // SAFETY: `scratch` has room for the two fds.
    if unsafe { libc::pipe2(scratch.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return wait_poll(fd);
    }
    // SAFETY: `fd` is the program's open event fd (the caller looked it up
    // in the fd table); `scratch[1]` is this function's pipe. `tee`
    // reads and writes no memory of the process.
    let r = unsafe { libc::tee(fd, scratch[1], 1, 0) };
    let e = Errno::last();
    // SAFETY: closing this function's own pipe (through libc's close:
    // these fds are not the shim's).
    unsafe {
        real::close(scratch[0]);
        real::close(scratch[1]);
    }
    match r {
        n if n > 0 => Ok(Ready::Readable),
        0 => Ok(Ready::NoWriter),
        _ if e == Errno::EAGAIN => Ok(Ready::NonBlocking),
        _ => Err(e),
    }
}

fn wait_poll(fd: c_int) -> Result<Ready, Errno> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of this frame.
    match unsafe { libc::poll(&mut p, 1, -1) } {
        n if n > 0 && p.revents & libc::POLLIN != 0 => Ok(Ready::Readable),
        n if n > 0 => Ok(Ready::NoWriter),
        _ => Err(Errno::last()),
    }
}
