//! `vramlab sweep`: every trace × every setting, in parallel, as rows for
//! pandas; and the grid options the sweeping commands share.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::Start;
use vramlab_replay::analysis::grid::{GridEntry, default_grid_for, parse_grid, parse_grid_line};
use vramlab_replay::target::release::{TorchTarget, target_of};
use vramlab_replay::analysis::sweep::{CSV_HEADER, Shard, SweepRow, merge_rows, read_rows_csv, run_sweep};
use vramlab_traces::Trace;

use crate::common::DeviceArgs;
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
    /// PyTorch release whose rules apply (default: the release the trace
    /// was recorded with, detected from a snapshot's keys, else 2.11).
    #[arg(long = "torch-version", value_name = "X.Y")]
    pub torch_version: Option<TorchVersion>,
}

impl GridArgs {
    /// The PyTorch release(s) that apply to `trace`.
    pub fn target(&self, trace: &Trace) -> TorchTarget {
        target_of(trace, self.torch_version)
    }

    /// The PyTorch release(s) that apply to several traces: the user's, or
    /// the one every trace agrees on, else the newest (said in a note).
    pub fn target_of_all(&self, traces: &[(String, Trace)]) -> TorchTarget {
        if let Some(v) = self.torch_version {
            return TorchTarget::user(v);
        }
        let targets: Vec<TorchTarget> = traces.iter().map(|(_, t)| target_of(t, None)).collect();
        match targets.first() {
            Some(first) if targets.iter().all(|t| t.releases == first.releases) => first.clone(),
            _ => {
                eprintln!(
                    "note: the traces were recorded by different PyTorch releases; the grid uses the rules of {} (name one with --torch-version)",
                    TorchVersion::NEWEST
                );
                TorchTarget::user(TorchVersion::NEWEST)
            }
        }
    }

    /// The grid entries for `target`: the default grid keeps only what
    /// every release of the target accepts.
    pub fn entries(&self, target: &TorchTarget) -> Result<Vec<GridEntry>> {
        let v = target.rules;
        let mut g = if self.grid == "default" {
            default_grid_for(target)
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
    version: Option<TorchVersion>,
    device: Option<u32>,
) -> Result<Vec<(String, Trace)>> {
    let mut out = Vec::new();
    for p in crate::common::expand_dirs(paths)? {
        let p = &p;
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
            if t.num_allocs() == 0 {
                eprintln!(
                    "warning: {name}: the trace has no allocations: every setting reserves the same"
                );
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
    /// Traces to sweep: files in any format vramlab reads, or folders (every
    /// trace inside, not recursing).
    #[arg(value_name = "TRACE", required_unless_present = "merge")]
    traces: Vec<PathBuf>,
    #[command(flatten)]
    grid: GridArgs,
    /// The card (--gpu NAME) or capacity (--capacity SIZE); default unlimited.
    #[command(flatten)]
    card: DeviceArgs,
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

/// A bar of replays done, on stderr when it is a terminal.
pub fn progress_bar(total: u64, quiet: bool) -> indicatif::ProgressBar {
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
        let target = args.grid.target_of_all(&traces);
        let grid = args.grid.entries(&target)?;
        let t0 = std::time::Instant::now();
        let rows = sweep_rows(
            &traces,
            &grid,
            args.card.bytes(),
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
    if args.csv.is_some() || args.json.is_some() {
        print_summary(&rows);
    } else {
        print_sweep(&rows);
    }
    Ok(())
}

/// The traces of `rows`, in the order they first appear.
fn trace_names(rows: &[SweepRow]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if names.last() != Some(&r.trace.as_str()) && !names.contains(&r.trace.as_str()) {
            names.push(&r.trace);
        }
    }
    names
}

/// One line per trace (the rows went to a file): the best setting, the
/// defaults, how many fit.
fn print_summary(rows: &[SweepRow]) {
    let mut tab = Table::new(vec![
        "trace".into(),
        "settings".into(),
        "fit".into(),
        "defaults".into(),
        "best".into(),
        "best setting".into(),
    ])
    .left(1);
    for t in trace_names(rows) {
        let mine: Vec<&SweepRow> = rows.iter().filter(|r| r.trace == t).collect();
        let fit = mine.iter().filter(|r| r.fits()).count();
        let defaults = mine.iter().find(|r| r.grid_line == "default");
        let best = mine
            .iter()
            .filter(|r| r.fits())
            .min_by_key(|r| (r.peak_reserved_bytes, r.index));
        tab.row(vec![
            t.to_string(),
            count(mine.len() as u64),
            count(fit as u64),
            defaults.map_or("-".into(), |d| {
                if d.fits() {
                    bytes(d.peak_reserved_bytes)
                } else {
                    format!("OOM {}", oom_cell(d))
                }
            }),
            best.map_or("-".into(), |b| bytes(b.peak_reserved_bytes)),
            best.map_or("none fits".into(), |b| b.setting.clone()),
        ]);
    }
    out!("{}", tab.render());
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
