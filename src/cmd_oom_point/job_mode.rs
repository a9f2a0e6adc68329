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
use crate::job::{LoadedJob, TraceResults, refuse};

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
    if args.trace.format.is_some() {
        return refuse("oom-point", "--format", file);
    }
    let job = LoadedJob::read(file, args.conf.torch_version(), args.trace.device)?;
    let mut per_trace: Vec<Vec<OomPoint>> = Vec::new();
    for (g, trace) in job.groups.iter().zip(&job.traces) {
        let scenarios = crate::args::scenarios(&args.conf, &args.device, trace)?;
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
    let n = per_trace.iter().map(Vec::len).min().unwrap_or(0);
    let points: Vec<JobOomPoint> = (0..n)
        .map(|i| {
            let caps: Vec<u64> = per_trace
                .iter()
                .map(|p| p.get(i).map_or(0, |p| p.min_capacity))
                .collect();
            let setting = per_trace
                .first()
                .and_then(|p| p.get(i))
                .map_or(String::new(), |p| p.setting.clone());
            JobOomPoint::new(&setting, &job.groups, &caps, job.outside())
        })
        .collect();
    if args.json {
        let traces = job
            .groups
            .iter()
            .zip(per_trace)
            .map(|(g, results)| TraceResults {
                ranks: g.label.clone(),
                trace: g.trace.clone(),
                results,
            })
            .collect();
        return crate::render::json::print(&JobOomPoints {
            job: JobView::new(&job.job, points),
            traces,
        });
    }
    crate::render::job::print_oom_points(&job.job, &job.groups, &per_trace, &points);
    Ok(())
}
