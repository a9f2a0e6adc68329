//! Replays on a real GPU (`vramlab replay --device cuda`) for people (a
//! table per setting, with the latency of every driver and allocator call
//! and the leak check) and for programs (one JSON object per run).

use std::path::Path;

use serde_json::{Value, json};
use vramlab_allocator::devices::cuda::LatencySummary;
use vramlab_allocator::latency::{DeviceLatencies, LatencyHistogram};
use vramlab_replay::engine::cuda::CudaRun;
use vramlab_traces::Trace;

use crate::render::replay::run_json;
use crate::render::table::{Table, bytes, count, percent};

/// The runs as `replay --device cuda --json` prints them: one object
/// ([`cuda_run_json`]) for one setting, an array of them for several.
pub fn runs_json(trace: &Trace, path: &Path, runs: &[CudaRun], touch: bool) -> Value {
    let objs: Vec<Value> = runs
        .iter()
        .map(|r| cuda_run_json(trace, path, r, touch))
        .collect();
    if objs.len() == 1 {
        objs.into_iter().next().unwrap_or(Value::Null)
    } else {
        Value::Array(objs)
    }
}

/// One latency histogram's summary, in microseconds.
fn summary_json(s: &LatencySummary) -> Value {
    json!({
        "count": s.count,
        "p50_us": s.p50_ns as f64 / 1e3,
        "p99_us": s.p99_ns as f64 / 1e3,
        "max_us": s.max_ns as f64 / 1e3,
        "mean_us": s.mean_ns / 1e3,
        "total_us": s.total_ns as f64 / 1e3,
    })
}

/// One run as the JSON object `replay --device cuda --json` documents:
/// [`run_json`]'s object plus `device`, `latency` and `leak_check`.
// Indexing: `Value`'s `IndexMut<&str>` panics only on a value that is
// neither an object nor null, and `run_json` returns a `json!({..})`
// object literal.
#[allow(clippy::indexing_slicing)]
fn cuda_run_json(trace: &Trace, path: &Path, r: &CudaRun, touch: bool) -> Value {
    let mut v = run_json(trace, path, &r.run);
    let g = &r.gpu;
    let mut device_calls = serde_json::Map::new();
    for (name, s) in r.device_latency.summaries() {
        device_calls.insert(name.to_string(), summary_json(&s));
    }
    v["device"] = json!({
        "kind": "cuda",
        "gpu": g.ordinal,
        "name": g.name,
        "total_bytes": g.total_bytes,
        "granularity": g.granularity,
        "cuda_driver_version": g.driver.cuda_version(),
        "touch": touch,
        "device_errors": r.device_errors,
    });
    v["driver_time_us"] = json!(r.run.summary.device_time_us);
    v["latency"] = json!({
        "unit": "microseconds",
        "device_calls": Value::Object(device_calls),
        "allocator_calls": {
            "malloc": summary_json(&r.alloc_latency.summary()),
            "free": summary_json(&r.free_latency.summary()),
        },
    });
    v["leak_check"] = serde_json::to_value(r.leak).unwrap_or(Value::Null);
    v
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
