//! Bounded waits for tests: a wait that a bug would make endless (a
//! receive that never completes because the SRQ's free list lost its WQE,
//! a destroy waiting for an acknowledgement count that an event
//! acknowledged twice ran past) fails the test after a [`Patience`], with
//! a message naming what did not happen and the likely cause, instead of
//! hanging the run.
//!
//! Used by the host tests (with [`PATIENCE`]) and the device tests (`tests/device/support.rs`, with a
//! longer one for rxe under TCG). A call still blocked when the bound runs
//! out is left on its thread: the test has failed, and the process ends
//! with the harness.

use std::{
    fmt::Display,
    panic,
    sync::mpsc::{self, Receiver, RecvTimeoutError},
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

/// How long something that must happen may take before the test fails.
#[derive(Debug, Clone, Copy)]
pub struct Patience(pub Duration);

/// The host tests' patience: nothing they wait for takes more than
/// milliseconds when the library works.
pub const PATIENCE: Patience = Patience(Duration::from_secs(10));

/// What a destroy that does not return is waiting for.
pub const DESTROY_WAITS: &str = "a destroy waits until as many events of the object are \
     acknowledged as the kernel reported, so one was acknowledged twice (the count ran past \
     the kernel's) or one never was";

impl Patience {
    /// Runs `f` on a thread of its own and returns what it returns; fails
    /// the test naming `what` if it has not returned in time. A panic in
    /// `f` fails the test with that panic.
    #[track_caller]
    pub fn within<T: Send + 'static>(
        self,
        what: impl Display,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let late = format!("{what}: still not done after {:?}", self.0);
        self.run(what, late, f)
    }

    /// `destroy(object)` (a CQ's, QP's, SRQ's or CM id's `destroy`, which
    /// waits for the object's events to be acknowledged), bounded: fails
    /// naming `what` and [`DESTROY_WAITS`] if it has not returned in time.
    #[track_caller]
    pub fn destroy<O: Send + 'static, E: Send + 'static>(
        self,
        what: impl Display,
        object: O,
        destroy: impl FnOnce(O) -> Result<(), E> + Send + 'static,
    ) -> Result<(), E> {
        let late = format!(
            "{what}: destroy() still waits after {:?}; {DESTROY_WAITS}",
            self.0
        );
        self.run(what, late, move || destroy(object))
    }

    #[track_caller]
    fn run<T: Send + 'static>(
        self,
        what: impl Display,
        late: String,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let (tx, rx) = mpsc::channel();
        let worker = thread::Builder::new()
            .name(format!("bounded: {what}"))
            .spawn(move || {
                let _ = tx.send(f());
            })
            .unwrap_or_else(|e| panic!("spawning a thread for {what}: {e}"));
        match rx.recv_timeout(self.0) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("{late}"),
            Err(RecvTimeoutError::Disconnected) => match worker.join() {
                Err(payload) => panic::resume_unwind(payload),
                Ok(()) => unreachable!("the worker returned without sending"),
            },
        }
    }

    /// Joins `handle`, or fails naming `what` if its thread is still
    /// running when the bound runs out; its panic fails the test.
    #[track_caller]
    pub fn join<T>(self, what: impl Display, handle: JoinHandle<T>) -> T {
        let start = Instant::now();
        let mut polls = 0u32;
        while !handle.is_finished() {
            assert!(
                start.elapsed() < self.0,
                "{what}: the thread still runs after {:?}",
                self.0
            );
            pause(&mut polls);
        }
        match handle.join() {
            Ok(v) => v,
            Err(payload) => panic::resume_unwind(payload),
        }
    }

    /// The next value from `rx`, or a failure naming `what` when none
    /// comes in time or its sender is gone (its thread panicked?).
    #[track_caller]
    pub fn recv<T>(self, what: impl Display, rx: &Receiver<T>) -> T {
        match rx.recv_timeout(self.0) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("{what}: nothing after {:?}", self.0),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("{what}: the sender is gone (did its thread panic?)")
            }
        }
    }

    /// Polls `cond` until it holds; fails naming `what` when it still does
    /// not after the bound.
    #[track_caller]
    pub fn until(self, what: impl Display, mut cond: impl FnMut() -> bool) {
        let start = Instant::now();
        let mut polls = 0u32;
        while !cond() {
            assert!(
                start.elapsed() < self.0,
                "{what}: still not so after {:?}",
                self.0
            );
            pause(&mut polls);
        }
    }
}

/// Between two polls: a yield for the first hundred (what is awaited
/// usually takes microseconds), then a millisecond's sleep.
fn pause(polls: &mut u32) {
    *polls += 1;
    if *polls < 100 {
        thread::yield_now();
    } else {
        thread::sleep(Duration::from_millis(1));
    }
}
