//! Segment views (physical segments; a piece shows the state of its
//! sBlock) and cache queries.

use super::{NIL, State, StitchAllocator};
use crate::devices::Device;
use crate::policy::{BlockState, BlockView, SegmentView};

impl<D: Device> StitchAllocator<D> {
    /// Largest cached block: a free plain block or a cached sBlock.
    pub(super) fn largest_free_block_impl(&self) -> u64 {
        self.pools
            .iter()
            .chain(std::iter::once(&self.cached))
            .flat_map(|s| s.iter())
            .map(|k| k.size)
            .max()
            .unwrap_or(0)
    }

    /// Physical segments in address order.
    pub(super) fn segments_impl(&self) -> Vec<SegmentView> {
        let mut out = Vec::with_capacity(self.segments.len());
        for si in self.segments.live() {
            let seg = self.segments[si];
            let mut view = SegmentView {
                ptr: seg.ptr,
                size: seg.size,
                stream: seg.stream,
                pool: seg.pool,
                is_expandable: false,
                blocks: Vec::new(),
            };
            let mut i = seg.first;
            while i != NIL {
                let b = &self.blocks[i];
                let state = match b.state {
                    State::Stitched(s) => self.blocks[s].state,
                    st => st,
                };
                view.blocks.push(BlockView {
                    ptr: b.ptr,
                    size: b.size,
                    requested: b.requested,
                    state: match state {
                        State::Allocated => BlockState::Allocated,
                        State::PendingFree => BlockState::PendingFree,
                        _ => BlockState::Free,
                    },
                });
                i = b.next;
            }
            out.push(view);
        }
        out.sort_by_key(|s| s.ptr);
        out
    }
}
