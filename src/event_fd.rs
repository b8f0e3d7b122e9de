//! One reader for every event fd: completion channels, the context's async
//! event fd, the rdma_cm event channel (and, with DevX, mlx5's event
//! channels).
//!
//! The kernel queues records on each of these fds and hands out one per
//! read: a `read(2)` of a fixed-size record for the verbs fds
//! (`drivers/infiniband/core/uverbs_main.c`, `ib_uverbs_event_read`), the
//! `RDMA_USER_CM_CMD_GET_EVENT` command for rdma_cm
//! (`drivers/infiniband/core/ucma.c`, `ucma_get_event`). Both wait in the
//! kernel while the queue is empty unless the fd is `O_NONBLOCK`, when they
//! fail with `EAGAIN`; the fd polls readable while records are queued.
//!
//! [`EventFd`] owns such an fd and reads records in three ways:
//!
//! - **forever** ([`Wait::Forever`]): while the fd is still blocking (as the
//!   kernel creates it, and as libibverbs and librdmacm leave it), this is
//!   one blocking read, the same single system call rdma-core makes;
//! - **with a deadline** ([`Wait::Until`]): poll with the time that is left,
//!   then read; a wake-up that finds nothing (another thread took the record)
//!   polls again with what is left, so the deadline holds however often
//!   that happens;
//! - **without waiting** ([`Wait::Never`]): one poll without waiting, and a
//!   read if it said a record is there.
//!
//! The last two read only what a poll has just shown, so they never wait in
//! the read whatever the fd's flags. Several threads may read one fd,
//! though, and one can take the record another's poll saw; so the first of
//! them also switches the fd to `O_NONBLOCK` for good, and the loser's read
//! answers `EAGAIN`. From then on a wait forever is a read, and on `EAGAIN`
//! a poll and a read again. A thread already blocked in the kernel when the
//! switch happens stays correct: the kernel re-checks the flag when it wakes
//! without a record and answers `EAGAIN`, which the loop turns into a poll.
//!
//! # The program's `O_NONBLOCK`
//!
//! A program may set `O_NONBLOCK` itself on the fd it gets through `AsFd`,
//! as rdma-core's examples do before polling it. Then, as in libibverbs
//! (`ibv_get_cq_event`, `ibv_get_async_event`: one `read` that answers
//! `EAGAIN`) and librdmacm (`rdma_get_cm_event`), a wait forever returns at
//! once with a [`WouldBlock`](crate::ErrorKind::WouldBlock) error when
//! nothing is queued: poll the fd and call again. The reader tells the
//! program's flag from its own by asking the kernel's flags when it first
//! switches the fd (`F_GETFL`): a flag found already set is the program's.
//! A flag the program sets *after* a timed or non-blocking get has switched
//! the fd cannot be told from the reader's, and a wait forever then waits.
//! Clearing the flag is harmless to a single reader: waits with a deadline
//! and `try_*` still never block. Only with several threads reading the
//! same fd can a cleared flag make the thread that loses a race for a
//! record wait in the read for the next one; leave it set there.
//!
//! # Signals
//!
//! A signal handler that runs while a wait forever sleeps in the kernel
//! ends it with an [`Interrupted`](crate::ErrorKind::Interrupted) error
//! (`EINTR`), as libibverbs' gets return `EINTR`: the program acts on the
//! signal or calls again. Handlers installed with `SA_RESTART` do not
//! interrupt a blocking `read` (the kernel restarts it), but do interrupt
//! the poll a wait forever makes once the fd is non-blocking. Waits with a
//! deadline and `try_*` are never interrupted: they poll again with the time
//! that is left.
//!
//! A record may be consumed without being returned (an event of an object
//! that is being destroyed: the caller counts it as acknowledged); the reader
//! then reads the next one within the same wait.

use std::{
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    sync::{
        atomic::{AtomicU8, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use zerocopy::{FromBytes, IntoBytes};

use crate::{
    error::{Error, Result},
    sys::{Errno, Kernel, Readiness},
};

/// How long a read may wait for a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Not at all: read what is queued.
    Never,
    /// Until this instant.
    Until(Instant),
    /// Until a record arrives.
    Forever,
}

impl Wait {
    /// The wait for a `timeout` argument of the public API (`None`: forever).
    pub(crate) fn timeout(timeout: Option<Duration>) -> Self {
        match timeout {
            None => Wait::Forever,
            Some(Duration::ZERO) => Wait::Never,
            // A deadline beyond what `Instant` can hold is forever.
            Some(t) => Instant::now()
                .checked_add(t)
                .map_or(Wait::Forever, Wait::Until),
        }
    }
}

/// [`EventFd::nonblocking`]: the fd is still as the kernel made it.
const NOBODY: u8 = 0;
/// [`EventFd::nonblocking`]: this reader set `O_NONBLOCK`.
const READER: u8 = 1;
/// [`EventFd::nonblocking`]: the program had set `O_NONBLOCK`.
const PROGRAM: u8 = 2;

/// An event fd and the transport that reads it; see the module documentation.
#[derive(Debug)]
pub(crate) struct EventFd {
    kernel: Arc<dyn Kernel>,
    fd: OwnedFd,
    /// Who made the fd non-blocking: [`NOBODY`], [`READER`] (this reader,
    /// which never clears it) or [`PROGRAM`] (already set when the reader
    /// first looked).
    nonblocking: AtomicU8,
    /// What the fd is, for errors ("completion channel").
    what: &'static str,
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl EventFd {
    /// Takes an event fd as the kernel created it (blocking).
    pub(crate) fn new(kernel: Arc<dyn Kernel>, fd: OwnedFd, what: &'static str) -> Self {
        EventFd {
            kernel,
            fd,
            nonblocking: AtomicU8::new(NOBODY),
            what,
        }
    }

    /// The transport (rdma_cm writes its commands to the same fd).
    #[cfg_attr(not(any(feature = "cm", feature = "devx")), allow(dead_code))] // rdma_cm, DevX
    pub(crate) fn kernel(&self) -> &Arc<dyn Kernel> {
        &self.kernel
    }

    /// Reads the next event.
    ///
    /// `read_one` makes one read attempt and returns the raw record (see
    /// [`read_record`]); `deliver` turns a record into the caller's event, or
    /// returns `None` for a record that was consumed without being returned,
    /// and the reader goes on with the next one. `Ok(None)`: nothing arrived
    /// in time. `op` names the read in errors.
    pub(crate) fn next<R, T>(
        &self,
        wait: Wait,
        op: &'static str,
        mut read_one: impl FnMut(&dyn Kernel, BorrowedFd<'_>) -> Result<R, Errno>,
        mut deliver: impl FnMut(R) -> Option<T>,
    ) -> Result<Option<T>> {
        if wait == Wait::Forever {
            return self.next_forever(op, read_one, deliver).map(Some);
        }
        self.make_nonblocking()?;
        // Read only what a poll has just shown (see the module documentation).
        while self.wait_readable(wait, op)? {
            match read_one(&*self.kernel, self.fd.as_fd()) {
                Ok(record) => {
                    if let Some(event) = deliver(record) {
                        return Ok(Some(event));
                    }
                }
                // Another reader took it: with a deadline, wait again; a
                // try has had its one look.
                Err(Errno::EAGAIN) if wait == Wait::Never => return Ok(None),
                Err(Errno::EAGAIN | Errno::EINTR) => {}
                Err(e) => return Err(read_error(op, e)),
            }
        }
        Ok(None)
    }

    /// [`EventFd::next`] with [`Wait::Forever`]: one blocking read per
    /// record until `deliver` returns an event. Inlined into each event
    /// reader (it is every `get_event`'s path), the failed reads handled
    /// out of line ([`EventFd::after_failed_read`]).
    #[inline]
    pub(crate) fn next_forever<R, T>(
        &self,
        op: &'static str,
        mut read_one: impl FnMut(&dyn Kernel, BorrowedFd<'_>) -> Result<R, Errno>,
        mut deliver: impl FnMut(R) -> Option<T>,
    ) -> Result<T> {
        loop {
            match read_one(&*self.kernel, self.fd.as_fd()) {
                Ok(record) => {
                    if let Some(event) = deliver(record) {
                        return Ok(event);
                    }
                }
                Err(e) => self.after_failed_read(e, op)?,
            }
        }
    }

    /// A blocking read that failed with `e`: `Ok` to read again (after a
    /// wait for a record), or the error to report.
    #[cold]
    #[inline(never)]
    fn after_failed_read(&self, e: Errno, op: &'static str) -> Result<()> {
        match e {
            // Non-blocking by this reader's hand (a timed wait switched
            // it): wait for a record, then read again.
            Errno::EAGAIN if self.nonblocking.load(Ordering::Acquire) == READER => {
                self.wait_readable(Wait::Forever, op).map(|_| ())
            }
            // By the program's: as libibverbs, do not wait.
            Errno::EAGAIN => Err(would_block(op, self.what)),
            Errno::EINTR => Err(interrupted(op)),
            e => Err(read_error(op, e)),
        }
    }

    /// Sets `O_NONBLOCK` once, before the first read that must not block,
    /// and remembers whether the program had set it already.
    fn make_nonblocking(&self) -> Result<()> {
        if self.nonblocking.load(Ordering::Acquire) == NOBODY {
            // Claimed first, so that a blocking reader that meets the
            // switch (`EAGAIN`) waits for a record instead of reporting
            // the program's flag.
            self.nonblocking.store(READER, Ordering::Release);
            let was = self
                .kernel
                .set_nonblocking(self.fd.as_fd(), true)
                .map_err(|e| {
                    self.nonblocking.store(NOBODY, Ordering::Release);
                    Error::sys(format!("fcntl O_NONBLOCK on the {}", self.what), e)
                })?;
            if was {
                self.nonblocking.store(PROGRAM, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Waits until the fd is readable or the deadline passes: true when a
    /// record is there to read, false when the wait is over (nothing came in
    /// time). An fd whose source is gone (a removed device, a destroyed DevX
    /// channel: `POLLERR`/`POLLHUP`/`POLLRDHUP`) is an error: its reads
    /// would answer `EAGAIN` forever when non-blocking. A wait of
    /// [`Wait::Never`] polls without waiting, so that a `try_get` tells
    /// removal from idleness too.
    fn wait_readable(&self, wait: Wait, op: &'static str) -> Result<bool> {
        let left = match wait {
            Wait::Never => Some(Duration::ZERO),
            Wait::Forever => None,
            Wait::Until(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return Ok(false);
                }
                Some(deadline - now)
            }
        };
        let ready = match self.kernel.wait_readable(self.fd.as_fd(), left) {
            Ok(ready) => ready,
            // A wait forever is interrupted as a blocking read is; one with
            // a deadline polls again with what is left.
            Err(Errno::EINTR) if wait == Wait::Forever => return Err(interrupted(op)),
            Err(Errno::EINTR) => return self.wait_readable(wait, op),
            Err(e) => return Err(Error::sys(format!("poll the {}", self.what), e)),
        };
        match ready {
            Readiness::Closed => Err(read_error(op, Errno::EIO)),
            Readiness::Readable => Ok(true),
            Readiness::TimedOut => Ok(false),
        }
    }
}

/// One `read(2)` of a fixed-size record, for [`EventFd::next`]: a read of
/// any other length is `EBADMSG` (the kernel never splits records).
pub(crate) fn read_record<T: FromBytes + IntoBytes>(
    kernel: &dyn Kernel,
    fd: BorrowedFd<'_>,
) -> Result<T, Errno> {
    let mut record = T::new_zeroed();
    let n = kernel.read(fd, record.as_mut_bytes())?;
    if n == size_of::<T>() {
        Ok(record)
    } else {
        Err(Errno::EBADMSG)
    }
}

/// A wait forever on an fd the program made non-blocking, with nothing queued.
fn would_block(op: &'static str, what: &str) -> Error {
    Error::sys(op, Errno::EAGAIN).with_detail(format!(
        "nothing is queued and the program set O_NONBLOCK on the {what}: poll its fd and \
         call again (or use the try_ or timeout form)"
    ))
}

/// A wait forever a signal handler interrupted.
fn interrupted(op: &'static str) -> Error {
    Error::sys(op, Errno::EINTR)
        .with_detail("a signal handler ran while it waited: act on the signal or call again")
}

/// The error of a failed read, saying what it means for the reader.
fn read_error(op: &'static str, e: Errno) -> Error {
    let err = Error::sys(op, e);
    match e {
        Errno::EIO => err.with_detail(
            "the device was removed: destroy the remaining objects and close the context",
        ),
        Errno::EOVERFLOW => err.with_detail(
            "the kernel's event queue overflowed and dropped events; later events read normally",
        ),
        Errno::EBADMSG => {
            err.with_detail("the kernel returned a record of an unexpected size (short read)")
        }
        _ => err,
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::atomic::AtomicU32, thread};

    use super::*;
    use crate::sys::Linux;

    /// A pipe through the real kernel: the read end is the "event fd".
    fn pipe() -> (EventFd, OwnedFd) {
        let (r, w) = nix::unistd::pipe().unwrap_or_else(|e| panic!("pipe: {e}"));
        (EventFd::new(Arc::new(Linux), r, "test pipe"), w)
    }

    fn read_u64(k: &dyn Kernel, fd: BorrowedFd<'_>) -> Result<u64, Errno> {
        read_record::<u64>(k, fd)
    }

    /// A scheduling quantum and then some: the most a timed wait may overrun.
    const QUANTUM: Duration = Duration::from_millis(20);

    /// Runs `f`, a wait on the pipe whose write end is `w`, failing the
    /// test instead of hanging it: if `f` has not returned after 10 s, a
    /// record written to the pipe wakes it, and the test fails naming
    /// `what`.
    fn bounded<T>(w: &OwnedFd, what: &str, f: impl FnOnce() -> T) -> T {
        use std::sync::mpsc::{self, RecvTimeoutError};
        let (done, dog_rx) = mpsc::channel::<()>();
        let (out, woke) = thread::scope(|s| {
            let dog = s.spawn(move || {
                let late =
                    dog_rx.recv_timeout(Duration::from_secs(10)) == Err(RecvTimeoutError::Timeout);
                if late {
                    let _ = nix::unistd::write(w, &[0u8; 16]);
                }
                late
            });
            let out = f();
            drop(done);
            (out, dog.join().unwrap_or(true))
        });
        assert!(
            !woke,
            "{what}: still waiting after 10 s (a record written to the pipe woke it)"
        );
        out
    }

    #[test]
    fn a_timed_wait_on_an_empty_fd_ends_at_its_deadline() {
        let (ev, _w) = pipe();
        for ms in [1u64, 10, 100] {
            let t = Duration::from_millis(ms);
            let start = Instant::now();
            let got = ev.next(Wait::timeout(Some(t)), "read", read_u64, Some);
            let took = start.elapsed();
            assert_eq!(got.unwrap(), None);
            assert!(took >= t, "{ms} ms: returned early after {took:?}");
            assert!(took <= t + QUANTUM, "{ms} ms: took {took:?}");
        }
        let start = Instant::now();
        assert_eq!(ev.next(Wait::Never, "read", read_u64, Some).unwrap(), None);
        assert!(start.elapsed() <= QUANTUM);
    }

    /// A transport whose poll keeps waking up with nothing to read (as when
    /// other threads take every record first): the deadline must still hold.
    #[test]
    fn the_deadline_holds_across_spurious_wakeups() {
        let k = Arc::new(crate::testing::kernel::FakeKernel::new());
        let polls = Arc::new(AtomicU32::new(0));
        let p = polls.clone();
        k.on_wait_readable(move |t| {
            p.fetch_add(1, Ordering::Relaxed);
            thread::sleep(t.unwrap_or(Duration::MAX).min(Duration::from_millis(7)));
            Ok(Readiness::Readable)
        });
        let ev = EventFd::new(k, crate::testing::kernel::dummy_fd(), "test fd");
        let t = Duration::from_millis(60);
        let start = Instant::now();
        let got = ev.next(Wait::timeout(Some(t)), "read", read_u64, Some);
        let took = start.elapsed();
        assert_eq!(got.unwrap(), None);
        assert!(took >= t && took <= t + QUANTUM, "took {took:?}");
        assert!(polls.load(Ordering::Relaxed) >= 5, "the wake-ups happened");
    }

    #[test]
    fn a_blocking_read_returns_the_record_and_skips_undelivered_ones() {
        let (ev, w) = pipe();
        let w2 = w.try_clone().unwrap();
        let writer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            let mut bytes = 1u64.to_ne_bytes().to_vec();
            bytes.extend_from_slice(&2u64.to_ne_bytes());
            nix::unistd::write(&w, &bytes).unwrap();
            w // kept open: a closed pipe would read as end-of-file
        });
        // Record 1 is consumed without being returned; 2 is the event.
        let got = bounded(&w2, "a blocking read of the records written", || {
            ev.next(Wait::Forever, "read", read_u64, |r| (r != 1).then_some(r))
        });
        assert_eq!(got.unwrap(), Some(2));
        assert_eq!(
            ev.nonblocking.load(Ordering::Relaxed),
            NOBODY,
            "still blocking"
        );
        let _w = writer.join().unwrap();
        // A bounded wait switches the fd to O_NONBLOCK for good.
        assert_eq!(ev.next(Wait::Never, "read", read_u64, Some).unwrap(), None);
        assert_eq!(ev.nonblocking.load(Ordering::Relaxed), READER);
    }

    /// A queue whose source is gone reads `EAGAIN` forever when non-blocking
    /// (DevX channels, uverbs event files after removal) and polls hung up:
    /// every way of waiting reports removal, none says "nothing yet".
    #[test]
    fn a_source_that_is_gone_is_an_error_in_every_mode() {
        let (ev, w) = pipe();
        drop(w); // the read end now polls POLLHUP
        let eagain = |_: &dyn Kernel, _: BorrowedFd<'_>| Err::<u64, _>(Errno::EAGAIN);
        for wait in [
            Wait::Never,
            Wait::timeout(Some(Duration::from_secs(5))),
            Wait::Forever,
        ] {
            let start = Instant::now();
            let err = ev.next(wait, "read x", eagain, Some).unwrap_err();
            assert_eq!(
                err.kind(),
                crate::ErrorKind::DeviceRemoved,
                "{wait:?}: {err}"
            );
            assert!(start.elapsed() < Duration::from_secs(1), "{wait:?} waited");
        }
    }

    #[test]
    fn short_reads_overflow_and_removal_are_explained() {
        let (ev, w) = pipe();
        nix::unistd::write(&w, &[1, 2, 3]).unwrap();
        let err = ev.next(Wait::Never, "read x", read_u64, Some).unwrap_err();
        assert_eq!(err.errno(), Errno::EBADMSG);
        assert!(err.to_string().contains("short read"), "{err}");
        // Readable again (the errors below come from reads, which happen
        // only when a poll shows a record).
        nix::unistd::write(&w, &[9]).unwrap();
        let overflow = |_: &dyn Kernel, _: BorrowedFd<'_>| Err::<u64, _>(Errno::EOVERFLOW);
        let err = ev.next(Wait::Never, "read x", overflow, Some).unwrap_err();
        assert!(err.to_string().contains("overflowed"), "{err}");
        let removed = |_: &dyn Kernel, _: BorrowedFd<'_>| Err::<u64, _>(Errno::EIO);
        let err = ev.next(Wait::Never, "read x", removed, Some).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::DeviceRemoved);
    }

    /// A program cleared `O_NONBLOCK` behind the reader's back: a try and a
    /// timed wait still return at once / at their deadline instead of
    /// blocking in the read (they read only what a poll showed).
    #[test]
    fn a_cleared_nonblocking_flag_does_not_make_waits_block() {
        let (ev, w) = pipe();
        assert_eq!(ev.next(Wait::Never, "read", read_u64, Some).unwrap(), None);
        assert_eq!(ev.nonblocking.load(Ordering::Relaxed), READER);
        Linux.set_nonblocking(ev.as_fd(), false).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let ev = Arc::new(ev);
        let reader = {
            let ev = ev.clone();
            thread::spawn(move || {
                let a = ev.next(Wait::Never, "read", read_u64, Some).unwrap();
                let b = ev
                    .next(
                        Wait::timeout(Some(Duration::from_millis(20))),
                        "read",
                        read_u64,
                        Some,
                    )
                    .unwrap();
                tx.send((a, b)).unwrap();
            })
        };
        let got = rx.recv_timeout(Duration::from_secs(5));
        if got.is_err() {
            // Unblock the reader so the test ends, then fail.
            nix::unistd::write(&w, &[0u8; 16]).unwrap();
        }
        assert_eq!(got.expect("the waits blocked in read"), (None, None));
        reader.join().unwrap();
        nix::unistd::write(&w, &7u64.to_ne_bytes()).unwrap();
        assert_eq!(
            ev.next(Wait::Never, "read", read_u64, Some).unwrap(),
            Some(7)
        );
    }

    /// The program set `O_NONBLOCK` (as rdma-core's examples do before
    /// polling): a wait forever with nothing queued returns `WouldBlock`
    /// at once, as libibverbs' one `read` returns `EAGAIN`; with a record
    /// queued it reads it. The reader never claims the program's flag.
    #[test]
    fn a_flag_the_program_set_makes_a_wait_forever_return_would_block() {
        let (ev, w) = pipe();
        assert!(!Linux.set_nonblocking(ev.as_fd(), true).unwrap());
        let start = Instant::now();
        let at_once = "a wait forever on an empty fd the program made O_NONBLOCK";
        let err = bounded(&w, at_once, || {
            ev.next(Wait::Forever, "read x", read_u64, Some)
        })
        .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1), "it waited");
        assert_eq!(err.kind(), crate::ErrorKind::WouldBlock, "{err}");
        assert_eq!(err.errno(), Errno::EAGAIN);
        assert!(err.to_string().contains("O_NONBLOCK"), "{err}");
        // A timed wait leaves the program's flag the program's.
        assert_eq!(
            ev.next(Wait::Never, "read x", read_u64, Some).unwrap(),
            None
        );
        assert_eq!(ev.nonblocking.load(Ordering::Relaxed), PROGRAM);
        let err = bounded(&w, at_once, || {
            ev.next(Wait::Forever, "read x", read_u64, Some)
        })
        .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::WouldBlock, "{err}");
        nix::unistd::write(&w, &5u64.to_ne_bytes()).unwrap();
        assert_eq!(
            ev.next(Wait::Forever, "read x", read_u64, Some).unwrap(),
            Some(5)
        );
    }

    /// The reader's own switch (a timed get ran first) keeps a wait forever
    /// waiting for the next record.
    #[test]
    fn after_the_readers_own_switch_a_wait_forever_still_waits() {
        let (ev, w) = pipe();
        assert_eq!(ev.next(Wait::Never, "read", read_u64, Some).unwrap(), None);
        assert_eq!(ev.nonblocking.load(Ordering::Relaxed), READER);
        let w2 = w.try_clone().unwrap();
        let writer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            nix::unistd::write(&w, &9u64.to_ne_bytes()).unwrap();
            w
        });
        let got = bounded(&w2, "a wait forever for the record written", || {
            ev.next(Wait::Forever, "read", read_u64, Some)
        });
        assert_eq!(got.unwrap(), Some(9));
        let _w = writer.join().unwrap();
    }

    /// A signal handler installed without `SA_RESTART` interrupts a wait
    /// forever, blocking read or poll: `Interrupted` (`EINTR`), as
    /// libibverbs returns it; a timed wait goes on to its deadline.
    #[test]
    #[allow(unsafe_code)]
    fn a_signal_interrupts_a_wait_forever_and_not_a_timed_one() {
        extern "C" fn on_signal(_: libc::c_int) {}
        // SAFETY: a handler that does nothing, installed for SIGUSR2, which
        // nothing else in the test binary uses; `sa_flags` 0 (no
        // SA_RESTART) is the point of the test.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        }
        for switched in [false, true] {
            let (ev, w) = pipe();
            if switched {
                // The reader's switch: the wait forever polls.
                assert_eq!(ev.next(Wait::Never, "read", read_u64, Some).unwrap(), None);
            }
            let ev = Arc::new(ev);
            // SAFETY: pthread_self has no preconditions.
            let me = unsafe { libc::pthread_self() } as usize;
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (s, s2) = (stop.clone(), stop.clone());
            let kicker = thread::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(20));
                    // SAFETY: `me` is the test thread, alive until `stop`
                    // is set and this thread joined.
                    unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGUSR2) };
                }
            });
            let err = bounded(&w, "a wait forever under SIGUSR2 every 20 ms", || {
                ev.next(Wait::Forever, "read x", read_u64, Some)
            });
            let timed = ev.next(
                Wait::timeout(Some(Duration::from_millis(100))),
                "read x",
                read_u64,
                Some,
            );
            s2.store(true, Ordering::Relaxed);
            kicker.join().unwrap();
            let err = err.unwrap_err();
            assert_eq!(
                err.kind(),
                crate::ErrorKind::Interrupted,
                "switched {switched}: {err}"
            );
            assert_eq!(err.errno(), Errno::EINTR);
            assert_eq!(timed.unwrap(), None, "the timed wait ran to its deadline");
        }
    }
}
