//! Frees: the caller's part (`allocated`), coalescing with free neighbours
//! (`DeallocateRawInternal` → `TryToCoalesce`, `Merge`) and completing
//! trace-deferred frees.

use super::{BfcAllocator, ChunkState, NIL, POOL};
use crate::devices::Device;

impl<D: Device> BfcAllocator<D> {
    /// `Merge`: `b` (the next neighbour of `a`) is absorbed into `a`.
    fn merge(&mut self, a: u32, b: u32) {
        let (bsize, bnext) = {
            let c = &self.chunks[b];
            (c.size, c.next)
        };
        let c = &mut self.chunks[a];
        c.size += bsize;
        c.next = bnext;
        if bnext != NIL {
            self.chunks[bnext].prev = a;
        }
        self.chunks.remove(b);
    }

    /// Marks a chunk free, merges it with free neighbours
    /// (`TryToCoalesce`) and bins the result.
    pub(super) fn free_chunk(&mut self, idx: u32) {
        let (size, requested) = {
            let c = &self.chunks[idx];
            (c.size, c.requested)
        };
        let s = &mut self.stats;
        s.active.decrease(POOL, 1);
        s.active_bytes.decrease(POOL, size);
        s.requested_bytes.decrease(POOL, requested);
        self.chunks[idx].state = ChunkState::Free;
        let mut h = idx;
        let next = self.chunks[h].next;
        if next != NIL && self.chunks[next].state == ChunkState::Free {
            self.remove_free(next);
            self.merge(h, next);
        }
        let prev = self.chunks[h].prev;
        if prev != NIL && self.chunks[prev].state == ChunkState::Free {
            self.remove_free(prev);
            self.merge(prev, h);
            h = prev;
        }
        self.insert_free(h);
    }

    /// Completes every trace-deferred free.
    pub(super) fn complete_pending(&mut self) {
        let pending = self.trace_pending.take();
        for &idx in &pending {
            self.free_chunk(idx);
        }
        self.trace_pending.recycle(pending);
    }

    /// The caller's part of a free: the chunk leaves `allocated`.
    pub(super) fn release_allocation(&mut self, idx: u32) {
        let size = self.chunks[idx].size;
        self.stats.allocation.decrease(POOL, 1);
        self.stats.allocated_bytes.decrease(POOL, size);
    }
}
