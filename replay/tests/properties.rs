//! Property tests over random traces and random settings of every policy:
//!
//! * the invariant checker passes after every event (native under random
//!   `PYTORCH_ALLOC_CONF` values with expandable segments, garbage
//!   collection with a memory fraction, `max_split_size_mb`,
//!   `roundup_power2_divisions`; direct; bfc; async; stitch), on unlimited
//!   and on small devices, stopping or continuing at OOMs;
//! * freeing everything and calling `empty_cache` leaves nothing reserved
//!   (no policy documents memory it keeps past `empty_cache`: BFC frees
//!   every region without a chunk in use, the preallocated one included;
//!   the async pool trims to 0; stitch dissolves its cached sBlocks);
//! * a replay is deterministic (summary, timeline, OOM and device log);
//! * writing and reading a trace is lossless (CSV and binary, traces
//!   without an initial state);
//! * the OOM point is feasible and 2 MiB less is not, where the search
//!   verified it and found feasibility monotone.
//!
//! Case counts are small so that `cargo test` stays fast in debug builds.

use proptest::prelude::*;
use vramlab_allocator::policies::{async_pool, bfc, direct, plan, stitch};
use vramlab_allocator::{AllocConf, Allocator, Inspect, TorchVersion};
use vramlab_replay::stress::{SHAPES, many_streams};
use vramlab_replay::{OOM_POINT_STEP, find_oom_point};
use vramlab_replay::{PolicySpec, ReplayOptions, Run, Scenario, Start, replay, with_policy};
use vramlab_traces::{Event, Trace, TraceHeader, read_binary, read_csv, write_binary, write_csv};

const MIB: u64 = 1 << 20;

/// `cases`, or `PROPTEST_CASES` from the environment for a deeper run.
fn settings(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---- traces ----

mod random;
use random::trace;

/// `trace` followed by frees of everything still live, completions of
/// everything pending, and `empty_cache`.
fn drained(mut t: Trace) -> Trace {
    let mut state = vec![0u8; t.num_ids as usize]; // 1 live, 2 pending
    for e in &t.events {
        match *e {
            Event::Alloc { id, .. } => state[id as usize] = 1,
            Event::Free { id } | Event::FreeCompleted { id } => state[id as usize] = 0,
            Event::FreeRequested { id } => state[id as usize] = 2,
            _ => {}
        }
    }
    for (id, s) in state.iter().enumerate() {
        let id = id as u32;
        match s {
            1 => t.events.push(Event::Free { id }),
            2 => t.events.push(Event::FreeCompleted { id }),
            _ => {}
        }
    }
    t.events.push(Event::EmptyCache);
    t
}

// ---- settings ----

fn native_conf() -> impl Strategy<Value = AllocConf> {
    let roundup = prop_oneof![
        Just(String::new()),
        (0u32..5).prop_map(|d| format!("roundup_power2_divisions:{}", 1 << d)),
        Just("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]".to_string()),
        Just("roundup_power2_divisions:[1:4,2:8,>:2]".to_string()),
    ];
    (
        1u16..=11,
        any::<bool>(),
        prop::option::of(21u32..=160),
        roundup,
        prop::option::of(1u32..=9),
        prop::option::of(21u32..=100),
    )
        .prop_map(|(minor, expandable, mss, roundup, gc, nsr)| {
            let mut parts = vec![];
            if expandable {
                parts.push("expandable_segments:True".to_string());
            }
            if let Some(m) = mss {
                parts.push(format!("max_split_size_mb:{m}"));
            }
            if !roundup.is_empty() {
                parts.push(roundup);
            }
            if let Some(g) = gc {
                parts.push(format!("garbage_collection_threshold:0.{g}"));
            }
            let v = TorchVersion::new(2, minor);
            if let Some(n) = nsr.filter(|_| v.at_least(2, 6)) {
                parts.push(format!("max_non_split_rounding_mb:{n}"));
            }
            let s = parts.join(",");
            AllocConf::parse(&s, v).unwrap_or_else(|e| panic!("'{s}' under {v}: {e}"))
        })
}

fn other_policy() -> impl Strategy<Value = PolicySpec> {
    let bfc = (
        any::<bool>(),
        prop::option::of(16u64..=512),
        any::<bool>(),
        prop::option::of(0u32..=4),
    )
        .prop_map(|(growth, limit, gc, frag)| {
            let mut s = format!("allow_growth:{growth},garbage_collection:{gc}");
            if let Some(l) = limit {
                s.push_str(&format!(",memory_limit:{l}MiB"));
            }
            if let Some(f) = frag {
                s.push_str(&format!(",fragmentation_fraction:0.{f}"));
            }
            PolicySpec::Bfc(bfc::Settings::parse(&s).unwrap())
        });
    let asynch = (prop::option::of(0u64..=64), any::<bool>()).prop_map(|(t, reuse)| {
        let t = t.map_or("max".to_string(), |m| format!("{m}MiB"));
        PolicySpec::Async(
            async_pool::Settings::parse(&format!(
                "release_threshold:{t},reuse_across_streams:{reuse}"
            ))
            .unwrap(),
        )
    });
    let stitch = (
        any::<bool>(),
        prop_oneof![Just(2u64), Just(16), Just(64), Just(512)],
        0u8..3,
        prop::option::of(2u32..6),
        prop_oneof![Just(64u64), Just(1 << 20)],
    )
        .prop_map(|(on, frag, level, pieces, gc)| {
            let mut s = format!(
                "stitch:{on},fragment_limit:{frag}MiB,defragment_level:{level},gc_limit:{gc}MiB"
            );
            if let Some(p) = pieces {
                s.push_str(&format!(",max_pieces:{p}"));
            }
            PolicySpec::Stitch(stitch::Settings::parse(&s).unwrap())
        });
    // The plan policy's plan is made from the trace replayed; its
    // fallback under PyTorch's defaults or with expandable segments.
    let planned = any::<bool>().prop_map(|es| {
        let conf = if es { "expandable_segments:True" } else { "" };
        PolicySpec::Plan(plan::Settings::parse(conf, TorchVersion::NEWEST).unwrap())
    });
    prop_oneof![
        Just(PolicySpec::Direct(direct::Settings::default())),
        bfc,
        asynch,
        stitch,
        planned,
    ]
}

/// Any policy, with a memory fraction for the native one (which turns
/// garbage collection on when the settings have a threshold).
fn scenario() -> impl Strategy<Value = Scenario> {
    prop_oneof![
        3 => (native_conf(), prop::option::of(0.3f64..1.0)).prop_map(|(c, f)| {
            let mut s = Scenario::native(c);
            s.memory_fraction = f;
            s
        }),
        3 => other_policy().prop_map(Scenario::new),
    ]
}

fn capacity() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![Just(None), (8u64..=512).prop_map(|m| Some(m * MIB))]
}

fn checked(stop_at_oom: bool) -> ReplayOptions {
    ReplayOptions {
        stop_at_oom,
        timeline_points: 50,
        check_invariants: true,
        ..Default::default()
    }
}

fn run(t: &Trace, s: &Scenario, opts: &ReplayOptions) -> Run {
    s.run(t, opts)
        .unwrap_or_else(|e| panic!("{} on {:?}: {e}", s.label(), s.capacity))
}

// ---- properties ----

proptest! {
    #![proptest_config(settings(96))]

    /// The invariant checker passes after every event of every policy
    /// (`run` fails on `ReplayError::Invariant`), and a valid trace never
    /// makes a policy fail for another reason than running out of memory.
    #[test]
    fn invariants_hold_after_every_event(
        t in trace(80),
        s in scenario(),
        cap in capacity(),
        stop in any::<bool>(),
    ) {
        let s = s.with_capacity(cap);
        let r = run(&t, &s, &checked(stop));
        prop_assert!(r.summary.events_replayed <= r.summary.events);
        prop_assert!(r.summary.peak_reserved_bytes >= r.summary.final_reserved_bytes);
        let limited = matches!(s.policy, PolicySpec::Bfc(_)) || s.memory_fraction.is_some();
        if cap.is_none() && !limited {
            prop_assert!(r.oom.is_none(), "OOM on an unlimited device: {:?}", r.oom);
        }
    }

    /// After every allocation is freed and `empty_cache` runs, nothing is
    /// allocated or reserved, no segment is left, and the device holds no
    /// memory.
    #[test]
    fn freeing_everything_and_emptying_the_cache_releases_everything(
        t in trace(80).prop_map(drained),
        s in scenario(),
        cap in capacity(),
    ) {
        let s = s.with_capacity(cap);
        let opts = ReplayOptions { final_segments: true, ..checked(false) };
        let dev = s.device(&t);
        let policy = match &s.policy {
            PolicySpec::Plan(p) => {
                let planned = vramlab_replay::static_plan(&vramlab_replay::plan_buffers(&t)).unwrap();
                PolicySpec::Plan(p.with_plan(std::sync::Arc::new(planned)))
            }
            other => other.clone(),
        };
        let (r, used) = with_policy!(&policy, dev, |a| {
            if let Some(f) = s.memory_fraction {
                Allocator::set_memory_fraction(&mut a, f).unwrap();
            }
            let r = replay(&t, &mut a, &opts)
                .unwrap_or_else(|e| panic!("{}: {e}", s.label()));
            (r, a.device().used())
        });
        prop_assert_eq!(r.summary.final_allocated_bytes, 0, "{}", s.label());
        prop_assert_eq!(r.summary.final_reserved_bytes, 0, "{}", s.label());
        prop_assert!(r.final_segments.is_empty(), "{}: {:?}", s.label(), r.final_segments);
        prop_assert_eq!(used, 0, "{}: device memory still in use", s.label());
    }

    /// Two replays of the same trace under the same scenario agree on
    /// everything they report.
    #[test]
    fn replay_is_deterministic(t in trace(60), s in scenario(), cap in capacity()) {
        let s = s.with_capacity(cap);
        let opts = ReplayOptions {
            record_addresses: true,
            final_segments: true,
            ..checked(false)
        };
        let (a, b) = (run(&t, &s, &opts), run(&t, &s, &opts));
        prop_assert_eq!(&a.summary, &b.summary);
        prop_assert_eq!(&a.timeline, &b.timeline);
        prop_assert_eq!(&a.device_log, &b.device_log);
        prop_assert_eq!(&a.oom, &b.oom);
        prop_assert_eq!(&a.alloc_addresses, &b.alloc_addresses);
        prop_assert_eq!(&a.final_segments, &b.final_segments);
    }
}

fn header() -> impl Strategy<Value = TraceHeader> {
    let text = "[a-zA-Z0-9][a-zA-Z0-9 ._:=/()+-]{0,20}[a-zA-Z0-9)]";
    (
        text,
        prop::option::of(any::<u64>()),
        prop::option::of(text),
        prop::option::of(text),
        any::<u32>(),
        prop::collection::btree_map("x_[a-z_]{1,8}", text, 0..3),
    )
        .prop_map(
            |(source, device_total, alloc_conf, framework, device, extra)| TraceHeader {
                source,
                device_total,
                alloc_conf,
                framework,
                device,
                extra,
            },
        )
}

proptest! {
    #![proptest_config(settings(64))]

    /// CSV: `read(write(t)) == t` for traces without an initial state
    /// (any sizes, any raw stream handles).
    #[test]
    fn csv_round_trip_is_lossless(
        mut t in trace(80),
        h in header(),
        raw_streams in prop::collection::vec(any::<u64>(), 3),
        sizes in prop::collection::vec(any::<u64>(), 80),
    ) {
        t.header = h;
        remap(&mut t, &raw_streams, &sizes);
        let mut buf = Vec::new();
        write_csv(&t, &mut buf, "t.csv").unwrap();
        let back = read_csv(buf.as_slice(), "t.csv").unwrap();
        prop_assert_eq!(back, t);
    }

    /// Binary, plain and zstd: `read(write(t)) == t`, notes included.
    #[test]
    fn binary_round_trip_is_lossless(
        mut t in trace(80),
        h in header(),
        raw_streams in prop::collection::vec(any::<u64>(), 3),
        sizes in prop::collection::vec(any::<u64>(), 80),
        notes in prop::collection::vec(".{0,12}", 0..3),
        compress in any::<bool>(),
    ) {
        t.header = h;
        t.notes = notes;
        remap(&mut t, &raw_streams, &sizes);
        let mut buf = Vec::new();
        write_binary(&t, &mut buf, compress, "t.vlt").unwrap();
        let back = read_binary(buf.as_slice(), "t.vlt").unwrap();
        prop_assert_eq!(back, t);
    }
}

/// Gives a trace arbitrary raw stream handles and request sizes.
fn remap(t: &mut Trace, raw_streams: &[u64], sizes: &[u64]) {
    let mut table = vec![0u64];
    let mut map = Vec::new();
    for (i, &raw) in t.streams.iter().enumerate() {
        let new = if i == 0 {
            0
        } else {
            raw_streams[i % raw_streams.len()]
        };
        let idx = match table.iter().position(|&s| s == new) {
            Some(p) => p,
            None => {
                table.push(new);
                table.len() - 1
            }
        };
        map.push(idx as u32);
        let _ = raw;
    }
    t.streams = table;
    let mut k = 0;
    for e in &mut t.events {
        if let Event::Alloc { stream, size, .. } = e {
            *stream = map[*stream as usize];
            *size = sizes[k % sizes.len()];
            k += 1;
        }
    }
    // The readers intern streams in order of first use.
    let mut order: Vec<u64> = vec![0];
    for e in &t.events {
        if let Event::Alloc { stream, .. } = e {
            let raw = t.streams[*stream as usize];
            if !order.contains(&raw) {
                order.push(raw);
            }
        }
    }
    let old = std::mem::replace(&mut t.streams, order);
    for e in &mut t.events {
        if let Event::Alloc { stream, .. } = e {
            let raw = old[*stream as usize];
            *stream = t.streams.iter().position(|&s| s == raw).unwrap() as u32;
        }
    }
}

proptest! {
    #![proptest_config(settings(12))]

    /// The OOM point fits (always), is never below the peak of live bytes,
    /// equals the first capacity that fits by brute force where
    /// feasibility is monotone, and 2 MiB less does not fit where the
    /// search verified it.
    #[test]
    fn oom_point_is_feasible_and_tight(t in trace(30), s in scenario()) {
        let p = match find_oom_point(&t, &s, Start::Fresh) {
            Ok(p) => p,
            // A fixed BFC memory limit below the trace's needs: no capacity
            // helps, and the search says exactly that.
            Err(e) if matches!(&s.policy, PolicySpec::Bfc(c) if c.memory_limit.is_some())
                && e.to_string()
                    == "initial state: the trace does not fit on any capacity up to 1 PiB under this setting" =>
            {
                return Ok(());
            }
            Err(e) => panic!("{}: {e}", s.label()),
        };
        let opts = checked(true);
        let fits = |c: u64| run(&t, &s.clone().with_capacity(Some(c)), &opts).oom.is_none();
        // The search only moves its upper end to capacities that fit, so
        // its answer fits, verified or not.
        prop_assert!(fits(p.min_capacity), "{} does not fit at {}", s.label(), p.min_capacity);
        prop_assert!(p.min_capacity >= p.lower_bound);
        prop_assert_eq!(p.min_capacity % OOM_POINT_STEP, 0);
        // Brute force below the answer (small ranges): where feasibility is
        // monotone over the range, the first capacity that fits is the
        // answer.
        // (The search answers at least 2 MiB: a trace that needs nothing
        // still needs a device.)
        let first = (p.lower_bound.div_ceil(OOM_POINT_STEP) * OOM_POINT_STEP).max(OOM_POINT_STEP);
        if p.min_capacity - first.min(p.min_capacity) <= 64 * OOM_POINT_STEP {
            let scan: Vec<bool> = (first / OOM_POINT_STEP..=p.min_capacity / OOM_POINT_STEP)
                .map(|k| fits(k * OOM_POINT_STEP))
                .collect();
            let first_fit = scan.iter().position(|&f| f);
            let monotone = first_fit.is_some_and(|i| scan[i..].iter().all(|&f| f));
            if monotone {
                prop_assert_eq!(
                    first + first_fit.unwrap_or(0) as u64 * OOM_POINT_STEP,
                    p.min_capacity,
                    "{}: a smaller capacity fits", s.label()
                );
            }
        }
        if p.verified && p.not_monotone_at.is_empty() && p.min_capacity >= OOM_POINT_STEP {
            let below = s.clone().with_capacity(Some(p.min_capacity - OOM_POINT_STEP));
            prop_assert!(run(&t, &below, &opts).oom.is_some(),
                "{} fits at {} - 2 MiB", s.label(), p.min_capacity);
        }
    }
}

// ---- regressions found by the properties and the fuzzers ----

fn csv_trace(rows: &str) -> Trace {
    read_csv(format!("action,id,size,stream\n{rows}").as_bytes(), "t.csv").unwrap()
}

fn every_policy() -> Vec<Scenario> {
    ["native", "direct", "bfc", "async", "stitch"]
        .iter()
        .map(|p| Scenario::new(PolicySpec::parse(p, "", TorchVersion::NEWEST).unwrap()))
        .chain([Scenario::native(
            AllocConf::parse("expandable_segments:True", TorchVersion::NEWEST).unwrap(),
        )])
        .collect()
}

/// A deferred free that `empty_cache` completed, whose block is then handed
/// out whole to a new allocation: the trace's late `free_completed` must
/// not name the new allocation (the native policy reused the block's handle
/// generation and failed with "invalid block handle").
#[test]
fn late_free_completed_after_empty_cache_does_not_hit_the_next_owner() {
    let t = csv_trace(
        "alloc,a,1048576\nalloc,b,1048576\nfree_requested,a\nempty_cache\n\
         alloc,c,1048576\nfree_completed,a\nfree,b\nfree_requested,c\nalloc,d,1048576\n\
         free_completed,c\nfree,d\nempty_cache\n",
    );
    for s in every_policy() {
        let r = run(&t, &s, &checked(true));
        assert_eq!(r.summary.final_reserved_bytes, 0, "{}", s.label());
    }
}

// ---- pathological shapes (their scaling is measured by benches/scaling.rs) ----

/// Every stress shape, at a size where the invariant checker (linear per
/// event) stays fast in debug builds, replays under every policy without
/// an invariant violation or an OOM.
#[test]
fn stress_shapes_keep_the_invariants() {
    for shape in SHAPES {
        let t = (shape.build)(200);
        for s in every_policy() {
            let r = run(&t, &s, &checked(true));
            assert!(r.oom.is_none(), "{} under {}", shape.name, s.label());
        }
    }
}

/// Huge requests on an unlimited device: the simulated device kept one
/// entry per mapped 2 MiB page, so a policy mapping a request of 2^59
/// bytes (stitch, expandable segments) ran for hours and exhausted memory.
#[test]
fn huge_requests_replay_in_no_time() {
    let start = std::time::Instant::now();
    for size in [(1u64 << 40) + 1, 1 << 50, (1 << 59) + 12345, (1 << 60) - 1] {
        let t = csv_trace(&format!(
            "alloc,a,{size}\nalloc,b,1000\nfree,a\nalloc,c,{size}\nfree,b\nfree,c\nempty_cache\n"
        ));
        for s in every_policy() {
            run(&t, &s, &checked(false));
        }
    }
    assert!(start.elapsed().as_secs() < 30, "{:?}", start.elapsed());
}

/// Twenty requests just under PyTorch's 2^60-byte limit, each freed: the
/// cumulative statistics pass 2^63 (`allocated_bytes.all.allocated`
/// overflowed `i64`), and the simulated device's bump allocator passes the
/// end of the 64-bit address space (its next address overflowed); neither
/// may panic.
#[test]
fn exabyte_requests_overflow_neither_statistics_nor_addresses() {
    let size = (1u64 << 60) - 512;
    let rows: String = (0..20)
        .map(|i| format!("alloc,a{i},{size}\nfree,a{i}\n"))
        .collect();
    let t = csv_trace(&rows);
    for s in every_policy() {
        run(&t, &s, &checked(false));
    }
}

/// Pools of more than 32 streams keep an index of each stream's largest
/// free block (the replay asks for the largest free block at every
/// timeline point); the invariant checker verifies it after every event.
#[test]
fn pools_with_many_streams_keep_the_invariants() {
    let mut t = many_streams(100);
    // Interleave frees and new allocations across the streams.
    let n = t.num_ids;
    for id in 0..n {
        let stream = id % 40 + 1;
        t.events.push(Event::Alloc {
            id: n + id,
            stream,
            size: u64::from(id + 1) * 4096,
        });
        if id % 3 == 0 {
            t.events.push(Event::Free { id: n + id });
        }
    }
    t.num_ids = 2 * n;
    t.events.push(Event::EmptyCache);
    for s in every_policy() {
        run(&t, &s, &checked(false));
    }
}

/// A sweep row with the figures that the advice's sentences quote.
fn advice_row(
    i: u64,
    line: &str,
    peak_mib: u64,
    waste_mib: u64,
    util: f64,
    oom: bool,
) -> vramlab_replay::SweepRow {
    vramlab_replay::SweepRow {
        index: i,
        trace: "t".into(),
        setting: line.into(),
        policy: "native".into(),
        grid_line: line.into(),
        capacity: 0,
        events: 100,
        peak_requested_bytes: (peak_mib.saturating_sub(waste_mib)) << 20,
        peak_allocated_bytes: (peak_mib.saturating_sub(waste_mib)) << 20,
        peak_reserved_bytes: peak_mib << 20,
        waste_at_peak_bytes: waste_mib << 20,
        utilization: util,
        num_device_alloc: 1,
        num_device_free: 0,
        num_sync_all_streams: 0,
        num_alloc_retries: 0,
        device_time_us: 0.0,
        oom_event: if oom { 50 } else { -1 },
        oom_requested_bytes: if oom { 64 << 20 } else { 0 },
        start: String::new(),
        oom_at_start: false,
        same_as: String::new(),
        placement_free: false,
    }
}

proptest! {
    #![proptest_config(settings(256))]

    /// Whatever the figures, every "drops/rises/falls from A to B" in the
    /// advice says what A and B do.
    #[test]
    fn advice_words_follow_the_numbers(
        figures in proptest::collection::vec((1u64..200_000, 0u64..50_000, 0.05f64..1.0, any::<bool>()), 2..8),
        capacity_mib in prop_oneof![Just(0u64), 1u64..300_000],
    ) {
        let lines = ["default", "expandable_segments:True", "max_split_size_mb:128",
            "roundup_power2_divisions:4", "roundup_power2_divisions:8", "max_split_size_mb:512",
            "garbage_collection_threshold:0.8", "roundup_power2_divisions:2"];
        let rows: Vec<_> = figures
            .iter()
            .zip(lines)
            .enumerate()
            .map(|(i, (&(peak, waste, util, oom), line))| advice_row(i as u64, line, peak, waste.min(peak), util, oom))
            .collect();
        let target = vramlab_replay::TorchTarget::user(TorchVersion::NEWEST);
        let rec = vramlab_replay::recommend(&rows, capacity_mib << 20, 1 << 20, &target, &[]);
        prop_assert!(
            vramlab_replay::check_direction_words(&rec.why).is_ok(),
            "{}",
            rec.why
        );
    }
}

proptest! {
    #![proptest_config(settings(48))]

    /// `explain`'s waste parts add up to the waste at the peak, its peak is
    /// the replay's, and each culprit's counterfactual is the replay
    /// without it; `diff`'s groups add up to each side's allocated bytes at
    /// its peak, and reserved change = allocated change + waste change.
    #[test]
    fn explain_and_diff_add_up(
        t in trace(80),
        a in scenario(),
        b in scenario(),
        cap in capacity(),
    ) {
        let a = a.with_capacity(cap);
        let opts = vramlab_replay::ExplainOptions { top: 2, ..Default::default() };
        let e = vramlab_replay::explain(&t, &a, &opts).unwrap();
        let w = &e.waste;
        prop_assert_eq!(w.pinned_bytes + w.releasable_bytes + w.pool_cached_bytes, e.waste_at_peak_bytes);
        let r = a.run(&t, &ReplayOptions::default()).unwrap();
        prop_assert_eq!(r.summary.peak_reserved_bytes, e.peak_reserved_bytes);
        // At an OOM the moment explained is the state before the failing
        // request; otherwise the reserved peak, whose waste replay reports.
        prop_assert_eq!(e.at_failure, r.oom.as_ref().is_some_and(|o| !o.at_start));
        if !e.at_failure {
            prop_assert_eq!(r.summary.waste_at_peak_bytes, e.waste_at_peak_bytes);
        }
        for c in &e.culprits {
            prop_assert_eq!(c.fits_without.is_some(), e.at_failure);
        }
        for l in &e.line_culprits {
            let without = a.run(&t.without_allocations(&l.ids), &ReplayOptions::default()).unwrap();
            prop_assert_eq!(without.summary.peak_reserved_bytes, l.peak_reserved_without_bytes);
            if e.at_failure {
                prop_assert_eq!(l.fits_without, Some(true));
            } else {
                prop_assert!(l.peak_reserved_without_bytes < e.peak_reserved_bytes);
            }
        }
        for c in &e.culprits {
            let without = a.run(&t.without_allocation(c.id), &ReplayOptions::default()).unwrap();
            prop_assert_eq!(without.summary.peak_reserved_bytes, c.peak_reserved_without_bytes);
            // A culprit is one whose removal lowers the peak, replayed.
            prop_assert!(c.pinned_bytes > 0);
            if e.at_failure {
                prop_assert_eq!(c.fits_without, Some(true));
            } else {
                prop_assert!(c.peak_reserved_without_bytes < e.peak_reserved_bytes);
            }
            prop_assert_eq!(c.saving_bytes > 0, c.peak_reserved_without_bytes < e.peak_reserved_bytes);
        }
        let side = |scenario| vramlab_replay::DiffInput { trace: &t, name: "t", scenario, start: Start::Fresh };
        let d = vramlab_replay::diff(side(&a), side(&b)).unwrap();
        let sum_a: u64 = d.groups.iter().map(|g| g.a_bytes).sum();
        let sum_b: u64 = d.groups.iter().map(|g| g.b_bytes).sum();
        prop_assert_eq!(sum_a, d.a.allocated_at_peak_bytes);
        prop_assert_eq!(sum_b, d.b.allocated_at_peak_bytes);
        prop_assert_eq!(d.reserved_delta_bytes, d.allocated_delta_bytes + d.waste_delta_bytes);
        prop_assert_eq!(
            d.a.peak_reserved_bytes - d.a.waste_at_peak_bytes,
            d.a.allocated_at_peak_bytes
        );
    }
}
