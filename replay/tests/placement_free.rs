//! The placement range without a second replay: a replay whose policy saw
//! no choice between free blocks of one size in different segments
//! (`Run::placement_free`; allocator/src/policies/native/ties.rs) must
//! predict exactly what the other placement predicts. Checked on the
//! bundled corpus under PyTorch 2.11's rules (ties by address), with and
//! without a capacity that runs out, under settings that take each of the
//! lookup's paths; and the check must skip replays for real (not only
//! when nothing was allocated), or it proves nothing.

use vramlab_allocator::{AllocConf, Placement, TorchVersion};
use vramlab_replay::{ReplayOptions, Run, Scenario};
use vramlab_workloads::{corpus, read_recording_bytes};

const SETTINGS: [&str; 5] = [
    "",
    "expandable_segments:True",
    "max_split_size_mb:128",
    "roundup_power2_divisions:4",
    "garbage_collection_threshold:0.6",
];

fn run(trace: &vramlab_traces::Trace, conf: &AllocConf, cap: Option<u64>, p: Placement) -> Run {
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        ..Default::default()
    };
    Scenario::native(conf.clone())
        .with_capacity(cap)
        .with_placement(p)
        .run(trace, &opts)
        .unwrap_or_else(|e| panic!("{}: {e}", trace.header.source))
}

#[test]
fn a_placement_free_replay_predicts_what_the_other_placement_does() {
    let v = TorchVersion::new(2, 11);
    let (mut free, mut total, mut differ) = (0, 0, 0);
    // Every tenth trace of the corpus keeps the test to seconds;
    // VRAMLAB_FULL_CORPUS=1 takes all of it (with --release: 470 of 1,510
    // replays placement-free, none predicting otherwise than the other
    // placement).
    let step = if std::env::var_os("VRAMLAB_FULL_CORPUS").is_some() {
        1
    } else {
        10
    };
    for e in corpus().iter().step_by(step) {
        let trace = read_recording_bytes(e.bytes, e.file).unwrap().trace;
        for s in SETTINGS {
            let conf = AllocConf::parse(s, v).unwrap();
            let unlimited = run(&trace, &conf, None, Placement::Driver);
            // Half the unlimited peak: most replays run out of memory.
            let caps = [None, Some(unlimited.summary.peak_reserved_bytes / 2)];
            for cap in caps {
                let a = run(&trace, &conf, cap, Placement::Driver);
                let b = run(&trace, &conf, cap, Placement::Ascending);
                total += 1;
                let same = a.summary.peak_reserved_bytes == b.summary.peak_reserved_bytes
                    && a.oom.as_ref().map(|o| o.event_index)
                        == b.oom.as_ref().map(|o| o.event_index);
                differ += usize::from(!same);
                if a.placement_free {
                    free += 1;
                    let calls = a.summary.num_device_alloc + a.summary.num_device_free;
                    assert!(
                        calls > 0 || a.oom.is_some(),
                        "{} {s}: nothing to decide",
                        e.file
                    );
                    assert!(
                        same,
                        "{} [{s}] cap {cap:?}: called placement-free, but the other placement differs",
                        e.file
                    );
                    assert!(
                        b.placement_free,
                        "{} [{s}]: the other placement saw a tie",
                        e.file
                    );
                }
            }
        }
    }
    eprintln!("{free} of {total} replays placement-free; {differ} differ between placements");
    // Not vacuous: some replays are settled without the second one, and
    // some are not (the address order decides those).
    assert!(free > total / 10, "{free} of {total}");
    assert!(differ > 0);
}
