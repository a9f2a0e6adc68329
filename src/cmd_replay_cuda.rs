//! `vramlab replay --device cuda[:N] [--touch]`: the same replay on a real
//! GPU through the CUDA driver.
//!
//! Each setting is replayed by the native policy on GPU `N`
//! ([`vramlab_replay::engine::cuda::CudaScenario`]): segments and pages come from the
//! driver, so the OOM point is the real device's (or the memory
//! fraction's). The output adds, per setting:
//!
//! * the latency (p50 / p99 / max) of every driver call the policy made:
//!   `cuMemAlloc`, `cuMemFree`, map (`cuMemCreate` + `cuMemMap` +
//!   `cuMemSetAccess`) and unmap (synchronise + `cuMemUnmap` +
//!   `cuMemRelease`);
//! * the latency of the caller-level `malloc` / `free` calls (cache hits
//!   included), comparable with `torch.cuda.caching_allocator_alloc` /
//!   `caching_allocator_delete` timings from `traces/record/torch_replay.py`;
//! * a leak check: free device memory after the final `empty_cache` and the
//!   allocator's drop must be back at its value before the replay.
//!
//! Without a driver or device the command fails with "no CUDA
//! driver/device found: …" (exit code 2, as every error); a failed leak
//! check is an error too, after the output is printed. Built without the
//! `cuda` feature, `--device cuda` is an error that says so.
//!
//! Wiring (in `cmd_replay.rs`): flatten [`CudaArgs`] into `ReplayArgs` and,
//! when `run_on.kind == DeviceKind::Cuda`, call [`run_cuda`] instead of the
//! simulated replay.

use std::path::Path;

use clap::{Args, ValueEnum};
use vramlab_allocator::AllocConf;
use vramlab_replay::Run;
use vramlab_traces::Trace;

/// Where a replay runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum DeviceKind {
    /// The simulated GPU (deterministic, any machine).
    #[default]
    Sim,
    /// A real GPU through the CUDA driver.
    Cuda,
}

/// `sim`, `cuda` or `cuda:N` (as PyTorch names devices).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceSpec {
    /// Simulated or real.
    pub kind: DeviceKind,
    /// CUDA device ordinal (0 unless `cuda:N`).
    pub ordinal: u32,
}

/// clap value parser for [`DeviceSpec`].
pub fn parse_device(s: &str) -> Result<DeviceSpec, String> {
    match s {
        "sim" => Ok(DeviceSpec::default()),
        "cuda" => Ok(DeviceSpec {
            kind: DeviceKind::Cuda,
            ordinal: 0,
        }),
        _ => s
            .strip_prefix("cuda:")
            .and_then(|n| n.parse().ok())
            .map(|ordinal| DeviceSpec {
                kind: DeviceKind::Cuda,
                ordinal,
            })
            .ok_or_else(|| {
                format!(
                    "unknown device '{s}': expected sim, cuda or cuda:N (a CUDA device ordinal)"
                )
            }),
    }
}

/// The `--device` and `--touch` options of `vramlab replay`.
#[derive(Debug, Clone, Args)]
pub struct CudaArgs {
    /// Where to replay: "sim" (the simulated GPU), or "cuda" / "cuda:N" (a
    /// real GPU through the CUDA driver, ordinal N: real cudaMalloc and
    /// cuMemMap calls, per-call latency histograms, the device's own OOM
    /// point and a leak check).
    #[arg(long = "device", value_name = "sim|cuda[:N]", default_value = "sim", value_parser = parse_device)]
    pub run_on: DeviceSpec,
    /// With --device cuda: write zeros over every newly obtained segment or
    /// page (cuMemsetD8), outside the timed calls.
    #[arg(long)]
    pub touch: bool,
}

/// How [`run_cuda`] replays and prints.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct CudaReplayOptions<'a> {
    /// The trace file, for the output.
    pub trace_path: &'a Path,
    /// CUDA device ordinal (`--device cuda:N`).
    pub gpu: u32,
    /// `--touch`.
    pub touch: bool,
    /// Print JSON (`--json`): one object, or an array with several settings.
    pub json: bool,
    /// `--fraction`: `torch.cuda.set_per_process_memory_fraction`.
    pub fraction: Option<f64>,
    /// `--continue-on-oom`.
    pub continue_on_oom: bool,
    /// `--check`: the invariant checker after every event.
    pub check: bool,
    /// `--capacity`, which only the simulated device has: an error if set.
    pub capacity: Option<u64>,
    /// How a trace recorded mid-run begins (`--start`).
    pub start: vramlab_replay::Start,
}

/// Replays `trace` under each of `confs` on a real GPU and prints the
/// result (a table, or JSON with `opts.json`). Returns the runs (for
/// `--timeline`).
///
/// # Errors
///
/// "no CUDA driver/device found: …" without a driver or device; a replay
/// or driver failure; a failed leak check (after printing); `--capacity`
/// given; a build without the `cuda` feature.
pub fn run_cuda(
    trace: &Trace,
    confs: Vec<AllocConf>,
    opts: &CudaReplayOptions<'_>,
) -> anyhow::Result<Vec<Run>> {
    if opts.capacity.is_some() {
        anyhow::bail!(
            "--capacity applies to the simulated device; with --device cuda the GPU's own memory is the capacity (use --fraction to limit it)"
        );
    }
    imp::run(trace, confs, opts)
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::*;

    pub(super) fn run(
        _trace: &Trace,
        _confs: Vec<AllocConf>,
        _opts: &CudaReplayOptions<'_>,
    ) -> anyhow::Result<Vec<Run>> {
        anyhow::bail!(
            "this vramlab was built without the `cuda` feature; rebuild with `cargo build --release --features cuda` to replay on a GPU"
        )
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use anyhow::Context;
    use serde_json::{Value, json};
    use vramlab_allocator::devices::cuda::{Gpu, LatencySummary};
    use vramlab_allocator::latency::{DeviceLatencies, LatencyHistogram};
    use vramlab_replay::ReplayOptions;
    use vramlab_replay::engine::cuda::{CudaReplayError, CudaRun, CudaScenario};

    use super::*;
    use crate::render::replay::run_json;
    use crate::render::table::{Table, bytes, count, percent};

    pub(super) fn run(
        trace: &Trace,
        confs: Vec<AllocConf>,
        opts: &CudaReplayOptions<'_>,
    ) -> anyhow::Result<Vec<Run>> {
        // The probe's error reads "no CUDA driver/device found: …" and is
        // passed on unwrapped so that it is the first thing printed.
        let gpu = Gpu::open(opts.gpu)?;
        let ropts = ReplayOptions {
            stop_at_oom: !opts.continue_on_oom,
            check_invariants: opts.check,
            start: opts.start,
            ..Default::default()
        };
        let mut runs = Vec::with_capacity(confs.len());
        for conf in confs {
            let mut s = CudaScenario::native(conf, opts.gpu);
            s.memory_fraction = opts.fraction;
            s.device.touch = opts.touch;
            let r = s
                .run_on(&gpu, trace, &ropts)
                .map_err(|e| match e {
                    CudaReplayError::Cuda(c) => anyhow::Error::new(c),
                    other => anyhow::Error::new(other),
                })
                .with_context(|| {
                    format!(
                        "replaying {} under {} on GPU {}",
                        opts.trace_path.display(),
                        s.label(),
                        opts.gpu
                    )
                })?;
            runs.push(r);
        }
        if opts.json {
            let objs: Vec<Value> = runs
                .iter()
                .map(|r| cuda_run_json(trace, opts.trace_path, r, opts.touch))
                .collect();
            let v = if objs.len() == 1 {
                objs.into_iter().next().unwrap_or(Value::Null)
            } else {
                Value::Array(objs)
            };
            outln!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            out!("{}", human(trace, opts.trace_path, &runs));
        }
        let leaks: Vec<String> = runs.iter().filter(|r| !r.leak.ok).map(leak_text).collect();
        if !leaks.is_empty() {
            anyhow::bail!("leak check failed: {}", leaks.join("; "));
        }
        Ok(runs.into_iter().map(|r| r.run).collect())
    }

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

    fn leak_text(r: &CudaRun) -> String {
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

    fn human(trace: &Trace, path: &Path, runs: &[CudaRun]) -> String {
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
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::args::{ConfArgs, DeviceArgs, TraceArgs};

    /// The options `vramlab replay` combines with [`CudaArgs`].
    #[derive(Debug, Parser)]
    struct Replay {
        #[command(flatten)]
        trace: TraceArgs,
        #[command(flatten)]
        conf: ConfArgs,
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        cuda: CudaArgs,
    }

    #[test]
    fn flags_combine_with_the_replay_options() {
        Replay::command().debug_assert();
        let r = Replay::parse_from(["x", "t.csv"]);
        assert_eq!(r.cuda.run_on.kind, DeviceKind::Sim);
        let r = Replay::parse_from(["x", "t.csv", "--device", "cuda:3", "--touch"]);
        assert_eq!(r.cuda.run_on.kind, DeviceKind::Cuda);
        assert_eq!((r.cuda.run_on.ordinal, r.cuda.touch), (3, true));
        let r = Replay::parse_from(["x", "t.csv", "--device", "cuda", "--gpu", "h100-80gb"]);
        assert_eq!(r.cuda.run_on.ordinal, 0);
        assert!(Replay::try_parse_from(["x", "t.csv", "--device", "tpu"]).is_err());
        assert!(Replay::try_parse_from(["x", "t.csv", "--device", "cuda:x"]).is_err());
    }

    #[test]
    fn capacity_is_refused_and_no_gpu_is_a_clear_error() {
        let t = Trace::new(Default::default());
        let conf = AllocConf::new(vramlab_allocator::TorchVersion::NEWEST);
        let mut o = CudaReplayOptions {
            trace_path: Path::new("t.csv"),
            gpu: 0,
            touch: false,
            json: false,
            fraction: None,
            continue_on_oom: false,
            check: false,
            capacity: Some(1 << 30),
            start: vramlab_replay::Start::Recorded,
        };
        let e = run_cuda(&t, vec![conf.clone()], &o).unwrap_err();
        assert!(e.to_string().contains("--capacity"), "{e}");
        o.capacity = None;
        o.gpu = 100_000;
        let e = run_cuda(&t, vec![conf], &o).unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.starts_with("no CUDA driver/device found: ")
                || msg.contains("without the `cuda` feature"),
            "{msg}"
        );
    }
}
