//! Replay results for people (a table per setting, with the OOM and its
//! code), for programs (one JSON object per run) and for plotting (the
//! timeline as CSV). Shared by the simulated and the real-GPU replay.

use anyhow::{Context, Result};
use serde_json::{Value, json};
use vramlab_allocator::latency::LatencySummary;
use vramlab_replay::Run;
use vramlab_replay::analysis::placement::PlacementRange;
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

/// One run as the JSON object `replay --json` documents.
pub fn run_json(trace: &Trace, path: &std::path::Path, r: &Run) -> Value {
    let s = &r.summary;
    json!({
        "trace": path.display().to_string(),
        "policy": r.policy,
        "conf": r.conf,
        "capacity": r.capacity,
        "start": r.start.map_or("empty", |s| s.name()),
        "events": s.events,
        "events_replayed": s.events_replayed,
        "allocs": s.allocs,
        "frees": s.frees,
        "streams": trace.streams.len(),
        "peak_requested_bytes": s.peak_requested_bytes,
        "peak_allocated_bytes": s.peak_allocated_bytes,
        "peak_active_bytes": s.peak_active_bytes,
        "peak_reserved_bytes": s.peak_reserved_bytes,
        "final_reserved_bytes": s.final_reserved_bytes,
        "final_allocated_bytes": s.final_allocated_bytes,
        "waste_at_peak_bytes": s.waste_at_peak_bytes,
        "utilization": s.utilization,
        "fragmentation": s.fragmentation,
        "num_device_alloc": s.num_device_alloc,
        "num_device_free": s.num_device_free,
        "num_alloc_retries": s.num_alloc_retries,
        "num_sync_all_streams": s.num_sync_all_streams,
        "num_ooms": s.num_ooms,
        "device_time_us": s.device_time_us,
        "oom": r.oom.as_ref().map(|o| json!({
            "event_index": o.event_index,
            "at_start": o.at_start,
            "requested_bytes": o.requested_bytes,
            "rounded_bytes": o.rounded_bytes,
            "device_request_bytes": o.device_request_bytes,
            "reserved_bytes": o.reserved_bytes,
            "allocated_bytes": o.allocated_bytes,
            "live_requested_bytes": o.live_requested_bytes,
            "largest_free_block": o.largest_free_block,
            "device_free_bytes": o.device_free_bytes,
            "message": o.message,
        })),
        "stats": r.stats.flatten(),
    })
}

/// Adds the placement fields to a run's JSON object: the simulated
/// driver's order, and peak reserved (and first OOM) under the other one.
pub fn add_placement_json(v: &mut Value, r: &PlacementRange) {
    if let Value::Object(m) = v {
        m.insert("placement".into(), json!(r.placement));
        m.insert(
            "other_placement".into(),
            json!({
                "placement": r.other,
                "peak_reserved_bytes": r.other_peak_reserved_bytes,
                "oom_event": r.other_oom_event,
            }),
        );
        m.insert(
            "peak_reserved_range_bytes".into(),
            json!([r.low(), r.high()]),
        );
        m.insert("placement_settled".into(), json!(r.settled()));
    }
}

/// The replay table for people: one column per setting, then each OOM with
/// the code that made the failing allocation.
pub fn human(trace: &Trace, path: &std::path::Path, runs: &[Run]) -> String {
    let mut out = String::new();
    let allocs = trace.num_allocs() as u64;
    out.push_str(&format!(
        "trace: {} ({} events, {} allocations, {} stream{})\n",
        path.display(),
        count(trace.events.len() as u64),
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
    out.push_str(&t.render());
    for r in runs {
        if let Some(o) = &r.oom {
            out.push_str(&format!(
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
                out.push_str(&format!("  the allocation that failed: {line}\n"));
            }
        }
    }
    if runs.len() > 1 {
        if let Some(best) = runs
            .iter()
            .filter(|r| r.oom.is_none())
            .min_by_key(|r| r.summary.peak_reserved_bytes)
        {
            out.push_str(&format!(
                "\nlowest peak reserved without OOM: {} ({})\n",
                best.conf,
                bytes(best.summary.peak_reserved_bytes)
            ));
        }
    }
    out
}

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
/// release, releases in the order given).
pub fn upgrade_lines(
    runs: &[Run],
    settings: &[String],
    releases: &[vramlab_allocator::TorchVersion],
) -> String {
    let per = settings.len();
    let mut out = String::new();
    let Some(&first) = releases.first() else {
        return out;
    };
    for (i, setting) in settings.iter().enumerate() {
        let Some(a) = runs.get(i) else { continue };
        for (k, &v) in releases.iter().enumerate().skip(1) {
            let Some(b) = runs.get(k * per + i) else {
                continue;
            };
            let (pa, pb) = (a.summary.peak_reserved_bytes, b.summary.peak_reserved_bytes);
            let delta = if pb >= pa {
                format!("+{}", bytes(pb - pa))
            } else {
                format!("-{}", bytes(pa - pb))
            };
            let fit = match (a.oom.is_some(), b.oom.is_some(), a.capacity) {
                (_, _, None) => String::new(),
                (false, false, Some(_)) => "; fits still".to_string(),
                (false, true, Some(_)) => "; no longer fits".to_string(),
                (true, false, Some(_)) => "; fits now".to_string(),
                (true, true, Some(_)) => "; runs out of memory under both".to_string(),
            };
            out.push_str(&format!(
                "upgrading torch {first} -> {v} under {setting}: peak reserved {} -> {} ({delta}){fit}\n",
                bytes(pa),
                bytes(pb)
            ));
        }
    }
    out
}
