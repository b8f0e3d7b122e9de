//! The bookkeeping slots of a ring (a send queue's WQEs, a receive queue's
//! or an SRQ's receives), indexed by a counter masked into the ring.

/// `mask + 1` slots, as a poller indexes them: a counter masked with
/// `mask`. Through a slice of exactly `mask + 1` slots the compiler sees
/// that every masked counter is in bounds and checks none (with the
/// slice's own `len - 1` as the mask it narrows the mask to 32 bits and
/// keeps the check). Made once per run of completions.
#[derive(Debug)]
pub(crate) struct MaskedSlots<'a, T> {
    slots: &'a [T],
    mask: u32,
}

// Not derived: a derive would require `T: Clone` / `T: Copy`.
impl<T> Clone for MaskedSlots<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for MaskedSlots<'_, T> {}

impl<'a, T> MaskedSlots<'a, T> {
    /// The first `mask + 1` of `slots`; `None` if there are fewer.
    #[inline(always)]
    pub(crate) fn new(slots: &'a [T], mask: u32) -> Option<Self> {
        Some(MaskedSlots {
            slots: slots.get(..mask as usize + 1)?,
            mask,
        })
    }

    /// The slot of counter `n` (`None` does not happen: every masked
    /// counter indexes a slot).
    #[inline(always)]
    pub(crate) fn at(self, n: u32) -> Option<&'a T> {
        self.slots.get((n & self.mask) as usize)
    }

    /// The mask counters are indexed with.
    #[inline(always)]
    pub(crate) fn mask(self) -> u32 {
        self.mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_wrap_onto_the_first_mask_plus_one_slots() {
        let v = [10, 11, 12, 13, 14];
        let s = MaskedSlots::new(&v, 3).unwrap();
        assert_eq!(
            [0, 3, 4, 7, 9].map(|n| *s.at(n).unwrap()),
            [10, 13, 10, 13, 11]
        );
        assert!(MaskedSlots::new(&v, 7).is_none());
    }
}
