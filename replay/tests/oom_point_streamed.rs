//! OOM points of a trace file read again for each step of the searches
//! ([`find_oom_points_streamed`]) are those of the trace read whole
//! ([`find_oom_point`]), field for field (replays and the probes above the
//! answer included): on bundled traces, PyTorch's snapshots of private
//! pools and mid-run starts (fresh and recorded), and random traces.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use vramlab_allocator::{AllocConf, PolicySpec, TorchVersion};
use vramlab_replay::{Scenario, Start, find_oom_point, find_oom_points_streamed};
use vramlab_traces::{
    EventBlocks, IdUse, Trace, TraceError, VltEvents, open_events, read_binary, read_traces,
    write_binary,
};

mod corpus;
mod random;

fn scenarios(t: &Trace) -> Vec<Scenario> {
    let v = TorchVersion::NEWEST;
    let conf = |s: &str| AllocConf::parse(s, v).unwrap();
    let mut s = vec![
        Scenario::native(conf("")),
        Scenario::native(conf("expandable_segments:True")),
        Scenario::native(conf(
            "max_split_size_mb:128,garbage_collection_threshold:0.6",
        )),
    ];
    // Only PyTorch's native policy holds a recorded (mid-run) layout.
    if t.initial.is_none() {
        s.push(Scenario::new(PolicySpec::parse("bfc", "", v).unwrap()));
    }
    s
}

/// The streamed searches over `open()` and the whole searches over
/// `whole` agree, under each start; the file is read at least once per
/// step of the longest search.
fn assert_points_alike<E: EventBlocks + Send>(
    whole: &Trace,
    open: impl Fn() -> Result<E, TraceError>,
    what: &str,
) {
    let scenarios = scenarios(whole);
    for start in [Start::Fresh, Start::Recorded] {
        let opened = Cell::new(0u32);
        let counted = || {
            opened.set(opened.get() + 1);
            open()
        };
        let got = find_oom_points_streamed(counted, &scenarios, start).unwrap();
        let want: Vec<_> = scenarios
            .iter()
            .map(|s| find_oom_point(whole, s, start).unwrap())
            .collect();
        assert_eq!(got.points, want, "{what} ({start:?})");
        // Read through once per pass; the open that read its description
        // serves the first pass, a mid-run start's reserve has opens of
        // its own.
        assert!(got.reads <= opened.get(), "{what}");
        // Growing, bisecting and checking take at least three reads.
        assert!(got.reads >= 3, "{what}: {} reads", got.reads);
        assert!(got.reads <= want.iter().map(|p| p.replays).max().unwrap_or(0));
    }
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workloads/data")
        .join(name)
}

#[test]
fn bundled_traces_search_alike_streamed_and_whole() {
    for name in ["gpt-small-train.csv", "flux-resolution512.csv.gz"] {
        let path = data(name);
        let whole = read_traces(&path, None, &Default::default(), None)
            .unwrap()
            .remove(0);
        let open =
            || open_events(&path, None, IdUse::Recycled, None::<fn(u64)>).map(Option::unwrap);
        assert_points_alike(&whole, open, name);
    }
}

/// `t` written as a `.vlt` file in memory, searched read whole and
/// streamed.
fn assert_vlt_points_alike(t: &Trace, what: &str) {
    let mut bytes = Vec::new();
    write_binary(t, &mut bytes, false, "t.vlt").unwrap();
    let whole = read_binary(bytes.as_slice(), "t.vlt").unwrap();
    let open = || VltEvents::open(bytes.as_slice(), "t.vlt", IdUse::Recycled);
    assert_points_alike(&whole, open, what);
}

/// PyTorch's own snapshots of private pools and of recordings begun
/// mid-run (the state at the start bounds the search from below).
#[test]
fn pool_and_mid_run_snapshots_search_alike() {
    let traces = corpus::pool_snapshot_traces();
    let with_events: Vec<_> = traces
        .iter()
        .filter(|(_, t)| !t.events.is_empty())
        .collect();
    assert!(
        with_events.iter().any(|(_, t)| t.initial.is_some()),
        "no mid-run snapshot with events"
    );
    for (name, t) in with_events {
        assert_vlt_points_alike(t, name);
    }
}

/// A file without events gives the points of the empty trace held in
/// memory (each search ends at once), and says it had no events.
#[test]
fn an_empty_trace_gives_the_points_of_an_empty_trace() {
    let t = Trace::new(vramlab_traces::TraceHeader::default());
    let mut bytes = Vec::new();
    write_binary(&t, &mut bytes, false, "t.vlt").unwrap();
    let open = || VltEvents::open(bytes.as_slice(), "t.vlt", IdUse::Recycled);
    let got = find_oom_points_streamed(open, &scenarios(&t), Start::Fresh).unwrap();
    let want: Vec<_> = scenarios(&t)
        .iter()
        .map(|s| find_oom_point(&t, s, Start::Fresh).unwrap())
        .collect();
    assert_eq!(got.points, want);
    assert_eq!(got.end.counts.events, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// Random traces (streams, deferred frees, `empty_cache`).
    #[test]
    fn random_traces_search_alike(t in random::trace(150)) {
        if !t.events.is_empty() {
            assert_vlt_points_alike(&t, "random trace");
        }
    }
}
