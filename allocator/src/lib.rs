//! vramlab-allocator: GPU caching allocator policies over a [`Device`].
//!
//! * [`conf`]: `PYTORCH_ALLOC_CONF` parsing with PyTorch's grammar and quirks.
//! * [`device`]: the [`Device`] trait a policy asks for memory through.
//! * [`stats`]: `torch.cuda.memory_stats()` statistics, with PyTorch's names.
//! * [`policy`]: the [`Allocator`] trait every policy implements.
//! * [`native`]: PyTorch's native CUDA caching allocator, reproduced exactly.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
#![warn(missing_docs)]

pub mod conf;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
pub mod format;
pub mod latency;
pub mod native;
mod pending;
pub mod policies;
pub mod policy;
pub mod stats;

pub use conf::{AllocConf, TorchVersion};
pub use device::{Device, DeviceCall, DeviceCallKind, DeviceError};
pub use native::NativeAllocator;
pub use policy::{
    AllocError, Allocator, BlockHandle, BlockState, BlockView, OomReport, SeedBlock,
    SeedBlockState, SeedRange, SegmentView,
};
pub use stats::MemoryStats;
pub use stats::PoolKind;
