//! `vramlab recommend`: rank settings for a card and say what to export —
//! or that the defaults are fine.

use std::path::Path;

use anyhow::{Result, bail};
use clap::Args;
use serde::Serialize;
use vramlab_replay::{GridEntry, OomEvent, SweepRow, TorchTarget, UpgradeAdvice};
use vramlab_replay::{JobRanking, JobRecommendRequest, JobSetting, JobView, MinCapacity};
use vramlab_replay::{RankFit, RowFit, card_for, recommend_job};
use vramlab_replay::{RecommendRequest, Recommendation, Verdict, recommend_with};
use vramlab_replay::{ReplayPasses, StreamError};

use crate::args::GridArgs;
use crate::args::{DeviceArgs, StartArgs, TraceArgs};
use crate::job::{LoadedJob, TraceResults, refuse, refuse_trace_args};
use crate::render::recommendation::{Advice, print_advice};
use crate::source::{Reading, Source};

/// Arguments of `vramlab recommend`.
#[derive(Debug, Args)]
pub struct RecommendArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// The card (--gpu NAME) or the memory (--capacity SIZE) the job may use.
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    host: crate::args::HostArgs,
    #[command(flatten)]
    grid: GridArgs,
    #[command(flatten)]
    start: StartArgs,
    /// How many ranked settings to show.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `recommend`.
pub fn run(args: RecommendArgs) -> Result<()> {
    // Without a card (--gpu/--capacity) the device is unlimited (0): the
    // rule in vramlab_replay's recommend keeps the defaults then.
    let capacity = args.device.bytes().unwrap_or(0);
    let reading = Reading::Passes("recommending");
    let trace = match Source::resolve(&args.trace, args.grid.torch_version(), reading)? {
        Source::Job(_) if capacity == 0 => bail!(
            "recommend needs the card for a job (its ranks share it with memory outside the allocator): --gpu NAME (`vramlab gpus` lists them) or --capacity SIZE"
        ),
        Source::Job(file) => return run_job(&args, &file, capacity),
        Source::Trace(trace) => trace,
    };
    let upgrade_to = args.grid.upgrade_to("recommend")?;
    let passes = trace.passes();
    // The advice is printed as it is made: a file without events is
    // refused before, as a whole read refuses it (a held trace was). The
    // pass that counts the live peak (which the advice needs, and which a
    // file keeps) says.
    if trace.held().is_none() {
        passes.peak_live().map_err(|e| in_words(e, trace.label()))?;
    }
    trace.finish()?;
    advise(&args, passes, trace.label(), capacity, upgrade_to)?;
    if let Some(reads) = trace.reads().filter(|_| crate::output::verbose()) {
        errln!("the trace was read {reads} times, not held");
    }
    Ok(())
}

/// Ranks the grid over the trace of `passes` for the card and prints the
/// advice (and, with `--upgrade-to`, the other release's).
fn advise(
    args: &RecommendArgs,
    passes: &dyn ReplayPasses,
    name: &str,
    capacity: u64,
    upgrade_to: Option<vramlab_allocator::TorchVersion>,
) -> Result<()> {
    let trace = passes.trace();
    let target = args.grid.target(trace);
    let before = ranked(args, passes, name, &target, capacity)?;
    let after = match upgrade_to {
        Some(v) => Some((
            v,
            ranked(args, passes, name, &TorchTarget::user(v), capacity)?,
        )),
        None => None,
    };
    if args.json {
        return match after {
            None => crate::render::json::print(&before.rec),
            Some((v, a)) => {
                crate::render::json::print(&UpgradeAdvice::new(target.rules, before.rec, v, a.rec))
            }
        };
    }
    let card = args
        .device
        .describe()
        .unwrap_or_else(|| "no card given (unlimited memory)".to_string());
    print_ranked(args, passes, name, &card, &before, capacity);
    if let Some((v, a)) = after {
        outln!();
        outln!("---");
        print_ranked(args, passes, name, &card, &a, capacity);
        outln!();
        let advice = UpgradeAdvice::new(target.rules, before.rec, v, a.rec);
        for line in advice.summary() {
            outln!("{line}");
        }
    }
    Ok(())
}

/// A failed replay of a recommendation, in the words of a sweep's.
fn in_words(e: StreamError, name: &str) -> anyhow::Error {
    match e {
        StreamError::Read(e) => e.into(),
        StreamError::Replay { scenario, error } => {
            anyhow::anyhow!("{name} under {scenario}: {error}")
        }
    }
}

/// One release's sweep, ranking and the grid it ranked.
struct Ranking {
    target: TorchTarget,
    grid: Vec<GridEntry>,
    rows: Vec<SweepRow>,
    rec: Recommendation,
}

/// Sweeps the grid of `target` over the trace and ranks it for the card.
fn ranked(
    args: &RecommendArgs,
    passes: &dyn ReplayPasses,
    name: &str,
    target: &TorchTarget,
    capacity: u64,
) -> Result<Ranking> {
    let grid = args.grid.entries(target)?;
    let pb = crate::progress::replay_count_bar(grid.len() as u64, false);
    let (rows, rec) = recommend_with(
        &RecommendRequest {
            name,
            trace: passes.trace(),
            grid: &grid,
            capacity: (capacity > 0).then_some(capacity),
            target,
            start: args.start.start,
            placement: args.device.placement,
        },
        passes,
        &|| pb.inc(1),
    )
    .map_err(|e| in_words(e, name))?;
    pb.finish_and_clear();
    let mut rec = rec;
    rec.host = vramlab_replay::advise_host(
        passes,
        &vramlab_allocator::AllocConf::new(target.rules),
        args.host.limits(),
        args.start.start.unwrap_or_default(),
    )
    .map_err(|e| in_words(e, name))?;
    Ok(Ranking {
        target: target.clone(),
        grid,
        rows,
        rec,
    })
}

/// Prints one release's advice (and, when nothing fits, where the best
/// setting runs out).
fn print_ranked(
    args: &RecommendArgs,
    passes: &dyn ReplayPasses,
    name: &str,
    card: &str,
    r: &Ranking,
    capacity: u64,
) {
    let trace = passes.trace();
    let start = (trace.initial.is_some())
        .then(|| r.rows.first())
        .flatten()
        .map(|row| vramlab_replay::describe_start(trace, row.start.parse().ok()));
    let best_attempt = if r.rec.verdict == Verdict::NothingFits {
        best_attempt(passes, &r.grid, &r.rec, capacity, &r.rows)
    } else {
        None
    };
    print_advice(&Advice {
        target: &r.target.describe(),
        start: start.as_deref(),
        trace,
        name,
        card,
        rec: &r.rec,
        top: args.top,
        best_attempt: best_attempt.as_ref().map(|(s, o)| (s.as_str(), o)),
    });
}

/// The setting that got furthest, and where it ran out.
fn best_attempt(
    passes: &dyn ReplayPasses,
    grid: &[GridEntry],
    rec: &Recommendation,
    capacity: u64,
    rows: &[SweepRow],
) -> Option<(String, OomEvent)> {
    let w = rec.ranked.first()?;
    let g = grid.iter().find(|g| g.to_line() == w.row.grid_line)?;
    let start = rows
        .first()
        .and_then(|r| r.start.parse().ok())
        .unwrap_or_default();
    let opts = vramlab_replay::ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        start,
        ..Default::default()
    };
    let run = passes
        .replay(&[g.scenario((capacity > 0).then_some(capacity))], &opts)
        .ok()?
        .into_iter()
        .next()?;
    Some((w.row.setting.clone(), run.oom?))
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

/// Runs `recommend` on the job at `file`: the grid swept on each distinct
/// trace, each grid line judged by the job's worst rank, ranked as for one
/// trace, on the card less the bytes each rank spends outside the
/// allocator ([`vramlab_replay::recommend_job`]).
fn run_job(args: &RecommendArgs, file: &Path, card: u64) -> Result<()> {
    if args.grid.upgrade_to("recommend")?.is_some() {
        return refuse("recommend", "--upgrade-to", file);
    }
    refuse_trace_args("recommend", &args.trace, file)?;
    let job = LoadedJob::read(file, args.grid.torch_version(), Some(card))?;
    let capacity = job.capacity.unwrap_or(card);
    let named = job.named();
    let target = args.grid.target_of_all(&job.traces);
    let grid = args.grid.entries(&target)?;
    let pb = crate::progress::replay_count_bar((named.len() * grid.len()) as u64, false);
    let ranking = recommend_job(
        &JobRecommendRequest {
            traces: &named,
            grid: &grid,
            capacity,
            outside: job.outside(),
            target: &target,
            start: args.start.start,
            placement: args.device.placement,
        },
        &|| pb.inc(1),
    )
    .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    pb.finish_and_clear();
    let JobRanking {
        per_trace,
        recommendation: rec,
        min_capacities: caps,
    } = ranking;
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
    let advice = crate::render::job::JobAdvice {
        capacity: answer.capacity_bytes,
        recommendation: &answer.recommendation,
        top: args.top,
        per_rank: &answer.per_rank,
        settings: &answer.job.settings,
    };
    let capacity_line = job.capacity_line(args.device.describe());
    crate::render::job::print_recommend((&job.job, &job.groups), capacity_line, &advice, &target);
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
    let mut settings = job.sweep_settings(&picked)?;
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
            recommended: winner
                .as_deref()
                .and_then(|l| row_of(rows, l))
                .map(RowFit::from),
            default: row_of(rows, "default").map(RowFit::from),
        })
        .collect();
    Ok((settings, per_rank))
}
