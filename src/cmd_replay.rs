//! `vramlab replay`: replay a trace under one or more settings.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use vramlab_replay::{ReplayOptions, Scenario, SettingRange, StreamError, placement_range_with};

use crate::args::{ConfArgs, DeviceArgs, StartArgs, TraceArgs, scenarios as scenarios_of};
use crate::job::{LoadedJob, TraceResults, refuse, refuse_trace_args};
use crate::render::job::FitsFrom;
use crate::render::replay::{ReplayOutput, print_runs, write_timeline};
use crate::source::{Reading, Source};
use serde::Serialize;
use std::path::Path;
use vramlab_replay::{JobSetting, JobView, RankPeak, ReplayPasses, ReplayResult, Run};

/// Arguments of `vramlab replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    conf: ConfArgs,
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    host: crate::args::HostArgs,
    #[command(flatten)]
    start: StartArgs,
    /// Print one JSON object (an array of them with several --conf) instead
    /// of a table.
    #[arg(long)]
    json: bool,
    /// Keep replaying after an OOM (the failed allocation and its frees are
    /// skipped) instead of stopping at the first one.
    #[arg(long)]
    continue_on_oom: bool,
    /// Write the down-sampled memory timeline of each run to this CSV file
    /// (its spacing needs the event count first: the trace is read whole,
    /// where a native trace or an RMM log is otherwise replayed as it is
    /// read).
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// Check the allocator's invariants after every event (slow).
    #[arg(long)]
    check: bool,
    /// Measure the host time of every malloc/free call of the policy
    /// (p50/p99/max per setting; the trace is read whole first, so that
    /// reading does not disturb the measurement).
    #[arg(long)]
    latency: bool,
    /// Replay under the simulated driver's placement only, without the
    /// second replay under the other address order that tells whether a
    /// tie decides the result (twice as fast on traces that make device
    /// calls; the JSON then has no range).
    #[arg(long)]
    no_placement_check: bool,
    /// Write the replay as a PyTorch memory snapshot (.pickle) that
    /// pytorch.org/memory_viz opens (one --conf only; the trace is read
    /// whole).
    #[arg(long, value_name = "FILE")]
    snapshot_out: Option<PathBuf>,
    #[command(flatten)]
    cuda: crate::cmd_replay_cuda::CudaArgs,
}

/// The scenarios to replay: each setting, under each release when several
/// `--torch-version` are given (what an upgrade does).
fn build_scenarios(
    args: &ReplayArgs,
    trace: &vramlab_traces::Trace,
) -> Result<Vec<vramlab_replay::Scenario>> {
    let releases = &args.conf.torch_versions;
    if releases.len() <= 1 {
        return scenarios_of(&args.conf, &args.device, trace);
    }
    let mut out = Vec::new();
    for &v in releases {
        out.extend(scenarios_of(
            &args.conf.with_release(v),
            &args.device,
            trace,
        )?);
    }
    Ok(out)
}

/// Whether the run needs every event at once (see [`Reading::Whole`]).
fn reading(args: &ReplayArgs) -> Reading {
    let whole = args.cuda.run_on.kind == crate::cmd_replay_cuda::DeviceKind::Cuda
        || args.timeline.is_some()
        || args.snapshot_out.is_some()
        || args.latency;
    match whole {
        true => Reading::Whole,
        false => Reading::Passes("replaying"),
    }
}

/// Runs the command.
pub fn run(args: ReplayArgs) -> Result<()> {
    let source = match Source::resolve(&args.trace, args.conf.torch_version(), reading(&args))? {
        Source::Job(file) => return run_job(&args, &file),
        Source::Trace(source) => source,
    };
    if let (crate::cmd_replay_cuda::DeviceKind::Cuda, Some(trace)) =
        (args.cuda.run_on.kind, source.held())
    {
        return run_on_gpu(&args, trace);
    }
    let passes = source.passes();
    let releases = &args.conf.torch_versions;
    let scenarios = build_scenarios(&args, passes.trace())?;
    if args.snapshot_out.is_some() && scenarios.len() != 1 {
        anyhow::bail!("--snapshot-out writes one replay: give exactly one --conf");
    }
    let opts = options(&args, passes.trace(), &scenarios);
    let mut latencies = Vec::new();
    let mut runs = match (args.latency, source.held()) {
        (true, Some(trace)) => {
            let mut runs = Vec::new();
            for s in &scenarios {
                let (run, m, f) = s
                    .run_timed(trace, &opts)
                    .with_context(|| context(&args, s))?;
                latencies.push((m, f));
                runs.push(run);
            }
            runs
        }
        _ => {
            let pb =
                crate::progress::replay_count_bar(scenarios.len() as u64, source.held().is_none());
            let runs = passes.replay_counted(&scenarios, &opts, &|| pb.inc(1));
            pb.finish_and_clear();
            runs.map_err(|e| in_words(e, &args))?
        }
    };
    let ended = source.finish()?;
    for (run, s) in runs.iter_mut().zip(&scenarios) {
        name_release(run, s, releases);
    }
    // Where the driver's address order decides a tie, the other order's
    // result too.
    let ranges = placement_ranges(
        &args,
        &ended.trace,
        &scenarios,
        &runs,
        &opts,
        |other, lean| {
            let again = passes.replay(std::slice::from_ref(other), lean);
            again
                .map_err(|e| in_words(e, &args))?
                .into_iter()
                .next()
                .context("the replay gave no run")
        },
    )?;
    if let Some(path) = &args.timeline {
        write_timeline(path, &runs)?;
    }
    if let (Some(path), Some(run), Some(s), Some(trace)) = (
        &args.snapshot_out,
        runs.first(),
        scenarios.first(),
        source.held(),
    ) {
        let f = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = std::io::BufWriter::new(f);
        vramlab_replay::write_snapshot(trace, run, s.policy.native_conf(), &mut w)
            .and_then(|_| std::io::Write::flush(&mut w))
            .with_context(|| format!("cannot write {}", path.display()))?;
        errln!(
            "wrote {} (open it at https://pytorch.org/memory_viz)",
            path.display()
        );
    }
    let settings = one_release_labels(&scenarios, releases);
    print_runs(
        &ReplayOutput {
            trace: &ended.trace,
            counts: ended.counts,
            path: &args.trace.trace,
            runs: &runs,
            ranges: &ranges,
            latencies: &latencies,
            settings: &settings,
            releases,
        },
        args.json,
    )
}

/// How `trace` is replayed under `scenarios`.
fn options(
    args: &ReplayArgs,
    trace: &vramlab_traces::Trace,
    scenarios: &[Scenario],
) -> ReplayOptions {
    let start = vramlab_replay::start_for(trace, scenarios, args.start.start);
    let pools = !trace.pools.is_empty();
    ReplayOptions {
        start: start.unwrap_or_default(),
        stop_at_oom: !args.continue_on_oom,
        check_invariants: args.check,
        record_addresses: args.snapshot_out.is_some(),
        // Each private pool's share at the peak and at the end.
        final_segments: args.snapshot_out.is_some() || pools,
        segments_at_peak: pools,
        forget_device_calls: args.snapshot_out.is_none(),
        host_ram: args.host.limit(),
        ranks_per_node: args.host.ranks_per_node,
        ..Default::default()
    }
}

/// What a failed replay under `s` was doing.
fn context(args: &ReplayArgs, s: &Scenario) -> String {
    format!(
        "replaying {} under {}",
        args.trace.trace.display(),
        s.label()
    )
}

/// A failed pass in the words of [`context`].
fn in_words(e: StreamError, args: &ReplayArgs) -> anyhow::Error {
    match e {
        StreamError::Read(e) => e.into(),
        StreamError::Replay { scenario, error } => anyhow::Error::new(error).context(format!(
            "replaying {} under {scenario}",
            args.trace.trace.display()
        )),
    }
}

/// Replays the held trace on the GPU `--run-on` names (through cudarc).
fn run_on_gpu(args: &ReplayArgs, trace: &vramlab_traces::Trace) -> Result<()> {
    let settings = args.conf.settings(Some(trace))?;
    let on_gpu: Vec<Scenario> = settings
        .iter()
        .map(|c| Scenario::native(c.clone()))
        .collect();
    let start = vramlab_replay::start_for(trace, &on_gpu, args.start.start);
    if trace.initial.is_some() {
        errln!("start: {}", vramlab_replay::describe_start(trace, start));
    }
    let runs = crate::cmd_replay_cuda::run_cuda(
        trace,
        settings,
        &crate::cmd_replay_cuda::CudaReplayOptions {
            trace_path: &args.trace.trace,
            gpu: args.cuda.run_on.ordinal,
            touch: args.cuda.touch,
            json: args.json,
            fraction: args.conf.fraction,
            continue_on_oom: args.continue_on_oom,
            check: args.check,
            capacity: args.device.capacity,
            start: start.unwrap_or_default(),
        },
    )?;
    if let Some(path) = &args.timeline {
        write_timeline(path, &runs)?;
    }
    Ok(())
}

/// With several releases, `run`'s setting names its release too.
fn name_release(
    run: &mut vramlab_replay::Run,
    s: &vramlab_replay::Scenario,
    releases: &[vramlab_allocator::TorchVersion],
) {
    if releases.len() > 1 {
        if let Some(c) = s.policy.native_conf() {
            run.conf = format!("{} @ torch {}", run.conf, c.version);
        }
    }
}

/// The settings of one release (labels without the release).
fn one_release_labels(
    scenarios: &[vramlab_replay::Scenario],
    releases: &[vramlab_allocator::TorchVersion],
) -> Vec<String> {
    scenarios
        .iter()
        .take(scenarios.len() / releases.len().max(1))
        .map(|s| s.label())
        .collect()
}

/// Each setting's placement range (none with `--no-placement-check`);
/// `replay_other` replays a scenario under the other placement when its
/// range is not settled without it.
fn placement_ranges(
    args: &ReplayArgs,
    trace: &vramlab_traces::Trace,
    scenarios: &[vramlab_replay::Scenario],
    runs: &[vramlab_replay::Run],
    opts: &ReplayOptions,
    replay_other: impl Fn(&vramlab_replay::Scenario, &ReplayOptions) -> Result<vramlab_replay::Run>,
) -> Result<Vec<SettingRange>> {
    let mut ranges = Vec::new();
    for (s, r) in scenarios
        .iter()
        .zip(runs)
        .filter(|_| !args.no_placement_check)
    {
        let range =
            placement_range_with(trace, s, r.into(), opts, &replay_other).with_context(|| {
                format!(
                    "replaying {} under {} with {} placement",
                    args.trace.trace.display(),
                    s.label(),
                    s.placement.other()
                )
            })?;
        ranges.push(SettingRange {
            setting: s.label(),
            range,
        });
    }
    Ok(ranges)
}

/// What `replay --json` answers for a job.
#[derive(Debug, Serialize)]
pub struct JobReplay {
    /// The job and, per setting, its worst rank, imbalance and card.
    pub job: JobView<JobSetting>,
    /// What each rank's allocator had: the card less the bytes outside the
    /// allocator (`None`: unlimited).
    pub capacity_bytes: Option<u64>,
    /// Each distinct trace's replays, one per setting.
    pub traces: Vec<TraceResults<Vec<ReplayResult>>>,
}

/// Refuses the options that write or time one trace's replay.
fn check_args(args: &ReplayArgs, file: &Path) -> Result<()> {
    let one_trace = [
        (args.snapshot_out.is_some(), "--snapshot-out"),
        (args.timeline.is_some(), "--timeline"),
        (args.latency, "--latency"),
        (
            args.conf.torch_versions.len() > 1,
            "several --torch-version",
        ),
        (
            args.cuda.run_on.kind == crate::cmd_replay_cuda::DeviceKind::Cuda,
            "--run-on cuda",
        ),
    ];
    match one_trace.iter().find(|(given, _)| *given) {
        Some((_, what)) => refuse("replay", what, file),
        None => refuse_trace_args("replay", &args.trace, file),
    }
}

/// Runs `replay` on the job at `file`.
fn run_job(args: &ReplayArgs, file: &Path) -> Result<()> {
    check_args(args, file)?;
    let job = LoadedJob::read(file, args.conf.torch_version(), args.device.bytes())?;
    // Every rank's scenarios, on the card less the outside bytes; the
    // settings must be the same for all before anything is replayed.
    let mut per_trace: Vec<Vec<Scenario>> = Vec::new();
    for trace in &job.traces {
        let mut scenarios = crate::args::scenarios(&args.conf, &args.device, trace)?;
        for s in &mut scenarios {
            s.capacity = job.capacity;
        }
        per_trace.push(scenarios);
    }
    let labels: Vec<Vec<String>> = per_trace
        .iter()
        .map(|ss| ss.iter().map(Scenario::label).collect())
        .collect();
    job.common_labels(&labels)?;
    let mut all_runs: Vec<Vec<Run>> = Vec::new();
    for ((g, trace), scenarios) in job.groups.iter().zip(&job.traces).zip(&per_trace) {
        let opts = options(args, trace, scenarios);
        let runs = trace.replay(scenarios, &opts).map_err(|e| match e {
            StreamError::Read(e) => e.into(),
            StreamError::Replay { scenario, error } => {
                anyhow::Error::new(error).context(format!("replaying {} under {scenario}", g.trace))
            }
        })?;
        all_runs.push(runs);
    }
    let settings = job.settings(
        &all_runs,
        |r| r.conf.clone(),
        |r| RankPeak {
            peak_reserved_bytes: r.summary.peak_reserved_bytes,
            oom: r.oom.is_some(),
        },
    )?;
    if args.json {
        let results = job
            .traces
            .iter()
            .zip(&job.groups)
            .zip(&all_runs)
            .map(|((t, g), runs)| {
                runs.iter()
                    .map(|r| ReplayResult::new(t, &g.trace, r, None))
                    .collect()
            })
            .collect();
        return crate::render::json::print(&JobReplay {
            job: JobView::new(&job.job, settings),
            capacity_bytes: job.capacity,
            traces: job.trace_results(results),
        });
    }
    crate::render::job::print_traces(
        &job.job,
        &job.groups,
        &job.traces,
        &all_runs,
        job.capacity_line(args.device.describe()).as_deref(),
    );
    outln!();
    let from = FitsFrom::PeakReserved {
        on_card: job.capacity.is_some(),
    };
    crate::render::job::print_job(&job.job, &settings, "peak reserved", from);
    outln!(
        "(a job's replays run under the simulated driver's placement only: no placement check, as with --no-placement-check)"
    );
    Ok(())
}
