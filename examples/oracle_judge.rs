//! PyTorch's own allocator judging vramlab's replay, from the library:
//! the official wheel of a release (installed from PyPI into the oracle's
//! cache on first use, ~6 GB) runs on the fake CUDA device next to
//! vramlab's native policy.
//!
//! ```sh
//! cargo build --release -p vramlab-fakecuda
//! cargo run --release --example oracle_judge -- workloads/data/gpt-small-train.csv 2.15
//! ```

use std::path::PathBuf;

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_oracle::fake::{locate, prepare};
use vramlab_oracle::{Installer, JudgeOptions, cache_dir, judge_trace, oracle_trace};
use vramlab_replay::Scenario;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(
        args.next()
            .unwrap_or("workloads/data/gpt-small-train.csv".into()),
    );
    let release = args.next().unwrap_or("2.15".into());
    let rules: TorchVersion = release.parse().unwrap_or(TorchVersion::NEWEST);

    // The judge: the wheel's interpreter and the fake device for its runtime.
    let interp = Installer::default().ensure(&release)?;
    let fake = prepare(&locate()?, &interp.wheel.soname, &cache_dir())?;

    // The trace both allocators replay, and the settings to compare.
    let trace = vramlab_replay::Inputs::new([&path]).trace()?;
    let (trace, notes) = oracle_trace(&trace);
    notes.iter().for_each(|n| eprintln!("note: {n}"));
    let scenarios: Vec<Scenario> = ["", "expandable_segments:True"]
        .iter()
        .map(|c| AllocConf::parse(c, rules).map(Scenario::native))
        .collect::<Result<_, _>>()?;

    let opts = JudgeOptions {
        interp: &interp,
        fake: &fake,
        work: std::env::temp_dir().join(format!("vramlab-oracle-example-{}", std::process::id())),
        snapshot_out: None,
        vramlab_rules: rules.to_string(),
    };
    let label = path.display().to_string();
    for row in judge_trace(&label, &trace, &scenarios, &opts, |_| {})? {
        println!(
            "{} [{}] torch {}: PyTorch {} B in {:?} cudaMallocs, vramlab {} B in {}: {}",
            row.trace,
            row.setting,
            row.torch_version,
            row.torch_peak_reserved_bytes,
            row.torch_num_device_alloc,
            row.vramlab_peak_reserved_bytes,
            row.vramlab_num_device_alloc,
            row.first_difference.as_deref().unwrap_or("exact")
        );
    }
    Ok(())
}
