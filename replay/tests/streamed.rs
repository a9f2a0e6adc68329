//! A trace replayed while it is read ([`replay_streamed`], ids recycled)
//! gives the answers of the same trace read whole and replayed
//! ([`Scenario::run`]): peaks, statistics, the device log, the OOM (its
//! event, its allocation's number, the largest live allocations), the
//! final segments. Only the timeline differs (one point). Checked on every
//! bundled CSV trace under settings that stop at an OOM, continue past
//! OOMs, and expand segments, on random traces, and (as `.vlt` files) on
//! PyTorch's own snapshots of private pools and mid-run starts and on the
//! real snapshots.

use std::path::Path;

use proptest::prelude::*;
use vramlab_allocator::{AllocConf, PolicySpec, TorchVersion};
use vramlab_replay::{ReplayOptions, Run, Scenario, replay_streamed};
use vramlab_traces::{
    CsvEvents, EventBlocks, IdUse, Trace, VltEvents, open_events, read_traces, write_binary,
    write_csv,
};

mod random;

const GIB: u64 = 1 << 30;

fn scenarios() -> Vec<Scenario> {
    let v = TorchVersion::NEWEST;
    let conf = |s: &str| AllocConf::parse(s, v).unwrap();
    vec![
        Scenario::native(conf("")),
        Scenario::native(conf("expandable_segments:True")),
        Scenario::native(conf("max_split_size_mb:128")).with_capacity(Some(2 * GIB)),
        Scenario::native(AllocConf::parse("", TorchVersion::new(2, 11)).unwrap())
            .with_capacity(Some(GIB)),
        Scenario::new(PolicySpec::parse("bfc", "", v).unwrap()).with_capacity(Some(GIB)),
    ]
}

fn opts(stop_at_oom: bool) -> ReplayOptions {
    ReplayOptions {
        stop_at_oom,
        check_invariants: false,
        final_segments: true,
        segments_at_peak: true,
        ..Default::default()
    }
}

/// A run without its timeline (a streamed replay keeps one point), as
/// JSON: every field compared.
fn comparable(mut r: Run) -> serde_json::Value {
    r.timeline.clear();
    serde_json::to_value(&r).unwrap()
}

/// Replays `whole` read whole and `streamed()` as it is read, under every
/// scenario, stopping at OOMs and not.
fn assert_streamed_as_whole<E: EventBlocks + Send>(
    whole: &Trace,
    streamed: impl Fn() -> E,
    what: &str,
) {
    // Only PyTorch's native policy holds a recorded (mid-run) layout.
    let scenarios: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|s| whole.initial.is_none() || s.label() != "bfc")
        .collect();
    for stop in [true, false] {
        let o = opts(stop);
        let got = replay_streamed(streamed(), &scenarios, &o).unwrap();
        assert_eq!(got.end.counts.events, whole.events.len() as u64, "{what}");
        assert_eq!(got.end.counts.allocs, whole.num_allocs() as u64, "{what}");
        assert_eq!(got.end.trace.streams, whole.streams, "{what}");
        assert_eq!(got.end.trace.phases, whole.phases, "{what}");
        for (s, run) in scenarios.iter().zip(got.runs) {
            let want = s.run(whole, &o).unwrap();
            assert_eq!(
                comparable(run),
                comparable(want),
                "{what} under {} (stop at OOM: {stop})",
                s.label()
            );
        }
    }
}

/// Every bundled CSV trace (plain and gzip), as the CLI opens them.
#[test]
fn bundled_traces_replay_alike_streamed_and_whole() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data");
    let mut files: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".csv") || n.ends_with(".csv.gz")
        })
        .collect();
    files.sort();
    // A sample across the corpus keeps the debug build fast.
    let picked: Vec<_> = files.iter().step_by(14).collect();
    assert!(picked.len() >= 10, "{} files", files.len());
    for path in picked {
        let whole = read_traces(path, None, &Default::default(), None)
            .unwrap()
            .remove(0);
        let open = || {
            open_events(path, None, IdUse::Recycled, None::<fn(u64)>)
                .unwrap()
                .unwrap()
        };
        assert_streamed_as_whole(&whole, open, &path.display().to_string());
    }
}

/// Blocks handed over one after another are the events of the whole read;
/// with recycled ids, ids stay below the most allocations live at once.
#[test]
fn recycled_ids_stay_below_the_live_count() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let whole = read_traces(&path, None, &Default::default(), None)
        .unwrap()
        .remove(0);
    let mut live = 0i64;
    let mut most = 0i64;
    for e in &whole.events {
        match e {
            vramlab_traces::Event::Alloc { .. } => live += 1,
            vramlab_traces::Event::Free { .. } | vramlab_traces::Event::FreeCompleted { .. } => {
                live -= 1
            }
            _ => {}
        }
        most = most.max(live);
    }
    let mut events = open_events(&path, None, IdUse::Recycled, None::<fn(u64)>)
        .unwrap()
        .unwrap();
    let (mut buf, mut n) = (Vec::new(), 0usize);
    while events.next_block(&mut buf).unwrap() {
        for (got, want) in buf.iter().zip(&whole.events[n..]) {
            // Same kinds, sizes and streams; ids renamed.
            assert_eq!(std::mem::discriminant(got), std::mem::discriminant(want));
        }
        n += buf.len();
    }
    assert_eq!(n, whole.events.len());
    let end = events.finish().unwrap();
    assert!(end.trace.events.is_empty());
    assert_eq!(i64::from(end.trace.num_ids), most);
    assert!(
        end.trace.num_ids < whole.num_ids / 3,
        "{}",
        end.trace.num_ids
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random traces, written as CSV: streamed and whole replays agree.
    #[test]
    fn random_traces_replay_alike_streamed_and_whole(t in random::trace(120)) {
        let mut csv = Vec::new();
        write_csv(&t, &mut csv, "t.csv").unwrap();
        let whole = vramlab_traces::read_csv(csv.as_slice(), "t.csv").unwrap();
        let open = || CsvEvents::open(csv.as_slice(), "t.csv", IdUse::Recycled).unwrap();
        assert_streamed_as_whole(&whole, open, "random trace");
    }

    /// Random traces, written as `.vlt`: streamed and whole replays agree.
    #[test]
    fn random_traces_replay_alike_streamed_and_whole_as_vlt(t in random::trace(120)) {
        assert_vlt_streamed_as_whole(&t, false, "random trace");
    }
}

/// `t` written as a `.vlt` file (`zstd`: compressed), read as it is read
/// with recycled ids, replays as `t` read whole.
fn assert_vlt_streamed_as_whole(t: &Trace, zstd: bool, what: &str) {
    let mut bytes = Vec::new();
    write_binary(t, &mut bytes, zstd, "t.vlt").unwrap();
    let whole = vramlab_traces::read_binary(bytes.as_slice(), "t.vlt").unwrap();
    assert_eq!(&whole, t, "{what}");
    let open = || VltEvents::open(bytes.as_slice(), "t.vlt", IdUse::Recycled).unwrap();
    assert_streamed_as_whole(&whole, open, what);
}

/// PyTorch's own snapshots of private pools (graph captures, MemPools, a
/// capture that runs out of memory) and of a recording begun mid-run (an
/// initial state whose ids follow the allocations'), as `.vlt` files.
#[test]
fn pool_and_mid_run_snapshots_replay_alike_streamed_as_vlt() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/pools/snapshots");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".torch2.15.pickle"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    let mut mid_run = 0;
    for (i, path) in files.iter().enumerate() {
        for t in read_traces(path, None, &Default::default(), None).unwrap() {
            mid_run += usize::from(t.initial.is_some());
            assert_vlt_streamed_as_whole(&t, i % 2 == 1, &path.display().to_string());
        }
    }
    assert!(mid_run >= 1, "no mid-run snapshot among {files:?}");
}

/// The real snapshots (mid-run, with stacks), as `.vlt` files: streamed
/// and whole replays agree. Ignored by default: they are outside the
/// repository (../shared/traces/real).
#[test]
#[ignore]
fn real_snapshots_replay_alike_streamed_as_vlt() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/real");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no snapshots in {}", dir.display());
    for path in &files {
        for t in read_traces(path, None, &Default::default(), None).unwrap() {
            assert_vlt_streamed_as_whole(&t, false, &path.display().to_string());
        }
    }
}
