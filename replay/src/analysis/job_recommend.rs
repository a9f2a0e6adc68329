//! A recommendation for a multi-rank job: the grid swept on each distinct
//! trace, each grid line judged by the job's worst rank
//! ([`worst_rows`]), ranked as for one trace on the capacity each rank's
//! allocator has (the card less the bytes it spends outside the
//! allocator), and the smallest card of the first-ranked setting and of
//! the defaults: the largest of the traces' smallest capacities, plus the
//! outside bytes.

use serde::Serialize;
use vramlab_allocator::Placement;
use vramlab_traces::{Trace, TraceSummary};

use crate::analysis::grid::GridEntry;
use crate::analysis::job::worst_rows;
use crate::analysis::oom_point::find_oom_points_with;
use crate::analysis::recommend::{MinCapacity, Recommendation, recommend, recommend_outside};
use crate::analysis::sweep::{SweepRow, run_sweep};
use crate::engine::ReplayError;
use crate::engine::start::{Start, start_for};
use crate::engine::stream::StreamError;
use crate::torch_release::TorchTarget;

/// What [`recommend_job`] needs.
#[derive(Debug, Clone, Copy)]
pub struct JobRecommendRequest<'a> {
    /// Each distinct trace, named as in sweep rows.
    pub traces: &'a [(String, Trace)],
    /// The grid to rank.
    pub grid: &'a [GridEntry],
    /// What each rank's allocator may use.
    pub capacity: u64,
    /// Bytes each rank spends outside the allocator.
    pub outside: u64,
    /// The PyTorch release(s) the advice is for.
    pub target: &'a TorchTarget,
    /// How a trace that starts mid-run begins (`None`: as chosen for the
    /// grid).
    pub start: Option<Start>,
    /// How the simulated driver places segments.
    pub placement: Placement,
}

/// The job's ranking.
#[derive(Debug, Clone)]
pub struct JobRanking {
    /// Each distinct trace's sweep rows, in grid order.
    pub per_trace: Vec<Vec<SweepRow>>,
    /// The ranking of the job's rows (each the worst rank's).
    pub recommendation: Recommendation,
    /// The job's smallest capacity under the defaults and the first-ranked
    /// setting.
    pub min_capacities: Vec<MinCapacity>,
}

/// Ranks the grid for the job (see the module's doc); `progress` is
/// called once per finished sweep replay. The error names the trace and
/// setting whose replay failed.
pub fn recommend_job(
    req: &JobRecommendRequest<'_>,
    progress: &(dyn Fn() + Sync),
) -> Result<JobRanking, (String, String, ReplayError)> {
    let rows = run_sweep(
        req.traces,
        req.grid,
        Some(req.capacity),
        req.placement,
        None,
        req.start,
        progress,
    )?;
    let per_trace: Vec<Vec<SweepRow>> = rows
        .chunks(req.grid.len().max(1))
        .map(<[_]>::to_vec)
        .collect();
    let combined = worst_rows(&per_trace, rows.len() as u64);
    let peak_live = req
        .traces
        .iter()
        .map(|(_, t)| TraceSummary::of(t).peak_live_bytes)
        .max()
        .unwrap_or(0);
    let first = recommend(&combined, req.capacity, peak_live, req.target, &[]);
    let mut lines = vec!["default".to_string()];
    lines.extend(first.ranked.first().map(|w| w.row.grid_line.clone()));
    lines.dedup();
    let mut min_capacities = Vec::new();
    for line in &lines {
        if let Some(entry) = req.grid.iter().find(|g| &g.to_line() == line) {
            min_capacities.push(MinCapacity {
                grid_line: line.clone(),
                bytes: job_min_capacity(req, entry)?,
            });
        }
    }
    let recommendation = recommend_outside(
        &combined,
        req.capacity,
        peak_live,
        req.target,
        &min_capacities,
        req.outside,
    );
    Ok(JobRanking {
        per_trace,
        recommendation,
        min_capacities,
    })
}

/// The job's smallest capacity under `entry`: the largest of its traces'.
fn job_min_capacity(
    req: &JobRecommendRequest<'_>,
    entry: &GridEntry,
) -> Result<u64, (String, String, ReplayError)> {
    let mut most = 0;
    let scenarios: Vec<_> = req.grid.iter().map(|e| e.scenario(None)).collect();
    for (name, t) in req.traces {
        let start = start_for(t, &scenarios, req.start).unwrap_or_default();
        let s = entry.scenario(None).with_placement(req.placement);
        let points = find_oom_points_with(t, std::slice::from_ref(&s), start).map_err(|e| {
            let error = match e {
                StreamError::Replay { error, .. } => error,
                StreamError::Read(e) => ReplayError::Malformed(e.to_string()),
            };
            (name.clone(), entry.label(), error)
        })?;
        most = most.max(points.first().map_or(0, |p| p.min_capacity));
    }
    Ok(most)
}

/// One rank group under a setting.
#[derive(Debug, Clone, Serialize)]
pub struct RowFit {
    /// The setting.
    pub setting: String,
    /// Peak reserved bytes on the capacity.
    pub peak_reserved_bytes: u64,
    /// It ran without OOM.
    pub fits: bool,
}

impl From<SweepRow> for RowFit {
    fn from(r: SweepRow) -> RowFit {
        RowFit {
            fits: r.fits(),
            setting: r.setting,
            peak_reserved_bytes: r.peak_reserved_bytes,
        }
    }
}

/// One rank group under the recommended setting and the defaults.
#[derive(Debug, Clone, Serialize)]
pub struct RankFit {
    /// Its ranks.
    pub ranks: String,
    /// The rank whose trace it is.
    pub rank: u32,
    /// Under the first-ranked setting.
    pub recommended: Option<RowFit>,
    /// Under the defaults.
    pub default: Option<RowFit>,
}
