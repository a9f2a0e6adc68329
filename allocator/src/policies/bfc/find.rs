//! The allocation path inside the bins: best fit (`FindChunkPtr`) and
//! splitting the chosen chunk (`SplitChunk`).

use super::bins::BinKey;
use super::{BfcAllocator, Chunk, ChunkState, NIL, POOL};
use crate::devices::Device;
use crate::policy::BlockHandle;

impl<D: Device> BfcAllocator<D> {
    /// `FindChunkPtr`: best fit from `bin` upwards, split, hand out.
    pub(super) fn find_chunk(
        &mut self,
        bin: usize,
        rounded: u64,
        orig: u64,
    ) -> Option<BlockHandle> {
        let lower = BinKey {
            size: rounded,
            ptr: 0,
            idx: 0,
        };
        let key = self
            .bins
            .iter()
            .skip(bin)
            .find_map(|b| b.range(lower..).next().copied())?;
        let idx = key.idx;
        self.remove_free(idx);
        let size = key.size;
        if size >= rounded.saturating_mul(2)
            || size - rounded >= self.max_internal_fragmentation_bytes
        {
            self.split_chunk(idx, rounded);
        }
        let c = &mut self.chunks[idx];
        c.state = ChunkState::Allocated;
        c.requested = orig;
        let size = c.size;
        let s = &mut self.stats;
        s.allocation.increase(POOL, 1);
        s.allocated_bytes.increase(POOL, size);
        s.active.increase(POOL, 1);
        s.active_bytes.increase(POOL, size);
        s.requested_bytes.increase(POOL, orig);
        Some(self.chunks.renew(idx))
    }

    /// `SplitChunk`: `idx` keeps its first `num_bytes`; the rest becomes a
    /// free chunk.
    fn split_chunk(&mut self, idx: u32, num_bytes: u64) {
        let (ptr, size, next) = {
            let c = &self.chunks[idx];
            (c.ptr, c.size, c.next)
        };
        let new = self.chunks.insert(Chunk {
            ptr: ptr + num_bytes,
            size: size - num_bytes,
            requested: 0,
            prev: idx,
            next,
            state: ChunkState::Free,
        });
        if next != NIL {
            self.chunks[next].prev = new;
        }
        let c = &mut self.chunks[idx];
        c.next = new;
        c.size = num_bytes;
        self.insert_free(new);
    }
}
