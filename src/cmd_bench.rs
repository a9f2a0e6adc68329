//! `vramlab bench` (policy comparison with throughput, for BENCHMARKS.md)
//! and `vramlab bench-check` (the deterministic regression gate).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::analysis::fidelity::check_fidelity;
use vramlab_replay::analysis::gate::{Baseline, Finding, GateFidelity, GateMetrics, compare};
use vramlab_replay::analysis::grid::{GridEntry, parse_grid_line};
use vramlab_replay::io::load::{load_traces, recorded_conf};
use vramlab_replay::{ReplayOptions, Summary};
use vramlab_traces::Trace;

use crate::table::{Table, bytes, count, percent};

/// The settings the gate and the benchmark table cover: PyTorch's defaults
/// and its most used alternatives, and every other policy.
pub const BENCH_SETTINGS: &[&str] = &[
    "default",
    "expandable_segments:True",
    "max_split_size_mb:128",
    "roundup_power2_divisions:4",
    "policy=direct",
    "policy=bfc allow_growth:true",
    "policy=async",
    "policy=stitch",
];

fn bench_grid() -> Result<Vec<GridEntry>> {
    BENCH_SETTINGS
        .iter()
        .map(|l| parse_grid_line(l, TorchVersion::NEWEST).map_err(anyhow::Error::msg))
        .collect()
}

/// The trace files in `dir` (csv, csv.gz, vlt, vlt.zst, pickle), sorted by name.
pub fn trace_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| vramlab_traces::io::Format::from_path(p).is_some())
        .collect();
    v.sort();
    if v.is_empty() {
        bail!("no traces in {}", dir.display());
    }
    Ok(v)
}

fn load_dir(dir: &Path) -> Result<Vec<(String, Trace)>> {
    let mut out = Vec::new();
    for p in trace_files(dir)? {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        for t in load_traces(&p, None, TorchVersion::NEWEST)? {
            if t.events.is_empty() {
                continue;
            }
            let mut n = name.clone();
            if t.header.device != 0 {
                n.push_str(&format!("#{}", t.header.device));
            }
            out.push((n, t));
        }
    }
    Ok(out)
}

/// Arguments of `vramlab bench-check`.
#[derive(Debug, Args)]
pub struct BenchCheckArgs {
    /// The committed baseline (JSON).
    #[arg(value_name = "BASELINE.json")]
    baseline: PathBuf,
    /// Write the baseline from this build instead of checking against it.
    #[arg(long)]
    write: bool,
    /// Folder of traces to replay.
    #[arg(long, value_name = "DIR", default_value = "traces/data")]
    traces: PathBuf,
    /// Folder of real PyTorch snapshots for the fidelity part (skipped, with
    /// a note, when it does not exist).
    #[arg(long, value_name = "DIR", default_value = "../shared/traces/real")]
    snapshots: PathBuf,
}

fn measure(args: &BenchCheckArgs) -> Result<(Baseline, Vec<String>)> {
    let traces = load_dir(&args.traces)?;
    let grid = bench_grid()?;
    let mut b = Baseline {
        command: "vramlab bench-check BASELINE.json --write".into(),
        ..Default::default()
    };
    let rows = vramlab_replay::analysis::sweep::run_sweep(&traces, &grid, None, None, None, &|| {})
        .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    for r in &rows {
        b.replays.insert(
            format!("{} / {}", r.trace, r.setting),
            GateMetrics {
                peak_reserved_bytes: r.peak_reserved_bytes,
                num_device_alloc: r.num_device_alloc,
                num_device_free: r.num_device_free,
                oom_event: r.oom_event,
            },
        );
    }
    // The advice's words must follow its numbers, on every trace.
    let mut word_problems = Vec::new();
    for (name, t) in &traces {
        let mine: Vec<_> = rows.iter().filter(|r| &r.trace == name).cloned().collect();
        let peak_live = vramlab_traces::summary::TraceSummary::of(t).peak_live_bytes;
        let target = vramlab_replay::target::release::target_of(t, None);
        if let Err(e) = vramlab_replay::analysis::recommend::check_advice_words(&mine, peak_live, &target) {
            word_problems.push(format!("{name}: {e}"));
        }
    }
    let mut real: Vec<(String, Trace)> = Vec::new();
    if args.snapshots.is_dir() {
        let mut snaps: Vec<PathBuf> = std::fs::read_dir(&args.snapshots)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
            .collect();
        snaps.sort();
        for p in snaps {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            for t in load_traces(&p, None, None)? {
                let conf = recorded_conf(&t, TorchVersion::NEWEST)
                    .map_err(anyhow::Error::msg)?
                    .unwrap_or_default();
                let r = check_fidelity(&t, conf)?;
                real.push((format!("{name}#{}", t.header.device), t.clone()));
                b.fidelity.insert(
                    format!("{name}#{}", t.header.device),
                    GateFidelity {
                        allocs: r.allocs,
                        alloc_addresses_matched: r.alloc_addresses_matched,
                        segment_events_expected: r.segment_events_expected,
                        segment_events_matched: r.segment_events_matched,
                    },
                );
            }
        }
    } else {
        eprintln!(
            "note: {} not found: the fidelity part is skipped",
            args.snapshots.display()
        );
    }
    // The advice on the real snapshots too (not part of the baseline).
    let rows = vramlab_replay::analysis::sweep::run_sweep(&real, &grid, None, None, None, &|| {})
        .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    for (name, t) in &real {
        let mine: Vec<_> = rows.iter().filter(|r| &r.trace == name).cloned().collect();
        let peak_live = vramlab_traces::summary::TraceSummary::of(t).peak_live_bytes;
        let target = vramlab_replay::target::release::target_of(t, None);
        if let Err(e) = vramlab_replay::analysis::recommend::check_advice_words(&mine, peak_live, &target) {
            word_problems.push(format!("{name}: {e}"));
        }
    }
    Ok((b, word_problems))
}

/// Runs `bench-check`: exit 1 on any regression or missing entry.
pub fn run_check(args: BenchCheckArgs) -> Result<()> {
    let (now, word_problems) = measure(&args)?;
    if args.write {
        std::fs::write(&args.baseline, serde_json::to_string_pretty(&now)? + "\n")
            .with_context(|| format!("cannot write {}", args.baseline.display()))?;
        eprintln!(
            "wrote {} ({} replays, {} fidelity checks)",
            args.baseline.display(),
            now.replays.len(),
            now.fidelity.len()
        );
        return Ok(());
    }
    let text = std::fs::read_to_string(&args.baseline)
        .with_context(|| format!("cannot read the baseline {}", args.baseline.display()))?;
    let base: Baseline = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a vramlab baseline", args.baseline.display()))?;
    let findings = compare(&base, &now);
    let mut failed = !word_problems.is_empty();
    for w in &word_problems {
        outln!("WORDS       {w}");
    }
    for f in &findings {
        match f {
            Finding::Regression(m) => {
                failed = true;
                outln!("REGRESSION  {m}");
            }
            Finding::Missing(m) => {
                failed = true;
                outln!("MISSING     {m}");
            }
            Finding::Improvement(m) => outln!("improved    {m}"),
        }
    }
    outln!(
        "bench-check: {} replays, {} fidelity checks against {}, the advice's words on every trace: {}",
        now.replays.len(),
        now.fidelity.len(),
        args.baseline.display(),
        if failed {
            "FAILED"
        } else if findings.is_empty() {
            "identical"
        } else {
            "no regressions (refresh the baseline with --write to keep the improvements)"
        }
    );
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

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

/// One row of the benchmark table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchRow {
    /// Trace.
    pub trace: String,
    /// Setting.
    pub setting: String,
    /// Events per replay.
    pub events: u64,
    /// Headline figures.
    pub summary: Summary,
    /// Replay throughput, events per second (fastest of the repetitions).
    pub events_per_second: f64,
}

fn repeated(t: &Trace, min_events: usize) -> Trace {
    use vramlab_traces::Event;
    if t.initial.is_some() || t.events.is_empty() || t.events.len() >= min_events {
        return t.clone();
    }
    let mut out = t.clone();
    out.expected = None;
    out.events.clear();
    let mut offset = 0u32;
    while out.events.len() < min_events {
        out.events.extend(t.events.iter().map(|e| match *e {
            Event::Alloc { id, stream, size } => Event::Alloc {
                id: id + offset,
                stream,
                size,
            },
            Event::Free { id } => Event::Free { id: id + offset },
            Event::FreeRequested { id } => Event::FreeRequested { id: id + offset },
            Event::FreeCompleted { id } => Event::FreeCompleted { id: id + offset },
            Event::EmptyCache => Event::EmptyCache,
        }));
        offset += t.num_ids;
    }
    out.num_ids = offset;
    out
}

/// Runs `bench`.
pub fn run_bench(args: BenchArgs) -> Result<()> {
    let traces = load_dir(&args.traces)?;
    let grid = bench_grid()?;
    // Policies are compared, so a trace recorded mid-run starts fresh
    // under each (the only start every policy can make).
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        start: vramlab_replay::Start::Fresh,
        ..Default::default()
    };
    let mut rows = Vec::new();
    for (name, t) in &traces {
        let timed_trace = repeated(&t.with_fresh_start(), args.min_events);
        for g in &grid {
            let s = g.scenario(None);
            let run = s.run(t, &opts)?;
            let mut best = f64::INFINITY;
            for _ in 0..args.repeat.max(1) {
                let t0 = Instant::now();
                let r = s.run(&timed_trace, &opts)?;
                best = best.min(t0.elapsed().as_secs_f64());
                std::hint::black_box(r.summary.peak_reserved_bytes);
            }
            rows.push(BenchRow {
                trace: name.clone(),
                setting: g.label(),
                events: run.summary.events,
                events_per_second: timed_trace.events.len() as f64 / best,
                summary: run.summary,
            });
        }
    }
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
            crate::cmd_replay::csv_quote(&r.trace),
            crate::cmd_replay::csv_quote(&r.setting),
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
        eprintln!("wrote plots to {}", dir.display());
    }
    if let Some(p) = &args.csv {
        std::fs::write(p, &csv).with_context(|| format!("cannot write {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.markdown {
        std::fs::write(p, &md).with_context(|| format!("cannot write {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}
