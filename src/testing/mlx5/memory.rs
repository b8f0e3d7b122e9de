//! Host memory as the device reaches it: the MR table with its key and
//! access checks, and the raw accessors for memory the library shares with
//! the device (queue buffers, doorbell records, registered memory).
//!
//! Nothing here forms a Rust reference to shared memory: bytes are copied
//! with relaxed atomic accesses (`shared_memory`, as the library copies
//! memory regions), doorbell records and atomic targets are read and
//! written with atomics, as the library writes them (32-bit release stores
//! of big-endian values; `AtomicU64` for the 8 bytes of an RDMA atomic).
#![allow(unsafe_code)]

use std::{
    collections::HashMap,
    sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering},
};

/// `IB_ACCESS_*` (`ib_user_verbs.h`).
pub(crate) const LOCAL_WRITE: u32 = 1;
pub(crate) const REMOTE_WRITE: u32 = 2;
pub(crate) const REMOTE_READ: u32 = 4;
pub(crate) const REMOTE_ATOMIC: u32 = 8;

/// Copies `len` bytes of host memory at `addr` out.
///
/// # Safety
/// `addr..addr + len` must be live memory of this process: a range the
/// model checked against its MR table, or a queue buffer or doorbell record
/// the library gave in a create command (live until the destroy command,
/// which removes it from the model first).
pub(crate) unsafe fn read(addr: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: the caller's range; atomic copies (`shared_memory`), as the
    // library's own accesses to memory regions are, so a program touching
    // the same bytes meanwhile races nothing undefined.
    unsafe { crate::shared_memory::copy_out(addr as *mut u8, &mut out) };
    out
}

/// Copies `bytes` into host memory at `addr`.
///
/// # Safety
/// As [`read`], and the range must be writable.
pub(crate) unsafe fn write(addr: u64, bytes: &[u8]) {
    // SAFETY: as in `read`.
    unsafe { crate::shared_memory::copy_in(addr as *mut u8, bytes) };
}

/// Stores one byte with a relaxed 1-byte atomic store (the bytes of a
/// CQE's last word, beside `op_own`, which the library polls byte-wide).
///
/// # Safety
/// As [`write`]; every concurrent access to the byte is 1 byte wide.
pub(crate) unsafe fn store_u8(addr: u64, v: u8) {
    // SAFETY: the caller guarantees the byte is live and writable and
    // accessed byte-wide by whoever races on it.
    unsafe { AtomicU8::from_ptr(addr as *mut u8) }.store(v, Ordering::Relaxed);
}

/// Stores one byte with release ordering (a CQE's `op_own`, written last).
///
/// # Safety
/// As [`write`].
pub(crate) unsafe fn store_release_u8(addr: u64, v: u8) {
    // SAFETY: the caller guarantees the byte is live and writable; the
    // library reads `op_own` with an acquire load of its own.
    unsafe { AtomicU8::from_ptr(addr as *mut u8) }.store(v, Ordering::Release);
}

/// Word `i` of a big-endian doorbell record, read with acquire ordering
/// (the library stores it with release after writing the queue).
pub(crate) fn dbrec(addr: u64, i: u64) -> u32 {
    // SAFETY: `addr` is a doorbell record the library gave in a create
    // command (4-aligned, live until the object is destroyed, which removes
    // it from the model first); its words are only accessed atomically.
    let w = unsafe { AtomicU32::from_ptr((addr + 4 * i) as *mut u32) };
    u32::from_be(w.load(Ordering::Acquire))
}

/// A memory region (`REG_MR`): `len` bytes at host address `start`, which
/// the device addresses as `iova..iova + len`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mr {
    /// The PD handle it was registered on (its use keeps the PD).
    pub(crate) pd: u32,
    pub(crate) start: u64,
    pub(crate) iova: u64,
    pub(crate) len: u64,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) access: u32,
}

/// Why a key check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// No MR with that key.
    Unknown,
    /// Outside the MR.
    Range,
    /// The MR lacks the access right.
    Access,
}

/// The device's MR table, by kernel handle.
#[derive(Debug, Default)]
pub(crate) struct Mrs {
    by_handle: HashMap<u32, Mr>,
}

impl Mrs {
    pub(crate) fn insert(&mut self, handle: u32, mr: Mr) {
        self.by_handle.insert(handle, mr);
    }

    pub(crate) fn remove(&mut self, handle: u32) -> Option<Mr> {
        self.by_handle.remove(&handle)
    }

    pub(crate) fn get(&self, handle: u32) -> Option<Mr> {
        self.by_handle.get(&handle).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.by_handle.len()
    }

    /// Whether an MR uses PD handle `pd`.
    pub(crate) fn on_pd(&self, pd: u32) -> bool {
        self.by_handle.values().any(|m| m.pd == pd)
    }

    /// Translates `len` bytes at device address `va` under `key` (an lkey,
    /// or an rkey when `remote`) needing `access` (0: none, as a gather
    /// needs) to a host address.
    pub(crate) fn translate(
        &self,
        key: u32,
        remote: bool,
        va: u64,
        len: u64,
        access: u32,
    ) -> Result<u64, KeyError> {
        let m = self
            .by_handle
            .values()
            .find(|m| if remote { m.rkey == key } else { m.lkey == key })
            .ok_or(KeyError::Unknown)?;
        let end = va.checked_add(len).ok_or(KeyError::Range)?;
        if va < m.iova || end > m.iova + m.len {
            return Err(KeyError::Range);
        }
        if m.access & access != access {
            return Err(KeyError::Access);
        }
        Ok(m.start + (va - m.iova))
    }
}

/// An RDMA atomic on the 8 host-endian bytes at `addr` (mlx5_core sets
/// `atomic_req_8B_endianness_mode` to host endianness where the device
/// supports it, and mlx5_ib only then reports `IB_ATOMIC_HCA`): compare and
/// swap when `compare` is `Some`, else fetch and add. Returns the original.
///
/// # Safety
/// `addr` must be 8-aligned, live and writable (checked against the MR
/// table by the caller).
pub(crate) unsafe fn atomic(addr: u64, compare: Option<u64>, swap_add: u64) -> u64 {
    // SAFETY: see the contract; the CPU may access the word concurrently,
    // which is why it is an atomic operation.
    let a = unsafe { AtomicU64::from_ptr(addr as *mut u64) };
    match compare {
        Some(c) => match a.compare_exchange(c, swap_add, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(v) | Err(v) => v,
        },
        None => a.fetch_add(swap_add, Ordering::SeqCst),
    }
}
