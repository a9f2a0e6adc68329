//! What every allocation policy offers, in four parts: [`Allocator`]
//! (serving callers), [`Inspect`] (what it holds), [`Seed`] (starting from
//! a recorded state) and [`Invariants`] (checking itself); [`Wrapper`] lets
//! a layer over a policy change only the calls it is about.
//!
//! Policies are state machines over a [`Device`] they own. The replay engine
//! names allocations by the [`BlockHandle`] a policy returns, so no policy
//! needs a pointer → block hash map on the hot path.

use crate::devices::{Device, DevicePtr};
use crate::stats::{MemoryStats, PoolKind};

/// Opaque name of an allocated block, valid until the block is freed.
///
/// Policies keep blocks in arenas; the generation tells a recycled slot from
/// the block a stale handle once named, so a double free is detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockHandle {
    /// Arena slot.
    pub index: u32,
    /// Generation of the slot when the handle was issued.
    pub generation: u32,
}

impl BlockHandle {
    /// The handle of a zero-byte allocation (PyTorch returns a null pointer
    /// and records nothing); freeing it is a no-op.
    pub const NULL: BlockHandle = BlockHandle {
        index: u32::MAX,
        generation: u32::MAX,
    };

    /// `true` for [`BlockHandle::NULL`].
    pub fn is_null(self) -> bool {
        self == BlockHandle::NULL
    }
}

/// Why a request could not be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The policy ran out of memory (PyTorch raises `OutOfMemoryError`).
    #[error("{0}")]
    OutOfMemory(Box<OomReport>),
    /// The request itself is invalid (e.g. a size of 2^60 bytes or more).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The handle does not name a live block (double free, unknown block).
    #[error("invalid block handle {0:?}: not a live allocation")]
    UnknownHandle(BlockHandle),
    /// The device failed in a way that is not an out-of-memory condition.
    #[error("device error: {0}")]
    Device(String),
}

/// What PyTorch reports when it raises an out-of-memory error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomReport {
    /// `true` when the request was 2^60 bytes or more: PyTorch refuses it
    /// before looking at the cache ("Tried to allocate more than 1EB memory").
    pub exceeds_limit: bool,
    /// `true` when `throw_on_cudamalloc_oom` (2.12+) rejected a new segment
    /// larger than the device's free memory before asking the driver: no
    /// cached blocks released, no retry, not counted in `num_ooms`.
    pub preemptive: bool,
    /// The caller's request in bytes.
    pub requested: u64,
    /// The rounded request (`size` of the trace's `oom` entry).
    pub rounded: u64,
    /// Bytes the policy tried to obtain from the device (what PyTorch's
    /// message calls "Tried to allocate").
    pub device_request: u64,
    /// Free device bytes at the time (cudaMemGetInfo).
    pub device_free: u64,
    /// Total device bytes.
    pub device_total: u64,
    /// The memory-fraction limit, when one is set.
    pub allowed: Option<u64>,
    /// Bytes allocated to callers at the time.
    pub allocated: u64,
    /// Bytes reserved from the device at the time.
    pub reserved: u64,
}

impl std::fmt::Display for OomReport {
    /// PyTorch's message, without the per-process NVML lines.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::format::format_size;
        if self.preemptive {
            return write!(
                f,
                "CUDA out of memory. Allocation was preemptively rejected because it would exceed per_process_memory_fraction limit. Requested size: {}",
                format_size(self.device_request)
            );
        }
        if self.exceeds_limit {
            return write!(
                f,
                "CUDA out of memory. Tried to allocate more than 1EB memory."
            );
        }
        write!(
            f,
            "CUDA out of memory. Tried to allocate {}. GPU 0 has a total capacity of {} of which {} is free. ",
            format_size(self.device_request),
            format_size(self.device_total),
            format_size(self.device_free)
        )?;
        if let Some(allowed) = self.allowed {
            write!(f, "{} allowed; ", format_size(allowed))?;
        }
        write!(
            f,
            "Of the allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch but unallocated. \
             If reserved but unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
            format_size(self.allocated),
            format_size(self.reserved.saturating_sub(self.allocated))
        )
    }
}

/// State of one block in a [`SegmentView`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockState {
    /// Handed out to a caller (`active_allocated`).
    Allocated,
    /// Freed by the caller, waiting for stream events (`active_pending_free`).
    PendingFree,
    /// Cached, free (`inactive`).
    Free,
}

impl BlockState {
    /// The name PyTorch's snapshot uses.
    pub fn snapshot_name(self) -> &'static str {
        match self {
            BlockState::Allocated => "active_allocated",
            BlockState::PendingFree => "active_pending_free",
            BlockState::Free => "inactive",
        }
    }
}

/// One block of a [`SegmentView`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockView {
    /// Address.
    pub ptr: DevicePtr,
    /// Size in bytes.
    pub size: u64,
    /// Last caller request served by this block (stale when free).
    pub requested: u64,
    /// State.
    pub state: BlockState,
}

/// A segment as `torch.cuda.memory_snapshot()` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentView {
    /// Base address.
    pub ptr: DevicePtr,
    /// Total bytes.
    pub size: u64,
    /// Raw stream handle the segment belongs to.
    pub stream: u64,
    /// Pool.
    pub pool: PoolKind,
    /// The private pool it belongs to (the index its creator gave;
    /// `None`: the default pool).
    pub private_pool: Option<u32>,
    /// Mapped range of an expandable segment.
    pub is_expandable: bool,
    /// Blocks in address order.
    pub blocks: Vec<BlockView>,
}

impl SegmentView {
    /// A segment of the default pool (`pool`'s size class), not
    /// expandable, whose `blocks` are in address order.
    pub fn new(
        (ptr, size): (DevicePtr, u64),
        stream: u64,
        pool: PoolKind,
        blocks: Vec<BlockView>,
    ) -> SegmentView {
        SegmentView {
            ptr,
            size,
            stream,
            pool,
            private_pool: None,
            is_expandable: false,
            blocks,
        }
    }
}

/// Which requests a private pool receives while it is registered
/// (PyTorch's `beginAllocateToPool` filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolRoute {
    /// A CUDA graph capture on this raw stream: requests on it.
    Capture {
        /// The capturing stream's raw handle.
        stream: u64,
    },
    /// A `torch.cuda.use_mem_pool` context: every request of the thread
    /// (a replay has one thread, so every request).
    Thread,
}

impl PoolRoute {
    /// `true` when a request on `stream` goes to the pool.
    pub fn takes(self, stream: u64) -> bool {
        match self {
            PoolRoute::Capture { stream: s } => s == stream,
            PoolRoute::Thread => true,
        }
    }
}

/// A private pool's options (a MemPool's; a graph pool has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PoolOptions {
    /// `use_on_oom`: its cached blocks may serve a request outside it that
    /// would otherwise fail.
    pub use_on_oom: bool,
    /// `no_split`: its blocks are never split.
    pub no_split: bool,
    /// The pool has its own allocator functions (a MemPool made with a
    /// `CUDAPluggableAllocator`, as engines keep their weights and KV cache
    /// in): its segments come from that allocator and are never
    /// expandable, whatever `expandable_segments` says (judged on 2.11 and
    /// 2.15).
    pub own_allocator: bool,
}

/// State of a seeded block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedBlockState {
    /// Cached.
    Free,
    /// Handed out.
    Allocated,
    /// Freed, awaiting a trace's `free_completed`.
    PendingFree,
}

/// One block of a seeded segment, in address order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedBlock {
    /// Size in bytes (a multiple of 512).
    pub size: u64,
    /// The caller's request it served.
    pub requested: u64,
    /// State.
    pub state: SeedBlockState,
}

/// Where a seeded segment belongs: the small or large pool, of the default
/// pools or of a private pool (which [`Allocator::create_pool`] or
/// [`Allocator::begin_allocate_to_pool`] made first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedPool {
    /// Small or large.
    pub kind: PoolKind,
    /// The private pool (`None`: the default pools).
    pub private: Option<u32>,
}

impl From<PoolKind> for SeedPool {
    fn from(kind: PoolKind) -> SeedPool {
        SeedPool {
            kind,
            private: None,
        }
    }
}

/// One mapped range of a seeded expandable segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedRange<'a> {
    /// Offset of the range from the reservation's base (whole pages).
    pub offset: u64,
    /// Its blocks, in address order; they tile the range.
    pub blocks: &'a [SeedBlock],
}

/// An allocation policy serving callers: the calls PyTorch's caching
/// allocator answers (`malloc`, `free`, `record_stream`, `empty_cache`,
/// `set_per_process_memory_fraction`).
///
/// A policy is also [`Inspect`] (what it holds), [`Seed`] (starting from a
/// recorded state; the default refuses) and [`Invariants`] (checking
/// itself). A layer over a policy (one that times its calls, say)
/// implements only this trait, changing the calls it is about, and
/// [`Wrapper`], which gives it the inner policy's other parts.
pub trait Allocator: Inspect + Seed + Invariants {
    /// Serves a request of `size` bytes on `stream` (raw stream handle).
    fn malloc(&mut self, size: u64, stream: u64) -> Result<BlockHandle, AllocError>;

    /// Frees a block; the memory is reusable at once unless the block was
    /// used on other streams (see [`Allocator::record_stream`]).
    fn free(&mut self, handle: BlockHandle) -> Result<(), AllocError>;

    /// The caller freed a block that stays in use on other streams: it
    /// remains active until [`Allocator::complete_free`].
    fn free_deferred(&mut self, handle: BlockHandle) -> Result<(), AllocError>;

    /// Completes a deferred free.
    fn complete_free(&mut self, handle: BlockHandle) -> Result<(), AllocError>;

    /// Marks a block as used on `stream` (`Tensor.record_stream`).
    fn record_stream(&mut self, handle: BlockHandle, stream: u64) -> Result<(), AllocError>;

    /// `torch.cuda.empty_cache()`: returns cached memory to the device.
    fn empty_cache(&mut self) -> Result<(), AllocError>;

    /// `torch.cuda.MemPool(...)` (`createOrIncrefPool`): private pool
    /// `pool` exists, held once, before any request goes to it. Policies
    /// without private pools (every policy but the native one) serve every
    /// request from their own pool and accept the pool calls as no-ops.
    fn create_pool(&mut self, pool: u32, options: PoolOptions) -> Result<(), AllocError> {
        let _ = (pool, options);
        Ok(())
    }

    /// `beginAllocateToPool`: requests `route` takes go to private pool
    /// `pool` (made now, held once, if it does not exist; otherwise held
    /// once more).
    fn begin_allocate_to_pool(
        &mut self,
        pool: u32,
        route: PoolRoute,
        options: PoolOptions,
    ) -> Result<(), AllocError> {
        let _ = (pool, route, options);
        Ok(())
    }

    /// `endAllocateToPool`: the routing `begin_allocate_to_pool` started ends.
    fn end_allocate_to_pool(&mut self, pool: u32) -> Result<(), AllocError> {
        let _ = pool;
        Ok(())
    }

    /// `releasePool`: one holder of `pool` (a graph, a MemPool object, a
    /// `use_mem_pool` context) lets go; when none is left, the next
    /// `empty_cache` returns its memory.
    fn release_pool(&mut self, pool: u32) -> Result<(), AllocError> {
        let _ = pool;
        Ok(())
    }

    /// `emptyCache(mempool_id)`: returns the cached memory of `pool` alone,
    /// if nothing holds it (what deleting a MemPool does after releasing it).
    fn empty_cache_pool(&mut self, pool: u32) -> Result<(), AllocError> {
        let _ = pool;
        Ok(())
    }

    /// `torch.cuda.set_per_process_memory_fraction(fraction)`: limits what
    /// the policy may obtain from the device. Policies without such a limit
    /// return [`AllocError::Invalid`].
    fn set_memory_fraction(&mut self, fraction: f64) -> Result<(), AllocError> {
        let _ = fraction;
        Err(AllocError::Invalid(format!(
            "the {} policy has no per-process memory fraction",
            self.name()
        )))
    }
}

/// What a policy is and holds, read without changing it — and the device
/// it owns.
pub trait Inspect {
    /// The device this policy allocates from.
    type Dev: Device;

    /// Short name of the policy (`native`, …).
    fn name(&self) -> &'static str;

    /// Statistics with PyTorch's names.
    fn stats(&self) -> &MemoryStats;

    /// The address of a live block.
    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr;

    /// Size of the largest free (cached, reusable) block in bytes.
    fn largest_free_block(&self) -> u64;

    /// The current segments, in address order.
    fn segments(&self) -> Vec<SegmentView>;

    /// The device.
    fn device(&self) -> &Self::Dev;

    /// The device, mutably (a replay steers a simulated device through it:
    /// where the next segment goes, which calls fail).
    fn device_mut(&mut self) -> &mut Self::Dev;

    /// `false` when no decision so far depended on how the device's
    /// addresses compare, so a device placing segments elsewhere would have
    /// led to the same decisions (the native policy tracks its choices
    /// between free blocks of one size in different segments). `true`, the
    /// default, where a policy does not track it.
    fn placement_may_have_decided(&self) -> bool {
        true
    }
}

/// Starting from a recorded allocator state (traces recorded mid-run).
/// Both calls refuse by default: `impl Seed for MyPolicy {}` declares a
/// policy that replays only from an empty state.
pub trait Seed: Inspect {
    /// Adds a segment that existed before a trace began, laid out as
    /// `blocks` in address order. Returns a handle for each allocated or
    /// pending block. Policies that cannot represent a foreign layout return
    /// [`AllocError::Invalid`].
    fn seed_segment(
        &mut self,
        pool: SeedPool,
        stream: u64,
        blocks: &[SeedBlock],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        let _ = (pool, stream, blocks);
        Err(AllocError::Invalid(format!(
            "the {} policy cannot start from a recorded allocator state",
            self.name()
        )))
    }

    /// Adds an expandable segment (a reserved address range) that existed
    /// before a trace began, with `ranges` mapped and laid out. Returns a
    /// handle for each allocated or pending block of every range, in
    /// order. Policies without expandable segments return
    /// [`AllocError::Invalid`].
    fn seed_expandable(
        &mut self,
        pool: SeedPool,
        stream: u64,
        ranges: &[SeedRange<'_>],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        let _ = (pool, stream, ranges);
        Err(AllocError::Invalid(format!(
            "the {} policy cannot start from a recorded state with expandable segments",
            self.name()
        )))
    }
}

/// A policy checking its own consistency (tests, fuzzing, `replay --check`).
pub trait Invariants {
    /// Checks every internal invariant; `Err` describes the first violation.
    fn check_invariants(&self) -> Result<(), String>;
}

/// A layer over a policy: it implements [`Allocator`] itself, and through
/// this trait its [`Inspect`], [`Seed`] and [`Invariants`] are the inner
/// policy's.
pub trait Wrapper {
    /// The wrapped policy.
    type Inner: Allocator;

    /// The wrapped policy.
    fn inner(&self) -> &Self::Inner;

    /// The wrapped policy, mutably.
    fn inner_mut(&mut self) -> &mut Self::Inner;
}

impl<W: Wrapper> Inspect for W {
    type Dev = <W::Inner as Inspect>::Dev;

    fn name(&self) -> &'static str {
        self.inner().name()
    }
    fn stats(&self) -> &MemoryStats {
        self.inner().stats()
    }
    fn block_ptr(&self, handle: BlockHandle) -> DevicePtr {
        self.inner().block_ptr(handle)
    }
    fn largest_free_block(&self) -> u64 {
        self.inner().largest_free_block()
    }
    fn segments(&self) -> Vec<SegmentView> {
        self.inner().segments()
    }
    fn device(&self) -> &Self::Dev {
        self.inner().device()
    }
    fn device_mut(&mut self) -> &mut Self::Dev {
        self.inner_mut().device_mut()
    }
    fn placement_may_have_decided(&self) -> bool {
        self.inner().placement_may_have_decided()
    }
}

impl<W: Wrapper> Seed for W {
    fn seed_segment(
        &mut self,
        pool: SeedPool,
        stream: u64,
        blocks: &[SeedBlock],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        self.inner_mut().seed_segment(pool, stream, blocks)
    }
    fn seed_expandable(
        &mut self,
        pool: SeedPool,
        stream: u64,
        ranges: &[SeedRange<'_>],
    ) -> Result<Vec<Option<BlockHandle>>, AllocError> {
        self.inner_mut().seed_expandable(pool, stream, ranges)
    }
}

impl<W: Wrapper> Invariants for W {
    fn check_invariants(&self) -> Result<(), String> {
        self.inner().check_invariants()
    }
}
