//! Expandable segments (`expandable_segments:True`; `ExpandableSegment` and
//! `DeviceCachingAllocator::try_allocate_expandable_block` in
//! c10/cuda/CUDACachingAllocator.cpp): one virtual reservation per (pool,
//! stream) that grows by mapping physical pages.

use super::NativeAllocator;
use super::block::{Block, NIL, State};
use super::malloc::Params;
use super::pool::PoolRef;
use super::pool::UnmappedKey;
use super::rounding::SMALL_BUFFER;
use crate::devices::{Device, DeviceError};
use crate::policy::AllocError;
use crate::stats::PoolKind;

/// One virtual address reservation (`ExpandableSegment`).
#[derive(Debug, Clone)]
pub(super) struct ExpandableSegment {
    /// Base of the reservation.
    pub base: u64,
    /// Reserved bytes (a whole number of pages).
    pub size: u64,
    /// Page (physical handle) size: 2 MiB small, 20 MiB (large segment size) large.
    pub page: u64,
}

/// Unsigned page-aligned range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    ptr: u64,
    size: u64,
}

// Indexing, Expect: a block's `expandable` is either NIL or the index of its
// reservation in `expandable_segments`: `find_expandable_block` sets it to
// `expandable_segments.len()` right before pushing that reservation, and
// every other block of the segment copies it from a neighbour (splits,
// `free_mapped`). `expandable_segments` never shrinks, and an entry becomes
// `None` only in `forget_segment`, called by `unmap_block` when the block
// spans the whole reservation, which then removes that last block from the
// arena. So every live expandable block indexes a `Some` entry.
// `segment_of` is only called for expandable blocks (`map_block` on
// unmapped blocks, which exist only in expandable segments; `unmap_block` on
// blocks `release_blocks` found `is_expandable`).
#[allow(clippy::indexing_slicing, clippy::expect_used)]
impl<D: Device> NativeAllocator<D> {
    /// The reservation of expandable block `idx`.
    fn segment_of(&self, idx: u32) -> &ExpandableSegment {
        let seg = self.arena[idx].expandable as usize;
        self.expandable_segments[seg]
            .as_ref()
            .expect("block refers to a released expandable segment")
    }

    /// Marks reservation `seg` released (its last block leaves the arena).
    fn forget_segment(&mut self, seg: u32) {
        self.expandable_segments[seg as usize] = None;
    }
}

impl<D: Device> NativeAllocator<D> {
    /// `try_allocate_expandable_block`: finds room in (or creates) a
    /// reservation of this pool and stream and maps enough pages for `p.size`
    /// bytes. Returns the free, mapped block that holds them, removed from
    /// its pool; `Ok(None)` when the device has no memory for the pages.
    pub(super) fn try_allocate_expandable_block(
        &mut self,
        p: &Params,
    ) -> Result<Option<u32>, AllocError> {
        let mut c = self.find_expandable_block(p)?;
        if !self.arena[c].mapped {
            let n = self.arena[c].size.min(p.size);
            if !self.map_block(c, n)? {
                return Ok(None);
            }
            // map_block may have merged `c` into nothing else: it stays `c`.
        }
        while self.arena[c].size < p.size {
            // shape: free (mapped) -> unmapped -> ...
            let nxt = self.arena[c].next;
            if nxt == NIL {
                // A new reservation (1 1/8 of the device's total) smaller
                // than the request: only a device whose capacity exceeds
                // the total it reports mapped that much. Out of memory.
                return Ok(None);
            }
            let n = (p.size - self.arena[c].size).min(self.arena[nxt].size);
            if !self.map_block(nxt, n)? {
                return Ok(None);
            }
            c = nxt; // map_block merged the old `c` into `nxt`
        }
        self.remove_from_blocks(c);
        self.private_segment_made(p.pool);
        Ok(Some(c))
    }

    /// Free and not waiting for events: usable as address space.
    fn allocatable(&self, idx: u32) -> bool {
        idx != NIL && {
            let b = &self.arena[idx];
            b.state == State::Free && b.event_count == 0
        }
    }

    /// `find_expandable_block`: the lowest-address run of free or unmapped
    /// blocks of this pool and stream with room for `p.size` bytes, or a new
    /// reservation's single unmapped block.
    fn find_expandable_block(&mut self, p: &Params) -> Result<u32, AllocError> {
        // Runs of two reservations are tried in address order, which the
        // device's placement sets (`ties.rs`).
        if !self.placement_may_have_decided() {
            let two = {
                let mut segs = self.pools[p.pool]
                    .unmapped_of(p.stream)
                    .map(|k| self.arena[k.idx].expandable);
                segs.next().is_some_and(|first| segs.any(|s| s != first))
            };
            if two {
                self.note_tie();
            }
        }
        let pool = &self.pools[p.pool];
        for k in pool.unmapped_of(p.stream) {
            let mut c = k.idx;
            let prev = self.arena[c].prev;
            if self.allocatable(prev) {
                c = prev;
            }
            let mut bytes = 0u64;
            let mut b = c;
            while bytes < p.size && self.allocatable(b) {
                bytes += self.arena[b].size;
                b = self.arena[b].next;
            }
            if bytes >= p.size {
                return Ok(c);
            }
        }
        // A new reservation of 1 1/8 of the device's memory, in whole pages.
        let page = match p.pool.kind() {
            PoolKind::Small => SMALL_BUFFER,
            PoolKind::Large => self.conf.large_segment_size_bytes(),
        };
        let total = self.device.mem_info().total;
        let want = total.saturating_add(total / 8);
        let size = want.div_ceil(page).max(1).saturating_mul(page);
        let base = self
            .device
            .reserve(size)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        let seg = self.expandable_segments.len() as u32;
        self.expandable_segments
            .push(Some(ExpandableSegment { base, size, page }));
        let counter = self.segment_counter();
        let idx = self.arena.insert(Block {
            ptr: base,
            size,
            requested: 0,
            stream: p.stream,
            prev: NIL,
            next: NIL,
            gc_count_base: 0,
            counter,
            expandable: seg,
            event_count: 0,
            pool: p.pool,
            state: State::Free,
            mapped: false,
        });
        self.pool_mut(p.pool).insert_unmapped(UnmappedKey {
            stream: p.stream,
            ptr: base,
            idx,
        });
        Ok(idx)
    }

    /// `map_block`: maps the pages covering the first `n` bytes of the
    /// unmapped block `idx` and merges it with free mapped neighbours.
    /// `Ok(false)` when the device is out of memory (nothing is mapped).
    fn map_block(&mut self, idx: u32, n: u64) -> Result<bool, AllocError> {
        let (ptr, size, stream, kind) = {
            let b = &self.arena[idx];
            debug_assert!(!b.mapped && n <= b.size);
            (b.ptr, b.size, b.stream, b.pool)
        };
        let seg = self.segment_of(idx).clone();
        // Pages [begin, end) covering [ptr, ptr + n).
        let begin = (ptr - seg.base) / seg.page;
        let end = (ptr + n - seg.base).div_ceil(seg.page);
        let range = Range {
            ptr: seg.base + begin * seg.page,
            size: (end - begin) * seg.page,
        };
        match self.device.map(range.ptr, range.size, seg.page) {
            Ok(()) => {}
            Err(DeviceError::OutOfMemory { .. }) => return Ok(false),
            Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
        }
        debug_assert_eq!(range.ptr, ptr);
        self.pool_mut(kind)
            .remove_unmapped(&UnmappedKey { stream, ptr, idx });
        self.arena[idx].mapped = true;
        if range.size < size {
            // to_map -> remaining (unmapped) -> next
            let next = self.arena[idx].next;
            let counter = self.block_counter(self.arena[idx].counter);
            let rem = self.arena.insert(Block {
                ptr: ptr + range.size,
                size: size - range.size,
                requested: 0,
                stream,
                prev: idx,
                next,
                gc_count_base: 0,
                counter,
                expandable: self.arena[idx].expandable,
                event_count: 0,
                pool: kind,
                state: State::Free,
                mapped: false,
            });
            if next != NIL {
                self.arena[next].prev = rem;
            }
            self.arena[idx].next = rem;
            self.arena[idx].size = range.size;
            self.pool_mut(kind).insert_unmapped(UnmappedKey {
                stream,
                ptr: ptr + range.size,
                idx: rem,
            });
        }
        let prev = self.arena[idx].prev;
        self.try_merge_blocks(idx, prev);
        let next = self.arena[idx].next;
        self.try_merge_blocks(idx, next);
        self.insert_into_blocks(idx);
        self.total_allocated_memory += range.size;
        self.stats.reserved_bytes.increase(kind, range.size);
        self.stats.num_device_alloc += 1;
        Ok(true)
    }

    /// `unmap_block`: gives the whole free pages of a free mapped expandable
    /// block back to the device; partial pages at either end stay mapped as
    /// free blocks. Releases the reservation once nothing is mapped.
    pub(super) fn unmap_block(&mut self, idx: u32) -> Result<(), AllocError> {
        let (ptr, size, stream, kind, seg_idx) = {
            let b = &self.arena[idx];
            (b.ptr, b.size, b.stream, b.pool, b.expandable)
        };
        let seg = self.segment_of(idx).clone();
        let begin = (ptr - seg.base).div_ceil(seg.page);
        let end = (ptr + size - seg.base) / seg.page;
        if begin >= end {
            return Ok(());
        }
        let range = Range {
            ptr: seg.base + begin * seg.page,
            size: (end - begin) * seg.page,
        };
        self.device
            .unmap(range.ptr, range.size)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        self.remove_from_blocks(idx);
        let before = range.ptr - ptr;
        if before > 0 {
            // prev -> before_free -> block
            let prev = self.arena[idx].prev;
            let mut piece = self.free_mapped(ptr, before, stream, kind, seg_idx, prev, idx);
            piece.counter = self.block_counter(self.arena[idx].counter);
            let bf = self.arena.insert(piece);
            if prev != NIL {
                self.arena[prev].next = bf;
            }
            self.arena[idx].prev = bf;
            self.insert_into_blocks(bf);
        }
        let after = size - before - range.size;
        if after > 0 {
            // block -> after_free -> next
            let next = self.arena[idx].next;
            let mut piece = self.free_mapped(
                range.ptr + range.size,
                after,
                stream,
                kind,
                seg_idx,
                idx,
                next,
            );
            piece.counter = self.block_counter(self.arena[idx].counter);
            let af = self.arena.insert(piece);
            if next != NIL {
                self.arena[next].prev = af;
            }
            self.arena[idx].next = af;
            self.insert_into_blocks(af);
        }
        {
            let b = &mut self.arena[idx];
            b.ptr = range.ptr;
            b.size = range.size;
            b.mapped = false;
            b.state = State::Free;
        }
        let prev = self.arena[idx].prev;
        self.try_merge_blocks(idx, prev);
        let next = self.arena[idx].next;
        self.try_merge_blocks(idx, next);
        let b = &self.arena[idx];
        let key = UnmappedKey {
            stream,
            ptr: b.ptr,
            idx,
        };
        let whole = !b.is_split();
        self.pool_mut(kind).insert_unmapped(key);
        self.total_allocated_memory -= range.size;
        self.stats.reserved_bytes.decrease(kind, range.size);
        self.stats.num_device_free += 1;
        self.private_segment_gone(kind);
        if whole {
            // `release_expandable_segment`: nothing of the reservation is
            // mapped any more.
            self.pool_mut(kind).remove_unmapped(&key);
            self.device
                .release(seg.base, seg.size)
                .map_err(|e| AllocError::Device(e.to_string()))?;
            self.forget_segment(seg_idx);
            self.arena.remove(idx);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn free_mapped(
        &self,
        ptr: u64,
        size: u64,
        stream: u64,
        pool: PoolRef,
        seg: u32,
        prev: u32,
        next: u32,
    ) -> Block {
        Block {
            ptr,
            size,
            requested: 0,
            stream,
            prev,
            next,
            gc_count_base: 0,
            counter: 0,
            expandable: seg,
            event_count: 0,
            pool,
            state: State::Free,
            mapped: true,
        }
    }
}
