//! What the policy holds ([`Inspect`]); segment views: one segment per chunk, its blocks in address order.

use super::{AsyncPoolAllocator, POOL};
use crate::devices::{Device, DevicePtr};
use crate::policies::arena::chain;
use crate::policy::{BlockHandle, BlockState, BlockView, Inspect, SegmentView};
use crate::stats::MemoryStats;

impl<D: Device> Inspect for AsyncPoolAllocator<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "async"
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        if handle.is_null()
            || !self.blocks.is_current(handle.index, handle.generation)
            || !self.blocks[handle.index].allocated
        {
            return 0;
        }
        self.blocks[handle.index].ptr
    }

    fn largest_free_block(&self) -> u64 {
        let a = self.shared.last().map_or(0, |k| k.size);
        let b = self.unified.last().map_or(0, |k| k.size);
        let c = self.by_stream.iter().map(|k| k.size).max().unwrap_or(0);
        a.max(b).max(c)
    }

    /// Every chunk as a segment, in address order.
    fn segments(&self) -> Vec<SegmentView> {
        let view = |i: u32| {
            let b = &self.blocks[i];
            BlockView {
                ptr: b.ptr,
                size: b.size,
                requested: b.requested,
                state: if b.allocated {
                    BlockState::Allocated
                } else {
                    BlockState::Free
                },
            }
        };
        let next = |i: u32| self.blocks[i].next;
        self.chunks
            .iter()
            .map(|(&base, c)| {
                let blocks = chain(c.first, next).map(view).collect();
                SegmentView::new((base, c.size), 0, POOL, blocks)
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
