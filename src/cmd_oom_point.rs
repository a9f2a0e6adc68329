//! `vramlab oom-point`: the smallest GPU a trace fits on per setting, or
//! (with a capacity) where and why it runs out; for a job, its worst
//! rank's. A native trace file is read again for each step of the
//! searches instead of held (every setting's next step in one read).

use std::path::Path;

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use vramlab_replay::{CapacityRun, JobOomPoint, JobView, OomPoint, ReplayPasses, Scenario};
use vramlab_replay::{StreamError, find_oom_points_with};

use crate::args::{ConfArgs, DeviceArgs, StartArgs, TraceArgs, scenarios};
use crate::job::{LoadedJob, TraceResults, refuse, refuse_trace_args};
use crate::source::{Reading, Source};

/// What `oom-point --json` answers for a job.
#[derive(Debug, Serialize)]
pub struct JobOomPoints {
    /// The job and, per setting, its smallest capacity and card.
    pub job: JobView<JobOomPoint>,
    /// Each distinct trace's OOM points, one per setting.
    pub traces: Vec<TraceResults<Vec<OomPoint>>>,
}

/// Arguments of `vramlab oom-point`.
#[derive(Debug, Args)]
pub struct OomPointArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    conf: ConfArgs,
    #[command(flatten)]
    start: StartArgs,
    /// Instead of searching: replay on this card (--gpu NAME) or capacity
    /// (--capacity SIZE) and show the first failing allocation, the code
    /// that made it, and the allocator's state there.
    #[command(flatten)]
    device: DeviceArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `oom-point`.
pub fn run(args: OomPointArgs) -> Result<()> {
    args.conf.one_release("oom-point")?;
    // The state at the failure on a card needs the trace held.
    let reading = match args.device.bytes() {
        Some(_) => Reading::Whole,
        None => Reading::Passes("searching"),
    };
    let trace = match Source::resolve(&args.trace, args.conf.torch_version(), reading)? {
        Source::Job(file) => return run_job(&args, &file),
        Source::Trace(trace) => trace,
    };
    let passes = trace.passes();
    let scenarios = scenarios(&args.conf, &args.device, passes.trace())?;
    // Capacities are what-ifs: a mid-run trace starts fresh unless told.
    let start = vramlab_replay::choose_start(passes.trace(), args.start.start, false);
    if passes.trace().initial.is_some() {
        errln!(
            "start: {}",
            vramlab_replay::describe_start(passes.trace(), start)
        );
    }
    if let (Some(cap), Some(held)) = (args.device.bytes(), trace.held()) {
        return show_state(held, &scenarios, cap, start.unwrap_or_default(), args.json);
    }
    let points = search(passes, &scenarios, start, "")?;
    trace.finish()?;
    if let Some(reads) = trace.reads().filter(|_| crate::output::verbose()) {
        let replays: u32 = points.iter().map(|p| p.replays).sum();
        errln!(
            "{replays} replays in {reads} reads of {} (the trace is read again for each step of the search, not held)",
            trace.path().display()
        );
    }
    crate::render::oom_point::print_oom_points(&points, args.json)
}

/// Every scenario's OOM point over the trace of `passes` (`name`: how
/// errors name it, with a trailing space, or empty).
fn search(
    passes: &dyn ReplayPasses,
    scenarios: &[Scenario],
    start: Option<vramlab_replay::Start>,
    name: &str,
) -> Result<Vec<OomPoint>> {
    find_oom_points_with(passes, scenarios, start.unwrap_or_default()).map_err(|e| match e {
        StreamError::Read(e) => e.into(),
        StreamError::Replay { scenario, error } => {
            anyhow::Error::new(error).context(format!("searching {name}under {scenario}"))
        }
    })
}

/// Runs `oom-point` on the job at `file`: each distinct trace's smallest
/// capacity per setting; the job's is the largest (its worst rank), and
/// with the bytes each rank spends outside the allocator, the card it
/// needs.
fn run_job(args: &OomPointArgs, file: &Path) -> Result<()> {
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
        per_trace.push(search(trace, scenarios, start, &format!("{} ", g.trace))?);
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

/// Replays each scenario on `capacity` and shows where it fails.
fn show_state(
    trace: &vramlab_traces::Trace,
    scenarios: &[vramlab_replay::Scenario],
    capacity: u64,
    start: vramlab_replay::Start,
    json: bool,
) -> Result<()> {
    let opts = vramlab_replay::ReplayOptions {
        check_invariants: false,
        start,
        ..Default::default()
    };
    let mut out_json = Vec::new();
    for s in scenarios {
        let run = s.clone().with_capacity(Some(capacity)).run(trace, &opts)?;
        if json {
            out_json.push(CapacityRun::new(trace, &run, capacity));
        } else {
            crate::render::oom::print_state(trace, &run, capacity, start);
        }
    }
    if json {
        crate::render::json::print_sorted(&out_json)?;
    }
    Ok(())
}
