//! Replay results for people (a table per setting, with the OOM and its
//! code), for programs (one JSON object per run) and for plotting (the
//! timeline as CSV). Shared by the simulated and the real-GPU replay.

use anyhow::{Context, Result};
use vramlab_allocator::LatencySummary;
use vramlab_replay::ReplayResult;
use vramlab_replay::Run;
use vramlab_replay::{SettingRange, placement_note};
use vramlab_traces::Trace;

use crate::render::table::{Table, bytes, count, percent};

/// The host time of the policy's malloc and free calls, per setting.
pub fn latency_table(runs: &[Run], latencies: &[(LatencySummary, LatencySummary)]) -> String {
    let mut t = Table::new(vec![
        "policy call time (host)".into(),
        "calls".into(),
        "p50".into(),
        "p99".into(),
        "max".into(),
    ]);
    for (r, (m, f)) in runs.iter().zip(latencies) {
        for (what, l) in [("malloc", m), ("free", f)] {
            t.row(vec![
                format!("{} {what}", r.conf),
                count(l.count),
                format!("{} ns", l.p50_ns),
                format!("{} ns", l.p99_ns),
                format!("{:.1} µs", l.max_ns as f64 / 1000.0),
            ]);
        }
    }
    t.render()
}

/// What `vramlab replay` shows: the runs, the placement ranges (one per
/// run, or none with `--no-placement-check`), the latencies (with
/// `--latency`), and for an upgrade the settings of one release and the
/// releases.
pub struct ReplayOutput<'a> {
    /// The trace (a streamed one without its events).
    pub trace: &'a Trace,
    /// Its events and allocations.
    pub counts: vramlab_traces::StreamCounts,
    /// Its path.
    pub path: &'a std::path::Path,
    /// One run per setting (per release).
    pub runs: &'a [Run],
    /// The placement ranges, in the runs' order.
    pub ranges: &'a [SettingRange],
    /// malloc and free latencies per run (empty without `--latency`).
    pub latencies: &'a [(LatencySummary, LatencySummary)],
    /// The labels of one release's runs.
    pub settings: &'a [String],
    /// The releases, in the order given.
    pub releases: &'a [vramlab_allocator::TorchVersion],
}

/// Prints the runs: JSON ([`ReplayResult`] per run), or the table with the
/// placement note, the upgrade lines and the latencies.
pub fn print_runs(o: &ReplayOutput<'_>, json: bool) -> Result<()> {
    if json {
        let path = o.path.display().to_string();
        let results: Vec<ReplayResult> = o
            .runs
            .iter()
            .enumerate()
            .map(|(i, r)| ReplayResult::new(o.trace, &path, r, o.ranges.get(i).map(|s| &s.range)))
            .collect();
        return crate::render::json::print_one_or_many(&results);
    }
    out!("{}", human(o.trace, o.counts, o.path, o.runs));
    if let Some(note) = placement_note(o.ranges) {
        outln!("\n{note}");
    }
    if o.releases.len() > 1 {
        out!("\n{}", upgrade_lines(o.runs, o.settings, o.releases));
    }
    if !o.latencies.is_empty() {
        outln!();
        out!("{}", latency_table(o.runs, o.latencies));
    }
    Ok(())
}

/// The replay table for people: one column per setting, then each OOM with
/// the code that made the failing allocation.
pub fn human(
    trace: &Trace,
    counts: vramlab_traces::StreamCounts,
    path: &std::path::Path,
    runs: &[Run],
) -> String {
    let mut out = String::new();
    let allocs = counts.allocs;
    let host = runs
        .first()
        .and_then(|r| r.host.as_ref())
        .map_or(String::new(), |h| {
            format!(", {} pinned host allocations", count(h.host_allocs))
        });
    out.push_str(&format!(
        "trace: {} ({} events, {} allocations{host}, {} stream{})\n",
        path.display(),
        count(counts.events),
        count(allocs),
        trace.streams.len(),
        if trace.streams.len() == 1 { "" } else { "s" }
    ));
    if let Some(r) = runs.first() {
        if trace.initial.is_some() {
            out.push_str(&format!(
                "start: {}\n",
                vramlab_replay::describe_start(trace, r.start)
            ));
        }
        out.push_str(&format!(
            "device: {}\n\n",
            r.capacity
                .map_or("unlimited capacity".to_string(), |c| format!(
                    "{} capacity",
                    bytes(c)
                ))
        ));
    }
    let mut header = vec!["setting".to_string()];
    header.extend(runs.iter().map(|r| r.conf.clone()));
    let mut t = Table::new(header);
    let mut row = |name: &str, f: &dyn Fn(&Run) -> String| {
        let mut cells = vec![name.to_string()];
        cells.extend(runs.iter().map(f));
        t.row(cells);
    };
    row("peak live (requested)", &|r| {
        bytes(r.summary.peak_requested_bytes)
    });
    row("peak allocated", &|r| bytes(r.summary.peak_allocated_bytes));
    row("peak reserved", &|r| bytes(r.summary.peak_reserved_bytes));
    row("waste at peak", &|r| bytes(r.summary.waste_at_peak_bytes));
    row("utilization", &|r| percent(r.summary.utilization));
    row("final reserved", &|r| bytes(r.summary.final_reserved_bytes));
    row("device mallocs / frees", &|r| {
        format!(
            "{} / {}",
            count(r.summary.num_device_alloc),
            count(r.summary.num_device_free)
        )
    });
    row("cache flushes (sync)", &|r| {
        count(r.summary.num_sync_all_streams)
    });
    row("simulated driver time", &|r| {
        format!("{:.1} ms", r.summary.device_time_us / 1000.0)
    });
    row("OOM", &|r| match &r.oom {
        None => "none".into(),
        Some(o) if o.at_start => format!("at the start ({})", bytes(o.requested_bytes)),
        Some(o) => format!(
            "event {} ({})",
            count(o.event_index),
            bytes(o.requested_bytes)
        ),
    });
    host_rows(&mut row, runs);
    // Each pool's reserved bytes at the peak (traces with private pools).
    let uses: Vec<_> = runs
        .iter()
        .map(|r| vramlab_replay::pool_uses(trace, &r.segments_at_peak, &r.final_segments))
        .collect();
    for (i, d) in std::iter::once(None)
        .chain(trace.pools.iter().map(Some))
        .enumerate()
    {
        if trace.pools.is_empty() {
            break;
        }
        let name = d.map_or("default pool".to_string(), |d| {
            format!("{} pool ({},{})", d.kind.name(), d.id.0, d.id.1)
        });
        let mut cells = vec![format!("{name} at peak")];
        cells.extend(uses.iter().map(|u| {
            u.get(i).map_or("-".into(), |p| {
                format!(
                    "{} ({} alloc.)",
                    bytes(p.at_peak.reserved_bytes),
                    bytes(p.at_peak.allocated_bytes)
                )
            })
        }));
        t.row(cells);
    }
    out.push_str(&t.render());
    out.push_str(&oom_paragraphs(trace, runs));
    if runs.len() > 1 {
        out.push_str(&same_results(runs));
        if let Some(best) = runs
            .iter()
            .filter(|r| r.oom.is_none() && r.host_oom.is_none())
            .min_by_key(|r| r.summary.peak_reserved_bytes)
        {
            out.push_str(&format!(
                "\nlowest peak reserved without OOM: {} ({})\n",
                best.conf,
                bytes(best.summary.peak_reserved_bytes)
            ));
        }
        if let Some(best) = runs
            .iter()
            .filter(|r| r.oom.is_none() && r.host_oom.is_none())
            .filter_map(|r| Some((r, r.host.as_ref()?)))
            .min_by_key(|(_, h)| h.host_peak_reserved_bytes)
        {
            out.push_str(&format!(
                "lowest peak pinned host memory: {} ({})\n",
                best.0.conf,
                bytes(best.1.host_peak_reserved_bytes)
            ));
        }
    }
    out
}

/// What each run's first OOM (device or pinned host) was, a paragraph each.
fn oom_paragraphs(trace: &Trace, runs: &[Run]) -> String {
    let mut text = String::new();
    for r in runs {
        if let Some(o) = &r.oom {
            text.push_str(&format!(
                "\n[{}] out of memory {}: {} requested, {} reserved, {} allocated, largest free block {}\n  {}\n",
                r.conf,
                if o.at_start {
                    "before the first event (the state the recording began with does not fit)".to_string()
                } else {
                    format!("at event {}", count(o.event_index))
                },
                bytes(o.requested_bytes),
                bytes(o.reserved_bytes),
                bytes(o.allocated_bytes),
                bytes(o.largest_free_block),
                o.message
            ));
            if let Some(line) = o
                .alloc_id
                .and_then(|id| crate::render::oom_code::frames_line(trace, id))
            {
                text.push_str(&format!("  the allocation that failed: {line}\n"));
            }
        }
        if let Some(o) = &r.host_oom {
            text.push_str(&format!(
                "\n[{}] pinned host memory ran out at event {}: {} requested (a block of {}), {} pinned of the {} a rank may pin\n  PyTorch raises 'CUDA error: out of memory' at once: its host allocator never gives its cache back to retry\n",
                r.conf,
                count(o.event_index),
                bytes(o.requested_bytes),
                bytes(o.block_bytes),
                bytes(o.reserved_bytes),
                bytes(o.limit_bytes),
            ));
        }
    }
    text
}

/// Adds a row to a table of runs: its name, and each run's cell.
type RowFn<'a> = dyn FnMut(&str, &dyn Fn(&Run) -> String) + 'a;

/// The pinned host allocator's rows (traces with host requests): `row`
/// adds one row of the replay table.
fn host_rows(row: &mut RowFn<'_>, runs: &[Run]) {
    if runs.iter().any(|r| r.host.is_some()) {
        fn host(r: &Run, f: impl Fn(&vramlab_replay::HostSummary) -> String) -> String {
            r.host.as_ref().map_or("-".into(), f)
        }
        row("pinned host: peak requested", &|r| {
            host(r, |h| bytes(h.host_peak_requested_bytes))
        });
        row("pinned host: peak in blocks", &|r| {
            host(r, |h| bytes(h.host_peak_allocated_bytes))
        });
        row("pinned host: peak pinned", &|r| {
            host(r, |h| {
                let asked = h.host_peak_requested_bytes.max(1) as f64;
                let ratio = h.host_peak_reserved_bytes as f64 / asked;
                format!(
                    "{} ({ratio:.2}x requested)",
                    bytes(h.host_peak_reserved_bytes)
                )
            })
        });
        if runs
            .iter()
            .any(|r| r.host.as_ref().is_some_and(|h| h.ranks_per_node > 1))
        {
            row("pinned host: per node", &|r| {
                host(r, |h| {
                    format!(
                        "{} ({} ranks)",
                        bytes(h.node_peak_reserved_bytes),
                        h.ranks_per_node
                    )
                })
            });
        }
        row("pinned host: cudaHostAlloc calls", &|r| {
            host(r, |h| count(h.host_cuda_allocs))
        });
        row("pinned host: OOM", &|r| match &r.host_oom {
            None => "none".into(),
            Some(o) => format!(
                "event {} ({})",
                count(o.event_index),
                bytes(o.requested_bytes)
            ),
        });
    }
}

/// Settings whose replay is the same in every figure, said once each
/// (after a blank line; nothing when none is).
fn same_results(runs: &[Run]) -> String {
    let mut out = String::new();
    for (i, r) in runs.iter().enumerate() {
        if let Some(first) = runs.iter().take(i).find(|f| {
            f.summary == r.summary && f.oom == r.oom && f.host == r.host && f.host_oom == r.host_oom
        }) {
            if out.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!(
                "{} gives the same result as {} (every figure above)\n",
                r.conf, first.conf
            ));
        }
    }
    out
}

/// Writes the runs' timelines as CSV (`--timeline`).
pub fn write_timeline(path: &std::path::Path, runs: &[Run]) -> Result<()> {
    use std::io::Write;
    let f =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    writeln!(
        w,
        "conf,event_index,requested_bytes,allocated_bytes,active_bytes,reserved_bytes,largest_free_block,external_fragmentation"
    )?;
    for r in runs {
        let conf = csv_quote(&r.conf);
        for p in &r.timeline {
            writeln!(
                w,
                "{conf},{},{},{},{},{},{},{:.6}",
                p.event_index,
                p.requested,
                p.allocated,
                p.active,
                p.reserved,
                p.largest_free,
                p.external_fragmentation()
            )?;
        }
    }
    w.flush()?;
    Ok(())
}

/// Quotes a CSV field when it holds a comma or quote.
pub fn csv_quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// What an upgrade does: for each setting, the first release's run against
/// each later one's (`runs` holds one run per setting of `settings` for each
/// release, releases in the order given), a sentence a line.
pub fn upgrade_lines(
    runs: &[Run],
    settings: &[String],
    releases: &[vramlab_allocator::TorchVersion],
) -> String {
    vramlab_replay::upgrade_from_runs(runs, settings, releases)
        .iter()
        .map(|r| r.sentence() + "\n")
        .collect()
}
