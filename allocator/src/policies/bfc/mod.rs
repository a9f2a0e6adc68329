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
//!
//! Module map: this file (the allocator and the calls it serves), `settings`
//! (the settings string), `bins` (rounding, bins and
//! their free chunks), `find` (best fit and splitting), `free` (frees and
//! coalescing), `regions` (growing and freeing regions), `view` (what it
//! holds: segment views), `invariants` (the consistency checker).

mod bins;
mod find;
mod free;
mod invariants;
mod regions;
mod settings;
mod view;

use std::collections::{BTreeMap, BTreeSet};

use bins::{NUM_BINS, bin_num_for_size, rounded_bytes};
pub use settings::Settings;

use super::arena::{Arena, NIL};
use super::oom::{MAX_REQUEST, exceeds_limit, out_of_memory};
use crate::devices::Device;
use crate::policy::{AllocError, Allocator, BlockHandle, Seed};
use crate::stats::{MemoryStats, PoolKind};
use bins::BinKey;

/// Default `max_internal_fragmentation_bytes` (128 MiB).
pub(crate) const DEFAULT_MAX_INTERNAL_FRAGMENTATION: u64 = 128 << 20;
/// Initial region size with `allow_growth` (2 MiB, or the limit if smaller).
pub(crate) const INITIAL_GROWTH_REGION: u64 = 2 << 20;

const POOL: PoolKind = PoolKind::Large;

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
    settings: Settings,
    device: D,
    chunks: Arena<Chunk>,
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
    pub fn new(settings: Settings, device: D) -> Self {
        let total = device.mem_info().total;
        let memory_limit = settings
            .memory_limit
            .unwrap_or((settings.memory_fraction * total as f64) as u64);
        let curr = if settings.allow_growth {
            rounded_bytes(memory_limit.min(INITIAL_GROWTH_REGION))
        } else {
            rounded_bytes(memory_limit)
        };
        let max_frag = if settings.fragmentation_fraction > 0.0 {
            (settings.fragmentation_fraction * memory_limit as f64) as u64
        } else {
            DEFAULT_MAX_INTERNAL_FRAGMENTATION
        };
        BfcAllocator {
            settings,
            device,
            chunks: Arena::default(),
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

    fn resolve(&self, h: BlockHandle, want: ChunkState) -> Result<u32, AllocError> {
        if self.chunks.is_current(h.index, h.generation) && self.chunks[h.index].state == want {
            Ok(h.index)
        } else {
            Err(AllocError::UnknownHandle(h))
        }
    }
}

impl<D: Device> Allocator for BfcAllocator<D> {
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
}

/// Replays start from an empty state only.
impl<D: Device> Seed for BfcAllocator<D> {}
