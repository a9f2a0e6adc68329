//! `vramlab bench-check`: the regression gate — deterministic metrics of
//! the bundled traces and the real snapshots against a committed baseline.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use vramlab_replay::gate::{Baseline, compare, measure as measure_gate};

/// Arguments of `vramlab bench-check`.
#[derive(Debug, Args)]
pub struct BenchCheckArgs {
    /// The committed baseline (JSON).
    #[arg(value_name = "BASELINE.json")]
    baseline: PathBuf,
    /// Write the baseline from this build instead of checking against it.
    #[arg(long)]
    write: bool,
    /// Folder of traces to replay.
    #[arg(long, value_name = "DIR", default_value = "workloads/data")]
    traces: PathBuf,
    /// Folder of real PyTorch snapshots for the fidelity part (skipped, with
    /// a note, when it does not exist).
    #[arg(long, value_name = "DIR", default_value = "../shared/traces/real")]
    snapshots: PathBuf,
}

fn measure(args: &BenchCheckArgs) -> Result<(Baseline, Vec<String>)> {
    let traces = crate::inputs::folder(&args.traces)?;
    let snapshots = if args.snapshots.is_dir() {
        crate::inputs::folder(&args.snapshots)?
            .into_iter()
            .filter(|(name, _)| name.contains(".pickle") || name.contains(".pkl"))
            .map(|(name, t)| {
                let device = t.header.device;
                let file = name.split('#').next().unwrap_or(&name).to_string();
                (format!("{file}#{device}"), t)
            })
            .collect()
    } else {
        errln!(
            "note: {} not found: the fidelity part is skipped",
            args.snapshots.display()
        );
        Vec::new()
    };
    measure_gate(
        &traces,
        &snapshots,
        "vramlab bench-check BASELINE.json --write",
    )
    .map_err(anyhow::Error::msg)
}

/// Runs `bench-check`: exit 1 on any regression or missing entry.
pub fn run(args: BenchCheckArgs) -> Result<()> {
    let (now, word_problems) = measure(&args)?;
    if args.write {
        std::fs::write(&args.baseline, serde_json::to_string_pretty(&now)? + "\n")
            .with_context(|| format!("cannot write {}", args.baseline.display()))?;
        errln!(
            "wrote {} ({} replays, {} fidelity checks)",
            args.baseline.display(),
            now.replays.len(),
            now.fidelity.len()
        );
        return Ok(());
    }
    let text = std::fs::read_to_string(&args.baseline)
        .with_context(|| format!("cannot read the baseline {}", args.baseline.display()))?;
    let base: Baseline = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a vramlab baseline", args.baseline.display()))?;
    let findings = compare(&base, &now);
    let failed = crate::render::bench::print_gate(&word_problems, &findings, &now, &args.baseline);
    if failed {
        return Err(crate::CheckFailed.into());
    }
    Ok(())
}
