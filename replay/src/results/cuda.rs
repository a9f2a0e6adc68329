//! A replay on a real GPU as `vramlab replay --device cuda --json` prints
//! it: the replay's result plus the GPU, the latency of every driver and
//! allocator call, and the leak check.

use std::collections::BTreeMap;

use serde::Serialize;
use vramlab_allocator::LatencySummary;
use vramlab_traces::Trace;

use crate::engine::cuda::{CudaRun, LeakCheck};
use crate::results::replay::ReplayResult;

/// One setting replayed on a real GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CudaReplayResult {
    /// The replay (its `device_time_us` is measured driver time).
    #[serde(flatten)]
    pub replay: ReplayResult,
    /// The GPU.
    pub(crate) device: CudaDeviceFigures,
    /// Measured time in driver calls, microseconds.
    pub driver_time_us: f64,
    /// Call latencies.
    pub(crate) latency: CallLatencies,
    /// Whether the device memory came back.
    pub leak_check: LeakCheck,
}

/// The GPU a replay ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CudaDeviceFigures {
    /// Always `cuda`.
    pub(crate) kind: &'static str,
    /// Its ordinal.
    pub(crate) gpu: u32,
    /// Its name.
    pub(crate) name: String,
    /// Its memory.
    pub(crate) total_bytes: u64,
    /// The granularity of its mappings.
    pub(crate) granularity: u64,
    /// The driver's CUDA version (`12.8`).
    pub(crate) cuda_driver_version: String,
    /// New segments were written over (`--touch`).
    pub(crate) touch: bool,
    /// Device calls that failed for reasons other than memory.
    pub(crate) device_errors: u64,
}

/// The latencies of the driver's and the policy's calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CallLatencies {
    /// Always `microseconds`.
    pub(crate) unit: &'static str,
    /// Per driver call (`malloc`, `free`, `map`, `unmap`).
    pub(crate) device_calls: BTreeMap<&'static str, LatencyMicros>,
    /// The policy's `malloc` and `free`.
    pub(crate) allocator_calls: AllocatorCalls,
}

/// The policy's caller-level calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AllocatorCalls {
    /// `malloc`.
    pub(crate) malloc: LatencyMicros,
    /// `free`.
    pub(crate) free: LatencyMicros,
}

/// One latency histogram's summary, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct LatencyMicros {
    /// Calls recorded.
    pub(crate) count: u64,
    /// Median.
    pub(crate) p50_us: f64,
    /// 99th percentile.
    pub(crate) p99_us: f64,
    /// Slowest call.
    pub(crate) max_us: f64,
    /// Mean.
    pub(crate) mean_us: f64,
    /// Sum of all calls.
    pub(crate) total_us: f64,
}

impl From<&LatencySummary> for LatencyMicros {
    fn from(s: &LatencySummary) -> Self {
        LatencyMicros {
            count: s.count,
            p50_us: s.p50_ns as f64 / 1e3,
            p99_us: s.p99_ns as f64 / 1e3,
            max_us: s.max_ns as f64 / 1e3,
            mean_us: s.mean_ns / 1e3,
            total_us: s.total_ns as f64 / 1e3,
        }
    }
}

impl CudaReplayResult {
    /// `r`, a replay of `trace` (read from `path`) on a GPU, new segments
    /// written over when `touch`.
    pub fn new(trace: &Trace, path: &str, r: &CudaRun, touch: bool) -> Self {
        let g = &r.gpu;
        CudaReplayResult {
            replay: ReplayResult::new(trace, path, &r.run, None),
            device: CudaDeviceFigures {
                kind: "cuda",
                gpu: g.ordinal,
                name: g.name.clone(),
                total_bytes: g.total_bytes,
                granularity: g.granularity,
                cuda_driver_version: g.driver.cuda_version(),
                touch,
                device_errors: r.device_errors,
            },
            driver_time_us: r.run.summary.device_time_us,
            latency: CallLatencies {
                unit: "microseconds",
                device_calls: r
                    .device_latency
                    .summaries()
                    .iter()
                    .map(|(name, s)| (*name, LatencyMicros::from(s)))
                    .collect(),
                allocator_calls: AllocatorCalls {
                    malloc: LatencyMicros::from(&r.alloc_latency.summary()),
                    free: LatencyMicros::from(&r.free_latency.summary()),
                },
            },
            leak_check: r.leak,
        }
    }
}
