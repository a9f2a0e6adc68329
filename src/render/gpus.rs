//! The named cards for people (a table and how usable memory is counted)
//! and for programs (the [`GpuMemory`] list as JSON).

use anyhow::Result;
use vramlab_replay::GpuMemory;
use vramlab_replay::gpus::CONTEXT_ALLOWANCE;

use crate::render::table::{Table, bytes};

/// Prints the cards: JSON, or the table.
pub fn print_gpus(gpus: &[GpuMemory], json: bool) -> Result<()> {
    if json {
        return crate::render::json::print_sorted(gpus);
    }
    let mut t = Table::new(vec![
        "--gpu".into(),
        "card".into(),
        "memory (driver)".into(),
        "usable by PyTorch".into(),
    ])
    .left(1);
    for g in gpus {
        t.row(vec![
            g.name.into(),
            g.description.into(),
            bytes(g.total_bytes),
            bytes(g.usable_bytes),
        ]);
    }
    out!("{}", t.render());
    outln!(
        "\nusable = what the driver reports less {} for the CUDA context (CUDA 12+, lazy loading; yours may differ:\ntorch.cuda.mem_get_info() after the first kernel tells). For an exact byte count use --capacity SIZE\n(24GiB = 24·2^30 bytes; 24GB = 24·10^9 bytes).",
        bytes(CONTEXT_ALLOWANCE)
    );
    Ok(())
}
