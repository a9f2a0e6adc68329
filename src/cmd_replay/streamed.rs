//! `vramlab replay` of a native trace (`.csv`, `.csv.gz`, `.vlt`,
//! `.vlt.zst`) or an RMM log while it is read: the read on one thread,
//! the replays on another, memory bounded by what is live. The answers are
//! those of the trace read whole; what needs the whole trace in memory
//! (`--timeline`, `--snapshot-out`, `--latency`, `--trace-device`, a GPU)
//! takes the other path.

use anyhow::{Context, Result};
use vramlab_replay::{ReplayOptions, Scenario, StreamError, Streamed, replay_streamed};
use vramlab_traces::{EventBlocks, IdUse, open_events};

use super::{ReplayArgs, build_scenarios, name_release, one_release_labels, placement_ranges};
use crate::render::replay::{ReplayOutput, print_runs};

/// The options that replay a trace as it is read.
pub(super) fn can_stream(args: &ReplayArgs) -> bool {
    args.cuda.run_on.kind != crate::cmd_replay_cuda::DeviceKind::Cuda
        && args.timeline.is_none()
        && args.snapshot_out.is_none()
        && !args.latency
        && args.trace.device.is_none()
}

/// Replays the trace as it is read; `Ok(false)` for a snapshot (the
/// caller reads it whole).
pub(super) fn run(args: &ReplayArgs) -> Result<bool> {
    let path = &args.trace.trace;
    let bar = crate::progress::stream_bar(path, "replaying");
    let (pb, hook) = match bar {
        Some((pb, hook)) => (Some(pb), Some(hook)),
        None => (None, None),
    };
    let Some(events) = open_events(path, args.trace.format, IdUse::Recycled, hook)? else {
        return Ok(false);
    };
    // A binary trace's notes are in its metadata: printed before the
    // scenarios' own, as for a trace read whole (an RMM log's come at its
    // end).
    let noted = events.trace().notes.len();
    crate::inputs::print_streamed_notes(path, &events.trace().notes, None);
    let scenarios = build_scenarios(args, events.trace())?;
    let start = vramlab_replay::start_for(events.trace(), &scenarios, args.start.start);
    let pools = !events.trace().pools.is_empty();
    let opts = ReplayOptions {
        start: start.unwrap_or_default(),
        stop_at_oom: !args.continue_on_oom,
        check_invariants: args.check,
        // Each private pool's share at the peak and at the end.
        final_segments: pools,
        segments_at_peak: pools,
        forget_device_calls: true,
        ..Default::default()
    };
    let streamed = replay_streamed(events, &scenarios, &opts);
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let Streamed { mut runs, end } = streamed.map_err(|e| in_words(e, args))?;
    if end.counts.events == 0 {
        return Err(crate::inputs::nothing_to_replay(path, &end.trace.notes));
    }
    let later = end.trace.notes.get(noted..).unwrap_or_default();
    crate::inputs::print_streamed_notes(path, later, Some(end.counts));
    let releases = &args.conf.torch_versions;
    for (run, s) in runs.iter_mut().zip(&scenarios) {
        name_release(run, s, releases);
    }
    let ranges = placement_ranges(args, &end.trace, &scenarios, &runs, &opts, |other, lean| {
        replay_again(args, other, lean)
    })?;
    print_runs(
        &ReplayOutput {
            trace: &end.trace,
            counts: end.counts,
            path,
            runs: &runs,
            ranges: &ranges,
            latencies: &[],
            settings: &one_release_labels(&scenarios, releases),
            releases,
        },
        args.json,
    )?;
    Ok(true)
}

/// The other placement's replay: the file read a second time (only when
/// a tie the driver's address order decides was met).
fn replay_again(
    args: &ReplayArgs,
    scenario: &Scenario,
    opts: &ReplayOptions,
) -> Result<vramlab_replay::Run> {
    let path = &args.trace.trace;
    let events = open_events(path, args.trace.format, IdUse::Recycled, None::<fn(u64)>)?
        .with_context(|| format!("{} changed while it was read", path.display()))?;
    let streamed = replay_streamed(events, std::slice::from_ref(scenario), opts)
        .map_err(|e| in_words(e, args))?;
    streamed
        .runs
        .into_iter()
        .next()
        .context("the replay gave no run")
}

/// A streamed replay's error as the replay of a trace read whole words it.
fn in_words(e: StreamError, args: &ReplayArgs) -> anyhow::Error {
    match e {
        StreamError::Read(e) => e.into(),
        StreamError::Replay { scenario, error } => anyhow::Error::new(error).context(format!(
            "replaying {} under {scenario}",
            args.trace.trace.display()
        )),
    }
}
