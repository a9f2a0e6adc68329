//! `vramlab demo`: the recommendation and the report for a bundled
//! recording of Llama-3-8B fine-tuning, on an H100 80GB unless told.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use vramlab_reports::{ReportRequest, build_report};

use crate::args::DeviceArgs;
use crate::render::report::{print_demo_answer, print_demo_question};

/// The trace `demo` uses: Llama-3-8B-shaped full fine-tuning (bf16, AdamW),
/// sequence length 1024, recorded on the CPU with fake tensors.
const DEMO_TRACE: &[u8] = include_bytes!("../workloads/data/llama-3-8b-train-seq1024.csv.gz");
const DEMO_NAME: &str = "llama-3-8b-train-seq1024.csv.gz";

/// Arguments of `vramlab demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Folder for the report.
    #[arg(long, value_name = "DIR", default_value = "vramlab-demo")]
    out: PathBuf,
    /// The card (default: an H100 80GB, 79.15 GiB usable after the CUDA
    /// context) or, with --capacity, an exact size.
    #[command(flatten)]
    device: DeviceArgs,
}

/// Runs `demo`.
pub fn run(args: DemoArgs) -> Result<()> {
    let default_card = vramlab_replay::gpus::find_gpu("h100-80gb").map_err(anyhow::Error::msg)?;
    let device = if args.device.bytes().is_some() {
        args.device.clone()
    } else {
        DeviceArgs {
            gpu: Some(default_card),
            capacity: None,
            placement: args.device.placement,
        }
    };
    let capacity = device.bytes().unwrap_or(default_card.usable_bytes());
    let card = device.describe().unwrap_or_default();
    let gz = flate2::read::MultiGzDecoder::new(DEMO_TRACE);
    let trace = vramlab_traces::read_csv(std::io::BufReader::new(gz), DEMO_NAME)?;
    print_demo_question(trace.events.len(), &card);
    let target = vramlab_replay::target_of(&trace, None);
    let grid = vramlab_replay::default_grid_for(&target);
    let pb = crate::progress::replay_count_bar(grid.len() as u64, false);
    let built = build_report(
        &ReportRequest {
            name: DEMO_NAME,
            trace: &trace,
            capacity: Some(capacity),
            grid: &grid,
            plots: 4,
            target: &target,
            start: None,
            placement: device.placement,
            out: &args.out,
            upgrade_to: None,
            explorer: true,
            host: Default::default(),
        },
        &|| pb.inc(1),
    );
    pb.finish_and_clear();
    let built = built?;
    print_demo_answer(DEMO_NAME, &card, &built.rec, 8, &built.index);
    Ok(())
}
