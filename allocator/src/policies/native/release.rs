//! Returning cached memory to the device: `release_available_cached_blocks`,
//! `release_cached_blocks` (empty_cache), `release_block` and the garbage
//! collector (`garbage_collect_cached_blocks`), all of
//! `DeviceCachingAllocator` in c10/cuda/CUDACachingAllocator.cpp.

use super::NativeAllocator;
use super::malloc::Params;
use super::pool::FreeKey;
use super::pool::PoolRef;
use crate::devices::Device;
use crate::policy::AllocError;

impl<D: Device> NativeAllocator<D> {
    /// `release_block`: cudaFree of a whole free segment.
    pub(super) fn release_block(&mut self, idx: u32) -> Result<(), AllocError> {
        let (ptr, size, pool) = {
            let b = &self.arena[idx];
            debug_assert!(!b.is_split() && !b.is_expandable());
            (b.ptr, b.size, b.pool)
        };
        self.stats.num_device_free += 1;
        self.device
            .free(ptr, size)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        self.total_allocated_memory -= size;
        self.stats.segment.decrease(pool, 1);
        self.stats.reserved_bytes.decrease(pool, size);
        if size >= self.max_split_size() {
            self.stats.oversize_segments.decrease(1);
        }
        self.remove_from_blocks(idx);
        self.arena.remove(idx);
        self.private_segment_gone(pool);
        Ok(())
    }

    /// `release_available_cached_blocks`: frees oversize cached blocks of the
    /// request's stream until `max(size, max_split_size)` bytes are released.
    /// Blocks freed stay freed even when it returns `false`.
    ///
    /// Blocks of expandable segments are skipped, as in the 2.10+ source; in
    /// older releases they would reach an internal assert (PR #120022).
    pub(super) fn release_available_cached_blocks(
        &mut self,
        p: &Params,
    ) -> Result<bool, AllocError> {
        let mss = self.max_split_size();
        if mss == u64::MAX {
            return Ok(false);
        }
        let key_size = p.size.max(mss);
        if let Some(k) = self.pools[p.pool].lower_bound(p.stream, key_size) {
            // Whether the first of its size is expandable can itself be
            // the order's choice.
            self.note_run(p.pool, k);
            if !self.arena[k.idx].is_expandable() {
                self.release_block(k.idx)?;
                return Ok(true);
            }
        }
        // No single block is large enough: free oversize blocks from the
        // largest of this stream downwards.
        let candidates: Vec<FreeKey> = self.pools[p.pool]
            .before_desc(p.stream, key_size)
            .take_while(|k| k.size >= mss)
            .collect();
        // Which of several blocks of one size go back can depend on their
        // order (`ties.rs`).
        self.note_equal_sizes(&candidates);
        let mut released = 0u64;
        for k in candidates {
            if released >= key_size {
                break;
            }
            if !self.arena[k.idx].is_expandable() {
                released += k.size;
                self.release_block(k.idx)?;
            }
        }
        Ok(released >= key_size)
    }

    /// `release_cached_blocks` (what `empty_cache()` does): completes pending
    /// frees, then releases every whole free segment and unmaps the free
    /// pages of expandable segments, large pool first.
    /// Then the private pools no graph or MemPool holds any more, small
    /// pool first; one left with no segments is deleted.
    pub(super) fn release_cached_blocks(&mut self) -> Result<(), AllocError> {
        self.synchronize_and_free_events();
        self.release_blocks(PoolRef::LARGE)?;
        self.release_blocks(PoolRef::SMALL)?;
        self.release_freeable_pools(None)
    }

    /// The private pools' part of [`Self::release_cached_blocks`]: every
    /// freeable pool (`only`: just that one).
    pub(super) fn release_freeable_pools(&mut self, only: Option<u32>) -> Result<(), AllocError> {
        for p in self.freeable_pools() {
            if only.is_some_and(|o| o != p) {
                continue;
            }
            self.release_blocks(PoolRef::of(Some(p), true))?;
            self.release_blocks(PoolRef::of(Some(p), false))?;
            self.delete_pool_if_empty(p);
        }
        Ok(())
    }

    /// `release_blocks(pool)`: in pool order, cudaFree whole free segments;
    /// then unmap the free pages of expandable blocks.
    fn release_blocks(&mut self, kind: PoolRef) -> Result<(), AllocError> {
        let mut whole = Vec::new();
        let mut expandable = Vec::new();
        for k in self.pool(kind).iter() {
            let b = &self.arena[k.idx];
            if b.is_expandable() {
                expandable.push(k.idx);
            } else if !b.is_split() {
                whole.push(k.idx);
            }
        }
        for idx in whole {
            self.release_block(idx)?;
        }
        for idx in expandable {
            self.unmap_block(idx)?;
        }
        Ok(())
    }

    /// `garbage_collect_cached_blocks`: frees whole cached large segments,
    /// oldest first by passes over the average age, until the bytes obtained
    /// drop under `garbage_collection_threshold * allowed`
    /// (`DeviceCachingAllocator::garbage_collect_cached_blocks`).
    pub(super) fn garbage_collect(&mut self) -> Result<(), AllocError> {
        let Some(allowed) = self.allowed_memory_maximum else {
            return Ok(());
        };
        let threshold = (self.conf.garbage_collection_threshold * allowed as f64) as u64;
        if self.total_allocated_memory <= threshold {
            return Ok(());
        }
        let target = self.total_allocated_memory - threshold;
        let clock = self.pool(PoolRef::LARGE).clock;
        let age = |base: u64| clock.wrapping_sub(base);
        let mut total_age = 0u64;
        let mut count = 0u64;
        for k in self.pool(PoolRef::LARGE).iter() {
            let b = &self.arena[k.idx];
            if !b.is_split() && !b.is_expandable() {
                total_age += age(b.gc_count_base);
                count += 1;
            }
        }
        let mut reclaimed = 0u64;
        let mut freed = true;
        let mut victims = Vec::new();
        while reclaimed < target && freed && count > 0 {
            let threshold_age = total_age as f64 / count as f64;
            freed = false;
            victims.clear();
            for k in self.pool(PoolRef::LARGE).iter() {
                let b = &self.arena[k.idx];
                if !b.is_split()
                    && !b.is_expandable()
                    && age(b.gc_count_base) as f64 >= threshold_age
                {
                    victims.push((k.idx, age(b.gc_count_base), b.size));
                }
            }
            for &(idx, a, size) in &victims {
                freed = true;
                reclaimed += size;
                total_age -= a;
                count -= 1;
                self.release_block(idx)?;
            }
        }
        Ok(())
    }
}
