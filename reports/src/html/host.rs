//! The page's pinned host memory section (traces with pinned host
//! requests): what each setting pins for what was asked, and the
//! `pinned_*` setting that pins least.

use std::fmt::Write as _;

use vramlab_replay::HostAdvice;

use super::escape::esc;
use crate::input::ReportInput;
use crate::units::{fmt_int, format_bytes};

/// Writes the section; nothing when no setting's replay has host requests.
pub(super) fn write_host(h: &mut String, report: &ReportInput) {
    let runs: Vec<_> = report
        .settings
        .iter()
        .filter_map(|s| Some((&s.label, s.run.host.as_ref()?)))
        .collect();
    if runs.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"host\">Pinned host memory</h2>\n<p>Requests to PyTorch's pinned host allocator (<code>pin_memory()</code>, CPU offload, <code>non_blocking</code> copies), replayed under each setting's release and <code>pinned_*</code> keys: the allocator rounds a request up to a power of two (from 2.13, not above <code>pinned_max_round_threshold_mb</code>) and keeps freed blocks cached.</p>\n<table id=\"host-table\">\n<thead><tr><th>setting</th><th>peak asked</th><th>peak in blocks</th><th>peak pinned</th><th>per node</th><th>cudaHostAlloc calls</th></tr></thead>\n<tbody>\n");
    for (label, r) in &runs {
        let ratio = r.host_peak_reserved_bytes as f64 / r.host_peak_requested_bytes.max(1) as f64;
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} ({ratio:.2}×)</td><td>{} ({} ranks)</td><td>{}</td></tr>",
            esc(label),
            esc(&format_bytes(r.host_peak_requested_bytes)),
            esc(&format_bytes(r.host_peak_allocated_bytes)),
            esc(&format_bytes(r.host_peak_reserved_bytes)),
            esc(&format_bytes(r.node_peak_reserved_bytes)),
            r.ranks_per_node,
            fmt_int(r.host_cuda_allocs),
        );
    }
    h.push_str("</tbody>\n</table>\n");
    if let Some(a) = report.recommendation.as_ref().and_then(|r| r.host.as_ref()) {
        let _ = writeln!(h, "<p id=\"host-advice\">{}</p>", esc(&advice_words(a)));
    }
}

/// The advice in one sentence.
fn advice_words(a: &HostAdvice) -> String {
    match &a.best {
        Some(b) => format!(
            "{} pins {} at the peak instead of {} ({} less per process), with {} cudaHostAlloc calls instead of {}: PYTORCH_ALLOC_CONF=\"{}\".",
            b.setting,
            format_bytes(b.peak_pinned_bytes),
            format_bytes(a.default.peak_pinned_bytes),
            format_bytes(a.saving_bytes()),
            fmt_int(b.host_allocs_from_cuda),
            fmt_int(a.default.host_allocs_from_cuda),
            b.setting
        ),
        None if a.sizes_are_blocks => "The trace's host sizes are PyTorch's blocks (a snapshot's host_traces), not the requests: what rounding wastes is not in it.".into(),
        None if a.tried.len() == 1 => match &a.upgrade {
            Some((release, b)) => format!(
                "This release has no safe pinned_* key for it; under {release}'s rules {} would pin {} instead of {}.",
                b.setting,
                format_bytes(b.peak_pinned_bytes),
                format_bytes(a.default.peak_pinned_bytes)
            ),
            None => "This release has no safe pinned_* key for it, and no later one pins less.".into(),
        },
        None => "No pinned_* setting pins less than the defaults.".into(),
    }
}
