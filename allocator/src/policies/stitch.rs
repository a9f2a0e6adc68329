//! `stitch`: GMLake-style virtual-memory stitching on top of a PyTorch-like
//! caching allocator.
//!
//! GMLake ("GMLake: Efficient and Transparent GPU Memory Defragmentation for
//! Large-scale DNN Training with Virtual Memory Stitching", ASPLOS 2024) keeps
//! PyTorch's caching allocator but backs large blocks with 2 MiB physical
//! chunks ("pBlocks") mapped through the CUDA virtual-memory API. When no
//! cached block fits a large request but several free blocks together would,
//! it maps their physical chunks side by side into a fresh virtual range (a
//! stitched block, "sBlock") instead of allocating new memory.
//!
//! # Rules and sources
//!
//! From the paper's algorithm and the public implementation
//! (`GMLake/src/CUDACachingAllocator.cpp` in
//! intelligent-machine-learning/glake, and its tutorial
//! `GMLake/docs/GMLake-tutorial.md`):
//!
//! * **Rounding and pools** (`round_size`, `get_pool`): sizes are rounded to
//!   512 bytes; a rounded size above 1 MiB is rounded up to a multiple of
//!   2 MiB (`kGranularity`) and served from the large pool, the rest from the
//!   small pool. Blocks are cached per stream, best fit (stream, size,
//!   address), as in PyTorch.
//! * **Segments** (`get_allocation_size`, `realloc_block`): small segments
//!   are 2 MiB `cudaMalloc` allocations; a large request below 10 MiB gets a
//!   20 MiB segment, a larger one a segment of its own (rounded) size. Large
//!   segments are virtual reservations backed by 2 MiB physical pages
//!   (here: `reserve` + `map` with a 2 MiB page).
//! * **Split** (`should_split`): small blocks when at least 512 bytes
//!   remain; large blocks when at least 2 MiB remain (`max_split_size` is not
//!   modelled: unlimited). Freed blocks merge with free neighbours.
//! * **Stitching** (`get_fused_fragmented_blocks`): only for large requests
//!   of at least `fragment_limit` bytes (GMLake `fragLimit`) with stitching
//!   on (`vmmDefragment`). The free large blocks of the request's stream
//!   are taken from the largest down until their total covers the request
//!   (at least two must exist); when the last one overshoots, it is split
//!   and only its front is used. Their pages are mapped in that order into a
//!   new virtual range: the sBlock, handed out whole. vramlab adds
//!   `max_pieces`: give up when more pieces would be needed.
//! * **When** (`defragLevel`): stitching is tried at three points of
//!   `malloc` — 0: after the cache search, before new memory is allocated;
//!   1: after a device allocation failed; 2: after the cache was flushed and
//!   the allocation failed again. `defragment_level` L stitches at the
//!   points ≥ L (the tutorial's default is 0: stitch whenever the free
//!   blocks suffice).
//! * **Reuse of sBlocks** (`get_free_block`, `reuseLimit`): a freed sBlock
//!   stays cached; when no plain block fits a large request, the smallest
//!   cached sBlock of the stream that fits is reused whole if its size is at
//!   most `request × reuse_limit`.
//! * **Garbage collection** (`garbage_collect_fused_blocks`, `autoGC`):
//!   when the sBlocks' total size exceeds `gc_limit`, the cached sBlocks
//!   are dissolved.
//! * The rest (deferred frees, `record_stream`, OOM flush and retry,
//!   `empty_cache` releasing whole free segments) follows PyTorch's native
//!   allocator.
//!
//! # Modelling
//!
//! CUDA maps one physical handle at any number of addresses; GMLake keeps a
//! stitched chunk mapped at its home address too and tracks per chunk which
//! view uses it. `Device` pages live at one address at a time, so here a
//! page is *moved*: stitching unmaps each piece at home and maps the same
//! number of bytes at the sBlock's reservation (device bytes in use never
//! change), and dissolving an sBlock moves them back and releases the
//! reservation. Consequences, all documented choices:
//!
//! * While an sBlock exists, its pieces are not usable at home: a cached
//!   sBlock is dissolved before the allocator grows (or flushes) for any
//!   other request, so cached sBlocks never cost memory.
//! * A reused sBlock is handed out whole (GMLake hands out the front pages
//!   and lets the home view use the rest), so `reuse_limit` defaults to 1:
//!   exact-size reuse (the value used by GMLake's later ports; the
//!   tutorial's 10 would hand out up to ten times the request here).
//! * Statistics: `reserved_bytes` and `segment` count physical segments
//!   only (stitching changes neither; GMLake also counts sBlocks as
//!   segments); an sBlock counts once in `allocated_bytes`/`active_bytes`,
//!   its pieces not at all; `num_device_alloc`/`num_device_free` count
//!   segment allocations/frees, not the map/unmap calls that move pages
//!   (those appear in the device log). `segments()` lists physical
//!   segments; a piece shows the state of its sBlock.
//!
//! Defaults: stitching on, `fragment_limit` 512 MiB, `defragment_level` 0,
//! `gc_limit` 1000 GiB (the tutorial's documented values; the built-in
//! fallbacks of the source differ between versions: `fragLimit` 32 MiB or
//! 16 MiB, `defragLevel` 1, `autoGC` 80 GB), `reuse_limit` 1, `max_pieces`
//! unlimited.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use super::common::{
    MAX_REQUEST, NIL, Slots, compare_stats, ensure, exceeds_limit, out_of_memory, parse_bool,
    parse_bytes, parse_number, round_up, size_string, split_settings,
};
use crate::devices::{Device, DeviceError, DevicePtr};
use crate::policy::{AllocError, Allocator, BlockHandle, BlockState, BlockView, SegmentView};
use crate::stats::{MemoryStats, PoolKind};

/// All sizes are rounded to at least this (`kMinBlockSize`).
pub const MIN_BLOCK_SIZE: u64 = 512;
/// Largest small-pool request (`kSmallSize`).
pub const SMALL_SIZE: u64 = 1 << 20;
/// Small segment size (`kSmallBuffer`).
pub const SMALL_BUFFER: u64 = 2 << 20;
/// Segment size of large requests below [`MIN_LARGE_ALLOC`] (`kLargeBuffer`).
pub const LARGE_BUFFER: u64 = 20 << 20;
/// Large requests from this size get a segment of their own size.
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// Physical chunk ("pBlock") size and large-pool rounding (`kGranularity`).
pub const GRANULARITY: u64 = 2 << 20;

/// `round_size` of GMLake: 512-byte multiples, 2 MiB multiples above 1 MiB.
pub fn round_size(size: u64) -> u64 {
    let r = round_up(size.max(1), MIN_BLOCK_SIZE);
    if r > SMALL_SIZE {
        round_up(size, GRANULARITY)
    } else {
        r
    }
}

/// `get_allocation_size`: the segment size for a rounded request.
pub fn allocation_size(rounded: u64) -> u64 {
    if rounded <= SMALL_SIZE {
        SMALL_BUFFER
    } else if rounded < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        round_up(rounded, GRANULARITY)
    }
}

/// Settings of the `stitch` policy.
///
/// Settings string keys: `stitch` (bool, GMLake `vmmDefragment`),
/// `fragment_limit` (size, `fragLimit`), `reuse_limit` (number ≥ 1,
/// `reuseLimit`), `defragment_level` (0, 1 or 2, `defragLevel`),
/// `max_pieces` (integer ≥ 2 or `unlimited`), `gc_limit` (size, `autoGC`).
/// Example: `fragment_limit:64MiB,defragment_level:0,max_pieces:8`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Stitch at all (off: a PyTorch-like allocator with 2 MiB large-pool
    /// rounding and virtual-memory segments).
    pub stitch: bool,
    /// Only large requests of at least this many bytes are stitched.
    pub fragment_limit: u64,
    /// A cached sBlock serves a request when its size is at most
    /// `request × reuse_limit`.
    pub reuse_limit: f64,
    /// The first of the three stitching points of `malloc` that may stitch.
    pub defragment_level: u8,
    /// Most pieces one sBlock may have (`None` = no limit).
    pub max_pieces: Option<u32>,
    /// Cached sBlocks are dissolved when all sBlocks together exceed this
    /// many bytes.
    pub gc_limit: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            stitch: true,
            fragment_limit: 512 << 20,
            reuse_limit: 1.0,
            defragment_level: 0,
            max_pieces: None,
            gc_limit: 1000 << 30,
        }
    }
}

impl Config {
    /// Parses a settings string (see [`Config`] for the keys). Keys not
    /// given keep their default.
    pub fn parse(s: &str) -> Result<Config, String> {
        const P: &str = "stitch";
        let mut c = Config::default();
        let known = [
            "stitch",
            "fragment_limit",
            "reuse_limit",
            "defragment_level",
            "max_pieces",
            "gc_limit",
        ];
        for (k, v) in split_settings(P, s, &known)? {
            match k {
                "stitch" => c.stitch = parse_bool(P, k, v)?,
                "fragment_limit" => c.fragment_limit = parse_bytes(P, k, v)?,
                "reuse_limit" => c.reuse_limit = parse_number(P, k, v, 1.0, false, 1e6)?,
                "defragment_level" => {
                    c.defragment_level = match v {
                        "0" => 0,
                        "1" => 1,
                        "2" => 2,
                        _ => {
                            return Err(format!(
                                "stitch setting defragment_level: invalid value '{v}' (expected 0, 1 or 2)"
                            ));
                        }
                    }
                }
                "max_pieces" => {
                    c.max_pieces = if v.eq_ignore_ascii_case("unlimited") {
                        None
                    } else {
                        match v.parse::<u32>() {
                            Ok(n) if n >= 2 => Some(n),
                            _ => {
                                return Err(format!(
                                    "stitch setting max_pieces: invalid value '{v}' (expected an integer of at least 2, or unlimited)"
                                ));
                            }
                        }
                    }
                }
                "gc_limit" => c.gc_limit = parse_bytes(P, k, v)?,
                _ => unreachable!("split_settings only returns known keys"),
            }
        }
        Ok(c)
    }
}

impl fmt::Display for Config {
    /// The canonical settings string, every key spelled out:
    /// `stitch:true,fragment_limit:512MiB,reuse_limit:1,defragment_level:0,max_pieces:unlimited,gc_limit:1000GiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stitch:{},fragment_limit:{},reuse_limit:{},defragment_level:{},",
            self.stitch,
            size_string(self.fragment_limit),
            self.reuse_limit,
            self.defragment_level
        )?;
        match self.max_pieces {
            Some(n) => write!(f, "max_pieces:{n},")?,
            None => write!(f, "max_pieces:unlimited,")?,
        }
        write!(f, "gc_limit:{}", size_string(self.gc_limit))
    }
}

impl FromStr for Config {
    type Err = String;
    fn from_str(s: &str) -> Result<Config, String> {
        Config::parse(s)
    }
}

/// State of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Cached (plain block: in its pool's free set; sBlock: in the cached
    /// set).
    Free,
    /// Handed out.
    Allocated,
    /// Freed by the caller, waiting for streams or for the trace.
    PendingFree,
    /// A piece whose pages are moved into the sBlock with this index.
    Stitched(u32),
}

/// A block: a piece of a physical segment, or an sBlock (`seg == NIL`).
#[derive(Debug, Clone)]
struct Block {
    ptr: u64,
    size: u64,
    requested: u64,
    stream: u64,
    prev: u32,
    next: u32,
    seg: u32,
    pool: PoolKind,
    state: State,
    /// Streams other than `stream` the block was used on.
    stream_uses: Vec<u64>,
    /// sBlock: its pieces in address order of the stitched range.
    sources: Vec<u32>,
}

impl Block {
    #[inline]
    fn is_split(&self) -> bool {
        self.prev != NIL || self.next != NIL
    }

    #[inline]
    fn is_sblock(&self) -> bool {
        self.seg == NIL
    }
}

/// A physical segment.
#[derive(Debug, Clone, Copy)]
struct Segment {
    ptr: u64,
    size: u64,
    pool: PoolKind,
    stream: u64,
    /// Block at the segment's base (merges and splits keep it there).
    first: u32,
}

/// Sort key of a cached block: stream, size, address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct FreeKey {
    stream: u64,
    size: u64,
    ptr: u64,
    idx: u32,
}

/// One request on its way through `malloc`.
#[derive(Debug, Clone, Copy)]
struct Params {
    size: u64,
    stream: u64,
    pool: PoolKind,
    alloc_size: u64,
}

/// The GMLake-style stitching allocator over a device.
#[derive(Debug, Clone)]
pub struct StitchAllocator<D: Device> {
    config: Config,
    device: D,
    blocks: Slots<Block>,
    segments: Slots<Segment>,
    /// `[small, large]` free plain blocks.
    pools: [BTreeSet<FreeKey>; 2],
    /// Cached (free) sBlocks.
    cached: BTreeSet<FreeKey>,
    /// Blocks freed while used on other streams; complete at the next
    /// `malloc`.
    stream_event_queue: Vec<u32>,
    /// Blocks whose free the trace deferred.
    trace_pending: crate::pending::PendingList,
    /// Bytes of all live sBlocks.
    stitched_bytes: u64,
    num_stitches: u64,
    num_dissolves: u64,
    scratch: Vec<u32>,
    stats: MemoryStats,
}

impl<D: Device> StitchAllocator<D> {
    /// A fresh allocator over `device`.
    pub fn new(config: Config, device: D) -> Self {
        StitchAllocator {
            config,
            device,
            blocks: Slots::default(),
            segments: Slots::default(),
            pools: [BTreeSet::new(), BTreeSet::new()],
            cached: BTreeSet::new(),
            stream_event_queue: Vec::new(),
            trace_pending: Default::default(),
            stitched_bytes: 0,
            num_stitches: 0,
            num_dissolves: 0,
            scratch: Vec::new(),
            stats: MemoryStats::new(u64::MAX),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Consumes the allocator and returns its device (segments are not
    /// freed).
    pub fn into_device(self) -> D {
        self.device
    }

    /// Live sBlocks (handed out, pending or cached).
    pub fn num_sblocks(&self) -> usize {
        self.blocks
            .live()
            .filter(|&i| self.blocks[i].is_sblock())
            .count()
    }

    /// Cached (free) sBlocks.
    pub fn num_cached_sblocks(&self) -> usize {
        self.cached.len()
    }

    /// Bytes of all live sBlocks.
    pub fn stitched_bytes(&self) -> u64 {
        self.stitched_bytes
    }

    /// sBlocks created so far.
    pub fn num_stitches(&self) -> u64 {
        self.num_stitches
    }

    /// sBlocks dissolved so far (pages moved back home).
    pub fn num_dissolves(&self) -> u64 {
        self.num_dissolves
    }

    /// Sizes of the pieces of the sBlock `handle` names, in stitched order
    /// (empty for a plain block or a stale handle).
    pub fn pieces(&self, handle: BlockHandle) -> Vec<(u64, u64)> {
        if handle.is_null() || !self.blocks.is_current(handle.index, handle.generation) {
            return Vec::new();
        }
        self.blocks[handle.index]
            .sources
            .iter()
            .map(|&p| (self.blocks[p].ptr, self.blocks[p].size))
            .collect()
    }

    fn new_block(&mut self, b: Block) -> u32 {
        self.blocks.insert_with(b, |old, new| {
            std::mem::swap(&mut old.stream_uses, &mut new.stream_uses);
            std::mem::swap(&mut old.sources, &mut new.sources);
            new.stream_uses.clear();
            new.sources.clear();
        })
    }

    #[inline]
    fn key(&self, idx: u32) -> FreeKey {
        let b = &self.blocks[idx];
        FreeKey {
            stream: b.stream,
            size: b.size,
            ptr: b.ptr,
            idx,
        }
    }

    /// Puts a plain block into its pool's free set.
    fn insert_free(&mut self, idx: u32) {
        let key = self.key(idx);
        let b = &mut self.blocks[idx];
        b.state = State::Free;
        let pool = b.pool;
        if b.is_split() {
            self.stats.inactive_split.increase(pool, 1);
            self.stats.inactive_split_bytes.increase(pool, key.size);
        }
        pool.select_mut(&mut self.pools).insert(key);
    }

    /// Takes a plain block out of its pool's free set.
    fn remove_free(&mut self, idx: u32) {
        let key = self.key(idx);
        let b = &self.blocks[idx];
        let pool = b.pool;
        if b.is_split() {
            self.stats.inactive_split.decrease(pool, 1);
            self.stats.inactive_split_bytes.decrease(pool, key.size);
        }
        pool.select_mut(&mut self.pools).remove(&key);
    }

    /// `b`, the next neighbour of `a`, is absorbed into `a`.
    fn absorb(&mut self, a: u32, b: u32) {
        let (size, next) = (self.blocks[b].size, self.blocks[b].next);
        let blk = &mut self.blocks[a];
        blk.size += size;
        blk.next = next;
        if next != NIL {
            self.blocks[next].prev = a;
        }
        self.blocks.remove(b);
    }

    /// Merges the plain block `idx` (free, not in a set) with free
    /// neighbours and inserts the result into its pool.
    fn coalesce_and_insert(&mut self, idx: u32) {
        let mut h = idx;
        let next = self.blocks[h].next;
        if next != NIL && self.blocks[next].state == State::Free {
            self.remove_free(next);
            self.absorb(h, next);
        }
        let prev = self.blocks[h].prev;
        if prev != NIL && self.blocks[prev].state == State::Free {
            self.remove_free(prev);
            self.absorb(prev, h);
            h = prev;
        }
        self.insert_free(h);
    }

    /// `free_block`: a block's memory becomes reusable.
    fn free_block(&mut self, idx: u32) {
        let (size, requested, pool, sblock) = {
            let b = &self.blocks[idx];
            (b.size, b.requested, b.pool, b.is_sblock())
        };
        let s = &mut self.stats;
        s.active.decrease(pool, 1);
        s.active_bytes.decrease(pool, size);
        s.requested_bytes.decrease(pool, requested);
        if sblock {
            self.blocks[idx].state = State::Free;
            let key = self.key(idx);
            self.cached.insert(key);
        } else {
            self.blocks[idx].state = State::Free;
            self.coalesce_and_insert(idx);
        }
    }

    /// `process_events`: frees deferred by `record_stream` complete by the
    /// next `malloc` (a replay has no GPU backlog).
    fn process_events(&mut self) {
        if self.stream_event_queue.is_empty() {
            return;
        }
        let queue = std::mem::take(&mut self.stream_event_queue);
        for &idx in &queue {
            self.free_block(idx);
        }
        self.stream_event_queue = queue;
        self.stream_event_queue.clear();
    }

    /// `synchronize_and_free_events`.
    fn synchronize_and_free_events(&mut self) {
        self.stats.num_sync_all_streams += 1;
        self.process_events();
        let pending = self.trace_pending.take();
        for &idx in &pending {
            self.free_block(idx);
        }
        self.trace_pending.recycle(pending);
    }

    /// Best fit among the free plain blocks of the request's pool and
    /// stream; removed from the set.
    fn get_free_block(&mut self, p: &Params) -> Option<u32> {
        let key = p
            .pool
            .select(&self.pools)
            .range(
                FreeKey {
                    stream: p.stream,
                    size: p.size,
                    ptr: 0,
                    idx: 0,
                }..,
            )
            .next()
            .copied()
            .filter(|k| k.stream == p.stream)?;
        self.remove_free(key.idx);
        Some(key.idx)
    }

    /// The smallest cached sBlock of the stream that fits, within the
    /// reuse limit; removed from the cached set.
    fn reuse_cached(&mut self, p: &Params) -> Option<u32> {
        let key = self
            .cached
            .range(
                FreeKey {
                    stream: p.stream,
                    size: p.size,
                    ptr: 0,
                    idx: 0,
                }..,
            )
            .next()
            .copied()
            .filter(|k| k.stream == p.stream)?;
        if key.size as f64 > p.size as f64 * self.config.reuse_limit {
            return None;
        }
        self.cached.remove(&key);
        Some(key.idx)
    }

    /// A new physical segment for `p`; `Ok(None)` when the device is full.
    /// The returned block is free and in no set.
    fn alloc_segment(&mut self, p: &Params, retry: bool) -> Result<Option<u32>, AllocError> {
        if retry {
            self.stats.num_alloc_retries += 1;
        }
        let size = p.alloc_size;
        let ptr = match p.pool {
            PoolKind::Small => match self.device.malloc(size) {
                Ok(ptr) => ptr,
                Err(DeviceError::OutOfMemory { .. }) => return Ok(None),
                Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
            },
            PoolKind::Large => {
                let base = match self.device.reserve(size) {
                    Ok(b) => b,
                    Err(DeviceError::OutOfMemory { .. }) => return Ok(None),
                    Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
                };
                match self.device.map(base, size, GRANULARITY) {
                    Ok(()) => base,
                    Err(e) => {
                        self.device
                            .release(base, size)
                            .map_err(|e| AllocError::Device(e.to_string()))?;
                        return match e {
                            DeviceError::OutOfMemory { .. } => Ok(None),
                            DeviceError::Other(e) => Err(AllocError::Device(e)),
                        };
                    }
                }
            }
        };
        let seg = self.segments.insert(Segment {
            ptr,
            size,
            pool: p.pool,
            stream: p.stream,
            first: NIL,
        });
        let idx = self.new_block(Block {
            ptr,
            size,
            requested: 0,
            stream: p.stream,
            prev: NIL,
            next: NIL,
            seg,
            pool: p.pool,
            state: State::Free,
            stream_uses: Vec::new(),
            sources: Vec::new(),
        });
        self.segments[seg].first = idx;
        let s = &mut self.stats;
        s.segment.increase(p.pool, 1);
        s.reserved_bytes.increase(p.pool, size);
        s.num_device_alloc += 1;
        Ok(Some(idx))
    }

    /// Splits the plain block `idx` (in no set): it keeps its first `size`
    /// bytes, the rest becomes a free block.
    fn split(&mut self, idx: u32, size: u64) {
        let (ptr, total, next, stream, seg, pool) = {
            let b = &self.blocks[idx];
            (b.ptr, b.size, b.next, b.stream, b.seg, b.pool)
        };
        let rem = self.new_block(Block {
            ptr: ptr + size,
            size: total - size,
            requested: 0,
            stream,
            prev: idx,
            next,
            seg,
            pool,
            state: State::Free,
            stream_uses: Vec::new(),
            sources: Vec::new(),
        });
        if next != NIL {
            self.blocks[next].prev = rem;
        }
        let b = &mut self.blocks[idx];
        b.next = rem;
        b.size = size;
        self.insert_free(rem);
    }

    /// `should_split`.
    fn should_split(&self, idx: u32, size: u64) -> bool {
        let b = &self.blocks[idx];
        let remaining = b.size - size;
        match b.pool {
            PoolKind::Small => remaining >= MIN_BLOCK_SIZE,
            PoolKind::Large => remaining >= GRANULARITY,
        }
    }

    /// Hands out block `idx` (plain: split first when worth it).
    fn hand_out(&mut self, idx: u32, p: &Params, orig: u64) -> BlockHandle {
        if !self.blocks[idx].is_sblock() && self.should_split(idx, p.size) {
            self.split(idx, p.size);
        }
        let b = &mut self.blocks[idx];
        b.state = State::Allocated;
        b.requested = orig;
        b.stream_uses.clear();
        let (size, pool) = (b.size, b.pool);
        let s = &mut self.stats;
        s.allocation.increase(pool, 1);
        s.allocated_bytes.increase(pool, size);
        s.active.increase(pool, 1);
        s.active_bytes.increase(pool, size);
        s.requested_bytes.increase(pool, orig);
        self.blocks.renew(idx)
    }

    /// May stitching run at `point` (0, 1, 2) for `p`?
    fn may_stitch(&self, p: &Params, point: u8) -> bool {
        self.config.stitch
            && p.pool == PoolKind::Large
            && p.size >= self.config.fragment_limit
            && point >= self.config.defragment_level
    }

    /// `get_fused_fragmented_blocks`: stitches free large blocks of the
    /// stream into a new sBlock of exactly `p.size` bytes. `Ok(None)` when
    /// they do not suffice (or need more than `max_pieces`).
    fn stitch(&mut self, p: &Params) -> Result<Option<u32>, AllocError> {
        let lo = FreeKey {
            stream: p.stream,
            size: 0,
            ptr: 0,
            idx: 0,
        };
        let hi = FreeKey {
            stream: p.stream,
            size: u64::MAX,
            ptr: u64::MAX,
            idx: u32::MAX,
        };
        let mut pieces = std::mem::take(&mut self.scratch);
        pieces.clear();
        let mut sum = 0u64;
        let limit = self.config.max_pieces.map_or(usize::MAX, |n| n as usize);
        for k in PoolKind::Large.select(&self.pools).range(lo..=hi).rev() {
            if sum >= p.size || pieces.len() >= limit {
                break;
            }
            pieces.push(k.idx);
            sum += k.size;
        }
        if sum < p.size || pieces.len() < 2 {
            self.scratch = pieces;
            return Ok(None);
        }
        let vbase = match self.device.reserve(p.size) {
            Ok(b) => b,
            Err(DeviceError::OutOfMemory { .. }) => {
                self.scratch = pieces;
                return Ok(None);
            }
            Err(DeviceError::Other(e)) => {
                self.scratch = pieces;
                return Err(AllocError::Device(e));
            }
        };
        for &i in &pieces {
            self.remove_free(i);
        }
        let overshoot = sum - p.size;
        // `pieces` has at least two entries (checked above).
        if overshoot > 0
            && let Some(&last) = pieces.last()
        {
            let keep = self.blocks[last].size - overshoot;
            self.split(last, keep);
        }
        let result = self.move_pages(&pieces, vbase, p.size);
        if let Err(e) = result {
            for &i in &pieces {
                self.coalesce_and_insert(i);
            }
            self.scratch = pieces;
            return Err(e);
        }
        let sidx = self.new_block(Block {
            ptr: vbase,
            size: p.size,
            requested: 0,
            stream: p.stream,
            prev: NIL,
            next: NIL,
            seg: NIL,
            pool: PoolKind::Large,
            state: State::Free,
            stream_uses: Vec::new(),
            sources: Vec::new(),
        });
        self.blocks[sidx].sources.extend_from_slice(&pieces);
        for &i in &pieces {
            self.blocks[i].state = State::Stitched(sidx);
        }
        self.scratch = pieces;
        self.stitched_bytes += p.size;
        self.num_stitches += 1;
        if self.stitched_bytes > self.config.gc_limit {
            self.dissolve_cached()?;
        }
        Ok(Some(sidx))
    }

    /// Unmaps `pieces` at home and maps as many bytes at `vbase`. On
    /// failure everything is undone (pieces mapped back, reservation
    /// released).
    fn move_pages(&mut self, pieces: &[u32], vbase: u64, size: u64) -> Result<(), AllocError> {
        let dev_err = |e: DeviceError| AllocError::Device(e.to_string());
        for &i in pieces {
            let (ptr, sz) = (self.blocks[i].ptr, self.blocks[i].size);
            self.device.unmap(ptr, sz).map_err(dev_err)?;
        }
        if let Err(e) = self.device.map(vbase, size, GRANULARITY) {
            for &i in pieces {
                let (ptr, sz) = (self.blocks[i].ptr, self.blocks[i].size);
                self.device.map(ptr, sz, GRANULARITY).map_err(dev_err)?;
            }
            self.device.release(vbase, size).map_err(dev_err)?;
            return Err(dev_err(e));
        }
        Ok(())
    }

    /// Moves the pages of the cached sBlock `sidx` back home, releases its
    /// reservation and returns its pieces to their pools.
    fn dissolve(&mut self, sidx: u32) -> Result<(), AllocError> {
        let dev_err = |e: DeviceError| AllocError::Device(e.to_string());
        let key = self.key(sidx);
        self.cached.remove(&key);
        let (vbase, size) = (self.blocks[sidx].ptr, self.blocks[sidx].size);
        self.device.unmap(vbase, size).map_err(dev_err)?;
        self.device.release(vbase, size).map_err(dev_err)?;
        let sources = std::mem::take(&mut self.blocks[sidx].sources);
        let mut result = Ok(());
        for &i in &sources {
            let (ptr, sz) = (self.blocks[i].ptr, self.blocks[i].size);
            if let Err(e) = self.device.map(ptr, sz, GRANULARITY) {
                result = Err(dev_err(e));
            }
            self.blocks[i].state = State::Free;
            self.coalesce_and_insert(i);
        }
        self.blocks[sidx].sources = sources;
        self.blocks[sidx].sources.clear();
        self.blocks.remove(sidx);
        self.stitched_bytes -= size;
        self.num_dissolves += 1;
        result
    }

    /// Dissolves every cached sBlock.
    fn dissolve_cached(&mut self) -> Result<(), AllocError> {
        if self.cached.is_empty() {
            return Ok(());
        }
        let mut todo = std::mem::take(&mut self.scratch);
        todo.clear();
        todo.extend(self.cached.iter().map(|k| k.idx));
        let mut result = Ok(());
        for &s in &todo {
            if let Err(e) = self.dissolve(s) {
                result = Err(e);
                break;
            }
        }
        self.scratch = todo;
        result
    }

    /// Frees a physical segment made of the single free block `idx`.
    fn release_segment(&mut self, idx: u32) -> Result<(), AllocError> {
        let dev_err = |e: DeviceError| AllocError::Device(e.to_string());
        let (seg, pool) = (self.blocks[idx].seg, self.blocks[idx].pool);
        let Segment { ptr, size, .. } = self.segments[seg];
        match pool {
            PoolKind::Small => self.device.free(ptr, size).map_err(dev_err)?,
            PoolKind::Large => {
                self.device.unmap(ptr, size).map_err(dev_err)?;
                self.device.release(ptr, size).map_err(dev_err)?;
            }
        }
        self.remove_free(idx);
        self.blocks.remove(idx);
        self.segments.remove(seg);
        let s = &mut self.stats;
        s.segment.decrease(pool, 1);
        s.reserved_bytes.decrease(pool, size);
        s.num_device_free += 1;
        Ok(())
    }

    /// `release_cached_blocks`: completes pending frees, dissolves cached
    /// sBlocks, then frees every whole free segment (large pool first).
    fn release_cached(&mut self) -> Result<(), AllocError> {
        self.synchronize_and_free_events();
        self.dissolve_cached()?;
        let mut whole = std::mem::take(&mut self.scratch);
        let mut result = Ok(());
        for kind in [PoolKind::Large, PoolKind::Small] {
            whole.clear();
            whole.extend(
                kind.select(&self.pools)
                    .iter()
                    .filter(|k| !self.blocks[k.idx].is_split())
                    .map(|k| k.idx),
            );
            for &idx in &whole {
                if let Err(e) = self.release_segment(idx) {
                    result = Err(e);
                    break;
                }
            }
            if result.is_err() {
                break;
            }
        }
        self.scratch = whole;
        result
    }

    fn resolve(&self, h: BlockHandle, want: State) -> Result<u32, AllocError> {
        if self.blocks.is_current(h.index, h.generation) && self.blocks[h.index].state == want {
            Ok(h.index)
        } else {
            Err(AllocError::UnknownHandle(h))
        }
    }

    fn free_impl(&mut self, h: BlockHandle, deferred: bool) -> Result<(), AllocError> {
        if h.is_null() {
            return Ok(());
        }
        let idx = self.resolve(h, State::Allocated)?;
        let (size, pool) = (self.blocks[idx].size, self.blocks[idx].pool);
        self.stats.allocation.decrease(pool, 1);
        self.stats.allocated_bytes.decrease(pool, size);
        if deferred {
            self.blocks[idx].state = State::PendingFree;
            self.blocks[idx].stream_uses.clear();
            self.trace_pending.push(idx);
        } else if !self.blocks[idx].stream_uses.is_empty() {
            self.blocks[idx].state = State::PendingFree;
            self.blocks[idx].stream_uses.clear();
            self.stream_event_queue.push(idx);
        } else {
            self.free_block(idx);
        }
        Ok(())
    }
}

impl<D: Device> Allocator for StitchAllocator<D> {
    type Dev = D;

    fn name(&self) -> &'static str {
        "stitch"
    }

    fn malloc(&mut self, size: u64, stream: u64) -> Result<BlockHandle, AllocError> {
        if size == 0 {
            return Ok(BlockHandle::NULL);
        }
        if size >= MAX_REQUEST {
            return Err(exceeds_limit(&self.device, &self.stats, size, None));
        }
        self.process_events();
        let rounded = round_size(size);
        let pool = if rounded <= SMALL_SIZE {
            PoolKind::Small
        } else {
            PoolKind::Large
        };
        let p = Params {
            size: rounded,
            stream,
            pool,
            alloc_size: allocation_size(rounded),
        };
        let mut found = self.get_free_block(&p);
        if found.is_none() && pool == PoolKind::Large {
            found = self.reuse_cached(&p);
        }
        if found.is_none() && self.may_stitch(&p, 0) {
            found = self.stitch(&p)?;
        }
        if found.is_none() && !self.cached.is_empty() {
            // Cached sBlocks hold pages the home segments could use.
            self.dissolve_cached()?;
            found = self.get_free_block(&p);
            if found.is_none() && self.may_stitch(&p, 0) {
                found = self.stitch(&p)?;
            }
        }
        if found.is_none() {
            found = self.alloc_segment(&p, false)?;
        }
        if found.is_none() && self.may_stitch(&p, 1) {
            found = self.stitch(&p)?;
        }
        if found.is_none() {
            self.release_cached()?;
            found = self.alloc_segment(&p, true)?;
        }
        if found.is_none() && self.may_stitch(&p, 2) {
            found = self.stitch(&p)?;
        }
        match found {
            Some(idx) => Ok(self.hand_out(idx, &p, size)),
            None => Err(out_of_memory(
                &self.device,
                &mut self.stats,
                size,
                rounded,
                p.alloc_size,
                None,
            )),
        }
    }

    fn free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_impl(handle, false)
    }

    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_impl(handle, true)
    }

    fn complete_free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        if handle.is_null() || !self.blocks.is_current(handle.index, handle.generation) {
            return Ok(());
        }
        match self.blocks[handle.index].state {
            State::PendingFree => {
                let i = handle.index;
                if self.trace_pending.remove(i) {
                    // Deferred by the trace.
                } else if let Some(pos) = self.stream_event_queue.iter().position(|&x| x == i) {
                    self.stream_event_queue.remove(pos);
                }
                self.free_block(i);
                Ok(())
            }
            State::Allocated => Err(AllocError::UnknownHandle(handle)),
            State::Free | State::Stitched(_) => Ok(()),
        }
    }

    fn record_stream(&mut self, handle: BlockHandle, stream: u64) -> Result<(), AllocError> {
        if handle.is_null() {
            return Ok(());
        }
        let idx = self.resolve(handle, State::Allocated)?;
        let b = &mut self.blocks[idx];
        if stream != b.stream && !b.stream_uses.contains(&stream) {
            b.stream_uses.push(stream);
        }
        Ok(())
    }

    fn empty_cache(&mut self) -> Result<(), AllocError> {
        self.release_cached()
    }

    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        if handle.is_null() || !self.blocks.is_current(handle.index, handle.generation) {
            return 0;
        }
        let b = &self.blocks[handle.index];
        match b.state {
            State::Allocated | State::PendingFree => b.ptr,
            State::Free | State::Stitched(_) => 0,
        }
    }

    fn stats(&self) -> &MemoryStats {
        &self.stats
    }

    /// Largest cached block: a free plain block or a cached sBlock.
    fn largest_free_block(&self) -> u64 {
        self.pools
            .iter()
            .chain(std::iter::once(&self.cached))
            .flat_map(|s| s.iter())
            .map(|k| k.size)
            .max()
            .unwrap_or(0)
    }

    fn segments(&self) -> Vec<SegmentView> {
        let mut out = Vec::with_capacity(self.segments.len());
        for si in self.segments.live() {
            let seg = self.segments[si];
            let mut view = SegmentView {
                ptr: seg.ptr,
                size: seg.size,
                stream: seg.stream,
                pool: seg.pool,
                is_expandable: false,
                blocks: Vec::new(),
            };
            let mut i = seg.first;
            while i != NIL {
                let b = &self.blocks[i];
                let state = match b.state {
                    State::Stitched(s) => self.blocks[s].state,
                    st => st,
                };
                view.blocks.push(BlockView {
                    ptr: b.ptr,
                    size: b.size,
                    requested: b.requested,
                    state: match state {
                        State::Allocated => BlockState::Allocated,
                        State::PendingFree => BlockState::PendingFree,
                        _ => BlockState::Free,
                    },
                });
                i = b.next;
            }
            out.push(view);
        }
        out.sort_by_key(|s| s.ptr);
        out
    }

    fn check_invariants(&self) -> Result<(), String> {
        let mut want = MemoryStats::new(u64::MAX);
        let mut free_keys: [BTreeSet<FreeKey>; 2] = [BTreeSet::new(), BTreeSet::new()];
        let mut cached = BTreeSet::new();
        let mut visited = 0usize;
        let mut pending = 0usize;
        let mut stitched = 0u64;
        let count_caller_block =
            |want: &mut MemoryStats, b: &Block, pending: &mut usize| match b.state {
                State::Allocated => {
                    want.allocation.increase(b.pool, 1);
                    want.allocated_bytes.increase(b.pool, b.size);
                    want.active.increase(b.pool, 1);
                    want.active_bytes.increase(b.pool, b.size);
                    want.requested_bytes.increase(b.pool, b.requested);
                }
                State::PendingFree => {
                    *pending += 1;
                    want.active.increase(b.pool, 1);
                    want.active_bytes.increase(b.pool, b.size);
                    want.requested_bytes.increase(b.pool, b.requested);
                }
                State::Free | State::Stitched(_) => {}
            };
        for si in self.segments.live() {
            let seg = self.segments[si];
            want.segment.increase(seg.pool, 1);
            want.reserved_bytes.increase(seg.pool, seg.size);
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
                visited += 1;
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
                        b.pool.select_mut(&mut free_keys).insert(FreeKey {
                            stream: b.stream,
                            size: b.size,
                            ptr: b.ptr,
                            idx: i,
                        });
                        if b.is_split() {
                            want.inactive_split.increase(b.pool, 1);
                            want.inactive_split_bytes.increase(b.pool, b.size);
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
                    _ => count_caller_block(&mut want, b, &mut pending),
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
        }
        for i in self.blocks.live() {
            let b = &self.blocks[i];
            if !b.is_sblock() {
                continue;
            }
            visited += 1;
            stitched += b.size;
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
                    cached.insert(FreeKey {
                        stream: b.stream,
                        size: b.size,
                        ptr: b.ptr,
                        idx: i,
                    });
                }
                State::Stitched(_) => return Err(format!("sBlock {i} is itself stitched")),
                _ => count_caller_block(&mut want, b, &mut pending),
            }
        }
        ensure!(
            visited == self.blocks.len(),
            "{} live blocks but {visited} reachable",
            self.blocks.len()
        );
        for kind in [PoolKind::Small, PoolKind::Large] {
            let (want_free, pool) = (kind.select(&free_keys), kind.select(&self.pools));
            ensure!(
                want_free == pool,
                "{} pool: the free set differs from the free blocks ({} in set, {} free blocks)",
                kind.name(),
                pool.len(),
                want_free.len()
            );
        }
        ensure!(
            cached == self.cached,
            "the cached sBlock set differs from the free sBlocks"
        );
        ensure!(
            pending == self.trace_pending.len() + self.stream_event_queue.len(),
            "{pending} pending blocks but {} queued",
            self.trace_pending.len() + self.stream_event_queue.len()
        );
        ensure!(
            stitched == self.stitched_bytes,
            "sBlocks hold {stitched} bytes but stitched_bytes is {}",
            self.stitched_bytes
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
    fn rounding_follows_gmlake() {
        assert_eq!(round_size(1), 512);
        assert_eq!(round_size(1 << 20), 1 << 20);
        assert_eq!(round_size((1 << 20) + 1), 2 << 20);
        assert_eq!(round_size(5 << 20), 6 << 20);
        assert_eq!(allocation_size(512), SMALL_BUFFER);
        assert_eq!(allocation_size(8 << 20), LARGE_BUFFER);
        assert_eq!(allocation_size(10 << 20), 10 << 20);
    }

    #[test]
    fn config_round_trips() {
        let c = Config::default();
        assert_eq!(
            c.to_string(),
            "stitch:true,fragment_limit:512MiB,reuse_limit:1,defragment_level:0,max_pieces:unlimited,gc_limit:1000GiB"
        );
        assert_eq!(Config::parse(&c.to_string()), Ok(c));
        let c =
            Config::parse("fragment_limit:64MiB,max_pieces:8,reuse_limit:2.5,defragment_level:1")
                .unwrap();
        assert_eq!(c.fragment_limit, 64 << 20);
        assert_eq!(c.max_pieces, Some(8));
        assert_eq!(Config::parse(&c.to_string()), Ok(c));
        assert!(Config::parse("max_pieces:1").is_err());
        assert!(Config::parse("defragment_level:3").is_err());
        assert!(Config::parse("reuse_limit:0.5").is_err());
    }
}
