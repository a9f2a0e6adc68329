//! vramlab-allocator: GPU caching allocator policies over a [`Device`].
//!
//! * [`conf`]: `PYTORCH_ALLOC_CONF` parsing with PyTorch's grammar and quirks.
//! * [`devices`]: the [`Device`] trait a policy asks for memory through, the
//!   simulated GPU ([`SimDevice`]) and the real one (feature `cuda`).
//! * [`stats`]: `torch.cuda.memory_stats()` statistics, with PyTorch's names.
//! * [`policy`]: the traits every policy implements: [`Allocator`] (serving),
//!   [`Inspect`], [`Seed`] and [`Invariants`].
//! * [`policies`]: the policies — PyTorch's native CUDA caching allocator
//!   (reproduced exactly), direct, bfc, async, stitch — and their registry.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
#![warn(missing_docs)]

pub mod conf;
pub mod devices;
pub mod format;
pub mod latency;
mod pending;
pub mod policies;
pub mod policy;
pub mod stats;

pub use conf::{AllocConf, TorchVersion};
pub use devices::placement::Placement;
pub use devices::sim::{CostModel, SimDevice};
pub use devices::{Device, DeviceCall, DeviceCallKind, DeviceError};
pub use policies::native::NativeAllocator;
pub use policies::registry::PolicySpec;
pub use policy::{
    AllocError, Allocator, BlockHandle, BlockState, BlockView, Inspect, Invariants, OomReport,
    Seed, SeedBlock, SeedBlockState, SeedRange, SegmentView, Wrapper,
};
pub use stats::MemoryStats;
pub use stats::PoolKind;
