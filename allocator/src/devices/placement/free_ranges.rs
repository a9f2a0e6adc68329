//! A set of free address ranges, indexed by start and by length, for the
//! driver model's regions (their free gaps) and for the address space
//! (its holes). Every query the model asks is a few tree lookups per
//! distinct range length, not a walk over every range.

use std::collections::{BTreeMap, BTreeSet};

/// Disjoint, non-touching free ranges `[start, end)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct FreeRanges {
    /// start → end.
    by_start: BTreeMap<u64, u64>,
    /// length → starts of the ranges of that length.
    by_len: BTreeMap<u64, BTreeSet<u64>>,
}

impl FreeRanges {
    fn insert(&mut self, start: u64, end: u64) {
        if start < end {
            self.by_start.insert(start, end);
            self.by_len.entry(end - start).or_default().insert(start);
        }
    }

    fn remove(&mut self, start: u64, end: u64) {
        self.by_start.remove(&start);
        if let Some(starts) = self.by_len.get_mut(&(end - start)) {
            starts.remove(&start);
            if starts.is_empty() {
                self.by_len.remove(&(end - start));
            }
        }
    }

    /// Frees `[start, end)`, merged with the free ranges it touches. The
    /// range must not overlap a free range.
    pub(crate) fn add(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let (mut s, mut e) = (start, end);
        if let Some((&ps, &pe)) = self.by_start.range(..start).next_back() {
            if pe == start {
                self.remove(ps, pe);
                s = ps;
            }
        }
        if let Some(&ne) = self.by_start.get(&end) {
            self.remove(end, ne);
            e = ne;
        }
        self.insert(s, e);
    }

    /// The free range that holds all of `[start, end)`, if one does.
    pub(crate) fn holding(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        self.by_start
            .range(..=start)
            .next_back()
            .map(|(&s, &e)| (s, e))
            .filter(|&(_, e)| e >= end)
    }

    /// Takes `[start, end)` out of the free range `(fs, fe)` that holds it.
    pub(crate) fn take(&mut self, (fs, fe): (u64, u64), start: u64, end: u64) {
        self.remove(fs, fe);
        self.insert(fs, start);
        self.insert(end, fe);
    }

    /// Takes whatever is free in `[start, end)`.
    pub(crate) fn cut(&mut self, start: u64, end: u64) {
        let hit: Vec<(u64, u64)> = self
            .by_start
            .range(..end)
            .rev()
            .take_while(|&(_, &e)| e > start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in hit {
            self.remove(s, e);
            self.insert(s, s.max(start).min(e));
            self.insert(e.min(end).max(s), e);
        }
    }

    /// The start of the shortest free range of at least `need` bytes (the
    /// lowest of equal ones).
    pub(crate) fn best_fit(&self, need: u64) -> Option<u64> {
        self.by_len
            .range(need..)
            .next()
            .and_then(|(_, starts)| starts.first().copied())
    }

    /// The length of the longest free range (0 when none is free).
    pub(crate) fn longest(&self) -> u64 {
        self.by_len.keys().next_back().copied().unwrap_or(0)
    }

    /// The lowest address from `from` up where `size` bytes aligned to
    /// `align` fit inside one free range.
    pub(crate) fn lowest_fit_from(&self, from: u64, size: u64, align: u64) -> Option<u64> {
        let align = align.max(1);
        let fits = |s: u64, e: u64| -> Option<u64> {
            let a = s.max(from).div_ceil(align).checked_mul(align)?;
            (a.checked_add(size)? <= e).then_some(a)
        };
        // The range that holds `from` is the lowest place there is.
        if let Some((&s, &e)) = self.by_start.range(..=from).next_back() {
            if let Some(a) = fits(s, e).filter(|_| e > from) {
                return Some(a);
            }
        }
        let mut best: Option<u64> = None;
        for starts in self.by_len.range(size..).map(|(_, starts)| starts) {
            for &s in starts.range(from..) {
                if best.is_some_and(|b| s >= b) {
                    break;
                }
                let Some(&e) = self.by_start.get(&s) else {
                    continue;
                };
                if let Some(a) = fits(s, e) {
                    best = Some(best.map_or(a, |b| b.min(a)));
                    break;
                }
            }
        }
        best
    }

    /// The highest free range below `limit` longer than `len` bytes, the
    /// part of it below `limit` only.
    pub(crate) fn highest_longer_than_below(&self, len: u64, limit: u64) -> Option<(u64, u64)> {
        // The highest range that starts below the limit, cut there.
        let top = self
            .by_start
            .range(..limit)
            .next_back()
            .map(|(&s, &e)| (s, e.min(limit)));
        if let Some((s, e)) = top.filter(|&(s, e)| e - s > len) {
            return Some((s, e));
        }
        // The others end below it (they are below `top`).
        let skip = top.map(|(s, _)| s);
        let start = self
            .by_len
            .range(len.saturating_add(1)..)
            .filter_map(|(_, starts)| starts.range(..limit).rev().find(|&&s| Some(s) != skip))
            .max()
            .copied()?;
        self.by_start.get(&start).map(|&end| (start, end))
    }
}

/// Keys (region ages) by a length (their longest free gap): which key is
/// the greatest among those whose length is at least some size.
#[derive(Debug, Clone, Default)]
pub(crate) struct LongestIndex {
    by_len: BTreeMap<u64, BTreeSet<u64>>,
}

impl LongestIndex {
    /// Files `key` under `len` (nothing for 0).
    pub(crate) fn insert(&mut self, len: u64, key: u64) {
        if len > 0 {
            self.by_len.entry(len).or_default().insert(key);
        }
    }

    /// Removes `key` filed under `len`.
    pub(crate) fn remove(&mut self, len: u64, key: u64) {
        if let Some(keys) = self.by_len.get_mut(&len) {
            keys.remove(&key);
            if keys.is_empty() {
                self.by_len.remove(&len);
            }
        }
    }

    /// The greatest key filed under a length of at least `need`.
    pub(crate) fn greatest_with_at_least(&self, need: u64) -> Option<u64> {
        self.by_len
            .range(need..)
            .filter_map(|(_, keys)| keys.last().copied())
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_split_and_answer_by_length() {
        let mut f = FreeRanges::default();
        f.add(0, 10);
        f.add(20, 30);
        f.add(10, 20);
        assert_eq!(f.holding(5, 25), Some((0, 30)));
        f.take((0, 30), 4, 8);
        assert_eq!(f.best_fit(4), Some(0));
        assert_eq!(f.best_fit(5), Some(8));
        assert_eq!(f.longest(), 22);
        assert_eq!(f.highest_longer_than_below(3, u64::MAX), Some((8, 30)));
        assert_eq!(f.highest_longer_than_below(22, u64::MAX), None);
        f.cut(2, 12);
        assert_eq!(f.holding(0, 2), Some((0, 2)));
        assert_eq!(f.holding(12, 30), Some((12, 30)));
        assert_eq!(f.highest_longer_than_below(1, u64::MAX), Some((12, 30)));
        // From 13 up, 8 bytes aligned to 8: 16 (inside 12..30).
        assert_eq!(f.lowest_fit_from(13, 8, 8), Some(16));
        assert_eq!(f.lowest_fit_from(0, 2, 1), Some(0));
        assert_eq!(f.lowest_fit_from(0, 3, 1), Some(12));
        assert_eq!(f.lowest_fit_from(0, 19, 1), None);
        // Below 20: 12..30 is cut to 12..20 (8 bytes), 0..2 is the other.
        assert_eq!(f.highest_longer_than_below(7, 20), Some((12, 20)));
        assert_eq!(f.highest_longer_than_below(8, 20), None);
        assert_eq!(f.highest_longer_than_below(1, 12), Some((0, 2)));
    }

    #[test]
    fn the_greatest_key_with_enough_room() {
        let mut i = LongestIndex::default();
        i.insert(10, 1);
        i.insert(30, 2);
        i.insert(20, 3);
        assert_eq!(i.greatest_with_at_least(15), Some(3));
        assert_eq!(i.greatest_with_at_least(25), Some(2));
        i.remove(30, 2);
        assert_eq!(i.greatest_with_at_least(25), None);
        i.insert(0, 9);
        assert_eq!(i.greatest_with_at_least(0), Some(3));
    }
}
