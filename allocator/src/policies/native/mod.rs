//! PyTorch's native CUDA caching allocator (`DeviceCachingAllocator`),
//! reproduced decision for decision from c10/cuda/CUDACachingAllocator.cpp.
//!
//! The source read for each rule is cited where it is implemented. The
//! policy is a pure state machine over a [`Device`]: every segment decision
//! shows up as a device call, and nothing here knows whether the device is
//! simulated or real.
//!
//! Module map: this file (the allocator and the calls it serves,
//! [`Allocator`]), `rounding` (sizes: [`round_size`], [`allocation_size`]), `block`/`pool` (data structures),
//! `malloc` (the steps of the allocation path), `free` (frees and
//! coalescing), `release` (cache release, garbage collection), `expandable`
//! (expandable segments), `view` (what it holds, [`Inspect`](crate::Inspect)),
//! `invariants` (the consistency checker), `seed` (initial state of traces
//! that start mid-run, [`Seed`](crate::Seed)).

mod block;
mod block_order;
mod class_run;
mod expandable;
mod free;
mod free_set;
mod invariants;
mod malloc;
mod pool;
mod pool_ref;
mod private;
mod release;
mod rounding;
mod seed;
mod size_buckets;
mod sorted_blocks;
mod stream_table;
mod ties;
mod view;

use crate::conf::AllocConf;
use crate::devices::Device;
use crate::policies::oom::{MAX_REQUEST, exceeds_limit};
use crate::policy::{AllocError, Allocator, BlockHandle, PoolOptions, PoolRoute};
use crate::stats::MemoryStats;

use block::{Arena, State};
use expandable::ExpandableSegment;
use malloc::Params;
use pool::{Pool, PoolRef};
use rounding::SMALL_SIZE;
pub use rounding::{allocation_size, interval_index, round_size};

/// PyTorch's native caching allocator for one device.
#[derive(Debug, Clone)]
pub struct NativeAllocator<D: Device> {
    conf: AllocConf,
    device: D,
    arena: Arena,
    /// `[small_blocks, large_blocks]`, then each private pool's pair
    /// (indexed by [`pool::PoolRef`]).
    pools: pool::Pools,
    /// The private pools (graphs' and MemPools'), by the trace's pool
    /// index; `None` for one not made yet or deleted.
    private: Vec<Option<private::PrivatePool>>,
    /// `captures_underway`: the pools requests are routed to, in the order
    /// they were registered.
    routes: Vec<(u32, crate::policy::PoolRoute)>,
    stats: MemoryStats,
    /// Bytes obtained from the device (segments + mapped pages).
    total_allocated_memory: u64,
    /// `allowed_memory_maximum` when a memory fraction is set.
    allowed_memory_maximum: Option<u64>,
    /// Blocks freed while used on other streams (`record_stream`); their
    /// events are complete by the next `malloc` (`process_events`).
    stream_event_queue: Vec<u32>,
    /// Blocks whose free a trace deferred; they complete on
    /// [`Allocator::complete_free`] or at a synchronisation.
    trace_pending: crate::pending::PendingList,
    /// Expandable segments (`expandable_segments_`), `None` once released.
    expandable_segments: Vec<Option<ExpandableSegment>>,
    /// `stream_uses` of allocated blocks that were used on other streams
    /// (`record_stream`), by arena index. Rare, so kept out of the blocks.
    stream_uses: std::collections::HashMap<u32, Vec<u64>>,
    /// How blocks of one size are ordered (by the release).
    tie_order: block::TieOrder,
    /// The last allocation-order counter handed out.
    counter: u64,
    /// The counter of the segment being seeded.
    seeding: u64,
    /// Choices made between free blocks of one size in different segments
    /// (`ties.rs`; counted once).
    placement_ties: u64,
}

/// Counters below this are those of seeded segments
/// ([`NativeAllocator::seeded_counter`]); the replay's own start above it.
const SEEDED_COUNTERS: u64 = 1 << 48;

impl<D: Device> NativeAllocator<D> {
    /// A fresh allocator with `conf` over `device`. A
    /// `per_process_memory_fraction` in `conf` is applied at construction,
    /// as PyTorch does.
    pub fn new(conf: AllocConf, device: D) -> Self {
        let stats = MemoryStats::new(conf.max_split_size_bytes());
        let tie_order = block::TieOrder::of(conf.version);
        let mut a = NativeAllocator {
            conf,
            device,
            arena: Arena::default(),
            pools: pool::Pools::new(),
            private: Vec::new(),
            routes: Vec::new(),
            stats,
            total_allocated_memory: 0,
            allowed_memory_maximum: None,
            stream_event_queue: Vec::new(),
            trace_pending: Default::default(),
            expandable_segments: Vec::new(),
            stream_uses: std::collections::HashMap::new(),
            tie_order,
            counter: SEEDED_COUNTERS,
            seeding: 0,
            placement_ties: 0,
        };
        if let Some(f) = a.conf.per_process_memory_fraction {
            a.set_memory_fraction(f);
        }
        a
    }

    /// The counter of a segment that existed before the trace began (a
    /// recorded state): a snapshot does not say in which order its segments
    /// were made, so they are taken as the driver model places them — newer
    /// 32 MiB regions below older ones, and inside a region upwards — and
    /// all before any segment the replay makes. Ties between seeded blocks
    /// of one size can therefore differ from PyTorch's under 2.12+
    /// (`--start fresh` has no such guess).
    fn seeded_counter(&self, base: u64) -> u64 {
        match self.tie_order {
            block::TieOrder::Address => 0,
            _ => {
                const REGION_BITS: u32 = 25; // 32 MiB
                const REGIONS: u64 = 1 << 23;
                let region = (base >> REGION_BITS).min(REGIONS - 1);
                ((REGIONS - 1 - region) << REGION_BITS) | (base & ((1 << REGION_BITS) - 1))
            }
        }
    }

    /// The counter of new backing memory (a cudaMalloc, a new expandable
    /// segment): the next one, or 0 under releases that order by address.
    fn segment_counter(&mut self) -> u64 {
        match self.tie_order {
            block::TieOrder::Address => 0,
            _ => {
                self.counter += 1;
                self.counter
            }
        }
    }

    /// The counter of a new block carved from a block whose counter is
    /// `parent`: a new one when every `Block` takes one (2.12), the
    /// segment's otherwise.
    fn block_counter(&mut self, parent: u64) -> u64 {
        match self.tie_order {
            block::TieOrder::BlockCounter => {
                self.counter += 1;
                self.counter
            }
            block::TieOrder::SegmentCounter => parent,
            block::TieOrder::Address => 0,
        }
    }

    /// `torch.cuda.set_per_process_memory_fraction(f)`: limits the bytes this
    /// allocator may obtain to `floor(f * device total)`.
    ///
    /// Up to 2.9 any call sets the limit (even `f = 1.0`, which still enables
    /// garbage collection); from 2.10 `f >= 1.0` removes it
    /// (`DeviceCachingAllocator::setMemoryFraction`).
    pub fn set_memory_fraction(&mut self, fraction: f64) {
        let total = self.device.mem_info().total;
        if self.conf.version.at_least(2, 10) && fraction >= 1.0 {
            self.allowed_memory_maximum = None;
        } else {
            let f = fraction.clamp(0.0, 1.0);
            self.allowed_memory_maximum = Some((f * total as f64) as u64);
        }
    }

    /// The memory-fraction limit in bytes, when one is set.
    pub fn allowed_memory_maximum(&self) -> Option<u64> {
        self.allowed_memory_maximum
    }

    /// Consumes the allocator and returns its device. Cached memory is not
    /// released; call [`Allocator::empty_cache`] first if that matters.
    pub fn into_device(self) -> D {
        self.device
    }

    #[inline]
    fn pool(&self, r: PoolRef) -> &Pool {
        &self.pools[r]
    }

    #[inline]
    fn pool_mut(&mut self, r: PoolRef) -> &mut Pool {
        &mut self.pools[r]
    }

    #[inline]
    fn max_split_size(&self) -> u64 {
        self.conf.max_split_size_bytes()
    }

    /// `expandable_segments` is on.
    #[inline]
    fn expandable_active(&self) -> bool {
        self.conf.expandable_segments
    }

    /// Garbage collection runs only with a memory fraction and a threshold.
    #[inline]
    fn gc_enabled(&self) -> bool {
        self.allowed_memory_maximum.is_some() && self.conf.garbage_collection_threshold > 0.0
    }

    /// Inserts a free block into its pool's free set, stamping its GC age
    /// base (`insert_into_blocks`).
    #[inline]
    fn insert_into_blocks(&mut self, idx: u32) {
        let kind = self.arena[idx].pool;
        let clock = self.pool(kind).clock;
        let b = &mut self.arena[idx];
        b.gc_count_base = clock;
        b.state = State::Free;
        let key = free_key(b, idx);
        self.pool_mut(kind).insert(key);
    }

    /// Puts `idx` in its pool's free set in place of the block `old` was
    /// the key of (the remainder of a split block takes the block's place),
    /// stamping its GC age base as [`Self::insert_into_blocks`] does.
    #[inline]
    fn replace_in_blocks(&mut self, old: &pool::FreeKey, idx: u32) {
        let kind = self.arena[idx].pool;
        let clock = self.pool(kind).clock;
        let b = &mut self.arena[idx];
        b.gc_count_base = clock;
        b.state = State::Free;
        let key = free_key(b, idx);
        self.pool_mut(kind).replace(old, key);
    }

    /// Removes a free block from its pool's free set.
    #[inline]
    fn remove_from_blocks(&mut self, idx: u32) {
        let b = &self.arena[idx];
        let key = free_key(b, idx);
        let kind = b.pool;
        self.pool_mut(kind).remove(&key);
    }

    fn handle_of(&self, idx: u32) -> BlockHandle {
        self.arena.handle(idx)
    }

    /// The arena index of a live handle in state `want`.
    fn resolve(&self, h: BlockHandle, want: State) -> Result<u32, AllocError> {
        if self.arena.is_current(h.index, h.generation) && self.arena[h.index].state == want {
            Ok(h.index)
        } else {
            Err(AllocError::UnknownHandle(h))
        }
    }
}

#[inline]
fn free_key(b: &block::Block, idx: u32) -> pool::FreeKey {
    pool::FreeKey {
        stream: b.stream,
        size: b.size,
        counter: b.counter,
        ptr: b.ptr,
        idx,
    }
}

impl<D: Device> Allocator for NativeAllocator<D> {
    /// `DeviceCachingAllocator::malloc`: round the request, take a cached
    /// block, else a new segment (after garbage collection, then after
    /// releasing cached blocks), else raise out-of-memory. The steps are in
    /// `malloc.rs`.
    fn malloc(&mut self, orig: u64, stream: u64) -> Result<BlockHandle, AllocError> {
        if orig == 0 {
            // PyTorch returns a null DataPtr without touching the allocator.
            return Ok(BlockHandle::NULL);
        }
        if orig >= MAX_REQUEST {
            // `TORCH_CHECK_WITH(OutOfMemoryError, size < one_exa_bytes, ...)`
            // before the lock: no trace entry, no statistics.
            return Err(exceeds_limit(
                &self.device,
                &self.stats,
                orig,
                self.allowed_memory_maximum,
            ));
        }
        if !self.under_capture() {
            // `process_events` is skipped while a capture is underway.
            self.process_events();
        }
        let size = rounding::round_size(&self.conf, orig);
        let pool = self.select_pool(size <= SMALL_SIZE, stream);
        let p = Params {
            size,
            stream,
            pool,
            alloc_size: rounding::allocation_size(&self.conf, size),
        };
        // The free-memory callbacks (CUDA IPC collection) never free anything
        // in a replay, so the second search of PyTorch's malloc is skipped.
        let mut found = self.get_free_block(&p);
        // A cached block is still in its pool's set; a new one is not.
        let mut cached = found.is_some();
        if found.is_none() {
            if self.gc_enabled() {
                self.garbage_collect()?;
            }
            found = self.alloc_block(&p, false)?;
            let mut p = p;
            if found.is_none() {
                // A MemPool marked `use_on_oom` lends its cached blocks.
                if let Some((q, idx)) = self.try_mempool_fallback(&p) {
                    p = q;
                    found = Some(idx);
                    cached = true;
                }
            }
            if found.is_none() && self.release_available_cached_blocks(&p)? {
                found = self.alloc_block(&p, false)?;
            }
            if found.is_none() && !self.keeps_cache() {
                // Up to 2.12, no cudaFree while a capture or MemPool
                // context is underway: the last resort is skipped and the
                // request fails sooner.
                self.release_cached_blocks()?;
                found = self.alloc_block(&p, true)?;
            }
            return match found {
                Some(idx) => {
                    let split = self.should_split(idx, size);
                    let idx = self.alloc_found_block(idx, &p, orig, split, cached);
                    Ok(self.handle_of(idx))
                }
                None => Err(self.raise_oom(orig, &p)),
            };
        }
        let Some(idx) = found else {
            return Err(self.raise_oom(orig, &p));
        };
        let split = self.should_split(idx, size);
        let idx = self.alloc_found_block(idx, &p, orig, split, cached);
        Ok(self.handle_of(idx))
    }

    fn free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_handle(handle, false)
    }

    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        self.free_handle(handle, true)
    }

    /// Completes a free a trace deferred. A handle whose free already
    /// completed at a synchronisation (empty_cache, OOM flush) is accepted
    /// and ignored, as PyTorch would have emitted the completion there.
    fn complete_free(&mut self, h: BlockHandle) -> Result<(), AllocError> {
        if h.is_null() {
            return Ok(());
        }
        if !self.arena.is_current(h.index, h.generation) {
            return Ok(());
        }
        match self.arena[h.index].state {
            State::PendingFree => {
                if self.trace_pending.remove(h.index) {
                    // Deferred by the trace.
                } else if let Some(pos) = self.stream_event_queue.iter().position(|&i| i == h.index)
                {
                    // Deferred by `record_stream` (never in a replay; the
                    // queue empties at every malloc).
                    self.stream_event_queue.remove(pos);
                }
                self.arena[h.index].event_count = 0;
                self.free_block(h.index);
                Ok(())
            }
            State::Allocated => Err(AllocError::UnknownHandle(h)),
            State::Free => Ok(()),
        }
    }

    fn record_stream(&mut self, handle: BlockHandle, stream: u64) -> Result<(), AllocError> {
        if handle.is_null() {
            return Ok(());
        }
        let idx = self.resolve(handle, State::Allocated)?;
        if stream != self.arena[idx].stream {
            let uses = self.stream_uses.entry(idx).or_default();
            if !uses.contains(&stream) {
                uses.push(stream);
            }
        }
        Ok(())
    }

    fn empty_cache(&mut self) -> Result<(), AllocError> {
        if self.keeps_cache() {
            return Ok(());
        }
        self.release_cached_blocks()
    }

    fn create_pool(&mut self, pool: u32, options: PoolOptions) -> Result<(), AllocError> {
        self.create_private_pool(pool, options);
        Ok(())
    }

    fn begin_allocate_to_pool(
        &mut self,
        pool: u32,
        route: PoolRoute,
        options: PoolOptions,
    ) -> Result<(), AllocError> {
        self.begin_route(pool, route, options)
    }

    fn end_allocate_to_pool(&mut self, pool: u32) -> Result<(), AllocError> {
        self.end_route(pool)
    }

    fn release_pool(&mut self, pool: u32) -> Result<(), AllocError> {
        self.release_private_pool(pool)
    }

    fn empty_cache_pool(&mut self, pool: u32) -> Result<(), AllocError> {
        self.empty_private_pool(pool)
    }

    fn set_memory_fraction(&mut self, fraction: f64) -> Result<(), AllocError> {
        NativeAllocator::set_memory_fraction(self, fraction);
        Ok(())
    }
}
