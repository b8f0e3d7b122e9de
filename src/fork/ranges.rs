//! The bookkeeping of fork protection: how many protected ranges cover
//! each byte (page-aligned in use), so that a page is advised
//! `MADV_DONTFORK` when the first range covering it is protected and
//! `MADV_DOFORK` when the last is released, as libibverbs' reference-counted
//! red-black tree of `struct ibv_mem_node` does (`libibverbs/memory.c`
//! `ibv_madvise_range`). Pure data: the caller makes the system calls
//! (`fork.rs`), so the counting is tested without them.

use std::collections::BTreeMap;

/// A run of bytes `[start, end)` covered by `count` ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    end: usize,
    count: u32,
}

/// The covered runs, keyed by start: disjoint, each with a count of at
/// least 1, neighbours that touch with the same count merged.
#[derive(Debug, Default)]
pub(crate) struct Ranges {
    runs: BTreeMap<usize, Run>,
}

impl Ranges {
    /// No range counted.
    pub(crate) const fn new() -> Self {
        Ranges {
            runs: BTreeMap::new(),
        }
    }

    /// The parts of `[start, end)` no range covers yet: what protecting it
    /// must advise `MADV_DONTFORK`, in order.
    pub(crate) fn uncovered(&self, start: usize, end: usize) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut at = start;
        // The run that may start before `start` and reach into it.
        let first = self.runs.range(..=start).next_back().map(|(&s, r)| (s, *r));
        let later = self.runs.range(start..end).map(|(&s, r)| (s, *r));
        for (s, r) in first.into_iter().chain(later) {
            if r.end <= at {
                continue;
            }
            if s > at {
                out.push((at, s.min(end)));
            }
            at = at.max(r.end);
            if at >= end {
                break;
            }
        }
        if at < end {
            out.push((at, end));
        }
        out
    }

    /// Counts `[start, end)` once more.
    pub(crate) fn add(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        self.split_at(start);
        self.split_at(end);
        for (a, b) in self.uncovered(start, end) {
            self.runs.insert(a, Run { end: b, count: 0 });
        }
        for (_, r) in self.runs.range_mut(start..end) {
            r.count += 1;
        }
        self.merge_around(start, end);
    }

    /// Counts `[start, end)` once less; returns the parts no range covers
    /// any more, which releasing it must advise `MADV_DOFORK`, merged, in
    /// order. Bytes no range covered stay uncovered.
    pub(crate) fn remove(&mut self, start: usize, end: usize) -> Vec<(usize, usize)> {
        if start >= end {
            return Vec::new();
        }
        self.split_at(start);
        self.split_at(end);
        let mut freed: Vec<(usize, usize)> = Vec::new();
        let keys: Vec<usize> = self.runs.range(start..end).map(|(&s, _)| s).collect();
        for s in keys {
            let Some(r) = self.runs.get_mut(&s) else {
                continue;
            };
            r.count -= 1;
            if r.count == 0 {
                let end = r.end;
                self.runs.remove(&s);
                match freed.last_mut() {
                    Some(last) if last.1 == s => last.1 = end,
                    _ => freed.push((s, end)),
                }
            }
        }
        self.merge_around(start, end);
        freed
    }

    /// How many ranges cover byte `at`.
    #[cfg(test)]
    pub(crate) fn count(&self, at: usize) -> u32 {
        match self.runs.range(..=at).next_back() {
            Some((_, r)) if r.end > at => r.count,
            _ => 0,
        }
    }

    /// Whether no range is counted.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Splits the run that contains `at` (not at its start) in two.
    fn split_at(&mut self, at: usize) {
        let Some((&s, &r)) = self.runs.range(..at).next_back() else {
            return;
        };
        if r.end > at {
            self.runs.insert(s, Run { end: at, ..r });
            self.runs.insert(at, r);
        }
    }

    /// Merges touching runs with equal counts from the run before `start`
    /// to the run at `end`.
    fn merge_around(&mut self, start: usize, end: usize) {
        let from = self
            .runs
            .range(..start)
            .next_back()
            .map_or(start, |(&s, _)| s);
        let keys: Vec<usize> = self.runs.range(from..=end).map(|(&s, _)| s).collect();
        let mut prev: Option<usize> = None;
        for s in keys {
            let Some(&r) = self.runs.get(&s) else {
                continue;
            };
            if let Some(p) = prev {
                if let Some(pr) = self.runs.get_mut(&p) {
                    if pr.end == s && pr.count == r.count {
                        pr.end = r.end;
                        self.runs.remove(&s);
                        continue;
                    }
                }
            }
            prev = Some(s);
        }
    }

    /// The runs, for tests: `(start, end, count)`.
    #[cfg(test)]
    fn runs(&self) -> Vec<(usize, usize, u32)> {
        self.runs
            .iter()
            .map(|(&s, r)| (s, r.end, r.count))
            .collect()
    }
}

/// The page-aligned span of `len` bytes at `addr` with pages of `page`
/// bytes (a power of two): `[addr rounded down, addr + len rounded up)`;
/// `None` for no bytes or a span past the end of the address space.
pub(crate) fn page_span(addr: usize, len: usize, page: usize) -> Option<(usize, usize)> {
    if len == 0 || addr == 0 {
        return None;
    }
    let start = addr & !(page - 1);
    let end = addr.checked_add(len)?.checked_add(page - 1)? & !(page - 1);
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: usize = 0x1000;

    #[test]
    fn one_range_is_advised_once_and_released_once() {
        let mut r = Ranges::default();
        assert_eq!(r.uncovered(P, 3 * P), vec![(P, 3 * P)]);
        r.add(P, 3 * P);
        assert_eq!(r.runs(), vec![(P, 3 * P, 1)]);
        assert!(r.uncovered(P, 3 * P).is_empty());
        assert_eq!(r.remove(P, 3 * P), vec![(P, 3 * P)]);
        assert!(r.is_empty());
    }

    #[test]
    fn overlapping_ranges_count_each_page_and_free_only_what_no_one_covers() {
        let mut r = Ranges::default();
        r.add(P, 4 * P);
        // [3P, 6P) overlaps the last page: only [4P, 6P) is new.
        assert_eq!(r.uncovered(3 * P, 6 * P), vec![(4 * P, 6 * P)]);
        r.add(3 * P, 6 * P);
        assert_eq!(
            r.runs(),
            vec![(P, 3 * P, 1), (3 * P, 4 * P, 2), (4 * P, 6 * P, 1)]
        );
        assert_eq!((r.count(3 * P), r.count(5 * P), r.count(6 * P)), (2, 1, 0));
        // Releasing the first range frees [P, 3P) only: page 3 is still
        // the second range's.
        assert_eq!(r.remove(P, 4 * P), vec![(P, 3 * P)]);
        assert_eq!(r.runs(), vec![(3 * P, 6 * P, 1)]);
        assert_eq!(r.remove(3 * P, 6 * P), vec![(3 * P, 6 * P)]);
        assert!(r.is_empty());
    }

    #[test]
    fn the_same_range_twice_is_freed_by_the_second_release() {
        let mut r = Ranges::default();
        r.add(2 * P, 3 * P);
        assert!(r.uncovered(2 * P, 3 * P).is_empty());
        r.add(2 * P, 3 * P);
        assert_eq!(r.runs(), vec![(2 * P, 3 * P, 2)]);
        assert!(r.remove(2 * P, 3 * P).is_empty());
        assert_eq!(r.remove(2 * P, 3 * P), vec![(2 * P, 3 * P)]);
    }

    #[test]
    fn a_range_inside_another_and_gaps_between_ranges() {
        let mut r = Ranges::default();
        r.add(P, 2 * P);
        r.add(5 * P, 6 * P);
        // Spanning both and the gap: the gaps are what is new.
        assert_eq!(
            r.uncovered(0, 8 * P),
            vec![(0, P), (2 * P, 5 * P), (6 * P, 8 * P)]
        );
        r.add(0, 8 * P);
        assert_eq!(
            r.runs(),
            vec![
                (0, P, 1),
                (P, 2 * P, 2),
                (2 * P, 5 * P, 1),
                (5 * P, 6 * P, 2),
                (6 * P, 8 * P, 1)
            ]
        );
        // Releasing the wide range frees its gaps, merged where they touch.
        assert_eq!(
            r.remove(0, 8 * P),
            vec![(0, P), (2 * P, 5 * P), (6 * P, 8 * P)]
        );
        assert_eq!(r.runs(), vec![(P, 2 * P, 1), (5 * P, 6 * P, 1)]);
        // A range inside a covered one is not new; its release frees nothing.
        r.add(P, 2 * P);
        assert!(r.remove(P, 2 * P).is_empty());
        // Touching runs of one count merge back into one.
        r.add(2 * P, 5 * P);
        assert_eq!(r.runs(), vec![(P, 6 * P, 1)]);
        // Releasing what was never counted changes nothing.
        assert!(r.remove(10 * P, 12 * P).is_empty());
        assert_eq!(r.runs(), vec![(P, 6 * P, 1)]);
    }

    #[test]
    fn spans_are_rounded_out_to_whole_pages() {
        assert_eq!(page_span(P + 1, 1, P), Some((P, 2 * P)));
        assert_eq!(page_span(P, P, P), Some((P, 2 * P)));
        assert_eq!(page_span(P - 1, 2, P), Some((0, 2 * P)));
        assert_eq!(page_span(3 * P + 5, 2 * P, P), Some((3 * P, 6 * P)));
        // Huge pages: 2 MiB.
        let h = 2 << 20;
        assert_eq!(page_span(h + P, P, h), Some((h, 2 * h)));
        // Nothing to protect: no bytes, a NULL base (libibverbs returns 0
        // for both), or past the end of the address space.
        assert_eq!(page_span(P, 0, P), None);
        assert_eq!(page_span(0, P, P), None);
        assert_eq!(page_span(usize::MAX - 10, 100, P), None);
    }
}
