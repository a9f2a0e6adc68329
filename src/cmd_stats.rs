//! `vramlab stats`: what a trace holds.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{InputError, Inputs, Pick};
use vramlab_traces::{Format, Trace, TraceSummary};

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
