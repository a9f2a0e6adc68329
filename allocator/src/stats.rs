//! Allocator statistics, named exactly as `torch.cuda.memory_stats()` names
//! them (`allocated_bytes.all.peak`, `num_alloc_retries`, …).
//!
//! PyTorch keeps most statistics as a `StatArray`: one [`Stat`] each for
//! `all`, `small_pool` and `large_pool`. `memory_stats()` flattens the nested
//! dict with `.` and sorts the keys; [`MemoryStats::flatten`] does the same.

use std::collections::BTreeMap;

/// One statistic: current value, its peak, and cumulative increases/decreases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Stat {
    /// Current value.
    pub current: i64,
    /// Highest `current` since construction or the last peak reset.
    pub peak: i64,
    /// Sum of all increases.
    pub allocated: i64,
    /// Sum of all decreases.
    pub freed: i64,
}

impl Stat {
    /// Adds `amount` (PyTorch's `Stat::increase`). The arithmetic wraps like
    /// PyTorch's `int64_t` counters: the cumulative `allocated` passes 2^63
    /// after a few requests near the 2^60-byte limit, which must not abort
    /// a replay (debug builds check for overflow).
    #[inline]
    pub(crate) fn increase(&mut self, amount: u64) {
        let a = amount as i64;
        self.current = self.current.wrapping_add(a);
        self.allocated = self.allocated.wrapping_add(a);
        if self.current > self.peak {
            self.peak = self.current;
        }
    }

    /// Subtracts `amount` (PyTorch's `Stat::decrease`).
    #[inline]
    pub(crate) fn decrease(&mut self, amount: u64) {
        let a = amount as i64;
        self.current = self.current.wrapping_sub(a);
        self.freed = self.freed.wrapping_add(a);
    }

    /// Becomes `a + b` now (current, allocated, freed); its peak the
    /// highest sum seen.
    fn set_sum(&mut self, a: &Stat, b: &Stat) {
        self.current = a.current.wrapping_add(b.current);
        self.allocated = a.allocated.wrapping_add(b.allocated);
        self.freed = a.freed.wrapping_add(b.freed);
        self.peak = self.peak.max(self.current);
    }

    fn flatten_into(&self, prefix: &str, out: &mut BTreeMap<String, i64>) {
        out.insert(format!("{prefix}.allocated"), self.allocated);
        out.insert(format!("{prefix}.current"), self.current);
        out.insert(format!("{prefix}.freed"), self.freed);
        out.insert(format!("{prefix}.peak"), self.peak);
    }
}

/// Which pool a statistic update concerns, besides `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolKind {
    /// Blocks of rounded size ≤ 1 MiB (2 MiB segments).
    Small,
    /// Everything else.
    Large,
}

impl PoolKind {
    /// PyTorch's name of the pool in statistics and snapshots.
    pub fn name(self) -> &'static str {
        match self {
            PoolKind::Small => "small",
            PoolKind::Large => "large",
        }
    }

    /// This pool's entry of a per-pool pair stored as `[small, large]`.
    #[inline]
    pub(crate) fn select<T>(self, pair: &[T; 2]) -> &T {
        match self {
            PoolKind::Small => &pair[0],
            PoolKind::Large => &pair[1],
        }
    }

    /// Mutable [`PoolKind::select`].
    #[inline]
    pub(crate) fn select_mut<T>(self, pair: &mut [T; 2]) -> &mut T {
        match self {
            PoolKind::Small => &mut pair[0],
            PoolKind::Large => &mut pair[1],
        }
    }
}

/// A `StatArray`: `all`, `small_pool`, `large_pool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct StatArray {
    /// Both pools together.
    pub all: Stat,
    /// The small pool.
    pub small_pool: Stat,
    /// The large pool.
    pub large_pool: Stat,
}

impl StatArray {
    /// Increases `all` and the pool's entry.
    #[inline]
    pub fn increase(&mut self, pool: impl Into<PoolKind>, amount: u64) {
        let pool = pool.into();
        self.all.increase(amount);
        self.pool_mut(pool).increase(amount);
    }

    /// Decreases `all` and the pool's entry.
    #[inline]
    pub fn decrease(&mut self, pool: impl Into<PoolKind>, amount: u64) {
        let pool = pool.into();
        self.all.decrease(amount);
        self.pool_mut(pool).decrease(amount);
    }

    fn set_sum(&mut self, a: &StatArray, b: &StatArray) {
        self.all.set_sum(&a.all, &b.all);
        self.small_pool.set_sum(&a.small_pool, &b.small_pool);
        self.large_pool.set_sum(&a.large_pool, &b.large_pool);
    }

    #[inline]
    fn pool_mut(&mut self, pool: PoolKind) -> &mut Stat {
        match pool {
            PoolKind::Small => &mut self.small_pool,
            PoolKind::Large => &mut self.large_pool,
        }
    }

    fn flatten_into(&self, name: &str, out: &mut BTreeMap<String, i64>) {
        self.all.flatten_into(&format!("{name}.all"), out);
        self.large_pool
            .flatten_into(&format!("{name}.large_pool"), out);
        self.small_pool
            .flatten_into(&format!("{name}.small_pool"), out);
    }
}

/// PyTorch's `DeviceStats`: everything `torch.cuda.memory_stats()` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct MemoryStats {
    /// Blocks handed out to callers (count).
    pub allocation: StatArray,
    /// Segments obtained with cudaMalloc (count; not expandable mappings).
    pub segment: StatArray,
    /// Blocks allocated or awaiting stream events (count).
    pub active: StatArray,
    /// Free blocks that are part of a split segment (count).
    pub inactive_split: StatArray,
    /// Bytes handed out (rounded block sizes).
    pub allocated_bytes: StatArray,
    /// Bytes obtained from the device.
    pub reserved_bytes: StatArray,
    /// Bytes of active blocks.
    pub active_bytes: StatArray,
    /// Bytes of free blocks in split segments.
    pub inactive_split_bytes: StatArray,
    /// Bytes callers asked for (unrounded) of active blocks.
    pub requested_bytes: StatArray,
    /// Allocations of blocks of at least `max_split_size`.
    pub oversize_allocations: Stat,
    /// Segments of at least `max_split_size`.
    pub oversize_segments: Stat,
    /// Calls to `alloc_block` after a full cache flush.
    pub num_alloc_retries: i64,
    /// Out-of-memory errors raised.
    pub num_ooms: i64,
    /// `synchronize_and_free_events` calls (each empty_cache and OOM flush).
    pub num_sync_all_streams: i64,
    /// Successful device allocations (cudaMalloc and map calls).
    pub num_device_alloc: i64,
    /// Device frees (cudaFree and unmap calls that released memory).
    pub num_device_free: i64,
    /// `max_split_size` captured at construction, `-1` when unlimited.
    pub max_split_size: i64,
}

impl MemoryStats {
    /// Stats of a fresh allocator whose max split size is `max_split_size`
    /// bytes (`u64::MAX` = unlimited, reported as -1 like PyTorch's cast).
    pub fn new(max_split_size: u64) -> Self {
        MemoryStats {
            max_split_size: max_split_size as i64,
            ..Default::default()
        }
    }

    /// Two allocators' statistics as one (a policy made of two): `self`
    /// takes their sum now, and its peaks the highest sums seen (so the
    /// sum must be taken after every call that changes either).
    pub(crate) fn set_sum(&mut self, a: &MemoryStats, b: &MemoryStats) {
        self.allocation.set_sum(&a.allocation, &b.allocation);
        self.segment.set_sum(&a.segment, &b.segment);
        self.active.set_sum(&a.active, &b.active);
        self.inactive_split
            .set_sum(&a.inactive_split, &b.inactive_split);
        self.allocated_bytes
            .set_sum(&a.allocated_bytes, &b.allocated_bytes);
        self.reserved_bytes
            .set_sum(&a.reserved_bytes, &b.reserved_bytes);
        self.active_bytes.set_sum(&a.active_bytes, &b.active_bytes);
        self.inactive_split_bytes
            .set_sum(&a.inactive_split_bytes, &b.inactive_split_bytes);
        self.requested_bytes
            .set_sum(&a.requested_bytes, &b.requested_bytes);
        self.oversize_allocations
            .set_sum(&a.oversize_allocations, &b.oversize_allocations);
        self.oversize_segments
            .set_sum(&a.oversize_segments, &b.oversize_segments);
        self.num_alloc_retries = a.num_alloc_retries + b.num_alloc_retries;
        self.num_ooms = a.num_ooms + b.num_ooms;
        self.num_sync_all_streams = a.num_sync_all_streams + b.num_sync_all_streams;
        self.num_device_alloc = a.num_device_alloc + b.num_device_alloc;
        self.num_device_free = a.num_device_free + b.num_device_free;
        self.max_split_size = a.max_split_size;
    }

    /// The flat, sorted map `torch.cuda.memory_stats()` returns.
    pub fn flatten(&self) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        self.active.flatten_into("active", &mut out);
        self.active_bytes.flatten_into("active_bytes", &mut out);
        self.allocated_bytes
            .flatten_into("allocated_bytes", &mut out);
        self.allocation.flatten_into("allocation", &mut out);
        self.inactive_split.flatten_into("inactive_split", &mut out);
        self.inactive_split_bytes
            .flatten_into("inactive_split_bytes", &mut out);
        self.oversize_allocations
            .flatten_into("oversize_allocations", &mut out);
        self.oversize_segments
            .flatten_into("oversize_segments", &mut out);
        self.requested_bytes
            .flatten_into("requested_bytes", &mut out);
        self.reserved_bytes.flatten_into("reserved_bytes", &mut out);
        self.segment.flatten_into("segment", &mut out);
        out.insert("max_split_size".into(), self.max_split_size);
        out.insert("num_alloc_retries".into(), self.num_alloc_retries);
        out.insert("num_device_alloc".into(), self.num_device_alloc);
        out.insert("num_device_free".into(), self.num_device_free);
        out.insert("num_ooms".into(), self.num_ooms);
        out.insert("num_sync_all_streams".into(), self.num_sync_all_streams);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_names_match_pytorch() {
        let mut s = MemoryStats::new(u64::MAX);
        s.allocated_bytes.increase(PoolKind::Large, 4096);
        s.allocated_bytes.decrease(PoolKind::Large, 1024);
        let flat = s.flatten();
        assert_eq!(flat["allocated_bytes.all.current"], 3072);
        assert_eq!(flat["allocated_bytes.all.peak"], 4096);
        assert_eq!(flat["allocated_bytes.large_pool.allocated"], 4096);
        assert_eq!(flat["allocated_bytes.large_pool.freed"], 1024);
        assert_eq!(flat["allocated_bytes.small_pool.current"], 0);
        assert_eq!(flat["max_split_size"], -1);
        assert_eq!(flat["oversize_segments.peak"], 0);
        // 9 arrays x 3 pools x 4 + 2 single stats x 4 + 6 counters
        assert_eq!(flat.len(), 9 * 12 + 8 + 6);
    }
}
