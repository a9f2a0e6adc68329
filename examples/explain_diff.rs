//! Why a trace reserves more than it allocates, and what a setting changes,
//! from the library: `explain` (the waste at the peak by cause, the live
//! allocations that pin it, each with the peak replayed without it) and
//! `diff` (two runs at their peaks, allocated bytes by group).
//!
//!     cargo run --release --example explain_diff [TRACE]

use std::path::PathBuf;

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{DiffInput, ExplainOptions, Scenario, Start, diff, explain};

const MIB: f64 = (1 << 20) as f64;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path: PathBuf = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tests/explain/pinned-split.csv".into())
        .into();
    let trace = vramlab_traces::read_traces(&path, None, &Default::default(), None)?.remove(0);
    let defaults = Scenario::native(AllocConf::new(TorchVersion::NEWEST));
    let e = explain(&trace, &defaults, &ExplainOptions::default())?;
    println!(
        "peak reserved {:.2} MiB, waste {:.2} MiB: pinned {:.2}, releasable {:.2}, pool cache {:.2}",
        e.peak_reserved_bytes as f64 / MIB,
        e.waste_at_peak_bytes as f64 / MIB,
        e.waste.pinned_bytes as f64 / MIB,
        e.waste.releasable_bytes as f64 / MIB,
        e.waste.pool_cached_bytes as f64 / MIB,
    );
    for c in &e.culprits {
        println!(
            "culprit {}: {:.2} MiB pins {:.2} MiB ({}); without it the peak is {:.2} MiB",
            c.id,
            c.size_bytes as f64 / MIB,
            c.pinned_bytes as f64 / MIB,
            c.frame.as_deref().unwrap_or("no stack"),
            c.peak_reserved_without_bytes as f64 / MIB,
        );
    }
    for f in &e.fixes {
        println!(
            "{}: peak {:.2} MiB",
            f.setting,
            f.peak_reserved_bytes as f64 / MIB
        );
    }
    let es = Scenario::native(AllocConf::parse(
        "expandable_segments:True",
        TorchVersion::NEWEST,
    )?);
    let side = |scenario| DiffInput {
        trace: &trace,
        name: "trace",
        scenario,
        start: Start::Fresh,
    };
    let d = diff(side(&defaults), side(&es))?;
    println!(
        "defaults → expandable segments: reserved {:+.2} MiB = allocated {:+.2} MiB + waste {:+.2} MiB",
        d.reserved_delta_bytes as f64 / MIB,
        d.allocated_delta_bytes as f64 / MIB,
        d.waste_delta_bytes as f64 / MIB,
    );
    Ok(())
}
