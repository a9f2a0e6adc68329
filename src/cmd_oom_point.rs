//! `vramlab oom-point`: the smallest GPU a trace fits on per setting, or
//! (with a capacity) where and why it runs out.

mod job_mode;
mod streamed;

use anyhow::{Context, Result};
use clap::Args;
use rayon::prelude::*;
use vramlab_replay::CapacityRun;
use vramlab_replay::find_oom_point;
use vramlab_traces::advice::with_callers_spelling;

use crate::args::{ConfArgs, DeviceArgs, StartArgs, TraceArgs, scenarios};

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
    if let Some(file) = crate::job::job_file(&args.trace.trace) {
        return job_mode::run(&args, &file);
    }
    if streamed::run(&args)? {
        return Ok(());
    }
    let trace = args.trace.load(args.conf.torch_version())?.trace;
    let scenarios = scenarios(&args.conf, &args.device, &trace)?;
    // Capacities are what-ifs: a mid-run trace starts fresh unless told.
    let start = vramlab_replay::choose_start(&trace, args.start.start, false);
    if trace.initial.is_some() {
        errln!("start: {}", vramlab_replay::describe_start(&trace, start));
    }
    if let Some(cap) = args.device.bytes() {
        return show_state(
            &trace,
            &scenarios,
            cap,
            start.unwrap_or_default(),
            args.json,
        );
    }
    // One search per setting, on all cores; results in the settings' order.
    let results = scenarios
        .par_iter()
        .map(with_callers_spelling(|s: &vramlab_replay::Scenario| {
            find_oom_point(&trace, s, start.unwrap_or_default())
                .with_context(|| format!("searching under {}", s.label()))
        }))
        .collect::<Vec<_>>()
        .into_iter()
        // The first failure in the settings' order, whichever thread hit it.
        .collect::<Result<Vec<_>>>()?;
    crate::render::oom_point::print_oom_points(&results, args.json)
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
