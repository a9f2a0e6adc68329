//! `vramlab replay --device cuda[:N] [--touch]`: the same replay on a real
//! GPU through the CUDA driver.
//!
//! Each setting is replayed by the native policy on GPU `N`
//! ([`vramlab_replay::CudaScenario`]): segments and pages come from the
//! driver, so the OOM point is the real device's (or the memory
//! fraction's). The output adds, per setting:
//!
//! * the latency (p50 / p99 / max) of every driver call the policy made:
//!   `cuMemAlloc`, `cuMemFree`, map (`cuMemCreate` + `cuMemMap` +
//!   `cuMemSetAccess`) and unmap (synchronise + `cuMemUnmap` +
//!   `cuMemRelease`);
//! * the latency of the caller-level `malloc` / `free` calls (cache hits
//!   included), comparable with `torch.cuda.caching_allocator_alloc` /
//!   `caching_allocator_delete` timings from `workloads/record/torch_replay.py`;
//! * a leak check: free device memory after the final `empty_cache` and the
//!   allocator's drop must be back at its value before the replay.
//!
//! Without a driver or device the command fails with "no CUDA
//! driver/device found: …" (exit code 2, as every error); a failed leak
//! check is an error too, after the output is printed. Built without the
//! `cuda` feature, `--device cuda` is an error that says so.
//!
//! The output is rendered by `crate::render::cuda_replay` (built with the
//! `cuda` feature only).
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
    use vramlab_allocator::cuda::Gpu;
    use vramlab_replay::ReplayOptions;
    use vramlab_replay::{CudaReplayError, CudaScenario};

    use super::*;
    use crate::render::cuda_replay::{leak_text, print_runs};

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
        print_runs(trace, opts.trace_path, &runs, opts.touch, opts.json)?;
        let leaks: Vec<String> = runs.iter().filter(|r| !r.leak.ok).map(leak_text).collect();
        if !leaks.is_empty() {
            anyhow::bail!("leak check failed: {}", leaks.join("; "));
        }
        Ok(runs.into_iter().map(|r| r.run).collect())
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
