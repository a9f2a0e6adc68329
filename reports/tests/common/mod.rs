//! Data for the plot and report tests: real replays of the bundled trace and
//! synthetic extremes.

#![allow(dead_code)]

pub mod svg;

use std::path::{Path, PathBuf};

use vramlab_allocator::{AllocConf, BlockState, BlockView, PoolKind, SegmentView, TorchVersion};
use vramlab_replay::{ReplayOptions, Scenario, Summary, TimelinePoint};
use vramlab_reports::{
    FitPoint, FitSweep, OomPointResult, Recommendation, ReportInput, SettingResult,
};

/// A fresh, empty folder for one test's output.
pub fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("vramlab-reports")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The phases of a bundled recording.
pub fn phases_of(file: &str) -> Vec<vramlab_traces::PhaseSummary> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workloads/data")
        .join(file);
    let trace = vramlab_replay::Inputs::new([&path]).trace().unwrap();
    vramlab_traces::TraceSummary::of(&trace).phases
}

/// The bundled GPT training-step trace.
pub fn gpt_trace() -> vramlab_traces::Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    vramlab_replay::Inputs::new([&path]).trace().unwrap()
}

/// The bundled GPT training-step trace replayed under `settings` on a card
/// of `capacity_mib`, with segments at the peak.
pub fn replay(settings: &[&str], capacity_mib: u64) -> Vec<SettingResult> {
    let trace = gpt_trace();
    let opts = ReplayOptions {
        segments_at_peak: true,
        check_invariants: false,
        ..ReplayOptions::default()
    };
    settings
        .iter()
        .map(|conf| {
            let c = AllocConf::parse(conf, TorchVersion::NEWEST).unwrap();
            let run = Scenario::native(c)
                .with_capacity(Some(capacity_mib << 20))
                .run(&trace, &opts)
                .unwrap();
            let label = if conf.is_empty() { "default" } else { conf };
            SettingResult::from_run(label, &run)
        })
        .collect()
}

/// A report over real replays, with synthetic OOM points and fit sweep.
pub fn report(settings: Vec<SettingResult>) -> ReportInput {
    let oom_points = settings
        .iter()
        .map(|s| OomPointResult {
            label: s.label.clone(),
            min_capacity: s.summary.peak_reserved_bytes,
            lower_bound: s.summary.peak_requested_bytes,
        })
        .collect();
    let mut points = Vec::new();
    for s in &settings {
        for batch in [1u64, 2, 4, 8, 16] {
            let peak = s.summary.peak_reserved_bytes / 8 * batch;
            points.push(FitPoint {
                setting: s.label.clone(),
                size: batch,
                fits: peak <= 1 << 30,
                peak_reserved: peak.min(1 << 30),
            });
        }
    }
    let best = settings
        .iter()
        .min_by_key(|s| s.summary.peak_reserved_bytes)
        .map(|s| s.label.clone())
        .unwrap_or_default();
    ReportInput {
        title: "vramlab test report".into(),
        trace: "workloads/data/gpt-small-train.csv".into(),
        capacity: Some(1 << 30),
        settings,
        oom_points,
        fit: Some(FitSweep {
            dimension: "batch size".into(),
            capacity: Some(1 << 30),
            points,
        }),
        recommendation: Some(Recommendation {
            setting: best.clone(),
            reason: "Lowest peak reserved.".into(),
            export_lines: vec![format!("export PYTORCH_ALLOC_CONF={best}")],
        }),
        notes: vec!["A note with <html> & \"quotes\".".into()],
        phases: phases_of("gpt-small-train-seq256.csv.gz"),
    }
}

/// `n` segments of mixed sizes (2 MiB small-pool ones and large ones up to
/// `max_mib`), each split into blocks of every state.
pub fn many_segments(n: usize, max_mib: u64) -> Vec<SegmentView> {
    let mut segs = Vec::with_capacity(n);
    let mut ptr = 0x7f00_0000_0000u64;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        // xorshift: deterministic variety.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..n {
        let (pool, size) = if i % 3 == 0 {
            (PoolKind::Small, 2u64 << 20)
        } else {
            (PoolKind::Large, ((next() % max_mib.max(2)) + 2) << 20)
        };
        let mut blocks = Vec::new();
        let mut off = 0u64;
        while off < size {
            let left = size - off;
            let b = if left <= 512 {
                left
            } else {
                ((next() % (left / 512).min(4096)) + 1) * 512
            };
            let state = match next() % 7 {
                0 | 1 => BlockState::Free,
                2 => BlockState::PendingFree,
                _ => BlockState::Allocated,
            };
            blocks.push(BlockView {
                ptr: ptr + off,
                size: b,
                requested: b,
                state,
            });
            off += b;
        }
        segs.push(SegmentView {
            ptr,
            size,
            stream: 0,
            pool,
            is_expandable: false,
            blocks,
        });
        ptr += size + (2 << 20);
    }
    segs
}

/// A setting result with a synthetic timeline scaled to `scale` bytes.
pub fn synthetic(label: &str, scale: u64, points: usize) -> SettingResult {
    let timeline: Vec<TimelinePoint> = (0..points)
        .map(|i| {
            let t = i as f64 / points.max(1) as f64;
            let live = (scale as f64 * (0.5 + 0.4 * (t * 12.0).sin().abs())) as u64;
            TimelinePoint {
                event_index: (i as u64) * 7,
                requested: live,
                allocated: live,
                active: live,
                reserved: scale,
                largest_free: (scale - live) / 3,
            }
        })
        .collect();
    SettingResult {
        label: label.into(),
        summary: Summary {
            peak_requested_bytes: scale / 10 * 9,
            peak_allocated_bytes: scale / 10 * 9,
            peak_active_bytes: scale / 10 * 9,
            peak_reserved_bytes: scale,
            waste_at_peak_bytes: scale / 10,
            utilization: 0.9,
            fragmentation: 0.1,
            ..Summary::default()
        },
        timeline,
        ..SettingResult::default()
    }
}
