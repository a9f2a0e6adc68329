//! `vramlab sweep`: every trace × every setting, in parallel, as rows for
//! pandas; and the grid options the sweeping commands share.

mod job_mode;
mod streamed;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::Placement;
use vramlab_replay::GridEntry;
use vramlab_replay::{Inputs, Pick, Start};
use vramlab_replay::{SWEEP_CSV_HEADER, Shard, SweepRow, merge_rows, read_rows_csv, run_sweep};
use vramlab_traces::Trace;

use crate::args::{DeviceArgs, GridArgs};
use crate::render::sweep::{print_sweep, summary};

/// Arguments of `vramlab sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Traces to sweep: files in any format vramlab reads, or folders (every
    /// trace inside, not recursing); or one multi-rank job (a folder
    /// with a job.json, or the job.json itself): rows per distinct trace and
    /// the job's worst-rank row per setting.
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
    start: crate::args::StartArgs,
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
    /// Write the sweep's cases as JSON instead of replaying them: one per
    /// trace × setting, in row order, each with what it needs to run alone
    /// (`vramlab.run_case`, or `vramlab run-case CASE`) and give the row
    /// the whole sweep gives.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["csv", "json", "shard"])]
    plan: Option<PathBuf>,
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
        let mut s = String::from(SWEEP_CSV_HEADER);
        s.push('\n');
        for r in rows {
            s.push_str(&r.to_csv());
            s.push('\n');
        }
        std::fs::write(p, s).with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {} ({} rows)", p.display(), rows.len());
    }
    if let Some(p) = json {
        std::fs::write(p, serde_json::to_string_pretty(rows)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {} ({} rows)", p.display(), rows.len());
    }
    Ok(())
}

/// Runs the grid over the traces with a progress bar, on `card`: the
/// capacity (`None`: unlimited) and the placement.
pub fn sweep_rows(
    traces: &[(String, Trace)],
    grid: &[GridEntry],
    card: (Option<u64>, Placement),
    shard: Option<Shard>,
    start: Option<Start>,
    quiet: bool,
) -> Result<Vec<SweepRow>> {
    let total = (traces.len() * grid.len()) as u64;
    let total = shard.map_or(total, |s| total.div_ceil(s.n as u64));
    let pb = crate::progress::replay_count_bar(total, quiet);
    let tick = || pb.inc(1);
    let rows = run_sweep(traces, grid, card.0, card.1, shard, start, &tick)
        .map_err(|(t, s, e)| anyhow::anyhow!("{t} under {s}: {e}"))?;
    pb.finish_and_clear();
    Ok(rows)
}

/// Writes the cases of the sweep `args` asks for over `read` to `path`.
fn write_plan(path: &Path, read: &[vramlab_replay::Input], args: &SweepArgs) -> Result<()> {
    if read.is_empty() {
        bail!("no traces with events to plan");
    }
    let traces: Vec<(String, Trace)> = read
        .iter()
        .map(|i| (i.label.clone(), i.trace.clone()))
        .collect();
    let target = args.grid.target_of_all(&traces);
    let grid = args.grid.entries(&target)?;
    let paths: Vec<String> = read.iter().map(|i| i.path.display().to_string()).collect();
    let case_traces: Vec<vramlab_replay::CaseTrace<'_>> = read
        .iter()
        .zip(&paths)
        .map(|(i, p)| vramlab_replay::CaseTrace {
            label: &i.label,
            path: p,
            trace: &i.trace,
        })
        .collect();
    let cases = vramlab_replay::plan_cases(
        &case_traces,
        &grid,
        &vramlab_replay::CasePlan {
            capacity: args.card.bytes(),
            placement: args.card.placement,
            start: args.start.start,
            rules: target.rules,
            read_torch_version: args.grid.torch_version(),
        },
    );
    std::fs::write(path, serde_json::to_string_pretty(&cases)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    errln!(
        "wrote {} ({} cases: {} traces x {} settings)",
        path.display(),
        cases.len(),
        read.len(),
        grid.len()
    );
    Ok(())
}

/// Runs `sweep`.
pub fn run(args: SweepArgs) -> Result<()> {
    args.grid.one_release("sweep")?;
    if let Some(n) = args.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build_global()
            .ok();
    }
    let jobs: Vec<std::path::PathBuf> = args
        .traces
        .iter()
        .filter_map(|t| crate::job::job_file(t))
        .collect();
    match (jobs.as_slice(), args.traces.len()) {
        ([], _) => {}
        ([file], 1) => return job_mode::run(&args, file),
        ([file, ..], _) => bail!(
            "{} is a job: sweep it alone (its ranks are its traces)",
            file.display()
        ),
    }
    let rows = if !args.merge.is_empty() {
        let mut all = Vec::new();
        for p in &args.merge {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            all.extend(read_rows_csv(&text, &p.display().to_string()).map_err(anyhow::Error::msg)?);
        }
        merge_rows(all).map_err(anyhow::Error::msg)?
    } else if let Some(rows) = streamed::sweep(&args)? {
        rows
    } else {
        let inputs = Inputs::new(&args.traces)
            .pick(Pick::Pool(args.device))
            .torch(args.grid.torch_version());
        let read = crate::inputs::read(inputs)?;
        if let Some(plan) = &args.plan {
            return write_plan(plan, &read, &args);
        }
        let traces: Vec<(String, Trace)> = read.into_iter().map(|i| (i.label, i.trace)).collect();
        if traces.is_empty() {
            bail!(
                "no traces with events to sweep{}",
                args.device
                    .map_or(String::new(), |d| format!(" on device {d}"))
            );
        }
        let target = args.grid.target_of_all(&traces);
        let grid = args.grid.entries(&target)?;
        let t0 = std::time::Instant::now();
        let rows = sweep_rows(
            &traces,
            &grid,
            (args.card.bytes(), args.card.placement),
            args.shard,
            args.start.start,
            args.quiet,
        )?;
        errln!(
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
        out!("{}", summary(&rows));
    } else {
        print_sweep(&rows);
    }
    Ok(())
}
