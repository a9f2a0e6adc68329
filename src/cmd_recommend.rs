//! `vramlab recommend`: rank settings for a card and say what to export —
//! or that the defaults are fine.

use anyhow::{Result, bail};
use clap::Args;
use vramlab_replay::OomEvent;
use vramlab_replay::{RecommendRequest, Recommendation, Verdict, recommend_trace};

use crate::args::GridArgs;
use crate::args::{DeviceArgs, StartArgs, TraceArgs};
use crate::render::recommendation::{Advice, print_advice};
use crate::render::table::bytes;

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
    let Some(capacity) = args.device.bytes() else {
        bail!(
            "recommend needs the card: --gpu NAME (`vramlab gpus` lists them) or --capacity SIZE"
        );
    };
    let vramlab_replay::Input {
        trace, label: name, ..
    } = args.trace.load(args.grid.torch_version)?;
    let target = args.grid.target(&trace);
    let grid = args.grid.entries(&target)?;
    let pb = crate::progress::replay_count_bar(grid.len() as u64, false);
    let (rows, rec) = recommend_trace(
        &RecommendRequest {
            name: &name,
            trace: &trace,
            grid: &grid,
            capacity: Some(capacity),
            target: &target,
            start: args.start.start,
            placement: args.device.placement,
        },
        &|| pb.inc(1),
    )
    .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    pb.finish_and_clear();
    if args.json {
        return crate::render::json::print(&rec);
    }
    let start = (trace.initial.is_some())
        .then(|| rows.first())
        .flatten()
        .map(|r| vramlab_replay::describe_start(&trace, r.start.parse().ok()));
    let card = args.device.describe().unwrap_or_else(|| bytes(capacity));
    let best_attempt = if rec.verdict == Verdict::NothingFits {
        best_attempt(&trace, &grid, &rec, capacity, &rows)
    } else {
        None
    };
    print_advice(&Advice {
        target: &target.describe(),
        start: start.as_deref(),
        trace: &trace,
        name: &name,
        card: &card,
        rec: &rec,
        top: args.top,
        best_attempt: best_attempt.as_ref().map(|(s, o)| (s.as_str(), o)),
    });
    Ok(())
}

/// The setting that got furthest, and where it ran out.
fn best_attempt(
    trace: &vramlab_traces::Trace,
    grid: &[vramlab_replay::GridEntry],
    rec: &Recommendation,
    capacity: u64,
    rows: &[vramlab_replay::SweepRow],
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
    let run = g.scenario(Some(capacity)).run(trace, &opts).ok()?;
    Some((w.row.setting.clone(), run.oom?))
}
