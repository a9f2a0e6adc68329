//! The free sets of plain blocks, one per pool, ordered by (stream, size,
//! address): keeping free blocks in them and the best fit of a request.

use super::{FreeKey, Params, State, StitchAllocator};
use crate::devices::Device;

impl<D: Device> StitchAllocator<D> {
    #[inline]
    pub(super) fn key(&self, idx: u32) -> FreeKey {
        let b = &self.blocks[idx];
        FreeKey {
            stream: b.stream,
            size: b.size,
            ptr: b.ptr,
            idx,
        }
    }

    /// Puts a plain block into its pool's free set.
    pub(super) fn insert_free(&mut self, idx: u32) {
        let key = self.key(idx);
        let b = &mut self.blocks[idx];
        b.state = State::Free;
        let pool = b.pool;
        if b.is_split() {
            self.stats.inactive_split.increase(pool, 1);
            self.stats.inactive_split_bytes.increase(pool, key.size);
        }
        pool.select_mut(&mut self.pools).insert(key);
    }

    /// Takes a plain block out of its pool's free set.
    pub(super) fn remove_free(&mut self, idx: u32) {
        let key = self.key(idx);
        let b = &self.blocks[idx];
        let pool = b.pool;
        if b.is_split() {
            self.stats.inactive_split.decrease(pool, 1);
            self.stats.inactive_split_bytes.decrease(pool, key.size);
        }
        pool.select_mut(&mut self.pools).remove(&key);
    }

    /// Best fit among the free plain blocks of the request's pool and
    /// stream; removed from the set.
    pub(super) fn get_free_block(&mut self, p: &Params) -> Option<u32> {
        let key = p
            .pool
            .select(&self.pools)
            .range(
                FreeKey {
                    stream: p.stream,
                    size: p.size,
                    ptr: 0,
                    idx: 0,
                }..,
            )
            .next()
            .copied()
            .filter(|k| k.stream == p.stream)?;
        self.remove_free(key.idx);
        Some(key.idx)
    }
}
