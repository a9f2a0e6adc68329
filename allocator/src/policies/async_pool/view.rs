//! Segment views: one segment per chunk, its blocks in address order.

use super::{AsyncPoolAllocator, NIL, POOL};
use crate::devices::Device;
use crate::policy::{BlockState, BlockView, SegmentView};

impl<D: Device> AsyncPoolAllocator<D> {
    /// Every chunk as a segment, in address order.
    pub(super) fn segments_impl(&self) -> Vec<SegmentView> {
        let mut out = Vec::with_capacity(self.chunks.len());
        for (&base, c) in &self.chunks {
            let mut seg = SegmentView {
                ptr: base,
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
}
