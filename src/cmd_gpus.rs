//! `vramlab gpus`: the cards `--gpu NAME` knows, and the memory PyTorch can
//! use on each.

use anyhow::Result;
use clap::Args;
use vramlab_replay::gpus::{CONTEXT_ALLOWANCE, GPUS};

use crate::render::table::{Table, bytes};

/// Arguments of `vramlab gpus`.
#[derive(Debug, Args)]
pub struct GpusArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `gpus`.
pub fn run(args: GpusArgs) -> Result<()> {
    if args.json {
        let v: Vec<serde_json::Value> = GPUS
            .iter()
            .map(|g| {
                serde_json::json!({
                    "name": g.name,
                    "description": g.description,
                    "total_bytes": g.total_bytes(),
                    "usable_bytes": g.usable_bytes(),
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let mut t = Table::new(vec![
        "--gpu".into(),
        "card".into(),
        "memory (driver)".into(),
        "usable by PyTorch".into(),
    ])
    .left(1);
    for g in GPUS {
        t.row(vec![
            g.name.into(),
            g.description.into(),
            bytes(g.total_bytes()),
            bytes(g.usable_bytes()),
        ]);
    }
    out!("{}", t.render());
    outln!(
        "\nusable = what the driver reports less {} for the CUDA context (CUDA 12+, lazy loading; yours may differ:\ntorch.cuda.mem_get_info() after the first kernel tells). For an exact byte count use --capacity SIZE\n(24GiB = 24·2^30 bytes; 24GB = 24·10^9 bytes).",
        bytes(CONTEXT_ALLOWANCE)
    );
    Ok(())
}
