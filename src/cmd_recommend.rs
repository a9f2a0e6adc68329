//! `vramlab recommend`: rank settings for a card and say what to export —
//! or that the defaults are fine.

mod job_mode;
mod streamed;

use anyhow::{Result, bail};
use clap::Args;
use vramlab_replay::{GridEntry, OomEvent, SweepRow, TorchTarget, UpgradeAdvice};
use vramlab_replay::{HeldTrace, ReplayPasses, StreamError};
use vramlab_replay::{RecommendRequest, Recommendation, Verdict, recommend_with};

use crate::args::GridArgs;
use crate::args::{DeviceArgs, StartArgs, TraceArgs};
use crate::render::recommendation::{Advice, print_advice};

/// Arguments of `vramlab recommend`.
#[derive(Debug, Args)]
pub struct RecommendArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// The card (--gpu NAME) or the memory (--capacity SIZE) the job may use.
    #[command(flatten)]
    device: DeviceArgs,
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
    if let Some(file) = crate::job::job_file(&args.trace.trace) {
        if capacity == 0 {
            bail!(
                "recommend needs the card for a job (its ranks share it with memory outside the allocator): --gpu NAME (`vramlab gpus` lists them) or --capacity SIZE"
            );
        }
        return job_mode::run(&args, &file, capacity);
    }
    let upgrade_to = args.grid.upgrade_to("recommend")?;
    if streamed::run(&args, capacity, upgrade_to)? {
        return Ok(());
    }
    let vramlab_replay::Input {
        trace, label: name, ..
    } = args.trace.load(args.grid.torch_version())?;
    advise(&args, &HeldTrace(&trace), &name, capacity, upgrade_to)
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
