//! Blocks (PyTorch's `Block`) and the arena that owns them.
//!
//! Blocks live in the policies' shared slot arena and link to their address
//! neighbours by index (`prev`/`next`), like PyTorch's doubly linked
//! `Block*` lists, so splitting and merging never allocate once the arena
//! has grown to its working size.

use crate::stats::PoolKind;

/// "No block" marker for `prev`/`next`/`expandable`.
pub(crate) use crate::policies::arena::NIL;

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

/// Owner of all blocks: the shared slot [`Arena`](crate::policies::arena::Arena)
/// of every policy. A block's generation (part of its handle) lives in its
/// arena slot.
pub(crate) type Arena = crate::policies::arena::Arena<Block>;
