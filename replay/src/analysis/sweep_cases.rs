//! A sweep as cases: each (trace, setting) pair with everything it needs to
//! run alone — on another core, process or machine — and give the row the
//! whole sweep gives ([`plan_cases`], [`run_case`]). What an executor (a
//! process pool, Dask, Ray, a Slurm array) hands around.

use serde::{Deserialize, Serialize};
use vramlab_allocator::{Placement, TorchVersion};
use vramlab_traces::Trace;

use crate::analysis::grid::{GridEntry, parse_grid_line};
use crate::analysis::sweep::{SweepRow, row_of};
use crate::engine::scenario::Scenario;
use crate::engine::start::{Start, start_for};
use crate::engine::{ReplayError, ReplayOptions};

/// The version of [`SweepCase`]'s fields (and of the rows' schema, which
/// is [`crate::SWEEP_CSV_HEADER`]).
pub const CASE_SCHEMA: u32 = 1;

/// One (trace, setting) pair of a sweep, self-contained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepCase {
    /// [`CASE_SCHEMA`].
    pub schema: u32,
    /// Position of the pair in the whole sweep (its row's `index`).
    pub index: u64,
    /// The trace's name in the rows (`file`, `file#N` for device N).
    pub trace: String,
    /// The file to read, as the sweep was given it.
    pub path: String,
    /// The device of a multi-device snapshot.
    pub device: u32,
    /// The release the file was read under (`None`: the one it was
    /// recorded with), which lays out a snapshot recorded mid-run.
    pub read_torch_version: Option<String>,
    /// The grid line (policy, fraction and settings).
    pub grid_line: String,
    /// Its label in the rows.
    pub setting: String,
    /// The PyTorch release whose rules the grid line is parsed under.
    pub torch_version: String,
    /// Device capacity in bytes (0: unlimited).
    pub capacity: u64,
    /// Where the simulated driver places segments.
    pub placement: String,
    /// How the trace begins if it starts mid-run (`None`: it starts from an
    /// empty allocator), as the whole sweep chose it.
    pub start: Option<Start>,
}

/// A trace of a sweep: its name, file, device and the trace itself.
#[derive(Debug, Clone, Copy)]
pub struct CaseTrace<'a> {
    /// Its name in the rows.
    pub label: &'a str,
    /// The file it was read from.
    pub path: &'a str,
    /// The trace.
    pub trace: &'a Trace,
}

/// How a sweep was asked for, beyond its traces and grid.
#[derive(Debug, Clone, Copy)]
pub struct CasePlan {
    /// Capacity in bytes (`None`: unlimited).
    pub capacity: Option<u64>,
    /// Driver placement.
    pub placement: Placement,
    /// The start asked for (`None`: chosen per trace for the whole grid).
    pub start: Option<Start>,
    /// The rules the grid was parsed under.
    pub rules: TorchVersion,
    /// The release the files were read under, if one was named.
    pub read_torch_version: Option<TorchVersion>,
}

/// The cases of the sweep of `traces` × `grid`, in row order: the pairs
/// [`crate::run_sweep`] replays, each with the start it gives the trace.
pub fn plan_cases(traces: &[CaseTrace<'_>], grid: &[GridEntry], plan: &CasePlan) -> Vec<SweepCase> {
    let scenarios: Vec<Scenario> = grid.iter().map(|g| g.scenario(plan.capacity)).collect();
    let mut out = Vec::with_capacity(traces.len() * grid.len());
    for t in traces {
        let start = start_for(t.trace, &scenarios, plan.start);
        for g in grid {
            out.push(SweepCase {
                schema: CASE_SCHEMA,
                index: out.len() as u64,
                trace: t.label.to_string(),
                path: t.path.to_string(),
                device: t.trace.header.device,
                read_torch_version: plan.read_torch_version.map(|v| v.to_string()),
                grid_line: g.to_line(),
                setting: g.label(),
                torch_version: plan.rules.to_string(),
                capacity: plan.capacity.unwrap_or(0),
                placement: plan.placement.name().to_string(),
                start,
            });
        }
    }
    out
}

/// Why a case cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaseError {
    /// A field does not parse.
    #[error("case {index}: {message}")]
    Field {
        /// The case's index.
        index: u64,
        /// What is wrong.
        message: String,
    },
    /// The replay failed.
    #[error("case {index} ({trace} under {setting}): {error}")]
    Replay {
        /// The case's index.
        index: u64,
        /// Its trace.
        trace: String,
        /// Its setting.
        setting: String,
        /// The replay's error.
        error: ReplayError,
    },
}

/// Replays one case on its trace (read as the case says): the row the
/// whole sweep gives for it.
pub fn run_case(case: &SweepCase, trace: &Trace) -> Result<SweepRow, CaseError> {
    let field = |message: String| CaseError::Field {
        index: case.index,
        message,
    };
    if case.schema != CASE_SCHEMA {
        return Err(field(format!(
            "schema {} (this vramlab reads schema {CASE_SCHEMA})",
            case.schema
        )));
    }
    let rules: TorchVersion = case
        .torch_version
        .parse()
        .map_err(|e| field(format!("torch_version: {e}")))?;
    let placement: Placement = case
        .placement
        .parse()
        .map_err(|e| field(format!("placement: {e}")))?;
    let entry =
        parse_grid_line(&case.grid_line, rules).map_err(|e| field(format!("grid_line: {e}")))?;
    let capacity = (case.capacity > 0).then_some(case.capacity);
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        start: case.start.unwrap_or_default(),
        ..Default::default()
    };
    let run = entry
        .scenario(capacity)
        .with_placement(placement)
        .run(trace, &opts)
        .map_err(|error| CaseError::Replay {
            index: case.index,
            trace: case.trace.clone(),
            setting: case.setting.clone(),
            error,
        })?;
    Ok(row_of(case.index, &case.trace, &entry, capacity, &run))
}
