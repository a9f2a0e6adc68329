//! The free blocks of one stream of a pool, ordered by (size, segment
//! counter, address).
//!
//! The counter is PyTorch's allocation-order counter (see
//! [`Block::counter`](super::block::Block)): 0 for every block under the
//! releases that order by (size, address) alone, so that the order is then
//! exactly theirs.
//!
//! Measured on the bundled traces and the real snapshots, a stream's free
//! set almost always holds fewer than 64 blocks. At that size a sorted
//! array ([`SortedBlocks`]: a binary search over the sizes, short
//! `memmove`s per insert or remove) is the fastest form. A set that grows
//! past [`TO_BUCKETS`] blocks (long training runs pin hundreds of segments;
//! synthetic traces hold tens of thousands of holes) is spread over size
//! classes ([`SizeBuckets`]), and comes back below [`TO_ARRAY`]. Both hold
//! the same order, so every lookup answers the same whichever is in use.

use std::cell::Cell;

use super::block_order::landing;
pub(super) use super::block_order::{Entry, Key};
use super::size_buckets::{ClassIter, SizeBuckets};
use super::sorted_blocks::{Blocks, SortedBlocks};

/// Above this many blocks the set is spread over size classes.
const TO_BUCKETS: usize = 64;
/// Below this many blocks a bucketed set becomes an array again (well
/// under [`TO_BUCKETS`], so that a set hovering at the limit does not flip
/// often).
const TO_ARRAY: usize = 16;

/// Where `key` is in the array (block `hint` tried first), or where it
/// would go.
#[inline]
fn find_at_hint(v: &SortedBlocks, hint: usize, key: Key) -> Result<usize, usize> {
    if v.has_key_at(hint, key) {
        Ok(hint)
    } else {
        v.find(key)
    }
}

/// A set of free blocks ordered by (size, counter, address).
#[derive(Debug, Clone, Default)]
pub(super) struct FreeSet {
    repr: Repr,
    /// Where [`FreeSet::first_from`] last found a block in the array: the block
    /// that `malloc` takes next, so that removing it needs no search.
    hint: Cell<usize>,
}

#[derive(Debug, Clone)]
enum Repr {
    /// Sorted by key; at most [`TO_BUCKETS`] entries.
    Array(SortedBlocks),
    /// By size class.
    Buckets(Box<SizeBuckets>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Array(SortedBlocks::default())
    }
}

/// Blocks of a [`FreeSet`] in order, from either representation.
pub(super) enum Iter<'a> {
    /// From the array.
    Array(Blocks<'a>),
    /// From the size classes.
    Buckets(ClassIter<'a>),
}

impl Iterator for Iter<'_> {
    type Item = Entry;

    #[inline]
    fn next(&mut self) -> Option<Entry> {
        match self {
            Iter::Array(it) => it.next(),
            Iter::Buckets(it) => it.next(),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Entry> {
        match self {
            Iter::Array(it) => it.next_back(),
            Iter::Buckets(it) => it.next_back(),
        }
    }
}

impl FreeSet {
    /// Number of blocks.
    pub(super) fn len(&self) -> usize {
        match &self.repr {
            Repr::Array(v) => v.len(),
            Repr::Buckets(b) => b.len(),
        }
    }

    /// Adds a block; `false` if a block with its size and address is
    /// already there (the set is unchanged).
    #[inline]
    pub(super) fn insert(&mut self, e: Entry) -> bool {
        match &mut self.repr {
            Repr::Array(v) => match v.find(e.key()) {
                Ok(_) => return false,
                Err(at) => v.insert_at(at, e),
            },
            // As the array does: a present key keeps its block.
            Repr::Buckets(b) => return b.insert(e),
        }
        if self.len() > TO_BUCKETS {
            self.become_buckets();
        }
        true
    }

    /// Removes the block with this key; `false` if absent.
    #[inline]
    pub(super) fn remove(&mut self, key: Key) -> bool {
        let hint = self.hint.get();
        match &mut self.repr {
            Repr::Array(v) => match find_at_hint(v, hint, key) {
                Ok(at) => {
                    v.remove_at(at);
                    true
                }
                Err(_) => false,
            },
            Repr::Buckets(b) => {
                let removed = b.remove(key);
                if b.len() < TO_ARRAY {
                    self.become_array();
                }
                removed
            }
        }
    }

    /// Replaces the block `old` by `new` in one move (a split leaves the
    /// remainder of a block where the block was; the entries between the
    /// two places shift by one, instead of the whole tail twice). `false`,
    /// with the set unchanged, if `old` is absent or `new`'s key is already
    /// present.
    pub(super) fn replace(&mut self, old: Key, new: Entry) -> bool {
        let key = new.key();
        let hint = self.hint.get();
        match &mut self.repr {
            Repr::Array(v) => {
                let Ok(from) = find_at_hint(v, hint, old) else {
                    return false;
                };
                let Some(to) = landing(from, old, key, || v.find(key)) else {
                    return false;
                };
                v.move_to(from, to, new);
                true
            }
            Repr::Buckets(b) => b.replace(old, new),
        }
    }

    /// Blocks at or after `key`, in order.
    #[cfg(test)]
    pub(super) fn from(&self, key: Key) -> Iter<'_> {
        match &self.repr {
            Repr::Array(v) => {
                let at = v.position(key);
                self.hint.set(at);
                Iter::Array(v.range(at..v.len()))
            }
            Repr::Buckets(b) => Iter::Buckets(b.from(key)),
        }
    }

    /// The first block at or after `key` (`from(key).next()`).
    #[inline]
    pub(super) fn first_from(&self, key: Key) -> Option<Entry> {
        match &self.repr {
            Repr::Array(v) => {
                let at = v.position(key);
                self.hint.set(at);
                v.get(at)
            }
            Repr::Buckets(b) => b.first_from(key),
        }
    }

    /// The block right after `key` when it has `key`'s size (`after(key)`'s
    /// first, when of that size).
    #[inline]
    pub(super) fn next_of_size(&self, key: Key) -> Option<Entry> {
        match &self.repr {
            Repr::Array(v) => {
                let at = match find_at_hint(v, self.hint.get(), key) {
                    Ok(at) => at + 1,
                    Err(at) => at,
                };
                v.get(at).filter(|e| e.size == key.size())
            }
            Repr::Buckets(b) => b.next_of_size(key),
        }
    }

    /// Blocks strictly after `key`, in order.
    pub(super) fn after(&self, key: Key) -> Iter<'_> {
        match &self.repr {
            Repr::Array(v) => {
                // Most often asked right after `from` found `key`.
                let at = match find_at_hint(v, self.hint.get(), key) {
                    Ok(at) => at + 1,
                    Err(at) => at,
                };
                Iter::Array(v.range(at..v.len()))
            }
            Repr::Buckets(b) => Iter::Buckets(b.after(key)),
        }
    }

    /// Blocks smaller than `size`, in order (reverse it for largest first).
    pub(super) fn below_size(&self, size: u64) -> Iter<'_> {
        match &self.repr {
            Repr::Array(v) => Iter::Array(v.range(0..v.size_position(size))),
            Repr::Buckets(b) => Iter::Buckets(b.below_size(size)),
        }
    }

    /// Every block, in order.
    pub(super) fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Array(v) => Iter::Array(v.range(0..v.len())),
            Repr::Buckets(b) => Iter::Buckets(b.iter()),
        }
    }

    /// The largest block's size (0 when empty).
    #[inline]
    pub(super) fn max_size(&self) -> u64 {
        match &self.repr {
            Repr::Array(v) => v.max_size(),
            Repr::Buckets(b) => b.max_size(),
        }
    }

    #[cold]
    fn become_buckets(&mut self) {
        if let Repr::Array(v) = &self.repr {
            let b = v.range(0..v.len()).collect();
            self.repr = Repr::Buckets(Box::new(b));
        }
    }

    #[cold]
    fn become_array(&mut self) {
        if let Repr::Buckets(b) = &self.repr {
            let v = b.iter().collect();
            self.repr = Repr::Array(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type Model = BTreeMap<(u64, u64, u64), u32>;

    fn keys(it: impl Iterator<Item = Entry>) -> Vec<(u64, u64, u64)> {
        it.map(|e| (e.size, e.counter, e.ptr)).collect()
    }

    fn idxs(set: &FreeSet) -> Vec<u32> {
        set.iter().map(|e| e.idx).collect()
    }

    fn check(set: &FreeSet, model: &Model, probe: u64) {
        let all: Vec<_> = model.keys().copied().collect();
        assert_eq!(keys(set.iter()), all);
        assert_eq!(idxs(set), model.values().copied().collect::<Vec<_>>());
        assert_eq!(set.len(), model.len());
        // A small size, and one of the set's own (any class).
        let own = all
            .get(probe as usize / 40 % all.len().max(1))
            .map_or(0, |k| k.0);
        for size in [probe % 40 * 512, own] {
            let from: Vec<_> = model.range((size, 0, 0)..).map(|(k, _)| *k).collect();
            assert_eq!(keys(set.from(Key::at_least(size))), from);
            let first = set.first_from(Key::at_least(size)).map(|e| e.key());
            assert_eq!(first, from.first().map(|&(s, c, p)| Key::new(s, c, p)));
            let below: Vec<_> = model.range(..(size, 0, 0)).map(|(k, _)| *k).collect();
            assert_eq!(keys(set.below_size(size)), below);
            let mut desc = keys(set.below_size(size).rev());
            desc.reverse();
            assert_eq!(desc, below);
        }
        // Both ends at once: alternate front and back.
        let mut it = set.iter();
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            match (it.next(), it.next_back()) {
                (Some(a), Some(b)) => {
                    front.push((a.size, a.counter, a.ptr));
                    back.push((b.size, b.counter, b.ptr));
                }
                (Some(a), None) => front.push((a.size, a.counter, a.ptr)),
                (None, _) => break,
            }
        }
        back.reverse();
        front.extend(back);
        assert_eq!(front, all);
        if let Some(&(s, c, p)) = all.get(probe as usize % all.len().max(1)) {
            let after: Vec<_> = model
                .range((
                    std::ops::Bound::Excluded((s, c, p)),
                    std::ops::Bound::Unbounded,
                ))
                .map(|(k, _)| *k)
                .collect();
            assert_eq!(keys(set.after(Key::new(s, c, p))), after);
            let same = after.first().filter(|k| k.0 == s).copied();
            let next = set.next_of_size(Key::new(s, c, p));
            assert_eq!(next.map(|e| (e.size, e.counter, e.ptr)), same);
        }
        assert_eq!(set.max_size(), model.keys().last().map_or(0, |k| k.0));
    }

    /// Runs a deterministic mix of inserts, removes and replaces (found
    /// the way `malloc` finds a block) against a model: sizes from
    /// `size_of`, growing for the first half of `rounds` and shrinking in
    /// the second, every query checked after every step. Returns whether
    /// the set was ever bucketed, and whether any class was a B-tree.
    fn agrees_with_a_model(rounds: u32, size_of: impl Fn(u64) -> u64) -> (bool, bool) {
        let mut set = FreeSet::default();
        let mut model = Model::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut saw_buckets, mut saw_tree) = (false, false);
        for round in 0..rounds {
            let r = next();
            let size = size_of(r);
            let ptr = (r >> 20) % 4096 * 512;
            let counter = (r >> 50) % 3;
            let add = if round < rounds / 2 {
                r % 4 != 0
            } else {
                r % 8 == 0
            };
            if r % 5 == 0 && !model.is_empty() {
                let first = set
                    .first_from(Key::at_least(size))
                    .or_else(|| set.iter().next());
                if let Some(old) = first {
                    let new = Entry::of(size / 2 + 512, old.counter, old.ptr + 256, round);
                    let clash = model.contains_key(&(new.size, new.counter, new.ptr))
                        && new.key() != old.key();
                    assert_eq!(set.replace(old.key(), new), !clash);
                    if !clash {
                        model.remove(&(old.size, old.counter, old.ptr));
                        model.insert((new.size, new.counter, new.ptr), round);
                    }
                }
            } else if add {
                let fresh = !model.contains_key(&(size, counter, ptr));
                assert_eq!(set.insert(Entry::of(size, counter, ptr, round)), fresh);
                model.entry((size, counter, ptr)).or_insert(round);
            } else if let Some((&(s, c, p), _)) =
                model.iter().nth((r >> 40) as usize % model.len().max(1))
            {
                assert!(set.remove(Key::new(s, c, p)));
                model.remove(&(s, c, p));
                assert!(!set.remove(Key::new(s, c, p)));
            }
            if let Repr::Buckets(b) = &set.repr {
                saw_buckets = true;
                saw_tree |= b.has_tree_class();
            }
            check(&set, &model, r >> 8);
        }
        assert!(
            matches!(set.repr, Repr::Array(_)),
            "the set never shrank back"
        );
        (saw_buckets, saw_tree)
    }

    /// Both representations answer every query alike, through growth past
    /// the bucket limit and shrinking back; blocks of one size order by
    /// counter before address.
    #[test]
    fn array_and_buckets_agree() {
        let (buckets, _) = agrees_with_a_model(3000, |r| (r % 40 + 1) * 512);
        assert!(buckets, "the set never grew into size classes");
    }

    /// A class crowded with blocks of two sizes becomes a B-tree and
    /// comes back, answering alike all along.
    #[test]
    fn crowded_classes_agree() {
        let (buckets, tree) =
            agrees_with_a_model(4000, |r| if r % 3 == 0 { 1024 } else { 1025 } * 512);
        assert!(buckets && tree, "no class grew into a B-tree");
    }

    /// Sizes in every class: the classes in turn are the set in order.
    #[test]
    fn classes_of_every_size_agree() {
        let (buckets, _) =
            agrees_with_a_model(3000, |r| (r >> 3) % (1 << (r % 45)) / 512 * 512 + 512);
        assert!(buckets);
    }

    #[test]
    fn after_the_largest_key_is_empty() {
        let top = Key::new(u64::MAX, u64::MAX, u64::MAX);
        let entry = Entry::of(u64::MAX, u64::MAX, u64::MAX, 1);
        for repr in [
            Repr::Array([entry].into_iter().collect()),
            Repr::Buckets(Box::new([entry].into_iter().collect())),
        ] {
            let set = FreeSet {
                repr,
                hint: Cell::new(0),
            };
            assert_eq!(set.after(top).count(), 0);
            assert_eq!(set.iter().count(), 1);
            assert_eq!(set.below_size(u64::MAX).count(), 0);
            assert_eq!(set.max_size(), u64::MAX);
        }
    }
}
