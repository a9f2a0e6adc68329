//! A trace replayed while it is read ([`replay_streamed`], ids recycled)
//! gives the answers of the same trace read whole and replayed
//! ([`Scenario::run`]): peaks, statistics, the device log, the OOM (its
//! event, its allocation's number, the largest live allocations), the
//! final segments. Only the timeline differs (one point). Checked on every
//! bundled CSV trace under settings that stop at an OOM, continue past
//! OOMs, and expand segments, on random traces, and (as `.vlt` files) on
//! PyTorch's own snapshots of private pools and mid-run starts and on the
//! real snapshots, and (as RAPIDS RMM logs) on bundled and random traces.

use std::path::Path;

use proptest::prelude::*;
use vramlab_allocator::{AllocConf, PolicySpec, TorchVersion};
use vramlab_replay::{ReplayOptions, Run, Scenario, replay_streamed};
use vramlab_traces::{
    CsvEvents, Event, EventBlocks, IdUse, RmmEvents, Trace, VltEvents, open_events, read_traces,
    write_binary, write_csv,
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

/// The files of `dir` (relative to this crate) whose names `keep`, sorted.
fn files_in(dir: &str, keep: impl Fn(&str) -> bool) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| keep(&p.to_string_lossy()))
        .collect();
    files.sort();
    files
}

/// Every bundled CSV trace (plain and gzip), as the CLI opens them.
#[test]
fn bundled_traces_replay_alike_streamed_and_whole() {
    let files = files_in("../workloads/data", |n| {
        n.ends_with(".csv") || n.ends_with(".csv.gz")
    });
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
    let files = files_in("../tests/pools/snapshots", |n| {
        n.ends_with(".torch2.15.pickle")
    });
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
    let files = files_in("../../shared/traces/real", |n| n.ends_with(".pickle"));
    assert!(!files.is_empty(), "no snapshots in ../shared/traces/real");
    for path in &files {
        for t in read_traces(path, None, &Default::default(), None).unwrap() {
            assert_vlt_streamed_as_whole(&t, false, &path.display().to_string());
        }
    }
}

/// `t` as a RAPIDS RMM log: each allocation at its own pointer, a deferred
/// free logged when it completes, the streams as they are, a time column
/// that passes midnight.
fn rmm_log_of(t: &Trace) -> String {
    let mut log = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    let mut sizes = std::collections::HashMap::new();
    for (i, e) in t.events.iter().enumerate() {
        let secs = 86_390 + i as u64 / 1000;
        let time = format!(
            "{}:{:02}:{:02}.{:06}",
            secs / 3600 % 24,
            secs / 60 % 60,
            secs % 60,
            i % 1000
        );
        let row = |action: &str, id: u32, size: u64, stream: u64| {
            format!(
                "1,{time},{action},{:#x},{size},{stream:#x}\n",
                0x7f00_0000_0000u64 + u64::from(id) * 0x1000
            )
        };
        match *e {
            Event::Alloc { id, stream, size } => {
                sizes.insert(id, size);
                log.push_str(&row("allocate", id, size, t.streams[stream as usize]));
            }
            Event::Free { id } | Event::FreeCompleted { id } => {
                log.push_str(&row("free", id, sizes[&id], 0));
            }
            _ => {}
        }
    }
    log
}

/// Bundled traces and random ones, written as RMM logs: streamed (ids
/// recycled) and whole replays agree, and so do the notes and the counts.
#[test]
fn rmm_logs_replay_alike_streamed_and_whole() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data");
    let mut traces = Vec::new();
    for name in [
        "gpt-small-train.csv",
        "gpt-small-train-leak-empty-cache-seq128.csv.gz",
    ] {
        if let Ok(mut t) = read_traces(&data.join(name), None, &Default::default(), None) {
            traces.push((name.to_string(), t.remove(0)));
        }
    }
    assert!(!traces.is_empty());
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for k in 0..6 {
        let t = proptest::strategy::ValueTree::current(
            &random::trace(120).new_tree(&mut runner).unwrap(),
        );
        traces.push((format!("random trace {k}"), t));
    }
    for (what, t) in &traces {
        let log = rmm_log_of(t);
        let whole = vramlab_traces::read_rmm(log.as_bytes(), "rmm.csv").unwrap();
        if whole.events.is_empty() {
            continue;
        }
        let open = || RmmEvents::open(log.as_bytes(), "rmm.csv", IdUse::Recycled).unwrap();
        assert_streamed_as_whole(&whole, open, what);
        let end = open().finish().unwrap();
        assert_eq!(end.trace.notes, whole.notes, "{what}");
        assert_eq!(end.trace.header, whole.header, "{what}");
    }
}
