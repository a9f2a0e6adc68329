//! The consistency checker: blocks tile their segments, the pool sets hold
//! exactly the free blocks, and every statistic equals its recomputation.

use std::collections::BTreeSet;

use super::NativeAllocator;
use super::block::{Block, NIL, State};
use super::pool::PoolRef;
use super::pool::{FreeKey, UnmappedKey};
use crate::devices::Device;
use crate::policies::checks::{ensure, stat_pairs};
use crate::policy::Invariants;
use crate::stats::MemoryStats;

/// What the checker recomputes from the blocks.
struct Tally {
    /// The statistics the blocks imply.
    expect: MemoryStats,
    /// Free mapped blocks, by pool.
    free_keys: std::collections::BTreeMap<PoolRef, BTreeSet<FreeKey>>,
    /// Unmapped blocks, by pool.
    unmapped_keys: std::collections::BTreeMap<PoolRef, BTreeSet<UnmappedKey>>,
    /// Bytes of all mapped blocks.
    mapped_total: u64,
    /// Blocks whose free is pending.
    pending: usize,
}

impl Tally {
    /// Counts block `idx` by its state: free blocks into their pool's set,
    /// the caller's blocks into the statistics.
    fn count_state(&mut self, idx: u32, b: &Block, mss: u64) {
        let expect = &mut self.expect;
        match b.state {
            State::Free if b.mapped => {
                self.free_keys.entry(b.pool).or_default().insert(FreeKey {
                    stream: b.stream,
                    size: b.size,
                    counter: b.counter,
                    ptr: b.ptr,
                    idx,
                });
                if b.is_split() && !b.is_expandable() {
                    expect.inactive_split.increase(b.pool, 1);
                    expect.inactive_split_bytes.increase(b.pool, b.size);
                }
            }
            State::Free => {
                self.unmapped_keys
                    .entry(b.pool)
                    .or_default()
                    .insert(UnmappedKey {
                        stream: b.stream,
                        ptr: b.ptr,
                        idx,
                    });
            }
            State::Allocated => {
                expect.allocation.increase(b.pool, 1);
                expect.allocated_bytes.increase(b.pool, b.size);
                expect.active.increase(b.pool, 1);
                expect.active_bytes.increase(b.pool, b.size);
                expect.requested_bytes.increase(b.pool, b.requested);
                if b.size >= mss {
                    expect.oversize_allocations.increase(1);
                }
            }
            State::PendingFree => {
                self.pending += 1;
                expect.active.increase(b.pool, 1);
                expect.active_bytes.increase(b.pool, b.size);
                expect.requested_bytes.increase(b.pool, b.requested);
            }
        }
    }
}

impl<D: Device> Invariants for NativeAllocator<D> {
    fn check_invariants(&self) -> Result<(), String> {
        let mss = self.max_split_size();
        let mut t = Tally {
            expect: MemoryStats::new(mss),
            free_keys: Default::default(),
            unmapped_keys: Default::default(),
            mapped_total: 0,
            pending: 0,
        };
        for idx in self.arena.live() {
            let b = &self.arena[idx];
            self.check_links(idx, b)?;
            self.count_mapping(idx, b, mss, &mut t)?;
            t.count_state(idx, b, mss);
        }
        self.check_pools(&t)?;
        self.check_totals(&t)?;
        self.check_stats(&t.expect)
    }
}

impl<D: Device> NativeAllocator<D> {
    /// Block `idx`: a positive multiple of 512 bytes, linked both ways to
    /// its neighbours, which touch it without gap or overlap, share its
    /// pool, stream and segment, and are not a free block left unmerged.
    fn check_links(&self, idx: u32, b: &Block) -> Result<(), String> {
        ensure!(
            b.size > 0 && b.size % 512 == 0,
            "block {idx} at {:#x} has size {}",
            b.ptr,
            b.size
        );
        if b.prev != NIL {
            let p = &self.arena[b.prev];
            ensure!(p.next == idx, "block {idx}: prev.next does not point back");
            ensure!(
                p.ptr + p.size == b.ptr,
                "block {idx} at {:#x}: gap or overlap with prev",
                b.ptr
            );
            ensure!(
                p.pool == b.pool && p.stream == b.stream,
                "block {idx}: prev in another pool/stream"
            );
            ensure!(
                p.expandable == b.expandable,
                "block {idx}: prev in another segment"
            );
            ensure!(
                !(p.mapped == b.mapped
                    && p.state == State::Free
                    && b.state == State::Free
                    && p.event_count == 0),
                "blocks {} and {idx} at {:#x} are adjacent free blocks that were not merged",
                b.prev,
                b.ptr
            );
        }
        if b.next != NIL {
            let n = &self.arena[b.next];
            ensure!(n.prev == idx, "block {idx}: next.prev does not point back");
            ensure!(
                b.ptr + b.size == n.ptr,
                "block {idx} at {:#x}: gap or overlap with next",
                b.ptr
            );
        }
        Ok(())
    }

    /// Counts the bytes of mapped block `idx` (and, at the head of a
    /// cudaMalloc segment, the segment); an unmapped block must be a free
    /// block of an expandable segment.
    fn count_mapping(&self, idx: u32, b: &Block, mss: u64, t: &mut Tally) -> Result<(), String> {
        if b.mapped {
            t.mapped_total += b.size;
            t.expect.reserved_bytes.increase(b.pool, b.size);
            if !b.is_expandable() && b.prev == NIL {
                let mut seg_size = 0;
                let mut c = idx;
                while c != NIL {
                    seg_size += self.arena[c].size;
                    c = self.arena[c].next;
                }
                t.expect.segment.increase(b.pool, 1);
                if seg_size >= mss {
                    t.expect.oversize_segments.increase(1);
                }
            }
        } else {
            ensure!(
                b.is_expandable(),
                "block {idx}: unmapped but not expandable"
            );
            ensure!(b.state == State::Free, "block {idx}: unmapped but not free");
        }
        Ok(())
    }

    /// Each pool's free set (and its cached largest sizes) and unmapped set
    /// hold exactly the free mapped and the unmapped blocks of the pool.
    fn check_pools(&self, t: &Tally) -> Result<(), String> {
        for (r, pool) in self.pools.iter() {
            let kind = r.kind();
            let empty = BTreeSet::new();
            let free = t.free_keys.get(&r).unwrap_or(&empty);
            let in_set: BTreeSet<FreeKey> = pool.iter().collect();
            ensure!(
                *free == in_set && in_set.len() == pool.len(),
                "{} pool: the free set differs from the free blocks ({} in set, {} free blocks)",
                kind.name(),
                pool.len(),
                free.len()
            );
            pool.check_max()
                .map_err(|e| format!("{} pool: {e}", kind.name()))?;
            let unmapped: BTreeSet<UnmappedKey> = pool.unmapped_iter().collect();
            let no_unmapped = BTreeSet::new();
            ensure!(
                *t.unmapped_keys.get(&r).unwrap_or(&no_unmapped) == unmapped,
                "{} pool: the unmapped set differs from the unmapped blocks",
                kind.name()
            );
        }
        Ok(())
    }

    /// The pending queues hold the pending-free blocks, and the mapped bytes
    /// are what the allocator obtained from the device.
    fn check_totals(&self, t: &Tally) -> Result<(), String> {
        ensure!(
            t.pending == self.trace_pending.len() + self.stream_event_queue.len(),
            "{} pending-free blocks but {} queued",
            t.pending,
            self.trace_pending.len() + self.stream_event_queue.len()
        );
        ensure!(
            t.mapped_total == self.total_allocated_memory,
            "mapped bytes {} != total_allocated_memory {}",
            t.mapped_total,
            self.total_allocated_memory
        );
        Ok(())
    }

    /// Every statistic's current value equals the blocks' (`expect`), and
    /// every running statistic has `current == allocated - freed` and
    /// `peak >= current`; then the oversize counts.
    fn check_stats(&self, expect: &MemoryStats) -> Result<(), String> {
        let s = &self.stats;
        for (name, got, want) in stat_pairs(s, expect) {
            for (pool, g, w) in [
                ("all", got.all.current, want.all.current),
                (
                    "small_pool",
                    got.small_pool.current,
                    want.small_pool.current,
                ),
                (
                    "large_pool",
                    got.large_pool.current,
                    want.large_pool.current,
                ),
            ] {
                ensure!(
                    g == w,
                    "{name}.{pool}.current is {g} but the blocks say {w}"
                );
            }
            for (pool, st) in [
                ("all", &got.all),
                ("small_pool", &got.small_pool),
                ("large_pool", &got.large_pool),
            ] {
                ensure!(
                    st.current == st.allocated.wrapping_sub(st.freed) && st.peak >= st.current,
                    "{name}.{pool}: current/allocated/freed/peak inconsistent"
                );
            }
        }
        ensure!(
            s.oversize_allocations.current == expect.oversize_allocations.current,
            "oversize_allocations.current is {} but the blocks say {}",
            s.oversize_allocations.current,
            expect.oversize_allocations.current
        );
        ensure!(
            s.oversize_segments.current == expect.oversize_segments.current,
            "oversize_segments.current is {} but the blocks say {}",
            s.oversize_segments.current,
            expect.oversize_segments.current
        );
        Ok(())
    }
}
