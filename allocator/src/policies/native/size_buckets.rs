//! The bucketed form of a large free set: blocks spread over size classes,
//! 32 to each doubling of the size, each class a short sorted run
//! ([`ClassRun`]), with a bitmap of the classes that hold blocks.
//!
//! Every class holds only sizes below those of the next class, so the
//! classes in turn are the set in order. `malloc`'s question (the first
//! block of at least a size) is answered by the class of that size, or else
//! by the first block of the next class the bitmap names: a search over a
//! few blocks instead of one over the whole set, and an insert or a remove
//! moves the rest of one class only.
//!
//! A class crowded with blocks of nearly one size (a checkerboard of equal
//! holes) would move thousands of blocks per insert or remove as a run: it
//! becomes a B-tree above [`TO_TREE`] blocks and a run again below
//! [`TO_RUN`]. A second bitmap names those classes, so that the runs'
//! path costs one bit test more.

// Indexing: every class index is `class_of`'s (below `CLASSES`, see its
// proof), or a held bit's (set only at such an index), or checked against
// `CLASSES`; `runs` has `CLASSES` entries and the bitmaps `WORDS =
// ceil(CLASSES / 64)` words.
#![allow(clippy::indexing_slicing)]

use std::cell::Cell;
use std::collections::BTreeMap;
use std::collections::btree_map;
use std::ops::Bound::{Excluded, Unbounded};

use super::block_order::{Entry, Key, landing};
use super::class_run::ClassRun;

/// Above this many blocks a class becomes a B-tree.
const TO_TREE: usize = 512;
/// Below this many blocks a B-tree class becomes a run again.
const TO_RUN: usize = 128;

/// Classes per doubling of the size, as a power of two. 32 classes
/// (classes 3% wide) measured fastest on the random shape of docs/perf-log.md
/// (8: 93.5 ms, 16: 89.2, 32: 85.5, 64: 85.9 for `1m-rand`, when a class
/// was two arrays) and equal on the others; a bucketed set then keeps
/// 1,632 runs (39 KB of headers).
const SUB_BITS: u32 = 5;
/// Classes per doubling of the size.
const SUB: u64 = 1 << SUB_BITS;
/// Sizes are counted in units of PyTorch's smallest block (512 bytes).
const UNIT_BITS: u32 = 9;
/// Number of classes: every `u64` size has one.
const CLASSES: usize = ((64 - UNIT_BITS - SUB_BITS + 1) as usize) << SUB_BITS;
/// Words of the bitmap.
const WORDS: usize = CLASSES.div_ceil(64);

/// The class of a size: sizes below `SUB` units each have their own, then
/// each doubling is cut in `SUB` equal parts. Never decreases as the size
/// grows. Below `CLASSES`: `units < 2^(64 - UNIT_BITS)`, so `top <= 63 -
/// UNIT_BITS` and the class is at most `((64 - UNIT_BITS - SUB_BITS) <<
/// SUB_BITS) | (SUB - 1) = CLASSES - 1`.
#[inline]
fn class_of(size: u64) -> usize {
    let units = size >> UNIT_BITS;
    if units < SUB {
        return units as usize;
    }
    let top = 63 - units.leading_zeros(); // >= SUB_BITS
    let part = (units >> (top - SUB_BITS)) & (SUB - 1);
    (((top - SUB_BITS + 1) as usize) << SUB_BITS) | part as usize
}

/// The first class in `lo..hi` that holds a block.
#[inline]
fn next_held(held: &[u64; WORDS], lo: usize, hi: usize) -> Option<usize> {
    let mut word = lo / 64;
    if lo >= hi || word >= WORDS {
        return None;
    }
    let mut bits = held[word] & (u64::MAX << (lo % 64));
    loop {
        if bits != 0 {
            let found = word * 64 + bits.trailing_zeros() as usize;
            return (found < hi).then_some(found);
        }
        word += 1;
        if word >= WORDS || word * 64 >= hi {
            return None;
        }
        bits = held[word];
    }
}

/// The last class in `lo..hi` that holds a block.
#[inline]
fn prev_held(held: &[u64; WORDS], lo: usize, hi: usize) -> Option<usize> {
    if hi <= lo {
        return None;
    }
    let last = hi - 1;
    let mut word = last / 64;
    let mut bits = held[word] & (u64::MAX >> (63 - last % 64));
    loop {
        if bits != 0 {
            let found = word * 64 + 63 - bits.leading_zeros() as usize;
            return (found >= lo).then_some(found);
        }
        if word == 0 || word * 64 <= lo {
            return None;
        }
        word -= 1;
        bits = held[word];
    }
}

/// Whether bit `c` is set.
#[inline]
fn has(bits: &[u64; WORDS], c: usize) -> bool {
    bits[c / 64] & (1 << (c % 64)) != 0
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

/// Free blocks by size class; see the module documentation.
#[derive(Debug, Clone)]
pub(super) struct SizeBuckets {
    len: usize,
    /// Bit `c` is set when class `c` holds a block.
    held: [u64; WORDS],
    /// Bit `c` is set when class `c` is a B-tree (its run is empty).
    crowded: [u64; WORDS],
    /// One run per class, `CLASSES` of them.
    runs: Vec<ClassRun>,
    /// The crowded classes' B-trees, by class (few: a linear search).
    trees: Vec<(usize, BTreeMap<Key, u32>)>,
    /// Where [`SizeBuckets::from`] last found a block, (class, position in
    /// its run): the block that `malloc` takes next.
    hint: Cell<(usize, usize)>,
}

impl SizeBuckets {
    /// Number of blocks.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Class `c`'s B-tree (`c` must be crowded).
    #[cold]
    #[inline(never)]
    fn tree(&self, c: usize) -> Option<&BTreeMap<Key, u32>> {
        self.trees.iter().find(|(k, _)| *k == c).map(|(_, t)| t)
    }

    /// Class `c`'s B-tree, to change (`c` must be crowded).
    fn tree_mut(&mut self, c: usize) -> Option<&mut BTreeMap<Key, u32>> {
        self.trees.iter_mut().find(|(k, _)| *k == c).map(|(_, t)| t)
    }

    /// Where `key` is in class `c`'s run (the hint tried first), or where
    /// it would go.
    #[inline]
    fn find(&self, c: usize, key: Key) -> Result<usize, usize> {
        let run = &self.runs[c];
        match self.hint.get() {
            (hc, at) if hc == c && run.has_key_at(at, key) => Ok(at),
            _ => run.find(key),
        }
    }

    /// Whether a block has this key.
    #[inline]
    fn contains(&self, key: Key) -> bool {
        let c = class_of(key.size());
        match self.crowded_tree(c) {
            Some(t) => t.contains_key(&key),
            None => self.runs[c].find(key).is_ok(),
        }
    }

    /// Class `c`'s B-tree, if it is crowded.
    #[inline]
    fn crowded_tree(&self, c: usize) -> Option<&BTreeMap<Key, u32>> {
        if has(&self.crowded, c) {
            self.tree(c)
        } else {
            None
        }
    }

    /// Adds a block; `false` if its key is already there.
    #[inline(never)]
    pub(super) fn insert(&mut self, e: Entry) -> bool {
        let c = class_of(e.size);
        if has(&self.crowded, c) {
            return self.insert_crowded(c, e);
        }
        let run = &mut self.runs[c];
        match run.find(e.key()) {
            Ok(_) => return false,
            Err(at) => run.insert_at(at, e),
        }
        if run.len() > TO_TREE {
            self.crowd(c);
        }
        self.added(c);
        true
    }

    /// Counts a block added to class `c`.
    #[inline]
    fn added(&mut self, c: usize) {
        self.held[c / 64] |= 1 << (c % 64);
        self.len += 1;
    }

    /// Counts a block taken from class `c`'s run.
    #[inline]
    fn taken_from_run(&mut self, c: usize) {
        if self.runs[c].len() == 0 {
            self.held[c / 64] &= !(1 << (c % 64));
        }
        self.len -= 1;
    }

    /// [`Self::insert`] into a crowded class.
    #[cold]
    #[inline(never)]
    fn insert_crowded(&mut self, c: usize, e: Entry) -> bool {
        let Some(t) = self.tree_mut(c) else {
            return false;
        };
        match t.entry(e.key()) {
            btree_map::Entry::Vacant(slot) => slot.insert(e.idx),
            btree_map::Entry::Occupied(_) => return false,
        };
        self.added(c);
        true
    }

    /// Removes the block with this key; `false` if absent.
    #[inline(never)]
    pub(super) fn remove(&mut self, key: Key) -> bool {
        let c = class_of(key.size());
        if has(&self.crowded, c) {
            return self.remove_crowded(c, key);
        }
        let Ok(at) = self.find(c, key) else {
            return false;
        };
        self.runs[c].remove_at(at);
        self.taken_from_run(c);
        true
    }

    /// [`Self::remove`] from a crowded class.
    #[cold]
    #[inline(never)]
    fn remove_crowded(&mut self, c: usize, key: Key) -> bool {
        let Some(t) = self.tree_mut(c) else {
            return false;
        };
        if t.remove(&key).is_none() {
            return false;
        }
        if t.len() < TO_RUN {
            self.uncrowd(c);
        }
        self.len -= 1;
        true
    }

    /// Replaces block `old` by `new`; `false`, unchanged, if `old` is
    /// absent or `new`'s key is present (and not `old`'s).
    #[inline(never)]
    pub(super) fn replace(&mut self, old: Key, new: Entry) -> bool {
        let (c, cn, key) = (class_of(old.size()), class_of(new.size), new.key());
        if has(&self.crowded, c) || has(&self.crowded, cn) {
            return self.replace_crowded(old, new);
        }
        let Ok(from) = self.find(c, old) else {
            return false;
        };
        if c != cn {
            if self.runs[cn].find(key).is_ok() {
                return false;
            }
            self.runs[c].remove_at(from);
            self.taken_from_run(c);
            return self.insert(new);
        }
        // Both in one run: only the blocks between the places move.
        let run = &mut self.runs[c];
        let Some(to) = landing(from, old, key, || run.find(key)) else {
            return false;
        };
        run.move_to(from, to, new);
        true
    }

    /// [`Self::replace`] where either class is crowded: a remove and an
    /// insert.
    #[cold]
    #[inline(never)]
    fn replace_crowded(&mut self, old: Key, new: Entry) -> bool {
        let key = new.key();
        if key != old && self.contains(key) || !self.remove(old) {
            return false;
        }
        self.insert(new)
    }

    #[cold]
    fn crowd(&mut self, c: usize) {
        let run = std::mem::take(&mut self.runs[c]);
        let tree = run.entries().map(|e| (e.key(), e.idx)).collect();
        self.trees.push((c, tree));
        self.crowded[c / 64] |= 1 << (c % 64);
    }

    #[cold]
    fn uncrowd(&mut self, c: usize) {
        if let Some(i) = self.trees.iter().position(|(k, _)| *k == c) {
            let (_, tree) = self.trees.swap_remove(i);
            self.runs[c] = tree.iter().map(unpack).collect();
        }
        self.crowded[c / 64] &= !(1 << (c % 64));
    }

    /// Every block of class `c`.
    #[inline]
    fn all_of(&self, c: usize) -> ClassRange<'_> {
        match self.crowded_tree(c) {
            Some(t) => ClassRange::Tree(t.range(..)),
            None => ClassRange::Run(self.runs[c].range(0..self.runs[c].len())),
        }
    }

    /// No blocks.
    #[inline]
    fn none(&self) -> ClassRange<'_> {
        ClassRange::Run(self.runs[0].range(0..0))
    }

    /// Blocks at or after `key`, in order.
    #[inline]
    pub(super) fn from(&self, key: Key) -> ClassIter<'_> {
        let c = class_of(key.size());
        let front = match self.crowded_tree(c) {
            Some(t) => ClassRange::Tree(t.range(key..)),
            None => {
                let run = &self.runs[c];
                let at = run.position(key);
                self.hint.set((c, at));
                ClassRange::Run(run.range(at..run.len()))
            }
        };
        self.iter_from(c, front)
    }

    /// The first block at or after `key`: `from(key).next()`, the question
    /// of every `malloc`, without building the iterator. Out of line: the
    /// small sets' path beside it in `Pool::lower_bound` stays short.
    #[inline(never)]
    pub(super) fn first_from(&self, key: Key) -> Option<Entry> {
        let c = class_of(key.size());
        if has(&self.crowded, c) {
            return self.from(key).next();
        }
        let run = &self.runs[c];
        let at = run.position(key);
        if let Some(e) = run.get(at) {
            self.hint.set((c, at));
            return Some(e);
        }
        // The next class that holds a block starts with the answer.
        let n = next_held(&self.held, c + 1, CLASSES)?;
        if has(&self.crowded, n) {
            return self.all_of(n).next();
        }
        self.hint.set((n, 0));
        self.runs[n].get(0)
    }

    /// The block right after `key` when it has `key`'s size: blocks of one
    /// size share a class, so only `key`'s class is looked at.
    #[inline(never)]
    pub(super) fn next_of_size(&self, key: Key) -> Option<Entry> {
        let c = class_of(key.size());
        let next = if has(&self.crowded, c) {
            self.after(key).next()
        } else {
            let at = match self.find(c, key) {
                Ok(at) => at + 1,
                Err(at) => at,
            };
            self.runs[c].get(at)
        };
        next.filter(|e| e.size == key.size())
    }

    /// Blocks strictly after `key`, in order.
    pub(super) fn after(&self, key: Key) -> ClassIter<'_> {
        let c = class_of(key.size());
        let front = match self.crowded_tree(c) {
            Some(t) => ClassRange::Tree(t.range((Excluded(key), Unbounded))),
            None => {
                let at = match self.find(c, key) {
                    Ok(at) => at + 1,
                    Err(at) => at,
                };
                ClassRange::Run(self.runs[c].range(at..self.runs[c].len()))
            }
        };
        self.iter_from(c, front)
    }

    /// Blocks smaller than `size`, in order either way.
    pub(super) fn below_size(&self, size: u64) -> ClassIter<'_> {
        let c = class_of(size);
        let back = match self.crowded_tree(c) {
            Some(t) => ClassRange::Tree(t.range(..Key::at_least(size))),
            None => ClassRange::Run(self.runs[c].range(0..self.runs[c].size_position(size))),
        };
        if c == 0 {
            return self.one_class(0, back);
        }
        ClassIter {
            set: self,
            front: self.all_of(0),
            fc: 0,
            back,
            bc: c,
        }
    }

    /// Every block, in order.
    pub(super) fn iter(&self) -> ClassIter<'_> {
        self.iter_from(0, self.all_of(0))
    }

    /// `front`, the rest of class `c`, then every later class (found as
    /// the iteration reaches them: `malloc` most often takes the first).
    #[inline]
    fn iter_from<'a>(&'a self, c: usize, front: ClassRange<'a>) -> ClassIter<'a> {
        ClassIter {
            set: self,
            front,
            fc: c,
            back: self.none(),
            bc: CLASSES,
        }
    }

    /// Blocks of class `c` alone.
    fn one_class<'a>(&'a self, c: usize, run: ClassRange<'a>) -> ClassIter<'a> {
        ClassIter {
            set: self,
            front: run,
            fc: c,
            back: self.none(),
            bc: c,
        }
    }

    /// Whether any class is a B-tree.
    #[cfg(test)]
    pub(super) fn has_tree_class(&self) -> bool {
        !self.trees.is_empty()
    }

    /// The largest size (0 when empty).
    #[inline]
    pub(super) fn max_size(&self) -> u64 {
        let Some(c) = prev_held(&self.held, 0, CLASSES) else {
            return 0;
        };
        match self.crowded_tree(c) {
            Some(t) => t.last_key_value().map_or(0, |(k, _)| k.size()),
            None => self.runs[c].max_size(),
        }
    }
}

impl FromIterator<Entry> for SizeBuckets {
    /// The blocks, which must come in order.
    fn from_iter<I: IntoIterator<Item = Entry>>(it: I) -> Self {
        let mut set = SizeBuckets {
            len: 0,
            held: [0; WORDS],
            crowded: [0; WORDS],
            runs: vec![ClassRun::default(); CLASSES],
            trees: Vec::new(),
            hint: Cell::new((0, usize::MAX)),
        };
        for e in it {
            set.insert(e);
        }
        set
    }
}

/// Consecutive blocks of one class, in order either way.
#[derive(Debug, Clone)]
pub(super) enum ClassRange<'a> {
    /// From a run.
    Run(super::class_run::InOrder<'a>),
    /// From a crowded class's B-tree.
    Tree(btree_map::Range<'a, Key, u32>),
}

impl Iterator for ClassRange<'_> {
    type Item = Entry;

    #[inline]
    fn next(&mut self) -> Option<Entry> {
        match self {
            ClassRange::Run(it) => it.next().copied(),
            ClassRange::Tree(it) => it.next().map(unpack),
        }
    }
}

impl DoubleEndedIterator for ClassRange<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Entry> {
        match self {
            ClassRange::Run(it) => it.next_back().copied(),
            ClassRange::Tree(it) => it.next_back().map(unpack),
        }
    }
}
/// Blocks of a [`SizeBuckets`] in order, either way: `front` (what is left
/// of class `fc`), every held class between, and `back` (what is left of
/// class `bc`; with `bc == CLASSES`, nothing). When `fc == bc`, `front`
/// alone is the run and `back` is empty.
#[derive(Debug, Clone)]
pub(super) struct ClassIter<'a> {
    set: &'a SizeBuckets,
    front: ClassRange<'a>,
    fc: usize,
    back: ClassRange<'a>,
    bc: usize,
}

impl Iterator for ClassIter<'_> {
    type Item = Entry;

    #[inline]
    fn next(&mut self) -> Option<Entry> {
        loop {
            if let Some(e) = self.front.next() {
                return Some(e);
            }
            if self.fc >= self.bc {
                return None;
            }
            match next_held(&self.set.held, self.fc + 1, self.bc) {
                Some(c) => {
                    self.fc = c;
                    self.front = self.set.all_of(c);
                }
                None => {
                    self.fc = self.bc;
                    let empty = self.set.none();
                    self.front = std::mem::replace(&mut self.back, empty);
                }
            }
        }
    }
}

impl DoubleEndedIterator for ClassIter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Entry> {
        loop {
            if self.fc >= self.bc {
                return self.front.next_back();
            }
            if let Some(e) = self.back.next_back() {
                return Some(e);
            }
            match prev_held(&self.set.held, self.fc + 1, self.bc) {
                Some(c) => {
                    self.bc = c;
                    self.back = self.set.all_of(c);
                }
                None => {
                    self.bc = self.fc;
                    self.back = self.set.none();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Classes never decrease with the size, and the largest size has the
    /// last class.
    #[test]
    fn classes_follow_the_sizes() {
        assert_eq!(class_of(u64::MAX), CLASSES - 1);
        assert_eq!(class_of(0), 0);
        let mut last = 0;
        for bit in 0..64u32 {
            for step in 0..64u64 {
                let size = (1u64 << bit).saturating_add(step << bit.saturating_sub(6));
                let c = class_of(size);
                assert!(c >= last && c < CLASSES, "{size}: class {c} after {last}");
                last = c;
            }
        }
        // SUB classes per doubling: 1 MiB and 2 MiB are SUB apart.
        assert_eq!(class_of(2 << 20) - class_of(1 << 20), SUB as usize);
    }

    /// A fresh set's hint names no position (`usize::MAX` in class 0):
    /// looking a class-0 block up through it finds the block, and does not
    /// overflow (a debug build would panic).
    #[test]
    fn the_empty_hint_is_no_position() {
        let e = Entry::of(100, 0, 4096, 7);
        let mut set: SizeBuckets = [e].into_iter().collect();
        assert_eq!(class_of(e.size), 0);
        assert!(set.contains(e.key()));
        assert_eq!(set.next_of_size(e.key()), None);
        assert!(set.remove(e.key()));
        assert!(!set.remove(e.key()));
    }

    /// The bitmap searches find the first and last held class of a range.
    #[test]
    fn held_bits_are_found_both_ways() {
        let mut held = [0u64; WORDS];
        for c in [3, 64, 65, 200, CLASSES - 1] {
            held[c / 64] |= 1 << (c % 64);
        }
        assert_eq!(next_held(&held, 0, CLASSES), Some(3));
        assert_eq!(next_held(&held, 4, CLASSES), Some(64));
        assert_eq!(next_held(&held, 66, 200), None);
        assert_eq!(next_held(&held, 66, 201), Some(200));
        assert_eq!(next_held(&held, CLASSES, CLASSES), None);
        assert_eq!(prev_held(&held, 0, CLASSES), Some(CLASSES - 1));
        assert_eq!(prev_held(&held, 0, 200), Some(65));
        assert_eq!(prev_held(&held, 66, 200), None);
        assert_eq!(prev_held(&held, 0, 3), None);
        assert_eq!(prev_held(&held, 3, 4), Some(3));
    }
}
