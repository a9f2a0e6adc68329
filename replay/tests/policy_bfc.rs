//! Replays of the `bfc` policy through the replay engine (the bundled GPT
//! trace, on the simulated device and, with feature `cuda`, on a real
//! GPU). Its exact scenario tests are in
//! allocator/tests/policy_bfc.rs.

use std::path::Path;

use vramlab_allocator::policies::bfc::{BfcAllocator, Settings};
use vramlab_replay::{ReplayOptions, SimDevice, replay};

#[cfg(feature = "cuda")]
mod common;
#[cfg(feature = "cuda")]
use common::on_gpu;
#[cfg(feature = "cuda")]
use vramlab_allocator::Inspect;

const GIB: u64 = 1 << 30;

fn replay_gpt(settings: &str, capacity: Option<u64>) -> vramlab_replay::Run {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&path]).trace().expect("trace");
    let conf = Settings::parse(settings).expect("settings");
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

#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU: cargo test -p vramlab-replay --features cuda -- --ignored"]
fn replays_on_a_real_gpu() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&path]).trace().expect("trace");
    for settings in [
        "allow_growth:true,garbage_collection:true",
        "memory_limit:2GiB",
    ] {
        let conf = Settings::parse(settings).expect("settings");
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
