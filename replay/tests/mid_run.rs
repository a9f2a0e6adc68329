//! Snapshots in every shape users record them, made from replays of the
//! bundled traces: the memory history started after N entries (or its ring
//! buffer kept only the last ones), `empty_cache()` right before or right
//! after the history started, a malloc that released the cache and retried,
//! an OOM, expandable segments mid-run, several GPUs in one file (one of
//! them unreadable), and the bare segment list of
//! `torch.cuda.memory_snapshot()`.
//!
//! Each is replayed by `vramlab fidelity`'s check, which must reproduce
//! every address and segment event; every policy must replay it under both
//! starts (`recorded` where the policy can hold PyTorch's layout).
//!
//! The snapshots come from vramlab's own native policy (written with the
//! same writer as `replay --snapshot-out`), which is exact on the real
//! snapshots in ../shared/traces/real; GPU-recorded fixtures of these
//! shapes are listed as pending in docs/results/README.md.

use std::path::Path;

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::check_fidelity;
use vramlab_replay::recorded_conf;
use vramlab_replay::snapshot_value;
use vramlab_replay::{DeviceTraces, snapshot_devices};
use vramlab_replay::{PolicySpec, ReplayOptions, Scenario, Start};
use vramlab_traces::snapshot::{Action, Snapshot, read_snapshot};
use vramlab_traces::{Event, Trace};
use vramlab_traces::{PickleWriter, Value};

/// 2.11, the last release that orders free blocks of one size by address:
/// from 2.12 the order is by segment age, which a recording that starts
/// mid-run does not hold for its first segments (the recorded start guesses
/// it from the driver model: NativeAllocator::seeded_counter), so exactness
/// of a recorded start is pinned where the snapshot determines it.
const V: TorchVersion = TorchVersion::new(2, 11);

fn bundled(name: &str) -> Trace {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workloads/data")
        .join(name);
    vramlab_replay::Inputs::new([&p])
        .trace()
        .expect("bundled trace")
}

fn quiet() -> ReplayOptions {
    ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        ..Default::default()
    }
}

/// The snapshot PyTorch would have written after `trace` ran under `conf`
/// on a device of `capacity` (the replay stops at an OOM, as a script
/// would).
fn snapshot_of(trace: &Trace, conf: &str, capacity: Option<u64>) -> Snapshot {
    let conf = AllocConf::parse(conf, V).unwrap();
    let run = Scenario::native(conf.clone())
        .with_capacity(capacity)
        .run(
            trace,
            &ReplayOptions {
                record_addresses: true,
                final_segments: true,
                ..quiet()
            },
        )
        .unwrap();
    let bytes = PickleWriter::new().to_vec(&snapshot_value(trace, &run, Some(&conf)));
    read_snapshot(&bytes, "fixture.pickle").unwrap()
}

/// The same snapshot with only the entries from `from` on (history
/// started late, or a ring buffer of that many fewer entries).
fn cut(snap: &Snapshot, from: usize) -> Snapshot {
    let mut s = snap.clone();
    for d in &mut s.device_traces {
        let keep = from.min(d.len());
        d.drain(..keep);
    }
    s
}

fn load(snap: &Snapshot) -> DeviceTraces {
    snapshot_devices(snap, "fixture.pickle", V)
}

/// Fidelity must be exact, down to the final state.
fn assert_exact(t: &Trace, what: &str) {
    let conf = recorded_conf(t, V).unwrap().unwrap();
    let r = check_fidelity(t, conf).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        r.is_exact(),
        "{what}: {} of {} addresses, {} of {} segment events; first mismatch {:?}",
        r.alloc_addresses_matched,
        r.allocs,
        r.segment_events_matched,
        r.segment_events_expected,
        r.first_mismatch
    );
    assert_eq!(r.final_state_matched, Some(true), "{what}");
}

/// Every policy replays the trace: fresh always, recorded for the native
/// policy; other policies refuse a recorded start with a clear message.
fn assert_every_policy_replays(t: &Trace, what: &str) {
    for (name, settings) in [
        ("native", ""),
        ("native", "expandable_segments:True"),
        ("native", "max_split_size_mb:64,roundup_power2_divisions:4"),
        ("direct", ""),
        ("bfc", "allow_growth:true"),
        ("async", ""),
        ("stitch", ""),
    ] {
        let s = Scenario::new(PolicySpec::parse(name, settings, V).unwrap());
        let fresh = ReplayOptions {
            start: Start::Fresh,
            ..quiet()
        };
        let run = s
            .run(t, &fresh)
            .unwrap_or_else(|e| panic!("{what}: {name} {settings} fresh: {e}"));
        assert!(
            run.oom.is_none(),
            "{what}: {name}: OOM on an unlimited device"
        );
        assert_eq!(
            run.summary.events_replayed,
            t.events.len() as u64,
            "{what}: {name}"
        );
        if t.initial.is_none() {
            continue;
        }
        assert_eq!(run.start, Some(Start::Fresh));
        let recorded = s.run(t, &quiet());
        if name == "native" {
            recorded.unwrap_or_else(|e| panic!("{what}: {settings} recorded: {e}"));
        } else {
            let e = recorded.unwrap_err().to_string();
            assert!(
                e.contains("cannot start from a recorded") && e.contains("--start fresh"),
                "{what}: {name}: {e}"
            );
        }
    }
}

fn only_device(snap: &Snapshot) -> Trace {
    let mut l = load(snap);
    assert!(l.failed.is_empty(), "{:?}", l.failed);
    assert_eq!(l.traces.len(), 1);
    l.traces.remove(0)
}

#[test]
fn history_started_at_any_entry_replays_exactly() {
    let trace = bundled("gpt-small-train.csv");
    for conf in [
        "",
        "expandable_segments:True",
        "max_split_size_mb:64",
        "roundup_power2_divisions:4",
    ] {
        let full = snapshot_of(&trace, conf, None);
        let n = full.device_traces[0].len();
        // 24 cut points across the trace, and the last few entries only (a
        // small ring buffer).
        let mut points: Vec<usize> = (0..24).map(|k| k * n / 24).collect();
        points.extend([n - 200, n - 50, n - 3]);
        for from in points {
            let what = format!("conf {conf:?}, history from entry {from} of {n}");
            let t = only_device(&cut(&full, from));
            assert_eq!(t.initial.is_some(), from > 0, "{what}");
            if let Some(init) = &t.initial {
                assert_eq!(init.layout_error, None, "{what}");
            }
            assert_exact(&t, &what);
        }
    }
}

#[test]
fn every_policy_replays_a_mid_run_snapshot_under_both_starts() {
    let trace = bundled("gpt-small-train.csv");
    for conf in ["", "expandable_segments:True"] {
        let full = snapshot_of(&trace, conf, None);
        let n = full.device_traces[0].len();
        for from in [n / 3, 2 * n / 3] {
            let t = only_device(&cut(&full, from));
            assert_every_policy_replays(&t, &format!("conf {conf:?} from {from}"));
        }
    }
}

/// The trace with `torch.cuda.empty_cache()` inserted before event `at`.
fn with_empty_cache(trace: &Trace, at: usize) -> Trace {
    let mut t = trace.clone();
    t.events.insert(at, Event::EmptyCache);
    t
}

/// Index of the first entry of the first `segment_free`/`segment_unmap`
/// burst at or after entry `from`, and the index just past it.
fn first_burst(snap: &Snapshot, from: usize) -> Option<(usize, usize)> {
    let e = &snap.device_traces[0];
    let release = |i: usize| {
        e.get(i)
            .is_some_and(|x| matches!(x.action, Action::SegmentFree | Action::SegmentUnmap))
    };
    let start = (from..e.len()).find(|&i| release(i))?;
    let mut end = start;
    while release(end) {
        end += 1;
    }
    Some((start, end))
}

#[test]
fn empty_cache_right_before_or_after_the_history_starts() {
    let trace = bundled("gpt-small-train.csv");
    // After the first training step the cache holds whole free segments.
    let at = trace.events.len() / 3;
    for conf in ["", "expandable_segments:True"] {
        let t = with_empty_cache(&trace, at);
        let full = snapshot_of(&t, conf, None);
        let (start, end) = first_burst(&full, 0).expect("empty_cache released segments");
        // History started right before empty_cache(): the burst is the
        // first thing recorded, then the next allocations.
        let after = only_device(&cut(&full, start));
        assert!(
            after
                .notes
                .iter()
                .any(|n| n.contains("inferred 1 empty_cache")),
            "{conf:?}: {:?}",
            after.notes
        );
        assert_eq!(after.events.first(), Some(&Event::EmptyCache), "{conf:?}");
        assert_exact(
            &after,
            &format!("{conf:?}: history right before empty_cache"),
        );
        assert_every_policy_replays(&after, "empty_cache first");
        // History started right after it: the recording begins with a
        // smaller cache and no trace of the call.
        let before = only_device(&cut(&full, end));
        assert!(!before.events.contains(&Event::EmptyCache));
        assert_exact(
            &before,
            &format!("{conf:?}: history right after empty_cache"),
        );
    }
}

#[test]
fn a_malloc_that_released_the_cache_and_retried_replays_exactly() {
    let trace = bundled("gpt-small-train.csv");
    // The smallest capacity the trace fits makes mallocs fail, release the
    // cache and retry.
    let s = Scenario::native(AllocConf::new(V));
    let p = vramlab_replay::find_oom_point(&trace, &s, Start::Fresh).unwrap();
    let run = s
        .clone()
        .with_capacity(Some(p.min_capacity))
        .run(&trace, &quiet())
        .unwrap();
    assert!(run.oom.is_none());
    assert!(
        run.summary.num_alloc_retries > 0,
        "no retry at the OOM point"
    );
    let full = snapshot_of(&trace, "", Some(p.min_capacity));
    let t = only_device(&full);
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("released the cache and retried")),
        "{:?}",
        t.notes
    );
    assert!(!t.expected.as_ref().unwrap().retries.is_empty());
    assert_exact(&t, "retries");
    // And mid-run, from before the first retry.
    let n = full.device_traces[0].len();
    assert_exact(&only_device(&cut(&full, n / 4)), "retries, mid-run");
}

#[test]
fn a_recorded_oom_replays_exactly() {
    let trace = bundled("gpt-small-train.csv");
    let s = Scenario::native(AllocConf::new(V));
    let p = vramlab_replay::find_oom_point(&trace, &s, Start::Fresh).unwrap();
    let cap = p.min_capacity - (64 << 20);
    let full = snapshot_of(&trace, "", Some(cap));
    let t = only_device(&full);
    assert_eq!(t.expected.as_ref().unwrap().ooms.len(), 1);
    let conf = recorded_conf(&t, V).unwrap().unwrap();
    let r = check_fidelity(&t, conf).unwrap();
    assert!(r.is_exact(), "{:?}", r.first_mismatch);
}

/// `snap`'s device 0 as device `d`.
fn as_device(snap: &Snapshot, d: u32) -> Snapshot {
    let mut s = snap.clone();
    for seg in &mut s.segments {
        seg.device = d;
    }
    let entries = std::mem::take(&mut s.device_traces[0]);
    s.device_traces = vec![Vec::new(); d as usize];
    s.device_traces.push(entries);
    s
}

#[test]
fn several_gpus_in_one_snapshot_each_replay_and_a_broken_one_blocks_none() {
    let trace = bundled("gpt-small-train.csv");
    let a = snapshot_of(&trace, "", None);
    let b = snapshot_of(&trace, "expandable_segments:True", None);
    let n = b.device_traces[0].len();
    let b = as_device(&cut(&b, n / 2), 1);
    // Device 2: an alloc at an address that is still allocated.
    let mut c = as_device(&cut(&a, n / 2), 2);
    let first_alloc = c.device_traces[2]
        .iter()
        .position(|e| e.action == Action::Alloc)
        .unwrap();
    let dup = c.device_traces[2][first_alloc].clone();
    c.device_traces[2].insert(first_alloc + 1, dup);
    let mut all = a.clone();
    all.segments.extend(b.segments.iter().cloned());
    all.segments.extend(c.segments.iter().cloned());
    all.device_traces.push(b.device_traces[1].clone());
    all.device_traces.push(c.device_traces[2].clone());
    // The settings are the file's; device 1 ran expandable segments, which
    // its own allocator_settings would say: keep its trace honest by
    // checking it under its own settings below.
    let l = load(&all);
    assert_eq!(
        l.traces.iter().map(|t| t.header.device).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(l.failed.len(), 1);
    assert_eq!(l.failed[0].0, 2);
    assert!(
        l.failed[0]
            .1
            .to_string()
            .contains("which is still allocated"),
        "{}",
        l.failed[0].1
    );
    assert_exact(&l.traces[0], "device 0");
    // Device 1 under expandable segments (one snapshot has one settings
    // record; PyTorch runs one allocator configuration per process).
    let t1 = &l.traces[1];
    let r = check_fidelity(t1, AllocConf::parse("expandable_segments:True", V).unwrap()).unwrap();
    assert!(r.is_exact(), "device 1: {:?}", r.first_mismatch);
    assert_every_policy_replays(t1, "device 1");
}

#[test]
fn expandable_segments_recorded_mid_run_rebuild_their_pages() {
    let trace = bundled("gpt-small-train.csv");
    let t = with_empty_cache(&trace, trace.events.len() / 2);
    let full = snapshot_of(&t, "expandable_segments:True", None);
    let n = full.device_traces[0].len();
    for from in [1, n / 5, n / 2, (n / 2) + 7, 4 * n / 5] {
        let t = only_device(&cut(&full, from));
        let init = t.initial.as_ref().expect("mid-run");
        assert_eq!(init.layout_error, None);
        assert!(
            init.segments.iter().any(|s| s.is_expandable),
            "from {from}: no expandable range at the start"
        );
        assert!(!init.reservations.is_empty());
        assert_exact(&t, &format!("expandable from {from}"));
    }
}

#[test]
fn the_segment_list_of_memory_snapshot_is_a_state_only_snapshot() {
    let trace = bundled("gpt-small-train.csv");
    let full = snapshot_of(&trace, "", None);
    // torch.cuda.memory_snapshot() returns the list of segment dicts.
    let v = vramlab_replay::snapshot_value(
        &trace,
        &Scenario::native(AllocConf::new(V))
            .run(
                &trace,
                &ReplayOptions {
                    record_addresses: true,
                    final_segments: true,
                    ..quiet()
                },
            )
            .unwrap(),
        None,
    );
    let Value::Dict(d) = v else { panic!() };
    let segments = d
        .iter()
        .find(|(k, _)| matches!(k, Value::Str(s) if &**s == "segments"))
        .map(|(_, v)| v.clone())
        .unwrap();
    let bytes = PickleWriter::new().to_vec(&segments);
    let snap = read_snapshot(&bytes, "list.pickle").unwrap();
    assert!(snap.legacy_segment_list);
    assert_eq!(snap.segments.len(), full.segments.len());
    let t = only_device(&snap);
    assert!(t.events.is_empty());
    assert!(
        t.notes[0].contains("torch.cuda.memory_snapshot()"),
        "{:?}",
        t.notes
    );
    let init = t.initial.as_ref().unwrap();
    assert_eq!(
        init.reserved_bytes(),
        full.segments.iter().map(|s| s.total_size).sum::<u64>()
    );
}

/// `trace` with every third allocation on a second stream and every fifth
/// free deferred until three events later (a block used on another stream).
fn with_streams_and_deferred_frees(trace: &Trace) -> Trace {
    let mut t = trace.clone();
    let side = t.stream_index(0x5555_0000);
    let mut events = Vec::with_capacity(t.events.len() * 2);
    let mut completions: Vec<(usize, u32)> = Vec::new();
    for (i, ev) in trace.events.iter().enumerate() {
        while let Some(pos) = completions.iter().position(|&(at, _)| at <= i) {
            let (_, id) = completions.remove(pos);
            events.push(Event::FreeCompleted { id });
        }
        match *ev {
            Event::Alloc { id, size, .. } if id % 3 == 0 => events.push(Event::Alloc {
                id,
                size,
                stream: side,
            }),
            Event::Free { id } if id % 5 == 0 => {
                events.push(Event::FreeRequested { id });
                completions.push((i + 3, id));
            }
            e => events.push(e),
        }
    }
    events.extend(
        completions
            .iter()
            .map(|&(_, id)| Event::FreeCompleted { id }),
    );
    t.events = events;
    t
}

#[test]
fn several_streams_and_deferred_frees_mid_run() {
    let trace = with_streams_and_deferred_frees(&bundled("gpt-small-train.csv"));
    for conf in ["", "expandable_segments:True"] {
        let full = snapshot_of(&trace, conf, None);
        let n = full.device_traces[0].len();
        let mut pending_at_start = false;
        for k in 1..16 {
            let from = k * n / 16;
            let t = only_device(&cut(&full, from));
            let init = t.initial.as_ref().unwrap();
            pending_at_start |= init
                .live
                .iter()
                .any(|b| matches!(b.state, vramlab_traces::InitialBlockState::PendingFree(_)));
            assert!(
                t.streams.len() == 2,
                "{conf:?} from {from}: {:?}",
                t.streams
            );
            assert_exact(&t, &format!("{conf:?}, streams, from {from}"));
        }
        assert!(pending_at_start, "no cut point starts with a pending free");
        assert_every_policy_replays(&only_device(&cut(&full, n / 2)), "streams");
    }
}
