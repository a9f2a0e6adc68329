//! Segment views (what `torch.cuda.memory_snapshot()` reports) and cache
//! queries.

use super::NativeAllocator;
use super::block::{NIL, State};
use super::pool::Pool;
use crate::devices::Device;
use crate::policy::{BlockState, BlockView, SegmentView};

impl<D: Device> NativeAllocator<D> {
    /// Segments in address order. Each contiguous mapped range of an
    /// expandable segment is its own segment; unmapped ranges are not shown.
    pub(super) fn segments_impl(&self) -> Vec<SegmentView> {
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
                pool: b.pool,
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

    /// Largest cached (free, mapped) block of either pool.
    pub(super) fn largest_free_block_impl(&self) -> u64 {
        self.pools.iter().map(Pool::max_size).max().unwrap_or(0)
    }

    /// Total bytes of cached (free, mapped) blocks.
    pub fn cached_free_bytes(&self) -> u64 {
        self.pools
            .iter()
            .flat_map(|p| p.iter())
            .map(|k| k.size)
            .sum()
    }
}
