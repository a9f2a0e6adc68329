//! Renderers: one per kind of output, so that every command prints a
//! replay, a recommendation, an OOM or a sweep the same way.
//!
//! * [`json`]: `--json`, a command's result serialised as it is.
//! * [`table`]: plain-text tables (and the workspace's size formatters).
//! * [`replay`]: replay results as a table, JSON or a timeline CSV.
//! * [`recommendation`]: the verdict, the export lines and the ranking.
//! * [`oom`] and [`oom_code`]: the allocator state at an OOM, and the code
//!   that made the failing allocation.
//! * [`job`]: a multi-rank job's traces and its worst rank per setting.
//! * [`oom_point`]: the smallest capacity and card per setting.
//! * [`fidelity`]: a snapshot's fidelity check.
//! * [`fit`]: the largest workload that fits, per setting.
//! * [`gpus`]: the named cards.
//! * [`conf`]: a settings string explained.
//! * [`bench`]: the policy benchmark and the regression gate.
//! * [`sweep`]: sweep rows per trace, or one summary line per trace.
//! * [`stats`]: what a trace holds.
//! * [`report`]: what `report` and `demo` print besides the page.
//! * [`oracle`]: PyTorch's own allocator next to vramlab's replay.
//! * [`matrix`]: a workload's variants × settings, as a table or CSV.
//! * `cuda_replay` (with the `cuda` feature): replays on a real GPU, with
//!   the latency of every driver and allocator call and the leak check.

pub mod bench;
pub mod conf;
#[cfg(feature = "cuda")]
pub mod cuda_replay;
pub mod diff;
pub mod explain;
pub mod fidelity;
pub mod fit;
pub mod gpus;
pub mod host_advice;
pub mod job;
pub mod json;
pub mod matrix;
pub mod oom;
pub mod oom_code;
pub mod oom_point;
pub mod oracle;
pub mod recommendation;
pub mod replay;
pub mod report;
pub mod stats;
pub mod sweep;
pub mod table;
