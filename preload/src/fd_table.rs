//! The fds the shim handed out, looked up without a lock.
//!
//! Every interposed call (`read`, `write`, `close`, `ioctl`, ...) first asks
//! whether its fd is one of the shim's. A signal handler may make such a
//! call at any instant, on the thread it interrupted, in the middle of
//! another lookup: `write(2)`, `read(2)` and `close(2)` are
//! async-signal-safe, so the lookup must be too. The table is therefore a
//! flat array of one atomic byte per fd number, read and written with
//! single atomic operations: no lock, no allocation.
//!
//! It covers fd numbers below 2^20, Linux's default `fs.nr_open` (the
//! largest `RLIMIT_NOFILE` a process can have unless the administrator
//! raised it); the pages of the 1 MiB array that are never written are
//! never backed by memory. An fd of the model above that is refused
//! ([`set`] returns false).

use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

/// What an fd is to the shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fd {
    /// A uverbs command fd (one user context each).
    Cmd,
    /// An fd the model created (completion channel, async events, DevX
    /// channel): reads are the model's; `O_NONBLOCK` as the program set it.
    Event { nonblocking: bool },
    /// A command or event fd a forked child inherited: its objects live in
    /// the parent's model, which the child never touches (see
    /// `crate::fork`).
    Inherited,
}

const NONE: u8 = 0;
const CMD: u8 = 1;
const EVENT: u8 = 2;
const EVENT_NONBLOCKING: u8 = 3;
const INHERITED: u8 = 4;

/// How many fd numbers the table covers.
const SLOTS: usize = 1 << 20;

static TABLE: [AtomicU8; SLOTS] = [const { AtomicU8::new(NONE) }; SLOTS];
/// The highest fd number ever set (-1: none), so that [`inherit_all`]
/// looks at the used part only.
static HIGHEST: AtomicI32 = AtomicI32::new(-1);

fn slot(fd: i32) -> Option<&'static AtomicU8> {
    usize::try_from(fd).ok().and_then(|i| TABLE.get(i))
}

fn decode(v: u8) -> Option<Fd> {
    match v {
        CMD => Some(Fd::Cmd),
        EVENT => Some(Fd::Event { nonblocking: false }),
        EVENT_NONBLOCKING => Some(Fd::Event { nonblocking: true }),
        INHERITED => Some(Fd::Inherited),
        _ => None,
    }
}

fn encode(kind: Fd) -> u8 {
    match kind {
        Fd::Cmd => CMD,
        Fd::Event { nonblocking: false } => EVENT,
        Fd::Event { nonblocking: true } => EVENT_NONBLOCKING,
        Fd::Inherited => INHERITED,
    }
}

/// What `fd` is, if it is the shim's.
pub(crate) fn get(fd: i32) -> Option<Fd> {
    decode(slot(fd)?.load(Ordering::Acquire))
}

/// Records `fd` as `kind`; false when its number is beyond the table.
#[must_use]
pub(crate) fn set(fd: i32, kind: Fd) -> bool {
    let Some(s) = slot(fd) else { return false };
    s.store(encode(kind), Ordering::Release);
    HIGHEST.fetch_max(fd, Ordering::AcqRel);
    true
}

/// Forgets `fd`; returns what it was.
pub(crate) fn clear(fd: i32) -> Option<Fd> {
    decode(slot(fd)?.swap(NONE, Ordering::AcqRel))
}

/// Marks every fd of the table [`Fd::Inherited`]: in a child just forked,
/// where only the forking thread runs.
pub(crate) fn inherit_all() {
    let top = HIGHEST.load(Ordering::Acquire);
    let Ok(top) = usize::try_from(top) else {
        return;
    };
    for s in TABLE.iter().take(top + 1) {
        if s.load(Ordering::Relaxed) != NONE {
            s.store(INHERITED, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_numbers_beyond_the_table_are_refused() {
        let fd = (SLOTS - 3) as i32;
        assert_eq!(get(fd), None);
        for kind in [
            Fd::Cmd,
            Fd::Event { nonblocking: false },
            Fd::Event { nonblocking: true },
            Fd::Inherited,
        ] {
            assert!(set(fd, kind));
            assert_eq!(get(fd), Some(kind));
        }
        assert_eq!(clear(fd), Some(Fd::Inherited));
        assert_eq!(get(fd), None);
        assert_eq!(clear(fd), None);
        assert!(!set(SLOTS as i32, Fd::Cmd));
        assert!(!set(-1, Fd::Cmd));
        assert_eq!(get(SLOTS as i32), None);
        assert_eq!(get(-5), None);
    }
}
