//! How `vramlab explain` prints: the peak, the waste by cause, the
//! culprits with their replayed counterfactuals, and the settings aimed at
//! the waste.

use std::path::Path;

use vramlab_replay::Explanation;

use crate::render::table::{Table, bytes, count};

/// `+1.00 MiB` / `-1.00 MiB` / `0 B`.
pub fn signed_bytes(n: i64) -> String {
    match n.signum() {
        1 => format!("{} less", bytes(n.unsigned_abs())),
        -1 => format!("{} more", bytes(n.unsigned_abs())),
        _ => "no change".into(),
    }
}

fn event(at: Option<u64>) -> String {
    at.map_or("before the first event".into(), |e| {
        format!("event {}", count(e))
    })
}

/// Prints an explanation as tables.
pub fn print_explanation(path: &Path, e: &Explanation, fixes_asked: bool) {
    outln!("explain: {} under {}", path.display(), e.setting);
    let phase = e
        .phase_at_peak
        .as_ref()
        .map_or(String::new(), |p| format!(" ({p})"));
    if e.at_failure {
        outln!(
            "out of memory at {}, a request of {} (peak reserved before it {}): {}",
            event(e.peak_event_index.map(|i| i + 1).or(Some(0))),
            bytes(e.failed_request_bytes.unwrap_or(0)),
            bytes(e.peak_reserved_bytes),
            e.oom.as_deref().unwrap_or("")
        );
        outln!(
            "the state just before it{phase}: reserved {}, allocated {}, requested {}",
            bytes(e.allocated_at_peak_bytes + e.waste_at_peak_bytes),
            bytes(e.allocated_at_peak_bytes),
            bytes(e.requested_at_peak_bytes)
        );
    } else {
        outln!(
            "peak reserved {} after {}{phase}: allocated {}, requested {}",
            bytes(e.peak_reserved_bytes),
            event(e.peak_event_index),
            bytes(e.allocated_at_peak_bytes),
            bytes(e.requested_at_peak_bytes)
        );
    }
    outln!();
    let w = &e.waste;
    outln!(
        "waste {}: {} reserved but not allocated",
        if e.at_failure { "there" } else { "at the peak" },
        bytes(e.waste_at_peak_bytes)
    );
    let mut t = Table::new(vec!["cause".into(), "bytes".into(), "what it is".into()]).left(2);
    t.row(vec![
        "pinned".into(),
        bytes(w.pinned_bytes),
        format!(
            "free space inside segments that hold live blocks ({} of {} segments): no release returns it",
            count(e.segments_with_live_blocks as u64),
            count(e.segments_at_peak as u64)
        ),
    ]);
    t.row(vec![
        "releasable".into(),
        bytes(w.releasable_bytes),
        "what empty_cache() at that moment gives back (whole cached segments)".into(),
    ]);
    t.row(vec![
        "pool cache".into(),
        bytes(w.pool_cached_bytes),
        "whole free segments of private pools (CUDA graphs, MemPools) still in use".into(),
    ]);
    t.row(vec![
        "(pending)".into(),
        bytes(w.pending_free_bytes),
        "of the waste: freed blocks waiting for other streams (record_stream)".into(),
    ]);
    t.row(vec![
        "rounding".into(),
        bytes(w.rounding_bytes),
        "block sizes above the requests (allocated − requested; beside the waste)".into(),
    ]);
    out!("{}", t.render());
    outln!();
    print_culprits(e);
    if fixes_asked {
        print_fixes(e);
    }
}

fn print_culprits(e: &Explanation) {
    outln!("culprits, decided by replay: {}", e.finding);
    if !e.culprits.is_empty() {
        outln!(
            "allocations whose removal lowers the peak ({} of {}, the largest saving first):",
            count(e.culprits.len() as u64),
            count(e.culprits_found as u64)
        );
        let mut t = Table::new(
            [
                "id",
                "size",
                "pinned",
                "allocated",
                "freed",
                "frame",
                "peak without",
                "saving",
                if e.at_failure { "fits without" } else { "" },
            ]
            .map(String::from)
            .to_vec(),
        )
        .left(5);
        for c in &e.culprits {
            t.row(vec![
                c.id.to_string(),
                bytes(c.size_bytes),
                bytes(c.pinned_bytes),
                c.allocated_at.map_or("at start".into(), count),
                c.freed_at.map_or("never".into(), count),
                c.frame.clone().unwrap_or_else(|| "-".into()),
                bytes(c.peak_reserved_without_bytes),
                signed_bytes(c.saving_bytes),
                fits_cell(c.fits_without),
            ]);
        }
        out!("{}", t.render());
        outln!(
            "peak without: the trace replayed without that allocation (its alloc and its free removed; ids as `vramlab convert TRACE --start fresh` writes them)"
        );
    }
    if !e.line_culprits.is_empty() {
        outln!(
            "source lines whose live allocations, removed together, lower the peak ({} of {}):",
            count(e.line_culprits.len() as u64),
            count(e.line_culprits_found as u64)
        );
        let mut t = Table::new(
            [
                "line",
                "allocations",
                "blocks",
                "pinned",
                "peak without",
                "saving",
                if e.at_failure { "fits without" } else { "" },
            ]
            .map(String::from)
            .to_vec(),
        );
        for l in &e.line_culprits {
            t.row(vec![
                l.frame.clone(),
                count(l.ids.len() as u64),
                bytes(l.block_bytes),
                bytes(l.pinned_bytes),
                bytes(l.peak_reserved_without_bytes),
                signed_bytes(l.saving_bytes),
                fits_cell(l.fits_without),
            ]);
        }
        out!("{}", t.render());
    }
    outln!();
}

fn fits_cell(fits: Option<bool>) -> String {
    match fits {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => String::new(),
    }
}

fn print_fixes(e: &Explanation) {
    if e.fixes.is_empty() {
        outln!(
            "settings aimed at it: none to try under {} (expandable segments already on, or no culprit a max_split_size_mb could keep from splitting; `vramlab recommend` replays the whole grid)",
            e.setting
        );
        return;
    }
    outln!("settings aimed at it, replayed:");
    let mut t = Table::new(
        ["setting", "peak reserved", "saving", "why"]
            .map(String::from)
            .to_vec(),
    )
    .left(3);
    for f in &e.fixes {
        let saving = if f.oom {
            "out of memory".into()
        } else if e.at_failure {
            "fits".into()
        } else {
            signed_bytes(f.saving_bytes)
        };
        t.row(vec![
            f.setting.clone(),
            bytes(f.peak_reserved_bytes),
            saving,
            f.why.clone(),
        ]);
    }
    out!("{}", t.render());
}
