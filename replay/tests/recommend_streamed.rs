//! A recommendation made from a trace file read again for each pass
//! ([`recommend_with`] over a [`TraceFile`]) is the one made from the
//! trace read whole ([`recommend_trace`]): the rows, the ranking, the
//! verdict and its words, the smallest cards, the placement ranges. On
//! bundled traces on cards where some settings fit and some do not,
//! PyTorch's snapshots of private pools and mid-run starts, and random
//! traces.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use vramlab_allocator::{Placement, TorchVersion};
use vramlab_replay::{
    RecommendRequest, TorchTarget, TraceFile, default_grid, recommend_trace, recommend_with,
    target_of,
};
use vramlab_traces::{
    EventBlocks, IdUse, Trace, TraceError, VltEvents, open_events, read_binary, read_traces,
    write_binary,
};

mod corpus;
mod random;

/// Both recommendations of `whole` (read whole) and of `open()` agree on
/// a card of `capacity` bytes.
fn assert_advice_alike<E: EventBlocks + Send>(
    whole: &Trace,
    open: impl Fn() -> Result<E, TraceError>,
    capacity: u64,
    what: &str,
) {
    let target: TorchTarget = target_of(whole, None);
    // Every fifth setting keeps the debug build quick; the policies stay.
    let grid: Vec<_> = default_grid(TorchVersion::NEWEST)
        .into_iter()
        .enumerate()
        .filter(|(i, g)| i % 5 == 0 || g.policy.name() != "native")
        .map(|(_, g)| g)
        .collect();
    let file = TraceFile::new(open).unwrap();
    let req = |trace| RecommendRequest {
        name: "t",
        trace,
        grid: &grid,
        capacity: Some(capacity),
        target: &target,
        start: None,
        placement: Placement::default(),
    };
    let want = recommend_trace(&req(whole), &|| {}).unwrap();
    let got = recommend_with(
        &req(vramlab_replay::ReplayPasses::trace(&file)),
        &file,
        &|| {},
    )
    .unwrap();
    assert_eq!(got.0, want.0, "{what}: rows");
    assert_eq!(got.1, want.1, "{what}: recommendation");
    assert!(file.reads() >= 2, "{what}: {} reads", file.reads());
}

/// Cards a little over the live peak (some settings fit) and under it.
fn cards(t: &Trace) -> [u64; 2] {
    let peak = vramlab_traces::TraceSummary::of(t).peak_live_bytes;
    [peak + peak / 10, peak / 2 + 1]
}

#[test]
fn bundled_traces_advise_alike_streamed_and_whole() {
    for name in ["gpt-small-train.csv", "flux-resolution512.csv.gz"] {
        let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../workloads/data")
            .join(name);
        let whole = read_traces(&path, None, &Default::default(), None)
            .unwrap()
            .remove(0);
        for card in cards(&whole) {
            let open =
                || open_events(&path, None, IdUse::Recycled, None::<fn(u64)>).map(Option::unwrap);
            assert_advice_alike(&whole, open, card, name);
        }
    }
}

/// `t` written as a `.vlt` file in memory, advised on read whole and
/// streamed.
fn assert_vlt_advice_alike(t: &Trace, what: &str) {
    let mut bytes = Vec::new();
    write_binary(t, &mut bytes, false, "t.vlt").unwrap();
    let whole = read_binary(bytes.as_slice(), "t.vlt").unwrap();
    for card in cards(&whole) {
        let open = || VltEvents::open(bytes.as_slice(), "t.vlt", IdUse::Recycled);
        assert_advice_alike(&whole, open, card, what);
    }
}

/// PyTorch's own snapshots of private pools and of recordings begun
/// mid-run.
#[test]
fn pool_and_mid_run_snapshots_advise_alike() {
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
        assert_vlt_advice_alike(t, name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    /// Random traces (streams, deferred frees, `empty_cache`).
    #[test]
    fn random_traces_advise_alike(t in random::trace(150)) {
        if t.num_allocs() > 0 {
            assert_vlt_advice_alike(&t, "random trace");
        }
    }
}
