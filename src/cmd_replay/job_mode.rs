//! `vramlab replay JOB`: each distinct trace under each setting, then the
//! job's worst rank, imbalance and card per setting.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use vramlab_replay::{
    JobSetting, JobView, RankPeak, ReplayOptions, ReplayResult, Run, Scenario, job_setting,
};

use super::ReplayArgs;
use crate::job::{LoadedJob, TraceResults, refuse};

/// What `replay --json` answers for a job.
#[derive(Debug, Serialize)]
pub struct JobReplay {
    /// The job and, per setting, its worst rank, imbalance and card.
    pub job: JobView<JobSetting>,
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
        (args.trace.format.is_some(), "--format"),
    ];
    match one_trace.iter().find(|(given, _)| *given) {
        Some((_, what)) => refuse("replay", what, file),
        None => Ok(()),
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
    let job = LoadedJob::read(file, args.conf.torch_version(), args.trace.device)?;
    let mut all_runs: Vec<Vec<Run>> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for (g, trace) in job.groups.iter().zip(&job.traces) {
        let scenarios = crate::args::scenarios(&args.conf, &args.device, trace)?;
        let these: Vec<String> = scenarios.iter().map(Scenario::label).collect();
        if labels.is_empty() {
            labels = these;
        } else if labels.len() != these.len() {
            bail!(
                "{}: {} is replayed under {} settings, rank {} under {}: give the settings with --conf",
                file.display(),
                g.label,
                these.len(),
                job.groups.first().map_or(0, |g| g.rank),
                labels.len()
            );
        }
        all_runs.push(replay_all(args, trace, &scenarios, &g.trace)?);
    }
    let outside = job.outside();
    let settings: Vec<JobSetting> = labels
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let peaks: Vec<RankPeak> = all_runs
                .iter()
                .map(|runs| RankPeak {
                    peak_reserved_bytes: runs.get(i).map_or(0, |r| r.summary.peak_reserved_bytes),
                    oom: runs.get(i).is_some_and(|r| r.oom.is_some()),
                })
                .collect();
            job_setting(label, &job.groups, &peaks, outside)
        })
        .collect();
    if args.json {
        let traces = job
            .groups
            .iter()
            .zip(&job.traces)
            .zip(&all_runs)
            .map(|((g, t), runs)| TraceResults {
                ranks: g.label.clone(),
                trace: g.trace.clone(),
                results: runs
                    .iter()
                    .map(|r| ReplayResult::new(t, &g.trace, r, None))
                    .collect(),
            })
            .collect();
        return crate::render::json::print(&JobReplay {
            job: JobView::new(&job.job, settings),
            traces,
        });
    }
    let card = args.device.describe();
    crate::render::job::print_traces(
        &job.job,
        &job.groups,
        &job.traces,
        &all_runs,
        card.as_deref(),
    );
    outln!();
    crate::render::job::print_job(&job.job, &settings, "peak reserved");
    Ok(())
}
