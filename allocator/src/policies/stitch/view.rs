//! What the policy holds ([`Inspect`]): segment views (physical segments;
//! a piece shows the state of its sBlock) and cache queries.

use super::{State, StitchAllocator};
use crate::devices::{Device, DevicePtr};
use crate::policies::arena::chain;
use crate::policy::{BlockHandle, BlockState, BlockView, Inspect, SegmentView};
use crate::stats::MemoryStats;

impl<D: Device> Inspect for StitchAllocator<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "stitch"
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        if handle.is_null() || !self.blocks.is_current(handle.index, handle.generation) {
            return 0;
        }
        let b = &self.blocks[handle.index];
        match b.state {
            State::Allocated | State::PendingFree => b.ptr,
            State::Free | State::Stitched(_) => 0,
        }
    }

    /// Largest cached block: a free plain block or a cached sBlock.
    fn largest_free_block(&self) -> u64 {
        self.pools
            .iter()
            .chain(std::iter::once(&self.cached))
            .flat_map(|s| s.iter())
            .map(|k| k.size)
            .max()
            .unwrap_or(0)
    }

    /// Physical segments in address order.
    fn segments(&self) -> Vec<SegmentView> {
        let view = |i: u32| {
            let b = &self.blocks[i];
            let state = match b.state {
                State::Stitched(s) => self.blocks[s].state,
                st => st,
            };
            BlockView {
                ptr: b.ptr,
                size: b.size,
                requested: b.requested,
                state: match state {
                    State::Allocated => BlockState::Allocated,
                    State::PendingFree => BlockState::PendingFree,
                    _ => BlockState::Free,
                },
            }
        };
        let next = |i: u32| self.blocks[i].next;
        let mut out: Vec<SegmentView> = self
            .segments
            .live()
            .map(|si| {
                let seg = self.segments[si];
                let blocks = chain(seg.first, next).map(view).collect();
                SegmentView::new((seg.ptr, seg.size), seg.stream, seg.pool, blocks)
            })
            .collect();
        out.sort_by_key(|s| s.ptr);
        out
    }

    fn device(&self) -> &D {
        &self.device
    }

    fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }
}
