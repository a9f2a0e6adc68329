//! PyTorch's pinned host caching allocator (`CachingHostAllocator`: what
//! `pin_memory()`, `torch.empty(..., pin_memory=True)` and the staging
//! buffers of `non_blocking` copies use), release by release, as
//! docs/host-allocator-spec.md describes it from the wheels' own code and
//! runs (rule numbers `R…` below are that document's).
//!
//! A request is one whole block (never split or merged): its size rounded
//! up to a power of two (R1.2; from 2.13 not above the round threshold or
//! the largest cached size, R1.3), looked up in one of 64 buckets by
//! ⌈log2 size⌉ (R2.2–R2.4), else obtained from CUDA, or carved from the
//! reserve segment (R4.4). A freed block that a stream used waits for the
//! events recorded at its free, processed oldest first with head-of-line
//! blocking, at the start of each `allocate` and `empty_cache` (R3.2–R3.5).
//! The background thread (`pinned_use_background_threads`) and the register
//! threads change timing only: they are not modelled. Whether an event has
//! completed is the caller's to say (a trace's synchronisations), never
//! assumed.

mod stats;

use std::collections::VecDeque;

pub use stats::HostStats;

use crate::{AllocConf, TorchVersion};

/// Buckets of the free lists: one per power of two (R2.1).
const BUCKETS: usize = 64;
/// The reserve segment is carved in steps of this many bytes (R4.4).
const RESERVE_STEP: u64 = 4096;
/// Where simulated host allocations start (any page-aligned base).
const HOST_BASE: u64 = 0x7f00_0000_0000;

/// A block handed out by [`HostAllocator::allocate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostBlockId(u32);

/// An event recorded on a stream when a block it used was freed (R3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostEventId(pub u64);

/// How a release looks a request up in its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// The bucket's most recently cached block, whatever its size (2.11 to
    /// 2.13; in 2.13, where blocks above the threshold keep their exact
    /// size, it may be smaller than the request: PyTorch's own bug, R2.3).
    Back,
    /// The most recently cached block at least as large (2.14+, R2.4).
    LargeEnough,
}

/// The settings and rules of one release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRules {
    version: TorchVersion,
    /// Requests above it keep their size (2.13+; `None`: always rounded).
    max_round_threshold: Option<u64>,
    /// Blocks above it are released, not cached (2.13+; `None`: cached).
    max_cached_size: Option<u64>,
    /// Bytes of the reserve segment (0: none).
    reserve_segment: u64,
}

impl HostRules {
    /// The host allocator's rules under `conf`'s release and `pinned_*`
    /// settings.
    pub fn of(conf: &AllocConf) -> HostRules {
        let mib = |m: u64| m.saturating_mul(1 << 20);
        HostRules {
            version: conf.version,
            max_round_threshold: conf.pinned_max_round_threshold_mb.map(mib),
            max_cached_size: conf.pinned_max_cached_size_mb.map(mib),
            reserve_segment: mib(conf.pinned_reserve_segment_size_mb),
        }
    }

    fn lookup(&self) -> Lookup {
        if self.version.at_least(2, 14) {
            Lookup::LargeEnough
        } else {
            Lookup::Back
        }
    }

    /// 2.11 and 2.12 count the active statistics with two quirks (R5.4).
    fn old_active_stats(&self) -> bool {
        !self.version.at_least(2, 13)
    }

    /// The block size of a request of `size` bytes (R1.2, R1.3).
    pub fn block_size(&self, size: u64) -> u64 {
        let exact = self.version.at_least(2, 13)
            && (self.max_round_threshold.is_some_and(|t| size > t)
                || self.max_cached_size.is_some_and(|c| size > c));
        if exact {
            size
        } else {
            size.checked_next_power_of_two().unwrap_or(size)
        }
    }

    /// Whether a block of `size` goes back to the cache when it is freed,
    /// rather than to CUDA (R4.6; always before 2.13).
    pub fn caches(&self, size: u64) -> bool {
        !self.version.at_least(2, 13) || self.max_cached_size.is_none_or(|c| size <= c)
    }
}

/// ⌈log2 size⌉: the bucket of a size (R2.2).
fn bucket_of(size: u64) -> usize {
    if size <= 1 {
        0
    } else {
        (64 - (size - 1).leading_zeros()) as usize
    }
}

#[derive(Debug, Clone)]
struct Block {
    ptr: u64,
    size: u64,
    allocated: bool,
    /// Streams that used it since it was handed out.
    streams: Vec<u64>,
    /// Events recorded at its free that have not completed.
    pending: u32,
    /// Carved from the reserve segment.
    in_reserve: bool,
    live: bool,
}

/// The pinned host allocator of one process (see the module's doc).
#[derive(Debug, Clone)]
pub struct HostAllocator {
    rules: HostRules,
    blocks: Vec<Block>,
    buckets: Vec<VecDeque<u32>>,
    /// Pending (event, block), newest at the front (R3.2).
    events: VecDeque<(HostEventId, u32)>,
    next_event: u64,
    next_ptr: u64,
    /// The reserve: its base and the bump offset (created at the first miss).
    reserve: Option<(u64, u64)>,
    stats: HostStats,
    /// Bytes of the blocks handed out and not back in the cache.
    in_use: u64,
}

impl HostAllocator {
    /// An empty allocator under `rules`.
    pub fn new(rules: HostRules) -> HostAllocator {
        HostAllocator {
            rules,
            blocks: Vec::new(),
            buckets: vec![VecDeque::new(); BUCKETS],
            events: VecDeque::new(),
            next_event: 0,
            next_ptr: HOST_BASE,
            reserve: None,
            stats: HostStats::default(),
            in_use: 0,
        }
    }

    /// The rules it follows.
    pub fn rules(&self) -> &HostRules {
        &self.rules
    }

    /// What PyTorch's `host_memory_stats()` would say, plus the bytes held
    /// from CUDA.
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// The block's address and size.
    pub fn block(&self, id: HostBlockId) -> Option<(u64, u64)> {
        let b = self.blocks.get(id.0 as usize).filter(|b| b.live)?;
        Some((b.ptr, b.size))
    }

    /// Hands out a block of at least `size` bytes (`None` for 0 bytes,
    /// R1.1), after processing the pending events (`completed` says which
    /// have completed, R3.5).
    pub fn allocate(
        &mut self,
        size: u64,
        completed: &dyn Fn(HostEventId) -> bool,
    ) -> Option<HostBlockId> {
        self.try_allocate(size, completed, None).ok().flatten()
    }

    /// [`HostAllocator::allocate`] where the host can pin at most `limit`
    /// bytes in all: a request that needs more from CUDA fails (PyTorch
    /// throws; no retry, no cache released, R7.3) with the bytes it asked
    /// CUDA for, after the events were processed.
    pub fn try_allocate(
        &mut self,
        size: u64,
        completed: &dyn Fn(HostEventId) -> bool,
        limit: Option<u64>,
    ) -> Result<Option<HostBlockId>, u64> {
        if size == 0 {
            return Ok(None);
        }
        self.process_events(completed);
        let want = self.rules.block_size(size);
        let bucket = bucket_of(want);
        let cached = self.take_cached(bucket, want);
        let id = match cached {
            Some(i) => i,
            None => {
                if let Some(limit) = limit {
                    // The reserve is pinned first (R4.4), then the block
                    // from it, or from CUDA; the first that does not fit
                    // throws, what came before stays (R7.3).
                    let fits = |a: &Self, asked: u64| {
                        let held = a.stats.reserved_bytes.current.max(0) as u64;
                        asked == 0 || held.saturating_add(asked) <= limit
                    };
                    if self.reserve.is_none() && self.rules.reserve_segment > 0 {
                        if !fits(self, self.rules.reserve_segment) {
                            return Err(self.rules.reserve_segment);
                        }
                        let base = self.obtain(self.rules.reserve_segment);
                        self.reserve = Some((base, 0));
                    }
                    let asked = self.cuda_request(want);
                    if !fits(self, asked) {
                        return Err(asked);
                    }
                }
                self.new_block(want)
            }
        };
        let counted = match self.rules.lookup() {
            Lookup::Back => want,
            Lookup::LargeEnough => self.blocks.get(id as usize).map_or(want, |b| b.size),
        };
        if let Some(b) = self.blocks.get_mut(id as usize) {
            b.allocated = true;
            self.in_use += b.size;
        }
        if let Some(a) = self.stats.active(bucket) {
            a.increase(1, counted);
        }
        Ok(Some(HostBlockId(id)))
    }

    /// Bytes a new block of `size` takes from CUDA: 0 when it fits in the
    /// reserve, the reserve itself when it is yet to be made and the block
    /// fits in it (R4.4).
    fn cuda_request(&self, size: u64) -> u64 {
        let step = size.div_ceil(RESERVE_STEP) * RESERVE_STEP;
        match self.reserve {
            Some((_, used)) if used.saturating_add(step) <= self.rules.reserve_segment => 0,
            Some(_) => size,
            None if self.rules.reserve_segment == 0 => size,
            None if step <= self.rules.reserve_segment => self.rules.reserve_segment,
            None => self.rules.reserve_segment.saturating_add(size),
        }
    }

    /// Bytes of the blocks handed out and not back in the cache (in use,
    /// or waiting for their streams' events).
    pub fn in_use_bytes(&self) -> u64 {
        self.in_use
    }

    /// Notes that `stream` used the block (a `non_blocking` copy: R3.1).
    pub fn record_stream(&mut self, id: HostBlockId, stream: u64) {
        if let Some(b) = self.blocks.get_mut(id.0 as usize).filter(|b| b.allocated) {
            if !b.streams.contains(&stream) {
                b.streams.push(stream);
            }
        }
    }

    /// Frees the block: back to the cache at once when no stream used it,
    /// else one event per stream is recorded now and the block waits for
    /// them (R3.2). The events recorded, in order.
    pub fn free(&mut self, id: HostBlockId) -> Vec<HostEventId> {
        let Some(b) = self.blocks.get_mut(id.0 as usize).filter(|b| b.allocated) else {
            return Vec::new();
        };
        b.allocated = false;
        let streams = std::mem::take(&mut b.streams);
        if streams.is_empty() {
            // 2.11/2.12 do not count the block inactive here (R5.4).
            self.cache(id.0, !self.rules.old_active_stats());
            return Vec::new();
        }
        b.pending = streams.len() as u32;
        let mut recorded = Vec::with_capacity(streams.len());
        for _ in streams {
            let e = HostEventId(self.next_event);
            self.next_event += 1;
            self.events.push_front((e, id.0));
            recorded.push(e);
        }
        recorded
    }

    /// `torch._C._host_emptyCache()`: processes the events, then releases
    /// every cached block, bucket by bucket, oldest first (R5.1).
    pub fn empty_cache(&mut self, completed: &dyn Fn(HostEventId) -> bool) {
        self.process_events(completed);
        for bucket in 0..BUCKETS {
            let cached: Vec<u32> = self
                .buckets
                .get_mut(bucket)
                .map(|q| q.drain(..).collect())
                .unwrap_or_default();
            for i in cached {
                self.destroy(i);
            }
        }
    }

    /// The oldest pending events, while they have completed (R3.4).
    fn process_events(&mut self, completed: &dyn Fn(HostEventId) -> bool) {
        while let Some(&(event, block)) = self.events.back() {
            if !completed(event) {
                break;
            }
            self.events.pop_back();
            let Some(b) = self.blocks.get_mut(block as usize) else {
                continue;
            };
            b.pending = b.pending.saturating_sub(1);
            if b.pending == 0 {
                self.cache(block, true);
            }
        }
    }

    /// A block that is free and used by no pending stream goes back to its
    /// bucket, or is released when it is too large to cache (R4.6).
    fn cache(&mut self, i: u32, count_inactive: bool) {
        let Some(size) = self.blocks.get(i as usize).map(|b| b.size) else {
            return;
        };
        self.in_use = self.in_use.saturating_sub(size);
        let bucket = bucket_of(size);
        if count_inactive {
            // 2.11/2.12 release an event-path block with `decrease(-1)` of
            // an unsigned size: the active bytes grow by one (R3.4, R5.4).
            let bytes = if self.rules.old_active_stats() {
                u64::MAX
            } else {
                size
            };
            if let Some(a) = self.stats.active(bucket) {
                a.decrease(1, bytes);
            }
        }
        if !self.rules.caches(size) {
            self.destroy(i);
            return;
        }
        if let Some(q) = self.buckets.get_mut(bucket) {
            q.push_back(i);
        }
    }

    /// Takes a cached block for a request of `want` bytes (R2.3, R2.4).
    fn take_cached(&mut self, bucket: usize, want: u64) -> Option<u32> {
        let q = self.buckets.get_mut(bucket)?;
        let at = match self.rules.lookup() {
            Lookup::Back => q.len().checked_sub(1)?,
            Lookup::LargeEnough => {
                let blocks = &self.blocks;
                q.iter()
                    .rposition(|&i| blocks.get(i as usize).is_some_and(|b| b.size >= want))?
            }
        };
        q.remove(at)
    }

    /// A new block of `size` bytes: from the reserve when it fits, else
    /// one host allocation from CUDA (R4.2, R4.4).
    fn new_block(&mut self, size: u64) -> u32 {
        if self.reserve.is_none() && self.rules.reserve_segment > 0 {
            let base = self.obtain(self.rules.reserve_segment);
            self.reserve = Some((base, 0));
        }
        let carved = self.reserve.as_mut().and_then(|(base, used)| {
            let step = size.div_ceil(RESERVE_STEP) * RESERVE_STEP;
            let fits = used.checked_add(step)? <= self.rules.reserve_segment;
            fits.then(|| {
                let ptr = *base + *used;
                *used += step;
                ptr
            })
        });
        let (ptr, in_reserve) = match carved {
            Some(ptr) => (ptr, true),
            None => (self.obtain(size), false),
        };
        self.blocks.push(Block {
            ptr,
            size,
            allocated: false,
            streams: Vec::new(),
            pending: 0,
            in_reserve,
            live: true,
        });
        self.stats.block_created(size);
        (self.blocks.len() - 1) as u32
    }

    /// One `cudaHostAlloc` (or malloc + `cudaHostRegister`) of `size`.
    fn obtain(&mut self, size: u64) -> u64 {
        let ptr = self.next_ptr;
        self.next_ptr += size.div_ceil(RESERVE_STEP) * RESERVE_STEP;
        self.stats.host_allocated(size);
        ptr
    }

    /// Releases a cached block: its host memory goes back to CUDA unless
    /// it lies in the reserve, whose space is then lost (R4.4, R4.5).
    fn destroy(&mut self, i: u32) {
        let Some(b) = self.blocks.get_mut(i as usize).filter(|b| b.live) else {
            return;
        };
        b.live = false;
        let (size, in_reserve) = (b.size, b.in_reserve);
        self.stats.block_destroyed(size);
        if !in_reserve {
            self.stats.host_freed(size);
        }
    }
}

#[cfg(test)]
mod tests;
