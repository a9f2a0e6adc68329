//! Blocks and the arena that owns them.
//!
//! Blocks live in a flat arena and link to their address neighbours by index
//! (`prev`/`next`), like PyTorch's doubly linked `Block*` lists, so splitting
//! and merging never allocate once the arena has grown to its working size.

use crate::stats::PoolKind;

/// "No block" marker for `prev`/`next`/`expandable`.
pub const NIL: u32 = u32::MAX;

/// Allocation state of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Cached: in its pool's free set (or unmapped set).
    Free,
    /// Handed out to a caller.
    Allocated,
    /// Freed by the caller, still in use on other streams.
    PendingFree,
}

/// A contiguous piece of a segment.
#[derive(Debug, Clone, Copy)]
pub struct Block {
    /// Address.
    pub ptr: u64,
    /// Size in bytes.
    pub size: u64,
    /// Last caller request served by this block.
    pub requested: u64,
    /// Raw stream handle of the allocation stream.
    pub stream: u64,
    /// Lower-address neighbour in the same segment, or [`NIL`].
    pub prev: u32,
    /// Higher-address neighbour in the same segment, or [`NIL`].
    pub next: u32,
    /// Pool clock value when the block last entered its pool (GC age base).
    pub gc_count_base: u64,
    /// Index of the owning expandable segment, or [`NIL`].
    pub expandable: u32,
    /// Bumped every time the arena slot is reused; part of a block handle.
    pub generation: u32,
    /// Outstanding stream events (deferred free).
    pub event_count: u32,
    /// Which pool the block belongs to.
    pub pool: PoolKind,
    /// Allocation state.
    pub state: State,
    /// Backed by physical memory (always true outside expandable segments).
    pub mapped: bool,
}

impl Block {
    /// `is_split()`: part of a segment that holds more than this block.
    #[inline]
    pub fn is_split(&self) -> bool {
        self.prev != NIL || self.next != NIL
    }

    /// `true` for blocks of an expandable segment.
    #[inline]
    pub fn is_expandable(&self) -> bool {
        self.expandable != NIL
    }
}

/// Owner of all blocks; slots are recycled through a free list.
///
/// Indexing (`arena[i]`) panics on an index the arena never issued; only
/// indices from [`Arena::insert`] may be used that way. Indices that come
/// from outside (the `index` of a caller's `BlockHandle`) must pass
/// [`Arena::is_current`] first, which checks them without panicking.
#[derive(Debug, Default, Clone)]
pub struct Arena {
    blocks: Vec<Block>,
    vacant: Vec<u32>,
}

// Indexing: `blocks` only ever grows (`push` in `insert`; nothing truncates
// it), so every index `insert` returned stays in bounds forever. `vacant`
// holds only indices given to `remove`, which are indices `insert` returned
// (they were just used to index `blocks` in `remove` itself). So `insert`'s
// `blocks[i]` for a recycled `i` is in bounds. `remove` and `Index` are
// called with arena indices the allocator keeps in its own links, pools and
// queues (`prev`/`next`, `FreeKey::idx`, `UnmappedKey::idx`, pending lists),
// all of which are `insert` results; a caller's `BlockHandle::index` reaches
// them only after `is_current` (a checked `get`) accepted it, in
// `NativeAllocator::resolve`, `block_ptr` and `complete_free_impl`.
#[allow(clippy::indexing_slicing)]
impl Arena {
    /// Stores a new block and returns its index.
    pub fn insert(&mut self, mut block: Block) -> u32 {
        if let Some(i) = self.vacant.pop() {
            let slot = &mut self.blocks[i as usize];
            block.generation = slot.generation.wrapping_add(1);
            *slot = block;
            i
        } else {
            block.generation = 0;
            self.blocks.push(block);
            (self.blocks.len() - 1) as u32
        }
    }

    /// Releases a block's slot.
    pub fn remove(&mut self, i: u32) {
        let slot = &mut self.blocks[i as usize];
        slot.state = State::Free;
        slot.prev = NIL;
        slot.next = NIL;
        slot.size = 0;
        self.vacant.push(i);
    }

    /// `true` if slot `i` holds a block with this generation.
    pub fn is_current(&self, i: u32, generation: u32) -> bool {
        self.blocks
            .get(i as usize)
            .is_some_and(|b| b.generation == generation && b.size != 0)
    }

    /// Iterates over the indices of all live blocks.
    pub fn live(&self) -> impl Iterator<Item = u32> + '_ {
        self.blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.size != 0)
            .map(|(i, _)| i as u32)
    }
}

// Indexing: see the proof on `impl Arena`.
#[allow(clippy::indexing_slicing)]
impl std::ops::Index<u32> for Arena {
    type Output = Block;
    #[inline]
    fn index(&self, i: u32) -> &Block {
        &self.blocks[i as usize]
    }
}

// Indexing: see the proof on `impl Arena`.
#[allow(clippy::indexing_slicing)]
impl std::ops::IndexMut<u32> for Arena {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut Block {
        &mut self.blocks[i as usize]
    }
}
