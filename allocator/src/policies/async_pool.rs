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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use super::common::{
    MAX_REQUEST, NIL, Slots, compare_stats, ensure, exceeds_limit, out_of_memory, parse_bool,
    parse_bytes, round_up, size_string, split_settings,
};
use crate::devices::{Device, DeviceError, DevicePtr};
use crate::policy::{AllocError, Allocator, BlockHandle, BlockState, BlockView, SegmentView};
use crate::stats::{MemoryStats, PoolKind};

/// Requests are rounded up to this many bytes.
pub const ALIGNMENT: u64 = 256;
/// Growth granularity used when the device reports none.
pub const DEFAULT_GRANULARITY: u64 = 2 << 20;

const POOL: PoolKind = PoolKind::Large;

/// Settings of the `async` policy.
///
/// Settings string keys: `release_threshold` (a size, or `max` for
/// `UINT64_MAX`, PyTorch's value) and `reuse_across_streams` (bool).
/// Example: `release_threshold:1GiB,reuse_across_streams:false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// `cudaMemPoolAttrReleaseThreshold` in bytes (`u64::MAX` = never trim
    /// at a synchronisation).
    pub release_threshold: u64,
    /// Let any stream reuse freed memory at once (see the module docs).
    pub reuse_across_streams: bool,
}

impl Default for Config {
    /// CUDA's default threshold (0) and the conservative reuse bound.
    fn default() -> Self {
        Config {
            release_threshold: 0,
            reuse_across_streams: false,
        }
    }
}

impl Config {
    /// Parses a settings string (see [`Config`] for the keys). Keys not
    /// given keep their default.
    pub fn parse(s: &str) -> Result<Config, String> {
        const P: &str = "async";
        let mut c = Config::default();
        for (k, v) in split_settings(P, s, &["release_threshold", "reuse_across_streams"])? {
            match k {
                "release_threshold" => {
                    c.release_threshold = if v.eq_ignore_ascii_case("max") {
                        u64::MAX
                    } else {
                        parse_bytes(P, k, v)?
                    }
                }
                "reuse_across_streams" => c.reuse_across_streams = parse_bool(P, k, v)?,
                _ => unreachable!("split_settings only returns known keys"),
            }
        }
        Ok(c)
    }
}

impl fmt::Display for Config {
    /// The canonical settings string: `release_threshold:0,reuse_across_streams:false`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.release_threshold == u64::MAX {
            write!(f, "release_threshold:max,")?;
        } else {
            write!(
                f,
                "release_threshold:{},",
                size_string(self.release_threshold)
            )?;
        }
        write!(f, "reuse_across_streams:{}", self.reuse_across_streams)
    }
}

impl FromStr for Config {
    type Err = String;
    fn from_str(s: &str) -> Result<Config, String> {
        Config::parse(s)
    }
}

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
    config: Config,
    device: D,
    granularity: u64,
    blocks: Slots<Block>,
    by_stream: BTreeSet<StreamKey>,
    unified: BTreeSet<SizeKey>,
    shared: BTreeSet<SizeKey>,
    chunks: BTreeMap<u64, Chunk>,
    scratch: Vec<u32>,
    stats: MemoryStats,
}

impl<D: Device> AsyncPoolAllocator<D> {
    /// A fresh, empty pool over `device`.
    pub fn new(config: Config, device: D) -> Self {
        let g = device.granularity();
        AsyncPoolAllocator {
            config,
            device,
            granularity: if g == 0 { DEFAULT_GRANULARITY } else { g },
            blocks: Slots::default(),
            by_stream: BTreeSet::new(),
            unified: BTreeSet::new(),
            shared: BTreeSet::new(),
            chunks: BTreeMap::new(),
            scratch: Vec::new(),
            stats: MemoryStats::new(u64::MAX),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The growth granularity in bytes.
    pub fn granularity(&self) -> u64 {
        self.granularity
    }

    /// Consumes the allocator and returns its device (chunks are not freed).
    pub fn into_device(self) -> D {
        self.device
    }

    /// A device-wide synchronisation (`cudaDeviceSynchronize` or any stream,
    /// event or context synchronisation): every freed block becomes reusable
    /// by every stream, then the pool is trimmed to the release threshold.
    pub fn synchronize(&mut self) -> Result<(), AllocError> {
        self.stats.num_sync_all_streams += 1;
        self.device.synchronize();
        self.share_all();
        self.trim_to(self.config.release_threshold)
    }

    /// `cudaMemPoolTrimTo(pool, keep)`: frees chunks without a live
    /// allocation, largest first, until the pool holds at most `keep` bytes.
    /// Blocks not yet reusable by every stream are kept.
    pub fn trim_to(&mut self, keep: u64) -> Result<(), AllocError> {
        if self.reserved() <= keep {
            return Ok(());
        }
        let mut whole = std::mem::take(&mut self.scratch);
        whole.clear();
        whole.extend(
            self.shared
                .iter()
                .rev()
                .filter(|k| !self.blocks[k.idx].is_split())
                .map(|k| k.idx),
        );
        let mut result = Ok(());
        for &idx in &whole {
            if self.reserved() <= keep {
                break;
            }
            if let Err(e) = self.release_chunk(idx) {
                result = Err(e);
                break;
            }
        }
        self.scratch = whole;
        result
    }

    #[inline]
    fn reserved(&self) -> u64 {
        self.stats.reserved_bytes.all.current as u64
    }

    /// Frees the chunk made of the single free block `idx`.
    fn release_chunk(&mut self, idx: u32) -> Result<(), AllocError> {
        let (ptr, size) = {
            let b = &self.blocks[idx];
            (b.ptr, b.size)
        };
        self.device
            .free(ptr, size)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        self.remove_free(idx);
        self.blocks.remove(idx);
        self.chunks.remove(&ptr);
        let s = &mut self.stats;
        s.segment.decrease(POOL, 1);
        s.reserved_bytes.decrease(POOL, size);
        s.num_device_free += 1;
        Ok(())
    }

    /// Makes every free block reusable by every stream and merges the
    /// neighbours that become equal.
    fn share_all(&mut self) {
        let mut todo = std::mem::take(&mut self.scratch);
        todo.clear();
        todo.extend(self.by_stream.iter().map(|k| k.idx));
        todo.extend(self.unified.iter().map(|k| k.idx));
        for &idx in &todo {
            // A block merged into an earlier one in this loop is gone.
            if !self.blocks.is_live(idx)
                || self.blocks[idx].allocated
                || self.blocks[idx].reuse == Reuse::Shared
            {
                continue;
            }
            self.remove_free(idx);
            self.blocks[idx].reuse = Reuse::Shared;
            let merged = self.coalesce(idx);
            self.insert_free(merged);
        }
        self.scratch = todo;
    }

    fn insert_free(&mut self, idx: u32) {
        let b = self.blocks[idx];
        if b.is_split() {
            self.stats.inactive_split.increase(POOL, 1);
            self.stats.inactive_split_bytes.increase(POOL, b.size);
        }
        match b.reuse {
            Reuse::Stream(stream) => {
                self.by_stream.insert(StreamKey {
                    stream,
                    size: b.size,
                    ptr: b.ptr,
                    idx,
                });
            }
            Reuse::Unified => {
                self.unified.insert(SizeKey {
                    size: b.size,
                    ptr: b.ptr,
                    idx,
                });
            }
            Reuse::Shared => {
                self.shared.insert(SizeKey {
                    size: b.size,
                    ptr: b.ptr,
                    idx,
                });
            }
        }
    }

    fn remove_free(&mut self, idx: u32) {
        let b = self.blocks[idx];
        if b.is_split() {
            self.stats.inactive_split.decrease(POOL, 1);
            self.stats.inactive_split_bytes.decrease(POOL, b.size);
        }
        let sk = SizeKey {
            size: b.size,
            ptr: b.ptr,
            idx,
        };
        match b.reuse {
            Reuse::Stream(stream) => {
                self.by_stream.remove(&StreamKey {
                    stream,
                    size: b.size,
                    ptr: b.ptr,
                    idx,
                });
            }
            Reuse::Unified => {
                self.unified.remove(&sk);
            }
            Reuse::Shared => {
                self.shared.remove(&sk);
            }
        }
    }

    /// Merges the free block `idx` (not in a free set) with free neighbours
    /// of the same reuse class; returns the surviving block.
    fn coalesce(&mut self, idx: u32) -> u32 {
        let reuse = self.blocks[idx].reuse;
        let mut h = idx;
        let next = self.blocks[h].next;
        if next != NIL && !self.blocks[next].allocated && self.blocks[next].reuse == reuse {
            self.remove_free(next);
            self.absorb(h, next);
        }
        let prev = self.blocks[h].prev;
        if prev != NIL && !self.blocks[prev].allocated && self.blocks[prev].reuse == reuse {
            self.remove_free(prev);
            self.absorb(prev, h);
            h = prev;
        }
        h
    }

    /// `b`, the next neighbour of `a`, is absorbed into `a`.
    fn absorb(&mut self, a: u32, b: u32) {
        let Block { size, next, .. } = self.blocks[b];
        let blk = &mut self.blocks[a];
        blk.size += size;
        blk.next = next;
        if next != NIL {
            self.blocks[next].prev = a;
        }
        self.blocks.remove(b);
    }

    /// The best fit for `size` bytes among the blocks `stream` may reuse.
    fn best_fit(&self, size: u64, stream: u64) -> Option<u32> {
        let shared = self
            .shared
            .range(
                SizeKey {
                    size,
                    ptr: 0,
                    idx: 0,
                }..,
            )
            .next()
            .map(|k| (k.size, k.ptr, k.idx));
        let own = self
            .by_stream
            .range(
                StreamKey {
                    stream,
                    size,
                    ptr: 0,
                    idx: 0,
                }..,
            )
            .next()
            .filter(|k| k.stream == stream)
            .map(|k| (k.size, k.ptr, k.idx));
        match (shared, own) {
            (Some(a), Some(b)) => Some(a.min(b).2),
            (a, b) => a.or(b).map(|k| k.2),
        }
    }

    /// Hands out the first `size` bytes of the free block `idx`.
    fn take(&mut self, idx: u32, size: u64, orig: u64, stream: u64) -> BlockHandle {
        self.remove_free(idx);
        let b = self.blocks[idx];
        if b.size > size {
            let rem = self.blocks.insert(Block {
                ptr: b.ptr + size,
                size: b.size - size,
                requested: 0,
                stream: 0,
                prev: idx,
                next: b.next,
                allocated: false,
                recorded: false,
                reuse: b.reuse,
            });
            if b.next != NIL {
                self.blocks[b.next].prev = rem;
            }
            let blk = &mut self.blocks[idx];
            blk.next = rem;
            blk.size = size;
            self.insert_free(rem);
        }
        let blk = &mut self.blocks[idx];
        blk.allocated = true;
        blk.recorded = false;
        blk.requested = orig;
        blk.stream = stream;
        let s = &mut self.stats;
        s.allocation.increase(POOL, 1);
        s.allocated_bytes.increase(POOL, size);
        s.active.increase(POOL, 1);
        s.active_bytes.increase(POOL, size);
        s.requested_bytes.increase(POOL, orig);
        self.blocks.renew(idx)
    }

    /// Grows the pool by one chunk able to hold `size` bytes; `Ok(None)`
    /// when the device has no room.
    fn grow(&mut self, size: u64) -> Result<Option<u32>, AllocError> {
        let bytes = round_up(size, self.granularity);
        let ptr = match self.device.malloc(bytes) {
            Ok(p) => p,
            Err(DeviceError::OutOfMemory { .. }) => return Ok(None),
            Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
        };
        let idx = self.blocks.insert(Block {
            ptr,
            size: bytes,
            requested: 0,
            stream: 0,
            prev: NIL,
            next: NIL,
            allocated: false,
            recorded: false,
            reuse: Reuse::Shared,
        });
        self.chunks.insert(
            ptr,
            Chunk {
                size: bytes,
                first: idx,
            },
        );
        self.insert_free(idx);
        let s = &mut self.stats;
        s.segment.increase(POOL, 1);
        s.reserved_bytes.increase(POOL, bytes);
        s.num_device_alloc += 1;
        Ok(Some(idx))
    }

    fn resolve(&self, h: BlockHandle) -> Result<u32, AllocError> {
        if self.blocks.is_current(h.index, h.generation) && self.blocks[h.index].allocated {
            Ok(h.index)
        } else {
            Err(AllocError::UnknownHandle(h))
        }
    }

    /// `cudaFreeAsync` on the allocation stream, or on the unifying stream
    /// when `unified`.
    fn free_impl(&mut self, h: BlockHandle, unified: bool) -> Result<(), AllocError> {
        if h.is_null() {
            return Ok(());
        }
        let idx = self.resolve(h)?;
        let b = self.blocks[idx];
        let s = &mut self.stats;
        s.allocation.decrease(POOL, 1);
        s.allocated_bytes.decrease(POOL, b.size);
        s.active.decrease(POOL, 1);
        s.active_bytes.decrease(POOL, b.size);
        s.requested_bytes.decrease(POOL, b.requested);
        let reuse = if self.config.reuse_across_streams {
            Reuse::Shared
        } else if unified || b.recorded {
            Reuse::Unified
        } else {
            Reuse::Stream(b.stream)
        };
        let blk = &mut self.blocks[idx];
        blk.allocated = false;
        blk.recorded = false;
        blk.reuse = reuse;
        let merged = self.coalesce(idx);
        self.insert_free(merged);
        Ok(())
    }
}

impl<D: Device> Allocator for AsyncPoolAllocator<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "async"
    }

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
        self.free_impl(handle, false)
    }

    /// The block was used on other streams: PyTorch frees it on its
    /// unifying stream at once.
    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_impl(handle, true)
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

    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        if handle.is_null()
            || !self.blocks.is_current(handle.index, handle.generation)
            || !self.blocks[handle.index].allocated
        {
            return 0;
        }
        self.blocks[handle.index].ptr
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    fn largest_free_block(&self) -> u64 {
        let a = self.shared.last().map_or(0, |k| k.size);
        let b = self.unified.last().map_or(0, |k| k.size);
        let c = self.by_stream.iter().map(|k| k.size).max().unwrap_or(0);
        a.max(b).max(c)
    }

    fn segments(&self) -> Vec<SegmentView> {
        let mut out = Vec::with_capacity(self.chunks.len());
        for (&base, c) in &self.chunks {
            let mut seg = SegmentView {
                ptr: base,
                size: c.size,
                stream: 0,
                pool: POOL,
                is_expandable: false,
                blocks: Vec::new(),
            };
            let mut i = c.first;
            while i != NIL {
                let b = &self.blocks[i];
                seg.blocks.push(BlockView {
                    ptr: b.ptr,
                    size: b.size,
                    requested: b.requested,
                    state: if b.allocated {
                        BlockState::Allocated
                    } else {
                        BlockState::Free
                    },
                });
                i = b.next;
            }
            out.push(seg);
        }
        out
    }

    fn check_invariants(&self) -> Result<(), String> {
        let mut want = MemoryStats::new(u64::MAX);
        let mut by_stream = BTreeSet::new();
        let mut unified = BTreeSet::new();
        let mut shared = BTreeSet::new();
        let mut visited = 0usize;
        for (&base, c) in &self.chunks {
            ensure!(
                c.size > 0 && c.size % self.granularity == 0,
                "chunk {base:#x} has size {}, not a multiple of the {} byte granularity",
                c.size,
                self.granularity
            );
            want.segment.increase(POOL, 1);
            want.reserved_bytes.increase(POOL, c.size);
            let mut end = base;
            let mut prev = NIL;
            let mut i = c.first;
            while i != NIL {
                ensure!(self.blocks.is_live(i), "chunk {base:#x}: dead block {i}");
                let b = &self.blocks[i];
                visited += 1;
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
                if b.allocated {
                    want.allocation.increase(POOL, 1);
                    want.allocated_bytes.increase(POOL, b.size);
                    want.active.increase(POOL, 1);
                    want.active_bytes.increase(POOL, b.size);
                    want.requested_bytes.increase(POOL, b.requested);
                } else {
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
                                !self.config.reuse_across_streams,
                                "block {i}: stream-private although reuse_across_streams is on"
                            );
                            by_stream.insert(StreamKey {
                                stream,
                                size: b.size,
                                ptr: b.ptr,
                                idx: i,
                            });
                        }
                        Reuse::Unified => {
                            ensure!(
                                !self.config.reuse_across_streams,
                                "block {i}: unified although reuse_across_streams is on"
                            );
                            unified.insert(sk);
                        }
                        Reuse::Shared => {
                            shared.insert(sk);
                        }
                    }
                }
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
        }
        ensure!(
            visited == self.blocks.len(),
            "{} live blocks but {visited} reachable from chunks",
            self.blocks.len()
        );
        ensure!(
            by_stream == self.by_stream,
            "the per-stream free set differs from the free blocks"
        );
        ensure!(
            unified == self.unified,
            "the unified free set differs from the free blocks"
        );
        ensure!(
            shared == self.shared,
            "the shared free set differs from the free blocks"
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
    fn config_round_trips() {
        let c = Config::default();
        assert_eq!(
            c.to_string(),
            "release_threshold:0,reuse_across_streams:false"
        );
        assert_eq!(Config::parse(&c.to_string()), Ok(c));
        let c = Config::parse("release_threshold:1GiB,reuse_across_streams:true").unwrap();
        assert_eq!(c.release_threshold, 1 << 30);
        assert_eq!(Config::parse(&c.to_string()), Ok(c));
        let m = Config::parse("release_threshold:MAX").unwrap();
        assert_eq!(
            m.to_string(),
            "release_threshold:max,reuse_across_streams:false"
        );
        assert!(Config::parse("release_threshold:lots").is_err());
    }
}
