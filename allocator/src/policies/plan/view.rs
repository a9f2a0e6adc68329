//! What the plan policy holds ([`Inspect`]), its start from a recorded
//! state (the fallback's, [`Seed`]), its summed statistics and its
//! consistency checks ([`Invariants`]).

use super::{POOL, PlanAllocator};
use crate::devices::{Device, DevicePtr};
use crate::policies::checks::{compare_stats, ensure};
use crate::policy::{
    AllocError, BlockHandle, BlockState, BlockView, Inspect, Invariants, Seed, SeedBlock, SeedPool,
    SeedRange, SegmentView,
};
use crate::stats::MemoryStats;

impl<D: Device> PlanAllocator<D> {
    /// The summed statistics after a call: the fallback's and the arena's
    /// current figures, and the peaks of their sum.
    pub(super) fn sync(&mut self) {
        self.stats.set_sum(self.fallback.stats(), &self.own);
    }

    /// The arena's live blocks as (offset, size, state), by offset.
    fn planned_blocks(&self) -> Vec<(u64, u64, u64, BlockState)> {
        let mut v: Vec<(u64, u64, u64, BlockState)> = self
            .blocks
            .live()
            .map(|i| {
                let b = self.blocks[i];
                let state = if b.pending {
                    BlockState::PendingFree
                } else {
                    BlockState::Allocated
                };
                (b.offset, b.size, b.requested, state)
            })
            .collect();
        v.sort_unstable_by_key(|&(o, ..)| o);
        v
    }

    /// The arena as segments, one per run of mapped pages, each tiled by
    /// its live blocks and free gaps.
    fn arena_segments(&self) -> Vec<SegmentView> {
        let Some(base) = self.arena.base() else {
            return Vec::new();
        };
        let blocks = self.planned_blocks();
        let mut next = 0usize;
        let mut out = Vec::new();
        for (start, len) in self.arena.mapped_runs() {
            let end = start + len;
            let mut views = Vec::new();
            let mut at = start;
            while let Some(&(off, size, requested, state)) = blocks.get(next) {
                if off >= end {
                    break;
                }
                next += 1;
                if off > at {
                    views.push(free_block(base + at, off - at));
                }
                views.push(BlockView {
                    ptr: base + off,
                    size,
                    requested,
                    state,
                });
                at = at.max(off + size);
            }
            if end > at {
                views.push(free_block(base + at, end - at));
            }
            let mut seg = SegmentView::new((base + start, len), 0, POOL, views);
            seg.is_expandable = true;
            out.push(seg);
        }
        out
    }
}

fn free_block(ptr: DevicePtr, size: u64) -> BlockView {
    BlockView {
        ptr,
        size,
        requested: 0,
        state: BlockState::Free,
    }
}

impl<D: Device> Inspect for PlanAllocator<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "plan"
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        if !Self::is_planned(handle) {
            return self.fallback.block_ptr(handle);
        }
        match (self.resolve(handle), self.arena.base()) {
            (Ok(i), Some(base)) => base + self.blocks[i].offset,
            _ => 0,
        }
    }

    fn largest_free_block(&self) -> u64 {
        let gap = self
            .arena_segments()
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state == BlockState::Free)
            .map(|b| b.size)
            .max()
            .unwrap_or(0);
        gap.max(self.fallback.largest_free_block())
    }

    fn segments(&self) -> Vec<SegmentView> {
        let mut out = self.fallback.segments();
        out.extend(self.arena_segments());
        out.sort_by_key(|s| s.ptr);
        out
    }

    fn device(&self) -> &D {
        self.fallback.device()
    }

    fn device_mut(&mut self) -> &mut D {
        self.fallback.device_mut()
    }

    fn placement_may_have_decided(&self) -> bool {
        self.fallback.placement_may_have_decided()
    }
}

/// The blocks of a recorded state are the fallback's: the plan covers the
/// requests the trace holds.
impl<D: Device> Seed for PlanAllocator<D> {
    fn seed_segment(
        &mut self,
        pool: SeedPool,
        stream: u64,
        blocks: &[SeedBlock],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        let r = self.fallback.seed_segment(pool, stream, blocks);
        self.sync();
        r
    }

    fn seed_expandable(
        &mut self,
        pool: SeedPool,
        stream: u64,
        ranges: &[SeedRange<'_>],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        let r = self.fallback.seed_expandable(pool, stream, ranges);
        self.sync();
        r
    }
}

impl<D: Device> Invariants for PlanAllocator<D> {
    fn check_invariants(&self) -> Result<(), String> {
        self.fallback.check_invariants()?;
        let blocks = self.planned_blocks();
        let mut want = MemoryStats::new(u64::MAX);
        for (&(off, size, requested, state), next) in blocks
            .iter()
            .zip(blocks.iter().skip(1).map(Some).chain([None]))
        {
            if let Some(&(next_off, ..)) = next {
                ensure!(
                    off + size <= next_off,
                    "planned blocks at offsets {off} and {next_off} overlap"
                );
            }
            ensure!(
                self.arena.covers(off, size),
                "the planned block at offset {off} lies on a page that is not mapped"
            );
            want.active.increase(POOL, 1);
            want.active_bytes.increase(POOL, size);
            if state == BlockState::Allocated {
                want.allocation.increase(POOL, 1);
                want.allocated_bytes.increase(POOL, size);
                want.requested_bytes.increase(POOL, requested);
            }
        }
        want.segment.increase(POOL, self.arena.run_count() as u64);
        want.reserved_bytes.increase(POOL, self.arena.mapped());
        ensure!(
            self.occupied.len() == blocks.len()
                && blocks
                    .iter()
                    .all(|&(off, size, ..)| self.occupied.get(&off) == Some(&(off + size))),
            "the planned blocks' address ranges are stale"
        );
        let mut own = self.own;
        own.num_alloc_retries = 0;
        own.num_ooms = 0;
        own.num_device_alloc = 0;
        own.num_device_free = 0;
        compare_stats(&own, &want)?;
        let mut sum = self.stats;
        sum.set_sum(self.fallback.stats(), &self.own);
        ensure!(
            sum.reserved_bytes.all.current == self.stats.reserved_bytes.all.current
                && sum.allocated_bytes.all.current == self.stats.allocated_bytes.all.current,
            "the summed statistics are stale"
        );
        Ok(())
    }
}
