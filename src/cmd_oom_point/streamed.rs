//! `vramlab oom-point` of a native trace file (`.csv`, `.csv.gz`, `.vlt`,
//! `.vlt.zst`, an RMM log) read again for each step of the searches
//! instead of held: each read replays what every setting's search needs
//! next (the settings in parallel), so memory is bounded by what is live.
//! The answers are those of the trace read whole. A snapshot, a card
//! (`--gpu`, `--capacity`: the state at the failure needs the trace) or
//! `--trace-device` take the path that reads the trace whole.

use anyhow::Result;
use vramlab_replay::{StreamError, StreamedOomPoints, find_oom_points_streamed};
use vramlab_traces::{EventBlocks, IdUse, open_events};

use super::OomPointArgs;
use crate::args::scenarios;

/// Searches as the file is read; `Ok(false)` when the trace must be read
/// whole (the caller does).
pub(super) fn run(args: &OomPointArgs) -> Result<bool> {
    let path = &args.trace.trace;
    if args.device.bytes().is_some() || args.trace.device.is_some() {
        return Ok(false);
    }
    let open = || open_events(path, args.trace.format, IdUse::Recycled, None::<fn(u64)>);
    let Some(events) = open()? else {
        return Ok(false);
    };
    let noted = events.trace().notes.len();
    crate::inputs::print_streamed_notes(path, &events.trace().notes, None);
    let trace = events.trace();
    let scenarios = scenarios(&args.conf, &args.device, trace)?;
    // Capacities are what-ifs: a mid-run trace starts fresh unless told.
    let start = vramlab_replay::choose_start(trace, args.start.start, false);
    if trace.initial.is_some() {
        errln!("start: {}", vramlab_replay::describe_start(trace, start));
    }
    drop(events);
    let rereads = crate::rereads::Rereads::new(path, args.trace.format, "searching");
    let reopen = || rereads.open();
    let found = find_oom_points_streamed(reopen, &scenarios, start.unwrap_or_default());
    rereads.done();
    let StreamedOomPoints { points, end, reads } = found.map_err(|e| match e {
        StreamError::Read(e) => e.into(),
        StreamError::Replay { scenario, error } => {
            anyhow::Error::new(error).context(format!("searching under {scenario}"))
        }
    })?;
    if end.counts.events == 0 {
        return Err(crate::inputs::nothing_to_replay(path, &end.trace.notes));
    }
    let later = end.trace.notes.get(noted..).unwrap_or_default();
    crate::inputs::print_streamed_notes(path, later, Some(end.counts));
    let replays: u32 = points.iter().map(|p| p.replays).sum();
    if crate::output::verbose() {
        errln!(
            "{replays} replays in {reads} reads of {} (the trace is read again for each step of the search, not held)",
            path.display()
        );
    }
    crate::render::oom_point::print_oom_points(&points, args.json)?;
    Ok(true)
}
