//! Initial state: rebuilding the segments and blocks a recording started
//! with (traces that begin mid-run), as they were: cudaMalloc segments and
//! expandable segments' reservations with their mapped ranges.

use super::NativeAllocator;
use super::block::{Block, NIL, State};
use super::expandable::ExpandableSegment;
use super::pool::PoolRef;
use super::pool::UnmappedKey;
use super::rounding::SMALL_BUFFER;
use crate::devices::{Device, DeviceError};
use crate::policies::oom::MAX_REQUEST;
use crate::policy::{
    AllocError, BlockHandle, OomReport, Seed, SeedBlock, SeedBlockState, SeedPool, SeedRange,
};
use crate::stats::PoolKind;

impl<D: Device> Seed for NativeAllocator<D> {
    /// Adds a segment that existed before the trace began: obtains `size`
    /// bytes from the device (a simulated device told to place it at the
    /// recorded address does so) and lays out `blocks` in it, updating every
    /// statistic as if the blocks had been allocated. Returns one handle per
    /// block (`None` for free ones). A device without room for it is an
    /// [`AllocError::OutOfMemory`]: the recorded state does not fit.
    fn seed_segment(
        &mut self,
        pool: SeedPool,
        stream: u64,
        blocks: &[SeedBlock],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        let pool = self.seed_pool(pool)?;
        let size = seeded_size(blocks)?;
        let base = match self.device.malloc(size) {
            Ok(p) => p,
            Err(DeviceError::OutOfMemory { .. }) => return Err(self.seed_oom(size)),
            Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
        };
        self.total_allocated_memory += size;
        self.private_segment_made(pool);
        self.stats.segment.increase(pool, 1);
        self.stats.reserved_bytes.increase(pool, size);
        if size >= self.max_split_size() {
            self.stats.oversize_segments.increase(1);
        }
        self.stats.num_device_alloc += 1;
        self.seeding = self.seeded_counter(base);
        let mut handles = Vec::with_capacity(blocks.len());
        let split = blocks.len() > 1;
        let mut prev = NIL;
        let mut ptr = base;
        for sb in blocks {
            let (idx, h) = self.seed_block(ptr, sb, stream, pool, prev, NIL, split);
            prev = idx;
            ptr += sb.size;
            handles.push(h);
        }
        Ok(handles)
    }

    /// Adds an expandable segment that existed before the trace began: a
    /// reservation of the usual size (or larger, to hold every range), with
    /// `ranges` mapped at their offsets and laid out as their blocks say.
    /// Returns one handle per block of every range, in order.
    fn seed_expandable(
        &mut self,
        pool: SeedPool,
        stream: u64,
        ranges: &[SeedRange<'_>],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        let pool = self.seed_pool(pool)?;
        let page = match pool.kind() {
            PoolKind::Small => SMALL_BUFFER,
            PoolKind::Large => self.conf.large_segment_size_bytes(),
        };
        let mut end = 0u64;
        for r in ranges {
            let size = seeded_size(r.blocks)?;
            if r.offset % page != 0 || size % page != 0 || r.offset < end {
                return Err(AllocError::Invalid(format!(
                    "a seeded expandable range must be whole {page}-byte pages, in address order, not overlapping (offset {}, {size} bytes)",
                    r.offset
                )));
            }
            end = r
                .offset
                .checked_add(size)
                .filter(|&e| e < MAX_REQUEST)
                .ok_or_else(|| {
                    AllocError::Invalid("a seeded reservation of 2^60 bytes or more".into())
                })?;
        }
        let total = self.device.mem_info().total;
        let usual = total.saturating_add(total / 8).div_ceil(page).max(1);
        let size = usual.max(end.div_ceil(page)).saturating_mul(page);
        let base = self
            .device
            .reserve(size)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        let seg = self.expandable_segments.len() as u32;
        self.expandable_segments
            .push(Some(ExpandableSegment { base, size, page }));
        self.seeding = self.seeded_counter(base);
        let mut handles = Vec::new();
        let mut prev = NIL;
        let mut cursor = 0u64;
        for r in ranges {
            if r.offset > cursor {
                prev =
                    self.seed_unmapped(base + cursor, r.offset - cursor, stream, pool, seg, prev);
            }
            let bytes = seeded_size(r.blocks)?;
            match self.device.map(base + r.offset, bytes, page) {
                Ok(()) => {}
                Err(DeviceError::OutOfMemory { .. }) => return Err(self.seed_oom(bytes)),
                Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
            }
            self.total_allocated_memory += bytes;
            self.private_segment_made(pool);
            self.stats.reserved_bytes.increase(pool, bytes);
            self.stats.num_device_alloc += 1;
            let mut ptr = base + r.offset;
            for sb in r.blocks {
                let (idx, h) = self.seed_block(ptr, sb, stream, pool, prev, seg, false);
                prev = idx;
                ptr += sb.size;
                handles.push(h);
            }
            cursor = r.offset + bytes;
        }
        if cursor < size {
            self.seed_unmapped(base + cursor, size - cursor, stream, pool, seg, prev);
        }
        Ok(handles)
    }
}

impl<D: Device> NativeAllocator<D> {
    /// The block pool a seeded segment goes to; a private one must exist.
    fn seed_pool(&self, pool: SeedPool) -> Result<PoolRef, AllocError> {
        if let Some(p) = pool.private {
            if !self.pool_exists(p) {
                return Err(AllocError::Invalid(format!(
                    "a segment of private pool {p} is seeded before the pool was made"
                )));
            }
        }
        Ok(PoolRef::of(pool.private, pool.kind == PoolKind::Small))
    }

    /// Appends one seeded block after `prev`; returns its index and handle.
    #[allow(clippy::too_many_arguments)]
    fn seed_block(
        &mut self,
        ptr: u64,
        sb: &SeedBlock,
        stream: u64,
        pool: PoolRef,
        prev: u32,
        expandable: u32,
        split: bool,
    ) -> (u32, Option<BlockHandle>) {
        let counter = self.seeding;
        let idx = self.arena.insert(Block {
            ptr,
            size: sb.size,
            requested: sb.requested,
            stream,
            prev,
            next: NIL,
            gc_count_base: 0,
            counter,
            expandable,
            event_count: 0,
            pool,
            state: State::Allocated,
            mapped: true,
        });
        if prev != NIL {
            self.arena[prev].next = idx;
        }
        let mss = self.max_split_size();
        match sb.state {
            SeedBlockState::Free => {
                self.insert_into_blocks(idx);
                if split && expandable == NIL {
                    self.stats.inactive_split.increase(pool, 1);
                    self.stats.inactive_split_bytes.increase(pool, sb.size);
                }
                (idx, None)
            }
            SeedBlockState::Allocated | SeedBlockState::PendingFree => {
                let s = &mut self.stats;
                s.active.increase(pool, 1);
                s.active_bytes.increase(pool, sb.size);
                s.requested_bytes.increase(pool, sb.requested);
                if sb.state == SeedBlockState::Allocated {
                    s.allocation.increase(pool, 1);
                    s.allocated_bytes.increase(pool, sb.size);
                    if sb.size >= mss {
                        s.oversize_allocations.increase(1);
                    }
                } else {
                    self.arena[idx].state = State::PendingFree;
                    self.arena[idx].event_count = 1;
                    self.trace_pending.push(idx);
                }
                (idx, Some(self.handle_of(idx)))
            }
        }
    }

    /// Appends an unmapped free block of an expandable segment after `prev`.
    fn seed_unmapped(
        &mut self,
        ptr: u64,
        size: u64,
        stream: u64,
        pool: PoolRef,
        seg: u32,
        prev: u32,
    ) -> u32 {
        let counter = self.seeding;
        let idx = self.arena.insert(Block {
            ptr,
            size,
            requested: 0,
            stream,
            prev,
            next: NIL,
            gc_count_base: 0,
            counter,
            expandable: seg,
            event_count: 0,
            pool,
            state: State::Free,
            mapped: false,
        });
        if prev != NIL {
            self.arena[prev].next = idx;
        }
        self.pool_mut(pool)
            .insert_unmapped(UnmappedKey { stream, ptr, idx });
        idx
    }

    /// The device has no room for `bytes` of the recorded state.
    fn seed_oom(&self, bytes: u64) -> AllocError {
        let info = self.device.mem_info();
        AllocError::OutOfMemory(Box::new(OomReport {
            exceeds_limit: false,
            preemptive: false,
            requested: bytes,
            rounded: bytes,
            device_request: bytes,
            device_free: info.free,
            device_total: info.total,
            allowed: self.allowed_memory_maximum,
            allocated: self.stats.allocated_bytes.all.current as u64,
            reserved: self.stats.reserved_bytes.all.current as u64,
        }))
    }
}

/// The bytes of a seeded segment or range: its blocks' sizes, each a
/// positive multiple of 512, summed without overflow.
fn seeded_size(blocks: &[SeedBlock]) -> Result<u64, AllocError> {
    if blocks.is_empty() || blocks.iter().any(|b| b.size == 0 || b.size % 512 != 0) {
        return Err(AllocError::Invalid(
            "a seeded segment needs blocks whose sizes are positive multiples of 512".into(),
        ));
    }
    // Sizes come from a trace file: their sum may overflow.
    blocks
        .iter()
        .try_fold(0u64, |sum, b| sum.checked_add(b.size))
        .filter(|&s| s < MAX_REQUEST)
        .ok_or_else(|| AllocError::Invalid("a seeded segment of 2^60 bytes or more".into()))
}
