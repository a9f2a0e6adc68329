//! `vramlab explain`: why a trace reserves more than it allocates at its
//! peak — the waste by cause, the live allocations that pin it, and each
//! claim replayed.

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_replay::{ExplainOptions, explain};

use crate::args::{ConfArgs, DeviceArgs, TraceArgs, scenarios};

/// Arguments of `vramlab explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    conf: ConfArgs,
    #[command(flatten)]
    device: DeviceArgs,
    /// How many culprits (and culprit lines) to list, the largest replayed
    /// saving first. Every candidate is replayed whatever this says.
    #[arg(long, value_name = "N", default_value_t = 5)]
    top: usize,
    /// Replay at most N candidates (live allocations beside free space at
    /// the peak), the most pinned bytes first; 0 replays every one.
    #[arg(long, value_name = "N", default_value_t = vramlab_replay::DEFAULT_MAX_CANDIDATES)]
    candidates: usize,
    /// Do not replay the settings aimed at the waste (expandable segments,
    /// a max_split_size_mb above the top culprit).
    #[arg(long)]
    no_fixes: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `explain`.
pub fn run(args: ExplainArgs) -> Result<()> {
    args.conf.one_release("explain")?;
    let trace = args.trace.load(args.conf.torch_version())?.trace;
    let scenarios = scenarios(&args.conf, &args.device, &trace)?;
    let [scenario] = scenarios.as_slice() else {
        bail!(crate::invoke::BadArgument(
            "explain explains one setting: give at most one --conf (`vramlab diff TRACE --conf A --conf B` compares two)".into()
        ));
    };
    if trace.initial.is_some() {
        errln!(
            "start: fresh (explain names and removes any allocation, the {} blocks in use at the first entry too: they are allocated first, as `vramlab convert TRACE --start fresh` writes them)",
            trace.initial.as_ref().map_or(0, |i| i.live_blocks())
        );
    }
    let pb = crate::progress::replay_count_bar(1, trace.events.len() < 100_000);
    let (moved, sized) = (pb.clone(), pb.clone());
    let opts = ExplainOptions {
        top: args.top,
        max_candidates: (args.candidates > 0).then_some(args.candidates),
        fixes: !args.no_fixes,
        progress: Some(vramlab_replay::ProgressHook::new(move |n| {
            moved.set_position(n)
        })),
        total: Some(vramlab_replay::ProgressHook::new(move |n| {
            sized.set_length(n)
        })),
    };
    let result = explain(&trace, scenario, &opts).with_context(|| {
        format!(
            "explaining {} under {}",
            args.trace.trace.display(),
            scenario.label()
        )
    });
    pb.finish_and_clear();
    let e = result?;
    if args.json {
        crate::render::json::print(&e)
    } else {
        crate::render::explain::print_explanation(&args.trace.trace, &e, !args.no_fixes);
        Ok(())
    }
}
