//! The consistency checker: chunks tile their regions, the bins hold
//! exactly the free chunks, and every statistic equals its recomputation.

use std::collections::BTreeSet;

use super::bins::{BinKey, MIN_ALLOCATION_SIZE, NUM_BINS, bin_for};
use super::{BfcAllocator, Chunk, ChunkState, NIL, POOL, Region};
use crate::devices::Device;
use crate::policies::checks::{compare_stats, ensure};
use crate::policy::Invariants;
use crate::stats::MemoryStats;

/// What the checker recomputes from the chunks of the regions.
struct Tally {
    /// The statistics the chunks imply.
    want: MemoryStats,
    /// The free chunks, by bin.
    free_keys: [BTreeSet<BinKey>; NUM_BINS],
    /// Chunks reached from the regions.
    visited: usize,
    /// Chunks whose free is pending.
    pending: usize,
    /// Bytes of all regions.
    total: u64,
}

impl Tally {
    /// Counts chunk `c` by its state.
    fn count_chunk(&mut self, c: u32, ch: &Chunk) {
        let want = &mut self.want;
        match ch.state {
            ChunkState::Free => {
                bin_for(&mut self.free_keys, ch.size).insert(BinKey {
                    size: ch.size,
                    ptr: ch.ptr,
                    idx: c,
                });
                if ch.is_split() {
                    want.inactive_split.increase(POOL, 1);
                    want.inactive_split_bytes.increase(POOL, ch.size);
                }
            }
            ChunkState::Allocated => {
                want.allocation.increase(POOL, 1);
                want.allocated_bytes.increase(POOL, ch.size);
                want.active.increase(POOL, 1);
                want.active_bytes.increase(POOL, ch.size);
                want.requested_bytes.increase(POOL, ch.requested);
            }
            ChunkState::PendingFree => {
                self.pending += 1;
                want.active.increase(POOL, 1);
                want.active_bytes.increase(POOL, ch.size);
                want.requested_bytes.increase(POOL, ch.requested);
            }
        }
    }
}

impl<D: Device> Invariants for BfcAllocator<D> {
    fn check_invariants(&self) -> Result<(), String> {
        let mut t = Tally {
            want: MemoryStats::new(u64::MAX),
            free_keys: std::array::from_fn(|_| BTreeSet::new()),
            visited: 0,
            pending: 0,
            total: 0,
        };
        for (&base, r) in &self.regions {
            self.check_region(base, r, &mut t)?;
        }
        self.check_totals(&t)?;
        compare_stats(&self.stats, &t.want)
    }
}

impl<D: Device> BfcAllocator<D> {
    /// Region `base`: its first chunk starts it and its chunks tile it, in
    /// address order, with no two free neighbours left unmerged.
    fn check_region(&self, base: u64, r: &Region, t: &mut Tally) -> Result<(), String> {
        ensure!(
            self.chunks.is_live(r.first),
            "region {base:#x}: first chunk is not live"
        );
        ensure!(
            self.chunks[r.first].prev == NIL && self.chunks[r.first].ptr == base,
            "region {base:#x}: its first chunk does not start it"
        );
        t.want.segment.increase(POOL, 1);
        t.want.reserved_bytes.increase(POOL, r.size);
        t.total += r.size;
        let mut end = base;
        let mut c = r.first;
        let mut prev = NIL;
        while c != NIL {
            ensure!(self.chunks.is_live(c), "region {base:#x}: dead chunk {c}");
            let ch = &self.chunks[c];
            t.visited += 1;
            ensure!(
                ch.prev == prev,
                "chunk {c} at {:#x}: prev link broken",
                ch.ptr
            );
            ensure!(
                ch.ptr == end,
                "chunk {c} at {:#x}: gap or overlap (expected {end:#x})",
                ch.ptr
            );
            ensure!(
                ch.size > 0 && ch.size % MIN_ALLOCATION_SIZE == 0,
                "chunk {c} at {:#x} has size {}",
                ch.ptr,
                ch.size
            );
            if prev != NIL {
                ensure!(
                    !(self.chunks[prev].state == ChunkState::Free && ch.state == ChunkState::Free),
                    "chunks {prev} and {c} at {:#x} are adjacent free chunks that were not merged",
                    ch.ptr
                );
            }
            t.count_chunk(c, ch);
            end = ch.ptr + ch.size;
            prev = c;
            c = ch.next;
        }
        ensure!(
            end == base + r.size,
            "region {base:#x}: chunks cover {} of {} bytes",
            end - base,
            r.size
        );
        Ok(())
    }

    /// Every live chunk is in a region, the bins hold exactly the free
    /// chunks, the pending list the pending ones, and the regions' bytes
    /// match the running total and stay under the limit.
    fn check_totals(&self, t: &Tally) -> Result<(), String> {
        ensure!(
            t.visited == self.chunks.len(),
            "{} live chunks but {} reachable from regions",
            self.chunks.len(),
            t.visited
        );
        for (b, (got, want_b)) in self.bins.iter().zip(t.free_keys.iter()).enumerate() {
            ensure!(
                got == want_b,
                "bin {b}: {} chunks in the bin, {} free chunks of its size",
                got.len(),
                want_b.len()
            );
        }
        ensure!(
            t.pending == self.trace_pending.len(),
            "{} pending chunks but {} queued",
            t.pending,
            self.trace_pending.len()
        );
        let total = t.total;
        ensure!(
            total == self.total_region_allocated_bytes,
            "regions hold {total} bytes but total_region_allocated_bytes is {}",
            self.total_region_allocated_bytes
        );
        ensure!(
            total <= self.memory_limit,
            "regions hold {total} bytes, above the {} byte limit",
            self.memory_limit
        );
        Ok(())
    }
}
