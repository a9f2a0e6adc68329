//! `vramlab gpus`: the cards `--gpu NAME` knows, and the memory PyTorch can
//! use on each.

use anyhow::Result;
use clap::Args;
use vramlab_replay::gpu_memory;

/// Arguments of `vramlab gpus`.
#[derive(Debug, Args)]
pub struct GpusArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `gpus`.
pub fn run(args: GpusArgs) -> Result<()> {
    crate::render::gpus::print_gpus(&gpu_memory(), args.json)
}
