//! Replays of the `bfc` policy through the replay engine (the bundled GPT
//! trace, on the simulated device and, with feature `cuda`, on a real
//! GPU). Its exact scenario tests are in
//! allocator/tests/policy_bfc.rs.

use std::path::Path;

#[cfg(feature = "cuda")]
use vramlab_allocator::Allocator;
use vramlab_allocator::policies::bfc::{BfcAllocator, Config};
use vramlab_replay::{ReplayOptions, SimDevice, replay};

const GIB: u64 = 1 << 30;

fn replay_gpt(settings: &str, capacity: Option<u64>) -> vramlab_replay::Run {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/data/gpt-small-train.csv");
    let trace = vramlab_traces::io::read_trace(&path, None, None).expect("trace");
    let conf = Config::parse(settings).expect("settings");
    let mut a = BfcAllocator::new(conf, SimDevice::with_capacity(capacity));
    let opts = ReplayOptions {
        check_invariants: true,
        ..Default::default()
    };
    replay(&trace, &mut a, &opts).expect("replay")
}

#[test]
fn replays_the_bundled_gpt_trace() {
    // Growth: regions double; memory is never returned.
    let run = replay_gpt("allow_growth:true,garbage_collection:true", Some(8 * GIB));
    assert!(run.oom.is_none());
    assert_eq!(run.summary.events_replayed, run.summary.events);
    assert!(run.summary.peak_reserved_bytes >= run.summary.peak_allocated_bytes);
    assert_eq!(run.summary.num_device_free, 0);
    // Preallocation: one region of 75 % of the device.
    let run = replay_gpt("", Some(8 * GIB));
    assert!(run.oom.is_none());
    assert_eq!(run.summary.num_device_alloc, 1);
    assert_eq!(run.summary.peak_reserved_bytes, 6 * GIB);
}

/// Replays `trace` through the policy `make` builds on GPU 0 (feature
/// `cuda`), empties the cache, checks that the driver accepted every call,
/// runs `check`, drops the allocator and checks that every byte came back.
/// `false` (after printing why) without a CUDA driver or device.
#[cfg(feature = "cuda")]
fn on_gpu<A>(
    trace: &vramlab_traces::Trace,
    make: impl FnOnce(vramlab_allocator::devices::cuda::CudaDevice) -> A,
    check: impl FnOnce(&vramlab_replay::Run, &A),
) -> bool
where
    A: Allocator<Dev = vramlab_allocator::devices::cuda::CudaDevice>,
{
    use std::rc::Rc;
    use vramlab_allocator::devices::cuda::{CudaDevice, CudaDeviceOptions, CudaError, Gpu};
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

#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU: cargo test -p vramlab-replay --features cuda -- --ignored"]
fn replays_on_a_real_gpu() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/data/gpt-small-train.csv");
    let trace = vramlab_traces::io::read_trace(&path, None, None).expect("trace");
    for settings in [
        "allow_growth:true,garbage_collection:true",
        "memory_limit:2GiB",
    ] {
        let conf = Config::parse(settings).expect("settings");
        let ran = on_gpu(
            &trace,
            |d| BfcAllocator::new(conf, d),
            |run, a| {
                assert!(run.oom.is_none(), "{settings}");
                assert_eq!(a.device().held_bytes(), 0, "{settings}");
            },
        );
        if !ran {
            return;
        }
    }
}
