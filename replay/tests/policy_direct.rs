//! Replays of the `direct` policy through the replay engine (the bundled GPT
//! trace, on the simulated device and, with feature `cuda`, on a real
//! GPU). Its exact scenario tests are in
//! allocator/tests/policy_direct.rs.

use std::path::Path;

use vramlab_allocator::policies::direct::{DirectAllocator, Settings};
use vramlab_replay::{ReplayOptions, SimDevice, replay};

#[cfg(feature = "cuda")]
mod common;
#[cfg(feature = "cuda")]
use common::on_gpu;
#[cfg(feature = "cuda")]
use vramlab_allocator::Inspect;

#[test]
fn replays_the_bundled_gpt_trace() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&path]).trace().expect("trace");
    let mut a = DirectAllocator::new(Settings::default(), SimDevice::unlimited());
    let opts = ReplayOptions {
        check_invariants: true,
        ..Default::default()
    };
    let run = replay(&trace, &mut a, &opts).expect("replay");
    let s = &run.summary;
    assert!(run.oom.is_none());
    assert_eq!(s.events_replayed, s.events);
    // Without a cache, reserved memory is exactly the live requests.
    assert_eq!(s.peak_reserved_bytes, s.peak_requested_bytes);
    assert_eq!(s.peak_allocated_bytes, s.peak_requested_bytes);
    assert_eq!(s.num_device_alloc, s.allocs);
    assert_eq!(s.num_device_free, s.frees);
    assert_eq!(s.final_reserved_bytes, 0);
}

#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU: cargo test -p vramlab-replay --features cuda -- --ignored"]
fn replays_on_a_real_gpu() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&path]).trace().expect("trace");
    on_gpu(
        &trace,
        |d| DirectAllocator::new(Settings::default(), d),
        |run, a| {
            assert!(run.oom.is_none());
            assert_eq!(
                run.summary.peak_reserved_bytes,
                run.summary.peak_requested_bytes
            );
            assert_eq!(a.device().held_bytes(), 0);
        },
    );
}
