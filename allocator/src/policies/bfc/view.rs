//! Segment views: one segment per region, its chunks in address order.

use super::{BfcAllocator, ChunkState, NIL, POOL};
use crate::devices::Device;
use crate::policy::{BlockState, BlockView, SegmentView};

impl<D: Device> BfcAllocator<D> {
    /// Every region as a segment, in address order.
    pub(super) fn segments_impl(&self) -> Vec<SegmentView> {
        let mut out = Vec::with_capacity(self.regions.len());
        for (&base, r) in &self.regions {
            let mut seg = SegmentView {
                ptr: base,
                size: r.size,
                stream: 0,
                pool: POOL,
                is_expandable: false,
                blocks: Vec::new(),
            };
            let mut c = r.first;
            while c != NIL {
                let ch = &self.chunks[c];
                seg.blocks.push(BlockView {
                    ptr: ch.ptr,
                    size: ch.size,
                    requested: ch.requested,
                    state: match ch.state {
                        ChunkState::Free => BlockState::Free,
                        ChunkState::Allocated => BlockState::Allocated,
                        ChunkState::PendingFree => BlockState::PendingFree,
                    },
                });
                c = ch.next;
            }
            out.push(seg);
        }
        out
    }
}
