//! The consistency checker: blocks tile their segments, the pool sets hold
//! exactly the free blocks, and every statistic equals its recomputation.

use std::collections::BTreeSet;

use super::NativeAllocator;
use super::block::{NIL, State};
use super::pool::{FreeKey, UnmappedKey};
use crate::devices::Device;
use crate::stats::{MemoryStats, PoolKind};

macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(format!($($arg)*));
        }
    };
}

impl<D: Device> NativeAllocator<D> {
    pub(super) fn check_invariants_impl(&self) -> Result<(), String> {
        let mss = self.max_split_size();
        let mut expect = MemoryStats::new(mss);
        let mut free_keys: [BTreeSet<FreeKey>; 2] = [BTreeSet::new(), BTreeSet::new()];
        let mut unmapped_keys: [BTreeSet<UnmappedKey>; 2] = [BTreeSet::new(), BTreeSet::new()];
        let mut mapped_total = 0u64;
        let mut pending = 0usize;
        for idx in self.arena.live() {
            let b = &self.arena[idx];
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
            if b.mapped {
                mapped_total += b.size;
                expect.reserved_bytes.increase(b.pool, b.size);
                if !b.is_expandable() && b.prev == NIL {
                    let mut seg_size = 0;
                    let mut c = idx;
                    while c != NIL {
                        seg_size += self.arena[c].size;
                        c = self.arena[c].next;
                    }
                    expect.segment.increase(b.pool, 1);
                    if seg_size >= mss {
                        expect.oversize_segments.increase(1);
                    }
                }
            } else {
                ensure!(
                    b.is_expandable(),
                    "block {idx}: unmapped but not expandable"
                );
                ensure!(b.state == State::Free, "block {idx}: unmapped but not free");
            }
            match b.state {
                State::Free if b.mapped => {
                    b.pool.select_mut(&mut free_keys).insert(FreeKey {
                        stream: b.stream,
                        size: b.size,
                        ptr: b.ptr,
                        idx,
                    });
                    if b.is_split() && !b.is_expandable() {
                        expect.inactive_split.increase(b.pool, 1);
                        expect.inactive_split_bytes.increase(b.pool, b.size);
                    }
                }
                State::Free => {
                    b.pool.select_mut(&mut unmapped_keys).insert(UnmappedKey {
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
                    pending += 1;
                    expect.active.increase(b.pool, 1);
                    expect.active_bytes.increase(b.pool, b.size);
                    expect.requested_bytes.increase(b.pool, b.requested);
                }
            }
        }
        for kind in [PoolKind::Small, PoolKind::Large] {
            let pool = self.pool(kind);
            let free = kind.select(&free_keys);
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
            ensure!(
                *kind.select(&unmapped_keys) == unmapped,
                "{} pool: the unmapped set differs from the unmapped blocks",
                kind.name()
            );
        }
        ensure!(
            pending == self.trace_pending.len() + self.stream_event_queue.len(),
            "{pending} pending-free blocks but {} queued",
            self.trace_pending.len() + self.stream_event_queue.len()
        );
        ensure!(
            mapped_total == self.total_allocated_memory,
            "mapped bytes {mapped_total} != total_allocated_memory {}",
            self.total_allocated_memory
        );
        let s = &self.stats;
        let pairs = [
            ("allocation", &s.allocation, &expect.allocation),
            ("segment", &s.segment, &expect.segment),
            ("active", &s.active, &expect.active),
            ("inactive_split", &s.inactive_split, &expect.inactive_split),
            (
                "allocated_bytes",
                &s.allocated_bytes,
                &expect.allocated_bytes,
            ),
            ("reserved_bytes", &s.reserved_bytes, &expect.reserved_bytes),
            ("active_bytes", &s.active_bytes, &expect.active_bytes),
            (
                "inactive_split_bytes",
                &s.inactive_split_bytes,
                &expect.inactive_split_bytes,
            ),
            (
                "requested_bytes",
                &s.requested_bytes,
                &expect.requested_bytes,
            ),
        ];
        for (name, got, want) in pairs {
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
