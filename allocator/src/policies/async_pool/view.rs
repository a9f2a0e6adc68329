//! What the policy holds ([`Inspect`]); segment views: one segment per chunk, its blocks in address order.

use super::{AsyncPoolAllocator, NIL, POOL};
use crate::devices::{Device, DevicePtr};
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
        let mut out = Vec::with_capacity(self.chunks.len());
        for (&base, c) in &self.chunks {
            let mut seg = SegmentView {
                ptr: base,
                private_pool: None,
                size: c.size,
                stream: 0,
                pool: POOL,
                is_expandable: false,
                blocks: Vec::new(),
            };
            let mut i = c.first;
            while i != NIL {
                let b = &self.blocks[i];
                seg.blocks.push(BlockView {
                    ptr: b.ptr,
                    size: b.size,
                    requested: b.requested,
                    state: if b.allocated {
                        BlockState::Allocated
                    } else {
                        BlockState::Free
                    },
                });
                i = b.next;
            }
            out.push(seg);
        }
        out
    }

    fn device(&self) -> &D {
        &self.device
    }

    fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }
}
