//! vramlab-allocator: GPU caching allocator policies over a [`Device`].
//!
//! The public surface is the root's re-exports and four namespaces; every
//! other module is private.
//!
//! * The contract of a policy: [`Allocator`] (serving), [`Inspect`],
//!   [`Seed`] and [`Invariants`] (and [`Wrapper`] for a layer over one),
//!   with the views and errors they speak in ([`BlockHandle`],
//!   [`SegmentView`], [`AllocError`], [`OomReport`], …) and
//!   `torch.cuda.memory_stats()` statistics ([`MemoryStats`]).
//! * The native policy's settings: [`AllocConf`] (`PYTORCH_ALLOC_CONF`
//!   with PyTorch's grammar and quirks) for a [`TorchVersion`].
//! * Devices: the [`Device`] trait a policy asks for memory through, the
//!   simulated GPU ([`SimDevice`], placed by a [`Placement`]), latency
//!   histograms, and (feature `cuda`) the real one in `cuda`.
//! * [`policies`]: one module per policy — `native` (PyTorch's CUDA caching
//!   allocator, reproduced exactly; also [`NativeAllocator`] here), `direct`,
//!   `bfc`, `async_pool`, `stitch` — each with its allocator type and its
//!   `Settings`; [`PolicySpec`] and [`with_policy!`] name and build them.
//! * [`host`]: PyTorch's pinned host caching allocator, release by release
//!   (`HostAllocator`, its `HostRules` from an [`AllocConf`]'s `pinned_*`
//!   keys, and `host_memory_stats()`'s figures).
//! * [`format`](mod@format): one formatter per use for sizes, counts and shares.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
#![warn(missing_docs, unreachable_pub)]

mod conf;
mod devices;
pub mod format;
pub mod host;
mod latency;
mod pending;
pub mod policies;
mod policy;
mod stats;

pub use conf::{AllocConf, Backend, ConfError, ConfErrorKind, ROUNDUP_INTERVALS, TorchVersion};
#[cfg(feature = "cuda")]
pub use devices::cuda;
pub use devices::{
    CostModel, Device, DeviceCall, DeviceCallKind, DeviceError, DevicePtr, MemInfo, Placement,
    Refusal, SimDevice,
};
pub use latency::{DeviceLatencies, LatencyHistogram, LatencySummary};
pub use policies::native::NativeAllocator;
pub use policies::{PolicyKind, PolicySpec};
pub use policy::{
    AllocError, Allocator, BlockHandle, BlockState, BlockView, Inspect, Invariants, OomReport,
    PoolOptions, PoolRoute, Seed, SeedBlock, SeedBlockState, SeedPool, SeedRange, SegmentView,
    Wrapper,
};
pub use stats::{MemoryStats, PoolKind, Stat, StatArray};
