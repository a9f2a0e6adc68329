//! One size class of a bucketed free set (`size_buckets.rs`): its
//! blocks sorted by (size, counter, address) in one array of whole entries.
//!
//! A class holds a block or two (the classes are 3% wide), so one array,
//! whose first entry shares a cache line with its neighbour, beats the two
//! arrays of `SortedBlocks` (`sorted_blocks.rs`) that suit a large set.
//!
//! The array holds the blocks last first. `malloc` takes a class's first
//! block, and a freed block of the class's oldest segment comes back first
//! too: in a long class of one size (hundreds of equal activations in
//! training), both are then at the array's end, where they move nothing.
//! Positions in this module's interface count in the set's order, from the
//! first block.

use super::block_order::{Entry, Key};

/// Blocks of one class; `blocks` holds them last first.
#[derive(Debug, Clone, Default)]
pub(super) struct ClassRun {
    blocks: Vec<Entry>,
}

/// A class's blocks in order (its array read backwards).
pub(super) type InOrder<'a> = std::iter::Rev<std::slice::Iter<'a, Entry>>;

impl ClassRun {
    /// Number of blocks.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.blocks.len()
    }

    /// The array index of position `i` (`None` past the last block).
    #[inline]
    fn slot(&self, i: usize) -> Option<usize> {
        let len = self.blocks.len();
        // (`i` may be `usize::MAX`: the size classes' empty hint.)
        (i < len).then(|| len - 1 - i)
    }

    /// Block `i`, if there is one.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<Entry> {
        self.slot(i).and_then(|s| self.blocks.get(s)).copied()
    }

    /// Whether block `i` has this key.
    #[inline]
    pub(super) fn has_key_at(&self, i: usize, key: Key) -> bool {
        self.slot(i)
            .and_then(|s| self.blocks.get(s))
            .is_some_and(|e| e.key() == key)
    }

    /// The first position whose key is not below `key`.
    #[inline]
    pub(super) fn position(&self, key: Key) -> usize {
        // A block that comes back first (the usual case in a long class)
        // is placed without a search.
        if self.blocks.last().is_none_or(|e| key <= e.key()) {
            return 0;
        }
        // The blocks below `key` are the array's tail.
        self.blocks.len() - self.blocks.partition_point(|e| e.key() >= key)
    }

    /// The first position whose size is at least `size`.
    #[inline]
    pub(super) fn size_position(&self, size: u64) -> usize {
        if self.blocks.last().is_none_or(|e| size <= e.size) {
            return 0;
        }
        self.blocks.len() - self.blocks.partition_point(|e| e.size >= size)
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
        let len = self.blocks.len();
        self.blocks.insert(len - at.min(len), e);
    }

    /// Takes out block `at`.
    #[inline]
    pub(super) fn remove_at(&mut self, at: usize) {
        if let Some(s) = self.slot(at) {
            self.blocks.remove(s);
        }
    }

    /// Takes out block `from` and puts `e` at `to` (a position counted
    /// without block `from`), moving only the blocks between the two.
    #[inline]
    pub(super) fn move_to(&mut self, from: usize, to: usize, e: Entry) {
        let (Some(from), Some(to)) = (self.slot(from), self.slot(to)) else {
            return;
        };
        if to < from {
            self.blocks.copy_within(to..from, to + 1);
        } else if to > from {
            self.blocks.copy_within(from + 1..=to, from);
        }
        if let Some(slot) = self.blocks.get_mut(to) {
            *slot = e;
        }
    }

    /// Blocks `range`, in order either way.
    #[inline]
    pub(super) fn range(&self, range: std::ops::Range<usize>) -> InOrder<'_> {
        let len = self.blocks.len();
        let end = range.end.min(len);
        let start = range.start.min(end);
        self.blocks
            .get(len - end..len - start)
            .unwrap_or_default()
            .iter()
            .rev()
    }

    /// The largest size (0 when empty).
    #[inline]
    pub(super) fn max_size(&self) -> u64 {
        self.blocks.first().map_or(0, |e| e.size)
    }

    /// Every block, in order.
    pub(super) fn entries(&self) -> InOrder<'_> {
        self.blocks.iter().rev()
    }
}

impl FromIterator<Entry> for ClassRun {
    /// The blocks, which must come in order.
    fn from_iter<I: IntoIterator<Item = Entry>>(it: I) -> Self {
        let mut blocks: Vec<Entry> = it.into_iter().collect();
        blocks.reverse();
        ClassRun { blocks }
    }
}
