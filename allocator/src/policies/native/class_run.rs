//! One size class of a bucketed free set (`size_buckets.rs`): its
//! blocks sorted by (size, counter, address) in one array of whole entries.
//!
//! A class holds a block or two (the classes are 3% wide), so one array,
//! whose first entry shares a cache line with its neighbour, beats the two
//! arrays of `SortedBlocks` (`sorted_blocks.rs`) that suit a large set.

use super::block_order::{Entry, Key};

/// Blocks of one class, in order.
#[derive(Debug, Clone, Default)]
pub(super) struct ClassRun {
    blocks: Vec<Entry>,
}

impl ClassRun {
    /// Number of blocks.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether block `i` has this key.
    #[inline]
    pub(super) fn has_key_at(&self, i: usize, key: Key) -> bool {
        self.blocks.get(i).is_some_and(|e| e.key() == key)
    }

    /// The first position whose key is not below `key`.
    #[inline]
    pub(super) fn position(&self, key: Key) -> usize {
        self.blocks.partition_point(|e| e.key() < key)
    }

    /// The first position whose size is at least `size`.
    #[inline]
    pub(super) fn size_position(&self, size: u64) -> usize {
        self.blocks.partition_point(|e| e.size < size)
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
        self.blocks.insert(at.min(self.blocks.len()), e);
    }

    /// Takes out block `at`.
    #[inline]
    pub(super) fn remove_at(&mut self, at: usize) {
        if at < self.blocks.len() {
            self.blocks.remove(at);
        }
    }

    /// Takes out block `from` and puts `e` at `to` (a position counted
    /// without block `from`), moving only the blocks between the two.
    #[inline]
    pub(super) fn move_to(&mut self, from: usize, to: usize, e: Entry) {
        let len = self.blocks.len();
        if from >= len || to >= len {
            return;
        }
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
    pub(super) fn range(&self, range: std::ops::Range<usize>) -> std::slice::Iter<'_, Entry> {
        let end = range.end.min(self.blocks.len());
        self.blocks
            .get(range.start.min(end)..end)
            .unwrap_or_default()
            .iter()
    }

    /// The largest size (0 when empty).
    #[inline]
    pub(super) fn max_size(&self) -> u64 {
        self.blocks.last().map_or(0, |e| e.size)
    }

    /// Every block, in order.
    pub(super) fn entries(&self) -> &[Entry] {
        &self.blocks
    }
}

impl FromIterator<Entry> for ClassRun {
    /// The blocks, which must come in order.
    fn from_iter<I: IntoIterator<Item = Entry>>(it: I) -> Self {
        ClassRun {
            blocks: it.into_iter().collect(),
        }
    }
}
