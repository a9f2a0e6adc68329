//! The regression gate: deterministic metrics of a set of traces under a
//! set of policies, compared with a committed baseline
//! (`vramlab bench-check`).
//!
//! Only numbers that do not depend on the machine are compared: peak
//! reserved bytes, device allocations and frees, OOMs, and fidelity counts.
//! A regression is any increase of peak reserved or device calls, a new
//! OOM, or fewer matched fidelity events; improvements are reported so the
//! baseline can be refreshed with `--write`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use vramlab_traces::Trace;

use crate::analysis::fidelity::check_fidelity;
use crate::analysis::recommend::check_advice_words;
use crate::analysis::sweep::run_sweep;
use crate::engine::start::recorded_conf;
use crate::torch_release::target_of;
use vramlab_allocator::Placement;

/// Deterministic metrics of one (trace, setting) pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateMetrics {
    /// Peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// Device allocations (cudaMalloc + map).
    pub num_device_alloc: u64,
    /// Device frees (cudaFree + unmap).
    pub num_device_free: u64,
    /// Event of the first OOM, or -1.
    pub oom_event: i64,
}

/// Fidelity counts of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateFidelity {
    /// Allocations.
    pub allocs: u64,
    /// Allocations at the recorded address.
    pub alloc_addresses_matched: u64,
    /// Recorded segment events.
    pub segment_events_expected: u64,
    /// Matched segment events.
    pub segment_events_matched: u64,
}

/// A baseline file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Baseline {
    /// What made it.
    pub command: String,
    /// `trace / setting` → metrics.
    pub replays: BTreeMap<String, GateMetrics>,
    /// Snapshot file name → fidelity counts (only where snapshots were
    /// available when the baseline was written).
    pub fidelity: BTreeMap<String, GateFidelity>,
}

/// One finding of a comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Worse than the baseline.
    Regression(String),
    /// Better than the baseline.
    Improvement(String),
    /// In the baseline but not measured now, or measured but not in the
    /// baseline.
    Missing(String),
}

/// The settings the gate and the benchmark cover: PyTorch's defaults and
/// its most used alternatives, and every other policy.
pub(crate) const BENCH_SETTINGS: &[&str] = &[
    "default",
    "expandable_segments:True",
    "max_split_size_mb:128",
    "roundup_power2_divisions:4",
    "policy=direct",
    "policy=bfc allow_growth:true",
    "policy=async",
    "policy=stitch",
];

/// `BENCH_SETTINGS` as grid entries.
pub fn bench_grid() -> Vec<crate::analysis::grid::GridEntry> {
    BENCH_SETTINGS
        .iter()
        .filter_map(|l| {
            crate::analysis::grid::parse_grid_line(l, vramlab_allocator::TorchVersion::NEWEST).ok()
        })
        .collect()
}

/// Measures the gate: every trace under `BENCH_SETTINGS` (in parallel),
/// fidelity of every snapshot, and the advice's words on both. Returns the
/// metrics and the word problems (each names the trace, the capacity and
/// the phrase).
pub fn measure(
    traces: &[(String, Trace)],
    snapshots: &[(String, Trace)],
    command: &str,
) -> Result<(Baseline, Vec<String>), String> {
    let grid = bench_grid();
    let mut b = Baseline {
        command: command.into(),
        ..Default::default()
    };
    let rows = run_sweep(
        traces,
        &grid,
        None,
        Placement::default(),
        None,
        None,
        &|| {},
    )
    .map_err(|(t, s, e)| format!("{t} under {s}: {e}"))?;
    for r in &rows {
        b.replays.insert(
            format!("{} / {}", r.trace, r.setting),
            GateMetrics {
                peak_reserved_bytes: r.peak_reserved_bytes,
                num_device_alloc: r.num_device_alloc,
                num_device_free: r.num_device_free,
                oom_event: r.oom_event,
            },
        );
    }
    let mut words = advice_words(traces, &rows);
    for (name, t) in snapshots {
        // Each snapshot under the rules of the release that wrote it.
        let rules = crate::torch_release::target_of(t, None).rules;
        let conf = recorded_conf(t, rules)?.unwrap_or_default();
        let r = check_fidelity(t, conf).map_err(|e| format!("{name}: {e}"))?;
        b.fidelity.insert(
            name.clone(),
            GateFidelity {
                allocs: r.allocs,
                alloc_addresses_matched: r.alloc_addresses_matched,
                segment_events_expected: r.segment_events_expected,
                segment_events_matched: r.segment_events_matched,
            },
        );
    }
    // The advice on the snapshots too (not part of the baseline).
    let rows = run_sweep(
        snapshots,
        &grid,
        None,
        Placement::default(),
        None,
        None,
        &|| {},
    )
    .map_err(|(t, s, e)| format!("{t} under {s}: {e}"))?;
    words.extend(advice_words(snapshots, &rows));
    Ok((b, words))
}

/// [`check_advice_words`] on each trace's rows.
fn advice_words(
    traces: &[(String, Trace)],
    rows: &[crate::analysis::sweep::SweepRow],
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, t) in traces {
        let mine: Vec<_> = rows.iter().filter(|r| &r.trace == name).cloned().collect();
        let peak_live = vramlab_traces::TraceSummary::of(t).peak_live_bytes;
        let target = target_of(t, None);
        if let Err(e) = check_advice_words(&mine, peak_live, &target) {
            out.push(format!("{name}: {e}"));
        }
    }
    out
}

/// Compares `now` with `base`. Fidelity entries missing from `now` (the
/// snapshots were not available) are not findings.
pub fn compare(base: &Baseline, now: &Baseline) -> Vec<Finding> {
    let mut out = Vec::new();
    for (k, b) in &base.replays {
        let Some(n) = now.replays.get(k) else {
            out.push(Finding::Missing(format!(
                "{k}: in the baseline but not measured"
            )));
            continue;
        };
        let mut cmp = |what: &str, b: u64, n: u64| {
            if n > b {
                out.push(Finding::Regression(format!(
                    "{k}: {what} {b} -> {n} (+{})",
                    n - b
                )));
            } else if n < b {
                out.push(Finding::Improvement(format!(
                    "{k}: {what} {b} -> {n} (-{})",
                    b - n
                )));
            }
        };
        cmp(
            "peak reserved bytes",
            b.peak_reserved_bytes,
            n.peak_reserved_bytes,
        );
        cmp("device allocs", b.num_device_alloc, n.num_device_alloc);
        cmp("device frees", b.num_device_free, n.num_device_free);
        match (b.oom_event, n.oom_event) {
            (-1, e) if e >= 0 => out.push(Finding::Regression(format!(
                "{k}: now runs out of memory at event {e}"
            ))),
            (e, -1) if e >= 0 => out.push(Finding::Improvement(format!(
                "{k}: no longer runs out of memory"
            ))),
            (a, b) if a != b => out.push(Finding::Regression(format!(
                "{k}: OOM moved from event {a} to {b}"
            ))),
            _ => {}
        }
    }
    for k in now.replays.keys() {
        if !base.replays.contains_key(k) {
            out.push(Finding::Missing(format!(
                "{k}: measured but not in the baseline"
            )));
        }
    }
    for (k, b) in &base.fidelity {
        let Some(n) = now.fidelity.get(k) else {
            continue;
        };
        if n.alloc_addresses_matched < b.alloc_addresses_matched
            || n.segment_events_matched < b.segment_events_matched
        {
            out.push(Finding::Regression(format!(
                "{k}: fidelity {}/{} addresses, {}/{} segment events (baseline {}/{}, {}/{})",
                n.alloc_addresses_matched,
                n.allocs,
                n.segment_events_matched,
                n.segment_events_expected,
                b.alloc_addresses_matched,
                b.allocs,
                b.segment_events_matched,
                b.segment_events_expected
            )));
        } else if n != b {
            out.push(Finding::Improvement(format!(
                "{k}: fidelity counts changed without getting worse"
            )));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(peak: u64, allocs: u64, oom: i64) -> GateMetrics {
        GateMetrics {
            peak_reserved_bytes: peak,
            num_device_alloc: allocs,
            num_device_free: 0,
            oom_event: oom,
        }
    }

    #[test]
    fn regressions_improvements_and_missing() {
        let mut base = Baseline::default();
        base.replays.insert("t / default".into(), m(100, 5, -1));
        base.replays.insert("t / expandable".into(), m(90, 5, -1));
        base.replays.insert("t / gone".into(), m(1, 1, -1));
        let mut now = Baseline::default();
        now.replays.insert("t / default".into(), m(110, 5, 7));
        now.replays.insert("t / expandable".into(), m(80, 4, -1));
        now.replays.insert("t / new".into(), m(1, 1, -1));
        let f = compare(&base, &now);
        let regressions: Vec<_> = f
            .iter()
            .filter(|x| matches!(x, Finding::Regression(_)))
            .collect();
        assert_eq!(regressions.len(), 2, "{f:?}");
        assert_eq!(
            f.iter()
                .filter(|x| matches!(x, Finding::Improvement(_)))
                .count(),
            2
        );
        assert_eq!(
            f.iter()
                .filter(|x| matches!(x, Finding::Missing(_)))
                .count(),
            2
        );
        assert!(compare(&base, &base).is_empty());
    }
}
