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
//!
//! Module map: this file (the allocator and the calls it serves), `settings`
//! (the settings string), `rounding` (sizes and segment sizes), `pools` (the
//! free sets of plain blocks), `blocks` (splitting and merging), `malloc`
//! (the steps of the allocation path and new segments), `stitching` (creating, reusing and dissolving sBlocks), `free`
//! (frees and their completion), `release` (returning segments),
//! `view` (what it holds: segment views), `invariants` (the consistency
//! checker).

mod blocks;
mod free;
mod invariants;
mod malloc;
mod pools;
mod release;
mod rounding;
mod settings;
mod stitching;
mod view;

use std::collections::BTreeSet;

use rounding::{SMALL_SIZE, allocation_size, round_size};
pub use settings::Settings;

use super::arena::{Arena, NIL};
use super::oom::{MAX_REQUEST, exceeds_limit, out_of_memory};
use crate::devices::Device;
use crate::policy::{AllocError, Allocator, BlockHandle, Seed};
use crate::stats::{MemoryStats, PoolKind};

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
    settings: Settings,
    device: D,
    blocks: Arena<Block>,
    segments: Arena<Segment>,
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
    pub fn new(settings: Settings, device: D) -> Self {
        StitchAllocator {
            settings,
            device,
            blocks: Arena::default(),
            segments: Arena::default(),
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

    fn resolve(&self, h: BlockHandle, want: State) -> Result<u32, AllocError> {
        if self.blocks.is_current(h.index, h.generation) && self.blocks[h.index].state == want {
            Ok(h.index)
        } else {
            Err(AllocError::UnknownHandle(h))
        }
    }
}

impl<D: Device> Allocator for StitchAllocator<D> {
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
        self.free_handle(handle, false)
    }

    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_handle(handle, true)
    }

    /// Completes a free the trace (or `record_stream` uses) deferred; a
    /// handle whose free already completed is accepted and ignored.
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
}

/// Replays start from an empty state only.
impl<D: Device> Seed for StitchAllocator<D> {}
