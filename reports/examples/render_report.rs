//! Replay a trace under a few allocator settings and write an HTML report
//! with every plot.
//!
//!     cargo run -p vramlab-reports --example render_report -- OUT_DIR [TRACE] [CAPACITY_MIB]
//!
//! TRACE defaults to the bundled `workloads/data/gpt-small-train.csv`,
//! CAPACITY_MIB to 1024. Besides the replays at that capacity, the example
//! searches each setting's minimum capacity (OOM point) and sweeps a
//! synthetic batch size: every allocation that is freed within the trace
//! (activations, temporaries) is scaled by batch / 8, the ones that live to
//! the end (weights, optimizer state) are kept, and the result is replayed
//! on a 2 GiB card.

use std::error::Error;
use std::path::PathBuf;

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{ReplayOptions, Scenario};
use vramlab_reports::{
    FitPoint, FitSweep, OomPointResult, Recommendation, ReportInput, SettingResult, format_bytes,
    write_report,
};
use vramlab_traces::{Event, Trace};

const SETTINGS: [&str; 4] = [
    "",
    "expandable_segments:True",
    "max_split_size_mb:128",
    "roundup_power2_divisions:4",
];

fn label(conf: &str) -> String {
    if conf.is_empty() {
        "default".to_string()
    } else {
        conf.to_string()
    }
}

fn scenario(conf: &str, capacity: Option<u64>) -> Result<Scenario, Box<dyn Error>> {
    let conf = AllocConf::parse(conf, TorchVersion::NEWEST)?;
    Ok(Scenario::native(conf).with_capacity(capacity))
}

fn fast() -> ReplayOptions {
    ReplayOptions {
        check_invariants: false,
        ..ReplayOptions::default()
    }
}

/// Smallest capacity (to 1 MiB) at which `trace` replays without an OOM.
fn min_capacity(trace: &Trace, conf: &str) -> Result<u64, Box<dyn Error>> {
    let unlimited = scenario(conf, None)?.run(trace, &fast())?;
    let mib = 1u64 << 20;
    let (mut lo, mut hi) = (
        unlimited.summary.peak_requested_bytes / mib,
        unlimited.summary.peak_reserved_bytes.div_ceil(mib),
    );
    // Invariant: hi fits; lo - 1 is below the lower bound.
    while lo < hi {
        let mid = (lo + hi) / 2;
        let run = scenario(conf, Some(mid * mib))?.run(trace, &fast())?;
        if run.oom.is_none() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(hi * mib)
}

/// The trace with every allocation that is freed within it scaled by
/// `factor`.
fn scale_batch(trace: &Trace, factor: f64) -> Trace {
    let mut freed = vec![false; trace.num_ids as usize];
    for e in &trace.events {
        if let Event::Free { id } | Event::FreeRequested { id } = *e {
            if let Some(f) = freed.get_mut(id as usize) {
                *f = true;
            }
        }
    }
    let mut t = trace.clone();
    for e in &mut t.events {
        if let Event::Alloc { id, size, .. } = e {
            if freed.get(*id as usize).copied().unwrap_or(false) {
                *size = ((*size as f64 * factor).ceil() as u64).max(1);
            }
        }
    }
    t
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(
        args.next()
            .ok_or("usage: render_report OUT_DIR [TRACE] [CAPACITY_MIB]")?,
    );
    let trace_path = args.next().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv")
    });
    let capacity_mib: u64 = match args.next() {
        Some(s) => s.parse()?,
        None => 1024,
    };
    let capacity = capacity_mib << 20;
    let trace = vramlab_replay::Inputs::new([&trace_path]).trace()?;

    let opts = ReplayOptions {
        segments_at_peak: true,
        ..fast()
    };
    let mut settings = Vec::new();
    let mut oom_points = Vec::new();
    for conf in SETTINGS {
        let run = scenario(conf, Some(capacity))?.run(&trace, &opts)?;
        let min = min_capacity(&trace, conf)?;
        // The lower bound of the whole trace (a replay that hit an OOM
        // stopped before the peak).
        let unlimited = scenario(conf, None)?.run(&trace, &fast())?;
        oom_points.push(OomPointResult {
            label: label(conf),
            min_capacity: min,
            lower_bound: unlimited.summary.peak_requested_bytes,
        });
        settings.push(SettingResult::from_run(label(conf), &run).with_min_capacity(Some(min)));
    }

    let fit_capacity = 2u64 << 30;
    let mut points = Vec::new();
    for batch in [1u64, 2, 4, 8, 12, 16, 24, 32] {
        let scaled = scale_batch(&trace, batch as f64 / 8.0);
        for conf in SETTINGS {
            let run = scenario(conf, Some(fit_capacity))?.run(&scaled, &fast())?;
            points.push(FitPoint {
                setting: label(conf),
                size: batch,
                fits: run.oom.is_none(),
                peak_reserved: run.summary.peak_reserved_bytes,
            });
        }
    }

    let best = settings
        .iter()
        .filter(|s| s.oom.is_none())
        .min_by_key(|s| s.summary.peak_reserved_bytes);
    let recommendation = best.map(|b| Recommendation {
        setting: b.label.clone(),
        reason: format!(
            "Lowest peak reserved without an OOM: {} for {} of live tensors.",
            format_bytes(b.summary.peak_reserved_bytes),
            format_bytes(b.summary.peak_requested_bytes)
        ),
        export_lines: vec![if b.label == "default" {
            "unset PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF".to_string()
        } else {
            format!("export PYTORCH_ALLOC_CONF={}", b.label)
        }],
    });

    let report = ReportInput {
        title: format!(
            "vramlab: {}",
            trace_path
                .file_name()
                .map_or("trace".into(), |n| n.to_string_lossy())
        ),
        trace: trace_path.display().to_string(),
        capacity: Some(capacity),
        settings,
        oom_points,
        fit: Some(FitSweep {
            dimension: "batch size".to_string(),
            capacity: Some(fit_capacity),
            points,
        }),
        recommendation,
        notes: vec![
            "Replayed on a simulated GPU with PyTorch's native caching allocator.".to_string(),
            "The batch-size sweep scales every allocation freed within the trace by batch / 8 \
             (a synthetic stand-in for re-recording the workload)."
                .to_string(),
        ],
        phases: vramlab_traces::TraceSummary::of(&trace).phases,
    };
    let index = write_report(&out, &report)?;
    println!("{}", index.display());
    Ok(())
}
