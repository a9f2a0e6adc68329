//! `vramlab replay JOB`: each distinct trace under each setting, then the
//! job's worst rank, imbalance and card per setting.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use vramlab_replay::{JobSetting, JobView, RankPeak, ReplayOptions, ReplayResult, Run, Scenario};

use super::ReplayArgs;
use crate::job::{LoadedJob, TraceResults, refuse, refuse_trace_args};
use crate::render::job::FitsFrom;

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

/// Replays `trace` under every scenario.
fn replay_all(
    args: &ReplayArgs,
    trace: &vramlab_traces::Trace,
    scenarios: &[Scenario],
    name: &str,
) -> Result<Vec<Run>> {
    let start = vramlab_replay::start_for(trace, scenarios, args.start.start);
    let opts = ReplayOptions {
        start: start.unwrap_or_default(),
        stop_at_oom: !args.continue_on_oom,
        check_invariants: args.check,
        ..Default::default()
    };
    scenarios
        .iter()
        .map(|s| {
            s.run(trace, &opts)
                .with_context(|| format!("replaying {name} under {}", s.label()))
        })
        .collect()
}

/// Runs `replay` on the job at `file`.
pub fn run(args: &ReplayArgs, file: &Path) -> Result<()> {
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
        all_runs.push(replay_all(args, trace, scenarios, &g.trace)?);
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
