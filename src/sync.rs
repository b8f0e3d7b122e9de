//! The synchronisation primitives of the two interleaving-heavy parts of
//! the crate: event accounting against destroys ([`crate::event_count`])
//! and the mlx5 queues' tails between poster, poller and reset.
//!
//! Normally they are `std`'s. Built with `--cfg loom` (`scripts/loom.sh`),
//! they are [loom]'s, whose model checker runs the `loom_*` unit tests
//! under every interleaving (and the weak-memory reorderings it models) of
//! the threads they start. Only those tests run in such a build: loom's
//! types work inside `loom::model` alone.
//!
//! [loom]: https://docs.rs/loom

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{fence, AtomicBool, AtomicU32, AtomicU64},
    Condvar, Mutex, MutexGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{fence, AtomicBool, AtomicU32, AtomicU64},
    Condvar, Mutex, MutexGuard,
};
