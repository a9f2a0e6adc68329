//! `vramlab bench`: every policy on the bundled traces — memory and replay
//! speed — as a table, CSV, Markdown (for BENCHMARKS.md) and plots.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use vramlab_replay::analysis::bench::bench;
use vramlab_replay::analysis::gate::bench_grid;

use crate::render::table::{Table, bytes, count, percent};

/// Arguments of `vramlab bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Folder of traces.
    #[arg(long, value_name = "DIR", default_value = "traces/data")]
    traces: PathBuf,
    /// Repeat each trace until it has at least this many events, for stable
    /// throughput figures.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    min_events: usize,
    /// Timed repetitions per pair (the fastest counts).
    #[arg(long, value_name = "N", default_value_t = 3)]
    repeat: u32,
    /// Write the rows as CSV.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write a Markdown table (for BENCHMARKS.md).
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Draw, per trace, peak reserved of every policy against the
    /// live-bytes bound into this folder (`TRACE-policies.png/.svg`).
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
}

/// Runs `bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    let traces = crate::inputs::folder(&args.traces)?;
    let rows = bench(&traces, &bench_grid(), args.min_events, args.repeat)
        .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    let mut tab = Table::new(vec![
        "trace".into(),
        "policy / setting".into(),
        "peak reserved".into(),
        "live bound".into(),
        "over bound".into(),
        "utilization".into(),
        "device calls".into(),
        "events/s".into(),
    ])
    .left(1);
    let mut md = String::from(
        "| trace | policy / setting | peak reserved | live-bytes bound | over bound | utilization | device calls | replay events/s |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut csv = String::from(
        "trace,setting,events,peak_requested_bytes,peak_reserved_bytes,utilization,num_device_alloc,num_device_free,events_per_second\n",
    );
    for r in &rows {
        let s = &r.summary;
        let over = s.peak_reserved_bytes as f64 / s.peak_requested_bytes.max(1) as f64 - 1.0;
        let calls = s.num_device_alloc + s.num_device_free;
        tab.row(vec![
            r.trace.clone(),
            r.setting.clone(),
            bytes(s.peak_reserved_bytes),
            bytes(s.peak_requested_bytes),
            percent(over),
            percent(s.utilization),
            count(calls),
            format!("{:.1} M", r.events_per_second / 1e6),
        ]);
        md.push_str(&format!(
            "| {} | {} | {} | {} | +{} | {} | {} | {:.1} M |\n",
            r.trace,
            r.setting.replace('|', "\\|"),
            bytes(s.peak_reserved_bytes),
            bytes(s.peak_requested_bytes),
            percent(over),
            percent(s.utilization),
            count(calls),
            r.events_per_second / 1e6
        ));
        csv.push_str(&format!(
            "{},{},{},{},{},{:.6},{},{},{:.0}\n",
            crate::render::replay::csv_quote(&r.trace),
            crate::render::replay::csv_quote(&r.setting),
            r.events,
            s.peak_requested_bytes,
            s.peak_reserved_bytes,
            s.utilization,
            s.num_device_alloc,
            s.num_device_free,
            r.events_per_second
        ));
    }
    out!("{}", tab.render());
    if let Some(dir) = &args.plots {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, _) in &traces {
            let results: Vec<vramlab_reports::SettingResult> = rows
                .iter()
                .filter(|r| &r.trace == name)
                .map(|r| vramlab_reports::SettingResult::new(r.setting.clone(), r.summary.clone()))
                .collect();
            let stem = name
                .trim_end_matches(".gz")
                .trim_end_matches(".csv")
                .trim_end_matches(".zst")
                .trim_end_matches(".vlt");
            let base = dir.join(format!("{stem}-policies"));
            vramlab_reports::plot_peak_reserved(&base, &results, None)
                .map_err(|e| anyhow::anyhow!("plotting {name}: {e}"))?;
        }
        errln!("wrote plots to {}", dir.display());
    }
    if let Some(p) = &args.csv {
        std::fs::write(p, &csv).with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {}", p.display());
    }
    if let Some(p) = &args.markdown {
        std::fs::write(p, &md).with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {}", p.display());
    }
    Ok(())
}
