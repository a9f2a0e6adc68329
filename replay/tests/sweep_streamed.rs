//! A sweep of a trace file replayed as it is read ([`sweep_trace`] over a
//! [`TraceFile`]: the file read once, every setting replaying each block,
//! in parallel) and of the trace held in memory give the rows of the sweep
//! of the same trace read whole ([`run_sweep`]), row for row, on bundled traces, PyTorch's snapshots of
//! private pools and mid-run starts, and random traces, on an unlimited device and on one where settings run out
//! of memory, whole and sharded. And a replay that forgets the device's
//! calls ([`ReplayOptions::forget_device_calls`]) counts them as one that
//! keeps them.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use vramlab_allocator::{Placement, TorchVersion};
use vramlab_replay::{
    GridEntry, ReplayOptions, Shard, SweepFile, TraceFile, default_grid, parse_grid_line,
    run_sweep, sweep_trace,
};
use vramlab_traces::{
    EventBlocks, IdUse, Trace, VltEvents, open_events, read_binary, read_traces, write_binary,
};

mod corpus;
mod random;

const GIB: u64 = 1 << 30;

/// Settings of every policy and the native knobs that change decisions.
fn grid() -> Vec<GridEntry> {
    let v = TorchVersion::NEWEST;
    let mut g: Vec<GridEntry> = default_grid(v).into_iter().step_by(5).collect();
    for line in [
        "policy=direct default",
        "policy=bfc allow_growth:true",
        "policy=async default",
        "policy=stitch default",
        "expandable_segments:True",
        "fraction=0.8 garbage_collection_threshold:0.6",
    ] {
        g.push(parse_grid_line(line, v).unwrap());
    }
    g
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workloads/data")
        .join(name)
}

/// The rows of the whole read (`whole`) and of the streamed sweep of
/// `open()` agree, at each capacity, whole and as shard 2 of 3; the
/// number of rows that ran out of memory.
fn assert_rows_alike<E: EventBlocks + Send>(
    whole: &Trace,
    open: impl Fn() -> E,
    capacities: &[Option<u64>],
    what: &str,
) -> usize {
    let mut ooms = 0;
    let grid = grid();
    let traces = vec![("t".to_string(), whole.clone())];
    for &capacity in capacities {
        for shard in [None, Some(Shard { k: 2, n: 3 })] {
            let want = run_sweep(
                &traces,
                &grid,
                capacity,
                Placement::default(),
                shard,
                None,
                &|| {},
            )
            .unwrap();
            let file = SweepFile {
                name: "t",
                first_index: 0,
            };
            let read = TraceFile::new(|| Ok(open())).unwrap();
            let card = (capacity, Placement::default());
            let got = sweep_trace(&read, file, &grid, card, shard, None, &|| {}).unwrap();
            let end = read.first_end().unwrap();
            assert_eq!(end.counts.events, whole.events.len() as u64);
            assert_eq!(got, want, "{what} at {capacity:?}, shard {shard:?}");
            let held = sweep_trace(whole, file, &grid, card, shard, None, &|| {}).unwrap();
            assert_eq!(held, want, "{what} held at {capacity:?}, shard {shard:?}");
            ooms += want.iter().filter(|r| !r.fits()).count();
        }
    }
    ooms
}

/// A card a little over the trace's live peak: some settings run out of
/// memory there, some fit.
fn tight_card(t: &Trace) -> Option<u64> {
    let peak = vramlab_traces::TraceSummary::of(t).peak_live_bytes;
    Some(peak + peak / 20)
}

#[test]
fn bundled_traces_sweep_alike_streamed_and_whole() {
    for name in [
        "gpt-small-train.csv",
        "gpt-small-train-leak-empty-cache-seq128.csv.gz",
        "flux-resolution512.csv.gz",
    ] {
        let path = data(name);
        let whole = read_traces(&path, None, &Default::default(), None)
            .unwrap()
            .remove(0);
        let open = || {
            open_events(&path, None, IdUse::Recycled, None::<fn(u64)>)
                .unwrap()
                .unwrap()
        };
        let ooms = assert_rows_alike(&whole, open, &[None, tight_card(&whole)], name);
        assert!(ooms > 0, "{name}: no setting ran out of memory");
    }
}

/// `t` written as a `.vlt` file in memory, swept read whole and streamed.
fn assert_vlt_rows_alike(t: &Trace, what: &str) {
    let mut bytes = Vec::new();
    write_binary(t, &mut bytes, false, "t.vlt").unwrap();
    let whole = read_binary(bytes.as_slice(), "t.vlt").unwrap();
    let open = || VltEvents::open(bytes.as_slice(), "t.vlt", IdUse::Recycled).unwrap();
    assert_rows_alike(&whole, open, &[None, tight_card(&whole), Some(GIB)], what);
}

/// PyTorch's own snapshots of private pools and of a recording begun
/// mid-run (its recorded layout seeded), as `.vlt` files.
#[test]
fn pool_and_mid_run_snapshots_sweep_alike() {
    for (name, t) in corpus::pool_snapshot_traces() {
        assert_vlt_rows_alike(&t, &name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// Random traces (streams, deferred frees, `empty_cache`).
    #[test]
    fn random_traces_sweep_alike(t in random::trace(150)) {
        assert_vlt_rows_alike(&t, "random trace");
    }
}

/// Forgetting the device's calls changes no figure, and keeps no log.
#[test]
fn forgotten_device_calls_are_counted_alike() {
    let whole = read_traces(
        &data("gpt-small-train.csv"),
        None,
        &Default::default(),
        None,
    )
    .unwrap()
    .remove(0);
    for entry in grid() {
        for capacity in [None, Some(GIB)] {
            let s = entry.scenario(capacity);
            let kept = ReplayOptions {
                check_invariants: false,
                ..Default::default()
            };
            let lean = ReplayOptions {
                forget_device_calls: true,
                ..kept.clone()
            };
            let a = s.run(&whole, &kept).unwrap();
            let b = s.run(&whole, &lean).unwrap();
            assert!(b.device_log.is_empty());
            assert!(!a.device_log.is_empty(), "{}", entry.label());
            assert_eq!(a.summary, b.summary, "{} at {capacity:?}", entry.label());
            assert_eq!(a.oom, b.oom, "{} at {capacity:?}", entry.label());
        }
    }
}
