//! Private pools: CUDA graphs' pools and MemPools (`PrivatePool`,
//! `graph_pools`, `captures_underway` and `beginAllocateToPool`,
//! `endAllocateToPool`, `releasePool`, `createOrIncrefPool`,
//! `try_mempool_fallback` of `DeviceCachingAllocator` in
//! c10/cuda/CUDACachingAllocator.cpp).
//!
//! Each private pool has its own small and large block pools (two more
//! entries of `NativeAllocator::pools`); the search, split, merge and
//! expandable-segment rules are the default pools' own. What differs is
//! which requests reach it (those a registered route takes), that its
//! memory goes back to the device only once nothing holds it
//! (`use_count` 0, "freeable") and the cache is emptied, and that while any
//! route is registered the allocator neither processes stream events nor
//! frees cached segments to retry a failed request.

use super::NativeAllocator;
use super::malloc::Params;
use super::pool::{Pool, PoolRef};
use crate::devices::Device;
use crate::policy::{AllocError, PoolOptions, PoolRoute};
use crate::stats::PoolKind;

/// One private pool (PyTorch's `PrivatePool`).
#[derive(Debug, Clone)]
pub(super) struct PrivatePool {
    /// Graphs, MemPool objects and `use_mem_pool` contexts holding it.
    use_count: u32,
    /// Segments (and mapped expandable ranges) it holds (`cudaMalloc_count`).
    segments: u64,
    /// MemPool options.
    options: PoolOptions,
}

impl<D: Device> NativeAllocator<D> {
    /// `get_pool`: the private pool the first registered route that takes
    /// `stream` names, else a default pool; small or large by the rounded
    /// size.
    #[inline]
    pub(super) fn select_pool(&self, small: bool, stream: u64) -> PoolRef {
        let private = if self.routes.is_empty() {
            None
        } else {
            self.routes
                .iter()
                .find(|(_, r)| r.takes(stream))
                .map(|&(p, _)| p)
        };
        PoolRef::of(private, small)
    }

    /// The pool's blocks are never split (MemPool `no_split`).
    #[inline]
    pub(super) fn no_split(&self, r: PoolRef) -> bool {
        r.private()
            .and_then(|p| self.private_pool(p))
            .is_some_and(|pp| pp.options.no_split)
    }

    /// Expandable segments serve requests to `r`: they are on, and `r` is
    /// not a pool with its own allocator (`is_expandable_segments_active`).
    #[inline]
    pub(super) fn expandable_in(&self, r: PoolRef) -> bool {
        self.expandable_active()
            && !r
                .private()
                .and_then(|p| self.private_pool(p))
                .is_some_and(|pp| pp.options.own_allocator)
    }

    fn private_pool(&self, p: u32) -> Option<&PrivatePool> {
        self.private.get(p as usize).and_then(Option::as_ref)
    }

    fn private_pool_mut(&mut self, p: u32) -> Option<&mut PrivatePool> {
        self.private.get_mut(p as usize).and_then(Option::as_mut)
    }

    /// `true` once private pool `p` was made and until it is deleted.
    pub(super) fn pool_exists(&self, p: u32) -> bool {
        self.private_pool(p).is_some()
    }

    /// A new segment (or mapped range) of pool `r`: a private pool counts it.
    #[inline]
    pub(super) fn private_segment_made(&mut self, r: PoolRef) {
        if let Some(pp) = r.private().and_then(|p| self.private_pool_mut(p)) {
            pp.segments += 1;
        }
    }

    /// A segment (or mapped range) of pool `r` went back to the device.
    #[inline]
    pub(super) fn private_segment_gone(&mut self, r: PoolRef) {
        if let Some(pp) = r.private().and_then(|p| self.private_pool_mut(p)) {
            pp.segments = pp.segments.saturating_sub(1);
        }
    }

    /// The private pools nothing holds any more, in index order.
    pub(super) fn freeable_pools(&self) -> Vec<u32> {
        (0..self.private.len() as u32)
            .filter(|&p| self.private_pool(p).is_some_and(|pp| pp.use_count == 0))
            .collect()
    }

    /// Deletes freeable pool `p` once it holds no segments.
    pub(super) fn delete_pool_if_empty(&mut self, p: u32) {
        if self
            .private_pool(p)
            .is_some_and(|pp| pp.use_count == 0 && pp.segments == 0)
        {
            if let Some(slot) = self.private.get_mut(p as usize) {
                *slot = None;
            }
            for small in [true, false] {
                self.pools[PoolRef::of(Some(p), small)] = Pool::new();
            }
        }
    }

    /// Makes pool `p` (held once) or holds it once more.
    fn make_or_hold(&mut self, p: u32, options: PoolOptions) {
        if let Some(pp) = self.private_pool_mut(p) {
            pp.use_count += 1;
            return;
        }
        let i = p as usize;
        if self.private.len() <= i {
            self.private.resize(i + 1, None);
        }
        self.pools.make_room(PoolRef::of(Some(p), false));
        if let Some(slot) = self.private.get_mut(i) {
            *slot = Some(PrivatePool {
                use_count: 1,
                segments: 0,
                options,
            });
        }
    }

    /// `try_mempool_fallback`: after a new segment could not be had, the
    /// cached blocks of the MemPools marked `use_on_oom` (in the order of
    /// their indices) are searched for the request. Returns the request as
    /// it is served from the pool that had a block, and the block.
    ///
    /// Under expandable segments no MemPool lends (PyTorch raises the OOM:
    /// judged on 2.11 and 2.15, tests/pools/mempool-use-on-oom.csv).
    pub(super) fn try_mempool_fallback(&mut self, p: &Params) -> Option<(Params, u32)> {
        if p.pool.private().is_some() || self.expandable_active() {
            return None;
        }
        let small = p.pool.kind() == PoolKind::Small;
        for i in 0..self.private.len() as u32 {
            if !self.private_pool(i).is_some_and(|pp| pp.options.use_on_oom) {
                continue;
            }
            let q = Params {
                pool: PoolRef::of(Some(i), small),
                ..*p
            };
            if let Some(idx) = self.get_free_block(&q) {
                return Some((q, idx));
            }
        }
        None
    }

    /// `createOrIncrefPool`.
    pub(super) fn create_private_pool(&mut self, p: u32, options: PoolOptions) {
        self.make_or_hold(p, options);
    }

    /// `beginAllocateToPool`.
    pub(super) fn begin_route(
        &mut self,
        p: u32,
        route: PoolRoute,
        options: PoolOptions,
    ) -> Result<(), AllocError> {
        if self.routes.iter().any(|&(q, _)| q == p) {
            return Err(AllocError::Invalid(format!(
                "requests already go to private pool {p} (PyTorch: 'beginAllocateToPool: already recording to mempool_id')"
            )));
        }
        self.make_or_hold(p, options);
        self.routes.push((p, route));
        Ok(())
    }

    /// `endAllocateToPool`.
    pub(super) fn end_route(&mut self, p: u32) -> Result<(), AllocError> {
        match self.routes.iter().position(|&(q, _)| q == p) {
            Some(i) => {
                self.routes.remove(i);
                Ok(())
            }
            None => Err(AllocError::Invalid(format!(
                "no requests go to private pool {p} (PyTorch: 'endAllocatePool: not currently recording to mempool_id')"
            ))),
        }
    }

    /// `releasePool`.
    pub(super) fn release_private_pool(&mut self, p: u32) -> Result<(), AllocError> {
        match self.private_pool_mut(p) {
            Some(pp) if pp.use_count > 0 => {
                pp.use_count -= 1;
                Ok(())
            }
            _ => Err(AllocError::Invalid(format!(
                "private pool {p} is released but nothing holds it"
            ))),
        }
    }

    /// `emptyCache(mempool_id)`: completes pending frees, then returns the
    /// cached memory of pool `p` if nothing holds it.
    /// Nothing up to 2.12 while a route is registered ([`Self::keeps_cache`]).
    pub(super) fn empty_private_pool(&mut self, p: u32) -> Result<(), AllocError> {
        if self.keeps_cache() {
            return Ok(());
        }
        self.synchronize_and_free_events();
        self.release_freeable_pools(Some(p))
    }

    /// `true` when no cached segment may go back to the device, neither to
    /// retry a request that found no segment nor at `empty_cache` (which
    /// does nothing then): up to 2.12 while any route is registered, a
    /// `use_mem_pool` context included; from 2.13 never (PyTorch 2.15 frees
    /// the cache during a capture or MemPool context too). Judged on every
    /// release 2.11–2.15 (2.12 keeps the cache, 2.13 and 2.14 free it):
    /// tests/pools/capture-oom.csv, tests/pools/empty-cache-routed.csv,
    /// docs/results/pools.md.
    #[inline]
    pub(super) fn keeps_cache(&self) -> bool {
        !self.routes.is_empty() && !self.conf.version.at_least(2, 13)
    }

    /// `true` while the allocator follows its under-capture rules (no
    /// stream events processed, no cache freed to retry a request). Up to
    /// 2.12 that is while any route is registered, a `use_mem_pool`
    /// context included (`captures_underway`, pytorch#175015); from 2.13
    /// only while a graph capture is (`markCaptureBegin`, pytorch#181830).
    /// No replay event tells this rule from [`Self::keeps_cache`] (stream
    /// events are complete by the next request in a replay); it switches
    /// with it, at the release the oracle shows for that one (2.13).
    #[inline]
    pub(super) fn under_capture(&self) -> bool {
        if self.routes.is_empty() {
            return false;
        }
        if self.conf.version.at_least(2, 13) {
            self.routes
                .iter()
                .any(|(_, r)| matches!(r, PoolRoute::Capture { .. }))
        } else {
            true
        }
    }
}
