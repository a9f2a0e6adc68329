//! `vramlab oom-point`: the smallest GPU a trace fits on per setting, or
//! (with a capacity) where and why it runs out.

use anyhow::{Context, Result};
use clap::Args;
use rayon::prelude::*;
use vramlab_replay::analysis::oom_point::{OomPoint, find_oom_point};
use vramlab_replay::gpus::smallest_gpu_for;

use crate::args::{ConfArgs, DeviceArgs, StartArgs, TraceArgs, scenarios};
use crate::render::table::{Table, bytes};

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
    let trace = args.trace.load(args.conf.torch_version())?;
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
        .map(|s| {
            find_oom_point(&trace, s, start.unwrap_or_default())
                .with_context(|| format!("searching under {}", s.label()))
        })
        .collect::<Vec<_>>()
        .into_iter()
        // The first failure in the settings' order, whichever thread hit it.
        .collect::<Result<Vec<_>>>()?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(());
    }
    out!("{}", table(&results));
    for r in &results {
        if let Some(b) = r.start_reserved_bytes {
            outln!(
                "\nunder {}, the state at the first entry alone reserves {} ({} start)",
                r.setting,
                bytes(b),
                r.start.map_or("empty", |s| s.name())
            );
        }
    }
    for r in &results {
        if !r.not_monotone_at.is_empty() {
            let list: Vec<String> = r.not_monotone_at.iter().map(|&c| bytes(c)).collect();
            outln!(
                "\nnote: under {}, feasibility is not monotone: it fits {} but not {} (less memory changes which blocks are cached and released)",
                r.setting,
                bytes(r.min_capacity),
                list.join(", ")
            );
        }
    }
    outln!(
        "\n(smallest card: the smallest GPU of `vramlab gpus` whose memory, less {} for the CUDA context, holds it)",
        bytes(vramlab_replay::gpus::CONTEXT_ALLOWANCE)
    );
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
            out_json.push(crate::render::oom::state_json(trace, &run, capacity));
        } else {
            crate::render::oom::print_state(trace, &run, capacity, start);
        }
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&out_json)?);
    }
    Ok(())
}

fn table(results: &[OomPoint]) -> String {
    let mut tab = Table::new(vec![
        "setting".into(),
        "smallest capacity".into(),
        "smallest card".into(),
        "live peak (bound)".into(),
        "reserved, unlimited".into(),
        "checked".into(),
        "replays".into(),
    ]);
    for r in results {
        tab.row(vec![
            r.setting.clone(),
            bytes(r.min_capacity),
            smallest_gpu_for(r.min_capacity).map_or("none listed".into(), |g| g.name.to_string()),
            bytes(r.lower_bound),
            bytes(r.unlimited_peak_reserved),
            if r.verified {
                "yes".into()
            } else {
                "NO".into()
            },
            r.replays.to_string(),
        ]);
    }
    tab.render()
}
