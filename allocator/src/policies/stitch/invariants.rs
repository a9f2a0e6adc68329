//! The consistency checker: blocks tile their physical segments, every
//! sBlock's pieces are stitched into it, the free and cached sets hold
//! exactly the free blocks and sBlocks, and every statistic equals its
//! recomputation.

use std::collections::BTreeSet;

use super::rounding::{GRANULARITY, MIN_BLOCK_SIZE};
use super::{Block, FreeKey, NIL, Segment, State, StitchAllocator};
use crate::devices::Device;
use crate::policies::checks::{compare_stats, ensure};
use crate::policy::Invariants;
use crate::stats::{MemoryStats, PoolKind};

/// What the checker recomputes from the blocks.
struct Tally {
    /// The statistics the blocks imply.
    want: MemoryStats,
    /// Free plain blocks, `[small, large]`.
    free_keys: [BTreeSet<FreeKey>; 2],
    /// Free (cached) sBlocks.
    cached: BTreeSet<FreeKey>,
    /// Blocks reached from the segments, plus the sBlocks.
    visited: usize,
    /// Blocks whose free is pending.
    pending: usize,
    /// Bytes of all sBlocks.
    stitched: u64,
}

impl Tally {
    /// Counts a block the caller holds (allocated or pending free).
    fn count_caller_block(&mut self, b: &Block) {
        let want = &mut self.want;
        match b.state {
            State::Allocated => {
                want.allocation.increase(b.pool, 1);
                want.allocated_bytes.increase(b.pool, b.size);
                want.active.increase(b.pool, 1);
                want.active_bytes.increase(b.pool, b.size);
                want.requested_bytes.increase(b.pool, b.requested);
            }
            State::PendingFree => {
                self.pending += 1;
                want.active.increase(b.pool, 1);
                want.active_bytes.increase(b.pool, b.size);
                want.requested_bytes.increase(b.pool, b.requested);
            }
            State::Free | State::Stitched(_) => {}
        }
    }
}

impl<D: Device> Invariants for StitchAllocator<D> {
    fn check_invariants(&self) -> Result<(), String> {
        let mut t = Tally {
            want: MemoryStats::new(u64::MAX),
            free_keys: [BTreeSet::new(), BTreeSet::new()],
            cached: BTreeSet::new(),
            visited: 0,
            pending: 0,
            stitched: 0,
        };
        for si in self.segments.live() {
            self.check_segment(si, &self.segments[si], &mut t)?;
        }
        for i in self.blocks.live() {
            let b = &self.blocks[i];
            if b.is_sblock() {
                self.check_sblock(i, b, &mut t)?;
            }
        }
        self.check_sets(&t)?;
        compare_stats(&self.stats, &t.want)
    }
}

impl<D: Device> StitchAllocator<D> {
    /// Physical segment `si`: a whole number of units of its pool, tiled by
    /// its blocks in address order (same pool and stream, no two free
    /// neighbours left unmerged); a stitched piece is listed by its sBlock.
    fn check_segment(&self, si: u32, seg: &Segment, t: &mut Tally) -> Result<(), String> {
        t.want.segment.increase(seg.pool, 1);
        t.want.reserved_bytes.increase(seg.pool, seg.size);
        let unit = match seg.pool {
            PoolKind::Small => MIN_BLOCK_SIZE,
            PoolKind::Large => GRANULARITY,
        };
        ensure!(
            seg.size % unit == 0,
            "segment {:#x}: size {} is not a multiple of {unit}",
            seg.ptr,
            seg.size
        );
        let mut end = seg.ptr;
        let mut prev = NIL;
        let mut i = seg.first;
        while i != NIL {
            ensure!(
                self.blocks.is_live(i),
                "segment {:#x}: dead block {i}",
                seg.ptr
            );
            let b = &self.blocks[i];
            t.visited += 1;
            ensure!(b.seg == si, "block {i} at {:#x}: wrong segment", b.ptr);
            ensure!(
                b.prev == prev,
                "block {i} at {:#x}: prev link broken",
                b.ptr
            );
            ensure!(
                b.ptr == end,
                "block {i} at {:#x}: gap or overlap (expected {end:#x})",
                b.ptr
            );
            ensure!(
                b.size > 0 && b.size % unit == 0,
                "block {i} at {:#x} has size {} (unit {unit})",
                b.ptr,
                b.size
            );
            ensure!(
                b.pool == seg.pool && b.stream == seg.stream,
                "block {i} at {:#x}: pool or stream differs from its segment",
                b.ptr
            );
            if prev != NIL {
                ensure!(
                    !(self.blocks[prev].state == State::Free && b.state == State::Free),
                    "blocks {prev} and {i} at {:#x} are adjacent free blocks that were not merged",
                    b.ptr
                );
            }
            match b.state {
                State::Free => {
                    b.pool.select_mut(&mut t.free_keys).insert(FreeKey {
                        stream: b.stream,
                        size: b.size,
                        ptr: b.ptr,
                        idx: i,
                    });
                    if b.is_split() {
                        t.want.inactive_split.increase(b.pool, 1);
                        t.want.inactive_split_bytes.increase(b.pool, b.size);
                    }
                }
                State::Stitched(s) => {
                    ensure!(
                        self.blocks.is_live(s)
                            && self.blocks[s].is_sblock()
                            && self.blocks[s].sources.contains(&i),
                        "piece {i} at {:#x}: its sBlock {s} does not list it",
                        b.ptr
                    );
                }
                _ => t.count_caller_block(b),
            }
            end = b.ptr + b.size;
            prev = i;
            i = b.next;
        }
        ensure!(
            end == seg.ptr + seg.size,
            "segment {:#x}: blocks cover {} of {} bytes",
            seg.ptr,
            end - seg.ptr,
            seg.size
        );
        Ok(())
    }

    /// sBlock `i`: a lone large block of at least two pieces of its stream,
    /// each stitched into it, together exactly its size.
    fn check_sblock(&self, i: u32, b: &Block, t: &mut Tally) -> Result<(), String> {
        t.visited += 1;
        t.stitched += b.size;
        ensure!(
            b.pool == PoolKind::Large && b.prev == NIL && b.next == NIL,
            "sBlock {i}: not a lone large block"
        );
        ensure!(
            b.sources.len() >= 2,
            "sBlock {i} at {:#x} has {} pieces",
            b.ptr,
            b.sources.len()
        );
        let mut sum = 0u64;
        for &piece in &b.sources {
            ensure!(
                self.blocks.is_live(piece) && self.blocks[piece].state == State::Stitched(i),
                "sBlock {i}: piece {piece} is not stitched into it"
            );
            ensure!(
                self.blocks[piece].stream == b.stream,
                "sBlock {i}: piece {piece} is on another stream"
            );
            sum += self.blocks[piece].size;
        }
        ensure!(
            sum == b.size,
            "sBlock {i} at {:#x}: pieces hold {sum} of {} bytes",
            b.ptr,
            b.size
        );
        match b.state {
            State::Free => {
                t.cached.insert(FreeKey {
                    stream: b.stream,
                    size: b.size,
                    ptr: b.ptr,
                    idx: i,
                });
            }
            State::Stitched(_) => return Err(format!("sBlock {i} is itself stitched")),
            _ => t.count_caller_block(b),
        }
        Ok(())
    }

    /// Every live block was reached; the pools, the cached set and the
    /// pending queues hold exactly what the blocks say, and the sBlocks'
    /// bytes match the running total.
    fn check_sets(&self, t: &Tally) -> Result<(), String> {
        ensure!(
            t.visited == self.blocks.len(),
            "{} live blocks but {} reachable",
            self.blocks.len(),
            t.visited
        );
        for kind in [PoolKind::Small, PoolKind::Large] {
            let (want_free, pool) = (kind.select(&t.free_keys), kind.select(&self.pools));
            ensure!(
                want_free == pool,
                "{} pool: the free set differs from the free blocks ({} in set, {} free blocks)",
                kind.name(),
                pool.len(),
                want_free.len()
            );
        }
        ensure!(
            t.cached == self.cached,
            "the cached sBlock set differs from the free sBlocks"
        );
        ensure!(
            t.pending == self.trace_pending.len() + self.stream_event_queue.len(),
            "{} pending blocks but {} queued",
            t.pending,
            self.trace_pending.len() + self.stream_event_queue.len()
        );
        ensure!(
            t.stitched == self.stitched_bytes,
            "sBlocks hold {} bytes but stitched_bytes is {}",
            t.stitched,
            self.stitched_bytes
        );
        Ok(())
    }
}
