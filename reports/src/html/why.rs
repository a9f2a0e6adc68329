//! The "why" section: what the waste at the reserved peak is made of, the
//! live allocations that pin it (with their source lines) and each one's
//! counterfactual, replayed — `vramlab explain` on the page.

use std::fmt::Write as _;

use vramlab_replay::Explanation;

use super::escape::{esc, esc_breakable};
use crate::units::{fmt_int, format_bytes};

fn saving(n: i64) -> String {
    match n.signum() {
        1 => format!("{} less", format_bytes(n.unsigned_abs())),
        -1 => format!("{} more", format_bytes(n.unsigned_abs())),
        _ => "no change".to_string(),
    }
}

/// Writes the section (nothing without an explanation).
pub(super) fn write_why(h: &mut String, e: Option<&Explanation>) {
    let Some(e) = e else {
        return;
    };
    let w = &e.waste;
    let at = e
        .peak_event_index
        .map_or("before the first event".to_string(), |i| {
            format!("after event {}", fmt_int(i))
        });
    let phase = e
        .phase_at_peak
        .as_ref()
        .map_or(String::new(), |p| format!(" ({})", esc(p)));
    let fresh = if e.start.is_some() {
        " (replayed from a fresh start, so that any allocation can be removed)"
    } else {
        ""
    };
    h.push_str("<h2 id=\"why\">Why it reserves more than it allocates</h2>\n");
    if e.at_failure {
        let _ = writeln!(
            h,
            "<p>Under <code>{}</code>{fresh} the replay runs out of memory at event {}{phase}, on a request of {}. Just before it {} is allocated and {} is reserved but unallocated — the memory the error message names:</p>",
            esc(&e.setting),
            fmt_int(e.peak_event_index.map_or(0, |i| i + 1)),
            esc(&format_bytes(e.failed_request_bytes.unwrap_or(0))),
            esc(&format_bytes(e.allocated_at_peak_bytes)),
            esc(&format_bytes(e.waste_at_peak_bytes)),
        );
    } else {
        let _ = writeln!(
            h,
            "<p>Under <code>{}</code>{fresh} reserved peaks at {} {at}{phase}, with {} allocated: {} reserved but unallocated.</p>",
            esc(&e.setting),
            esc(&format_bytes(e.peak_reserved_bytes)),
            esc(&format_bytes(e.allocated_at_peak_bytes)),
            esc(&format_bytes(e.waste_at_peak_bytes)),
        );
    }
    h.push_str("<table id=\"waste\">\n<thead><tr><th>cause</th><th>bytes</th><th class=\"text\">what it is</th></tr></thead>\n<tbody>\n");
    let rows = [
        (
            "pinned",
            w.pinned_bytes,
            format!(
                "free space inside segments that hold live blocks ({} of {} segments): no release returns it",
                fmt_int(e.segments_with_live_blocks as u64),
                fmt_int(e.segments_at_peak as u64)
            ),
        ),
        (
            "releasable",
            w.releasable_bytes,
            "what <code>empty_cache()</code> at the peak gives back".to_string(),
        ),
        (
            "pool cache",
            w.pool_cached_bytes,
            "whole free segments of private pools still in use".to_string(),
        ),
        (
            "rounding",
            w.rounding_bytes,
            "block sizes above the requests (beside the waste)".to_string(),
        ),
    ];
    for (name, bytes, what) in rows {
        let _ = writeln!(
            h,
            "<tr><td>{name}</td><td>{}</td><td class=\"text\">{what}</td></tr>",
            esc(&format_bytes(bytes))
        );
    }
    h.push_str("</tbody>\n</table>\n");
    let _ = writeln!(h, "<p>{}</p>", esc(&e.finding));
    if !e.culprits.is_empty() {
        let _ = write!(
            h,
            "<p>The live allocations whose removal lowers the peak ({} of {}), the largest saving first: the peak replayed without each (its allocation and free removed):</p>\n<table id=\"culprits\">\n<thead><tr><th>id</th><th>size</th><th>pinned</th><th>allocated at</th><th>freed at</th><th class=\"text\">allocated by</th><th>peak without it</th><th>saving</th></tr></thead>\n<tbody>\n",
            fmt_int(e.culprits.len() as u64),
            fmt_int(e.culprits_found as u64)
        );
        for c in &e.culprits {
            let frames = if c.frames.is_empty() {
                "—".to_string()
            } else {
                c.frames
                    .iter()
                    .map(|f| format!("<code>{}</code>", esc(f)))
                    .collect::<Vec<_>>()
                    .join("<br>")
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"text\">{frames}</td><td>{}</td><td>{}</td></tr>",
                c.id,
                esc(&format_bytes(c.size_bytes)),
                esc(&format_bytes(c.pinned_bytes)),
                c.allocated_at.map_or("start".to_string(), fmt_int),
                c.freed_at.map_or("never".to_string(), fmt_int),
                esc(&format_bytes(c.peak_reserved_without_bytes)),
                esc(&saving(c.saving_bytes)),
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }
    if !e.line_culprits.is_empty() {
        let _ = write!(
            h,
            "<p>Source lines whose live allocations, removed together, lower the peak ({} of {}):</p>\n<table id=\"culprit-lines\">\n<thead><tr><th class=\"text\">line</th><th>allocations</th><th>blocks</th><th>pinned</th><th>peak without them</th><th>saving</th></tr></thead>\n<tbody>\n",
            fmt_int(e.line_culprits.len() as u64),
            fmt_int(e.line_culprits_found as u64)
        );
        for l in &e.line_culprits {
            let _ = writeln!(
                h,
                "<tr><td class=\"text\"><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc_breakable(&l.frame),
                fmt_int(l.ids.len() as u64),
                esc(&format_bytes(l.block_bytes)),
                esc(&format_bytes(l.pinned_bytes)),
                esc(&format_bytes(l.peak_reserved_without_bytes)),
                esc(&saving(l.saving_bytes)),
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }
    if !e.fixes.is_empty() {
        h.push_str("<p>Settings aimed at it, replayed:</p>\n<table id=\"fixes\">\n<thead><tr><th>setting</th><th>peak reserved</th><th>saving</th><th class=\"text\">why</th></tr></thead>\n<tbody>\n");
        for f in &e.fixes {
            let s = if f.oom {
                "out of memory".to_string()
            } else if e.at_failure {
                "fits".to_string()
            } else {
                saving(f.saving_bytes)
            };
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"text\">{}</td></tr>",
                esc(&f.setting),
                esc(&format_bytes(f.peak_reserved_bytes)),
                esc(&s),
                esc(&f.why)
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }
}
