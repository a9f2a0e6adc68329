//! `vramlab stats`: what a trace holds.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{InputError, Inputs, Pick};
use vramlab_traces::{
    EventBlocks, Format, IdUse, SummaryBuilder, Trace, TraceSummary, open_events,
};

use crate::args::parse_format;

/// Arguments of `vramlab stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Trace file: a PyTorch memory snapshot (.pickle, .pkl, .pickle.gz), a
    /// native trace (.csv, .csv.gz, .vlt, .vlt.zst) or a RAPIDS RMM log (.csv).
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// Input format, when the extension does not say: csv, csv.gz, vlt,
    /// vlt.zst, snapshot, rmm.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    format: Option<Format>,
    /// PyTorch release whose rules lay out snapshots that start mid-run
    /// (default: the release the snapshot was recorded with).
    #[arg(long = "torch-version", value_name = "X.Y")]
    torch_version: Option<TorchVersion>,
    /// Only this GPU of a multi-device snapshot (default: every device).
    #[arg(long = "trace-device", value_name = "N")]
    device: Option<u32>,
    /// Print JSON (an array, one object per device).
    #[arg(long)]
    json: bool,
}

/// Runs `stats`.
pub fn run(args: StatsArgs) -> Result<()> {
    if let Some((trace, summary)) = streamed(&args)? {
        if args.json {
            return crate::render::json::print(&[summary]);
        }
        crate::render::stats::print_stats(&args.trace, &trace, &summary);
        return Ok(());
    }
    // A folder stands for every trace inside it.
    let inputs = Inputs::new([&args.trace])
        .format(args.format)
        .pick(Pick::Each(args.device))
        .torch(args.torch_version);
    // An empty snapshot is an answer here ("it holds nothing"), not an
    // error: the replaying commands refuse it with the same words.
    let mut traces: Vec<(PathBuf, Trace)> = Vec::new();
    for file in inputs.files()? {
        match crate::inputs::read_files(inputs.clone(), std::slice::from_ref(&file)) {
            Ok(read) => traces.extend(read.into_iter().map(|i| (i.path, i.trace))),
            Err(e) => match e.downcast::<InputError>() {
                Ok(empty @ InputError::EmptySnapshot { .. }) => {
                    crate::render::stats::print_empty(&empty, args.json)
                }
                Ok(other) => return Err(other.into()),
                Err(e) => return Err(e),
            },
        }
    }
    let sums: Vec<TraceSummary> = traces.iter().map(|(_, t)| TraceSummary::of(t)).collect();
    if args.json {
        return crate::render::json::print(&sums);
    }
    for ((path, t), s) in traces.iter().zip(&sums) {
        crate::render::stats::print_stats(path, t, s);
    }
    Ok(())
}

/// The summary of a native trace (CSV or .vlt) or an RMM log counted as
/// it is read, in memory bounded by the ids in use (the trace without its
/// events, and the summary); `None` for anything else (a folder, one
/// device asked for, a snapshot, private pools, no events), which is read
/// whole.
fn streamed(args: &StatsArgs) -> Result<Option<(Trace, TraceSummary)>> {
    if args.device.is_some() || args.trace.is_dir() {
        return Ok(None);
    }
    let (pb, hook) = match crate::progress::stream_bar(&args.trace, "reading") {
        Some((pb, hook)) => (Some(pb), Some(hook)),
        None => (None, None),
    };
    let Some(mut events) = open_events(&args.trace, args.format, IdUse::Recycled, hook)? else {
        return Ok(None);
    };
    if !events.trace().pools.is_empty() {
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        return Ok(None);
    }
    let mut summary = SummaryBuilder::streamed(events.trace());
    let mut block = Vec::new();
    while events.next_block(&mut block)? {
        summary.events(&block, &events.trace().phases);
    }
    let end = events.finish()?;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    if end.counts.events == 0 {
        return Ok(None);
    }
    let summary = summary.finish(&end.trace);
    Ok(Some((end.trace, summary)))
}
