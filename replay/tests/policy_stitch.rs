//! Replays of the `stitch` policy through the replay engine (the bundled GPT
//! trace, on the simulated device and, with feature `cuda`, on a real
//! GPU). Its exact scenario tests are in
//! allocator/tests/policy_stitch.rs.

use std::path::Path;

use vramlab_allocator::Inspect;
use vramlab_allocator::policies::stitch::{Settings, StitchAllocator};
use vramlab_replay::{ReplayOptions, SimDevice, replay};

#[cfg(feature = "cuda")]
mod common;
#[cfg(feature = "cuda")]
use common::on_gpu;

const MIB: u64 = 1 << 20;

#[test]
fn replays_the_bundled_gpt_trace() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&path]).trace().expect("trace");
    for settings in [
        "",
        "fragment_limit:2MiB",
        "fragment_limit:2MiB,defragment_level:1",
    ] {
        let mut a = StitchAllocator::new(
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
        // This training loop's cache never has free blocks that add up to a
        // missed request, so nothing is stitched.
        assert_eq!(a.num_stitches(), 0, "{settings}");
    }
}

/// Three iterations of: a, b, c of 12 MiB; free a and c; s of 20 MiB; free
/// s and b; then `empty_cache`.
fn holes_trace() -> vramlab_traces::Trace {
    use vramlab_traces::Event;
    let mut t = vramlab_traces::Trace::new(Default::default());
    let mut id = 0;
    for _ in 0..3 {
        let (a, b, c, s) = (id, id + 1, id + 2, id + 3);
        id += 4;
        for x in [a, b, c] {
            t.events.push(Event::Alloc {
                id: x,
                stream: 0,
                size: 12 * MIB,
            });
        }
        t.events.push(Event::Free { id: a });
        t.events.push(Event::Free { id: c });
        t.events.push(Event::Alloc {
            id: s,
            stream: 0,
            size: 20 * MIB,
        });
        t.events.push(Event::Free { id: s });
        t.events.push(Event::FreeRequested { id: b });
        t.events.push(Event::FreeCompleted { id: b });
        t.events.push(Event::EmptyCache);
    }
    t.num_ids = id;
    t
}

#[test]
fn replay_engine_drives_stitching() {
    let trace = holes_trace();
    let opts = ReplayOptions {
        check_invariants: true,
        ..Default::default()
    };
    let mut on = StitchAllocator::new(
        Settings::parse("fragment_limit:16MiB").unwrap(),
        SimDevice::unlimited(),
    );
    let run_on = replay(&trace, &mut on, &opts).expect("replay");
    let mut off = StitchAllocator::new(
        Settings::parse("stitch:false").unwrap(),
        SimDevice::unlimited(),
    );
    let run_off = replay(&trace, &mut off, &opts).expect("replay");
    assert_eq!(on.num_stitches(), 3);
    assert_eq!(
        on.num_dissolves(),
        3,
        "each empty_cache dissolves the sBlock"
    );
    assert_eq!(run_on.summary.peak_reserved_bytes, 36 * MIB);
    assert_eq!(run_off.summary.peak_reserved_bytes, 56 * MIB);
    assert_eq!(run_on.summary.final_reserved_bytes, 0);
    assert_eq!(on.device().used(), 0);
}

#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a CUDA GPU: cargo test -p vramlab-replay --features cuda -- --ignored"]
fn replays_on_a_real_gpu() {
    // Stitching moves real pages: unmap at home, map at the sBlock's range.
    let conf = Settings::parse("fragment_limit:16MiB").expect("settings");
    let ran = on_gpu(
        &holes_trace(),
        |d| StitchAllocator::new(conf, d),
        |run, a| {
            assert_eq!(a.num_stitches(), 3);
            assert_eq!(run.summary.peak_reserved_bytes, 36 * MIB);
            assert_eq!(a.device().held_bytes(), 0);
        },
    );
    if !ran {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&path]).trace().expect("trace");
    let conf = Settings::parse("fragment_limit:2MiB").expect("settings");
    on_gpu(
        &trace,
        |d| StitchAllocator::new(conf, d),
        |run, a| {
            assert!(run.oom.is_none());
            assert_eq!(a.device().held_bytes(), 0);
        },
    );
}
