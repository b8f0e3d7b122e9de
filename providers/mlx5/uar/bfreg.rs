//! Ringing a bfreg: the 8-byte doorbell as one 64-bit store, BlueFlame
//! copies as ascending 64-bit stores into the register half this ring
//! uses, the halves toggled after each ring, and the lock of a bfreg
//! several QPs share. Where a bfreg is (its page and offset) is checked
//! once, when it is made, so a ring stores without a check.
#![allow(unsafe_code)]

use std::sync::{
    atomic::{compiler_fence, AtomicU64, AtomicUsize, Ordering},
    Arc, Mutex, MutexGuard,
};

use super::UarPage;

/// A blue-flame register: where one QP (or several, when shared) rings its
/// send doorbell.
#[derive(Debug)]
pub(crate) struct Bfreg {
    pub(crate) page: Arc<UarPage>,
    /// Offset of the register in the page.
    pub(crate) reg: usize,
    /// Half the BlueFlame register (the largest BlueFlame copy); 0 when the
    /// register takes 8-byte doorbells only (NC page, bfreg 0, no WC).
    pub(crate) buf_size: usize,
    /// Held while ringing a bfreg that several QPs share (its BlueFlame
    /// halves and offset toggle are common state).
    lock: Option<Mutex<()>>,
    /// The half of the register the next ring uses (0 or `buf_size`):
    /// toggled on every ring (`bf->offset ^= bf->buf_size`).
    offset: AtomicUsize,
    /// What the QP create passes: the page id (dynamic UARs,
    /// `MLX5_QP_FLAG_UAR_PAGE_INDEX`) or the gross bfreg index (static UARs;
    /// the kernel chose it).
    pub(crate) index: u32,
}

/// A ring in progress on a bfreg ([`Bfreg::begin`]): the lock of a shared
/// bfreg, if any, and the half of the register this ring uses.
pub(crate) struct Ring<'a> {
    bf: &'a Bfreg,
    /// The half's offset in the page: `reg` or `reg + buf_size`, inside
    /// the page with all its `buf_size` bytes ([`Bfreg::new`]).
    at: usize,
    _lock: Option<MutexGuard<'a, ()>>,
}

impl Bfreg {
    /// The bfreg at offset `reg` of `page`, with BlueFlame halves of
    /// `buf_size` bytes (0: doorbells only); `None` unless `reg` is
    /// 64-aligned, `buf_size` a multiple of 64, and the register (both
    /// halves, or the 8-byte doorbell) inside the page. Checked once here,
    /// so a ring stores without a check ([`Ring`]).
    pub(crate) fn new(
        page: Arc<UarPage>,
        reg: usize,
        buf_size: usize,
        shared: bool,
        index: u32,
    ) -> Option<Self> {
        let span = if buf_size == 0 {
            8
        } else {
            buf_size.checked_mul(2)?
        };
        let fits = reg % 64 == 0 && buf_size % 64 == 0 && reg.checked_add(span)? <= page.len();
        fits.then(|| Bfreg {
            page,
            reg,
            buf_size,
            lock: shared.then(|| Mutex::new(())),
            offset: AtomicUsize::new(0),
            index,
        })
    }

    /// Whether several QPs ring this bfreg.
    pub(crate) fn is_shared(&self) -> bool {
        self.lock.is_some()
    }

    /// Starts a ring: takes the shared bfreg's lock (a dedicated one has
    /// none) and picks the register half.
    #[inline(always)]
    pub(crate) fn begin(&self) -> Ring<'_> {
        let lock = self
            .lock
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()));
        Ring {
            bf: self,
            // `offset` is 0 or `buf_size`: it starts at 0 and is only ever
            // stored by `Ring::end`, as the XOR of a value it loaded with
            // `buf_size` (whatever the interleaving of rings).
            at: self.reg + self.offset.load(Ordering::Relaxed),
            _lock: lock,
        }
    }
}

impl Ring<'_> {
    /// The largest BlueFlame copy, in bytes (0: doorbells only).
    #[inline(always)]
    pub(crate) fn bf_size(&self) -> usize {
        self.bf.buf_size
    }

    /// Stores the 8-byte doorbell `bytes` (in memory order) as one 64-bit
    /// store.
    #[inline(always)]
    pub(crate) fn doorbell(&self, bytes: [u8; 8]) {
        // SAFETY: `at` is `reg` or `reg + buf_size` (`Bfreg::begin`);
        // `Bfreg::new` checked that `reg` and `buf_size` are multiples of
        // 64 and that the 8 bytes at `reg` (no BlueFlame) or the
        // `2 * buf_size >= 128` bytes from it are inside the page, so the 8
        // bytes at `at` are an aligned u64 inside the mapping, which the
        // bfreg's `Arc` keeps alive. UAR memory is only ever accessed
        // through atomics, by this library and (in tests) the device model.
        let reg = unsafe { AtomicU64::from_ptr(self.bf.page.map.as_mut_ptr().add(self.at).cast()) };
        reg.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
    }

    /// Stores 64-byte block `bb` of a BlueFlame copy as eight ascending
    /// 64-bit stores, never a `memcpy` (which could use wider or narrower
    /// stores, or go backwards). A block past the half's `buf_size` bytes
    /// is a bug, and nothing is stored.
    #[inline(always)]
    pub(crate) fn bf_block(&self, bb: usize, block: &[u64; 8]) {
        if bb >= self.bf.buf_size / 64 {
            debug_assert!(false, "BlueFlame block {bb} past the register half");
            return;
        }
        let base = self
            .bf
            .page
            .map
            .as_mut_ptr()
            .wrapping_add(self.at + bb * 64)
            .cast::<u64>();
        for (i, &word) in block.iter().enumerate() {
            // SAFETY: block `bb < buf_size / 64` of the half at `at` lies in
            // `at..at + buf_size`, inside the page and 64-aligned
            // (`Bfreg::new`, as for `doorbell`), so word `i < 8` is an
            // aligned u64 inside the live mapping; UAR memory is only
            // accessed through atomics.
            let reg = unsafe { AtomicU64::from_ptr(base.add(i)) };
            reg.store(word, Ordering::Relaxed);
            // Keeps the stores in ascending order in the generated code
            // (relaxed stores to different addresses may otherwise be
            // reordered by the compiler); no instruction is emitted.
            compiler_fence(Ordering::Release);
        }
    }

    /// Ends the ring (releasing a shared bfreg's lock): the next one uses
    /// the other half.
    #[inline(always)]
    pub(crate) fn end(self) {
        let cur = self.bf.offset.load(Ordering::Relaxed);
        self.bf
            .offset
            .store(cur ^ self.bf.buf_size, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bfreg is made only where its whole register fits its page,
    /// aligned, so rings store without a check; its rings alternate
    /// halves and land where rdma-core's would.
    #[test]
    fn a_bfreg_is_made_only_inside_its_page() {
        let page = Arc::new(UarPage::anonymous(4096));
        let make = |reg, half| Bfreg::new(page.clone(), reg, half, false, 0).is_some();
        assert!(make(0x800, 256), "rdma-core's first bfreg of a sub-UAR");
        assert!(make(0xa00, 256), "its second");
        assert!(make(0xe00, 256), "both halves end at the page's end");
        assert!(!make(0xf00, 256), "the second half past the page");
        assert!(!make(0x820, 256), "not 64-aligned");
        assert!(!make(0x800, 100), "halves not a multiple of 64");
        assert!(make(0xfc0, 0), "a doorbell-only register's 8 bytes");
        assert!(!make(4096, 0), "past the page");
        assert!(!make(usize::MAX - 63, 256), "overflow");
        let bf = Bfreg::new(page.clone(), 0xa00, 256, false, 0).unwrap();
        for (i, at) in [0xa00, 0xb00, 0xa00].into_iter().enumerate() {
            let ring = bf.begin();
            ring.doorbell([i as u8 + 1; 8]);
            ring.end();
            assert_eq!(page.load64(at), Some([i as u8 + 1; 8]), "ring {i}");
        }
    }
}
