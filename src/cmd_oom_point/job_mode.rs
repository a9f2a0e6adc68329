//! `vramlab oom-point JOB`: each distinct trace's smallest capacity per
//! setting; the job's is the largest (its worst rank), and with the bytes
//! each rank spends outside the allocator, the card it needs.

use std::path::Path;

use anyhow::{Context, Result};
use rayon::prelude::*;
use serde::Serialize;
use vramlab_replay::{JobOomPoint, JobView, OomPoint, Scenario, find_oom_point};
use vramlab_traces::advice::with_callers_spelling;

use super::OomPointArgs;
use crate::job::{LoadedJob, TraceResults, refuse, refuse_trace_args};

/// What `oom-point --json` answers for a job.
#[derive(Debug, Serialize)]
pub struct JobOomPoints {
    /// The job and, per setting, its smallest capacity and card.
    pub job: JobView<JobOomPoint>,
    /// Each distinct trace's OOM points, one per setting.
    pub traces: Vec<TraceResults<Vec<OomPoint>>>,
}

/// Runs `oom-point` on the job at `file`.
pub fn run(args: &OomPointArgs, file: &Path) -> Result<()> {
    if args.device.bytes().is_some() {
        return refuse("oom-point", "--gpu or --capacity", file);
    }
    refuse_trace_args("oom-point", &args.trace, file)?;
    let job = LoadedJob::read(file, args.conf.torch_version(), None)?;
    let mut scenarios: Vec<Vec<Scenario>> = Vec::new();
    for trace in &job.traces {
        scenarios.push(crate::args::scenarios(&args.conf, &args.device, trace)?);
    }
    let labels: Vec<Vec<String>> = scenarios
        .iter()
        .map(|ss| ss.iter().map(Scenario::label).collect())
        .collect();
    let labels = job.common_labels(&labels)?;
    let mut per_trace: Vec<Vec<OomPoint>> = Vec::new();
    for ((g, trace), scenarios) in job.groups.iter().zip(&job.traces).zip(&scenarios) {
        let start = vramlab_replay::choose_start(trace, args.start.start, false);
        let points = scenarios
            .par_iter()
            .map(with_callers_spelling(|s: &Scenario| {
                find_oom_point(trace, s, start.unwrap_or_default())
                    .with_context(|| format!("searching {} under {}", g.trace, s.label()))
            }))
            .collect::<Vec<_>>()
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        per_trace.push(points);
    }
    let points: Vec<JobOomPoint> = labels
        .iter()
        .enumerate()
        .map(|(i, setting)| {
            let caps: Vec<u64> = per_trace
                .iter()
                .map(|p| p.get(i).map_or(0, |p| p.min_capacity))
                .collect();
            JobOomPoint::new(setting, &job.groups, &caps, job.outside())
        })
        .collect();
    if args.json {
        return crate::render::json::print(&JobOomPoints {
            job: JobView::new(&job.job, points),
            traces: job.trace_results(per_trace),
        });
    }
    crate::render::job::print_oom_points(&job.job, &job.groups, &per_trace, &points);
    Ok(())
}
