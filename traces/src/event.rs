//! [`Event`]: one request of a trace, to the device's caching allocator,
//! its private pools, or the pinned host allocator.

use serde::{Deserialize, Serialize};

use crate::pools::PoolIndex;

/// Dense allocation id. Ids `0..initial live blocks` name blocks that were
/// already allocated when recording began (see [`InitialState`](crate::InitialState)); every
/// [`Event::Alloc`] introduces the next id.
pub type AllocId = u32;

/// Index into [`Trace::streams`](crate::Trace::streams).
pub type StreamIndex = u32;

/// One allocator request, in trace order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Event {
    /// `malloc(size, stream)`; `size` is the caller's request in bytes.
    Alloc {
        /// The id this allocation is known by in later events.
        id: AllocId,
        /// Index into [`Trace::streams`](crate::Trace::streams).
        stream: StreamIndex,
        /// Requested bytes (unrounded, > 0).
        size: u64,
    },
    /// A free that completes at once (PyTorch emits `free_requested` directly
    /// followed by `free_completed` for a block without recorded streams).
    Free {
        /// The allocation being freed.
        id: AllocId,
    },
    /// The caller freed the block, but it was used on other streams: it stays
    /// active (not reusable) until the matching [`Event::FreeCompleted`].
    FreeRequested {
        /// The allocation being freed.
        id: AllocId,
    },
    /// The deferred free of an earlier [`Event::FreeRequested`] completes
    /// (PyTorch's `process_events` saw the stream events finish).
    FreeCompleted {
        /// The allocation whose free completes.
        id: AllocId,
    },
    /// `torch.cuda.empty_cache()`.
    EmptyCache,
    /// A `torch.cuda.MemPool` is made (`createOrIncrefPool`): the pool
    /// exists, held by the object, before any request goes to it.
    PoolCreate {
        /// The pool (index into [`Trace::pools`](crate::Trace::pools)).
        pool: PoolIndex,
    },
    /// A CUDA graph capture begins on `stream` into `pool`
    /// (`CUDAGraph.capture_begin`: `beginAllocateToPool` with the
    /// capture's stream filter): requests on that stream go to the pool
    /// until [`Event::CaptureEnd`]. The first capture into a pool makes it;
    /// a later one shares it.
    CaptureBegin {
        /// The pool.
        pool: PoolIndex,
        /// The capturing stream (index into [`Trace::streams`](crate::Trace::streams)).
        stream: StreamIndex,
    },
    /// The capture into `pool` ends (`capture_end`: `endAllocateToPool`).
    CaptureEnd {
        /// The pool.
        pool: PoolIndex,
    },
    /// `torch.cuda.use_mem_pool(pool)` is entered: every request of the
    /// thread goes to the pool until [`Event::PoolExit`].
    PoolEnter {
        /// The pool.
        pool: PoolIndex,
    },
    /// The `use_mem_pool` context is left (`endAllocateToPool`, then
    /// `releasePool` of the reference the context took).
    PoolExit {
        /// The pool.
        pool: PoolIndex,
    },
    /// A graph that used `pool` is reset or deleted, or the MemPool object
    /// is deleted (`releasePool`): when no graph or object holds it any
    /// more, its cached memory goes back at the next `empty_cache` (a
    /// MemPool's at once).
    PoolRelease {
        /// The pool.
        pool: PoolIndex,
    },
    /// A request to PyTorch's pinned host allocator (`CachingHostAllocator`:
    /// `pin_memory()`, `torch.empty(..., pin_memory=True)`, the staging
    /// buffers of `non_blocking` copies). `size` is the request in bytes
    /// (> 0), or PyTorch's block size where only that is known (a
    /// snapshot's `host_traces`). Host ids share the id space of device
    /// allocations.
    HostAlloc {
        /// The id this allocation is known by in later events.
        id: AllocId,
        /// Requested bytes.
        size: u64,
    },
    /// A host block is freed and no stream used it: back to the cache at
    /// once.
    HostFree {
        /// The allocation being freed.
        id: AllocId,
    },
    /// A host block that streams used is freed: events are recorded on
    /// them and the block waits for them until [`Event::HostFreeCompleted`].
    HostFreeRequested {
        /// The allocation being freed.
        id: AllocId,
    },
    /// The events recorded at the block's [`Event::HostFreeRequested`]
    /// have completed: the allocator returns the block to its cache when
    /// it next processes events (at its next request or `empty_cache`).
    HostFreeCompleted {
        /// The allocation whose free completes.
        id: AllocId,
    },
    /// `torch._C._host_emptyCache()`: the host allocator's cached blocks go
    /// back to CUDA.
    HostEmptyCache,
    /// An engine pool ([`PrivatePoolKind::Engine`](crate::PrivatePoolKind::Engine))
    /// goes to sleep: its allocator unmaps and releases the physical memory
    /// of every segment it holds (offloaded or discarded), while PyTorch
    /// still counts the blocks as reserved.
    PoolSleep {
        /// The pool.
        pool: PoolIndex,
    },
    /// The sleeping engine pool wakes: its segments are backed and mapped
    /// again at the same addresses, all or none (a wake that does not fit
    /// is the process's out-of-memory).
    PoolWake {
        /// The pool.
        pool: PoolIndex,
    },
    /// Device memory taken outside PyTorch's allocator (NCCL's buffers, a
    /// library's own `cudaMalloc`/`cuMemAlloc`): it uses the device and
    /// shows in no PyTorch figure. It fails when the device is full.
    RawAlloc {
        /// The id this allocation is known by in later events.
        id: AllocId,
        /// Bytes.
        size: u64,
    },
    /// Memory of an earlier [`Event::RawAlloc`] goes back to the device.
    RawFree {
        /// The allocation being freed.
        id: AllocId,
    },
}

impl Event {
    /// The same event with its allocation id shifted by `offset` (to put
    /// two traces' ids side by side: `concat`, `repeat`).
    pub(crate) fn with_id_offset(self, offset: AllocId) -> Event {
        self.with_id(|id| id + offset)
    }

    /// The same event with its allocation id (if any) mapped by `f`.
    pub(crate) fn with_id(self, f: impl Fn(AllocId) -> AllocId) -> Event {
        match self {
            Event::Alloc { id, stream, size } => Event::Alloc {
                id: f(id),
                stream,
                size,
            },
            Event::Free { id } => Event::Free { id: f(id) },
            Event::FreeRequested { id } => Event::FreeRequested { id: f(id) },
            Event::FreeCompleted { id } => Event::FreeCompleted { id: f(id) },
            Event::HostAlloc { id, size } => Event::HostAlloc { id: f(id), size },
            Event::HostFree { id } => Event::HostFree { id: f(id) },
            Event::HostFreeRequested { id } => Event::HostFreeRequested { id: f(id) },
            Event::HostFreeCompleted { id } => Event::HostFreeCompleted { id: f(id) },
            Event::RawAlloc { id, size } => Event::RawAlloc { id: f(id), size },
            Event::RawFree { id } => Event::RawFree { id: f(id) },
            other => other,
        }
    }

    /// The allocation id this event refers to, if any.
    pub(crate) fn id(&self) -> Option<AllocId> {
        match *self {
            Event::Alloc { id, .. }
            | Event::Free { id }
            | Event::FreeRequested { id }
            | Event::FreeCompleted { id }
            | Event::HostAlloc { id, .. }
            | Event::HostFree { id }
            | Event::HostFreeRequested { id }
            | Event::HostFreeCompleted { id }
            | Event::RawAlloc { id, .. }
            | Event::RawFree { id } => Some(id),
            _ => None,
        }
    }

    /// A request to the pinned host allocator, not to the device's.
    pub fn is_host(&self) -> bool {
        matches!(
            self,
            Event::HostAlloc { .. }
                | Event::HostFree { .. }
                | Event::HostFreeRequested { .. }
                | Event::HostFreeCompleted { .. }
                | Event::HostEmptyCache
        )
    }

    /// An event of a tenant beside PyTorch's device allocator: an engine
    /// pool's sleep or wake, or device memory taken outside PyTorch (trace
    /// format v4, `.vlt` version 6).
    pub fn is_tenant(&self) -> bool {
        matches!(
            self,
            Event::PoolSleep { .. }
                | Event::PoolWake { .. }
                | Event::RawAlloc { .. }
                | Event::RawFree { .. }
        )
    }

    /// The private pool this event opens, closes, releases, puts to sleep
    /// or wakes, if any.
    pub fn pool(&self) -> Option<PoolIndex> {
        match *self {
            Event::PoolSleep { pool } | Event::PoolWake { pool } => Some(pool),
            Event::PoolCreate { pool }
            | Event::CaptureBegin { pool, .. }
            | Event::CaptureEnd { pool }
            | Event::PoolEnter { pool }
            | Event::PoolExit { pool }
            | Event::PoolRelease { pool } => Some(pool),
            _ => None,
        }
    }
}
