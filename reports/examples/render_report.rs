//! Replay a trace under a few allocator settings and write an HTML report
//! with every plot, from replay's own analyses.
//!
//!     cargo run -p vramlab-reports --example render_report -- OUT_DIR [TRACE] [CAPACITY_MIB]
//!
//! TRACE defaults to the bundled `workloads/data/gpt-small-train.csv`,
//! CAPACITY_MIB to 1024. Besides the replays at that capacity, the example
//! ranks the settings (`recommend_trace`), searches each setting's minimum
//! capacity (`find_oom_point`) and the largest synthetic batch size that
//! fits a 2 GiB card (`max_fitting_size`): every allocation that is freed
//! within the trace (activations, temporaries) is scaled by batch / 8, the
//! ones that live to the end (weights, optimizer state) are kept.

use std::error::Error;
use std::path::PathBuf;

use vramlab_replay::find_oom_point;
use vramlab_replay::max_fitting_size;
use vramlab_replay::target_of;
use vramlab_replay::{GridEntry, parse_grid_line};
use vramlab_replay::{RecommendRequest, recommend_trace};
use vramlab_replay::{ReplayOptions, Start};
use vramlab_reports::{FitChart, ReportInput, SettingRun, write_report};
use vramlab_traces::{Event, Trace};

const SETTINGS: [&str; 4] = [
    "default",
    "expandable_segments:True",
    "max_split_size_mb:128",
    "roundup_power2_divisions:4",
];

/// The trace with every allocation that is freed within it scaled by
/// `factor`.
fn scale_batch(trace: &Trace, factor: f64) -> Trace {
    let mut freed = vec![false; trace.num_ids as usize];
    for e in &trace.events {
        if let Event::Free { id } | Event::FreeRequested { id } = *e {
            if let Some(f) = freed.get_mut(id as usize) {
                *f = true;
            }
        }
    }
    let mut t = trace.clone();
    for e in &mut t.events {
        if let Event::Alloc { id, size, .. } = e {
            if freed.get(*id as usize).copied().unwrap_or(false) {
                *size = ((*size as f64 * factor).ceil() as u64).max(1);
            }
        }
    }
    t
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(
        args.next()
            .ok_or("usage: render_report OUT_DIR [TRACE] [CAPACITY_MIB]")?,
    );
    let trace_path = args.next().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv")
    });
    let capacity_mib: u64 = match args.next() {
        Some(s) => s.parse()?,
        None => 1024,
    };
    let capacity = capacity_mib << 20;
    let trace = vramlab_replay::Inputs::new([&trace_path]).trace()?;
    let name = trace_path
        .file_name()
        .map_or("trace".into(), |n| n.to_string_lossy().into_owned());
    let target = target_of(&trace, None);
    let grid = SETTINGS
        .iter()
        .map(|line| parse_grid_line(line, target.rules))
        .collect::<Result<Vec<GridEntry>, String>>()?;

    let (_, recommendation) = recommend_trace(
        &RecommendRequest {
            name: &name,
            trace: &trace,
            grid: &grid,
            capacity: Some(capacity),
            target: &target,
            start: None,
            placement: Default::default(),
        },
        &|| {},
    )
    .map_err(|(_, setting, e)| format!("{setting}: {e}"))?;

    let opts = ReplayOptions {
        segments_at_peak: true,
        check_invariants: false,
        ..ReplayOptions::default()
    };
    let mut settings = Vec::new();
    let mut oom_points = Vec::new();
    for g in &grid {
        let scenario = g.scenario(Some(capacity));
        let run = scenario.run(&trace, &opts)?;
        settings.push(SettingRun::new(g.label(), run));
        oom_points.push(find_oom_point(&trace, &scenario, Start::default())?);
    }

    let fit_capacity = 2u64 << 30;
    let make = |batch: u64| Ok(scale_batch(&trace, batch as f64 / 8.0));
    let searches = grid
        .iter()
        .map(|g| max_fitting_size(&make, &g.scenario(Some(fit_capacity)), 1, 64))
        .collect::<Result<Vec<_>, _>>()?;

    let report = ReportInput {
        title: format!("vramlab: {name}"),
        trace: trace_path.display().to_string(),
        capacity: Some(capacity),
        settings,
        oom_points,
        fit: Some(FitChart {
            dimension: "batch size".to_string(),
            capacity: Some(fit_capacity),
            size_step: 1,
            searches,
        }),
        recommendation: Some(recommendation),
        notes: vec![
            "Replayed on a simulated GPU with PyTorch's native caching allocator.".to_string(),
            "The batch-size search scales every allocation freed within the trace by batch / 8 \
             (a synthetic stand-in for re-recording the workload)."
                .to_string(),
        ],
        phases: vramlab_traces::TraceSummary::of(&trace).phases,
        pools: Vec::new(),
        explanation: None,
        explore: None,
        upgrade: None,
    };
    let index = write_report(&out, &report)?;
    println!("{}", index.display());
    Ok(())
}
