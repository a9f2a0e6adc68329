//! `vramlab bench`: every policy on the bundled traces — memory and replay
//! speed — as a table, CSV, Markdown (docs/bench/table.md) and plots.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use vramlab_replay::bench;
use vramlab_replay::gate::bench_grid;

/// Arguments of `vramlab bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Folder of traces.
    #[arg(long, value_name = "DIR", default_value = "workloads/data")]
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
    /// Write a Markdown table (docs/bench/table.md).
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
    out!("{}", crate::render::bench::bench_table(&rows));
    if let Some(dir) = &args.plots {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, _) in &traces {
            // The bars need each policy's summary only.
            let results: Vec<vramlab_reports::SettingRun> = rows
                .iter()
                .filter(|r| &r.trace == name)
                .map(|r| {
                    let run = vramlab_replay::Run {
                        summary: r.summary.clone(),
                        ..Default::default()
                    };
                    vramlab_reports::SettingRun::new(r.setting.clone(), run)
                })
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
        std::fs::write(p, crate::render::bench::bench_csv(&rows))
            .with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {}", p.display());
    }
    if let Some(p) = &args.markdown {
        std::fs::write(p, crate::render::bench::bench_markdown(&rows))
            .with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {}", p.display());
    }
    Ok(())
}
