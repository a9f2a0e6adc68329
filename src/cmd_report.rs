//! `vramlab report`: plots and an HTML page for one trace
//! ([`vramlab_reports::build_report`] does the work).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use vramlab_reports::{ReportRequest, build_report, state_report};

use crate::args::GridArgs;
use crate::args::{DeviceArgs, StartArgs, TraceArgs};
use crate::render::report::{print_report, print_state_report};

/// Arguments of `vramlab report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Folder to write index.html and the plots into.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The card (--gpu NAME) or memory (--capacity SIZE) the job may use
    /// (default: unlimited; then settings are ranked by peak reserved alone).
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    host: crate::args::HostArgs,
    #[command(flatten)]
    grid: GridArgs,
    /// How many settings get plots of their own (the best ones, plus the
    /// defaults).
    #[arg(long, default_value_t = 5)]
    plots: usize,
    #[command(flatten)]
    start: StartArgs,
    /// Leave out the explorer (every allocation of the settings shown, at
    /// any event): a smaller page, and less memory and time for a long trace
    /// (it is left out anyway past 8M allocations).
    #[arg(long)]
    no_explorer: bool,
}

/// Runs `report`.
pub fn run(args: ReportArgs) -> Result<()> {
    // A report is about one device: the one asked for, or the one with the
    // most allocations (named in a note).
    let upgrade_to = args.grid.upgrade_to("report")?;
    let vramlab_replay::Input {
        trace, label: name, ..
    } = args.trace.load_any(args.grid.torch_version())?;
    if trace.events.is_empty() {
        // A snapshot without history: the recorded state's numbers and
        // segment map; there is nothing to replay or compare.
        if upgrade_to.is_some() {
            errln!(
                "note: {name} holds no history to replay: the report shows the recorded state, under no release's rules, and compares none"
            );
        }
        let index = state_report(&name, &trace, &args.out)?;
        print_state_report(&index);
        return Ok(());
    }
    let target = args.grid.target(&trace);
    let grid = args.grid.entries(&target)?;
    // With a second release: its own grid (the keys it accepts).
    let upgrade = match upgrade_to {
        Some(v) => {
            let t = vramlab_replay::TorchTarget::user(v);
            let g = args.grid.entries(&t)?;
            Some((t, g))
        }
        None => None,
    };
    let replays = grid.len() + upgrade.as_ref().map_or(0, |(_, g)| g.len());
    let pb = crate::progress::replay_count_bar(replays as u64, false);
    let built = build_report(
        &ReportRequest {
            name: &name,
            trace: &trace,
            capacity: args.device.bytes(),
            grid: &grid,
            plots: args.plots,
            target: &target,
            start: args.start.start,
            placement: args.device.placement,
            out: &args.out,
            upgrade_to: upgrade.as_ref().map(|(t, g)| (t, g.as_slice())),
            explorer: !args.no_explorer,
            host: args.host.limits(),
        },
        &|| pb.inc(1),
    );
    pb.finish_and_clear();
    let built = built?;
    if let Some(note) = vramlab_reports::explorer_left_out(&trace).filter(|_| !args.no_explorer) {
        errln!("note: {name}: {note}");
    }
    print_report(
        &name,
        args.device.describe().as_deref(),
        &built.rec,
        5,
        &built.index,
    );
    if let Some(u) = &built.upgrade {
        outln!();
        for line in u.summary() {
            outln!("{line}");
        }
    }
    Ok(())
}
