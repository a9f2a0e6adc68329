//! `vramlab sweep`: every trace × every setting, in parallel, as rows for
//! pandas; and the grid options the sweeping commands share.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_replay::GridEntry;
use vramlab_replay::{InputNote, StreamError, SweepFile, sweep_trace};
use vramlab_replay::{Inputs, Pick};
use vramlab_replay::{SWEEP_CSV_HEADER, Shard, SweepRow, merge_rows, read_rows_csv};

use crate::args::{DeviceArgs, GridArgs};
use crate::job::{LoadedJob, refuse, refuse_trace_device};
use crate::render::job::FitsFrom;
use crate::render::sweep::{print_sweep, summary};
use crate::source::TraceSource;
use serde::Serialize;
use vramlab_replay::{JobSetting, JobView, worst_rows};

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

/// Writes the cases of the sweep `args` asks for over `read` to `path`.
fn write_plan(path: &Path, read: &[vramlab_replay::Input], args: &SweepArgs) -> Result<()> {
    if read.is_empty() {
        bail!("no traces with events to plan");
    }
    let target = args.grid.target_of_all(read.iter().map(|i| &i.trace));
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

/// The inputs of `args` read whole.
fn held_inputs(args: &SweepArgs) -> Inputs<'_> {
    Inputs::new(&args.traces)
        .pick(Pick::Pool(args.device))
        .torch(args.grid.torch_version())
}

/// The traces to sweep: each native trace file read for its pass (once:
/// every setting replays each block), unless one of them is a snapshot or
/// does not open (the whole read words its error), or `--shard` splits
/// several traces (whose pair numbers depend on which turn out to have
/// events): then every trace is read whole first.
fn sources(args: &SweepArgs) -> Result<Vec<TraceSource>> {
    let files = match Inputs::new(&args.traces).files() {
        Ok(files) if args.shard.is_none() || files.len() <= 1 => Some(files),
        _ => None,
    };
    let native = |path: &PathBuf| {
        matches!(
            vramlab_traces::open_events(
                path,
                None,
                vramlab_traces::IdUse::Recycled,
                None::<fn(u64)>
            ),
            Ok(Some(_))
        )
    };
    let Some(files) = files.filter(|f| f.iter().all(native)) else {
        let read = crate::inputs::read(held_inputs(args))?;
        return Ok(read.into_iter().map(TraceSource::read_whole).collect());
    };
    let doing = "sweeping";
    let mut out = Vec::new();
    for path in files {
        let Some(file) = TraceSource::file(&path, None, doing)? else {
            bail!("{} changed while it was swept", path.display());
        };
        if args
            .device
            .is_none_or(|d| d == file.passes().trace().header.device)
        {
            out.push(file);
        }
    }
    Ok(out)
}

/// Sweeps `grid` over each source, one pass each, on a device of
/// `capacity`; the rows and how many sources had events (one without
/// events is left out with a note).
fn sweep_each(
    args: &SweepArgs,
    sources: &[TraceSource],
    grid: &[GridEntry],
    capacity: Option<u64>,
) -> Result<(Vec<SweepRow>, usize)> {
    let total = (sources.len() * grid.len()) as u64;
    let pb = crate::progress::replay_count_bar(
        args.shard.map_or(total, |s| total.div_ceil(s.n as u64)),
        args.quiet,
    );
    let mut rows = Vec::new();
    let mut swept = 0usize;
    for (t, source) in sources.iter().enumerate() {
        let file = SweepFile {
            name: source.label(),
            first_index: (t * grid.len()) as u64,
        };
        let card = (capacity, args.card.placement);
        let done = sweep_trace(
            source.passes(),
            file,
            grid,
            card,
            args.shard,
            args.start.start,
            &|| pb.inc(1),
        );
        let done = done.map_err(|e| match e {
            StreamError::Read(e) => e.into(),
            StreamError::Replay { scenario, error } => {
                anyhow::anyhow!("{} under {scenario}: {error}", source.label())
            }
        })?;
        if source.finish_any()?.counts.events == 0 {
            errln!(
                "{}",
                InputNote::NoEvents {
                    label: source.label().to_string()
                }
            );
            continue;
        }
        swept += 1;
        rows.extend(done);
    }
    pb.finish_and_clear();
    Ok((rows, swept))
}

/// Sweeps the grid over every source, one pass each, and says how long it
/// took. A trace that turns out to have no events is left out with a note,
/// as a whole read leaves it out before the pairs are numbered.
fn sweep_sources(args: &SweepArgs, sources: &[TraceSource]) -> Result<Vec<SweepRow>> {
    let nothing = || {
        anyhow::anyhow!(
            "no traces with events to sweep{}",
            args.device
                .map_or(String::new(), |d| format!(" on device {d}"))
        )
    };
    if sources.is_empty() {
        return Err(nothing());
    }
    let target = args
        .grid
        .target_of_all(sources.iter().map(|s| s.passes().trace()));
    let grid = args.grid.entries(&target)?;
    let t0 = std::time::Instant::now();
    let (mut rows, swept) = sweep_each(args, sources, &grid, args.card.bytes())?;
    if swept == 0 {
        return Err(nothing());
    }
    if args.shard.is_none() {
        for (i, row) in rows.iter_mut().enumerate() {
            row.index = i as u64;
        }
    }
    let once = match sources.iter().all(|s| s.held().is_none()) {
        true => ", each trace read once",
        false => "",
    };
    errln!(
        "{} replays ({} traces x {} settings{}{once}) in {:.2} s",
        rows.len(),
        swept,
        grid.len(),
        args.shard
            .map_or(String::new(), |s| format!(", shard {}/{}", s.k, s.n)),
        t0.elapsed().as_secs_f64()
    );
    Ok(rows)
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
        ([file], 1) => return run_job(&args, file),
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
    } else if let Some(plan) = &args.plan {
        let read = crate::inputs::read(held_inputs(&args))?;
        return write_plan(plan, &read, &args);
    } else {
        sweep_sources(&args, &sources(&args)?)?
    };
    write_outputs(&rows, args.csv.as_deref(), args.json.as_deref())?;
    if args.csv.is_some() || args.json.is_some() {
        out!("{}", summary(&rows));
    } else {
        print_sweep(&rows);
    }
    Ok(())
}

/// What `sweep --json FILE` writes for a job.
#[derive(Debug, Serialize)]
pub struct JobSweep {
    /// The job and, per setting, its worst rank, imbalance and card.
    pub job: JobView<JobSetting>,
    /// What each rank's allocator had: the card less the bytes outside the
    /// allocator (`None`: unlimited).
    pub capacity_bytes: Option<u64>,
    /// Each distinct trace's rows (`trace`: the file and its ranks).
    pub rows: Vec<SweepRow>,
    /// The job's row per setting: its worst rank's.
    pub job_rows: Vec<SweepRow>,
}

/// Runs `sweep` on the job at `file`.
fn run_job(args: &SweepArgs, file: &Path) -> Result<()> {
    if args.shard.is_some() || args.plan.is_some() {
        return refuse("sweep", "--shard or --plan", file);
    }
    refuse_trace_device("sweep", args.device, file)?;
    args.grid.one_release("sweep")?;
    let job = LoadedJob::read(file, args.grid.torch_version(), args.card.bytes())?;
    let target = args.grid.target_of_all(&job.traces);
    let grid = args.grid.entries(&target)?;
    let sources: Vec<TraceSource> = job.inputs().map(TraceSource::read_whole).collect();
    let (rows, _) = sweep_each(args, &sources, &grid, job.capacity)?;
    let per_trace: Vec<Vec<SweepRow>> = rows.chunks(grid.len().max(1)).map(<[_]>::to_vec).collect();
    let job_rows = worst_rows(&per_trace, rows.len() as u64);
    let settings = job.sweep_settings(&per_trace)?;
    let mut all = rows.clone();
    all.extend(job_rows.iter().cloned());
    if let Some(p) = &args.csv {
        let mut s = String::from(vramlab_replay::SWEEP_CSV_HEADER);
        s.push('\n');
        for r in &all {
            s.push_str(&r.to_csv());
            s.push('\n');
        }
        std::fs::write(p, s).with_context(|| format!("cannot write {}", p.display()))?;
        errln!(
            "wrote {} ({} rows, the last {} the job's)",
            p.display(),
            all.len(),
            job_rows.len()
        );
    }
    let answer = JobSweep {
        job: JobView::new(&job.job, settings),
        capacity_bytes: job.capacity,
        rows,
        job_rows,
    };
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&answer)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {}", p.display());
    }
    crate::render::job::print_header(&job.job, &job.groups);
    if let Some(line) = job.capacity_line(args.card.describe()) {
        outln!("{line}");
    }
    outln!();
    crate::render::sweep::print_sweep(&all);
    outln!();
    let from = FitsFrom::PeakReserved {
        on_card: job.capacity.is_some(),
    };
    crate::render::job::print_job(&job.job, &answer.job.settings, "peak reserved", from);
    Ok(())
}
