//! `vramlab fit`: the largest batch, sequence length or resolution of a
//! generated workload that fits a GPU, per setting.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use rayon::prelude::*;
use vramlab_allocator::TorchVersion;
use vramlab_replay::max_fitting_size;
use vramlab_replay::parse_grid_line;
use vramlab_reports::FitChart;
use vramlab_workloads::{GenRequest, generate};

use crate::render::fit::FitHeading;

/// The dimension to vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Vary {
    /// Batch size.
    Batch,
    /// Sequence length (LLM presets).
    Seq,
    /// Image side in pixels (diffusion presets; multiples of 64).
    Resolution,
}

/// Arguments of `vramlab fit`.
#[derive(Debug, Args)]
pub struct FitArgs {
    #[command(flatten)]
    workload: crate::cmd_gen::GenArgs,
    /// The dimension to grow.
    #[arg(long, value_enum)]
    vary: Vary,
    /// The card (--gpu NAME) or memory (--capacity SIZE) the job may use.
    #[command(flatten)]
    device: crate::args::DeviceArgs,
    /// Settings to compare (grid-line syntax; repeat). Default: PyTorch's
    /// defaults and expandable_segments:True.
    #[arg(long = "conf", value_name = "STR")]
    confs: Vec<String>,
    /// Largest size to try.
    #[arg(long, value_name = "N")]
    max: Option<u64>,
    /// Also plot peak reserved against the size into this folder (fit.png/svg).
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `fit`.
pub fn run(args: FitArgs) -> Result<()> {
    let Some(capacity) = args.device.bytes() else {
        anyhow::bail!(
            "fit needs the card: --gpu NAME (`vramlab gpus` lists them) or --capacity SIZE"
        );
    };
    let base: GenRequest = crate::cmd_gen::request(&args.workload)?;
    let (preset, _) = base.resolve()?;
    let (start, step, limit) = match args.vary {
        Vary::Batch => (1, 1, args.max.unwrap_or(4096)),
        Vary::Seq => (128, 1, args.max.unwrap_or(1 << 20)),
        Vary::Resolution => (64, 64, args.max.unwrap_or(8192)),
    };
    let make = |n: u64| -> Result<vramlab_traces::Trace, String> {
        let mut r = base.clone();
        match args.vary {
            Vary::Batch => r.batch = Some(n),
            Vary::Seq => r.seq = Some(n),
            Vary::Resolution => r.resolution = Some(n * step),
        }
        generate(&r).map(|(t, _)| t).map_err(|e| e.to_string())
    };
    let confs = if args.confs.is_empty() {
        vec![
            "default".to_string(),
            "expandable_segments:True".to_string(),
        ]
    } else {
        args.confs.clone()
    };
    let (lo, hi) = if args.vary == Vary::Resolution {
        (start / step, limit / step)
    } else {
        (start, limit)
    };
    if lo > hi {
        bail!("--max {limit} is below the smallest size tried ({start})");
    }
    let entries = confs
        .iter()
        .map(|c| {
            parse_grid_line(c, TorchVersion::NEWEST)
                .map_err(|e| anyhow::anyhow!("--conf {c:?}: {e}"))
        })
        .collect::<Result<Vec<_>>>()?;
    // One search per setting, on all cores; results in the settings' order.
    let results = entries
        .par_iter()
        .map(|entry: &vramlab_replay::GridEntry| {
            let s = entry
                .scenario(Some(capacity))
                .with_placement(args.device.placement);
            max_fitting_size(&make, &s, lo, hi)
                .with_context(|| format!("searching under {}", entry.label()))
        })
        .collect::<Vec<_>>()
        .into_iter()
        // The first failure in the settings' order, whichever thread hit it.
        .collect::<Result<Vec<_>>>()?;
    let chart = FitChart {
        dimension: match args.vary {
            Vary::Batch => "batch size".into(),
            Vary::Seq => "sequence length (tokens)".into(),
            Vary::Resolution => "resolution (pixels)".into(),
        },
        capacity: Some(capacity),
        size_step: step,
        searches: results,
    };
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        vramlab_reports::plot_fit(&dir.join("fit"), &chart)
            .map_err(|e| anyhow::anyhow!("plotting: {e}"))?;
        errln!("wrote {}", dir.join("fit.png").display());
    }
    crate::render::fit::print_fits(
        &chart.searches,
        &FitHeading {
            workload: preset.name,
            capacity,
            dimension: &chart.dimension,
            step,
        },
        args.json,
    )
}
