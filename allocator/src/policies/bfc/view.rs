//! What the policy holds ([`Inspect`]); segment views: one segment per region, its chunks in address order.

use super::{BfcAllocator, ChunkState, POOL};
use crate::devices::{Device, DevicePtr};
use crate::policies::arena::chain;
use crate::policy::{BlockHandle, BlockState, BlockView, Inspect, SegmentView};
use crate::stats::MemoryStats;

impl<D: Device> Inspect for BfcAllocator<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "bfc"
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        if handle.is_null()
            || !self.chunks.is_current(handle.index, handle.generation)
            || self.chunks[handle.index].state == ChunkState::Free
        {
            return 0;
        }
        self.chunks[handle.index].ptr
    }

    /// `LargestFreeChunk`.
    fn largest_free_block(&self) -> u64 {
        self.largest_free_chunk()
    }

    /// Every region as a segment, in address order.
    fn segments(&self) -> Vec<SegmentView> {
        let view = |c: u32| {
            let ch = &self.chunks[c];
            BlockView {
                ptr: ch.ptr,
                size: ch.size,
                requested: ch.requested,
                state: match ch.state {
                    ChunkState::Free => BlockState::Free,
                    ChunkState::Allocated => BlockState::Allocated,
                    ChunkState::PendingFree => BlockState::PendingFree,
                },
            }
        };
        let next = |c: u32| self.chunks[c].next;
        self.regions
            .iter()
            .map(|(&base, r)| {
                let blocks = chain(r.first, next).map(view).collect();
                SegmentView::new((base, r.size), 0, POOL, blocks)
            })
            .collect()
    }

    fn device(&self) -> &D {
        &self.device
    }

    fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }
}
