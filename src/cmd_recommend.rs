//! `vramlab recommend`: rank settings for a card and say what to export —
//! or that the defaults are fine.

use anyhow::{Result, bail};
use clap::Args;
use vramlab_replay::analysis::recommend::{Ranked, RecommendRequest, Recommendation, Verdict, recommend_trace};

use crate::cmd_sweep::{GridArgs, oom_cell};
use crate::common::{DeviceArgs, StartArgs, TraceArgs};
use crate::table::{Table, bytes, count, percent};

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
    let trace = args.trace.load(args.grid.torch_version)?;
    let name = crate::common::display_name(&args.trace.trace, &trace);
    let target = args.grid.target(&trace);
    let grid = args.grid.entries(&target)?;
    let pb = crate::cmd_sweep::progress_bar(grid.len() as u64, false);
    let (rows, rec) = recommend_trace(
        &RecommendRequest {
            name: &name,
            trace: &trace,
            grid: &grid,
            capacity: Some(capacity),
            target: &target,
            start: args.start.start,
        },
        &|| pb.inc(1),
    )
    .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    pb.finish_and_clear();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rec)?);
        return Ok(());
    }
    outln!("{}", target.describe());
    if let (Some(r), true) = (rows.first(), trace.initial.is_some()) {
        outln!(
            "start: {}",
            vramlab_replay::describe_start(&trace, r.start.parse().ok())
        );
    }
    let card = args.device.describe().unwrap_or_else(|| bytes(capacity));
    print_recommendation(&name, &card, &rec, args.top);
    if rec.verdict == Verdict::NothingFits {
        show_code_of_best_attempt(&trace, &grid, &rec, capacity, &rows);
    }
    Ok(())
}

/// Where the setting that got furthest ran out, in the user's code.
fn show_code_of_best_attempt(
    trace: &vramlab_traces::Trace,
    grid: &[vramlab_replay::analysis::grid::GridEntry],
    rec: &Recommendation,
    capacity: u64,
    rows: &[vramlab_replay::analysis::sweep::SweepRow],
) {
    let Some(w) = rec.ranked.first() else { return };
    let Some(g) = grid.iter().find(|g| g.to_line() == w.row.grid_line) else {
        return;
    };
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
    if let Ok(run) = g.scenario(Some(capacity)).run(trace, &opts) {
        if let Some(o) = &run.oom {
            outln!();
            outln!("where {} runs out:", w.row.setting);
            crate::oom_code::print_code(trace, o, "  ");
        }
    }
}

fn ranked_row(tab: &mut Table, r: &Ranked) {
    tab.row(vec![
        r.rank.to_string(),
        r.row.setting.clone(),
        if r.row.fits() {
            bytes(r.row.peak_reserved_bytes)
        } else {
            format!("OOM {}", oom_cell(&r.row))
        },
        if r.row.fits() {
            bytes(r.headroom_bytes.max(0) as u64)
        } else {
            "-".into()
        },
        bytes(r.row.waste_at_peak_bytes),
        percent(r.row.utilization),
        count(r.row.num_device_alloc + r.row.num_device_free),
        count(r.row.num_sync_all_streams),
    ]);
}

/// Prints a recommendation for people: the verdict first, then the table.
pub fn print_recommendation(trace: &str, card: &str, rec: &Recommendation, top: usize) {
    let Some(first) = rec.ranked.first() else {
        outln!("nothing to recommend");
        return;
    };
    outln!(
        "{trace} on {card} ({} events, peak live {})",
        count(first.row.events),
        bytes(first.row.peak_requested_bytes)
    );
    outln!();
    outln!("{}", rec.why);
    outln!();
    if rec.verdict == Verdict::UseSetting {
        for (shell, line) in &rec.export {
            outln!("  {shell:<11} {line}");
        }
        if let Some(p) = &rec.python {
            outln!("  {:<11} {p}", "Python");
        }
        outln!();
    }
    let mut tab = Table::new(vec![
        "#".into(),
        "setting".into(),
        "peak reserved".into(),
        "headroom".into(),
        "waste at peak".into(),
        "utilization".into(),
        "device calls".into(),
        "flushes".into(),
    ])
    .left(1);
    for r in rec.ranked.iter().take(top) {
        ranked_row(&mut tab, r);
    }
    let baseline = rec.ranked.iter().find(|r| r.row.grid_line == "default");
    if let Some(b) = baseline.filter(|b| b.rank as usize > top) {
        ranked_row(&mut tab, b);
    }
    out!("{}", tab.render());
    outln!(
        "(waste at peak: reserved but unallocated memory when reserved memory peaks; advice for PyTorch {})",
        rec.torch
    );
    if !rec.other_policies.is_empty() {
        outln!();
        outln!("other allocator designs on the same trace (not PyTorch settings):");
        for r in &rec.other_policies {
            outln!(
                "  {:<28} {}",
                r.row.setting,
                if r.row.fits() {
                    format!("peak reserved {}", bytes(r.row.peak_reserved_bytes))
                } else {
                    format!("OOM {}", oom_cell(&r.row))
                }
            );
        }
    }
}
