//! `vramlab convert` of a native trace file (`.csv`, `.csv.gz`, `.vlt`,
//! `.vlt.zst`, an RMM log) without holding it: a first read learns what
//! the output's head needs before the first event (a `.vlt` names the
//! number of events, the stream table, the phase marks and the notes up
//! front), a second read writes the events a block at a time. Memory is
//! bounded by the allocations live at once; the output is byte for byte
//! that of the trace read whole. A snapshot, `--start fresh` (which
//! rewrites the start) and `--trace-device` of another device take the
//! path that reads the trace whole.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use vramlab_traces::{
    Event, EventBlocks, IdUse, StreamEnd, TraceError, TraceEvents, TraceWriter, open_events,
};

use super::ConvertArgs;

/// Converts as the file is read; `Ok(None)` when it must be read whole
/// (the caller does), else the output's path and the trace's description.
pub(super) fn run(args: &ConvertArgs) -> Result<Option<(PathBuf, StreamEnd)>> {
    if args.start == Some(vramlab_replay::Start::Fresh) {
        return Ok(None);
    }
    let open = || open_events(&args.input, args.from, IdUse::Unique, None::<fn(u64)>);
    // A file that does not open is read whole, whose errors name it.
    let Ok(Some(first)) = open() else {
        return Ok(None);
    };
    let device = first.trace().header.device;
    if args.device.is_some_and(|d| d != device) {
        return Ok(None);
    }
    let mut buf = Vec::new();
    let end = read_through(first, &mut buf)?;
    let out = PathBuf::from(
        args.output
            .to_string_lossy()
            .replace("{device}", &device.to_string()),
    );
    let Some(events) = open()? else {
        bail!("{} changed while it was converted", args.input.display());
    };
    write_events(events, &end, (&args.input, &out), args.to, &mut buf)?;
    Ok(Some((out, end)))
}

/// Reads `events` to the end (the events dropped block by block): the
/// trace's description and counts.
fn read_through(mut events: TraceEvents, buf: &mut Vec<Event>) -> Result<StreamEnd, TraceError> {
    while events.next_block(buf)? {}
    events.finish()
}

/// Writes the events of `events` (read from `input`) to `out`, described
/// by `end` (the first read's end), a block at a time.
fn write_events(
    mut events: TraceEvents,
    end: &StreamEnd,
    (input, out): (&Path, &Path),
    to: Option<vramlab_traces::Format>,
    buf: &mut Vec<Event>,
) -> Result<()> {
    let mut w = TraceWriter::create(&end.trace, end.counts.events, out, to)?;
    let mut written = 0u64;
    while events.next_block(buf)? {
        written += buf.len() as u64;
        if written > end.counts.events {
            break;
        }
        w.events(buf)?;
    }
    let again = events.finish()?;
    if written != end.counts.events || again.counts != end.counts {
        bail!(
            "{} changed while it was converted ({} events, then {written})",
            input.display(),
            end.counts.events
        );
    }
    w.finish()?;
    Ok(())
}
