//! The consistency checker: blocks tile their chunks, each free set holds
//! exactly the free blocks of its reuse class, and every statistic equals
//! its recomputation.

use std::collections::BTreeSet;

use super::{ALIGNMENT, AsyncPoolAllocator, Block, Chunk, NIL, POOL, Reuse, SizeKey, StreamKey};
use crate::devices::Device;
use crate::policies::checks::{compare_stats, ensure};
use crate::policy::Invariants;
use crate::stats::MemoryStats;

/// What the checker recomputes from the blocks of the chunks.
struct Tally {
    /// The statistics the blocks imply.
    want: MemoryStats,
    /// Free stream-private blocks.
    by_stream: BTreeSet<StreamKey>,
    /// Free blocks of the unifying stream.
    unified: BTreeSet<SizeKey>,
    /// Free blocks every stream may reuse.
    shared: BTreeSet<SizeKey>,
    /// Blocks reached from the chunks.
    visited: usize,
}

impl<D: Device> Invariants for AsyncPoolAllocator<D> {
    fn check_invariants(&self) -> Result<(), String> {
        let mut t = Tally {
            want: MemoryStats::new(u64::MAX),
            by_stream: BTreeSet::new(),
            unified: BTreeSet::new(),
            shared: BTreeSet::new(),
            visited: 0,
        };
        for (&base, c) in &self.chunks {
            self.check_chunk(base, c, &mut t)?;
        }
        self.check_free_sets(&t)?;
        compare_stats(&self.stats, &t.want)
    }
}

impl<D: Device> AsyncPoolAllocator<D> {
    /// Chunk `base`: a whole number of granules, tiled by its blocks in
    /// address order, with no two free neighbours of one reuse class left
    /// unmerged.
    fn check_chunk(&self, base: u64, c: &Chunk, t: &mut Tally) -> Result<(), String> {
        ensure!(
            c.size > 0 && c.size % self.granularity == 0,
            "chunk {base:#x} has size {}, not a multiple of the {} byte granularity",
            c.size,
            self.granularity
        );
        t.want.segment.increase(POOL, 1);
        t.want.reserved_bytes.increase(POOL, c.size);
        let mut end = base;
        let mut prev = NIL;
        let mut i = c.first;
        while i != NIL {
            ensure!(self.blocks.is_live(i), "chunk {base:#x}: dead block {i}");
            let b = &self.blocks[i];
            t.visited += 1;
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
                b.size > 0 && b.size % ALIGNMENT == 0,
                "block {i} at {:#x} has size {}",
                b.ptr,
                b.size
            );
            if prev != NIL {
                let p = &self.blocks[prev];
                ensure!(
                    p.allocated || b.allocated || p.reuse != b.reuse,
                    "blocks {prev} and {i} at {:#x}: adjacent free blocks of one reuse class were not merged",
                    b.ptr
                );
            }
            self.count_block(i, b, t)?;
            end = b.ptr + b.size;
            prev = i;
            i = b.next;
        }
        ensure!(
            end == base + c.size,
            "chunk {base:#x}: blocks cover {} of {} bytes",
            end - base,
            c.size
        );
        Ok(())
    }

    /// Counts block `i`: allocated in the statistics, free in the set of
    /// its reuse class (a class `reuse_across_streams` never uses is an
    /// error).
    fn count_block(&self, i: u32, b: &Block, t: &mut Tally) -> Result<(), String> {
        let want = &mut t.want;
        if b.allocated {
            want.allocation.increase(POOL, 1);
            want.allocated_bytes.increase(POOL, b.size);
            want.active.increase(POOL, 1);
            want.active_bytes.increase(POOL, b.size);
            want.requested_bytes.increase(POOL, b.requested);
            return Ok(());
        }
        if b.is_split() {
            want.inactive_split.increase(POOL, 1);
            want.inactive_split_bytes.increase(POOL, b.size);
        }
        let sk = SizeKey {
            size: b.size,
            ptr: b.ptr,
            idx: i,
        };
        match b.reuse {
            Reuse::Stream(stream) => {
                ensure!(
                    !self.settings.reuse_across_streams,
                    "block {i}: stream-private although reuse_across_streams is on"
                );
                t.by_stream.insert(StreamKey {
                    stream,
                    size: b.size,
                    ptr: b.ptr,
                    idx: i,
                });
            }
            Reuse::Unified => {
                ensure!(
                    !self.settings.reuse_across_streams,
                    "block {i}: unified although reuse_across_streams is on"
                );
                t.unified.insert(sk);
            }
            Reuse::Shared => {
                t.shared.insert(sk);
            }
        }
        Ok(())
    }

    /// Every live block is in a chunk and the free sets hold exactly the
    /// free blocks of their class.
    fn check_free_sets(&self, t: &Tally) -> Result<(), String> {
        ensure!(
            t.visited == self.blocks.len(),
            "{} live blocks but {} reachable from chunks",
            self.blocks.len(),
            t.visited
        );
        ensure!(
            t.by_stream == self.by_stream,
            "the per-stream free set differs from the free blocks"
        );
        ensure!(
            t.unified == self.unified,
            "the unified free set differs from the free blocks"
        );
        ensure!(
            t.shared == self.shared,
            "the shared free set differs from the free blocks"
        );
        Ok(())
    }
}
