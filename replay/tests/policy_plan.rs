//! The `plan` policy through the replay engine: every corpus trace replays
//! under its own plan, every request in the arena at the offset greedy gave
//! it; a trace started mid-run plans its first blocks too (fresh) or
//! leaves them to the fallback (recorded); a request the plan did not see
//! goes to the fallback; and the arena runs out of memory where the plan
//! passes the card.

use std::sync::Arc;

use vramlab_allocator::policies::plan::{self, greedy, lower_bound};
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{
    PlanBuilder, PolicySpec, ReplayOptions, Scenario, Start, plan_buffers, static_plan,
};
use vramlab_traces::{Event, Trace, read_csv};
use vramlab_workloads::{corpus, read_recording_bytes};

const PAGE: u64 = 2 << 20;

fn plan_policy() -> Scenario {
    Scenario::new(PolicySpec::Plan(
        plan::Settings::parse("", TorchVersion::NEWEST).unwrap(),
    ))
}

fn opts(check: bool, start: Start) -> ReplayOptions {
    ReplayOptions {
        check_invariants: check,
        timeline_points: 10,
        start,
        ..Default::default()
    }
}

/// Every corpus trace (each starts empty): the plan lies between peak live
/// and PyTorch's default (and at or below greedy's), and the policy
/// reserves the plan's peak in whole pages, nothing more (the fallback is
/// never asked).
#[test]
#[ignore = "replays the whole corpus twice (about 45 s in a release build): CI runs it with --release -- --ignored"]
fn every_corpus_trace_replays_under_its_plan() {
    for e in corpus() {
        let t = read_recording_bytes(e.bytes, e.file).unwrap().trace;
        let bufs = plan_buffers(&t);
        let planned = static_plan(&bufs).unwrap().peak();
        assert!(planned <= greedy(&bufs).peak, "{}", e.file);
        assert!(
            lower_bound(&bufs) <= planned,
            "{}: {} > {planned}",
            e.file,
            lower_bound(&bufs)
        );
        let run = plan_policy()
            .run(&t, &opts(false, Start::Fresh))
            .unwrap_or_else(|err| panic!("{}: {err}", e.file));
        assert!(run.oom.is_none(), "{}", e.file);
        assert_eq!(
            run.summary.peak_reserved_bytes,
            planned.div_ceil(PAGE) * PAGE,
            "{}",
            e.file
        );
        assert_eq!(run.summary.peak_requested_bytes, e.peak_live_bytes);
        let default = Scenario::native(AllocConf::default())
            .run(&t, &opts(false, Start::Fresh))
            .unwrap();
        assert!(
            planned <= default.summary.peak_reserved_bytes,
            "{}: the plan {planned} above the default's {}",
            e.file,
            default.summary.peak_reserved_bytes
        );
    }
}

fn small_trace() -> Trace {
    let csv = "action,id,size,stream\n\
        alloc,a,3000000\nalloc,b,1000000\nfree,a\nalloc,c,2500000\n\
        alloc,d,700000\nfree,b\nfree,c\nalloc,e,4000000\nfree,d\nfree,e\n";
    read_csv(csv.as_bytes(), "small.csv").unwrap()
}

/// A request whose size differs from its slot's is the fallback's: one
/// `cudaMalloc` of PyTorch's, beside the arena.
#[test]
fn a_request_the_plan_did_not_see_goes_to_the_fallback() {
    let t = small_trace();
    let planned = static_plan(&plan_buffers(&t)).unwrap();
    let mut other = t.clone();
    for ev in &mut other.events {
        if let Event::Alloc { size, .. } = ev {
            if *size == 700_000 {
                *size = 900_000;
            }
        }
    }
    let mut s = plan_policy();
    if let PolicySpec::Plan(p) = &s.policy {
        s.policy = PolicySpec::Plan(p.with_plan(Arc::new(planned.clone())));
    }
    let with_segments = ReplayOptions {
        final_segments: true,
        ..opts(true, Start::Fresh)
    };
    let run = s.run(&other, &with_segments).unwrap();
    // The arena mapped up to the highest block the plan placed (every one
    // but the changed request's), and one small 2 MiB segment of
    // PyTorch's for its 900,000 bytes.
    let top = (0..planned.len())
        .filter_map(|k| planned.slot(k))
        .filter(|s| s.size != 700_416)
        .map(|s| s.offset + s.size)
        .max()
        .unwrap();
    assert_eq!(
        run.summary.peak_reserved_bytes,
        top.div_ceil(PAGE) * PAGE + PAGE
    );
    // At the end: the arena's mapped pages, and PyTorch's one segment.
    let plain: Vec<_> = run
        .final_segments
        .iter()
        .filter(|s| !s.is_expandable)
        .collect();
    assert_eq!(plain.len(), 1, "{:?}", run.final_segments);
    assert_eq!(plain[0].size, PAGE);
    let arena = planned.peak().div_ceil(PAGE) * PAGE;
    // The plan of the trace itself: the arena alone.
    let own = plan_policy().run(&t, &opts(true, Start::Fresh)).unwrap();
    assert_eq!(own.summary.peak_reserved_bytes, arena);
}

/// On a card smaller than the arena's pages the request that needs a page
/// past it fails; on one that holds them, nothing does.
#[test]
fn the_arena_runs_out_where_the_plan_passes_the_card() {
    let t = small_trace();
    let bufs = plan_buffers(&t);
    let plan = static_plan(&bufs).unwrap();
    let arena = plan.peak().div_ceil(PAGE) * PAGE;
    let fits = plan_policy()
        .with_capacity(Some(arena))
        .run(&t, &opts(true, Start::Fresh))
        .unwrap();
    assert!(fits.oom.is_none());
    let short = plan_policy()
        .with_capacity(Some(arena - PAGE))
        .run(&t, &opts(true, Start::Fresh))
        .unwrap();
    let oom = short.oom.expect("an OOM on a smaller card");
    assert_eq!(short.summary.num_ooms, 1);
    // It happens at the allocation that first needs more pages than the
    // card holds (pages are mapped when a block first lies on them).
    let mut touched = std::collections::BTreeSet::new();
    let first_past = (0..plan.len())
        .position(|k| {
            let s = plan.slot(k).unwrap();
            touched.extend(s.offset / PAGE..(s.offset + s.size).div_ceil(PAGE));
            touched.len() as u64 * PAGE > arena - PAGE
        })
        .unwrap();
    let alloc_events: Vec<usize> = t
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::Alloc { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(oom.event_index as usize, alloc_events[first_past]);
}

/// A trace recorded mid-run: started fresh, its blocks in use at the first
/// entry are planned with the rest (the arena alone); started from the
/// recorded layout, they stay in the fallback's seeded segments.
#[test]
fn a_mid_run_trace_plans_its_first_blocks_when_started_fresh() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/gate/baseline.torch2.15.pickle.gz");
    let t = vramlab_replay::Inputs::new([&p]).trace().unwrap();
    let fresh_bufs = plan_buffers(&t);
    let mut recorded_builder = PlanBuilder::new(&t, Start::Recorded);
    recorded_builder.events(&t.events);
    let recorded_bufs = recorded_builder.finish();
    let initial = t.initial.as_ref().map_or(0, |i| i.live_blocks());
    if initial == 0 {
        // The recording starts empty: both starts plan the same.
        assert_eq!(fresh_bufs, recorded_bufs);
    } else {
        assert!(fresh_bufs.len() > recorded_bufs.len());
    }
    let fresh = plan_policy().run(&t, &opts(true, Start::Fresh)).unwrap();
    assert_eq!(
        fresh.summary.peak_reserved_bytes,
        static_plan(&fresh_bufs).unwrap().peak().div_ceil(PAGE) * PAGE
    );
    let recorded = plan_policy().run(&t, &opts(true, Start::Recorded)).unwrap();
    assert!(recorded.oom.is_none());
    assert!(recorded.summary.peak_requested_bytes == fresh.summary.peak_requested_bytes);
}

/// A trace file read again for each pass makes its plan in a read of its
/// own (ids recycled): its replays equal those of the trace held whole, from
/// an empty start and from a mid-run one (PyTorch's own snapshots).
#[test]
fn a_streamed_trace_file_plans_as_a_held_trace() {
    use vramlab_replay::{ReplayPasses, TraceFile};
    use vramlab_traces::{IdUse, VltEvents, read_traces, write_binary};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/pools/snapshots");
    let mut traces = vec![small_trace()];
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".torch2.15.pickle"))
        .collect();
    names.sort();
    for p in &names {
        traces.extend(read_traces(p, None, &Default::default(), None).unwrap());
    }
    assert!(traces.iter().any(|t| t.initial.is_some()));
    for t in &traces {
        let mut bytes = Vec::new();
        write_binary(t, &mut bytes, false, "t.vlt").unwrap();
        let whole = vramlab_traces::read_binary(bytes.as_slice(), "t.vlt").unwrap();
        let file =
            TraceFile::new(|| VltEvents::open(bytes.as_slice(), "t.vlt", IdUse::Recycled)).unwrap();
        let o = opts(false, Start::Fresh);
        let scenarios = [plan_policy()];
        let streamed = file.replay(&scenarios, &o).unwrap();
        let held = whole.replay(&scenarios, &o).unwrap();
        for (a, b) in streamed.iter().zip(&held) {
            assert_eq!(
                a.summary.peak_reserved_bytes, b.summary.peak_reserved_bytes,
                "{}",
                t.header.source
            );
            assert_eq!(a.summary.events_replayed, b.summary.events_replayed);
            assert_eq!(a.oom.is_some(), b.oom.is_some());
        }
        // The plan is made once per start, then reused.
        let reads = file.reads();
        file.replay(&scenarios, &o).unwrap();
        assert_eq!(file.reads(), reads + 1);
    }
}

/// Scenarios planned once carry their plan: planning them again makes
/// nothing (every pass of an OOM search reuses the first's plan), and a
/// scenario without the plan policy is never planned.
#[test]
fn planned_scenarios_are_planned_once() {
    use std::borrow::Cow;
    use vramlab_replay::ReplayPasses;
    let t = small_trace();
    let native = Scenario::native(AllocConf::default());
    assert!(matches!(
        t.planned(std::slice::from_ref(&native), Start::Fresh)
            .unwrap(),
        Cow::Borrowed(_)
    ));
    let first = t
        .planned(&[plan_policy(), native], Start::Fresh)
        .unwrap()
        .into_owned();
    let PolicySpec::Plan(p) = &first[0].policy else {
        panic!("the plan policy lost")
    };
    assert_eq!(
        p.plan.as_ref().map(|p| p.peak()),
        Some(static_plan(&plan_buffers(&t)).unwrap().peak())
    );
    assert!(matches!(
        t.planned(&first, Start::Fresh).unwrap(),
        Cow::Borrowed(_)
    ));
}

/// `vramlab plan`'s row for the plan as a policy: on a card smaller than
/// the plan it says so (OOM), under the release of the plan setting's
/// fallback; and when a setting is the plan policy, its replay is the row.
#[test]
fn the_plan_report_says_when_the_plan_policy_runs_out() {
    let t = small_trace();
    let planned = static_plan(&plan_buffers(&t)).unwrap().peak();
    let arena = planned.div_ceil(PAGE) * PAGE;
    let native = Scenario::native(AllocConf::default());
    let fits = vramlab_replay::plan(&t, std::slice::from_ref(&native), 100, 10_000).unwrap();
    assert!(!fits.policy_oom);
    assert_eq!(fits.policy_peak_bytes, arena);
    let short = native.clone().with_capacity(Some(arena - PAGE));
    let r = vramlab_replay::plan(&t, &[short], 100, 10_000).unwrap();
    assert!(r.policy_oom);
    let own = plan_policy().with_capacity(Some(arena - PAGE));
    let r = vramlab_replay::plan(&t, &[own], 100, 10_000).unwrap();
    assert!(r.policy_oom && r.policies[0].oom);
    assert_eq!(r.policy_peak_bytes, r.policies[0].peak_reserved_bytes);
}
