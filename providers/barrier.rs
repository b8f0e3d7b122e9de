//! The CPU-device ordering points of a userspace data path, by the names
//! rdma-core gives them (`util/udma_barrier.h`), for code that writes queue
//! memory the device reads, reads memory the device writes, and writes
//! doorbells to MMIO pages.
//!
//! A Rust `fence` orders memory between threads; it says nothing about a
//! device or about write-combining buffers, and on x86_64 it never emits
//! `sfence` or `lfence`. These functions emit what rdma-core emits:
//!
//! | barrier | x86_64 | aarch64 |
//! |---|---|---|
//! | [`udma_to_device_barrier`] | compiler barrier (stores are not reordered with stores) | `dmb oshst` |
//! | [`udma_from_device_barrier`] | `lfence` | `dmb oshld` |
//! | [`mmio_flush_writes`] | `sfence` | `dsb st` |
//! | [`mmio_wc_start`] | `sfence` | `dsb st` |
//!
//! Other architectures get a sequentially consistent fence, which is what
//! rdma-core's generic fallback (`__sync_synchronize`) is; only x86_64 is
//! built and tested here.
//!
//! The sequence of an mlx5 send doorbell, for example (`providers/mlx5/qp.c`
//! `post_send_db`): write the WQEs, [`udma_to_device_barrier`], write the
//! doorbell record, [`mmio_wc_start`], store to the UAR (or BlueFlame copy),
//! [`mmio_flush_writes`].
#![allow(unsafe_code)]

/// Orders the CPU's writes to memory the device reads (WQEs, doorbell
/// records) before the writes that follow (the doorbell record, the MMIO
/// doorbell).
#[inline(always)]
pub fn udma_to_device_barrier() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: an empty asm block with no operands; without `nomem` it is a
    // compiler barrier for memory accesses, which is all x86's TSO needs here.
    unsafe {
        core::arch::asm!("", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb oshst` only orders stores; it has no operands.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Orders a read of device-written memory (a CQE's ownership byte) before
/// the reads of the rest of it.
#[inline(always)]
pub fn udma_from_device_barrier() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `lfence` has no operands and no effect besides ordering loads.
    unsafe {
        core::arch::asm!("lfence", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb oshld` only orders loads; it has no operands.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Flushes write-combined MMIO stores (a doorbell, a BlueFlame copy) so they
/// leave the CPU before anything after it; also ends a write-combining
/// region.
#[inline(always)]
pub fn mmio_flush_writes() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no operands and no effect besides ordering stores.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dsb st` waits for prior stores; it has no operands.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Starts a sequence of write-combined MMIO stores: earlier stores to
/// memory (the doorbell record) are ordered before them.
#[inline(always)]
pub fn mmio_wc_start() {
    mmio_flush_writes();
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// A smoke test: each barrier executes (a wrong instruction would fault)
    /// in the order of the doorbell sequence and leaves memory as written.
    #[test]
    fn the_doorbell_sequence_runs_in_order() {
        let wqe = AtomicU64::new(0);
        let dbrec = AtomicU64::new(0);
        wqe.store(0x1234, Ordering::Relaxed);
        udma_to_device_barrier();
        dbrec.store(1, Ordering::Relaxed);
        mmio_wc_start();
        mmio_flush_writes();
        udma_from_device_barrier();
        assert_eq!(
            (wqe.load(Ordering::Relaxed), dbrec.load(Ordering::Relaxed)),
            (0x1234, 1)
        );
    }
}
