//! Blocks inside chunks: handing out the front of a free block (splitting
//! off the rest) and merging free neighbours of one reuse class.

use super::{AsyncPoolAllocator, Block, NIL, POOL};
use crate::devices::Device;
use crate::policy::BlockHandle;

impl<D: Device> AsyncPoolAllocator<D> {
    /// Merges the free block `idx` (not in a free set) with free neighbours
    /// of the same reuse class; returns the surviving block.
    pub(super) fn coalesce(&mut self, idx: u32) -> u32 {
        let reuse = self.blocks[idx].reuse;
        let mut h = idx;
        let next = self.blocks[h].next;
        if next != NIL && !self.blocks[next].allocated && self.blocks[next].reuse == reuse {
            self.remove_free(next);
            self.absorb(h, next);
        }
        let prev = self.blocks[h].prev;
        if prev != NIL && !self.blocks[prev].allocated && self.blocks[prev].reuse == reuse {
            self.remove_free(prev);
            self.absorb(prev, h);
            h = prev;
        }
        h
    }

    /// `b`, the next neighbour of `a`, is absorbed into `a`.
    fn absorb(&mut self, a: u32, b: u32) {
        let Block { size, next, .. } = self.blocks[b];
        let blk = &mut self.blocks[a];
        blk.size += size;
        blk.next = next;
        if next != NIL {
            self.blocks[next].prev = a;
        }
        self.blocks.remove(b);
    }

    /// Hands out the first `size` bytes of the free block `idx`.
    pub(super) fn take(&mut self, idx: u32, size: u64, orig: u64, stream: u64) -> BlockHandle {
        self.remove_free(idx);
        let b = self.blocks[idx];
        if b.size > size {
            let rem = self.blocks.insert(Block {
                ptr: b.ptr + size,
                size: b.size - size,
                requested: 0,
                stream: 0,
                prev: idx,
                next: b.next,
                allocated: false,
                recorded: false,
                reuse: b.reuse,
            });
            if b.next != NIL {
                self.blocks[b.next].prev = rem;
            }
            let blk = &mut self.blocks[idx];
            blk.next = rem;
            blk.size = size;
            self.insert_free(rem);
        }
        let blk = &mut self.blocks[idx];
        blk.allocated = true;
        blk.recorded = false;
        blk.requested = orig;
        blk.stream = stream;
        let s = &mut self.stats;
        s.allocation.increase(POOL, 1);
        s.allocated_bytes.increase(POOL, size);
        s.active.increase(POOL, 1);
        s.active_bytes.increase(POOL, size);
        s.requested_bytes.increase(POOL, orig);
        self.blocks.renew(idx)
    }
}
