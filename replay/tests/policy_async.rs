//! Replays of the `async` policy through the replay engine (the bundled GPT
//! trace, on the simulated device and, with feature `cuda`, on a real
//! GPU). Its exact scenario tests are in
//! allocator/tests/policy_async.rs.

use std::path::Path;

use vramlab_allocator::policies::async_pool::{AsyncPoolAllocator, Settings};
use vramlab_replay::{ReplayOptions, SimDevice, replay};

#[cfg(feature = "cuda")]
mod common;
#[cfg(feature = "cuda")]
use common::on_gpu;
#[cfg(feature = "cuda")]
use vramlab_allocator::Inspect;

const MIB: u64 = 1 << 20;

#[test]
fn replays_the_bundled_gpt_trace() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&path]).trace().expect("trace");
    for settings in ["", "release_threshold:max,reuse_across_streams:true"] {
        let mut a = AsyncPoolAllocator::new(
            Settings::parse(settings).unwrap(),
            SimDevice::with_capacity(Some(8 << 30)),
        );
        let opts = ReplayOptions {
            check_invariants: true,
            ..Default::default()
        };
        let run = replay(&trace, &mut a, &opts).expect("replay");
        assert!(run.oom.is_none(), "{settings}");
        assert_eq!(run.summary.events_replayed, run.summary.events);
        assert!(run.summary.peak_reserved_bytes >= run.summary.peak_allocated_bytes);
        assert_eq!(run.summary.peak_reserved_bytes % (2 * MIB), 0);
    }
}

#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU: cargo test -p vramlab-replay --features cuda -- --ignored"]
fn replays_on_a_real_gpu() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&path]).trace().expect("trace");
    for settings in ["", "release_threshold:max,reuse_across_streams:true"] {
        let conf = Settings::parse(settings).expect("settings");
        let ran = on_gpu(
            &trace,
            |d| AsyncPoolAllocator::new(conf, d),
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
