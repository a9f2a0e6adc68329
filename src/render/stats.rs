//! What a trace holds, for people: header, counts, sizes, the state it
//! starts from, and the notes its reader made.

use std::path::Path;

use vramlab_traces::{Trace, TraceSummary};

use crate::render::table::{Table, bytes, count};

/// Prints the summary of one device's trace read from `path`.
pub fn print_stats(path: &Path, t: &Trace, s: &TraceSummary) {
    outln!("{} (device {})", path.display(), s.device);
    if !t.header.source.is_empty() && t.header.source != path.display().to_string() {
        outln!("  source: {}", t.header.source);
    }
    if let Some(fw) = &t.header.framework {
        outln!("  framework: {fw}");
    }
    if let Some(c) = &t.header.alloc_conf {
        outln!(
            "  recorded settings: {}",
            if c.is_empty() { "(defaults)" } else { c }
        );
    }
    for (k, v) in &t.header.extra {
        outln!("  {k}: {v}");
    }
    outln!(
        "  events {}  allocations {}  frees {} (+{} deferred)  empty_cache {}  streams {}",
        count(s.events),
        count(s.allocs),
        count(s.frees),
        count(s.deferred_frees),
        count(s.empty_cache),
        s.streams
    );
    outln!(
        "  peak live {}  requested in total {}  largest request {}  live at end {}",
        bytes(s.peak_live_bytes),
        bytes(s.total_requested_bytes),
        bytes(s.max_request_bytes),
        count(s.live_at_end)
    );
    if let Some(h) = &s.host {
        outln!(
            "  pinned host: allocations {}  frees {} (+{} deferred)  empty_cache {}  peak live {}  largest request {}  live at end {}",
            count(h.allocs),
            count(h.frees),
            count(h.deferred_frees),
            count(h.empty_cache),
            bytes(h.peak_live_bytes),
            bytes(h.max_request_bytes),
            count(h.live_at_end)
        );
    }
    if s.starts_mid_run && s.events > 0 {
        outln!(
            "  starts mid-run: {} blocks ({}) in use at the first event, {}",
            count(s.initial_live_blocks),
            bytes(s.initial_live_bytes),
            match &s.initial_layout_error {
                None => format!("{} segments", count(s.initial_segments)),
                Some(_) => "recorded layout not rebuilt (see the note)".into(),
            }
        );
    }
    if let Some(st) = &s.initial_state {
        outln!(
            "  {}: {} segments, {} reserved, {} allocated{}, {} reserved but unallocated, largest free block {} ({} free blocks)",
            if s.events > 0 {
                "state at the first event"
            } else {
                "allocator state (no history)"
            },
            count(st.segments),
            bytes(st.reserved_bytes),
            bytes(st.allocated_bytes),
            if st.pending_free_bytes > 0 {
                format!(
                    " (+{} waiting for their free)",
                    bytes(st.pending_free_bytes)
                )
            } else {
                String::new()
            },
            bytes(st.waste_bytes),
            bytes(st.largest_free_block),
            count(st.free_blocks)
        );
    }
    if let Some(d) = s.duration_us {
        outln!("  duration {:.3} s", d as f64 / 1e6);
    }
    let mut tab = Table::new(vec![
        "request size".into(),
        "allocations".into(),
        "bytes".into(),
        "share".into(),
    ]);
    for b in &s.size_histogram {
        tab.row(vec![
            format!("{} – {}", bytes(b.lo), bytes(b.hi)),
            count(b.count),
            bytes(b.bytes),
            format!(
                "{:.1}%",
                100.0 * b.bytes as f64 / s.total_requested_bytes.max(1) as f64
            ),
        ]);
    }
    if !s.size_histogram.is_empty() {
        outln!();
        out!("{}", tab.render_indented("  "));
    }
    if !s.phases.is_empty() {
        outln!();
        out!("{}", phase_table(s));
    }
    if !s.pools.is_empty() {
        outln!();
        out!("{}", pool_table(s));
    }
    for n in &s.notes {
        outln!("  note: {n}");
    }
    outln!();
}

/// Live bytes per recorded phase: when it began, its peak, when it ended,
/// and what it allocated and freed.
fn phase_table(s: &TraceSummary) -> String {
    let mut t = Table::new(vec![
        "phase".into(),
        "events".into(),
        "allocations".into(),
        "frees".into(),
        "live at start".into(),
        "peak live".into(),
        "live at end".into(),
        "change".into(),
    ])
    .left(0);
    for p in &s.phases {
        let change = p.live_at_end_bytes as i128 - p.live_at_start_bytes as i128;
        t.row(vec![
            p.label.clone(),
            count(p.events),
            format!("{} ({})", count(p.allocs), bytes(p.allocated_bytes)),
            count(p.frees),
            bytes(p.live_at_start_bytes),
            bytes(p.peak_live_bytes),
            bytes(p.live_at_end_bytes),
            format!(
                "{}{}",
                if change < 0 { "-" } else { "+" },
                bytes(change.unsigned_abs() as u64)
            ),
        ]);
    }
    t.render_indented("  ")
}

/// The default pool and each private pool: the requests routed to it, and
/// its segments at the start and at the dump (where the trace has them).
fn pool_table(s: &TraceSummary) -> String {
    let state = |st: Option<&vramlab_traces::StateSummary>| {
        st.map_or("-".to_string(), |st| {
            format!(
                "{} seg, {} reserved, {} allocated, {} waste",
                count(st.segments),
                bytes(st.reserved_bytes),
                bytes(st.allocated_bytes),
                bytes(st.waste_bytes)
            )
        })
    };
    let mut t = Table::new(vec![
        "pool".into(),
        "kind".into(),
        "allocations".into(),
        "peak live".into(),
        "at the first event".into(),
        "at the dump".into(),
    ])
    .left(0)
    .left(1)
    .left(4)
    .left(5);
    for p in &s.pools {
        let mut kind = p.kind.to_string();
        for (on, word) in [(p.use_on_oom, "use_on_oom"), (p.no_split, "no_split")] {
            if on {
                kind.push_str(&format!(" {word}"));
            }
        }
        t.row(vec![
            format!("({},{})", p.id[0], p.id[1]),
            kind,
            format!("{} ({})", count(p.allocations), bytes(p.requested_bytes)),
            bytes(p.peak_live_bytes),
            state(p.at_start.as_ref()),
            state(p.at_end.as_ref()),
        ]);
    }
    t.render_indented("  ")
}

/// An empty snapshot, described: on stdout for the table (it is the
/// answer), on stderr as a note beside the JSON (which lists no device).
pub fn print_empty(what: &vramlab_replay::InputError, json: bool) {
    if json {
        errln!("note: {what}");
    } else {
        outln!("{what}");
    }
}
