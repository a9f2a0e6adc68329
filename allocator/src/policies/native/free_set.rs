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
//! At that size a sorted array ([`SortedBlocks`]: a binary search over the
//! sizes, short `memmove`s per insert or remove) beats a B-tree by a wide
//! margin; a set that grows past [`TO_TREE`] blocks (synthetic traces can
//! hold tens of thousands) moves into a B-tree and comes back below
//! [`TO_ARRAY`]. Both hold the same order, so every lookup answers the
//! same whichever is in use.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::collections::btree_map;

pub(super) use super::block_order::{Entry, Key};
use super::sorted_blocks::{Blocks, SortedBlocks};

/// Above this many blocks the set becomes a B-tree.
const TO_TREE: usize = 512;
/// Below this many blocks a B-tree set becomes an array again (well under
/// [`TO_TREE`], so that a set hovering at the limit does not flip often).
const TO_ARRAY: usize = 128;

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

#[inline]
fn unpack((k, &idx): (&Key, &u32)) -> Entry {
    Entry {
        size: k.size(),
        counter: k.counter(),
        ptr: k.ptr(),
        idx,
    }
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
    Array(SortedBlocks),
    /// Key → arena index.
    Tree(BTreeMap<Key, u32>),
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
    /// From the B-tree.
    Tree(btree_map::Range<'a, Key, u32>),
}

impl Iterator for Iter<'_> {
    type Item = Entry;

    #[inline]
    fn next(&mut self) -> Option<Entry> {
        match self {
            Iter::Array(it) => it.next(),
            Iter::Tree(it) => it.next().map(unpack),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Entry> {
        match self {
            Iter::Array(it) => it.next_back(),
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
            Repr::Array(v) => match v.find(e.key()) {
                Ok(_) => return false,
                Err(at) => v.insert_at(at, e),
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
        let hint = self.hint.get();
        match &mut self.repr {
            Repr::Array(v) => match find_at_hint(v, hint, key) {
                Ok(at) => {
                    v.remove_at(at);
                    true
                }
                Err(_) => false,
            },
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
        let hint = self.hint.get();
        match &mut self.repr {
            Repr::Array(v) => {
                let Ok(from) = find_at_hint(v, hint, old) else {
                    return false;
                };
                let to = if key == old {
                    from
                } else {
                    match v.find(key) {
                        Ok(_) => return false,
                        // Counted without `old`, which sits before a
                        // place past it.
                        Err(at) if at > from => at - 1,
                        Err(at) => at,
                    }
                };
                v.move_to(from, to, new);
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
                let at = v.position(key);
                self.hint.set(at);
                Iter::Array(v.range(at..v.len()))
            }
            Repr::Tree(t) => Iter::Tree(t.range(key..)),
        }
    }

    /// Blocks strictly after `key`, in order.
    pub(super) fn after(&self, key: Key) -> Iter<'_> {
        use std::ops::Bound::{Excluded, Unbounded};
        match &self.repr {
            Repr::Array(v) => {
                // Most often asked right after `from` found `key`.
                let at = match find_at_hint(v, self.hint.get(), key) {
                    Ok(at) => at + 1,
                    Err(at) => at,
                };
                Iter::Array(v.range(at..v.len()))
            }
            Repr::Tree(t) => Iter::Tree(t.range((Excluded(key), Unbounded))),
        }
    }

    /// Blocks smaller than `size`, in order (reverse it for largest first).
    pub(super) fn below_size(&self, size: u64) -> Iter<'_> {
        match &self.repr {
            Repr::Array(v) => Iter::Array(v.range(0..v.size_position(size))),
            Repr::Tree(t) => Iter::Tree(t.range(..Key::at_least(size))),
        }
    }

    /// Every block, in order.
    pub(super) fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Array(v) => Iter::Array(v.range(0..v.len())),
            Repr::Tree(t) => Iter::Tree(t.range(..)),
        }
    }

    /// The largest block's size (0 when empty).
    #[inline]
    pub(super) fn max_size(&self) -> u64 {
        match &self.repr {
            Repr::Array(v) => v.max_size(),
            Repr::Tree(t) => t.last_key_value().map_or(0, |(k, _)| k.size()),
        }
    }

    #[cold]
    fn become_tree(&mut self) {
        if let Repr::Array(v) = &self.repr {
            let t = v.range(0..v.len()).map(|e| (e.key(), e.idx)).collect();
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
            repr: Repr::Array(
                [Entry::of(u64::MAX, u64::MAX, u64::MAX, 1)]
                    .into_iter()
                    .collect(),
            ),
            hint: Cell::new(0),
        };
        assert_eq!(set.after(top).count(), 0);
    }
}
