//! What the policy test files share: replaying a trace on a real GPU
//! (feature `cuda`) with the checks every policy must pass there.

use vramlab_allocator::Allocator;
use vramlab_replay::{ReplayOptions, replay};

/// Replays `trace` through the policy `make` builds on GPU 0 (feature
/// `cuda`), empties the cache, checks that the driver accepted every call,
/// runs `check`, drops the allocator and checks that every byte came back.
/// `false` (after printing why) without a CUDA driver or device.
pub fn on_gpu<A>(
    trace: &vramlab_traces::Trace,
    make: impl FnOnce(vramlab_allocator::cuda::CudaDevice) -> A,
    check: impl FnOnce(&vramlab_replay::Run, &A),
) -> bool
where
    A: Allocator<Dev = vramlab_allocator::cuda::CudaDevice>,
{
    use std::rc::Rc;
    use vramlab_allocator::cuda::{CudaDevice, CudaDeviceOptions, CudaError, Gpu};
    let gpu = match Gpu::open(0) {
        Ok(g) => g,
        Err(CudaError::NotFound(why)) => {
            println!("skipped: no CUDA driver/device ({why})");
            return false;
        }
        Err(e) => panic!("a driver is present but opening GPU 0 failed: {e}"),
    };
    let free_at_start = gpu.mem_info().expect("cuMemGetInfo").free;
    let mut a = make(CudaDevice::new(
        Rc::clone(&gpu),
        CudaDeviceOptions { touch: true },
    ));
    let opts = ReplayOptions {
        check_invariants: true,
        ..Default::default()
    };
    let run = replay(trace, &mut a, &opts).expect("replay on the GPU");
    a.empty_cache().expect("empty_cache");
    a.check_invariants().expect("invariants");
    assert_eq!(a.device().errors(), 0, "driver errors");
    assert_eq!(
        a.device().held_bytes(),
        a.stats().reserved_bytes.all.current as u64,
        "the device holds what the policy reserves"
    );
    println!(
        "{}: {} events, peak reserved {} B, {} device calls, {:.0} us in the driver",
        a.name(),
        run.summary.events_replayed,
        run.summary.peak_reserved_bytes,
        run.device_log.len(),
        run.summary.device_time_us
    );
    check(&run, &a);
    drop(a);
    gpu.synchronize().expect("synchronize");
    let free_at_end = gpu.mem_info().expect("cuMemGetInfo").free;
    assert!(
        free_at_end >= free_at_start,
        "{} bytes not given back",
        free_at_start - free_at_end
    );
    true
}
