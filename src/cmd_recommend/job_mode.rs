//! `vramlab recommend JOB`: the grid swept on each distinct trace, each
//! grid line judged by the job's worst rank, ranked as for one trace, on
//! the card less the bytes each rank spends outside the allocator.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use vramlab_replay::{
    GridEntry, JobSetting, JobView, MinCapacity, RankPeak, Recommendation, SweepRow, TorchTarget,
    card_for, find_oom_point, recommend, recommend_outside, run_sweep, start_for, worst_rows,
};

use super::RecommendArgs;
use crate::job::{LoadedJob, TraceResults, refuse, refuse_trace_args};
use crate::render::job::FitsFrom;
use crate::render::table::{Table, bytes};

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

/// What `recommend --json` answers for a job.
#[derive(Debug, Serialize)]
pub struct JobRecommend {
    /// The job; its settings are the first-ranked and the defaults, each
    /// with the job's smallest capacity (`needs_bytes` − outside) and card.
    pub job: JobView<JobSetting>,
    /// The card's usable bytes.
    pub card_bytes: u64,
    /// What the allocator may use: the card less the outside bytes.
    pub capacity_bytes: u64,
    /// The ranking of the job's rows (each the worst rank's).
    pub recommendation: Recommendation,
    /// Each rank group under the first-ranked setting and the defaults.
    pub per_rank: Vec<RankFit>,
    /// Each distinct trace's sweep rows.
    pub traces: Vec<TraceResults<Vec<SweepRow>>>,
}

/// The job's smallest capacity under `line`: the largest of its traces'.
fn job_min_capacity(
    job: &LoadedJob,
    args: &RecommendArgs,
    entry: &GridEntry,
    grid: &[GridEntry],
) -> Result<u64> {
    let mut most = 0;
    for (g, t) in job.groups.iter().zip(&job.traces) {
        let scenarios: Vec<_> = grid.iter().map(|e| e.scenario(None)).collect();
        let start = start_for(t, &scenarios, args.start.start).unwrap_or_default();
        let s = entry.scenario(None).with_placement(args.device.placement);
        let p = find_oom_point(t, &s, start)
            .map_err(|e| anyhow::anyhow!("{} under {}: {e}", g.trace, entry.label()))?;
        most = most.max(p.min_capacity);
    }
    Ok(most)
}

/// Runs `recommend` on the job at `file`.
pub fn run(args: &RecommendArgs, file: &Path, card: u64) -> Result<()> {
    if args.grid.upgrade_to("recommend")?.is_some() {
        return refuse("recommend", "--upgrade-to", file);
    }
    refuse_trace_args("recommend", &args.trace, file)?;
    let job = LoadedJob::read(file, args.grid.torch_version(), Some(card))?;
    let outside = job.outside();
    let capacity = job.capacity.unwrap_or(card);
    let named = job.named();
    let target = args.grid.target_of_all(&named);
    let grid = args.grid.entries(&target)?;
    let pb = crate::progress::replay_count_bar((named.len() * grid.len()) as u64, false);
    let rows = run_sweep(
        &named,
        &grid,
        Some(capacity),
        args.device.placement,
        None,
        args.start.start,
        &|| pb.inc(1),
    )
    .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    pb.finish_and_clear();
    let per_trace: Vec<Vec<SweepRow>> = rows.chunks(grid.len().max(1)).map(<[_]>::to_vec).collect();
    let combined = worst_rows(&per_trace, rows.len() as u64);
    let peak_live = job
        .traces
        .iter()
        .map(|t| vramlab_traces::TraceSummary::of(t).peak_live_bytes)
        .max()
        .unwrap_or(0);
    let first = recommend(&combined, capacity, peak_live, &target, &[]);
    let mut lines = vec!["default".to_string()];
    lines.extend(first.ranked.first().map(|w| w.row.grid_line.clone()));
    lines.dedup();
    let mut caps = Vec::new();
    for line in &lines {
        if let Some(e) = grid.iter().find(|g| &g.to_line() == line) {
            caps.push(MinCapacity {
                grid_line: line.clone(),
                bytes: job_min_capacity(&job, args, e, &grid)?,
            });
        }
    }
    let rec = recommend_outside(&combined, capacity, peak_live, &target, &caps, outside);
    let (settings, per_rank) = summarise(&job, &per_trace, &rec, &caps)?;
    let answer = JobRecommend {
        job: JobView::new(&job.job, settings),
        card_bytes: card,
        capacity_bytes: capacity,
        recommendation: rec,
        per_rank,
        traces: job.trace_results(per_trace),
    };
    if args.json {
        return crate::render::json::print(&answer);
    }
    print(&job, args, &answer, &target);
    Ok(())
}

/// The job's figures under the first-ranked setting and the defaults, and
/// each rank group's.
fn summarise(
    job: &LoadedJob,
    per_trace: &[Vec<SweepRow>],
    rec: &Recommendation,
    caps: &[MinCapacity],
) -> Result<(Vec<JobSetting>, Vec<RankFit>)> {
    let winner = rec.ranked.first().map(|w| w.row.grid_line.clone());
    let mut lines: Vec<String> = winner.iter().cloned().collect();
    if !lines.iter().any(|l| l == "default") {
        lines.push("default".into());
    }
    let row_of = |rows: &[SweepRow], line: &str| rows.iter().find(|r| r.grid_line == line).cloned();
    let fit_of = |r: SweepRow| RowFit {
        fits: r.fits(),
        setting: r.setting,
        peak_reserved_bytes: r.peak_reserved_bytes,
    };
    let outside = job.outside();
    // Each trace's rows on the lines shown (every trace has every line of
    // the grid), in the order of `lines`.
    let lines: Vec<String> = lines
        .into_iter()
        .filter(|l| per_trace.iter().all(|rows| row_of(rows, l).is_some()))
        .collect();
    let picked: Vec<Vec<SweepRow>> = per_trace
        .iter()
        .map(|rows| lines.iter().filter_map(|l| row_of(rows, l)).collect())
        .collect();
    let mut settings = job.settings(
        &picked,
        |r| r.setting.clone(),
        |r| RankPeak {
            peak_reserved_bytes: r.peak_reserved_bytes,
            oom: !r.fits(),
        },
    )?;
    for (s, line) in settings.iter_mut().zip(&lines) {
        if let Some(c) = caps.iter().find(|c| &c.grid_line == line) {
            s.needs_bytes = c.bytes.saturating_add(outside);
            s.fits_on = card_for(c.bytes, outside);
        }
    }
    let per_rank = job
        .groups
        .iter()
        .zip(per_trace)
        .map(|(g, rows)| RankFit {
            ranks: g.label.clone(),
            rank: g.rank,
            recommended: winner.as_deref().and_then(|l| row_of(rows, l)).map(fit_of),
            default: row_of(rows, "default").map(fit_of),
        })
        .collect();
    Ok((settings, per_rank))
}

/// The advice for people: the job, the capacity, the ranking, each rank.
fn print(job: &LoadedJob, args: &RecommendArgs, a: &JobRecommend, target: &TorchTarget) {
    crate::render::job::print_header(&job.job, &job.groups);
    if let Some(line) = job.capacity_line(args.device.describe()) {
        outln!("{line}");
    }
    outln!("{}", target.describe());
    let name = format!("job (worst of {} ranks)", job.job.world_size);
    crate::render::recommendation::print_recommendation(
        &name,
        &bytes(a.capacity_bytes),
        &a.recommendation,
        args.top,
    );
    outln!();
    let cell = |f: &Option<RowFit>| match f {
        Some(f) => (
            bytes(f.peak_reserved_bytes),
            if f.fits { "yes" } else { "no" }.to_string(),
        ),
        None => ("-".into(), "-".into()),
    };
    let winner = a
        .per_rank
        .iter()
        .find_map(|r| r.recommended.as_ref().map(|f| f.setting.clone()))
        .unwrap_or_default();
    outln!("per rank (recommended: {winner}):");
    let mut tab = Table::new(vec![
        "ranks".into(),
        "recommended".into(),
        "fits".into(),
        "default".into(),
        "fits".into(),
    ]);
    for r in &a.per_rank {
        let (p, f) = cell(&r.recommended);
        let (dp, df) = cell(&r.default);
        tab.row(vec![r.ranks.clone(), p, f, dp, df]);
    }
    out!("{}", tab.render());
    outln!();
    crate::render::job::print_job(
        &job.job,
        &a.job.settings,
        "peak reserved",
        FitsFrom::SmallestCapacity,
    );
}
