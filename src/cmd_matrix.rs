//! `vramlab matrix`: one workload across its remedies (every recorded
//! variant × a few allocator settings): peak reserved, the smallest card,
//! what each saves against the plain baseline, and the largest size that
//! fits the card.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_replay::parse_grid_line;
use vramlab_replay::{MATRIX_SETTINGS, Matrix, MatrixRequest, run_matrix};
use vramlab_workloads::GenRequest;

use crate::args::DeviceArgs;
use crate::render::matrix::{matrix_csv, matrix_table};

/// Arguments of `vramlab matrix`.
#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// Workload preset (`vramlab gen --list`): llama-3-8b-train,
    /// llama-3-8b-infer, sd15, sdxl, flux, gpt-small. Every variant recorded
    /// for it is a row (precision, attention, checkpointing, KV cache, model
    /// size, VAE tiling and slicing, offload, …).
    #[arg(value_name = "WORKLOAD")]
    workload: String,
    /// Sequence length (LLM presets; default: the preset's).
    #[arg(long, value_name = "N")]
    seq: Option<u64>,
    /// Image side in pixels (diffusion presets; a multiple of 64).
    #[arg(long, value_name = "N")]
    resolution: Option<u64>,
    /// Batch size (default 1).
    #[arg(long, value_name = "N")]
    batch: Option<u64>,
    /// Training or denoising steps (default: as recorded).
    #[arg(long, value_name = "N")]
    steps: Option<u32>,
    /// The card (--gpu NAME) or memory (--capacity SIZE): adds whether each
    /// cell fits and the largest size that does.
    #[command(flatten)]
    device: DeviceArgs,
    /// Allocator settings to compare (grid-line syntax; repeat). Default:
    /// default, expandable_segments:True, max_split_size_mb:512,
    /// max_split_size_mb:128, roundup_power2_divisions:4.
    #[arg(long = "conf", value_name = "STR")]
    confs: Vec<String>,
    /// Skip the search for the largest size that fits the card (faster).
    #[arg(long)]
    no_search: bool,
    /// Write the cells as CSV (pandas: pd.read_csv).
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write the matrix as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw the heatmap (matrix.png and matrix.svg) into this folder.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Runs `matrix`.
pub fn run(args: MatrixArgs) -> Result<()> {
    let confs: Vec<String> = if args.confs.is_empty() {
        MATRIX_SETTINGS.iter().map(|s| s.to_string()).collect()
    } else {
        args.confs.clone()
    };
    let settings = confs
        .iter()
        .map(|c| {
            parse_grid_line(c, TorchVersion::NEWEST)
                .map_err(|e| crate::invoke::BadArgument(format!("--conf {c:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let workload = GenRequest {
        preset: args.workload.clone(),
        batch: args.batch,
        seq: args.seq,
        resolution: args.resolution,
        steps: args.steps,
        ..Default::default()
    };
    // The preset and its options are checked before the bar starts.
    let (preset, _) = workload.resolve()?;
    let cells = (preset.variants().len() * settings.len()) as u64;
    let pb = crate::progress::replay_count_bar(cells, args.quiet);
    let m = run_matrix(
        &MatrixRequest {
            workload,
            settings: &settings,
            capacity: args.device.bytes(),
            placement: args.device.placement,
            search_largest: !args.no_search,
        },
        &|| pb.inc(1),
    );
    pb.finish_and_clear();
    let m = m?;
    write_outputs(&args, &m)?;
    out!("{}", matrix_table(&m, args.device.describe().as_deref()));
    Ok(())
}

fn write_outputs(args: &MatrixArgs, m: &Matrix) -> Result<()> {
    if let Some(p) = &args.csv {
        std::fs::write(p, matrix_csv(m))
            .with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {} ({} cells)", p.display(), m.cells.len());
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(m)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {}", p.display());
    }
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let files = vramlab_reports::plot_matrix(&dir.join("matrix"), m)
            .map_err(|e| anyhow::anyhow!("plotting: {e}"))?;
        errln!("wrote {}", files.png.display());
    }
    Ok(())
}
