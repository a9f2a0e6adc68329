//! Build a whole report the way `vramlab report` does: sweep a small grid
//! of settings, rank them, replay the defaults and the best ones in detail
//! and write the HTML page with its plots.
//!
//!     cargo run -p vramlab-reports --example build_report -- [OUT_DIR] [TRACE] [CAPACITY_MIB]
//!
//! OUT_DIR defaults to a folder in the system's temporary directory, TRACE
//! to the bundled `workloads/data/gpt-small-train.csv`, CAPACITY_MIB to 1024.
//! The other example, `render_report.rs`, assembles a
//! [`vramlab_reports::ReportInput`] by hand instead.

use std::error::Error;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use vramlab_replay::parse_grid;
use vramlab_replay::target_of;
use vramlab_reports::{ReportRequest, build_report};

/// The settings to compare, in grid-file syntax (`vramlab report --grid`).
const GRID: &str = "\
default
expandable_segments:True
max_split_size_mb:128
roundup_power2_divisions:4
fraction=0.9 garbage_collection_threshold:0.8
policy=bfc
";

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let out = args.next().map_or_else(
        || std::env::temp_dir().join("vramlab-build-report"),
        PathBuf::from,
    );
    let path = args.next().map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv"),
        PathBuf::from,
    );
    let capacity_mib: u64 = args.next().map_or(Ok(1024), |s| s.parse())?;

    let trace = vramlab_replay::Inputs::new([&path]).trace()?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    // The release whose rules apply: what the trace says, else the newest.
    let target = target_of(&trace, None);
    let grid = parse_grid(GRID, target.rules)?;

    let done = AtomicUsize::new(0);
    let progress = || {
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        eprintln!("replayed {n}/{} settings", grid.len());
    };
    let built = build_report(
        &ReportRequest {
            name: &name,
            trace: &trace,
            capacity: Some(capacity_mib << 20),
            grid: &grid,
            plots: 3,
            target: &target,
            start: None,
            placement: Default::default(),
            out: &out,
            upgrade_to: None,
            explorer: true,
            host: Default::default(),
        },
        &progress,
    )?;

    println!("{name} on {capacity_mib} MiB: {:?}", built.rec.verdict);
    println!("{}", built.rec.why);
    for (i, r) in built.rec.ranked.iter().enumerate() {
        println!(
            "{:>2}. {:<50} peak reserved {}",
            i + 1,
            r.row.setting,
            vramlab_allocator::format::bytes(r.row.peak_reserved_bytes)
        );
    }
    println!("report: {}", built.index.display());
    Ok(())
}
