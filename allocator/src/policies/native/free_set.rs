//! The free blocks of one stream of a pool, ordered by (size, segment
//! counter, address).
//!
//! The counter is PyTorch's allocation-order counter (see
//! [`Block::counter`](super::block::Block)): 0 for every block under the
//! releases that order by (size, address) alone, so that the order is then
//! exactly theirs.
//!
//! Measured on the bundled traces and the real snapshots, a stream's free
//! set almost always holds fewer than 64 blocks and rarely more than 256.
//! At that size a sorted array (binary search, one short `memmove` per
//! insert or remove) beats a B-tree by a wide margin; a set that grows past
//! [`TO_TREE`] blocks (synthetic traces can hold tens of thousands) moves
//! into a B-tree and comes back below [`TO_ARRAY`]. Both hold the same
//! order, so every lookup answers the same whichever is in use.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::collections::btree_map;

/// Above this many blocks the set becomes a B-tree.
const TO_TREE: usize = 512;
/// Below this many blocks a B-tree set becomes an array again (well under
/// [`TO_TREE`], so that a set hovering at the limit does not flip often).
const TO_ARRAY: usize = 128;

/// The order of a free block: size, then counter, then address. Size and
/// counter are packed in one `u128` (a `u128` comparison compiles to two
/// flag-setting instructions, where a tuple of three branches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Key {
    size_counter: u128,
    ptr: u64,
}

impl Key {
    /// The key of a block.
    #[inline]
    pub(super) fn new(size: u64, counter: u64, ptr: u64) -> Key {
        Key {
            size_counter: (u128::from(size) << 64) | u128::from(counter),
            ptr,
        }
    }

    /// The first key of blocks of `size` bytes or more.
    #[inline]
    pub(super) fn at_least(size: u64) -> Key {
        Key::new(size, 0, 0)
    }

    #[inline]
    fn size(&self) -> u64 {
        (self.size_counter >> 64) as u64
    }

    #[inline]
    fn counter(&self) -> u64 {
        self.size_counter as u64
    }
}

/// One free block: its order key and arena index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    /// Block size.
    pub size: u64,
    /// The segment's allocation-order counter (0: order by address).
    pub counter: u64,
    /// Block address.
    pub ptr: u64,
    /// Arena index of the block.
    pub idx: u32,
}

impl Entry {
    /// The order key.
    #[inline]
    pub(super) fn key(&self) -> Key {
        Key::new(self.size, self.counter, self.ptr)
    }
}

#[inline]
fn unpack((k, &idx): (&Key, &u32)) -> Entry {
    Entry {
        size: k.size(),
        counter: k.counter(),
        ptr: k.ptr,
        idx,
    }
}

/// The first position in `v[..end]` (sorted) whose key is not below `key`,
/// searched from `end` down in growing steps, then by halves: a block that
/// shrinks or grows a little stays near its old place, and finding it there
/// reads a few neighbouring entries instead of a binary search's scattered
/// ones.
#[inline]
fn place_below(v: &[Entry], end: usize, key: Key) -> usize {
    // Every entry of v[hi..end] is at or above `key`.
    let mut hi = end.min(v.len());
    let mut step = 1;
    while hi > 0 {
        let probe = hi.saturating_sub(step);
        if v.get(probe).is_none_or(|e| e.key() < key) {
            let rest = v.get(probe + 1..hi).unwrap_or(&[]);
            return probe + 1 + rest.partition_point(|e| e.key() < key);
        }
        hi = probe;
        step *= 2;
    }
    0
}

/// The first position in `v[start..]` (sorted) whose key is not below
/// `key`, searched from `start` up in growing steps, then by halves.
#[inline]
fn place_above(v: &[Entry], start: usize, key: Key) -> usize {
    // Every entry of v[start..lo] is below `key`.
    let mut lo = start.min(v.len());
    let mut step = 1;
    while lo < v.len() {
        let probe = (lo + step - 1).min(v.len() - 1);
        if v.get(probe).is_none_or(|e| e.key() >= key) {
            let rest = v.get(lo..probe).unwrap_or(&[]);
            return lo + rest.partition_point(|e| e.key() < key);
        }
        lo = probe + 1;
        step *= 2;
    }
    v.len()
}

/// A set of free blocks ordered by (size, counter, address).
#[derive(Debug, Clone, Default)]
pub(super) struct FreeSet {
    repr: Repr,
    /// Where [`FreeSet::from`] last found a block in the array: the block
    /// that `malloc` takes next, so that removing it needs no search.
    hint: Cell<usize>,
}

#[derive(Debug, Clone)]
enum Repr {
    /// Sorted by key; at most [`TO_TREE`] entries.
    Array(Vec<Entry>),
    /// Key → arena index.
    Tree(BTreeMap<Key, u32>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Array(Vec::new())
    }
}

/// Blocks of a [`FreeSet`] in order, from either representation.
pub(super) enum Iter<'a> {
    /// From the array.
    Array(std::slice::Iter<'a, Entry>),
    /// From the B-tree.
    Tree(btree_map::Range<'a, Key, u32>),
}

impl Iterator for Iter<'_> {
    type Item = Entry;

    #[inline]
    fn next(&mut self) -> Option<Entry> {
        match self {
            Iter::Array(it) => it.next().copied(),
            Iter::Tree(it) => it.next().map(unpack),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Entry> {
        match self {
            Iter::Array(it) => it.next_back().copied(),
            Iter::Tree(it) => it.next_back().map(unpack),
        }
    }
}

impl FreeSet {
    /// Number of blocks.
    pub(super) fn len(&self) -> usize {
        match &self.repr {
            Repr::Array(v) => v.len(),
            Repr::Tree(t) => t.len(),
        }
    }

    /// Adds a block; `false` if a block with its size and address is
    /// already there (the set is unchanged).
    #[inline]
    pub(super) fn insert(&mut self, e: Entry) -> bool {
        match &mut self.repr {
            Repr::Array(v) => match v.binary_search_by_key(&e.key(), Entry::key) {
                Ok(_) => return false,
                Err(at) => v.insert(at, e),
            },
            Repr::Tree(t) => {
                // As the array does: a present key keeps its block.
                return match t.entry(e.key()) {
                    btree_map::Entry::Vacant(slot) => {
                        slot.insert(e.idx);
                        true
                    }
                    btree_map::Entry::Occupied(_) => false,
                };
            }
        }
        if self.len() > TO_TREE {
            self.become_tree();
        }
        true
    }

    /// Removes the block with this key; `false` if absent.
    #[inline]
    pub(super) fn remove(&mut self, key: Key) -> bool {
        match &mut self.repr {
            Repr::Array(v) => {
                let hint = self.hint.get();
                let at = if v.get(hint).is_some_and(|e| e.key() == key) {
                    Ok(hint)
                } else {
                    v.binary_search_by_key(&key, Entry::key)
                };
                match at {
                    Ok(at) => {
                        v.remove(at);
                        true
                    }
                    Err(_) => false,
                }
            }
            Repr::Tree(t) => {
                let removed = t.remove(&key).is_some();
                if t.len() < TO_ARRAY {
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
        match &mut self.repr {
            Repr::Array(v) => {
                let hint = self.hint.get();
                let found = if v.get(hint).is_some_and(|e| e.key() == old) {
                    Ok(hint)
                } else {
                    v.binary_search_by_key(&old, Entry::key)
                };
                let Ok(r) = found else {
                    return false;
                };
                // Where `new` goes: only the side of `old` it sorts to
                // needs a search (a split's remainder sorts before it), and
                // it starts next to `old`.
                let to = match key.cmp(&old) {
                    std::cmp::Ordering::Less => place_below(v, r, key),
                    std::cmp::Ordering::Equal => r,
                    std::cmp::Ordering::Greater => place_above(v, r + 1, key),
                };
                if to != r && v.get(to).is_some_and(|e| e.key() == key) {
                    return false;
                }
                // Entries strictly between the old place and the new one
                // move one step towards the old place.
                let at = if to <= r {
                    v.copy_within(to..r, to + 1);
                    to
                } else {
                    v.copy_within(r + 1..to, r);
                    to - 1
                };
                if let Some(slot) = v.get_mut(at) {
                    *slot = new;
                }
                true
            }
            Repr::Tree(t) => {
                if !t.contains_key(&old) || (key != old && t.contains_key(&key)) {
                    return false;
                }
                t.remove(&old);
                t.insert(key, new.idx);
                true
            }
        }
    }

    /// Blocks at or after `key`, in order.
    #[inline]
    pub(super) fn from(&self, key: Key) -> Iter<'_> {
        match &self.repr {
            Repr::Array(v) => {
                let at = v.partition_point(|e| e.key() < key);
                self.hint.set(at);
                Iter::Array(v.get(at..).unwrap_or_default().iter())
            }
            Repr::Tree(t) => Iter::Tree(t.range(key..)),
        }
    }

    /// Blocks strictly after `key`, in order.
    pub(super) fn after(&self, key: Key) -> Iter<'_> {
        use std::ops::Bound::{Excluded, Unbounded};
        match &self.repr {
            Repr::Array(v) => {
                let at = v.partition_point(|e| e.key() <= key);
                Iter::Array(v.get(at..).unwrap_or_default().iter())
            }
            Repr::Tree(t) => Iter::Tree(t.range((Excluded(key), Unbounded))),
        }
    }

    /// Blocks smaller than `size`, in order (reverse it for largest first).
    pub(super) fn below_size(&self, size: u64) -> Iter<'_> {
        match &self.repr {
            Repr::Array(v) => {
                let at = v.partition_point(|e| e.size < size);
                Iter::Array(v.get(..at).unwrap_or_default().iter())
            }
            Repr::Tree(t) => Iter::Tree(t.range(..Key::at_least(size))),
        }
    }

    /// Every block, in order.
    pub(super) fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Array(v) => Iter::Array(v.iter()),
            Repr::Tree(t) => Iter::Tree(t.range(..)),
        }
    }

    /// The largest block's size (0 when empty).
    #[inline]
    pub(super) fn max_size(&self) -> u64 {
        match &self.repr {
            Repr::Array(v) => v.last().map_or(0, |e| e.size),
            Repr::Tree(t) => t.last_key_value().map_or(0, |(k, _)| k.size()),
        }
    }

    #[cold]
    fn become_tree(&mut self) {
        if let Repr::Array(v) = &self.repr {
            let t = v.iter().map(|e| (e.key(), e.idx)).collect();
            self.repr = Repr::Tree(t);
        }
    }

    #[cold]
    fn become_array(&mut self) {
        if let Repr::Tree(t) = &self.repr {
            let v = t.iter().map(unpack).collect();
            self.repr = Repr::Array(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Model = BTreeMap<(u64, u64, u64), u32>;

    fn e(size: u64, counter: u64, ptr: u64, idx: u32) -> Entry {
        Entry {
            size,
            counter,
            ptr,
            idx,
        }
    }

    /// The stepped searches find what a binary search over the same side
    /// finds, for every start, key and length up to 40.
    #[test]
    fn stepped_searches_equal_binary_search() {
        for n in 0..40u64 {
            let v: Vec<Entry> = (0..n).map(|i| e(10 * (i / 2), 0, i, i as u32)).collect();
            for start in 0..=n as usize {
                for size in 0..(10 * n / 2 + 12) {
                    for ptr in [0, 1, 99] {
                        let key = Key::new(size, 0, ptr);
                        let below = v[..start].partition_point(|x| x.key() < key);
                        assert_eq!(place_below(&v, start, key), below, "n {n} start {start}");
                        let above = start + v[start..].partition_point(|x| x.key() < key);
                        assert_eq!(place_above(&v, start, key), above, "n {n} start {start}");
                    }
                }
            }
        }
    }

    fn keys(it: Iter<'_>) -> Vec<(u64, u64, u64)> {
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
        let size = probe % 40 * 512;
        let from: Vec<_> = model.range((size, 0, 0)..).map(|(k, _)| *k).collect();
        assert_eq!(keys(set.from(Key::at_least(size))), from);
        let below: Vec<_> = model.range(..(size, 0, 0)).map(|(k, _)| *k).collect();
        assert_eq!(keys(set.below_size(size)), below);
        if let Some(&(s, c, p)) = all.get(probe as usize % all.len().max(1)) {
            let after: Vec<_> = model
                .range((
                    std::ops::Bound::Excluded((s, c, p)),
                    std::ops::Bound::Unbounded,
                ))
                .map(|(k, _)| *k)
                .collect();
            assert_eq!(keys(set.after(Key::new(s, c, p))), after);
        }
        assert_eq!(set.max_size(), model.keys().last().map_or(0, |k| k.0));
    }

    /// Both representations answer every query alike, through growth past
    /// the tree limit and shrinking back; blocks of one size order by
    /// counter before address.
    #[test]
    fn array_and_tree_agree() {
        let mut set = FreeSet::default();
        let mut model = Model::new();
        // A deterministic mix of sizes and addresses, many repeated sizes.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut saw_tree = false;
        for round in 0..3000u32 {
            let r = next();
            let size = (r % 40 + 1) * 512;
            let ptr = (r >> 20) % 2048 * 512;
            let counter = (r >> 50) % 3;
            // Grow for the first half, shrink in the second.
            let add = if round < 1500 { r % 4 != 0 } else { r % 8 == 0 };
            if r % 5 == 0 && !model.is_empty() {
                // Replace a block (found the way malloc finds one) by
                // another key.
                let first = set
                    .from(Key::at_least(size))
                    .next()
                    .or_else(|| set.iter().next());
                if let Some(old) = first {
                    let new = e(size / 2 + 512, old.counter, old.ptr + 256, round);
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
                assert_eq!(set.insert(e(size, counter, ptr, round)), fresh);
                model.entry((size, counter, ptr)).or_insert(round);
            } else if let Some((&(s, c, p), _)) =
                model.iter().nth((r >> 40) as usize % model.len().max(1))
            {
                assert!(set.remove(Key::new(s, c, p)));
                model.remove(&(s, c, p));
                assert!(!set.remove(Key::new(s, c, p)));
            }
            saw_tree |= matches!(set.repr, Repr::Tree(_));
            check(&set, &model, r >> 8);
        }
        assert!(saw_tree, "the set never grew into a tree");
        assert!(
            matches!(set.repr, Repr::Array(_)),
            "the set never shrank back"
        );
    }

    #[test]
    fn after_the_largest_key_is_empty() {
        let top = Key::new(u64::MAX, u64::MAX, u64::MAX);
        let tree = Repr::Tree([(top, 1)].into_iter().collect());
        let set = FreeSet {
            repr: tree,
            hint: Cell::new(0),
        };
        assert_eq!(set.after(top).count(), 0);
        let set = FreeSet {
            repr: Repr::Array(vec![e(u64::MAX, u64::MAX, u64::MAX, 1)]),
            hint: Cell::new(0),
        };
        assert_eq!(set.after(top).count(), 0);
    }
}
