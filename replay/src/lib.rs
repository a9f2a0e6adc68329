//! vramlab-replay: the replay engine and the analyses built on it.
//!
//! * [`engine`]: [`replay`] drives a policy through a trace on a device
//!   ([`Scenario`] picks the policy, settings and simulated device; [`Run`]
//!   is what comes out; [`Start`] says how a trace recorded mid-run begins).
//! * [`analysis`]: what users ask of replays — [`analysis::sweep`] (every
//!   trace × every setting), [`analysis::grid`] (the settings),
//!   [`analysis::recommend`], [`analysis::oom_point`] (the smallest
//!   capacity), [`analysis::fit`] (the largest workload), [`analysis::gate`]
//!   (the regression gate), [`analysis::stress`] (pathological traces) and
//!   [`analysis::fidelity`] (the proof against PyTorch's recording).
//! * [`torch_release`]: the PyTorch release whose rules a trace is judged
//!   by; [`gpus`]: named cards and the memory PyTorch can use on them.
//! * [`results`]: what each command answers, as typed values that
//!   serialise to the CLI's `--json` ([`results::ReplayResult`],
//!   [`results::CapacityRun`], [`results::FidelityOutcome`], …).
//! * [`io`]: traces in — [`Inputs`], the one way from paths to traces,
//!   with the allocator's knowledge ([`io::inputs`]) — and a replay out as
//!   a PyTorch snapshot ([`io::snapshot_out`]).
//!
//! The simulated GPU ([`SimDevice`]) and the policies live in
//! `vramlab-allocator`; they are re-exported here for convenience.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
#![warn(missing_docs)]

pub mod analysis;
pub mod engine;
pub mod gpus;
pub mod io;
pub mod results;
pub mod torch_release;

pub use analysis::fidelity::{FidelityReport, Mismatch, check_fidelity};
pub use engine::run::{LoggedCall, OomEvent, Run, Summary, TimelinePoint};
pub use engine::scenario::Scenario;
pub use engine::start::{Start, choose_start, describe_start, recorded_conf, start_for};
pub use engine::{ProgressHook, ReplayDevice, ReplayError, ReplayOptions, replay};
pub use io::inputs::{Input, InputError, InputNote, Inputs, Loaded, Pick, Reading};
pub use vramlab_allocator::{CostModel, PolicySpec, SimDevice, with_policy};
