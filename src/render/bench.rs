//! The policy benchmark (`vramlab bench`) as a table, Markdown (for
//! docs/bench/table.md) and CSV; the regression gate's findings
//! (`vramlab bench-check`).

use std::path::Path;

use vramlab_replay::BenchRow;
use vramlab_replay::gate::{Baseline, Finding};

use crate::render::replay::csv_quote;
use crate::render::table::{Table, bytes, count, percent};

/// Peak reserved over the live-bytes bound, as a share.
fn over_bound(r: &BenchRow) -> f64 {
    let s = &r.summary;
    s.peak_reserved_bytes as f64 / s.peak_requested_bytes.max(1) as f64 - 1.0
}

/// Device calls (mallocs and frees).
fn device_calls(r: &BenchRow) -> u64 {
    r.summary.num_device_alloc + r.summary.num_device_free
}

/// One row per trace × policy: memory against the bound, device calls and
/// replay speed.
pub fn bench_table(rows: &[BenchRow]) -> String {
    let mut tab = Table::new(vec![
        "trace".into(),
        "policy / setting".into(),
        "peak reserved".into(),
        "live bound".into(),
        "over bound".into(),
        "utilization".into(),
        "device calls".into(),
        "events/s".into(),
    ])
    .left(1);
    for r in rows {
        let s = &r.summary;
        tab.row(vec![
            r.trace.clone(),
            r.setting.clone(),
            bytes(s.peak_reserved_bytes),
            bytes(s.peak_requested_bytes),
            percent(over_bound(r)),
            percent(s.utilization),
            count(device_calls(r)),
            format!("{:.1} M", r.events_per_second / 1e6),
        ]);
    }
    tab.render()
}

/// The table as Markdown (docs/bench/table.md).
pub fn bench_markdown(rows: &[BenchRow]) -> String {
    let mut md = String::from(
        "| trace | policy / setting | peak reserved | live-bytes bound | over bound | utilization | device calls | replay events/s |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let s = &r.summary;
        md.push_str(&format!(
            "| {} | {} | {} | {} | +{} | {} | {} | {:.1} M |\n",
            r.trace,
            r.setting.replace('|', "\\|"),
            bytes(s.peak_reserved_bytes),
            bytes(s.peak_requested_bytes),
            percent(over_bound(r)),
            percent(s.utilization),
            count(device_calls(r)),
            r.events_per_second / 1e6
        ));
    }
    md
}

/// The rows as CSV (exact bytes).
pub fn bench_csv(rows: &[BenchRow]) -> String {
    let mut csv = String::from(
        "trace,setting,events,peak_requested_bytes,peak_reserved_bytes,utilization,num_device_alloc,num_device_free,events_per_second\n",
    );
    for r in rows {
        let s = &r.summary;
        csv.push_str(&format!(
            "{},{},{},{},{},{:.6},{},{},{:.0}\n",
            csv_quote(&r.trace),
            csv_quote(&r.setting),
            r.events,
            s.peak_requested_bytes,
            s.peak_reserved_bytes,
            s.utilization,
            s.num_device_alloc,
            s.num_device_free,
            r.events_per_second
        ));
    }
    csv
}

/// Prints the gate's findings and its verdict against `baseline` (read
/// from `path`); returns whether it failed (a problem with the advice's
/// words, a regression or a missing entry).
pub fn print_gate(
    word_problems: &[String],
    findings: &[Finding],
    now: &Baseline,
    path: &Path,
) -> bool {
    let mut failed = !word_problems.is_empty();
    for w in word_problems {
        outln!("WORDS       {w}");
    }
    for f in findings {
        match f {
            Finding::Regression(m) => {
                failed = true;
                outln!("REGRESSION  {m}");
            }
            Finding::Missing(m) => {
                failed = true;
                outln!("MISSING     {m}");
            }
            Finding::Improvement(m) => outln!("improved    {m}"),
        }
    }
    outln!(
        "bench-check: {} replays, {} fidelity checks against {}, the advice's words on every trace: {}",
        now.replays.len(),
        now.fidelity.len(),
        path.display(),
        if failed {
            "FAILED"
        } else if findings.is_empty() {
            "identical"
        } else {
            "no regressions (refresh the baseline with --write to keep the improvements)"
        }
    );
    failed
}
