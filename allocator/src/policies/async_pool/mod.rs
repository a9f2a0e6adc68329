//! `async`: a stream-ordered pool in the manner of `cudaMallocAsync` /
//! CUDA memory pools (PyTorch's `backend:cudaMallocAsync`).
//!
//! The driver's pool is closed source; this is a model built on what CUDA
//! documents and what PyTorch's backend does, with every choice stated.
//!
//! # Rules and sources
//!
//! * **One pool per device**, shared by all streams (`cudaDeviceGetDefaultMemPool`).
//!   Freed memory returns to the pool (`cudaFreeAsync`); the pool's
//!   physical memory grows in multiples of the device's physical allocation
//!   granularity ([`Device::granularity`], 2 MiB on current GPUs). Here the
//!   pool grows by one `cudaMalloc` of `round_up(request, granularity)`
//!   bytes (a "chunk"); requests are rounded to 256 bytes, the alignment
//!   CUDA guarantees for device allocations. A free block is the best fit
//!   among the blocks the requesting stream may reuse (smallest, then lowest
//!   address), split at the request size; freed blocks merge with free
//!   neighbours of the same reuse class (below).
//! * **Stream-ordered reuse** (CUDA programming guide, "Stream-Ordered Memory
//!   Allocator", and the `cudaMemPoolAttr` reuse policies): memory freed on
//!   stream A is reusable by later work on stream A at once. For another
//!   stream, CUDA allows reuse when a stream-ordering dependency exists
//!   (`cudaMemPoolReuseFollowEventDependencies`), when the free has already
//!   completed (`cudaMemPoolReuseAllowOpportunistic`), or by inserting a
//!   dependency (`cudaMemPoolReuseAllowInternalDependencies`); all three are
//!   on by default and PyTorch enables them explicitly. A trace records no
//!   GPU timing and no events between streams, so vramlab offers the two
//!   bounds, chosen by `reuse_across_streams`:
//!   * `false` (default, the sound bound): a block freed on stream A is
//!     reusable only by allocations on stream A until the next
//!     synchronisation; after it, by every stream.
//!   * `true` (CUDA's default attributes with every free complete): a freed
//!     block is reusable by every stream at once.
//! * **Blocks used on several streams** (PyTorch's `free_impl`): a block
//!   with `record_stream` uses is freed on a dummy "unifying" stream that
//!   waits for all its streams, so no user stream may reuse it until a
//!   synchronisation (with `reuse_across_streams:false`). A trace's deferred
//!   free (`free_requested`) is such a free: the block is freed at once into
//!   that class and the trace's `free_completed` has nothing left to do.
//! * **Release threshold** (`cudaMemPoolAttrReleaseThreshold`, CUDA default
//!   0): at a synchronisation, when the pool holds more than the threshold,
//!   memory is returned to the system until it holds no more than the
//!   threshold. [`AsyncPoolAllocator::synchronize`] does this. PyTorch's
//!   backend sets the threshold to `UINT64_MAX` (`release_threshold:max`).
//!   Traces carry no synchronisation events, so in a replay only
//!   `empty_cache` synchronises.
//! * **`empty_cache`** = PyTorch's `emptyCache`: `cudaDeviceSynchronize` +
//!   `cudaMemPoolTrimTo(pool, 0)`: every block becomes reusable by every
//!   stream, then every chunk without a live allocation is freed.
//! * **Out of memory**: when the pool cannot grow, the request fails; PyTorch's
//!   backend raises at once (no synchronise-and-retry).
//!
//! Modelling limits: the driver may also release free physical pages inside
//! partly used address ranges; here only chunks without a live allocation
//! are released (largest first). Statistics use PyTorch's names
//! (`reserved_bytes` = chunk bytes, the driver's `ReservedMemCurrent`;
//! `allocated_bytes` = live block bytes, `UsedMemCurrent`); there is one
//! pool, counted in `large_pool`.
//!
//! Module map: this file (the allocator and the calls it serves), `settings`
//! (the settings string), `reuse` (the free sets by
//! reuse class and the best fit), `blocks` (handing out and merging
//! blocks), `chunks` (growing the pool and trimming it), `free` (frees),
//! `view` (what it holds: segment views), `invariants` (the consistency checker).

mod blocks;
mod chunks;
mod free;
mod invariants;
mod reuse;
mod settings;
mod view;

use std::collections::{BTreeMap, BTreeSet};

pub use settings::Settings;

use super::arena::{Arena, NIL};
use super::oom::{MAX_REQUEST, exceeds_limit, out_of_memory};
use super::rounding::round_up;
use crate::devices::Device;
use crate::policy::{AllocError, Allocator, BlockHandle, Seed};
use crate::stats::{MemoryStats, PoolKind};

/// Requests are rounded up to this many bytes.
pub(crate) const ALIGNMENT: u64 = 256;
/// Growth granularity used when the device reports none.
pub(crate) const DEFAULT_GRANULARITY: u64 = 2 << 20;

const POOL: PoolKind = PoolKind::Large;

/// Which streams may reuse a free block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reuse {
    /// Freed on this stream, no synchronisation since.
    Stream(u64),
    /// Freed on the unifying stream (used on several streams).
    Unified,
    /// Reusable by every stream.
    Shared,
}

/// A piece of a chunk.
#[derive(Debug, Clone, Copy)]
struct Block {
    ptr: u64,
    size: u64,
    requested: u64,
    /// Allocation stream (while allocated).
    stream: u64,
    prev: u32,
    next: u32,
    allocated: bool,
    /// Used on another stream (`record_stream`) while allocated.
    recorded: bool,
    /// Reuse class while free.
    reuse: Reuse,
}

impl Block {
    #[inline]
    fn is_split(&self) -> bool {
        self.prev != NIL || self.next != NIL
    }
}

/// Free block freed on a stream: (stream, size, address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct StreamKey {
    stream: u64,
    size: u64,
    ptr: u64,
    idx: u32,
}

/// Free block of the unified or shared class: (size, address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SizeKey {
    size: u64,
    ptr: u64,
    idx: u32,
}

/// One growth of the pool (one `cudaMalloc`).
#[derive(Debug, Clone, Copy)]
struct Chunk {
    size: u64,
    /// Block at the chunk's base (merges keep the lower block).
    first: u32,
}

/// The stream-ordered pool over a device.
#[derive(Debug, Clone)]
pub struct AsyncPoolAllocator<D: Device> {
    settings: Settings,
    device: D,
    granularity: u64,
    blocks: Arena<Block>,
    by_stream: BTreeSet<StreamKey>,
    unified: BTreeSet<SizeKey>,
    shared: BTreeSet<SizeKey>,
    chunks: BTreeMap<u64, Chunk>,
    scratch: Vec<u32>,
    stats: MemoryStats,
}

impl<D: Device> AsyncPoolAllocator<D> {
    /// A fresh, empty pool over `device`.
    pub fn new(settings: Settings, device: D) -> Self {
        let g = device.granularity();
        AsyncPoolAllocator {
            settings,
            device,
            granularity: if g == 0 { DEFAULT_GRANULARITY } else { g },
            blocks: Arena::default(),
            by_stream: BTreeSet::new(),
            unified: BTreeSet::new(),
            shared: BTreeSet::new(),
            chunks: BTreeMap::new(),
            scratch: Vec::new(),
            stats: MemoryStats::new(u64::MAX),
        }
    }

    /// The growth granularity in bytes.
    pub fn granularity(&self) -> u64 {
        self.granularity
    }

    #[inline]
    fn reserved(&self) -> u64 {
        self.stats.reserved_bytes.all.current as u64
    }

    fn resolve(&self, h: BlockHandle) -> Result<u32, AllocError> {
        if self.blocks.is_current(h.index, h.generation) && self.blocks[h.index].allocated {
            Ok(h.index)
        } else {
            Err(AllocError::UnknownHandle(h))
        }
    }
}

impl<D: Device> Allocator for AsyncPoolAllocator<D> {
    fn malloc(&mut self, size: u64, stream: u64) -> Result<BlockHandle, AllocError> {
        if size == 0 {
            return Ok(BlockHandle::NULL);
        }
        if size >= MAX_REQUEST {
            return Err(exceeds_limit(&self.device, &self.stats, size, None));
        }
        let rounded = round_up(size, ALIGNMENT);
        let idx = match self.best_fit(rounded, stream) {
            Some(i) => i,
            None => match self.grow(rounded)? {
                Some(i) => i,
                None => {
                    let request = round_up(rounded, self.granularity);
                    return Err(out_of_memory(
                        &self.device,
                        &mut self.stats,
                        size,
                        rounded,
                        request,
                        None,
                    ));
                }
            },
        };
        Ok(self.take(idx, rounded, size, stream))
    }

    fn free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_handle(handle, false)
    }

    /// The block was used on other streams: PyTorch frees it on its
    /// unifying stream at once.
    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_handle(handle, true)
    }

    /// Nothing is pending (see [`Allocator::free_deferred`]); a handle that
    /// is still allocated was never freed and is an error.
    fn complete_free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        if !handle.is_null()
            && self.blocks.is_current(handle.index, handle.generation)
            && self.blocks[handle.index].allocated
        {
            return Err(AllocError::UnknownHandle(handle));
        }
        Ok(())
    }

    fn record_stream(&mut self, handle: BlockHandle, stream: u64) -> Result<(), AllocError> {
        if handle.is_null() {
            return Ok(());
        }
        let idx = self.resolve(handle)?;
        let b = &mut self.blocks[idx];
        if stream != b.stream {
            b.recorded = true;
        }
        Ok(())
    }

    /// `cudaDeviceSynchronize` + `cudaMemPoolTrimTo(pool, 0)`.
    fn empty_cache(&mut self) -> Result<(), AllocError> {
        self.stats.num_sync_all_streams += 1;
        self.device.synchronize();
        self.share_all();
        self.trim_to(0)
    }
}

/// Replays start from an empty state only.
impl<D: Device> Seed for AsyncPoolAllocator<D> {}
