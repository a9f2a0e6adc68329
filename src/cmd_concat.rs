//! `vramlab concat`: two jobs in one process, one after the other, with
//! or without an `empty_cache()` between them, as one trace to replay.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_traces::{Format, write_trace};

use crate::args::parse_format;
use crate::render::table::{bytes, count};

/// Arguments of `vramlab concat`.
#[derive(Debug, Args)]
pub struct ConcatArgs {
    /// The first job's trace (any format vramlab reads).
    #[arg(value_name = "A")]
    first: PathBuf,
    /// The second job's trace; what A leaves allocated stays allocated
    /// while B runs.
    #[arg(value_name = "B")]
    second: PathBuf,
    /// Output trace (.csv, .csv.gz, .vlt, .vlt.zst).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Call torch.cuda.empty_cache() between the two jobs.
    #[arg(long)]
    empty_cache_between: bool,
    /// Output format, when the extension does not say: csv, csv.gz, vlt,
    /// vlt.zst.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    to: Option<Format>,
    /// Which GPU of multi-device snapshots to use (the same for both;
    /// default: the device with the most allocations).
    #[arg(long = "trace-device", value_name = "N")]
    device: Option<u32>,
    /// PyTorch release whose rules lay out snapshots that start mid-run.
    #[arg(long = "torch-version", value_name = "X.Y")]
    torch_version: Option<TorchVersion>,
}

/// Runs `concat`.
pub fn run(args: ConcatArgs) -> Result<()> {
    let load = |path: &PathBuf| -> Result<vramlab_traces::Trace> {
        crate::args::TraceArgs {
            trace: path.clone(),
            format: None,
            device: args.device,
        }
        .load(args.torch_version)
        .map(|i| i.trace)
    };
    let (a, b) = (load(&args.first)?, load(&args.second)?);
    let t = vramlab_traces::concat(&a, &b, args.empty_cache_between).with_context(|| {
        format!(
            "joining {} and {}",
            args.first.display(),
            args.second.display()
        )
    })?;
    write_trace(&t, &args.output, args.to)?;
    errln!(
        "wrote {} ({} events: {} from A, {}{} from B)",
        args.output.display(),
        count(t.events.len() as u64),
        count(a.with_fresh_start().events.len() as u64),
        if args.empty_cache_between {
            "empty_cache(), "
        } else {
            ""
        },
        count(b.with_fresh_start().events.len() as u64),
    );
    let s = vramlab_traces::TraceSummary::of(&t);
    errln!("peak live {}", bytes(s.peak_live_bytes));
    Ok(())
}
