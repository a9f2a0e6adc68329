//! `vramlab report` (plots and an HTML page for one trace) and `vramlab
//! demo` (recommend + report on a bundled recorded trace).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::analysis::grid::GridEntry;
use vramlab_replay::analysis::oom_point::find_oom_point;
use vramlab_replay::analysis::recommend::{
    RecommendRequest, Recommendation, Verdict, recommend_trace,
};
use vramlab_replay::target::release::TorchTarget;
use vramlab_replay::{ReplayOptions, Start};
use vramlab_reports::{
    OomPointResult, Recommendation as ReportRecommendation, ReportInput, SettingResult,
    write_report,
};
use vramlab_traces::Trace;
use vramlab_traces::summary::TraceSummary;

use crate::args::GridArgs;
use crate::args::{DeviceArgs, StartArgs, TraceArgs};
use crate::render::recommendation::print_recommendation;

/// Arguments of `vramlab report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Folder to write index.html and the plots into.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The card (--gpu NAME) or memory (--capacity SIZE) the job may use
    /// (default: unlimited; then settings are ranked by peak reserved alone).
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    grid: GridArgs,
    /// How many settings get plots of their own (the best ones, plus the
    /// defaults).
    #[arg(long, default_value_t = 5)]
    plots: usize,
    #[command(flatten)]
    start: StartArgs,
}

/// Everything `report` computed, for printing.
pub struct Built {
    /// The ranking.
    pub rec: Recommendation,
    /// Where index.html went.
    pub index: PathBuf,
}

/// Sweeps, ranks, replays the chosen settings in detail, finds their OOM
/// points and writes the report.
/// What a report covers.
pub struct ReportRequest<'a> {
    /// The trace's name in titles and tables.
    pub name: &'a str,
    /// The trace.
    pub trace: &'a Trace,
    /// The GPU memory the job may use.
    pub capacity: Option<u64>,
    /// Settings to sweep.
    pub grid: &'a [GridEntry],
    /// How many settings get plots of their own.
    pub plots: usize,
    /// The PyTorch release(s) the advice is for.
    pub target: &'a TorchTarget,
    /// The user's start for a trace recorded mid-run.
    pub start: Option<Start>,
    /// Output folder.
    pub out: &'a Path,
}

pub fn build_report(req: &ReportRequest<'_>) -> Result<Built> {
    let ReportRequest {
        name,
        trace,
        capacity,
        grid,
        plots,
        target,
        start,
        out,
    } = *req;
    let pb = crate::progress::replay_count_bar(grid.len() as u64, false);
    let (rows, rec) = recommend_trace(
        &RecommendRequest {
            name,
            trace,
            grid,
            capacity,
            target,
            start,
        },
        &|| pb.inc(1),
    )
    .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    pb.finish_and_clear();
    let scenarios: Vec<_> = grid.iter().map(|g| g.scenario(capacity)).collect();
    let start = vramlab_replay::start_for(trace, &scenarios, start);
    // The defaults, then the best-ranked settings.
    let mut chosen: Vec<&GridEntry> = Vec::new();
    if let Some(d) = grid.iter().find(|g| g.to_line() == "default") {
        chosen.push(d);
    }
    for r in &rec.ranked {
        if chosen.len() > plots {
            break;
        }
        if let Some(g) = grid.iter().find(|g| g.to_line() == r.row.grid_line) {
            if !chosen.contains(&g) {
                chosen.push(g);
            }
        }
    }
    let opts = ReplayOptions {
        check_invariants: false,
        segments_at_peak: true,
        timeline_points: 600,
        start: start.unwrap_or_default(),
        ..Default::default()
    };
    let mut settings = Vec::new();
    let mut oom_points = Vec::new();
    for g in &chosen {
        let s = g.scenario(capacity);
        let run = s
            .run(trace, &opts)
            .with_context(|| format!("replaying under {}", g.label()))?;
        let p = find_oom_point(trace, &s, start.unwrap_or_default())
            .with_context(|| format!("OOM point under {}", g.label()))?;
        settings
            .push(SettingResult::from_run(g.label(), &run).with_min_capacity(Some(p.min_capacity)));
        oom_points.push(OomPointResult {
            label: g.label(),
            min_capacity: p.min_capacity,
            lower_bound: p.lower_bound,
        });
    }
    let recommendation = match (rec.verdict, rec.ranked.first()) {
        (Verdict::UseSetting, Some(w)) => Some(ReportRecommendation {
            setting: w.row.setting.clone(),
            reason: rec.why.clone(),
            export_lines: rec
                .export
                .iter()
                .map(|(shell, line)| format!("{line}    # {shell}"))
                .collect(),
        }),
        (Verdict::DefaultsAreFine, _) => Some(ReportRecommendation {
            setting: "PyTorch's defaults (change nothing)".into(),
            reason: rec.why.clone(),
            export_lines: Vec::new(),
        }),
        _ => None,
    };
    let mut notes: Vec<String> = trace.notes.clone();
    if trace.initial.is_some() {
        notes.push(format!(
            "The recording starts mid-run; every replay starts {}.",
            vramlab_replay::describe_start(trace, start)
        ));
    }
    notes.push(format!("Advice for {}.", target.describe()));
    notes.push(format!(
        "{} settings were replayed; the table ranks {} of them. Full results: `vramlab sweep {} --gpu … --csv rows.csv`.",
        rows.len(),
        settings.len(),
        name
    ));
    let input = ReportInput {
        title: format!("vramlab report: {name}"),
        trace: name.to_string(),
        capacity,
        settings,
        oom_points,
        fit: None,
        recommendation,
        notes,
    };
    let index =
        write_report(out, &input).map_err(|e| anyhow::anyhow!("writing the report: {e}"))?;
    Ok(Built { rec, index })
}

/// Runs `report`.
pub fn run(args: ReportArgs) -> Result<()> {
    // A report is about one device: the one asked for, or the one with the
    // most allocations (named in a note).
    let trace = args.trace.load_any(args.grid.torch_version)?;
    let name = crate::inputs::display_name(&args.trace.trace, &trace);
    if trace.events.is_empty() {
        let index = state_report(&name, &trace, &args.out)?;
        outln!("report of the allocator state: {}", index.display());
        return Ok(());
    }
    let target = args.grid.target(&trace);
    let grid = args.grid.entries(&target)?;
    let built = build_report(&ReportRequest {
        name: &name,
        trace: &trace,
        capacity: args.device.bytes(),
        grid: &grid,
        plots: args.plots,
        target: &target,
        start: args.start.start,
        out: &args.out,
    })?;
    if let Some(card) = args.device.describe() {
        print_recommendation(&name, &card, &built.rec, 5);
    }
    outln!("\nreport: {}", built.index.display());
    Ok(())
}

/// A report of a snapshot without history (`torch.cuda.memory_snapshot()`'s
/// segment list, or `enabled="state"`): the recorded state's numbers and
/// segment map; there is nothing to replay or compare.
fn state_report(name: &str, trace: &Trace, out: &Path) -> Result<PathBuf> {
    let Some(init) = trace.initial.as_ref() else {
        anyhow::bail!("{name}: the snapshot holds neither events nor segments: nothing to report");
    };
    if let Some(e) = &init.layout_error {
        anyhow::bail!("{name}: the allocator state could not be laid out: {e}");
    }
    let opts = ReplayOptions {
        check_invariants: false,
        segments_at_peak: true,
        start: Start::Recorded,
        ..Default::default()
    };
    let run =
        vramlab_replay::Scenario::native(vramlab_allocator::AllocConf::new(TorchVersion::NEWEST))
            .run(trace, &opts)
            .with_context(|| format!("laying out the state of {name}"))?;
    let st = TraceSummary::of(trace).initial_state.unwrap_or_default();
    let mut notes = trace.notes.clone();
    notes.push(format!(
        "The snapshot holds the allocator state only: {} segments, {} reserved, {} allocated, {} reserved but unallocated, largest free block {}.",
        st.segments,
        crate::render::table::bytes(st.reserved_bytes),
        crate::render::table::bytes(st.allocated_bytes),
        crate::render::table::bytes(st.waste_bytes),
        crate::render::table::bytes(st.largest_free_block)
    ));
    let input = ReportInput {
        title: format!("vramlab report: {name} (allocator state)"),
        trace: name.to_string(),
        capacity: None,
        settings: vec![SettingResult::from_run("recorded state", &run)],
        oom_points: Vec::new(),
        fit: None,
        recommendation: None,
        notes,
    };
    write_report(out, &input).map_err(|e| anyhow::anyhow!("writing the report: {e}"))
}
