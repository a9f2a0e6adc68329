//! Data for the plot and report tests: real replays of the bundled trace and
//! synthetic extremes.

#![allow(dead_code)]

pub mod svg;

use std::path::{Path, PathBuf};

use vramlab_allocator::{AllocConf, BlockState, BlockView, PoolKind, SegmentView, TorchVersion};
use vramlab_replay::OomPoint;
use vramlab_replay::SweepRow;
use vramlab_replay::{FitProbe, FitResult};
use vramlab_replay::{Ranked, Recommendation, Verdict};
use vramlab_replay::{ReplayOptions, Run, Scenario, Summary, TimelinePoint};
use vramlab_reports::{FitChart, ReportInput, SettingRun};

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
pub fn replay(settings: &[&str], capacity_mib: u64) -> Vec<SettingRun> {
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
            SettingRun::new(label, run)
        })
        .collect()
}

/// A replay with only a summary and a timeline.
pub fn setting(label: &str, summary: Summary, timeline: Vec<TimelinePoint>) -> SettingRun {
    SettingRun::new(
        label,
        Run {
            summary,
            timeline,
            ..Run::default()
        },
    )
}

/// An OOM point with only its answer and its lower bound.
pub fn oom_point(label: &str, min_capacity: u64, lower_bound: u64) -> OomPoint {
    OomPoint {
        setting: label.into(),
        min_capacity,
        lower_bound,
        unlimited_peak_reserved: min_capacity,
        verified: true,
        not_monotone_at: Vec::new(),
        replays: 1,
        start: None,
        start_reserved_bytes: None,
    }
}

/// Fit searches made of `(setting, size, fits, peak reserved)` probes, one
/// search per setting in order of first appearance.
pub fn fit_chart(
    dimension: &str,
    capacity: Option<u64>,
    probes: &[(&str, u64, bool, u64)],
) -> FitChart {
    let mut searches: Vec<FitResult> = Vec::new();
    for &(setting, size, fits, peak) in probes {
        let probe = FitProbe {
            size,
            fits,
            peak_reserved_bytes: peak,
            peak_requested_bytes: peak,
        };
        match searches.iter_mut().find(|r| r.setting == setting) {
            Some(r) => r.probes.push(probe),
            None => searches.push(FitResult {
                setting: setting.into(),
                max_size: None,
                hit_limit: false,
                probes: vec![probe],
            }),
        }
    }
    for r in &mut searches {
        r.probes.sort_by_key(|p| p.size);
        r.max_size = r.probes.iter().filter(|p| p.fits).map(|p| p.size).max();
    }
    FitChart {
        dimension: dimension.into(),
        capacity,
        size_step: 1,
        searches,
    }
}

/// A recommendation of the setting `label` (peak reserved `peak`), the
/// first and only one ranked, with `why` and one export line.
pub fn recommend(label: &str, peak: u64, why: &str) -> Recommendation {
    let row = SweepRow {
        index: 0,
        trace: "gpt-small-train.csv".into(),
        setting: label.into(),
        policy: "native".into(),
        grid_line: label.into(),
        capacity: 1 << 30,
        events: 0,
        peak_requested_bytes: peak,
        peak_allocated_bytes: peak,
        peak_reserved_bytes: peak,
        waste_at_peak_bytes: 0,
        utilization: 1.0,
        num_device_alloc: 0,
        num_device_free: 0,
        num_sync_all_streams: 0,
        num_alloc_retries: 0,
        device_time_us: 0.0,
        oom_event: -1,
        oom_requested_bytes: 0,
        start: String::new(),
        oom_at_start: false,
        same_as: String::new(),
        placement_free: false,
    };
    Recommendation {
        ranked: vec![Ranked {
            rank: 1,
            row,
            headroom_bytes: (1i64 << 30) - peak as i64,
        }],
        other_policies: Vec::new(),
        verdict: Verdict::UseSetting,
        why: why.into(),
        torch: "2.11".into(),
        export: vec![(
            "bash/zsh".into(),
            format!("export PYTORCH_ALLOC_CONF={label}"),
        )],
        python: None,
        placement_ranges: Vec::new(),
        placement_note: None,
        min_capacities: Vec::new(),
        host: None,
    }
}

/// A report over real replays, with synthetic OOM points and fit sweep.
pub fn report(settings: Vec<SettingRun>) -> ReportInput {
    let oom_points = settings
        .iter()
        .map(|s| {
            let m = &s.run.summary;
            oom_point(&s.label, m.peak_reserved_bytes, m.peak_requested_bytes)
        })
        .collect();
    let mut probes = Vec::new();
    for s in &settings {
        for batch in [1u64, 2, 4, 8, 16] {
            let peak = s.run.summary.peak_reserved_bytes / 8 * batch;
            probes.push((s.label.as_str(), batch, peak <= 1 << 30, peak.min(1 << 30)));
        }
    }
    let fit = fit_chart("batch size", Some(1 << 30), &probes);
    let best = settings
        .iter()
        .min_by_key(|s| s.run.summary.peak_reserved_bytes)
        .map(|s| {
            recommend(
                &s.label,
                s.run.summary.peak_reserved_bytes,
                "Lowest peak reserved.",
            )
        });
    ReportInput {
        title: "vramlab test report".into(),
        trace: "workloads/data/gpt-small-train.csv".into(),
        capacity: Some(1 << 30),
        settings,
        oom_points,
        fit: Some(fit),
        recommendation: best,
        notes: vec!["A note with <html> & \"quotes\".".into()],
        phases: phases_of("gpt-small-train-seq256.csv.gz"),
        pools: Vec::new(),
        explanation: None,
        explore: None,
        upgrade: None,
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
            private_pool: None,
            is_expandable: false,
            blocks,
        });
        ptr += size + (2 << 20);
    }
    segs
}

/// A setting result with a synthetic timeline scaled to `scale` bytes.
pub fn synthetic(label: &str, scale: u64, points: usize) -> SettingRun {
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
    let summary = Summary {
        peak_requested_bytes: scale / 10 * 9,
        peak_allocated_bytes: scale / 10 * 9,
        peak_active_bytes: scale / 10 * 9,
        peak_reserved_bytes: scale,
        waste_at_peak_bytes: scale / 10,
        utilization: 0.9,
        fragmentation: 0.1,
        ..Summary::default()
    };
    setting(label, summary, timeline)
}
