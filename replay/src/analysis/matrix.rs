//! One workload across its remedies: every recorded variant of a preset
//! (precision, attention, checkpointing, KV cache, …) under a few
//! allocator settings, each cell with its peak reserved, the smallest
//! capacity and card it runs on, what it saves against the plain
//! baseline, and the largest size that fits a given card.
//!
//! The guides users follow give fixed numbers for such remedies ("4-bit
//! saves 65–70%", "FlashAttention saves 30–40%"); a matrix measures them on
//! the user's workload and size.

use rayon::prelude::*;
use serde::Serialize;
use vramlab_allocator::Placement;
use vramlab_traces::Trace;
use vramlab_workloads::{GenRequest, Preset, Scaling, Variant, generate};

use crate::analysis::fit::{FitError, max_fitting_size};
use crate::analysis::grid::GridEntry;
use crate::analysis::oom_point::find_oom_point;
use crate::engine::ReplayError;
use crate::engine::start::Start;
use crate::gpus::smallest_gpu_for;

/// The allocator settings a matrix compares when none are given: the
/// defaults and the ones the guides recommend.
pub const MATRIX_SETTINGS: [&str; 5] = [
    "default",
    "expandable_segments:True",
    "max_split_size_mb:512",
    "max_split_size_mb:128",
    "roundup_power2_divisions:4",
];

/// What to measure.
#[derive(Debug, Clone)]
pub struct MatrixRequest<'a> {
    /// The workload at its size: preset, batch, sequence or resolution,
    /// steps (its variant options are ignored: every recorded variant is a
    /// row).
    pub workload: GenRequest,
    /// The allocator settings (columns).
    pub settings: &'a [GridEntry],
    /// The card's usable memory (`None`: no fit columns).
    pub capacity: Option<u64>,
    /// Where the simulated driver places segments.
    pub placement: Placement,
    /// Search the largest size that fits the card, per cell.
    pub search_largest: bool,
}

/// One cell: a variant under a setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixCell {
    /// The variant as `vramlab gen` options (`--precision nf4 --attention
    /// flash --kv-cache dynamic`).
    pub variant: String,
    /// The setting's label.
    pub setting: String,
    /// Peak reserved bytes on an unlimited device.
    pub peak_reserved_bytes: u64,
    /// Peak of live (requested) bytes: what no allocator setting can beat.
    pub peak_live_bytes: u64,
    /// The smallest capacity it runs on without OOM.
    pub min_capacity_bytes: u64,
    /// The smallest named card with that much usable memory.
    pub smallest_gpu: Option<String>,
    /// Peak reserved saved against the baseline cell, as a fraction of the
    /// baseline's (negative: more memory).
    pub saved_vs_baseline: f64,
    /// Runs on the card without OOM (`None` without a card).
    pub fits: Option<bool>,
    /// The largest size (seq, resolution) that fits the card, when
    /// searched (`None`: not searched, or not even the smallest fits).
    pub largest_fitting: Option<u64>,
    /// The search reached its upper limit: at least this size fits.
    pub largest_hit_limit: bool,
    /// Why the largest size was not searched, when it was asked for.
    pub search_note: Option<String>,
}

/// A preset's matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Matrix {
    /// Preset name.
    pub preset: String,
    /// The scaling parameter (`seq`, `resolution`).
    pub dimension: String,
    /// Its value.
    pub size: u64,
    /// Batch size.
    pub batch: u64,
    /// The card's usable memory, if one was given.
    pub capacity: Option<u64>,
    /// The largest size that fits the card was searched.
    pub searched_largest: bool,
    /// The baseline: the preset's default variant under PyTorch's defaults
    /// (or the first setting when the defaults are not compared).
    pub baseline_variant: String,
    /// The baseline's setting.
    pub baseline_setting: String,
    /// Row labels (variants), in order.
    pub variants: Vec<String>,
    /// Column labels (settings), in order.
    pub settings: Vec<String>,
    /// Cells, row by row.
    pub cells: Vec<MatrixCell>,
    /// Variants left out, and why (the generator cannot make them at this
    /// size).
    pub notes: Vec<String>,
}

impl Matrix {
    /// The cell of `variant` under `setting`.
    pub fn cell(&self, variant: &str, setting: &str) -> Option<&MatrixCell> {
        self.cells
            .iter()
            .find(|c| c.variant == variant && c.setting == setting)
    }
}

/// Why a matrix could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The workload generator refused the request or failed.
    #[error("{0}")]
    Generate(String),
    /// The preset has no recorded variant.
    #[error("{0} has no recorded variants")]
    NoVariants(String),
    /// No settings to compare.
    #[error("no allocator settings to compare")]
    NoSettings,
    /// A replay failed (not an OOM: that is a result).
    #[error("{variant} under {setting}: {error}")]
    Replay {
        /// The row, in the running front end's words.
        variant: String,
        /// The column.
        setting: String,
        /// What failed.
        error: ReplayError,
    },
    /// The largest-size search failed.
    #[error("{variant} under {setting}: {error}")]
    Fit {
        /// The row, in the running front end's words.
        variant: String,
        /// The column.
        setting: String,
        /// What failed.
        error: FitError,
    },
}

/// The search range of the largest fitting size, in the fit search's units
/// (resolution in steps of 64 pixels) and the unit.
fn search_range(p: &Preset) -> (u64, u64, u64) {
    match p.scaling {
        Scaling::Seq => (128, 1 << 20, 1),
        Scaling::Resolution => (1, 128, 64),
    }
}

/// Measures every recorded variant of the workload's preset under every
/// setting, on all cores. `progress` is called once per finished cell.
pub fn run_matrix(
    req: &MatrixRequest<'_>,
    progress: &(dyn Fn() + Sync),
) -> Result<Matrix, MatrixError> {
    let (preset, _) = req
        .workload
        .resolve()
        .map_err(|e| MatrixError::Generate(e.to_string()))?;
    if req.settings.is_empty() {
        return Err(MatrixError::NoSettings);
    }
    let default_variant = Variant::default_for(preset);
    let mut variants: Vec<Variant> = preset.variants().into_keys().collect();
    if variants.is_empty() {
        return Err(MatrixError::NoVariants(preset.name.to_string()));
    }
    // The baseline row first.
    variants.sort_by_key(|v| *v != default_variant);
    // Variants that come out the same at this size (a VAE tile grid that
    // does not engage at this resolution) are one row, named for what the
    // generator makes.
    let mut seen = Vec::new();
    variants.retain(|v| {
        let made = req
            .workload
            .for_variant(v)
            .resolve()
            .map_or(*v, |(_, made)| made);
        let new = !seen.contains(&made);
        seen.push(made);
        new
    });
    let generated: Vec<Result<(Variant, Trace), String>> = variants
        .par_iter()
        .map(|v: &Variant| {
            generate(&req.workload.for_variant(v))
                .map(|(t, _)| (*v, t))
                .map_err(|e| format!("{}: {e}", v.words(preset)))
        })
        .collect();
    // A variant the generator cannot make at this size is left out with a
    // note; the baseline (first) must be made.
    let mut traces: Vec<(Variant, Trace)> = Vec::new();
    let mut notes = Vec::new();
    for (k, g) in generated.into_iter().enumerate() {
        match g {
            Ok(t) => traces.push(t),
            Err(e) if k == 0 => return Err(MatrixError::Generate(e)),
            Err(e) => notes.push(format!("left out {e}")),
        }
    }
    let variants: Vec<Variant> = traces.iter().map(|(v, _)| *v).collect();
    let pairs: Vec<(usize, usize)> = (0..traces.len())
        .flat_map(|t| (0..req.settings.len()).map(move |s| (t, s)))
        .collect();
    let mut cells: Vec<MatrixCell> = pairs
        .par_iter()
        .map(|&(t, s): &(usize, usize)| {
            let cell = measure(req, preset, &traces, t, s);
            progress();
            cell
        })
        .collect::<Vec<_>>()
        .into_iter()
        // The first failure in cell order, whichever thread hit it.
        .collect::<Result<_, _>>()?;
    let settings: Vec<String> = req.settings.iter().map(GridEntry::label).collect();
    let baseline_setting = settings
        .iter()
        .find(|s| *s == "default")
        .or(settings.first())
        .cloned()
        .unwrap_or_default();
    let baseline_variant = default_variant.describe(preset);
    let base_peak = cells
        .iter()
        .find(|c| c.variant == baseline_variant && c.setting == baseline_setting)
        .or(cells.first())
        .map_or(0, |c| c.peak_reserved_bytes);
    for c in &mut cells {
        c.saved_vs_baseline = if base_peak == 0 {
            0.0
        } else {
            1.0 - c.peak_reserved_bytes as f64 / base_peak as f64
        };
    }
    let size = match preset.scaling {
        Scaling::Seq => req.workload.seq,
        Scaling::Resolution => req.workload.resolution,
    }
    .unwrap_or(preset.default_value);
    Ok(Matrix {
        preset: preset.name.to_string(),
        dimension: preset.scaling.param().to_string(),
        size,
        batch: req.workload.batch.unwrap_or(1),
        capacity: req.capacity,
        searched_largest: req.search_largest && req.capacity.is_some(),
        baseline_variant,
        baseline_setting,
        variants: variants.iter().map(|v| v.describe(preset)).collect(),
        settings,
        cells,
        notes,
    })
}

/// One cell: the replay on an unlimited device, the OOM point, and the
/// largest size that fits the card.
fn measure(
    req: &MatrixRequest<'_>,
    preset: &Preset,
    traces: &[(Variant, Trace)],
    t: usize,
    s: usize,
) -> Result<MatrixCell, MatrixError> {
    let (Some((variant, trace)), Some(entry)) = (traces.get(t), req.settings.get(s)) else {
        return Err(MatrixError::NoSettings);
    };
    let label = variant.describe(preset);
    let replay_err = |error| MatrixError::Replay {
        variant: variant.words(preset),
        setting: entry.label(),
        error,
    };
    let scenario = entry.scenario(None).with_placement(req.placement);
    let point = find_oom_point(trace, &scenario, Start::Fresh).map_err(replay_err)?;
    let mut cell = MatrixCell {
        variant: label.clone(),
        setting: entry.label(),
        peak_reserved_bytes: point.unlimited_peak_reserved,
        peak_live_bytes: point.lower_bound,
        min_capacity_bytes: point.min_capacity,
        smallest_gpu: smallest_gpu_for(point.min_capacity).map(|g| g.name.to_string()),
        saved_vs_baseline: 0.0,
        fits: req.capacity.map(|c| point.min_capacity <= c),
        largest_fitting: None,
        largest_hit_limit: false,
        search_note: None,
    };
    if let (true, Some(capacity)) = (req.search_largest, req.capacity) {
        let (lo, hi, unit) = search_range(preset);
        let base = req.workload.for_variant(variant);
        let make = |n: u64| -> Result<Trace, String> {
            let mut r = base.clone();
            match preset.scaling {
                Scaling::Seq => r.seq = Some(n),
                Scaling::Resolution => r.resolution = Some(n * unit),
            }
            generate(&r).map(|(t, _)| t).map_err(|e| e.to_string())
        };
        let s = scenario.with_capacity(Some(capacity));
        match max_fitting_size(&make, &s, lo, hi) {
            Ok(found) => {
                cell.largest_fitting = found.max_size.map(|n| n * unit);
                cell.largest_hit_limit = found.hit_limit;
            }
            // A size the generator has no recording for (a tile grid of
            // another resolution): the search stops, the cell says so.
            Err(FitError::Generate { size, message }) => {
                cell.search_note = Some(format!(
                    "largest size not searched: {} {} cannot be generated ({message})",
                    preset.scaling.param(),
                    size * unit
                ));
            }
            Err(error) => {
                return Err(MatrixError::Fit {
                    variant: variant.words(preset),
                    setting: entry.label(),
                    error,
                });
            }
        }
    }
    Ok(cell)
}
