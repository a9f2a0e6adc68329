//! The slot arena every policy keeps its blocks in, behind generation-checked
//! [`BlockHandle`]s.
//!
//! Blocks link to their address neighbours by slot index (`prev`/`next`,
//! [`NIL`] for none), like PyTorch's doubly linked `Block*` lists, so
//! splitting and merging never allocate once the arena has grown to its
//! working size.

use crate::policy::BlockHandle;

/// "No slot" marker for links between slots (`prev`/`next`, a native
/// block's expandable segment, a stitch block's segment).
pub(crate) const NIL: u32 = u32::MAX;

/// The slots of a linked chain, from `first` to [`NIL`], each one's
/// successor given by `next`: a segment's blocks in address order.
pub(crate) fn chain(first: u32, next: impl Fn(u32) -> u32) -> impl Iterator<Item = u32> {
    std::iter::successors((first != NIL).then_some(first), move |&i| {
        Some(next(i)).filter(|&n| n != NIL)
    })
}

/// One slot of an [`Arena`].
#[derive(Debug, Clone)]
struct Slot<T> {
    generation: u32,
    live: bool,
    value: T,
}

/// A flat arena whose slots are recycled through a free list. Every reuse of
/// a slot bumps its generation, so a [`BlockHandle`] issued for an earlier
/// occupant no longer resolves (double frees are detected). Once the arena
/// has grown to its working size, inserting and removing never allocate.
///
/// Indexing (`arena[i]`) panics on an index the arena never issued; only
/// indices from [`Arena::insert`] may be used that way. Indices that come
/// from outside (the `index` of a caller's `BlockHandle`) must pass
/// [`Arena::is_current`] first, which checks them without panicking.
#[derive(Debug, Clone)]
pub(crate) struct Arena<T> {
    slots: Vec<Slot<T>>,
    vacant: Vec<u32>,
    live: usize,
}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Arena {
            slots: Vec::new(),
            vacant: Vec::new(),
            live: 0,
        }
    }
}

// Indexing: `slots` only ever grows (`push` in `insert_with`; the field is
// private and nothing truncates it), so every index `insert_with` returned
// stays in bounds. `vacant` holds only indices given to `remove`, which
// just indexed `slots` with them, so a recycled index is in bounds too.
// `remove`, `handle`, `renew` and `Index` are called with slot indices the
// policies keep in their own links, bins, pools and queues (`prev`/`next`,
// the native pools' `FreeKey::idx`/`UnmappedKey::idx`, free sets, pending
// lists, region and segment heads, sBlock pieces), all of them `insert`
// results; a caller's `BlockHandle::index` reaches them only after
// `is_current` (a checked `get`) accepted it: in each policy's `resolve`,
// `complete_free` and `block_ptr`, and in `StitchAllocator::pieces`.
#[allow(clippy::indexing_slicing)]
impl<T> Arena<T> {
    /// Stores `value` and returns its slot index. `reuse` may recycle parts
    /// of the previous occupant of a recycled slot (buffers) into `value`.
    pub(crate) fn insert_with(&mut self, mut value: T, reuse: impl FnOnce(&mut T, &mut T)) -> u32 {
        self.live += 1;
        if let Some(i) = self.vacant.pop() {
            let slot = &mut self.slots[i as usize];
            reuse(&mut slot.value, &mut value);
            slot.generation = slot.generation.wrapping_add(1);
            slot.live = true;
            slot.value = value;
            i
        } else {
            let i = self.slots.len();
            assert!(i < (u32::MAX >> 1) as usize, "slot arena exhausted");
            self.slots.push(Slot {
                generation: 0,
                live: true,
                value,
            });
            i as u32
        }
    }

    /// Stores `value` and returns its slot index.
    pub(crate) fn insert(&mut self, value: T) -> u32 {
        self.insert_with(value, |_, _| {})
    }

    /// Frees slot `i` (its value stays in place until the slot is reused).
    pub(crate) fn remove(&mut self, i: u32) {
        let slot = &mut self.slots[i as usize];
        debug_assert!(slot.live, "removing a vacant slot");
        slot.live = false;
        self.live -= 1;
        self.vacant.push(i);
    }

    /// `true` if slot `i` is occupied by the value issued with `generation`.
    pub(crate) fn is_current(&self, i: u32, generation: u32) -> bool {
        self.slots
            .get(i as usize)
            .is_some_and(|s| s.live && s.generation == generation)
    }

    /// `true` if slot `i` is occupied.
    pub(crate) fn is_live(&self, i: u32) -> bool {
        self.slots.get(i as usize).is_some_and(|s| s.live)
    }

    /// The handle naming the current occupant of slot `i`.
    pub(crate) fn handle(&self, i: u32) -> BlockHandle {
        BlockHandle {
            index: i,
            generation: self.slots[i as usize].generation,
        }
    }

    /// Gives the occupant of slot `i` a new generation (every hand-out of a
    /// block gets one, so a stale handle can never name a later allocation
    /// of the same slot) and returns its handle.
    pub(crate) fn renew(&mut self, i: u32) -> BlockHandle {
        let slot = &mut self.slots[i as usize];
        slot.generation = slot.generation.wrapping_add(1);
        BlockHandle {
            index: i,
            generation: slot.generation,
        }
    }

    /// Number of occupied slots.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Indices of the occupied slots, in index order.
    pub(crate) fn live(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .map(|(i, _)| i as u32)
    }
}

// Indexing: see the proof on `impl Arena`.
#[allow(clippy::indexing_slicing)]
impl<T> std::ops::Index<u32> for Arena<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: u32) -> &T {
        &self.slots[i as usize].value
    }
}

// Indexing: see the proof on `impl Arena`.
#[allow(clippy::indexing_slicing)]
impl<T> std::ops::IndexMut<u32> for Arena<T> {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut T {
        &mut self.slots[i as usize].value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_recycle_with_new_generation() {
        let mut s: Arena<u64> = Arena::default();
        let a = s.insert(1);
        let h = s.handle(a);
        s.remove(a);
        assert!(!s.is_current(h.index, h.generation));
        let b = s.insert(2);
        assert_eq!(a, b);
        assert!(!s.is_current(h.index, h.generation));
        assert!(s.is_current(b, s.handle(b).generation));
        assert_eq!(s.len(), 1);
        assert_eq!(s.live().collect::<Vec<_>>(), vec![b]);
    }
}
