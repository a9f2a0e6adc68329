//! What each command answers, as typed values: the CLI's `--json` is their
//! serialisation, its tables render the same values, and the Python package
//! returns what the JSON says.
//!
//! * [`replay`]: one replay ([`ReplayResult`]), with the other placement's
//!   figures when they were computed.
//! * [`capacity`]: a replay on a fixed capacity: it fits, or where it ran
//!   out, the code that asked and the allocator's state there
//!   ([`CapacityRun`]).
//! * [`fidelity`]: a snapshot's fidelity check, every device and the total
//!   ([`FidelityOutcome`]).
//! * [`gpus`]: the named cards and the memory PyTorch can use on each
//!   ([`GpuMemory`]).
//! * `cuda` (with the `cuda` feature): a replay on a real GPU with its
//!   latencies and leak check (`CudaReplayResult`).
//!
//! These results have always been printed with their keys in alphabetical
//! order at every level (the order of a `serde_json::Value` map); the
//! field order here is for reading.

pub mod capacity;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod fidelity;
pub mod gpus;
pub mod replay;

pub use capacity::CapacityRun;
#[cfg(feature = "cuda")]
pub use cuda::CudaReplayResult;
pub use fidelity::FidelityOutcome;
pub use gpus::GpuMemory;
pub use replay::ReplayResult;
