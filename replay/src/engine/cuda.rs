//! Replaying on a real GPU (feature `cuda`): [`CudaDevice`] as a
//! [`ReplayDevice`], an allocator wrapper that times every caller-level
//! malloc and free, and [`CudaScenario`], which replays a trace through the
//! native policy on the GPU and checks that every byte comes back.

use std::rc::Rc;

use vramlab_allocator::cuda::{CudaDevice, CudaDeviceOptions, CudaError, Gpu, GpuInfo};
use vramlab_allocator::{DeviceLatencies, LatencyHistogram};

use crate::engine::timed::TimedAllocator;
use vramlab_allocator::{AllocConf, Allocator, Inspect, NativeAllocator};
use vramlab_traces::Trace;

use crate::engine::run::Run;
use crate::engine::{ReplayDevice, ReplayError, ReplayOptions, replay};

/// A real GPU cannot place segments at chosen addresses: fidelity mode's
/// placements are ignored. Driver time is measured, not simulated.
impl ReplayDevice for CudaDevice {
    fn device_time_us(&self) -> f64 {
        self.driver_time_us()
    }
}

/// Why a replay on the GPU failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CudaReplayError {
    /// No driver or device, or a driver call outside the replay failed.
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// The replay itself failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// `empty_cache` at the end failed.
    #[error("empty_cache after the replay: {0}")]
    EmptyCache(String),
}

/// Did the device memory come back? Free memory is read from the driver
/// (`cuMemGetInfo`) before the allocator exists, after the replay's final
/// `empty_cache`, and after the allocator and its device are dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LeakCheck {
    /// Free device memory before the replay.
    pub free_at_start: u64,
    /// `reserved_bytes.all.current` after the final `empty_cache`: segments
    /// that still hold allocations the trace never freed.
    pub reserved_after_empty_cache: u64,
    /// Bytes the device still held after the final `empty_cache` (must
    /// equal `reserved_after_empty_cache`).
    pub held_after_empty_cache: u64,
    /// Free device memory after the final `empty_cache`.
    pub free_after_empty_cache: u64,
    /// Bytes the device gave back when dropped (allocations the trace never
    /// freed, with their segments).
    pub released_at_drop: u64,
    /// Free device memory after the allocator and its device were dropped.
    pub free_at_end: u64,
    /// `free_at_start - free_at_end` (positive: memory did not come back).
    pub leaked_bytes: i64,
    /// No leak and the device's books agree with the allocator's.
    pub ok: bool,
}

/// Everything a replay on the GPU produced.
#[derive(Debug, Clone)]
pub struct CudaRun {
    /// The replay (its `device_time_us` is measured driver time; its `oom`
    /// is the real device's or the memory fraction's).
    pub run: Run,
    /// The GPU.
    pub gpu: GpuInfo,
    /// Driver-call latencies (malloc, free, map, unmap).
    pub device_latency: DeviceLatencies,
    /// Caller-level `malloc` latencies of the policy on this device.
    pub alloc_latency: LatencyHistogram,
    /// Caller-level `free` latencies.
    pub free_latency: LatencyHistogram,
    /// The leak check.
    pub leak: LeakCheck,
    /// Device calls that failed for reasons other than memory.
    pub device_errors: u64,
}

/// The native policy with some settings on a real GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct CudaScenario {
    /// The native policy's settings.
    pub conf: AllocConf,
    /// GPU ordinal, for the caller to open ([`CudaScenario::run_on`] takes
    /// the open GPU).
    pub gpu: u32,
    /// `torch.cuda.set_per_process_memory_fraction` applied before the
    /// first event.
    pub memory_fraction: Option<f64>,
    /// Device behaviour (memory writes).
    pub device: CudaDeviceOptions,
}

impl CudaScenario {
    /// The native policy with `conf` on GPU `gpu`.
    pub fn native(conf: AllocConf, gpu: u32) -> Self {
        CudaScenario {
            conf,
            gpu,
            memory_fraction: None,
            device: CudaDeviceOptions::default(),
        }
    }

    /// A short label: the settings string, or `default`.
    pub fn label(&self) -> String {
        let mut s = self.conf.to_string();
        if s.is_empty() {
            s = "default".into();
        }
        if let Some(f) = self.memory_fraction {
            s.push_str(&format!(" (fraction {f})"));
        }
        s
    }

    /// Replays `trace` on an open GPU, calls `empty_cache`, drops the
    /// allocator and checks that free device memory is back where it
    /// started. The scenario's `gpu` field is ignored.
    ///
    /// # Errors
    ///
    /// A driver failure outside the replay, a replay error (malformed trace,
    /// device failure other than OOM), or a failing final `empty_cache`.
    pub fn run_on(
        &self,
        gpu: &Rc<Gpu>,
        trace: &Trace,
        opts: &ReplayOptions,
    ) -> Result<CudaRun, CudaReplayError> {
        let free_at_start = gpu.mem_info()?.free;
        let dev = CudaDevice::new(Rc::clone(gpu), self.device);
        let mut native = NativeAllocator::new(self.conf.clone(), dev);
        if let Some(f) = self.memory_fraction {
            native.set_memory_fraction(f);
        }
        let mut alloc = TimedAllocator::new(native);
        let mut run = replay(trace, &mut alloc, opts)?;
        run.conf = self.label();
        run.capacity = Some(gpu.info().total_bytes);
        let device_latency = alloc.device().latencies().clone();
        alloc
            .empty_cache()
            .map_err(|e| CudaReplayError::EmptyCache(e.to_string()))?;
        let reserved_after_empty_cache = alloc.stats().reserved_bytes.all.current as u64;
        let held_after_empty_cache = alloc.device().held_bytes();
        let free_after_empty_cache = gpu.mem_info()?.free;
        let TimedAllocator {
            inner,
            malloc: alloc_latency,
            free: free_latency,
        } = alloc;
        let mut dev = inner.into_device();
        let released_at_drop = dev.release_all()?;
        let device_errors = dev.errors();
        drop(dev);
        gpu.synchronize()?;
        let free_at_end = gpu.mem_info()?.free;
        let leaked_bytes = free_at_start as i64 - free_at_end as i64;
        Ok(CudaRun {
            run,
            gpu: gpu.info().clone(),
            device_latency,
            alloc_latency,
            free_latency,
            leak: LeakCheck {
                free_at_start,
                reserved_after_empty_cache,
                held_after_empty_cache,
                free_after_empty_cache,
                released_at_drop,
                free_at_end,
                leaked_bytes,
                ok: leaked_bytes <= 0 && held_after_empty_cache == reserved_after_empty_cache,
            },
            device_errors,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramlab_allocator::SimDevice;
    use vramlab_allocator::TorchVersion;

    #[test]
    fn timed_allocator_counts_calls() {
        let native =
            NativeAllocator::new(AllocConf::new(TorchVersion::NEWEST), SimDevice::unlimited());
        let mut a = TimedAllocator::new(native);
        let h = a.malloc(1 << 20, 0).unwrap();
        let g = a.malloc(4096, 0).unwrap();
        a.free(h).unwrap();
        a.free_deferred(g).unwrap();
        a.complete_free(g).unwrap();
        assert_eq!(a.malloc.count(), 2);
        assert_eq!(a.free.count(), 2);
        assert_eq!(a.stats().allocated_bytes.all.current, 0);
        assert_eq!(a.name(), "native");
    }

    #[test]
    fn no_gpu_is_an_error_not_a_panic() {
        let s = CudaScenario::native(AllocConf::new(TorchVersion::NEWEST), 0);
        let t = Trace::new(Default::default());
        match Gpu::open(s.gpu) {
            Ok(gpu) => match s.run_on(&gpu, &t, &ReplayOptions::default()) {
                Ok(r) => assert!(r.leak.ok, "{:?}", r.leak),
                Err(e) => panic!("unexpected error: {e}"),
            },
            Err(CudaError::NotFound(m)) => assert!(!m.is_empty()),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}
