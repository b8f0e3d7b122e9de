//! The two fds of an open context (the command fd and the async event fd),
//! which [`Context::close`](crate::Context::close) closes while objects made
//! from the context still live. The core's half of the provider
//! interface's [`Transport`](super::Transport), which owns them.
//!
//! libibverbs' `ibv_close_device` closes both fds whatever objects are
//! alive (rdma-core 44 `verbs_uninit_context`); the kernel then destroys
//! what was left when it releases the file. Here every object holds the
//! context's shared state, so the fds cannot simply live as long as that
//! state: they are owned by a [`ContextFds`] that counts its *users* and
//! closes the fds once it is closed and no user is left.
//!
//! A user is either
//! - a command in flight ([`ContextFds::enter`], which fails once the
//!   context is closed: the command is never sent, and answers `EBADF`);
//! - a [`Context`](crate::Context) handle ([`ContextFds::register`]), which
//!   may hand out a [`BorrowedFd`] of either fd for as long as it lives
//!   (`Context::async_fd`, `Context::cmd_fd`). A handle made after the
//!   close (`ProtectionDomain::context` of a surviving PD) borrows a
//!   placeholder instead: an empty epoll instance, which never polls
//!   readable and answers every command with an error.
//!
//! So an fd number is closed only when nothing can still use it, and a
//! number the process reuses afterwards is never taken for the context's.
//! The count and the closed flag are one word, changed only by single
//! atomic read-modify-writes: the one that leaves it closed with no user
//! closes the fds (once: a user that arrives after the close and leaves
//! again brings it back to that state).
#![allow(unsafe_code)] // the fds' cell, dropped once; placeholders borrowed from a static

use std::{
    cell::UnsafeCell,
    mem::ManuallyDrop,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    sync::OnceLock,
};

use crate::{
    event_fd::EventFd,
    sync::{AtomicBool, AtomicU64},
};
use std::sync::atomic::Ordering::SeqCst;

/// The closed flag in [`ContextFds::state`].
const CLOSED: u64 = 1;
/// One user in [`ContextFds::state`].
const USER: u64 = 2;

/// What a context's fds are.
#[derive(Debug)]
pub(crate) struct Fds {
    /// The async event fd (`None` only while the context is being opened);
    /// closed before the command fd, as libibverbs closes them.
    pub(crate) events: Option<EventFd>,
    /// The command fd; its last close tears the kernel's ucontext down
    /// (unless a mapping of it lives on).
    pub(crate) cmd: OwnedFd,
}

impl Fds {
    /// The async event fd (the command fd while none is set, which only
    /// the opening of the context sees).
    pub(crate) fn async_fd(&self) -> BorrowedFd<'_> {
        self.events.as_ref().map_or(self.cmd.as_fd(), AsFd::as_fd)
    }
}

/// The fds of one context and their users; see the module documentation.
#[derive(Debug)]
pub(crate) struct ContextFds {
    /// [`CLOSED`] | users × [`USER`].
    state: AtomicU64,
    /// Set by the one thread that drops `fds`.
    dropped: AtomicBool,
    /// Set by [`ContextFds::close`] before [`CLOSED`]: what handles borrow
    /// from then on.
    placeholder: OnceLock<BorrowedFd<'static>>,
    /// Dropped once, when closed with no user left (or with `self`).
    fds: UnsafeCell<ManuallyDrop<Fds>>,
}

// SAFETY: `fds` is only read through shared references while a user is
// registered (which keeps it from being dropped), and dropped by the one
// thread that finds the context closed with no user left, when no reference
// to it can exist any more (see `drop_fds`). `Fds` itself is Send and Sync.
unsafe impl Sync for ContextFds {}

/// A command in flight: the fds stay open until it is dropped.
#[derive(Debug)]
pub(crate) struct Entered<'a> {
    of: &'a ContextFds,
}

impl Entered<'_> {
    /// The context's fds.
    pub(crate) fn fds(&self) -> &Fds {
        // SAFETY: this user keeps `fds` from being dropped (`drop_fds` runs
        // only with no user registered) for as long as `self` lives.
        unsafe { &*self.of.fds.get() }
    }

    /// The command fd.
    pub(crate) fn cmd(&self) -> BorrowedFd<'_> {
        self.fds().cmd.as_fd()
    }

    /// The async event fd.
    pub(crate) fn async_fd(&self) -> BorrowedFd<'_> {
        self.fds().async_fd()
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.of.leave();
    }
}

/// What a handle borrows.
#[derive(Debug)]
pub(crate) enum Borrowed<'a> {
    /// The context's fds.
    Open(&'a Fds),
    /// The context was closed: the placeholder.
    Closed(BorrowedFd<'static>),
}

impl ContextFds {
    /// The fds of a context being opened (its async event fd comes later,
    /// [`ContextFds::set_events`]).
    pub(crate) fn new(cmd: OwnedFd) -> Self {
        ContextFds {
            state: AtomicU64::new(0),
            dropped: AtomicBool::new(false),
            placeholder: OnceLock::new(),
            fds: UnsafeCell::new(ManuallyDrop::new(Fds { events: None, cmd })),
        }
    }

    /// Sets the async event fd (while the context is still being opened).
    pub(crate) fn set_events(&mut self, events: EventFd) {
        self.fds.get_mut().events = Some(events);
    }

    /// Registers a command in flight, or `None` once the context is closed.
    #[inline]
    pub(crate) fn enter(&self) -> Option<Entered<'_>> {
        let entered = Entered { of: self };
        if self.state.fetch_add(USER, SeqCst) & CLOSED != 0 {
            // Leaves again when dropped, and never touches the fds.
            return None;
        }
        Some(entered)
    }

    /// Registers a [`Context`](crate::Context) handle, until
    /// [`ContextFds::release`]; it counts whether the context is closed or
    /// not, and borrows through [`ContextFds::borrow`].
    pub(crate) fn register(&self) {
        self.state.fetch_add(USER, SeqCst);
    }

    /// Ends a registration of [`ContextFds::register`].
    pub(crate) fn release(&self) {
        self.leave();
    }

    /// What a handle borrows: the fds, or the placeholder once the context
    /// is closed.
    ///
    /// # Safety
    ///
    /// The caller holds a registration ([`ContextFds::register`]) for as
    /// long as the borrow lives.
    pub(crate) unsafe fn borrow(&self) -> Borrowed<'_> {
        match self.placeholder.get() {
            Some(p) => Borrowed::Closed(*p),
            // SAFETY: not closed when the placeholder was looked at (it is
            // set before `CLOSED`), so the fds are dropped only after the
            // caller's registration ends, which outlasts the borrow.
            None => Borrowed::Open(unsafe { &*self.fds.get() }),
        }
    }

    /// Whether the context was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(SeqCst) & CLOSED != 0
    }

    /// Closes the context: commands fail from now on, handles borrow
    /// `placeholder`, and the fds are closed as soon as no user is left
    /// (now, if none is).
    pub(crate) fn close(&self, placeholder: BorrowedFd<'static>) {
        let _ = self.placeholder.set(placeholder);
        if self.state.fetch_or(CLOSED, SeqCst) == 0 {
            self.drop_fds();
        }
    }

    fn leave(&self) {
        if self.state.fetch_sub(USER, SeqCst) == USER | CLOSED {
            self.drop_fds();
        }
    }

    /// Closes the fds, once. Called only by the read-modify-write that left
    /// the state closed with no user: every user registered before it has
    /// left, and every later one either fails to enter or, as a handle,
    /// borrows the placeholder (set before `CLOSED`).
    fn drop_fds(&self) {
        if self.dropped.swap(true, SeqCst) {
            return;
        }
        // SAFETY: no reference into `fds` exists (above) and none will be
        // made; `dropped` makes this the only drop.
        unsafe { ManuallyDrop::drop(&mut *self.fds.get()) };
    }
}

impl Drop for ContextFds {
    fn drop(&mut self) {
        if !self.dropped.load(SeqCst) {
            // SAFETY: not dropped before (`dropped`), and `self` goes away.
            unsafe { ManuallyDrop::drop(self.fds.get_mut()) };
        }
    }
}

/// The fd handles of closed contexts borrow: an epoll instance with nothing
/// in it (it never polls readable; reads, writes and ioctls on it fail),
/// made at the first close and kept for the process.
pub(crate) fn placeholder() -> Result<BorrowedFd<'static>, crate::sys::Errno> {
    static PLACEHOLDER: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = PLACEHOLDER.get() {
        return Ok(fd.as_fd());
    }
    let fd = crate::sys::empty_epoll()?;
    Ok(PLACEHOLDER.get_or_init(|| fd).as_fd())
}

#[cfg(test)]
mod tests {
    use std::{io::Write, os::fd::AsRawFd, sync::Arc};

    use super::*;
    use crate::testing::kernel::FakeKernel;

    /// The fds of a context as the read ends of two pipes, and the write
    /// ends, which tell whether a read end is still open: writing to a
    /// pipe whose every read end is closed fails with `EPIPE`.
    fn fds() -> (ContextFds, [std::fs::File; 2]) {
        let (cmd, cmd_w) = nix::unistd::pipe().unwrap();
        let (ev, ev_w) = nix::unistd::pipe().unwrap();
        let mut f = ContextFds::new(cmd);
        f.set_events(EventFd::new(Arc::new(FakeKernel::new()), ev, "test"));
        (f, [cmd_w.into(), ev_w.into()])
    }

    fn open(ends: &mut [std::fs::File; 2]) -> [bool; 2] {
        ends.each_mut().map(|w| w.write_all(&[0]).is_ok())
    }

    fn empty() -> BorrowedFd<'static> {
        placeholder().unwrap()
    }

    #[test]
    fn a_close_with_no_user_closes_both_fds_at_once() {
        let (f, mut ends) = fds();
        assert_eq!(open(&mut ends), [true, true]);
        assert!(!f.is_closed());
        f.close(empty());
        assert!(f.is_closed());
        assert_eq!(open(&mut ends), [false, false]);
        assert!(f.enter().is_none(), "no command after the close");
        drop(f); // and no second close
    }

    #[test]
    fn a_command_in_flight_keeps_the_fds_until_it_ends() {
        let (f, mut ends) = fds();
        let cmd = f.enter().unwrap();
        let raw = cmd.cmd().as_raw_fd();
        f.close(empty());
        assert!(f.enter().is_none());
        assert_eq!(open(&mut ends), [true, true]);
        assert_eq!(cmd.cmd().as_raw_fd(), raw);
        drop(cmd);
        assert_eq!(open(&mut ends), [false, false]);
    }

    #[test]
    fn a_handle_keeps_lent_fds_and_borrows_the_placeholder_after_the_close() {
        let (f, mut ends) = fds();
        f.register();
        // SAFETY: registered until `release` below.
        let Borrowed::Open(lent) = (unsafe { f.borrow() }) else {
            panic!("open");
        };
        let lent = lent.async_fd().as_raw_fd();
        f.close(empty());
        assert_eq!(open(&mut ends), [true, true], "lent out: still open");
        // SAFETY: still registered.
        match unsafe { f.borrow() } {
            Borrowed::Closed(p) => assert_eq!(p.as_raw_fd(), empty().as_raw_fd()),
            Borrowed::Open(_) => panic!("a closed context lends the placeholder"),
        }
        assert_ne!(lent, empty().as_raw_fd());
        f.release();
        assert_eq!(open(&mut ends), [false, false]);
        // A handle made afterwards (an object's `context()`) counts, and
        // borrows the placeholder; its release closes nothing again.
        f.register();
        // SAFETY: registered until `release`.
        assert!(matches!(unsafe { f.borrow() }, Borrowed::Closed(_)));
        f.release();
    }

    #[test]
    fn the_placeholder_never_polls_readable() {
        let p = empty();
        let mut fds = [nix::poll::PollFd::new(p, nix::poll::PollFlags::POLLIN)];
        assert_eq!(nix::poll::poll(&mut fds, 0u8), Ok(0));
        assert_eq!(p.as_raw_fd(), placeholder().unwrap().as_raw_fd(), "one");
    }
}

/// The users and the close under loom (`scripts/loom.sh`): the fds are
/// closed exactly once, never while a command that entered before the
/// close is still in flight, whatever the interleaving.
#[cfg(all(test, loom))]
mod loom_tests {
    use std::sync::Arc as StdArc;

    use super::*;
    use crate::testing::kernel::FakeKernel;

    fn pipe_fds() -> ContextFds {
        let (cmd, _) = nix::unistd::pipe().unwrap();
        let (ev, _) = nix::unistd::pipe().unwrap();
        let mut f = ContextFds::new(cmd);
        f.set_events(EventFd::new(StdArc::new(FakeKernel::new()), ev, "loom"));
        f
    }

    #[test]
    fn loom_a_close_racing_a_command_closes_once_and_never_under_it() {
        loom::model(|| {
            let f = loom::sync::Arc::new(pipe_fds());
            let user = f.clone();
            let t = loom::thread::spawn(move || {
                if let Some(cmd) = user.enter() {
                    assert!(!user.dropped.load(SeqCst), "closed under a command");
                    let _ = cmd.cmd();
                    assert!(!user.dropped.load(SeqCst), "closed under a command");
                }
            });
            f.close(placeholder().unwrap());
            t.join().unwrap();
            assert!(f.dropped.load(SeqCst), "closed once nothing is in flight");
        });
    }

    #[test]
    fn loom_a_handle_released_while_another_closes_closes_once() {
        loom::model(|| {
            let f = loom::sync::Arc::new(pipe_fds());
            f.register();
            f.register();
            let other = f.clone();
            let t = loom::thread::spawn(move || other.release());
            f.close(placeholder().unwrap());
            f.release();
            t.join().unwrap();
            assert!(f.dropped.load(SeqCst));
        });
    }
}
