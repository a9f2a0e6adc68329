//! The steps of the allocation path ([`Allocator::malloc`](crate::Allocator::malloc)
//! in `mod.rs` runs them): `get_free_block`, `alloc_block`, `should_split`,
//! `alloc_found_block` of `DeviceCachingAllocator` in
//! c10/cuda/CUDACachingAllocator.cpp.

use super::NativeAllocator;
use super::block::{Block, NIL, State};
use super::pool::{FreeKey, PoolRef};
use super::rounding::{MIN_BLOCK_SIZE, SMALL_SIZE};
use crate::devices::{Device, DeviceError};
use crate::policies::oom::{out_of_memory, preemptive};
use crate::policy::AllocError;

/// One request on its way through `malloc` (PyTorch's `AllocParams`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Params {
    /// Rounded size.
    pub size: u64,
    /// Raw stream handle.
    pub stream: u64,
    /// Pool.
    pub pool: PoolRef,
    /// Bytes a new segment would take (`get_allocation_size`).
    pub alloc_size: u64,
}

impl<D: Device> NativeAllocator<D> {
    /// Records the OOM (`num_ooms`) and builds PyTorch's report.
    pub(super) fn raise_oom(&mut self, orig: u64, p: &Params) -> AllocError {
        out_of_memory(
            &self.device,
            &mut self.stats,
            orig,
            p.size,
            p.alloc_size,
            self.allowed_memory_maximum,
        )
    }

    /// `get_free_block`: best fit on the request's stream, with the
    /// max-split-size rules of `DeviceCachingAllocator::get_free_block`.
    /// The block stays in the pool's set: [`Self::alloc_found_block`] takes
    /// it out, or puts the remainder of a split in its place.
    pub(super) fn get_free_block(&mut self, p: &Params) -> Option<u32> {
        let gc = self.gc_enabled();
        let expandable_on = self.expandable_in(p.pool);
        let mss = self.max_split_size();
        let nsr = self.conf.max_non_split_rounding_bytes();
        let pool = &mut self.pools[p.pool];
        if gc {
            pool.clock += 1;
        }
        let first = pool.lower_bound(p.stream, p.size)?;
        // The first key of each size the choice looked at, where the order
        // of blocks of one size could have decided (`ties.rs`), is noted
        // before the size checks: a refusal can be the order's choice too.
        let it = if self.arena[first.idx].is_expandable() {
            self.expandable_choice(p.pool, first, expandable_on)?
        } else {
            self.note_run(p.pool, first);
            first
        };
        if p.size < mss && it.size >= mss {
            return None; // no oversize block for a normal request
        }
        if p.size >= mss && it.size >= p.size.saturating_add(nsr) {
            return None; // oversize request: bounded waste
        }
        Some(it.idx)
    }

    /// `get_free_block`'s choice when the first block found lies in an
    /// expandable segment, ties noted: with expandable segments on, the
    /// block whose growable size is smallest; with them switched off, the
    /// first block outside them (`None`: there is none).
    fn expandable_choice(
        &mut self,
        pool: PoolRef,
        first: FreeKey,
        expandable_on: bool,
    ) -> Option<FreeKey> {
        let mut it = first;
        let mut runs = Runs::new(it);
        let sets = &self.pools[pool];
        if expandable_on {
            // Best fit by the size a block could grow to: prefer a block
            // whose growable size is smaller.
            let arena = &self.arena;
            let growable = |idx: u32| {
                let b = &arena[idx];
                let tail = if b.next != NIL && !arena[b.next].mapped {
                    arena[b.next].size
                } else {
                    0
                };
                b.size + tail
            };
            for next in sets.after(it) {
                if next.size != it.size {
                    runs.push(next);
                }
                if !arena[it.idx].is_expandable() || growable(next.idx) >= growable(it.idx) {
                    break;
                }
                it = next;
            }
        } else {
            // Expandable segments were switched off: skip their blocks.
            it = sets
                .after(it)
                .find(|k| !self.arena[k.idx].is_expandable())?;
            runs = Runs::new(it);
        }
        if runs.overflowed {
            self.note_tie();
        }
        // By reference: moving the keys out would copy them.
        for run in runs.keys.iter().flatten() {
            self.note_run(pool, *run);
        }
        Some(it)
    }

    /// `alloc_block`: a new segment from the device (or mapped pages of an
    /// expandable segment). `Ok(None)` is a recoverable out-of-memory.
    pub(super) fn alloc_block(
        &mut self,
        p: &Params,
        retry: bool,
    ) -> Result<Option<u32>, AllocError> {
        if retry {
            self.stats.num_alloc_retries += 1;
        }
        if let Some(allowed) = self.allowed_memory_maximum {
            if self.total_allocated_memory + p.alloc_size > allowed {
                return Ok(None);
            }
        }
        if self.expandable_in(p.pool) {
            return self.try_allocate_expandable_block(p);
        }
        if self.conf.throw_on_cudamalloc_oom && p.alloc_size > self.device.mem_info().free {
            return Err(preemptive(
                &self.device,
                &self.stats,
                p.size,
                p.alloc_size,
                self.allowed_memory_maximum,
            ));
        }
        let ptr = match self.device.malloc(p.alloc_size) {
            Ok(ptr) => ptr,
            Err(DeviceError::OutOfMemory { .. }) => return Ok(None),
            Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
        };
        self.total_allocated_memory += p.alloc_size;
        self.private_segment_made(p.pool);
        let counter = self.segment_counter();
        let idx = self.arena.insert(Block {
            ptr,
            size: p.alloc_size,
            requested: 0,
            stream: p.stream,
            prev: NIL,
            next: NIL,
            gc_count_base: 0,
            counter,
            expandable: NIL,
            event_count: 0,
            pool: p.pool,
            state: State::Free,
            mapped: true,
        });
        self.stats.segment.increase(p.pool, 1);
        self.stats.reserved_bytes.increase(p.pool, p.alloc_size);
        if p.alloc_size >= self.max_split_size() {
            self.stats.oversize_segments.increase(1);
        }
        self.stats.num_device_alloc += 1;
        Ok(Some(idx))
    }

    /// `DeviceCachingAllocator::should_split`.
    pub(super) fn should_split(&self, idx: u32, size: u64) -> bool {
        let b = &self.arena[idx];
        let remaining = b.size - size;
        if self.no_split(b.pool) {
            return false;
        }
        if b.pool.kind() == crate::stats::PoolKind::Small || self.expandable_in(b.pool) {
            remaining >= MIN_BLOCK_SIZE
        } else {
            size < self.max_split_size() && remaining > SMALL_SIZE
        }
    }

    /// `alloc_found_block`: carves the front of `idx` (when splitting) and
    /// hands it out (`DeviceCachingAllocator::alloc_found_block`). Returns
    /// the allocated block's index. `cached`: `idx` is still in its pool's
    /// free set (found by [`Self::get_free_block`]).
    pub(super) fn alloc_found_block(
        &mut self,
        idx: u32,
        p: &Params,
        orig: u64,
        split: bool,
        cached: bool,
    ) -> u32 {
        let old_key = super::free_key(&self.arena[idx], idx);
        let already_split = self.arena[idx].is_split();
        let expandable = self.arena[idx].is_expandable();
        let block = if split {
            let rem = idx;
            let (ptr, prev, seg, parent) = {
                let r = &self.arena[rem];
                (r.ptr, r.prev, r.expandable, r.counter)
            };
            let counter = self.block_counter(parent);
            let new = self.arena.insert(Block {
                ptr,
                size: p.size,
                requested: 0,
                stream: p.stream,
                prev,
                next: rem,
                gc_count_base: 0,
                counter,
                expandable: seg,
                event_count: 0,
                pool: p.pool,
                state: State::Free,
                mapped: true,
            });
            if prev != NIL {
                self.arena[prev].next = new;
            }
            {
                let r = &mut self.arena[rem];
                r.prev = new;
                r.ptr += p.size;
                r.size -= p.size;
            }
            if cached {
                self.replace_in_blocks(&old_key, rem);
            } else {
                self.insert_into_blocks(rem);
            }
            if !expandable {
                if already_split {
                    // An already split free block shrinks by `size`.
                    self.stats.inactive_split_bytes.decrease(p.pool, p.size);
                } else {
                    // A new split free block (the remainder) appears.
                    let rem_size = self.arena[rem].size;
                    self.stats.inactive_split_bytes.increase(p.pool, rem_size);
                    self.stats.inactive_split.increase(p.pool, 1);
                }
            }
            new
        } else {
            if cached {
                self.remove_from_blocks(idx);
            }
            if already_split && !expandable {
                let size = self.arena[idx].size;
                self.stats.inactive_split_bytes.decrease(p.pool, size);
                self.stats.inactive_split.decrease(p.pool, 1);
            }
            idx
        };
        let mss = self.max_split_size();
        // A new generation per hand-out: a cached block handed out whole
        // keeps its arena slot, and a stale handle (a deferred free that a
        // synchronisation already completed) must not name the new
        // allocation.
        self.arena.renew(block);
        let b = &mut self.arena[block];
        b.state = State::Allocated;
        b.requested = orig;
        let size = b.size;
        let s = &mut self.stats;
        s.allocation.increase(p.pool, 1);
        s.allocated_bytes.increase(p.pool, size);
        s.active.increase(p.pool, 1);
        s.active_bytes.increase(p.pool, size);
        s.requested_bytes.increase(p.pool, orig);
        if size >= mss {
            s.oversize_allocations.increase(1);
        }
        block
    }
}

/// The first keys of the sizes a lookup looked at (at most four; more are
/// counted as a tie).
struct Runs {
    keys: [Option<FreeKey>; 4],
    len: usize,
    overflowed: bool,
}

impl Runs {
    fn new(first: FreeKey) -> Self {
        Runs {
            keys: [Some(first), None, None, None],
            len: 1,
            overflowed: false,
        }
    }

    fn push(&mut self, k: FreeKey) {
        match self.keys.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(k);
                self.len += 1;
            }
            None => self.overflowed = true,
        }
    }
}
