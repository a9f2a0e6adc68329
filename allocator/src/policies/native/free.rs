//! Frees, deferred completion and coalescing: `DeviceCachingAllocator::free`,
//! `free_block`, `try_merge_blocks`, the stream events of `record_stream`
//! (`insert_events`, `process_events`) and `synchronize_and_free_events` in
//! c10/cuda/CUDACachingAllocator.cpp.

use super::NativeAllocator;
use super::block::{NIL, State};
use super::pool::{FreeKey, UnmappedKey};
use crate::devices::Device;
use crate::policy::{AllocError, BlockHandle};

impl<D: Device> NativeAllocator<D> {
    /// `free(ptr)`. With `deferred`, the block stays active until
    /// [`crate::Allocator::complete_free`] (a trace recorded its completion
    /// later); otherwise it is deferred only if it was used on other streams.
    pub(super) fn free_handle(&mut self, h: BlockHandle, deferred: bool) -> Result<(), AllocError> {
        if h.is_null() {
            return Ok(());
        }
        let idx = self.resolve(h, State::Allocated)?;
        let mss = self.max_split_size();
        let b = &mut self.arena[idx];
        let (pool, size) = (b.pool, b.size);
        self.stats.allocation.decrease(pool, 1);
        self.stats.allocated_bytes.decrease(pool, size);
        if size >= mss {
            self.stats.oversize_allocations.decrease(1);
        }
        let uses = if self.stream_uses.is_empty() {
            0
        } else {
            self.stream_uses.remove(&idx).map_or(0, |u| u.len())
        };
        let b = &mut self.arena[idx];
        if deferred {
            b.state = State::PendingFree;
            b.event_count = 1;
            self.trace_pending.push(idx);
        } else if uses > 0 {
            // insert_events: one event per recorded stream.
            b.state = State::PendingFree;
            b.event_count = uses as u32;
            self.stream_event_queue.push(idx);
        } else {
            self.free_block(idx);
        }
        Ok(())
    }

    /// `process_events`: stream events recorded at free time are complete by
    /// the next `malloc` in a replay (the simulated GPU has no backlog).
    pub(super) fn process_events(&mut self) {
        if self.stream_event_queue.is_empty() {
            return;
        }
        let queue = std::mem::take(&mut self.stream_event_queue);
        for &idx in &queue {
            self.arena[idx].event_count = 0;
            self.free_block(idx);
        }
        self.stream_event_queue = queue;
        self.stream_event_queue.clear();
    }

    /// `synchronize_and_free_events`: waits for every outstanding event and
    /// completes the frees waiting on them.
    pub(super) fn synchronize_and_free_events(&mut self) {
        self.stats.num_sync_all_streams += 1;
        self.process_events();
        let pending = self.trace_pending.take();
        for &idx in &pending {
            self.arena[idx].event_count = 0;
            self.free_block(idx);
        }
        self.trace_pending.recycle(pending);
    }

    /// `free_block`: returns a block to its pool, merging free neighbours.
    pub(super) fn free_block(&mut self, idx: u32) {
        let (original_size, requested, pool, prev, next) = {
            let b = &self.arena[idx];
            (b.size, b.requested, b.pool, b.prev, b.next)
        };
        let mut net_blocks: i64 = 0;
        let mut net_bytes: i64 = 0;
        // The first merged neighbour stays in the set until the merged
        // block takes its place (one move of the set instead of two).
        let mut vacated = None;
        for candidate in [prev, next] {
            let (subsumed, key) = self.merge_blocks(idx, candidate, vacated.is_none());
            vacated = vacated.or(key);
            if subsumed > 0 {
                net_blocks -= 1;
                net_bytes -= subsumed as i64;
            }
        }
        match vacated {
            Some(old) => self.replace_in_blocks(&old, idx),
            None => self.insert_into_blocks(idx),
        }
        let b = &self.arena[idx];
        if b.is_split() {
            net_blocks += 1;
            net_bytes += b.size as i64;
        }
        let expandable = b.is_expandable();
        let s = &mut self.stats;
        if !expandable {
            apply_net(&mut s.inactive_split, pool.kind(), net_blocks);
            apply_net(&mut s.inactive_split_bytes, pool.kind(), net_bytes);
        }
        s.active.decrease(pool, 1);
        s.active_bytes.decrease(pool, original_size);
        s.requested_bytes.decrease(pool, requested);
    }

    /// `try_merge_blocks`: absorbs `src` into `dst` when `src` is a free
    /// neighbour with the same mapping state. Returns the absorbed size.
    /// `dst` must not be in a pool set while this runs.
    pub(super) fn try_merge_blocks(&mut self, dst: u32, src: u32) -> u64 {
        self.merge_blocks(dst, src, false).0
    }

    /// [`Self::try_merge_blocks`]; with `keep`, a mapped `src` stays in its
    /// pool's free set and its key comes back, for the merged block to
    /// take its place there.
    fn merge_blocks(&mut self, dst: u32, src: u32, keep: bool) -> (u64, Option<FreeKey>) {
        if src == NIL {
            return (0, None);
        }
        let s = &self.arena[src];
        // Free blocks have no stream uses (they are cleared at free time).
        if s.state != State::Free || s.event_count > 0 || s.mapped != self.arena[dst].mapped {
            return (0, None);
        }
        let (s_ptr, s_size, s_prev, s_next, s_mapped) = (s.ptr, s.size, s.prev, s.next, s.mapped);
        let mut kept = None;
        if s_mapped && keep {
            kept = Some(super::free_key(s, src));
        } else if s_mapped {
            self.remove_from_blocks(src);
        } else {
            let key = UnmappedKey {
                stream: s.stream,
                ptr: s_ptr,
                idx: src,
            };
            let kind = s.pool;
            self.pool_mut(kind).remove_unmapped(&key);
        }
        if self.arena[dst].prev == src {
            // [src dst]
            let d = &mut self.arena[dst];
            d.ptr = s_ptr;
            d.prev = s_prev;
            if s_prev != NIL {
                self.arena[s_prev].next = dst;
            }
        } else {
            // [dst src]
            self.arena[dst].next = s_next;
            if s_next != NIL {
                self.arena[s_next].prev = dst;
            }
        }
        self.arena[dst].size += s_size;
        self.arena.remove(src);
        (s_size, kept)
    }
}

/// Applies a net change as one increase or decrease, as PyTorch does (this
/// matters for the cumulative `allocated`/`freed` counters).
#[inline]
fn apply_net(stat: &mut crate::stats::StatArray, pool: crate::stats::PoolKind, net: i64) {
    if net > 0 {
        stat.increase(pool, net as u64);
    } else if net < 0 {
        stat.decrease(pool, net.unsigned_abs());
    }
}
