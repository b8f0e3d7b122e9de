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
//! Programs may set `O_NONBLOCK` themselves on the fd they get through
//! `AsFd` (as rdma-core's examples do before polling it): nothing changes.
//! Clearing it is harmless to a single reader: waits with a deadline and
//! `try_*` still never block. Only with several threads reading the same fd
//! can a cleared flag make the thread that loses a race for a record wait
//! in the read for the next one; leave it set there.
//!
//! A record may be consumed without being returned (an event of an object
//! that is being destroyed: the caller counts it as acknowledged); the reader
//! then reads the next one within the same wait.

use std::{
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    sync::{
        atomic::{AtomicBool, Ordering},
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

/// An event fd and the transport that reads it; see the module documentation.
#[derive(Debug)]
pub(crate) struct EventFd {
    kernel: Arc<dyn Kernel>,
    fd: OwnedFd,
    /// Whether this reader has set `O_NONBLOCK` (it never clears it).
    nonblocking: AtomicBool,
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
            nonblocking: AtomicBool::new(false),
            what,
        }
    }

    /// The transport (rdma_cm writes its commands to the same fd).
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
            loop {
                match read_one(&*self.kernel, self.fd.as_fd()) {
                    Ok(record) => {
                        if let Some(event) = deliver(record) {
                            return Ok(Some(event));
                        }
                    }
                    // The fd is non-blocking (the program or a timed wait
                    // switched it): wait for a record, then read again.
                    Err(Errno::EAGAIN) => {
                        self.wait_readable(wait, op)?;
                    }
                    Err(Errno::EINTR) => {}
                    Err(e) => return Err(read_error(op, e)),
                }
            }
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

    /// Sets `O_NONBLOCK` once, before the first read that must not block.
    fn make_nonblocking(&self) -> Result<()> {
        if !self.nonblocking.load(Ordering::Relaxed) {
            self.kernel
                .set_nonblocking(self.fd.as_fd(), true)
                .map_err(|e| Error::sys(format!("fcntl O_NONBLOCK on the {}", self.what), e))?;
            self.nonblocking.store(true, Ordering::Relaxed);
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
        let ready = self
            .kernel
            .wait_readable(self.fd.as_fd(), left)
            .map_err(|e| Error::sys(format!("poll the {}", self.what), e))?;
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
        let writer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            let mut bytes = 1u64.to_ne_bytes().to_vec();
            bytes.extend_from_slice(&2u64.to_ne_bytes());
            nix::unistd::write(&w, &bytes).unwrap();
            w // kept open: a closed pipe would read as end-of-file
        });
        // Record 1 is consumed without being returned; 2 is the event.
        let got = ev.next(Wait::Forever, "read", read_u64, |r| (r != 1).then_some(r));
        assert_eq!(got.unwrap(), Some(2));
        assert!(!ev.nonblocking.load(Ordering::Relaxed), "still blocking");
        let _w = writer.join().unwrap();
        // A bounded wait switches the fd to O_NONBLOCK for good.
        assert_eq!(ev.next(Wait::Never, "read", read_u64, Some).unwrap(), None);
        assert!(ev.nonblocking.load(Ordering::Relaxed));
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
        assert!(ev.nonblocking.load(Ordering::Relaxed));
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
}
