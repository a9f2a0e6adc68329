//! What the policy holds ([`Inspect`]): segment views (what
//! `torch.cuda.memory_snapshot()` reports), blocks and cache queries.

use super::NativeAllocator;
use super::block::{NIL, State};
use crate::devices::{Device, DevicePtr};
use crate::policy::{BlockHandle, BlockState, BlockView, Inspect, SegmentView};
use crate::stats::MemoryStats;

impl<D: Device> Inspect for NativeAllocator<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "native"
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        if handle.is_null() || !self.arena.is_current(handle.index, handle.generation) {
            return 0;
        }
        self.arena[handle.index].ptr
    }

    /// Largest cached (free, mapped) block of either pool.
    fn largest_free_block(&self) -> u64 {
        self.pools
            .iter()
            .map(|(_, p)| p.max_size())
            .max()
            .unwrap_or(0)
    }

    /// Segments in address order. Each contiguous mapped range of an
    /// expandable segment is its own segment; unmapped ranges are not shown.
    fn segments(&self) -> Vec<SegmentView> {
        let mut out = Vec::new();
        for idx in self.arena.live() {
            let b = &self.arena[idx];
            if !b.mapped {
                continue;
            }
            let is_head = b.prev == NIL || !self.arena[b.prev].mapped;
            if !is_head {
                continue;
            }
            let mut seg = SegmentView {
                ptr: b.ptr,
                size: 0,
                stream: b.stream,
                pool: b.pool.kind(),
                private_pool: b.pool.private(),
                is_expandable: b.is_expandable(),
                blocks: Vec::new(),
            };
            let mut cur = idx;
            while cur != NIL && self.arena[cur].mapped {
                let c = &self.arena[cur];
                seg.size += c.size;
                seg.blocks.push(BlockView {
                    ptr: c.ptr,
                    size: c.size,
                    requested: c.requested,
                    state: match c.state {
                        State::Allocated => BlockState::Allocated,
                        State::PendingFree => BlockState::PendingFree,
                        State::Free => BlockState::Free,
                    },
                });
                cur = c.next;
            }
            out.push(seg);
        }
        out.sort_by_key(|s| s.ptr);
        out
    }

    fn device(&self) -> &D {
        &self.device
    }

    fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    fn placement_may_have_decided(&self) -> bool {
        NativeAllocator::placement_may_have_decided(self)
    }
}

impl<D: Device> NativeAllocator<D> {}
