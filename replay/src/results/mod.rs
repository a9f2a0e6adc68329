//! What each command answers, as typed values: the CLI's `--json` is their
//! serialisation, its tables render the same values, and the Python package
//! returns what the JSON says.
//!
//! * `replay`: one replay ([`crate::ReplayResult`]), with the other
//!   placement's figures when they were computed.
//! * `capacity`: a replay on a fixed capacity: it fits, or where it ran
//!   out, the code that asked and the allocator's state there
//!   ([`crate::CapacityRun`]).
//! * `fidelity`: a snapshot's fidelity check, every device and the total
//!   ([`crate::FidelityOutcome`]).
//! * `gpus`: the named cards and the memory PyTorch can use on each
//!   ([`crate::GpuMemory`]).
//! * `cuda` (with the `cuda` feature): a replay on a real GPU with its
//!   latencies and leak check (`CudaReplayResult`).
//!
//! These results have always been printed with their keys in alphabetical
//! order at every level (the order of a `serde_json::Value` map); the
//! field order here is for reading.

pub(crate) mod capacity;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub(crate) mod fidelity;
pub(crate) mod gpus;
pub(crate) mod pools;
pub(crate) mod replay;
