//! `plan`: an offline plan as a policy, with PyTorch's allocator as the
//! online fallback (STAlloc's split of static and dynamic memory).
//!
//! # What it does
//!
//! * **The plan** ([`StaticPlan`]) gives the `k`-th non-empty request of a
//!   run an offset in one arena. A replay makes it from the trace it
//!   replays ([`greedy`] by size over the trace's lifetimes, improved by
//!   a short [`exact`] search on a small trace), so every request the
//!   trace holds is planned; see `vramlab_replay`'s `static_plan`.
//! * **The arena** is one virtual range of the plan's peak, reserved at
//!   the first planned request; a page of it (the device's granularity,
//!   2 MiB) is mapped when a planned block first lies on it. It holds only
//!   the pages the plan has used so far, and runs out of memory at the
//!   request that needs a page the card cannot give. On such a failure the
//!   fallback's cache and the arena's idle pages are given back and the
//!   mapping tried once more, as PyTorch retries (`num_alloc_retries`); if
//!   it fails again the request fails (`num_ooms`). (A failure of the
//!   fallback's own is PyTorch's, with its retry: the arena's idle pages
//!   are not given back for it.)
//! * **The fallback**, PyTorch's caching allocator with the settings
//!   string's `PYTORCH_ALLOC_CONF`, serves what the plan does not place:
//!   the blocks of a recorded state a trace starts from
//!   ([`Seed`](crate::Seed)); a request whose rounded size differs from its
//!   slot's, or past the plan's end; a request whose slot a live planned
//!   block still holds (one kept past its planned lifetime, as when an
//!   out-of-memory left requests out); and empty requests and those of
//!   [`REQUEST_LIMIT`] bytes or more, which are not counted. Private pools
//!   route the fallback's requests as PyTorch would; planned requests
//!   ignore them.
//! * **Frees**: a planned block's bytes are free at once (at
//!   [`Allocator::complete_free`] for a
//!   deferred free); `record_stream` changes nothing, since the plan knows
//!   when each block is done. `empty_cache` empties the fallback's cache
//!   and unmaps the arena's pages no live block lies on.
//!
//! # Statistics
//!
//! PyTorch's names, the fallback's figures plus the arena's: each run of
//! the arena's mapped pages is a segment of the large pool (as `segments`
//! shows them), its mapped pages are reserved, its live blocks are
//! allocated and active (their size rounded to 512 bytes;
//! `requested_bytes` the requests), and the map
//! calls count as device allocations. Peaks are taken after every call.
//! There is no memory fraction.

mod layout;
mod search;
mod settings;
mod static_arena;
mod view;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::devices::{Device, DeviceError};
use crate::policies::arena::Arena;
use crate::policies::oom::MAX_REQUEST;
use crate::policy::{AllocError, Allocator, BlockHandle, OomReport, PoolOptions, PoolRoute};
use crate::stats::{MemoryStats, PoolKind};
use crate::{Inspect, NativeAllocator};

pub use layout::{Buffer, Placement, ROUND, check, greedy, lower_bound};
pub use search::{ExactOutcome, exact};
pub use settings::{Settings, Slot, StaticPlan};
use static_arena::StaticArena;

/// Requests of this many bytes or more are refused before any policy
/// sees them (PyTorch's "more than 1EB"): a plan leaves them out, and the
/// policy hands them to the fallback without counting them.
pub const REQUEST_LIMIT: u64 = MAX_REQUEST;

/// The bit that marks a handle of a planned block (the fallback's arena
/// indices stay below it).
const PLANNED: u32 = 1 << 31;

/// The pool the arena counts in.
const POOL: PoolKind = PoolKind::Large;

/// One live planned block.
#[derive(Debug, Clone, Copy)]
struct Planned {
    offset: u64,
    size: u64,
    requested: u64,
    /// Freed while in use on another stream: allocated no more, still
    /// active until its free completes.
    pending: bool,
}

/// The plan over its arena, with PyTorch's caching allocator for the rest.
#[derive(Debug, Clone)]
pub struct PlanAllocator<D: Device> {
    fallback: NativeAllocator<D>,
    plan: Option<Arc<StaticPlan>>,
    /// Non-empty requests seen so far.
    next: usize,
    arena: StaticArena,
    blocks: Arena<Planned>,
    /// The live planned blocks' address ranges: offset → end.
    occupied: BTreeMap<u64, u64>,
    /// The arena's own figures.
    own: MemoryStats,
    /// The fallback's and the arena's, summed, with their peaks.
    stats: MemoryStats,
}

impl<D: Device> PlanAllocator<D> {
    /// A fresh allocator over `device`.
    pub fn new(settings: Settings, device: D) -> Self {
        let fallback = NativeAllocator::new(settings.fallback, device);
        let stats = *fallback.stats();
        PlanAllocator {
            fallback,
            plan: settings.plan,
            next: 0,
            arena: StaticArena::default(),
            blocks: Arena::default(),
            occupied: BTreeMap::new(),
            own: MemoryStats::new(u64::MAX),
            stats,
        }
    }

    /// The live planned block `h` names.
    fn resolve(&self, h: BlockHandle) -> Result<u32, AllocError> {
        let idx = h.index & !PLANNED;
        if self.blocks.is_current(idx, h.generation) {
            Ok(idx)
        } else {
            Err(AllocError::UnknownHandle(h))
        }
    }

    fn is_planned(h: BlockHandle) -> bool {
        !h.is_null() && h.index & PLANNED != 0
    }

    /// The live planned blocks' (offset, size).
    fn live_ranges(&self) -> Vec<(u64, u64)> {
        self.occupied.iter().map(|(&o, &e)| (o, e - o)).collect()
    }

    /// `true` when no live planned block lies in `[offset, offset + size)`
    /// (a block kept past its planned lifetime, as after an OOM that left
    /// requests out, can hold a slot's place).
    fn slot_free(&self, offset: u64, size: u64) -> bool {
        self.occupied
            .range(..offset.saturating_add(size))
            .next_back()
            .is_none_or(|(_, &end)| end <= offset)
    }

    /// The arena's segment count (its runs of mapped pages), after a
    /// change of its mapping.
    fn recount_segments(&mut self) {
        let want = self.arena.run_count() as i64;
        let have = self.own.segment.all.current;
        if want > have {
            self.own.segment.increase(POOL, (want - have) as u64);
        } else if want < have {
            self.own.segment.decrease(POOL, (have - want) as u64);
        }
    }

    /// Gives back the fallback's cache and the arena's idle pages (before
    /// a retry).
    fn release_cached(&mut self) -> Result<(), AllocError> {
        self.fallback.empty_cache()?;
        let live = self.live_ranges();
        let m = self
            .arena
            .unmap_unused(self.fallback.device_mut(), &live)
            .map_err(|e| AllocError::Device(e.to_string()))?;
        if m.bytes > 0 {
            self.own.reserved_bytes.decrease(POOL, m.bytes);
            self.own.num_device_free += m.calls as i64;
        }
        self.recount_segments();
        Ok(())
    }

    fn planned_malloc(
        &mut self,
        size: u64,
        offset: u64,
        rounded: u64,
    ) -> Result<BlockHandle, AllocError> {
        let peak = self.plan.as_ref().map_or(0, |p| p.peak());
        let mapped = match self
            .arena
            .map_block(self.fallback.device_mut(), peak, offset, rounded)
        {
            Ok(m) => m,
            Err(DeviceError::OutOfMemory { .. }) => {
                // As PyTorch retries: give back what is cached (the
                // fallback's free blocks, the arena's idle pages), then
                // try once more.
                self.own.num_alloc_retries += 1;
                self.release_cached()?;
                match self
                    .arena
                    .map_block(self.fallback.device_mut(), peak, offset, rounded)
                {
                    Ok(m) => m,
                    Err(DeviceError::OutOfMemory { .. }) => {
                        return Err(self.out_of_memory(size, offset, rounded));
                    }
                    Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
                }
            }
            Err(DeviceError::Other(e)) => return Err(AllocError::Device(e)),
        };
        if mapped.bytes > 0 {
            self.own.reserved_bytes.increase(POOL, mapped.bytes);
            self.own.num_device_alloc += mapped.calls as i64;
            self.recount_segments();
        }
        self.occupied.insert(offset, offset + rounded);
        let idx = self.blocks.insert(Planned {
            offset,
            size: rounded,
            requested: size,
            pending: false,
        });
        let s = &mut self.own;
        s.allocation.increase(POOL, 1);
        s.active.increase(POOL, 1);
        s.allocated_bytes.increase(POOL, rounded);
        s.active_bytes.increase(POOL, rounded);
        s.requested_bytes.increase(POOL, size);
        let h = self.blocks.handle(idx);
        Ok(BlockHandle {
            index: h.index | PLANNED,
            generation: h.generation,
        })
    }

    /// The report of a planned request the card cannot hold (at
    /// `offset`: the device was asked for the pages it lacked).
    fn out_of_memory(&mut self, size: u64, offset: u64, rounded: u64) -> AllocError {
        self.own.num_ooms += 1;
        self.sync();
        let info = self.fallback.device().mem_info();
        let page = self.fallback.device().granularity();
        AllocError::OutOfMemory(Box::new(OomReport {
            exceeds_limit: false,
            preemptive: false,
            requested: size,
            rounded,
            device_request: self.arena.missing_bytes(offset, rounded, page),
            device_free: info.free,
            device_total: info.total,
            allowed: None,
            allocated: self.stats.allocated_bytes.all.current as u64,
            reserved: self.stats.reserved_bytes.all.current as u64,
        }))
    }

    /// Drops planned block `idx`'s allocation (`pending`: it stays active
    /// until its free completes).
    fn release_block(&mut self, idx: u32, pending: bool) {
        let b = self.blocks[idx];
        let s = &mut self.own;
        if !b.pending {
            s.allocation.decrease(POOL, 1);
            s.allocated_bytes.decrease(POOL, b.size);
            s.requested_bytes.decrease(POOL, b.requested);
        }
        if pending {
            self.blocks[idx].pending = true;
        } else {
            s.active.decrease(POOL, 1);
            s.active_bytes.decrease(POOL, b.size);
            self.blocks.remove(idx);
            self.occupied.remove(&b.offset);
        }
    }

    /// A call on the fallback, then the summed statistics.
    fn on_fallback<T>(
        &mut self,
        call: impl FnOnce(&mut NativeAllocator<D>) -> Result<T, AllocError>,
    ) -> Result<T, AllocError> {
        let r = call(&mut self.fallback);
        self.sync();
        r
    }
}

impl<D: Device> Allocator for PlanAllocator<D> {
    fn malloc(&mut self, size: u64, stream: u64) -> Result<BlockHandle, AllocError> {
        if size == 0 || size >= REQUEST_LIMIT {
            return self.on_fallback(|f| f.malloc(size, stream));
        }
        let k = self.next;
        self.next += 1;
        let rounded = size.div_ceil(ROUND) * ROUND;
        let slot = self.plan.as_ref().and_then(|p| p.slot(k));
        match slot {
            Some(s)
                if s.size == rounded
                    && s.offset != Slot::ONLINE
                    && self.slot_free(s.offset, rounded) =>
            {
                let r = self.planned_malloc(size, s.offset, rounded);
                self.sync();
                r
            }
            _ => self.on_fallback(|f| f.malloc(size, stream)),
        }
    }

    fn free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        if !Self::is_planned(handle) {
            return self.on_fallback(|f| f.free(handle));
        }
        let idx = self.resolve(handle)?;
        self.release_block(idx, false);
        self.sync();
        Ok(())
    }

    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        if !Self::is_planned(handle) {
            return self.on_fallback(|f| f.free_deferred(handle));
        }
        let idx = self.resolve(handle)?;
        if self.blocks[idx].pending {
            return Err(AllocError::UnknownHandle(handle));
        }
        self.release_block(idx, true);
        self.sync();
        Ok(())
    }

    fn complete_free(&mut self, handle: BlockHandle) -> Result<(), AllocError> {
        if !Self::is_planned(handle) {
            return self.on_fallback(|f| f.complete_free(handle));
        }
        let idx = self.resolve(handle)?;
        if !self.blocks[idx].pending {
            return Err(AllocError::UnknownHandle(handle));
        }
        self.release_block(idx, false);
        self.sync();
        Ok(())
    }

    fn record_stream(&mut self, handle: BlockHandle, stream: u64) -> Result<(), AllocError> {
        if !Self::is_planned(handle) {
            return self.on_fallback(|f| f.record_stream(handle, stream));
        }
        self.resolve(handle).map(|_| ())
    }

    fn empty_cache(&mut self) -> Result<(), AllocError> {
        self.release_cached()?;
        self.sync();
        Ok(())
    }

    fn create_pool(&mut self, pool: u32, options: PoolOptions) -> Result<(), AllocError> {
        self.on_fallback(|f| f.create_pool(pool, options))
    }

    fn begin_allocate_to_pool(
        &mut self,
        pool: u32,
        route: PoolRoute,
        options: PoolOptions,
    ) -> Result<(), AllocError> {
        self.on_fallback(|f| f.begin_allocate_to_pool(pool, route, options))
    }

    fn end_allocate_to_pool(&mut self, pool: u32) -> Result<(), AllocError> {
        self.on_fallback(|f| f.end_allocate_to_pool(pool))
    }

    fn release_pool(&mut self, pool: u32) -> Result<(), AllocError> {
        self.on_fallback(|f| f.release_pool(pool))
    }

    fn empty_cache_pool(&mut self, pool: u32) -> Result<(), AllocError> {
        self.on_fallback(|f| f.empty_cache_pool(pool))
    }
}
