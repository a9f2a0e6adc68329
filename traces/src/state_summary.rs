//! An allocator state in numbers (segments, reserved, allocated, waste),
//! for a recorded state or a part of it (one pool's segments).

use serde::Serialize;

use crate::model::{InitialBlockState, InitialState};

/// An allocator state in numbers: what PyTorch's own `memory_stats()`
/// would say of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StateSummary {
    /// Segments (or mapped ranges of expandable segments).
    pub segments: u64,
    /// Bytes of the segments (`reserved_bytes`).
    pub reserved_bytes: u64,
    /// Bytes of allocated blocks (`allocated_bytes`).
    pub allocated_bytes: u64,
    /// Bytes of blocks waiting for their free to complete.
    pub pending_free_bytes: u64,
    /// Reserved but unallocated bytes.
    pub waste_bytes: u64,
    /// The largest free block.
    pub largest_free_block: u64,
    /// Free blocks.
    pub free_blocks: u64,
}

impl StateSummary {
    /// The numbers of a recorded state.
    pub(crate) fn of(init: &InitialState) -> StateSummary {
        let mut s = StateSummary::default();
        for g in &init.segments {
            s.add_segment(g.size, g.blocks.iter().map(|b| (b.size, b.state)));
        }
        s.finish()
    }

    /// Counts one segment of `size` bytes with its blocks (size, state).
    pub(crate) fn add_segment(
        &mut self,
        size: u64,
        blocks: impl Iterator<Item = (u64, InitialBlockState)>,
    ) {
        self.segments += 1;
        self.reserved_bytes = self.reserved_bytes.saturating_add(size);
        for (bytes, state) in blocks {
            match state {
                InitialBlockState::Free => {
                    self.free_blocks += 1;
                    self.largest_free_block = self.largest_free_block.max(bytes);
                }
                InitialBlockState::Allocated(_) => {
                    self.allocated_bytes = self.allocated_bytes.saturating_add(bytes)
                }
                InitialBlockState::PendingFree(_) => {
                    self.pending_free_bytes = self.pending_free_bytes.saturating_add(bytes)
                }
            }
        }
    }

    /// The waste, once every segment is counted.
    pub(crate) fn finish(self) -> StateSummary {
        let mut s = self;
        s.waste_bytes = s.reserved_bytes.saturating_sub(s.allocated_bytes);
        s
    }
}
