//! `vramlab convert` and `vramlab stats`: move traces between formats and
//! look at what they contain.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{Inputs, Pick};
use vramlab_traces::{
    Event, EventBlocks, IdUse, StreamEnd, TraceError, TraceEvents, TraceWriter, open_events,
};
use vramlab_traces::{Format, Trace, write_trace};

use crate::args::parse_format;
use crate::render::table::{bytes, count};

/// Arguments of `vramlab convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Input trace: a PyTorch memory snapshot (.pickle, .pkl, .pickle.gz), a
    /// native trace (.csv, .csv.gz, .vlt, .vlt.zst) or a RAPIDS RMM log (.csv).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// Output trace (.csv, .csv.gz, .vlt, .vlt.zst); with several devices in
    /// the input, `{device}` in the name is replaced by the device index.
    #[arg(value_name = "OUT")]
    output: PathBuf,
    /// Input format, when the extension does not say: csv, csv.gz, vlt,
    /// vlt.zst, snapshot, rmm.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    from: Option<Format>,
    /// Output format, when the extension does not say: csv, csv.gz, vlt,
    /// vlt.zst.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    to: Option<Format>,
    /// Only this device of a multi-device snapshot.
    #[arg(long = "trace-device", value_name = "N")]
    device: Option<u32>,
    /// PyTorch release whose rules lay out snapshots that start mid-run
    /// (default: the release the snapshot was recorded with).
    #[arg(long = "torch-version", value_name = "X.Y")]
    torch_version: Option<TorchVersion>,
    /// For snapshots recorded mid-run: `fresh` writes the blocks in use at
    /// the first entry as the first allocations (any format, CSV included;
    /// what `replay --start fresh` replays); `recorded` (the default) keeps
    /// the recorded state, which only .vlt holds.
    #[arg(long, value_name = "recorded|fresh")]
    start: Option<vramlab_replay::Start>,
}

/// Runs `convert`.
pub fn run_convert(args: ConvertArgs) -> Result<()> {
    // A native trace file is converted without holding it: a first read
    // learns what the output's head needs before the first event (a .vlt
    // names the number of events, the stream table, the phase marks and
    // the notes up front), a second writes the events a block at a time;
    // memory is bounded by the allocations live at once and the output is
    // byte for byte that of the trace read whole. A snapshot, `--start
    // fresh` (which rewrites the start) and `--trace-device` of another
    // device read the trace whole.
    if let Some((out, end)) = convert_as_read(&args)? {
        report_written(&args, &out, &end.trace, end.counts.events);
        return Ok(());
    }
    let inputs = Inputs::new([&args.input])
        .format(args.from)
        .pick(Pick::Each(args.device))
        .torch(args.torch_version);
    let traces: Vec<Trace> = crate::inputs::read_files(inputs, std::slice::from_ref(&args.input))?
        .into_iter()
        .map(|i| i.trace)
        .collect();
    if traces.is_empty() {
        bail!("{}: no trace to convert", args.input.display());
    }
    let template = args.output.to_string_lossy().to_string();
    if traces.len() > 1 && !template.contains("{device}") {
        bail!(
            "{} holds {} devices: put {{device}} in the output name, or pick one with --trace-device N",
            args.input.display(),
            traces.len()
        );
    }
    for t in &traces {
        let fresh;
        let t = if args.start == Some(vramlab_replay::Start::Fresh) {
            fresh = t.with_fresh_start();
            &fresh
        } else {
            t
        };
        let out = PathBuf::from(template.replace("{device}", &t.header.device.to_string()));
        write_trace(t, &out, args.to)?;
        report_written(&args, &out, t, t.events.len() as u64);
    }
    Ok(())
}

/// What `convert` says once it wrote `out`: its size, the notes of the
/// trace `t` (described; `events` events), and what CSV leaves out.
fn report_written(args: &ConvertArgs, out: &Path, t: &Trace, events: u64) {
    let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    errln!(
        "wrote {} ({} events, {})",
        out.display(),
        count(events),
        bytes(size)
    );
    for n in &t.notes {
        errln!("note: {n}");
    }
    let to_csv = matches!(
        args.to.or_else(|| Format::from_path(out)),
        Some(Format::Csv | Format::CsvGz)
    );
    if to_csv && (t.expected.is_some() || !t.frames.is_empty()) {
        errln!(
            "note: the CSV format keeps the events only: the recorded addresses and segment events (for `vramlab fidelity`) and the stack frames were left out; .vlt keeps them"
        );
    }
}

/// Converts as the file is read; `Ok(None)` when it must be read whole
/// (the caller does), else the output's path and the trace's description.
fn convert_as_read(args: &ConvertArgs) -> Result<Option<(PathBuf, StreamEnd)>> {
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
