//! The array form of a stream's free set: blocks sorted by (size, counter,
//! address), with the sizes in one array and the rest of each block in
//! another.
//!
//! Nearly every lookup is decided by the size alone: `malloc` asks for the
//! first block of at least a size, and a block's place is found by its size,
//! only blocks of the same size comparing further. A binary search over
//! sizes packed 8 bytes apart touches a quarter of the cache lines that one
//! over whole 32-byte entries does (measured in docs/perf-log.md, *Against
//! DynaPipe's allocator model*, with the count of smaller sizes that was
//! tried instead of halving and was slower).

use super::block_order::{Entry, Key};

/// What a block holds besides its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tail {
    counter: u64,
    ptr: u64,
    idx: u32,
}

impl Tail {
    /// The order among blocks of one size.
    #[inline]
    fn order(&self) -> (u64, u64) {
        (self.counter, self.ptr)
    }
}

/// Free blocks sorted by (size, counter, address); `sizes[i]` and
/// `tails[i]` are block `i`.
#[derive(Debug, Clone, Default)]
pub(super) struct SortedBlocks {
    sizes: Vec<u64>,
    tails: Vec<Tail>,
}

/// The first position in `sizes` (sorted) whose size is at least `size`.
#[inline]
fn first_at_least(sizes: &[u64], size: u64) -> usize {
    sizes.partition_point(|&s| s < size)
}

impl SortedBlocks {
    /// Number of blocks.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Block `i`, if there is one.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<Entry> {
        let (&size, t) = (self.sizes.get(i)?, self.tails.get(i)?);
        Some(Entry {
            size,
            counter: t.counter,
            ptr: t.ptr,
            idx: t.idx,
        })
    }

    /// Whether block `i` has this key.
    #[inline]
    pub(super) fn has_key_at(&self, i: usize, key: Key) -> bool {
        self.get(i).is_some_and(|e| e.key() == key)
    }

    /// The first position whose key is not below `key`.
    #[inline]
    pub(super) fn position(&self, key: Key) -> usize {
        let size = key.size();
        let mut at = first_at_least(&self.sizes, size);
        let rest = (key.counter(), key.ptr());
        // Only blocks of the same size compare further.
        while self.sizes.get(at) == Some(&size)
            && self.tails.get(at).is_some_and(|t| t.order() < rest)
        {
            at += 1;
        }
        at
    }

    /// The first position whose size is at least `size`.
    #[inline]
    pub(super) fn size_position(&self, size: u64) -> usize {
        first_at_least(&self.sizes, size)
    }

    /// Where `key` is, or where it would go.
    #[inline]
    pub(super) fn find(&self, key: Key) -> Result<usize, usize> {
        let at = self.position(key);
        if self.has_key_at(at, key) {
            Ok(at)
        } else {
            Err(at)
        }
    }

    /// Puts `e` at position `at` (which keeps the order).
    #[inline]
    pub(super) fn insert_at(&mut self, at: usize, e: Entry) {
        self.sizes.insert(at, e.size);
        self.tails.insert(at, tail(e));
    }

    /// Takes out block `at`.
    #[inline]
    pub(super) fn remove_at(&mut self, at: usize) {
        if at < self.len() {
            self.sizes.remove(at);
            self.tails.remove(at);
        }
    }

    /// Takes out block `from` and puts `e` at `to` (a position counted
    /// without block `from`), moving only the blocks between the two.
    #[inline]
    pub(super) fn move_to(&mut self, from: usize, to: usize, e: Entry) {
        let len = self.len();
        if from >= len || to >= len {
            return;
        }
        // A block that keeps its place (a split's remainder that still
        // sorts after its neighbour) moves nothing.
        if to < from {
            self.sizes.copy_within(to..from, to + 1);
            self.tails.copy_within(to..from, to + 1);
        } else if to > from {
            self.sizes.copy_within(from + 1..=to, from);
            self.tails.copy_within(from + 1..=to, from);
        }
        if let (Some(s), Some(t)) = (self.sizes.get_mut(to), self.tails.get_mut(to)) {
            *s = e.size;
            *t = tail(e);
        }
    }

    /// Blocks `range`, in order.
    #[inline]
    pub(super) fn range(&self, range: std::ops::Range<usize>) -> Blocks<'_> {
        let end = range.end.min(self.len());
        Blocks {
            set: self,
            next: range.start.min(end),
            end,
        }
    }

    /// The largest size (0 when empty).
    #[inline]
    pub(super) fn max_size(&self) -> u64 {
        self.sizes.last().copied().unwrap_or(0)
    }
}

impl FromIterator<Entry> for SortedBlocks {
    /// The blocks, which must come in order.
    fn from_iter<I: IntoIterator<Item = Entry>>(it: I) -> Self {
        let (sizes, tails) = it.into_iter().map(|e| (e.size, tail(e))).unzip();
        SortedBlocks { sizes, tails }
    }
}

#[inline]
fn tail(e: Entry) -> Tail {
    Tail {
        counter: e.counter,
        ptr: e.ptr,
        idx: e.idx,
    }
}

/// A run of a [`SortedBlocks`]' blocks, in order either way.
#[derive(Debug, Clone)]
pub(super) struct Blocks<'a> {
    set: &'a SortedBlocks,
    next: usize,
    end: usize,
}

impl Iterator for Blocks<'_> {
    type Item = Entry;

    #[inline]
    fn next(&mut self) -> Option<Entry> {
        if self.next >= self.end {
            return None;
        }
        let e = self.set.get(self.next);
        self.next += 1;
        e
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.next;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Blocks<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Entry> {
        if self.next >= self.end {
            return None;
        }
        self.end -= 1;
        self.set.get(self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search by size, then by the rest among blocks of one size,
    /// places every key where a binary search over whole keys does, for
    /// runs of equal sizes and keys between them.
    #[test]
    fn positions_equal_a_binary_search() {
        for n in [0usize, 1, 2, 5, 31, 63, 64, 65, 100, 200] {
            let v: Vec<Entry> = (0..n as u64)
                .map(|i| Entry::of(10 * (i / 3), i % 3 / 2, i, i as u32))
                .collect();
            let set: SortedBlocks = v.iter().copied().collect();
            for size in 0..(10 * n as u64 / 3 + 12) {
                for counter in [0, 1, 2] {
                    for ptr in [0, 1, 7, 99, 500] {
                        let key = Key::new(size, counter, ptr);
                        let want = v.partition_point(|x| x.key() < key);
                        assert_eq!(set.position(key), want, "n {n} key {size}/{counter}/{ptr}");
                    }
                }
                let want = v.partition_point(|x| x.size < size);
                assert_eq!(set.size_position(size), want, "n {n} size {size}");
            }
        }
    }

    /// A move puts the entry where a remove and an insert would.
    #[test]
    fn moves_equal_remove_then_insert() {
        let v: Vec<Entry> = (0..12u64)
            .map(|i| Entry::of(i * 10, 0, i, i as u32))
            .collect();
        for from in 0..12 {
            for to in 0..11 {
                let mut moved: SortedBlocks = v.iter().copied().collect();
                let mut model = v.clone();
                let new = Entry::of(1000, 0, 0, 99);
                moved.move_to(from, to, new);
                model.remove(from);
                model.insert(to, new);
                assert_eq!(moved.range(0..12).collect::<Vec<_>>(), model);
            }
        }
    }

    /// Inserts and removes at every place, moving few or many blocks,
    /// give what a vector's do.
    #[test]
    fn inserts_and_removes_equal_a_vector() {
        for n in 0..12usize {
            let v: Vec<Entry> = (0..n as u64)
                .map(|i| Entry::of(i * 10, 0, i, i as u32))
                .collect();
            for at in 0..=n {
                let mut set: SortedBlocks = v.iter().copied().collect();
                let mut model = v.clone();
                let new = Entry::of((at as u64 * 10).saturating_sub(5), 0, 0, 99);
                set.insert_at(at, new);
                model.insert(at, new);
                assert_eq!(set.range(0..n + 1).collect::<Vec<_>>(), model);
                set.remove_at(at);
                model.remove(at);
                assert_eq!(set.range(0..n).collect::<Vec<_>>(), model);
                if at < n {
                    set.remove_at(at);
                    model.remove(at);
                    assert_eq!(set.range(0..n).collect::<Vec<_>>(), model);
                }
            }
        }
    }

    #[test]
    fn ranges_run_both_ways() {
        let set: SortedBlocks = (0..5u64).map(|i| Entry::of(i, 0, i, i as u32)).collect();
        let fwd: Vec<u64> = set.range(1..4).map(|x| x.size).collect();
        let back: Vec<u64> = set.range(1..4).rev().map(|x| x.size).collect();
        assert_eq!(fwd, [1, 2, 3]);
        assert_eq!(back, [3, 2, 1]);
        assert_eq!(set.range(4..99).count(), 1);
        let (start, end) = (9, 3);
        assert_eq!(
            set.range(start..end).count(),
            0,
            "a range that ends before it starts"
        );
    }
}
