//! `vramlab sweep`, `vramlab oom-point` and `vramlab recommend`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_sim::Start;
use vramlab_sim::grid::{GridEntry, default_grid, parse_grid, parse_grid_line};
use vramlab_sim::oom_point::find_oom_point;
use vramlab_sim::recommend::recommend;
use vramlab_sim::sweep::{CSV_HEADER, Shard, SweepRow, merge_rows, read_rows_csv, run_sweep};
use vramlab_traces::Trace;

use crate::common::parse_size_arg;
use crate::table::{Table, bytes, count, percent};

/// Where a grid comes from.
#[derive(Debug, Clone, Args)]
pub struct GridArgs {
    /// `default` (the built-in grid of 44 settings) or a grid file (one
    /// setting per line; `fraction=F` and `policy=NAME` prefixes allowed).
    #[arg(long, value_name = "default|FILE", default_value = "default")]
    pub grid: String,
    /// Extra settings to add to the grid (same syntax as a grid line).
    #[arg(long = "conf", value_name = "STR")]
    pub extra: Vec<String>,
    /// PyTorch release whose rules apply.
    #[arg(long = "torch-version", value_name = "X.Y", default_value_t = TorchVersion::NEWEST)]
    pub torch_version: TorchVersion,
}

impl GridArgs {
    /// The grid entries.
    pub fn entries(&self) -> Result<Vec<GridEntry>> {
        let v = self.torch_version;
        let mut g = if self.grid == "default" {
            default_grid(v)
        } else {
            let text = std::fs::read_to_string(&self.grid)
                .with_context(|| format!("cannot read grid file {}", self.grid))?;
            parse_grid(&text, v).map_err(|e| anyhow::anyhow!("{}: {e}", self.grid))?
        };
        for e in &self.extra {
            g.push(parse_grid_line(e, v).map_err(|m| anyhow::anyhow!("--conf {e:?}: {m}"))?);
        }
        Ok(g)
    }
}

/// Loads traces named on the command line: every device of each file (or
/// only `device`), skipping devices without events and those that cannot
/// be read (each named in a note).
pub fn load_all(
    paths: &[PathBuf],
    version: TorchVersion,
    device: Option<u32>,
) -> Result<Vec<(String, Trace)>> {
    let mut out = Vec::new();
    for p in paths {
        let loaded = crate::progress::load_devices(p, None, version)?;
        let file = p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().to_string(),
        );
        if let Some((d, e)) = loaded.failed.iter().find(|(d, _)| device == Some(*d)) {
            bail!("{file}: device {d}: {e}");
        }
        if loaded.traces.is_empty() {
            if let Some((_, e)) = loaded.failed.first() {
                bail!("{e}");
            }
        }
        if device.is_none() {
            for (d, e) in &loaded.failed {
                eprintln!("note: {file}: device {d} skipped: {e}");
            }
        }
        for t in loaded.traces {
            if device.is_some_and(|d| d != t.header.device) {
                continue;
            }
            let mut name = file.clone();
            if t.header.device != 0 {
                name.push_str(&format!("#{}", t.header.device));
            }
            if t.events.is_empty() {
                eprintln!("note: {name}: no events, skipped");
                continue;
            }
            out.push((name, t));
        }
    }
    if out.is_empty() {
        bail!(
            "no traces with events to sweep{}",
            device.map_or(String::new(), |d| format!(" on device {d}"))
        );
    }
    Ok(out)
}

/// Arguments of `vramlab sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Traces to sweep.
    #[arg(value_name = "TRACE", required_unless_present = "merge")]
    traces: Vec<PathBuf>,
    #[command(flatten)]
    grid: GridArgs,
    /// Device capacity (default unlimited).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    capacity: Option<u64>,
    /// Only this GPU of multi-device snapshots (default: every device).
    #[arg(long = "trace-device", value_name = "N")]
    device: Option<u32>,
    #[command(flatten)]
    start: crate::common::StartArgs,
    /// Run only shard K of N (1-based): pairs are dealt round-robin, so a
    /// job array of N tasks covers the sweep; join the CSVs with --merge.
    #[arg(long, value_name = "K/N")]
    shard: Option<Shard>,
    /// Write rows as CSV (pandas: pd.read_csv).
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write rows as JSON (pandas: pd.read_json).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Merge shard CSV files into one (instead of sweeping).
    #[arg(long, value_name = "CSV", num_args = 1.., conflicts_with = "traces")]
    merge: Vec<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

fn write_outputs(rows: &[SweepRow], csv: Option<&Path>, json: Option<&Path>) -> Result<()> {
    if let Some(p) = csv {
        let mut s = String::from(CSV_HEADER);
        s.push('\n');
        for r in rows {
            s.push_str(&r.to_csv());
            s.push('\n');
        }
        std::fs::write(p, s).with_context(|| format!("cannot write {}", p.display()))?;
        eprintln!("wrote {} ({} rows)", p.display(), rows.len());
    }
    if let Some(p) = json {
        std::fs::write(p, serde_json::to_string_pretty(rows)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        eprintln!("wrote {} ({} rows)", p.display(), rows.len());
    }
    Ok(())
}

fn progress_bar(total: u64, quiet: bool) -> indicatif::ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(total);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} replays  {elapsed_precise} (eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb
}

/// Runs the grid over the traces with a progress bar.
pub fn sweep_rows(
    traces: &[(String, Trace)],
    grid: &[GridEntry],
    capacity: Option<u64>,
    shard: Option<Shard>,
    start: Option<Start>,
    quiet: bool,
) -> Result<Vec<SweepRow>> {
    let total = (traces.len() * grid.len()) as u64;
    let total = shard.map_or(total, |s| total.div_ceil(s.n as u64));
    let pb = progress_bar(total, quiet);
    let tick = || pb.inc(1);
    let rows = run_sweep(traces, grid, capacity, shard, start, &tick)
        .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    pb.finish_and_clear();
    Ok(rows)
}

/// Runs `sweep`.
pub fn run(args: SweepArgs) -> Result<()> {
    if let Some(n) = args.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build_global()
            .ok();
    }
    let rows = if !args.merge.is_empty() {
        let mut all = Vec::new();
        for p in &args.merge {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            all.extend(read_rows_csv(&text, &p.display().to_string()).map_err(anyhow::Error::msg)?);
        }
        merge_rows(all).map_err(anyhow::Error::msg)?
    } else {
        let traces = load_all(&args.traces, args.grid.torch_version, args.device)?;
        let grid = args.grid.entries()?;
        let t0 = std::time::Instant::now();
        let rows = sweep_rows(
            &traces,
            &grid,
            args.capacity,
            args.shard,
            args.start.start,
            args.quiet,
        )?;
        eprintln!(
            "{} replays ({} traces x {} settings{}) in {:.2} s",
            rows.len(),
            traces.len(),
            grid.len(),
            args.shard
                .map_or(String::new(), |s| format!(", shard {}/{}", s.k, s.n)),
            t0.elapsed().as_secs_f64()
        );
        rows
    };
    write_outputs(&rows, args.csv.as_deref(), args.json.as_deref())?;
    print_sweep(&rows);
    Ok(())
}

fn print_sweep(rows: &[SweepRow]) {
    let mut traces: Vec<&str> = rows.iter().map(|r| r.trace.as_str()).collect();
    traces.dedup();
    for t in traces {
        let mut mine: Vec<&SweepRow> = rows.iter().filter(|r| r.trace == t).collect();
        mine.sort_by_key(|r| (!r.fits(), r.peak_reserved_bytes, r.index));
        let Some(first) = mine.first() else { continue };
        outln!(
            "{t}: {} events, peak live {}{}",
            count(first.events),
            bytes(first.peak_requested_bytes),
            if first.capacity > 0 {
                format!(", capacity {}", bytes(first.capacity))
            } else {
                String::new()
            }
        );
        let mut tab = Table::new(vec![
            "setting".into(),
            "peak reserved".into(),
            "waste at peak".into(),
            "utilization".into(),
            "device calls".into(),
            "flushes".into(),
            "OOM".into(),
        ]);
        for r in mine {
            tab.row(vec![
                r.setting.clone(),
                bytes(r.peak_reserved_bytes),
                bytes(r.waste_at_peak_bytes),
                percent(r.utilization),
                count(r.num_device_alloc + r.num_device_free),
                count(r.num_sync_all_streams),
                oom_cell(r),
            ]);
        }
        out!("{}", tab.render());
        outln!();
    }
}

/// Where a row's first OOM happened, for tables.
pub fn oom_cell(r: &SweepRow) -> String {
    if r.fits() {
        "-".into()
    } else if r.oom_at_start {
        "at the start".into()
    } else {
        format!("event {}", count(r.oom_event as u64))
    }
}

/// Arguments of `vramlab oom-point`.
#[derive(Debug, Args)]
pub struct OomPointArgs {
    #[command(flatten)]
    trace: crate::common::TraceArgs,
    #[command(flatten)]
    conf: crate::common::ConfArgs,
    #[command(flatten)]
    start: crate::common::StartArgs,
    /// Instead of searching: replay on this capacity and show the first
    /// failing allocation and the allocator's state there.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    capacity: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `oom-point`.
pub fn run_oom_point(args: OomPointArgs) -> Result<()> {
    let trace = args.trace.load(args.conf.torch_version)?;
    let dev = crate::common::DeviceArgs {
        capacity: args.capacity,
    };
    let scenarios = crate::common::scenarios(&args.conf, &dev, &trace)?;
    // Capacities are what-ifs: a mid-run trace starts fresh unless told.
    let start = vramlab_sim::choose_start(&trace, args.start.start, false);
    if trace.initial.is_some() {
        eprintln!("start: {}", vramlab_sim::describe_start(&trace, start));
    }
    if let Some(cap) = args.capacity {
        return crate::cmd_oom_state::show_oom_state(
            &trace,
            &scenarios,
            cap,
            start.unwrap_or_default(),
            args.json,
        );
    }
    let mut results = Vec::new();
    for s in &scenarios {
        results.push(
            find_oom_point(&trace, s, start.unwrap_or_default())
                .with_context(|| format!("searching under {}", s.label()))?,
        );
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(());
    }
    let mut tab = Table::new(vec![
        "setting".into(),
        "smallest capacity".into(),
        "live peak (bound)".into(),
        "reserved, unlimited".into(),
        "checked".into(),
        "replays".into(),
    ]);
    for r in &results {
        tab.row(vec![
            r.setting.clone(),
            bytes(r.min_capacity),
            bytes(r.lower_bound),
            bytes(r.unlimited_peak_reserved),
            if r.verified {
                "yes".into()
            } else {
                "NO".into()
            },
            r.replays.to_string(),
        ]);
    }
    out!("{}", tab.render());
    for r in &results {
        if let Some(b) = r.start_reserved_bytes {
            outln!(
                "\nunder {}, the state at the first entry alone reserves {} ({} start)",
                r.setting,
                bytes(b),
                r.start.map_or("empty", |s| s.name())
            );
        }
    }
    for r in &results {
        if !r.not_monotone_at.is_empty() {
            let list: Vec<String> = r.not_monotone_at.iter().map(|&c| bytes(c)).collect();
            outln!(
                "\nnote: under {}, feasibility is not monotone: it fits {} but not {} (less memory changes which blocks are cached and released)",
                r.setting,
                bytes(r.min_capacity),
                list.join(", ")
            );
        }
    }
    Ok(())
}

/// Arguments of `vramlab recommend`.
#[derive(Debug, Args)]
pub struct RecommendArgs {
    /// Trace to recommend settings for.
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// The GPU memory the job may use.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    capacity: u64,
    #[command(flatten)]
    grid: GridArgs,
    /// Which GPU of a multi-device snapshot (default: the device with the
    /// most allocations, named in a note).
    #[arg(long = "trace-device", value_name = "N")]
    device: Option<u32>,
    #[command(flatten)]
    start: crate::common::StartArgs,
    /// How many ranked settings to show.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `recommend`.
pub fn run_recommend(args: RecommendArgs) -> Result<()> {
    let trace = crate::common::TraceArgs {
        trace: args.trace.clone(),
        format: None,
        device: args.device,
    }
    .load(args.grid.torch_version)?;
    let name = crate::common::display_name(&args.trace, &trace);
    let traces = vec![(name.clone(), trace)];
    let grid = args.grid.entries()?;
    let rows = sweep_rows(
        &traces,
        &grid,
        Some(args.capacity),
        None,
        args.start.start,
        false,
    )?;
    let [(_, trace)] = traces.as_slice() else {
        bail!("internal error: one trace expected");
    };
    let peak_live = vramlab_traces::summary::TraceSummary::of(trace).peak_live_bytes;
    let rec = recommend(&rows, args.capacity, peak_live, args.grid.torch_version);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rec)?);
        return Ok(());
    }
    if let Some(r) = rows.first() {
        if trace.initial.is_some() {
            outln!(
                "start: {}",
                vramlab_sim::describe_start(trace, r.start.parse().ok())
            );
        }
    }
    print_recommendation(&name, args.capacity, &rec, args.top);
    Ok(())
}

/// Prints a recommendation for people.
pub fn print_recommendation(
    trace: &str,
    capacity: u64,
    rec: &vramlab_sim::recommend::Recommendation,
    top: usize,
) {
    let Some(first) = rec.ranked.first() else {
        outln!("nothing to recommend");
        return;
    };
    outln!(
        "{trace} on {} ({} events, peak live {})",
        bytes(capacity),
        count(first.row.events),
        bytes(first.row.peak_requested_bytes)
    );
    outln!();
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
    let row = |tab: &mut Table, r: &vramlab_sim::recommend::Ranked| {
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
    };
    for r in rec.ranked.iter().take(top) {
        row(&mut tab, r);
    }
    let baseline = rec.ranked.iter().find(|r| r.row.grid_line == "default");
    if let Some(b) = baseline.filter(|b| b.rank as usize > top) {
        row(&mut tab, b);
    }
    out!("{}", tab.render());
    outln!();
    outln!("{}", rec.why);
    if !rec.export.is_empty() {
        outln!();
        for (shell, line) in &rec.export {
            outln!("  {shell:<11} {line}");
        }
    }
    if let Some(p) = &rec.python {
        outln!("  {:<11} {p}", "Python");
    }
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
