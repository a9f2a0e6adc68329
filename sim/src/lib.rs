//! vramlab-sim: the simulated GPU and the replay engine.
//!
//! * [`device`]: [`SimDevice`], a GPU with a capacity, an address space, a
//!   call log and a cost model.
//! * [`replay`]: the engine that drives a policy through a trace.
//! * [`run`]: what a replay produces.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
#![warn(missing_docs)]

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
pub mod fidelity;
pub mod fit;
pub mod gate;
pub mod gpus;
pub mod grid;
pub mod load;
pub mod oom_point;
pub mod policy;
pub mod recommend;
pub mod release;
pub mod replay;
pub mod run;
pub mod scenario;
pub mod snapshot_out;
pub mod start;
pub mod stress;
pub mod sweep;
pub mod timed;

pub use device::{CostModel, SimDevice};
pub use fidelity::{FidelityReport, Mismatch, check_fidelity};
pub use policy::PolicySpec;
pub use replay::{ProgressHook, ReplayDevice, ReplayError, ReplayOptions, replay};
pub use run::{LoggedCall, OomEvent, Run, Summary, TimelinePoint};
pub use scenario::Scenario;
pub use start::{Start, choose_start, describe_start, start_for};
