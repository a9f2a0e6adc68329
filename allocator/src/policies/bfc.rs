//! `bfc`: TensorFlow's / XLA's best-fit-with-coalescing allocator
//! (`tsl::BFCAllocator`), the allocator behind TensorFlow and JAX on GPUs.
//!
//! # Rules and sources
//!
//! Read in `xla/tsl/framework/bfc_allocator.{h,cc}` (openxla/xla; the same
//! code lived in `tensorflow/tsl/framework/` and before that in
//! `tensorflow/core/common_runtime/`):
//!
//! * **Rounding** (`RoundedBytes`): every request is rounded up to a
//!   multiple of `kMinAllocationSize` = 256 bytes. A zero-byte request
//!   returns null ([`BlockHandle::NULL`]).
//! * **Bins** (`kNumBins` = 21, `BinNumForSize`): bin `b` holds free chunks
//!   of size in `[256 << b, 256 << (b + 1))`; bin 20 also holds everything
//!   larger (its lower bound is 256 MiB). Inside a bin, chunks are ordered by
//!   size, then address (`ChunkComparator`).
//! * **Best fit** (`FindChunkPtr`): starting at the request's bin, the first
//!   chunk of size ≥ the rounded request, moving to larger bins while none
//!   fits: the smallest fitting free chunk, the lowest address among equals.
//! * **Split** (`FindChunkPtr` → `SplitChunk`): the chosen chunk is split
//!   when `chunk >= 2 * rounded` or `chunk - rounded >=
//!   max_internal_fragmentation_bytes` (128 MiB, or `fragmentation_fraction
//!   × memory_limit` when that option is positive). The caller gets the
//!   front; the remainder becomes a free chunk at `ptr + rounded`.
//! * **Coalescing** (`DeallocateRawInternal` → `TryToCoalesce`): a freed
//!   chunk merges with a free next neighbour, then with a free previous
//!   neighbour, inside its region.
//! * **Regions** (`Extend`): when nothing fits, a new region is obtained
//!   from the sub-allocator (`cudaMalloc`; the default GPU sub-allocator does
//!   not coalesce regions). `available = memory_limit - allocated regions`,
//!   rounded down to 256; a request above it fails at once. The region size
//!   `curr_region_allocation_bytes_` starts at `RoundedBytes(min(memory_limit,
//!   2 MiB))` with `allow_growth`, else at `RoundedBytes(memory_limit)` (the
//!   whole limit: preallocation); it doubles until the request fits, and
//!   doubles once more after a successful region allocation that did not
//!   need to grow it. The sub-allocator is asked for `min(region size,
//!   available)` bytes; on failure the size is cut to
//!   `RoundedBytes(bytes × 0.9)` (computed in `float`, as in the source;
//!   strictly smaller each time) and retried until it would drop below the
//!   request (the current XLA loop; older TensorFlow only backpedalled once
//!   per allocator).
//! * **Garbage collection** (`DeallocateFreeRegions`, option
//!   `garbage_collection`, TensorFlow's `TF_ENABLE_GPU_GARBAGE_COLLECTION`):
//!   when extending fails, regions without any chunk in use are freed —
//!   if there are any and `rounded <= memory_limit - allocated + free
//!   region bytes` — and `Extend` is tried once more.
//! * **Preallocation**: without `allow_growth` the first request obtains one
//!   region of the whole limit, which is what TensorFlow does by default and
//!   what JAX does with `XLA_PYTHON_CLIENT_PREALLOCATE` (default) and
//!   `XLA_PYTHON_CLIENT_MEM_FRACTION` (default 0.75 of the device's total
//!   memory). The memory limit is `memory_limit`, else `memory_fraction ×`
//!   the device total reported at construction.
//!
//! vramlab choices where BFC has no counterpart:
//!
//! * BFC is not stream-aware (TensorFlow and XLA order work on one compute
//!   stream): the `stream` of a request is ignored and `record_stream` has no
//!   effect.
//! * A trace's deferred free (`free_requested`) keeps the chunk in use until
//!   its `free_completed` or the next `empty_cache`.
//! * `empty_cache` (PyTorch's call, BFC has none) completes deferred frees and
//!   frees every region without a chunk in use (`DeallocateRegions`), with
//!   or without `garbage_collection`.
//! * Requests of 2^60 bytes or more are refused like PyTorch's front end does.
//! * Statistics use PyTorch's names: `reserved_bytes` = region bytes
//!   (BFC's `pool_bytes`), `allocated_bytes` = bytes of chunks in use
//!   (`bytes_in_use`), `segment` = regions, `inactive_split` = free chunks of
//!   regions holding more than one chunk, `num_alloc_retries` = garbage
//!   collections that freed regions, `num_sync_all_streams` = `empty_cache`
//!   calls. There is one pool: everything is counted in `large_pool`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use super::common::{
    MAX_REQUEST, NIL, Slots, compare_stats, ensure, exceeds_limit, out_of_memory, parse_bool,
    parse_bytes, parse_number, round_up, size_string, split_settings,
};
use crate::devices::{Device, DeviceError, DevicePtr};
use crate::policy::{AllocError, Allocator, BlockHandle, BlockState, BlockView, SegmentView};
use crate::stats::{MemoryStats, PoolKind};

/// `kNumBins`.
pub const NUM_BINS: usize = 21;
/// `kMinAllocationSize`: the rounding unit and the smallest chunk.
pub const MIN_ALLOCATION_SIZE: u64 = 256;
/// Default `max_internal_fragmentation_bytes` (128 MiB).
pub const DEFAULT_MAX_INTERNAL_FRAGMENTATION: u64 = 128 << 20;
/// Initial region size with `allow_growth` (2 MiB, or the limit if smaller).
pub const INITIAL_GROWTH_REGION: u64 = 2 << 20;
/// `kBackpedalFactor`.
const BACKPEDAL_FACTOR: f32 = 0.9;

const POOL: PoolKind = PoolKind::Large;

/// `BinNumForSize`: the bin of a chunk of `bytes` bytes.
#[inline]
pub fn bin_num_for_size(bytes: u64) -> usize {
    let v = bytes.max(MIN_ALLOCATION_SIZE) >> 8;
    ((63 - v.leading_zeros()) as usize).min(NUM_BINS - 1)
}

/// The entry of a per-bin table (`bins`, or the checker's copy) for chunks
/// of `bytes` bytes.
// Indexing: `bin_num_for_size` clamps to `NUM_BINS - 1` and the table has
// `NUM_BINS` entries by its type.
#[allow(clippy::indexing_slicing)]
#[inline]
fn bin_for<T>(bins: &mut [T; NUM_BINS], bytes: u64) -> &mut T {
    &mut bins[bin_num_for_size(bytes)]
}

/// `RoundedBytes`: `bytes` rounded up to a multiple of 256.
#[inline]
pub fn rounded_bytes(bytes: u64) -> u64 {
    round_up(bytes, MIN_ALLOCATION_SIZE)
}

/// Settings of the `bfc` policy.
///
/// Settings string keys: `allow_growth` (bool), `memory_limit` (size,
/// e.g. `8GiB`), `memory_fraction` (fraction of the device's total memory,
/// in (0, 1]; used when `memory_limit` is absent), `preallocate` (a
/// fraction: JAX's shorthand for `allow_growth:false,memory_fraction:F`),
/// `garbage_collection` (bool), `fragmentation_fraction` (in [0, 1]; 0 =
/// the 128 MiB split cap). Example: `allow_growth:true,memory_limit:8GiB,
/// garbage_collection:true`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Grow regions on demand (`allow_growth`) instead of one region of the
    /// whole limit.
    pub allow_growth: bool,
    /// Absolute memory limit in bytes; overrides `memory_fraction`.
    pub memory_limit: Option<u64>,
    /// Fraction of the device's total memory used as the limit when
    /// `memory_limit` is `None` (JAX's `XLA_PYTHON_CLIENT_MEM_FRACTION`).
    pub memory_fraction: f64,
    /// Free whole unused regions and retry when extending fails.
    pub garbage_collection: bool,
    /// `Options::fragmentation_fraction`: when positive, the split cap is
    /// this fraction of the memory limit instead of 128 MiB.
    pub fragmentation_fraction: f64,
}

impl Default for Config {
    /// JAX's defaults: preallocate 75 % of the device, no garbage collection.
    fn default() -> Self {
        Config {
            allow_growth: false,
            memory_limit: None,
            memory_fraction: 0.75,
            garbage_collection: false,
            fragmentation_fraction: 0.0,
        }
    }
}

impl Config {
    /// Parses a settings string (see [`Config`] for the keys). Keys not
    /// given keep their default.
    pub fn parse(s: &str) -> Result<Config, String> {
        const P: &str = "bfc";
        let pairs = split_settings(
            P,
            s,
            &[
                "allow_growth",
                "memory_limit",
                "memory_fraction",
                "preallocate",
                "garbage_collection",
                "fragmentation_fraction",
            ],
        )?;
        let mut c = Config::default();
        let has = |k: &str| pairs.iter().any(|(key, _)| *key == k);
        if has("memory_limit") && has("memory_fraction") {
            return Err(
                "bfc settings memory_limit and memory_fraction exclude each other".to_string(),
            );
        }
        if has("preallocate") && (has("allow_growth") || has("memory_fraction")) {
            return Err("bfc setting preallocate:F stands for allow_growth:false,memory_fraction:F; do not combine it with allow_growth or memory_fraction".to_string());
        }
        for (k, v) in pairs {
            match k {
                "allow_growth" => c.allow_growth = parse_bool(P, k, v)?,
                "memory_limit" => {
                    let n = parse_bytes(P, k, v)?;
                    if n == 0 {
                        return Err("bfc setting memory_limit: must be more than 0 bytes".into());
                    }
                    c.memory_limit = Some(n);
                }
                "memory_fraction" => c.memory_fraction = parse_number(P, k, v, 0.0, true, 1.0)?,
                "preallocate" => {
                    c.allow_growth = false;
                    c.memory_fraction = parse_number(P, k, v, 0.0, true, 1.0)?;
                }
                "garbage_collection" => c.garbage_collection = parse_bool(P, k, v)?,
                "fragmentation_fraction" => {
                    c.fragmentation_fraction = parse_number(P, k, v, 0.0, false, 1.0)?
                }
                _ => unreachable!("split_settings only returns known keys"),
            }
        }
        Ok(c)
    }
}

impl fmt::Display for Config {
    /// The canonical settings string, every key spelled out:
    /// `allow_growth:false,memory_fraction:0.75,garbage_collection:false,fragmentation_fraction:0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "allow_growth:{},", self.allow_growth)?;
        match self.memory_limit {
            Some(n) => write!(f, "memory_limit:{},", size_string(n))?,
            None => write!(f, "memory_fraction:{},", self.memory_fraction)?,
        }
        write!(
            f,
            "garbage_collection:{},fragmentation_fraction:{}",
            self.garbage_collection, self.fragmentation_fraction
        )
    }
}

impl FromStr for Config {
    type Err = String;
    fn from_str(s: &str) -> Result<Config, String> {
        Config::parse(s)
    }
}

/// State of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// In a bin.
    Free,
    /// Handed out.
    Allocated,
    /// Freed by the caller, completion pending (trace deferred free).
    PendingFree,
}

/// A piece of a region (`BFCAllocator::Chunk`).
#[derive(Debug, Clone, Copy)]
struct Chunk {
    ptr: u64,
    size: u64,
    requested: u64,
    prev: u32,
    next: u32,
    state: ChunkState,
}

impl Chunk {
    #[inline]
    fn is_split(&self) -> bool {
        self.prev != NIL || self.next != NIL
    }
}

/// Sort key of a free chunk inside its bin: size, then address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct BinKey {
    size: u64,
    ptr: u64,
    idx: u32,
}

/// One sub-allocator allocation (`AllocationRegion`).
#[derive(Debug, Clone, Copy)]
struct Region {
    size: u64,
    /// The chunk at the region's base (it never changes: merges keep the
    /// lower chunk).
    first: u32,
}

/// TensorFlow's / XLA's BFC allocator over a device.
#[derive(Debug, Clone)]
pub struct BfcAllocator<D: Device> {
    config: Config,
    device: D,
    chunks: Slots<Chunk>,
    bins: [BTreeSet<BinKey>; NUM_BINS],
    /// Regions by base address.
    regions: BTreeMap<u64, Region>,
    memory_limit: u64,
    curr_region_allocation_bytes: u64,
    total_region_allocated_bytes: u64,
    max_internal_fragmentation_bytes: u64,
    /// Bytes of the last sub-allocator request (for OOM reports).
    last_device_request: u64,
    /// Chunks whose trace-deferred free has not completed.
    trace_pending: crate::pending::PendingList,
    /// Reusable buffer of region addresses.
    scratch: Vec<u64>,
    stats: MemoryStats,
}

impl<D: Device> BfcAllocator<D> {
    /// A fresh allocator: the memory limit is fixed here (`memory_limit`, or
    /// `memory_fraction` of the device total). No memory is obtained before
    /// the first request.
    pub fn new(config: Config, device: D) -> Self {
        let total = device.mem_info().total;
        let memory_limit = config
            .memory_limit
            .unwrap_or((config.memory_fraction * total as f64) as u64);
        let curr = if config.allow_growth {
            rounded_bytes(memory_limit.min(INITIAL_GROWTH_REGION))
        } else {
            rounded_bytes(memory_limit)
        };
        let max_frag = if config.fragmentation_fraction > 0.0 {
            (config.fragmentation_fraction * memory_limit as f64) as u64
        } else {
            DEFAULT_MAX_INTERNAL_FRAGMENTATION
        };
        BfcAllocator {
            config,
            device,
            chunks: Slots::default(),
            bins: std::array::from_fn(|_| BTreeSet::new()),
            regions: BTreeMap::new(),
            memory_limit,
            curr_region_allocation_bytes: curr,
            total_region_allocated_bytes: 0,
            max_internal_fragmentation_bytes: max_frag,
            last_device_request: 0,
            trace_pending: Default::default(),
            scratch: Vec::new(),
            stats: MemoryStats::new(u64::MAX),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The memory limit in bytes (`memory_limit_`).
    pub fn memory_limit(&self) -> u64 {
        self.memory_limit
    }

    /// The size the next region would have (`curr_region_allocation_bytes_`).
    pub fn curr_region_allocation_bytes(&self) -> u64 {
        self.curr_region_allocation_bytes
    }

    /// Bytes of all regions (`total_region_allocated_bytes_`).
    pub fn total_region_allocated_bytes(&self) -> u64 {
        self.total_region_allocated_bytes
    }

    /// The split cap (`max_internal_fragmentation_bytes`).
    pub fn max_internal_fragmentation_bytes(&self) -> u64 {
        self.max_internal_fragmentation_bytes
    }

    /// `(base, size)` of every region, in address order.
    pub fn regions(&self) -> Vec<(u64, u64)> {
        self.regions.iter().map(|(&p, r)| (p, r.size)).collect()
    }

    /// Consumes the allocator and returns its device (regions are not
    /// freed).
    pub fn into_device(self) -> D {
        self.device
    }

    #[inline]
    fn key(&self, idx: u32) -> BinKey {
        let c = &self.chunks[idx];
        BinKey {
            size: c.size,
            ptr: c.ptr,
            idx,
        }
    }

    /// `InsertFreeChunkIntoBin`.
    fn insert_free(&mut self, idx: u32) {
        let key = self.key(idx);
        let c = &mut self.chunks[idx];
        c.state = ChunkState::Free;
        if c.is_split() {
            self.stats.inactive_split.increase(POOL, 1);
            self.stats.inactive_split_bytes.increase(POOL, key.size);
        }
        bin_for(&mut self.bins, key.size).insert(key);
    }

    /// `RemoveFreeChunkFromBin`.
    fn remove_free(&mut self, idx: u32) {
        let key = self.key(idx);
        if self.chunks[idx].is_split() {
            self.stats.inactive_split.decrease(POOL, 1);
            self.stats.inactive_split_bytes.decrease(POOL, key.size);
        }
        bin_for(&mut self.bins, key.size).remove(&key);
    }

    /// `FindChunkPtr`: best fit from `bin` upwards, split, hand out.
    fn find_chunk(&mut self, bin: usize, rounded: u64, orig: u64) -> Option<BlockHandle> {
        let lower = BinKey {
            size: rounded,
            ptr: 0,
            idx: 0,
        };
        let key = self
            .bins
            .iter()
            .skip(bin)
            .find_map(|b| b.range(lower..).next().copied())?;
        let idx = key.idx;
        self.remove_free(idx);
        let size = key.size;
        if size >= rounded.saturating_mul(2)
            || size - rounded >= self.max_internal_fragmentation_bytes
        {
            self.split_chunk(idx, rounded);
        }
        let c = &mut self.chunks[idx];
        c.state = ChunkState::Allocated;
        c.requested = orig;
        let size = c.size;
        let s = &mut self.stats;
        s.allocation.increase(POOL, 1);
        s.allocated_bytes.increase(POOL, size);
        s.active.increase(POOL, 1);
        s.active_bytes.increase(POOL, size);
        s.requested_bytes.increase(POOL, orig);
        Some(self.chunks.renew(idx))
    }

    /// `SplitChunk`: `idx` keeps its first `num_bytes`; the rest becomes a
    /// free chunk.
    fn split_chunk(&mut self, idx: u32, num_bytes: u64) {
        let (ptr, size, next) = {
            let c = &self.chunks[idx];
            (c.ptr, c.size, c.next)
        };
        let new = self.chunks.insert(Chunk {
            ptr: ptr + num_bytes,
            size: size - num_bytes,
            requested: 0,
            prev: idx,
            next,
            state: ChunkState::Free,
        });
        if next != NIL {
            self.chunks[next].prev = new;
        }
        let c = &mut self.chunks[idx];
        c.next = new;
        c.size = num_bytes;
        self.insert_free(new);
    }

    /// `Merge`: `b` (the next neighbour of `a`) is absorbed into `a`.
    fn merge(&mut self, a: u32, b: u32) {
        let (bsize, bnext) = {
            let c = &self.chunks[b];
            (c.size, c.next)
        };
        let c = &mut self.chunks[a];
        c.size += bsize;
        c.next = bnext;
        if bnext != NIL {
            self.chunks[bnext].prev = a;
        }
        self.chunks.remove(b);
    }

    /// Marks a chunk free, merges it with free neighbours
    /// (`TryToCoalesce`) and bins the result.
    fn free_chunk(&mut self, idx: u32) {
        let (size, requested) = {
            let c = &self.chunks[idx];
            (c.size, c.requested)
        };
        let s = &mut self.stats;
        s.active.decrease(POOL, 1);
        s.active_bytes.decrease(POOL, size);
        s.requested_bytes.decrease(POOL, requested);
        self.chunks[idx].state = ChunkState::Free;
        let mut h = idx;
        let next = self.chunks[h].next;
        if next != NIL && self.chunks[next].state == ChunkState::Free {
            self.remove_free(next);
            self.merge(h, next);
        }
        let prev = self.chunks[h].prev;
        if prev != NIL && self.chunks[prev].state == ChunkState::Free {
            self.remove_free(prev);
            self.merge(prev, h);
            h = prev;
        }
        self.insert_free(h);
    }

    /// `Extend`: obtains a new region able to hold `rounded` bytes.
    fn extend(&mut self, rounded: u64) -> Result<bool, AllocError> {
        let available = self
            .memory_limit
            .saturating_sub(self.total_region_allocated_bytes)
            / MIN_ALLOCATION_SIZE
            * MIN_ALLOCATION_SIZE;
        if rounded > available {
            self.last_device_request = rounded;
            return Ok(false);
        }
        let mut increased = false;
        while rounded > self.curr_region_allocation_bytes {
            self.curr_region_allocation_bytes = self.curr_region_allocation_bytes.saturating_mul(2);
            increased = true;
        }
        let mut bytes = self.curr_region_allocation_bytes.min(available);
        let ptr = loop {
            self.last_device_request = bytes;
            match self.device.malloc(bytes) {
                Ok(p) => break p,
                Err(DeviceError::OutOfMemory { .. }) => {
                    let mut back = rounded_bytes(((bytes as f32) * BACKPEDAL_FACTOR) as u64);
                    if back >= bytes {
                        back = bytes - MIN_ALLOCATION_SIZE;
                    }
                    bytes = back;
                    if bytes < rounded {
                        return Ok(false);
                    }
                }
                Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
            }
        };
        if !increased {
            self.curr_region_allocation_bytes = self.curr_region_allocation_bytes.saturating_mul(2);
        }
        self.total_region_allocated_bytes += bytes;
        let idx = self.chunks.insert(Chunk {
            ptr,
            size: bytes,
            requested: 0,
            prev: NIL,
            next: NIL,
            state: ChunkState::Free,
        });
        self.regions.insert(
            ptr,
            Region {
                size: bytes,
                first: idx,
            },
        );
        self.insert_free(idx);
        let s = &mut self.stats;
        s.segment.increase(POOL, 1);
        s.reserved_bytes.increase(POOL, bytes);
        s.num_device_alloc += 1;
        Ok(true)
    }

    /// `true` when no chunk of the region is in use (then it is one free
    /// chunk, since free neighbours always merge).
    fn region_is_free(&self, r: &Region) -> bool {
        let c = &self.chunks[r.first];
        c.state == ChunkState::Free && c.size == r.size
    }

    /// Frees one unused region (`DeallocateRegions` for one region).
    fn release_region(&mut self, base: u64) -> Result<(), AllocError> {
        let Some(r) = self.regions.get(&base).copied() else {
            return Ok(());
        };
        self.device
            .free(base, r.size)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        self.remove_free(r.first);
        self.chunks.remove(r.first);
        self.regions.remove(&base);
        self.total_region_allocated_bytes -= r.size;
        let s = &mut self.stats;
        s.segment.decrease(POOL, 1);
        s.reserved_bytes.decrease(POOL, r.size);
        s.num_device_free += 1;
        Ok(())
    }

    /// Frees every unused region, in address order; returns their bytes.
    fn release_free_regions(&mut self) -> Result<u64, AllocError> {
        let mut bases = std::mem::take(&mut self.scratch);
        bases.clear();
        let mut bytes = 0;
        for (&base, r) in &self.regions {
            if self.region_is_free(r) {
                bases.push(base);
                bytes += r.size;
            }
        }
        let mut result = Ok(bytes);
        for &base in &bases {
            if let Err(e) = self.release_region(base) {
                result = Err(e);
                break;
            }
        }
        self.scratch = bases;
        result
    }

    /// `DeallocateFreeRegions`: with `garbage_collection`, frees the unused
    /// regions when that can make room for `rounded` bytes.
    fn deallocate_free_regions(&mut self, rounded: u64) -> Result<bool, AllocError> {
        if !self.config.garbage_collection {
            return Ok(false);
        }
        let free_bytes: u64 = self
            .regions
            .values()
            .filter(|r| self.region_is_free(r))
            .map(|r| r.size)
            .sum();
        if free_bytes == 0 {
            return Ok(false);
        }
        let available = self
            .memory_limit
            .saturating_sub(self.total_region_allocated_bytes)
            + free_bytes;
        if rounded > available {
            return Ok(false);
        }
        self.release_free_regions()?;
        Ok(true)
    }

    /// Completes every trace-deferred free.
    fn complete_pending(&mut self) {
        let pending = self.trace_pending.take();
        for &idx in &pending {
            self.free_chunk(idx);
        }
        self.trace_pending.recycle(pending);
    }

    fn resolve(&self, h: BlockHandle, want: ChunkState) -> Result<u32, AllocError> {
        if self.chunks.is_current(h.index, h.generation) && self.chunks[h.index].state == want {
            Ok(h.index)
        } else {
            Err(AllocError::UnknownHandle(h))
        }
    }

    /// The caller's part of a free: the chunk leaves `allocated`.
    fn release_allocation(&mut self, idx: u32) {
        let size = self.chunks[idx].size;
        self.stats.allocation.decrease(POOL, 1);
        self.stats.allocated_bytes.decrease(POOL, size);
    }
}

impl<D: Device> Allocator for BfcAllocator<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "bfc"
    }

    fn malloc(&mut self, size: u64, _stream: u64) -> Result<BlockHandle, AllocError> {
        if size == 0 {
            return Ok(BlockHandle::NULL);
        }
        if size >= MAX_REQUEST {
            return Err(exceeds_limit(
                &self.device,
                &self.stats,
                size,
                Some(self.memory_limit),
            ));
        }
        let rounded = rounded_bytes(size);
        let bin = bin_num_for_size(rounded);
        if let Some(h) = self.find_chunk(bin, rounded, size) {
            return Ok(h);
        }
        if self.extend(rounded)? {
            if let Some(h) = self.find_chunk(bin, rounded, size) {
                return Ok(h);
            }
        }
        if self.deallocate_free_regions(rounded)? {
            self.stats.num_alloc_retries += 1;
            if self.extend(rounded)? {
                if let Some(h) = self.find_chunk(bin, rounded, size) {
                    return Ok(h);
                }
            }
        }
        Err(out_of_memory(
            &self.device,
            &mut self.stats,
            size,
            rounded,
            self.last_device_request,
            Some(self.memory_limit),
        ))
    }

    fn free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        if handle.is_null() {
            return Ok(());
        }
        let idx = self.resolve(handle, ChunkState::Allocated)?;
        self.release_allocation(idx);
        self.free_chunk(idx);
        Ok(())
    }

    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        if handle.is_null() {
            return Ok(());
        }
        let idx = self.resolve(handle, ChunkState::Allocated)?;
        self.release_allocation(idx);
        self.chunks[idx].state = ChunkState::PendingFree;
        self.trace_pending.push(idx);
        Ok(())
    }

    fn complete_free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        if handle.is_null() || !self.chunks.is_current(handle.index, handle.generation) {
            return Ok(());
        }
        match self.chunks[handle.index].state {
            ChunkState::PendingFree => {
                self.trace_pending.remove(handle.index);
                self.free_chunk(handle.index);
                Ok(())
            }
            ChunkState::Allocated => Err(AllocError::UnknownHandle(handle)),
            ChunkState::Free => Ok(()),
        }
    }

    fn record_stream(&mut self, handle: BlockHandle, _stream: u64) -> Result<(), AllocError> {
        if handle.is_null() {
            return Ok(());
        }
        self.resolve(handle, ChunkState::Allocated).map(|_| ())
    }

    fn empty_cache(&mut self) -> Result<(), AllocError> {
        self.stats.num_sync_all_streams += 1;
        self.complete_pending();
        self.release_free_regions().map(|_| ())
    }

    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        if handle.is_null()
            || !self.chunks.is_current(handle.index, handle.generation)
            || self.chunks[handle.index].state == ChunkState::Free
        {
            return 0;
        }
        self.chunks[handle.index].ptr
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    /// `LargestFreeChunk`.
    fn largest_free_block(&self) -> u64 {
        self.bins
            .iter()
            .rev()
            .find_map(|b| b.last())
            .map_or(0, |k| k.size)
    }

    fn segments(&self) -> Vec<SegmentView> {
        let mut out = Vec::with_capacity(self.regions.len());
        for (&base, r) in &self.regions {
            let mut seg = SegmentView {
                ptr: base,
                size: r.size,
                stream: 0,
                pool: POOL,
                is_expandable: false,
                blocks: Vec::new(),
            };
            let mut c = r.first;
            while c != NIL {
                let ch = &self.chunks[c];
                seg.blocks.push(BlockView {
                    ptr: ch.ptr,
                    size: ch.size,
                    requested: ch.requested,
                    state: match ch.state {
                        ChunkState::Free => BlockState::Free,
                        ChunkState::Allocated => BlockState::Allocated,
                        ChunkState::PendingFree => BlockState::PendingFree,
                    },
                });
                c = ch.next;
            }
            out.push(seg);
        }
        out
    }

    fn check_invariants(&self) -> Result<(), String> {
        let mut want = MemoryStats::new(u64::MAX);
        let mut free_keys: [BTreeSet<BinKey>; NUM_BINS] = std::array::from_fn(|_| BTreeSet::new());
        let mut visited = 0usize;
        let mut pending = 0usize;
        let mut total = 0u64;
        for (&base, r) in &self.regions {
            ensure!(
                self.chunks.is_live(r.first),
                "region {base:#x}: first chunk is not live"
            );
            ensure!(
                self.chunks[r.first].prev == NIL && self.chunks[r.first].ptr == base,
                "region {base:#x}: its first chunk does not start it"
            );
            want.segment.increase(POOL, 1);
            want.reserved_bytes.increase(POOL, r.size);
            total += r.size;
            let mut end = base;
            let mut c = r.first;
            let mut prev = NIL;
            while c != NIL {
                ensure!(self.chunks.is_live(c), "region {base:#x}: dead chunk {c}");
                let ch = &self.chunks[c];
                visited += 1;
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
                        !(self.chunks[prev].state == ChunkState::Free
                            && ch.state == ChunkState::Free),
                        "chunks {prev} and {c} at {:#x} are adjacent free chunks that were not merged",
                        ch.ptr
                    );
                }
                match ch.state {
                    ChunkState::Free => {
                        bin_for(&mut free_keys, ch.size).insert(BinKey {
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
                        pending += 1;
                        want.active.increase(POOL, 1);
                        want.active_bytes.increase(POOL, ch.size);
                        want.requested_bytes.increase(POOL, ch.requested);
                    }
                }
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
        }
        ensure!(
            visited == self.chunks.len(),
            "{} live chunks but {visited} reachable from regions",
            self.chunks.len()
        );
        for (b, (got, want_b)) in self.bins.iter().zip(free_keys.iter()).enumerate() {
            ensure!(
                got == want_b,
                "bin {b}: {} chunks in the bin, {} free chunks of its size",
                got.len(),
                want_b.len()
            );
        }
        ensure!(
            pending == self.trace_pending.len(),
            "{pending} pending chunks but {} queued",
            self.trace_pending.len()
        );
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
        compare_stats(&self.stats, &want)
    }

    fn device(&self) -> &D {
        &self.device
    }

    fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_match_bin_num_for_size() {
        assert_eq!(bin_num_for_size(1), 0);
        assert_eq!(bin_num_for_size(256), 0);
        assert_eq!(bin_num_for_size(511), 0);
        assert_eq!(bin_num_for_size(512), 1);
        for b in 0..NUM_BINS {
            let lo = 256u64 << b;
            assert_eq!(bin_num_for_size(lo), b);
            assert_eq!(bin_num_for_size(lo * 2 - 1), b);
        }
        assert_eq!(bin_num_for_size(256 << 20), 20);
        assert_eq!(bin_num_for_size(1 << 40), 20);
    }

    #[test]
    fn config_round_trips() {
        let c = Config::default();
        assert_eq!(
            c.to_string(),
            "allow_growth:false,memory_fraction:0.75,garbage_collection:false,fragmentation_fraction:0"
        );
        assert_eq!(Config::parse(&c.to_string()), Ok(c));
        let c =
            Config::parse("allow_growth:true,memory_limit:8GiB,garbage_collection:true").unwrap();
        assert!(c.allow_growth && c.garbage_collection);
        assert_eq!(c.memory_limit, Some(8 << 30));
        assert_eq!(Config::parse(&c.to_string()), Ok(c));
        let p = Config::parse("preallocate:0.9").unwrap();
        assert!(!p.allow_growth);
        assert_eq!(p.memory_fraction, 0.9);
    }
}
