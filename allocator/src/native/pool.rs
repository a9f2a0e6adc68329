//! Block pools: the ordered sets of cached blocks (spec §3.1).

use std::collections::BTreeSet;

/// Sort key of a free block: PyTorch's `BlockComparatorSize` orders by
/// stream (unsigned), then size, then address. The arena index only breaks
/// ties that cannot happen (two blocks never share an address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FreeKey {
    /// Raw stream handle.
    pub stream: u64,
    /// Block size.
    pub size: u64,
    /// Block address.
    pub ptr: u64,
    /// Arena index of the block.
    pub idx: u32,
}

/// Sort key of an unmapped expandable block: (stream, address)
/// (`BlockComparatorAddress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnmappedKey {
    /// Raw stream handle.
    pub stream: u64,
    /// Block address.
    pub ptr: u64,
    /// Arena index of the block.
    pub idx: u32,
}

/// One of the allocator's pools (`BlockPool`).
#[derive(Debug, Clone, Default)]
pub struct Pool {
    /// Free, mapped blocks.
    pub blocks: BTreeSet<FreeKey>,
    /// Unmapped ranges of expandable segments.
    pub unmapped: BTreeSet<UnmappedKey>,
    /// `get_free_blocks_call_count`: the garbage collector's clock.
    pub clock: u64,
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Pool {
            blocks: BTreeSet::new(),
            unmapped: BTreeSet::new(),
            clock: 0,
        }
    }

    /// The first free block at or after `(stream, size, 0)`.
    #[inline]
    pub fn lower_bound(&self, stream: u64, size: u64) -> Option<FreeKey> {
        self.blocks
            .range(
                FreeKey {
                    stream,
                    size,
                    ptr: 0,
                    idx: 0,
                }..,
            )
            .next()
            .copied()
    }
}
