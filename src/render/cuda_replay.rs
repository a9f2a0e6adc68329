//! Replays on a real GPU (`vramlab replay --device cuda`) for people (a
//! table per setting, with the latency of every driver and allocator call
//! and the leak check) and for programs (one JSON object per run).

use std::path::Path;

use vramlab_allocator::LatencySummary;
use vramlab_allocator::{DeviceLatencies, LatencyHistogram};
use vramlab_replay::CudaReplayResult;
use vramlab_replay::CudaRun;
use vramlab_traces::Trace;

use crate::render::table::{Table, bytes, count, percent};

/// Prints the runs: JSON ([`CudaReplayResult`] per run: one object for
/// one setting, an array for several), or the table ([`human`]).
pub fn print_runs(
    trace: &Trace,
    path: &Path,
    runs: &[CudaRun],
    touch: bool,
    json: bool,
) -> anyhow::Result<()> {
    if !json {
        out!("{}", human(trace, path, runs));
        return Ok(());
    }
    let shown = path.display().to_string();
    let results: Vec<CudaReplayResult> = runs
        .iter()
        .map(|r| CudaReplayResult::new(trace, &shown, r, touch))
        .collect();
    crate::render::json::print_one_or_many(&results)
}

/// `p50 / p99 / max µs (calls)`, or `-` without calls.
fn lat(s: &LatencySummary) -> String {
    if s.count == 0 {
        return "-".into();
    }
    let us = |ns: u64| ns as f64 / 1e3;
    format!(
        "{:.1} / {:.1} / {:.1} µs ({})",
        us(s.p50_ns),
        us(s.p99_ns),
        us(s.max_ns),
        count(s.count)
    )
}

/// What a failed leak check found (`ok` when it passed).
pub fn leak_text(r: &CudaRun) -> String {
    let l = &r.leak;
    if l.ok {
        return "ok".into();
    }
    if l.held_after_empty_cache != l.reserved_after_empty_cache {
        format!(
            "[{}] the device held {} after empty_cache but the allocator reported {} reserved",
            r.run.conf,
            bytes(l.held_after_empty_cache),
            bytes(l.reserved_after_empty_cache)
        )
    } else {
        format!(
            "[{}] {} of device memory did not come back ({} free before, {} after)",
            r.run.conf,
            bytes(l.leaked_bytes.unsigned_abs()),
            bytes(l.free_at_start),
            bytes(l.free_at_end)
        )
    }
}

/// The runs for people: the trace and the GPU, a table with a column per
/// setting (memory, driver calls and their latencies, the leak check),
/// then each OOM and each failed leak check.
pub fn human(trace: &Trace, path: &Path, runs: &[CudaRun]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "trace: {} ({} events, {} allocations, {} stream{})\n",
        path.display(),
        count(trace.events.len() as u64),
        count(trace.num_allocs() as u64),
        trace.streams.len(),
        if trace.streams.len() == 1 { "" } else { "s" }
    ));
    if let Some(r) = runs.first() {
        let g = &r.gpu;
        out.push_str(&format!(
            "device: GPU {} {} ({} total, {} granularity, driver CUDA {})\n\n",
            g.ordinal,
            g.name,
            bytes(g.total_bytes),
            bytes(g.granularity),
            g.driver.cuda_version()
        ));
    }
    let mut header = vec!["setting".to_string()];
    header.extend(runs.iter().map(|r| r.run.conf.clone()));
    let mut t = Table::new(header);
    let mut row = |name: &str, f: &dyn Fn(&CudaRun) -> String| {
        let mut cells = vec![name.to_string()];
        cells.extend(runs.iter().map(f));
        t.row(cells);
    };
    row("peak live (requested)", &|r| {
        bytes(r.run.summary.peak_requested_bytes)
    });
    row("peak allocated", &|r| {
        bytes(r.run.summary.peak_allocated_bytes)
    });
    row("peak reserved", &|r| {
        bytes(r.run.summary.peak_reserved_bytes)
    });
    row("waste at peak", &|r| {
        bytes(r.run.summary.waste_at_peak_bytes)
    });
    row("utilization", &|r| percent(r.run.summary.utilization));
    row("device mallocs / frees", &|r| {
        format!(
            "{} / {}",
            count(r.run.summary.num_device_alloc),
            count(r.run.summary.num_device_free)
        )
    });
    row("cache flushes (sync)", &|r| {
        count(r.run.summary.num_sync_all_streams)
    });
    row("measured driver time", &|r| {
        format!("{:.1} ms", r.run.summary.device_time_us / 1000.0)
    });
    row("OOM", &|r| match &r.run.oom {
        None => "none".into(),
        Some(o) => format!(
            "event {} ({})",
            count(o.event_index),
            bytes(o.requested_bytes)
        ),
    });
    row("p50 / p99 / max (calls):", &|_| String::new());
    type Kind = fn(&DeviceLatencies) -> &LatencyHistogram;
    let names: [(&str, Kind); 4] = [
        ("  cuMemAlloc", |l| &l.malloc),
        ("  cuMemFree", |l| &l.free),
        ("  map (create+map+access)", |l| &l.map),
        ("  unmap (sync+unmap+release)", |l| &l.unmap),
    ];
    for (label, kind) in names {
        row(label, &|r| lat(&kind(&r.device_latency).summary()));
    }
    row("  malloc() of the policy", &|r| {
        lat(&r.alloc_latency.summary())
    });
    row("  free() of the policy", &|r| {
        lat(&r.free_latency.summary())
    });
    row("leak check", &|r| {
        if r.leak.ok {
            format!("ok ({} given back at drop)", bytes(r.leak.released_at_drop))
        } else {
            format!("LEAK {}", bytes(r.leak.leaked_bytes.unsigned_abs()))
        }
    });
    out.push_str(&t.render());
    for r in runs {
        if let Some(o) = &r.run.oom {
            out.push_str(&format!(
                "\n[{}] out of memory at event {}: {} requested, {} reserved, {} allocated, largest free block {}, {} free on the device\n  {}\n",
                r.run.conf,
                count(o.event_index),
                bytes(o.requested_bytes),
                bytes(o.reserved_bytes),
                bytes(o.allocated_bytes),
                bytes(o.largest_free_block),
                bytes(o.device_free_bytes),
                o.message
            ));
        }
        if !r.leak.ok {
            out.push_str(&format!("\n{}\n", leak_text(r)));
        }
    }
    out
}
