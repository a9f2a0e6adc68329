//! vramlab-replay: the replay engine and the analyses built on it.
//!
//! The public surface is the crate root: every type and function users need
//! is re-exported here, grouped as below, and the modules that define them
//! are private. Three small namespaces stay public because their names read
//! best qualified: [`gpus`] (named cards), [`gate`] (the regression gate)
//! and [`stress`] (pathological traces).
//!
//! * The engine: [`replay`] drives a policy through a trace on a device
//!   ([`Scenario`] picks the policy, settings and simulated device; [`Run`]
//!   is what comes out; [`Start`] says how a trace recorded mid-run begins);
//!   with the `cuda` feature, `CudaScenario` replays on a real GPU.
//! * The analyses: [`run_sweep`] (every trace × every setting, [`SweepRow`]),
//!   the settings grid ([`GridEntry`], [`parse_grid`], [`default_grid`]),
//!   [`recommend`] ([`Recommendation`]), [`find_oom_point`] (the smallest
//!   capacity, [`OomPoint`]), [`max_fitting_size`] (the largest workload,
//!   [`FitResult`]), [`run_matrix`] (variants × settings, [`Matrix`]),
//!   [`placement_range`] (how much a prediction depends on the driver's
//!   address order), a multi-rank job's worst rank ([`job_setting`],
//!   [`worst_rows`], [`JobView`]), [`bench`](fn@bench) (the policy benchmark) and
//!   [`check_fidelity`] (the proof against PyTorch's recording).
//! * The results: what each command answers, as typed values that
//!   serialise to the CLI's `--json` ([`ReplayResult`], [`CapacityRun`],
//!   [`FidelityOutcome`], [`GpuMemory`], …).
//! * Traces in and out: [`Inputs`], the one way from paths to traces, with
//!   the allocator's knowledge; [`target_of`], the PyTorch release a trace
//!   is judged by; [`write_snapshot`], a replay out as a PyTorch snapshot.
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
// Every `pub` item is reachable from the root: the list below is the surface.
#![warn(unreachable_pub)]

mod analysis;
mod engine;
pub mod gpus;
mod io;
mod results;
mod torch_release;

// The engine.
pub use engine::colocate::{ColocatedRun, Step, StepUse, Tenant, TenantDevice, replay_colocated};
#[cfg(feature = "cuda")]
pub use engine::cuda::{CudaReplayError, CudaRun, CudaScenario, LeakCheck};
pub use engine::kv_rule::{KV_NO_ROOM, KV_PHASE, KV_ROUND, requested as kv_requested};
pub use engine::passes::{ReplayPasses, TraceFile};
pub use engine::run::{
    HostDecision, HostOomEvent, HostSummary, LoggedCall, OomEvent, Run, Summary, TimelinePoint,
};
pub use engine::scenario::Scenario;
pub use engine::start::{Start, choose_start, describe_start, recorded_conf, start_for};
pub use engine::stream::{StreamError, Streamed, replay_streamed};
pub use engine::{
    GrowthFn, GrowthHook, ProgressHook, ReplayDevice, ReplayError, ReplayOptions, replay,
};

// The analyses.
pub use analysis::bench::{BenchRow, bench};
pub use analysis::diff::{DiffGroup, DiffInput, DiffSide, GroupBy, RunDiff, diff};
pub use analysis::explain::{
    Culprit, DEFAULT_MAX_CANDIDATES, ExplainOptions, Explanation, Fix, LineCulprit, WasteSplit,
    explain,
};
pub use analysis::fidelity::{FidelityReport, FreeBlock, Mismatch, check_fidelity};
pub use analysis::fit::{FitError, FitProbe, FitResult, max_fitting_size};
pub use analysis::gate;
pub use analysis::grid::{GridEntry, default_grid, default_grid_for, parse_grid, parse_grid_line};
pub use analysis::host_advice::{HOST_SIZES_KEY, HostAdvice, HostLimits, HostSetting, advise_host};
pub use analysis::job::{
    JOB_ROW_NAME, JobOomPoint, JobSetting, JobView, RankGroup, RankPeak, card_for, job_setting,
    worst_rows,
};
pub use analysis::job_recommend::{
    JobRanking, JobRecommendRequest, RankFit, RowFit, recommend_job,
};
pub use analysis::matrix::{
    MATRIX_SETTINGS, Matrix, MatrixCell, MatrixError, MatrixRequest, run_matrix,
};
pub use analysis::oom_point::find_oom_point;
pub use analysis::oom_point::{StreamedOomPoints, find_oom_points_streamed, find_oom_points_with};
pub use analysis::oom_search::{OOM_POINT_STEP, OomPoint};
pub use analysis::placement::{
    PlacementRange, Predicted, SettingRange, placement_note, placement_range, placement_range_with,
};
pub use analysis::plan::{
    PlanReport, PolicyGap, Recipe, buffers as plan_buffers, plan, plan_start,
};
pub use analysis::recommend::{
    MinCapacity, Ranked, Recommendation, Verdict, check_direction_words, recommend,
    recommend_outside,
};
pub use analysis::recommend_trace::{RecommendRequest, recommend_trace, recommend_with};
pub use analysis::serve_budget::{
    CaptureStep, ForwardRecording, KvCache, ServeBudget, batch_of_label, serve_budget,
    start_up_trace,
};
pub use analysis::stress;
pub use analysis::sweep::{
    SWEEP_CSV_HEADER, Shard, SweepRow, mark_same, merge_rows, read_rows_csv, run_sweep, same_result,
};
pub use analysis::sweep_cases::{
    CASE_SCHEMA, CaseError, CasePlan, CaseTrace, SweepCase, plan_cases, run_case,
};
pub use analysis::sweep_trace::{SweepFile, sweep_trace};
pub use analysis::upgrade::{
    UpgradeAdvice, UpgradeFit, UpgradeRow, upgrade_from_runs, upgrade_from_sweeps,
};
pub use engine::static_plan::{
    PlanBuilder, SEARCH_BUDGET as PLAN_SEARCH_BUDGET, SEARCH_UP_TO as PLAN_SEARCH_UP_TO,
    static_plan,
};

// What each command answers.
pub use results::capacity::{CapacityRun, free_bytes};
#[cfg(feature = "cuda")]
pub use results::cuda::CudaReplayResult;
pub use results::fidelity::FidelityOutcome;
pub use results::gpus::{GpuMemory, gpu_memory};
pub use results::pools::{PoolState, PoolUse, pool_uses};
pub use results::replay::ReplayResult;

// Traces in and out; the PyTorch release a trace is judged by.
pub use io::inputs::{
    DeviceTraces, Input, InputError, InputNote, Inputs, Loaded, Pick, Reading,
    label as input_label, snapshot_devices,
};
pub use io::snapshot_out::{snapshot_value, write_snapshot};
pub use torch_release::{TorchTarget, target_of};

// From vramlab-allocator, for convenience.
pub use vramlab_allocator::{CostModel, PolicySpec, SimDevice, with_policy};
