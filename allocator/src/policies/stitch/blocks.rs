//! Plain blocks inside their segments: splitting (`should_split`) and
//! merging free neighbours.

use super::rounding::{GRANULARITY, MIN_BLOCK_SIZE};
use super::{Block, NIL, State, StitchAllocator};
use crate::devices::Device;
use crate::stats::PoolKind;

impl<D: Device> StitchAllocator<D> {
    /// `b`, the next neighbour of `a`, is absorbed into `a`.
    pub(super) fn absorb(&mut self, a: u32, b: u32) {
        let (size, next) = (self.blocks[b].size, self.blocks[b].next);
        let blk = &mut self.blocks[a];
        blk.size += size;
        blk.next = next;
        if next != NIL {
            self.blocks[next].prev = a;
        }
        self.blocks.remove(b);
    }

    /// Merges the plain block `idx` (free, not in a set) with free
    /// neighbours and inserts the result into its pool.
    pub(super) fn coalesce_and_insert(&mut self, idx: u32) {
        let mut h = idx;
        let next = self.blocks[h].next;
        if next != NIL && self.blocks[next].state == State::Free {
            self.remove_free(next);
            self.absorb(h, next);
        }
        let prev = self.blocks[h].prev;
        if prev != NIL && self.blocks[prev].state == State::Free {
            self.remove_free(prev);
            self.absorb(prev, h);
            h = prev;
        }
        self.insert_free(h);
    }

    /// Splits the plain block `idx` (in no set): it keeps its first `size`
    /// bytes, the rest becomes a free block.
    pub(super) fn split(&mut self, idx: u32, size: u64) {
        let (ptr, total, next, stream, seg, pool) = {
            let b = &self.blocks[idx];
            (b.ptr, b.size, b.next, b.stream, b.seg, b.pool)
        };
        let rem = self.new_block(Block {
            ptr: ptr + size,
            size: total - size,
            requested: 0,
            stream,
            prev: idx,
            next,
            seg,
            pool,
            state: State::Free,
            stream_uses: Vec::new(),
            sources: Vec::new(),
        });
        if next != NIL {
            self.blocks[next].prev = rem;
        }
        let b = &mut self.blocks[idx];
        b.next = rem;
        b.size = size;
        self.insert_free(rem);
    }

    /// `should_split`.
    pub(super) fn should_split(&self, idx: u32, size: u64) -> bool {
        let b = &self.blocks[idx];
        let remaining = b.size - size;
        match b.pool {
            PoolKind::Small => remaining >= MIN_BLOCK_SIZE,
            PoolKind::Large => remaining >= GRANULARITY,
        }
    }
}
