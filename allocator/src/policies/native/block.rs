//! Blocks (PyTorch's `Block`) and the arena that owns them.
//!
//! Blocks live in the policies' shared slot arena and link to their address
//! neighbours by index (`prev`/`next`), like PyTorch's doubly linked
//! `Block*` lists, so splitting and merging never allocate once the arena
//! has grown to its working size.

use super::pool_ref::PoolRef;

/// "No block" marker for `prev`/`next`/`expandable`.
pub(crate) use crate::policies::arena::NIL;

/// Allocation state of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Cached: in its pool's free set (or unmapped set).
    Free,
    /// Handed out to a caller.
    Allocated,
    /// Freed by the caller, still in use on other streams.
    PendingFree,
}

/// A contiguous piece of a segment.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
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
    /// The allocation-order counter that breaks ties between free blocks of
    /// one size before their addresses do (see [`TieOrder`]); 0 when the
    /// release orders them by address alone.
    pub counter: u64,
    /// Index of the owning expandable segment, or [`NIL`].
    pub expandable: u32,
    /// Outstanding stream events (deferred free).
    pub event_count: u32,
    /// Which pool the block belongs to.
    pub pool: PoolRef,
    /// Allocation state.
    pub state: State,
    /// Backed by physical memory (always true outside expandable segments).
    pub mapped: bool,
}

impl Block {
    /// `is_split()`: part of a segment that holds more than this block.
    #[inline]
    pub(super) fn is_split(&self) -> bool {
        self.prev != NIL || self.next != NIL
    }

    /// `true` for blocks of an expandable segment.
    #[inline]
    pub(super) fn is_expandable(&self) -> bool {
        self.expandable != NIL
    }
}

/// Owner of all blocks: the shared slot [`Arena`](crate::policies::arena::Arena)
/// of every policy. A block's generation (part of its handle) lives in its
/// arena slot.
pub(crate) type Arena = crate::policies::arena::Arena<Block>;

/// How a release orders free blocks of the same size (the comparator of
/// `BlockPool::blocks` in c10/cuda/CUDACachingAllocator.cpp). Found by
/// differential tests against each release's own allocator (`vramlab
/// oracle`; allocator/tests/native_tie_order.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TieOrder {
    /// Up to 2.11: `BlockComparatorSize` — (stream, size, address).
    Address,
    /// 2.12: every new `Block` takes the next value of a global counter
    /// (pytorch#178362, `registration_counter` in the `Block` constructor):
    /// (stream, size, counter, address), a split's allocated front a new
    /// counter, the remainder and a merge's survivor their own.
    BlockCounter,
    /// 2.13 and later: the counter is taken when backing memory is obtained
    /// (a cudaMalloc, a new expandable segment) and every block of the
    /// segment inherits it (pytorch#183591,
    /// `BlockComparatorSizeCounterAddress`): older segments first.
    SegmentCounter,
}

impl TieOrder {
    /// The order of release `v`.
    pub(super) fn of(v: crate::conf::TorchVersion) -> TieOrder {
        if v.at_least(2, 13) {
            TieOrder::SegmentCounter
        } else if crate::conf::ties_by_address(v) {
            TieOrder::Address
        } else {
            TieOrder::BlockCounter
        }
    }
}
