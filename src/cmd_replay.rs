//! `vramlab replay`: replay a trace under one or more settings.

mod job_mode;
mod streamed;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use vramlab_replay::ReplayOptions;
use vramlab_replay::{SettingRange, placement_range_with};

use crate::args::{ConfArgs, DeviceArgs, StartArgs, TraceArgs, scenarios as scenarios_of};
use crate::render::replay::{ReplayOutput, print_runs, write_timeline};

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

/// Runs the command.
pub fn run(args: ReplayArgs) -> Result<()> {
    if let Some(file) = crate::job::job_file(&args.trace.trace) {
        return job_mode::run(&args, &file);
    }
    if streamed::can_stream(&args) && streamed::run(&args)? {
        return Ok(());
    }
    let trace = args.trace.load(args.conf.torch_version())?.trace;
    if args.cuda.run_on.kind == crate::cmd_replay_cuda::DeviceKind::Cuda {
        let settings = args.conf.settings(Some(&trace))?;
        let on_gpu: Vec<vramlab_replay::Scenario> = settings
            .iter()
            .map(|c| vramlab_replay::Scenario::native(c.clone()))
            .collect();
        let start = vramlab_replay::start_for(&trace, &on_gpu, args.start.start);
        if trace.initial.is_some() {
            errln!("start: {}", vramlab_replay::describe_start(&trace, start));
        }
        let runs = crate::cmd_replay_cuda::run_cuda(
            &trace,
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
        return Ok(());
    }
    let releases = &args.conf.torch_versions;
    let scenarios = build_scenarios(&args, &trace)?;
    if args.snapshot_out.is_some() && scenarios.len() != 1 {
        anyhow::bail!("--snapshot-out writes one replay: give exactly one --conf");
    }
    let start = vramlab_replay::start_for(&trace, &scenarios, args.start.start);
    let opts = ReplayOptions {
        start: start.unwrap_or_default(),
        stop_at_oom: !args.continue_on_oom,
        check_invariants: args.check,
        record_addresses: args.snapshot_out.is_some(),
        // Each private pool's share at the peak and at the end.
        final_segments: args.snapshot_out.is_some() || !trace.pools.is_empty(),
        segments_at_peak: !trace.pools.is_empty(),
        ..Default::default()
    };
    let mut runs = Vec::new();
    let mut latencies = Vec::new();
    for s in &scenarios {
        let ctx = || {
            format!(
                "replaying {} under {}",
                args.trace.trace.display(),
                s.label()
            )
        };
        let bar = crate::progress::replay_bar(&trace, &s.label());
        let opts = ReplayOptions {
            progress: bar.as_ref().map(|(_, hook)| hook.clone()),
            ..opts.clone()
        };
        let result = if args.latency {
            s.run_timed(&trace, &opts).map(|(run, m, f)| {
                latencies.push((m, f));
                run
            })
        } else {
            s.run(&trace, &opts)
        };
        if let Some((pb, _)) = bar {
            pb.finish_and_clear();
        }
        let mut run = result.with_context(ctx)?;
        name_release(&mut run, s, releases);
        runs.push(run);
    }
    // Where the driver's address order decides a tie, the other order's
    // result too.
    let ranges = placement_ranges(&args, &trace, &scenarios, &runs, &opts, |other, lean| {
        Ok(other.run(&trace, lean)?)
    })?;
    if let Some(path) = &args.timeline {
        write_timeline(path, &runs)?;
    }
    if let (Some(path), Some(run), Some(s)) = (&args.snapshot_out, runs.first(), scenarios.first())
    {
        let f = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = std::io::BufWriter::new(f);
        vramlab_replay::write_snapshot(&trace, run, s.policy.native_conf(), &mut w)
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
            trace: &trace,
            counts: vramlab_traces::StreamCounts::of(&trace),
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
