//! A recommendation for people: the verdict and the reasons first, the
//! lines to export, then the ranking and the other allocator designs.

use vramlab_replay::OomEvent;
use vramlab_replay::{Ranked, Recommendation, Verdict};
use vramlab_traces::Trace;

use crate::render::sweep::{group_cell, grouped, oom_cell};
use crate::render::table::{Table, bytes, count, percent};

/// A row of the ranking: `place` is the group's place (settings with the
/// same result share one).
fn ranked_row(tab: &mut Table, place: usize, r: &Ranked, same: &[&Ranked]) {
    let same: Vec<&vramlab_replay::SweepRow> = same.iter().map(|s| &s.row).collect();
    tab.row(vec![
        place.to_string(),
        group_cell(&r.row, &same),
        if r.row.fits() {
            bytes(r.row.peak_reserved_bytes)
        } else {
            format!("OOM {}", oom_cell(&r.row))
        },
        if r.row.fits() {
            bytes(r.headroom_bytes.max(0) as u64)
        } else {
            "-".into()
        },
        bytes(r.row.waste_at_peak_bytes),
        percent(r.row.utilization),
        count(r.row.num_device_alloc + r.row.num_device_free),
        count(r.row.num_sync_all_streams),
    ]);
}

/// What `vramlab recommend` shows.
pub struct Advice<'a> {
    /// The PyTorch release(s) the advice is for, described.
    pub target: &'a str,
    /// How a trace recorded mid-run starts, described (`None`: it does not).
    pub start: Option<&'a str>,
    /// The trace.
    pub trace: &'a Trace,
    /// Its name.
    pub name: &'a str,
    /// The card, described.
    pub card: &'a str,
    /// The ranking.
    pub rec: &'a Recommendation,
    /// How many ranked settings to show.
    pub top: usize,
    /// When nothing fits: the setting that got furthest, and its OOM.
    pub best_attempt: Option<(&'a str, &'a OomEvent)>,
}

/// Prints the advice: the release, the start, the recommendation, and where
/// the best attempt ran out in the user's code when nothing fits.
pub fn print_advice(a: &Advice<'_>) {
    outln!("{}", a.target);
    if let Some(start) = a.start {
        outln!("start: {start}");
    }
    print_recommendation(a.name, a.card, a.rec, a.top);
    if let Some((setting, o)) = a.best_attempt {
        outln!();
        outln!("where {setting} runs out:");
        crate::render::oom_code::print_code(a.trace, o, "  ");
    }
}

/// Prints a recommendation for people: the verdict first, then the table.
pub fn print_recommendation(trace: &str, card: &str, rec: &Recommendation, top: usize) {
    let Some(first) = rec.ranked.first() else {
        outln!("nothing to recommend");
        return;
    };
    outln!(
        "{trace} on {card} ({} events, peak live {})",
        count(first.row.events),
        bytes(first.row.peak_requested_bytes)
    );
    outln!();
    outln!("{}", rec.why);
    if let Some(note) = &rec.placement_note {
        outln!();
        outln!("{note}");
    }
    outln!();
    if rec.verdict == Verdict::UseSetting {
        // Lines to copy: never wrapped, whatever the width.
        for (shell, line) in &rec.export {
            crate::output::write_stdout(&format!("  {shell:<11} {line}\n"));
        }
        if let Some(p) = &rec.python {
            crate::output::write_stdout(&format!("  {:<11} {p}\n", "Python"));
        }
        outln!();
    }
    if let Some(h) = &rec.host {
        crate::render::host_advice::print_host_advice(h, rec);
    }
    let mut tab = Table::new(vec![
        "#".into(),
        "setting".into(),
        "peak reserved".into(),
        "headroom".into(),
        "waste at peak".into(),
        "utilization".into(),
        "device calls".into(),
        "flushes".into(),
    ])
    .left(1);
    // Settings with the same result share one row (the first ranked
    // names the others).
    let groups = grouped(&rec.ranked, |r| &r.row);
    for (place, (r, same)) in groups.iter().enumerate().take(top) {
        ranked_row(&mut tab, place + 1, r, same);
    }
    let baseline = groups.iter().enumerate().skip(top).find(|(_, (r, same))| {
        r.row.grid_line == "default" || same.iter().any(|s| s.row.grid_line == "default")
    });
    if let Some((place, (b, same))) = baseline {
        ranked_row(&mut tab, place + 1, b, same);
    }
    out!("{}", tab.render());
    outln!(
        "(waste at peak: reserved but unallocated memory when reserved memory peaks; advice for PyTorch {})",
        rec.torch
    );
    if !rec.other_policies.is_empty() {
        outln!();
        outln!(
            "other allocator designs on the same trace (not PyTorch settings, for comparison; direct is a device call per request, as PYTORCH_NO_CUDA_MEMORY_CACHING=1):"
        );
        let mut tab = Table::new(vec![
            "design".into(),
            "peak reserved".into(),
            "device calls".into(),
        ]);
        for (r, same) in grouped(&rec.other_policies, |r| &r.row) {
            let same: Vec<&vramlab_replay::SweepRow> = same.iter().map(|s| &s.row).collect();
            tab.row(vec![
                group_cell(&r.row, &same),
                if r.row.fits() {
                    bytes(r.row.peak_reserved_bytes)
                } else {
                    format!("OOM {}", oom_cell(&r.row))
                },
                count(r.row.num_device_alloc + r.row.num_device_free),
            ]);
        }
        out!("{}", tab.render());
    }
}
