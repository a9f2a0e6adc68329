//! A workload's remedies side by side, and two jobs in one process, from
//! the library: what `vramlab matrix` and `vramlab concat` do.
//!
//!     cargo run --release --example remedies
//!
//! Prints every recorded variant of Stable Diffusion 1.5 at 768 px under
//! PyTorch's defaults and `expandable_segments:True` on a 6 GiB card, then
//! the smallest capacity of two GPT training jobs run one after the other,
//! with and without `torch.cuda.empty_cache()` between them.

use vramlab_allocator::{Placement, TorchVersion};
use vramlab_replay::find_oom_point;
use vramlab_replay::parse_grid_line;
use vramlab_replay::{MatrixRequest, run_matrix};
use vramlab_replay::{Scenario, Start};
use vramlab_workloads::GenRequest;

type Error = Box<dyn std::error::Error>;

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

fn main() -> Result<(), Error> {
    let settings = ["default", "expandable_segments:True"]
        .iter()
        .map(|s| parse_grid_line(s, TorchVersion::NEWEST))
        .collect::<Result<Vec<_>, _>>()?;
    let m = run_matrix(
        &MatrixRequest {
            workload: GenRequest {
                preset: "sd15".into(),
                resolution: Some(768),
                ..Default::default()
            },
            settings: &settings,
            capacity: Some(6 << 30),
            placement: Placement::default(),
            search_largest: false,
        },
        &|| {},
    )?;
    println!(
        "sd15 at 768 px on 6 GiB (baseline: {}):",
        m.baseline_variant
    );
    for c in &m.cells {
        println!(
            "  {:<60} {:<26} {:>6.2} GiB  {:+6.1}%  fits: {}",
            c.variant,
            c.setting,
            gib(c.peak_reserved_bytes),
            -100.0 * c.saved_vs_baseline,
            c.fits.unwrap_or(false)
        );
    }

    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/data");
    let read = |f: &str| vramlab_replay::Inputs::new([&std::path::Path::new(data).join(f)]).trace();
    let (a, b) = (
        read("gpt-small-train-seq128.csv.gz")?,
        read("gpt-small-train-seq512.csv.gz")?,
    );
    let defaults = Scenario::native(vramlab_allocator::AllocConf::new(TorchVersion::NEWEST));
    for empty_cache in [false, true] {
        let both = vramlab_traces::concat(&a, &b, empty_cache)?;
        let p = find_oom_point(&both, &defaults, Start::Fresh)?;
        println!(
            "job A then job B{}: smallest capacity {:.3} GiB",
            if empty_cache {
                ", empty_cache() between"
            } else {
                ""
            },
            gib(p.min_capacity)
        );
    }
    Ok(())
}
