//! `explain` and `diff`, pinned on small scenarios whose numbers PyTorch's
//! own allocator gives (docs/results/explain-torch{2.15,2.11}.json, the
//! oracle on the fake device; tests/explain/README.md), on the private-pool
//! snapshots of tests/pools/snapshots/, and — with `--ignored` — on every
//! real snapshot in ../shared/traces/real/: the top culprit's
//! counterfactual is the replay of `vramlab convert --start fresh`'s CSV
//! with that allocation removed, the waste parts add up, and `diff`'s
//! groups add up to the allocated bytes at each peak.

use std::path::{Path, PathBuf};

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{
    DiffInput, ExplainOptions, Explanation, GroupBy, Inputs, Pick, ReplayOptions, Scenario, Start,
    diff, explain, start_for,
};
use vramlab_traces::{Trace, read_csv, write_csv};

const MIB: u64 = 1 << 20;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(path: &Path) -> Trace {
    Inputs::new([path]).pick(Pick::One(None)).trace().unwrap()
}

fn scenario(conf: &str, version: &str) -> Scenario {
    let v: TorchVersion = version.parse().unwrap();
    Scenario::native(AllocConf::parse(conf, v).unwrap())
}

fn explained(t: &Trace, s: &Scenario) -> Explanation {
    explain(t, s, &ExplainOptions::default()).unwrap()
}

/// The parts of the waste add up to it, and the figures to `replay`'s.
fn check_sums(t: &Trace, s: &Scenario, e: &Explanation) {
    let w = &e.waste;
    assert_eq!(
        w.pinned_bytes + w.releasable_bytes + w.pool_cached_bytes,
        e.waste_at_peak_bytes,
        "{e:#?}"
    );
    assert_eq!(
        e.peak_reserved_bytes - e.waste_at_peak_bytes,
        e.allocated_at_peak_bytes,
        "the peak explained is the one waste_at_peak describes"
    );
    assert_eq!(
        e.allocated_at_peak_bytes - w.rounding_bytes,
        e.requested_at_peak_bytes
    );
    assert!(w.pending_free_bytes <= e.waste_at_peak_bytes);
    let fresh = t.with_fresh_start();
    let run = s.run(&fresh, &ReplayOptions::default()).unwrap();
    assert_eq!(run.summary.peak_reserved_bytes, e.peak_reserved_bytes);
    assert_eq!(run.summary.waste_at_peak_bytes, e.waste_at_peak_bytes);
}

/// PyTorch's peak reserved for `file` under `setting` (an oracle row).
fn oracle_peak(version: &str, file: &str, setting: &str) -> u64 {
    let path = root().join(format!("docs/results/explain-torch{version}.json"));
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["trace"].as_str().unwrap().ends_with(file) && r["setting"] == setting)
        .unwrap_or_else(|| panic!("no oracle row for {file} under {setting}"));
    assert_eq!(row["exact"], true, "{row}");
    row["torch_peak_reserved_bytes"].as_u64().unwrap()
}

#[test]
fn the_block_that_splits_a_cached_segment_is_named_and_the_decoy_is_not() {
    let t = load(&root().join("tests/explain/pinned-split.csv"));
    for version in ["2.15", "2.11"] {
        let s = scenario("", version);
        let e = explained(&t, &s);
        check_sums(&t, &s, &e);
        assert_eq!(e.peak_reserved_bytes, 232 * MIB);
        assert_eq!(
            e.peak_reserved_bytes,
            oracle_peak(version, "pinned-split.csv", "default")
        );
        assert_eq!(e.peak_event_index, Some(7));
        // The top culprit: allocation 4, 30 MiB, with the 70 MiB left of
        // the cached 100 MiB segment beside it; then 1, the 1000-byte block
        // whose 2 MiB small segment is not made without it. The decoy (0)
        // has no free space beside it: no candidate.
        let named: Vec<u32> = e.culprits.iter().map(|c| c.id).collect();
        assert_eq!(named, vec![4, 1], "{e:#?}");
        let c = &e.culprits[0];
        assert_eq!(c.size_bytes, 30 * MIB);
        assert_eq!(c.pinned_bytes, 70 * MIB);
        assert_eq!(c.segment_bytes, 100 * MIB);
        assert_eq!((c.allocated_at, c.freed_at), (Some(6), Some(9)));
        assert_eq!(c.blocked_requests, 1);
        assert_eq!(c.blocked_device_bytes, 80 * MIB);
        // Without it the 80 MiB request takes the cached segment.
        assert_eq!(c.peak_reserved_without_bytes, 152 * MIB);
        assert_eq!(
            c.peak_reserved_without_bytes,
            oracle_peak(version, "pinned-split-without-4.csv", "default")
        );
        assert_eq!(c.saving_bytes, 80 * MIB as i64);
        // Rounding: 1000 bytes in a 1024-byte block. Releasable: the
        // freed 20 MiB segment. Pinned: 70 MiB beside the culprit and the
        // small segment's 2 MiB less the 1024-byte block.
        assert_eq!(e.waste.rounding_bytes, 24);
        assert_eq!(e.waste.releasable_bytes, 20 * MIB);
        assert_eq!(e.waste.pinned_bytes, 72 * MIB - 1024);
        assert_eq!(e.waste.pool_cached_bytes, 0);
        assert_eq!(e.waste.pending_free_bytes, 0);
        // The fixes, replayed, are PyTorch's figures too.
        let fix = |name: &str| {
            e.fixes
                .iter()
                .find(|f| f.setting == name)
                .unwrap_or_else(|| panic!("no fix {name}: {:#?}", e.fixes))
                .peak_reserved_bytes
        };
        assert_eq!(fix("expandable_segments:True"), 142 * MIB);
        assert_eq!(
            fix("expandable_segments:True"),
            oracle_peak(version, "pinned-split.csv", "expandable_segments:True")
        );
        assert_eq!(fix("max_split_size_mb:31"), 262 * MIB);
        assert_eq!(
            fix("max_split_size_mb:31"),
            oracle_peak(version, "pinned-split.csv", "max_split_size_mb:31")
        );
        assert_eq!(e.fixes[0].setting, "expandable_segments:True", "best first");
    }
}

#[test]
fn the_counterfactual_trace_is_the_file_beside_it() {
    let t = load(&root().join("tests/explain/pinned-split.csv"));
    let without = load(&root().join("tests/explain/pinned-split-without-4.csv"));
    // The CSV reader numbers ids densely: compare what the events do.
    let shape = |t: &Trace| -> Vec<String> {
        t.events
            .iter()
            .map(|e| match e {
                vramlab_traces::Event::Alloc { size, .. } => format!("alloc {size}"),
                other => format!("{other:?}")
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .to_string(),
            })
            .collect()
    };
    assert_eq!(shape(&t.without_allocation(4)), shape(&without));
    let s = scenario("", "2.15");
    let opts = ReplayOptions::default();
    assert_eq!(
        s.run(&t.without_allocation(4), &opts).unwrap().summary,
        s.run(&without, &opts).unwrap().summary
    );
}

#[test]
fn a_pending_free_at_the_peak_is_waste_that_empty_cache_returns() {
    let t = load(&root().join("tests/explain/pending-free.csv"));
    let s = scenario("", "2.15");
    let e = explained(&t, &s);
    check_sums(&t, &s, &e);
    assert_eq!(e.peak_reserved_bytes, 90 * MIB);
    assert_eq!(e.waste.pending_free_bytes, 30 * MIB);
    assert_eq!(e.waste.releasable_bytes, 30 * MIB);
    assert_eq!(e.waste.pinned_bytes, 0);
    assert!(e.culprits.is_empty(), "{:#?}", e.culprits);
}

#[test]
fn whole_free_segments_of_a_pool_in_use_are_pool_cache_not_releasable() {
    let t = load(&root().join("tests/pools/empty-cache-routed.csv"));
    let s = scenario("", "2.15");
    let e = explained(&t, &s);
    check_sums(&t, &s, &e);
    assert_eq!(e.waste.pool_cached_bytes, 20 * MIB);
    assert_eq!(e.waste.releasable_bytes, 0);
    assert_eq!(e.waste.pinned_bytes, 18 * MIB);
}

/// The checks `explain` and `diff` make on any snapshot: the top culprit's
/// counterfactual is the replay of the fresh-start CSV (as `vramlab
/// convert --start fresh` writes it, read back) without that allocation;
/// diff's groups add up.
fn check_snapshot(path: &Path) {
    let t = load(path);
    let v = vramlab_replay::target_of(&t, None).rules;
    let conf = vramlab_replay::recorded_conf(&t, v)
        .unwrap()
        .unwrap_or_else(|| AllocConf::new(v));
    let s = Scenario::native(conf);
    let opts = ExplainOptions {
        top: 2,
        ..ExplainOptions::default()
    };
    let e = explain(&t, &s, &opts).unwrap();
    check_sums(&t, &s, &e);
    // Every culprit, and every culprit line, lowers the peak: the replay
    // decided it.
    for c in &e.culprits {
        assert!(
            c.peak_reserved_without_bytes < e.peak_reserved_bytes && c.saving_bytes > 0,
            "{}: culprit {} does not lower the peak: {c:#?}",
            path.display(),
            c.id
        );
    }
    for l in &e.line_culprits {
        assert!(
            l.peak_reserved_without_bytes < e.peak_reserved_bytes,
            "{}: line {} does not lower the peak",
            path.display(),
            l.frame
        );
        let run = s
            .run(&t.without_allocations(&l.ids), &ReplayOptions::default())
            .unwrap();
        assert_eq!(
            run.summary.peak_reserved_bytes,
            l.peak_reserved_without_bytes
        );
    }
    assert!(!e.finding.is_empty());
    let mut csv = Vec::new();
    write_csv(&t.with_fresh_start(), &mut csv, "converted.csv").unwrap();
    let csv = String::from_utf8(csv).unwrap();
    for c in &e.culprits {
        // The rows of that id removed from the file, as a user would.
        let id = c.id.to_string();
        let kept: String = csv
            .lines()
            .filter(|l| l.split(',').nth(1) != Some(id.as_str()) || l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            kept.lines().count() + 2 - usize::from(c.freed_at.is_none()),
            csv.lines().count()
        );
        let converted = read_csv(kept.as_bytes(), "converted.csv").unwrap();
        let run = s.run(&converted, &ReplayOptions::default()).unwrap();
        assert_eq!(
            run.summary.peak_reserved_bytes,
            c.peak_reserved_without_bytes,
            "{}: culprit {}",
            path.display(),
            c.id
        );
    }
    let es = Scenario::native(
        s.policy
            .native_conf()
            .unwrap()
            .parse_update("expandable_segments:True")
            .unwrap(),
    );
    let start = start_for(&t, std::slice::from_ref(&s), None).unwrap_or_default();
    let name = path.display().to_string();
    let side = |scenario, start| DiffInput {
        trace: &t,
        name: &name,
        scenario,
        start,
    };
    let d = diff(side(&s, start), side(&es, Start::Fresh)).unwrap();
    let sum = |f: fn(&vramlab_replay::DiffGroup) -> u64| d.groups.iter().map(f).sum::<u64>();
    assert_eq!(sum(|g| g.a_bytes), d.a.allocated_at_peak_bytes, "{name}");
    assert_eq!(sum(|g| g.b_bytes), d.b.allocated_at_peak_bytes, "{name}");
    assert_eq!(
        d.reserved_delta_bytes,
        d.allocated_delta_bytes + d.waste_delta_bytes
    );
    assert_eq!(
        d.groups.iter().map(|g| g.delta_bytes).sum::<i64>(),
        d.allocated_delta_bytes
    );
}

fn pickles(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    v.sort();
    v
}

#[test]
fn pool_snapshots_explain_and_diff_consistently() {
    let files = pickles(&root().join("tests/pools/snapshots"));
    assert_eq!(files.len(), 16);
    for f in &files {
        check_snapshot(f);
    }
}

#[test]
#[ignore = "needs ../shared/traces/real; run with -- --ignored"]
fn real_snapshots_explain_and_diff_consistently() {
    let dir = root().join("../shared/traces/real");
    assert!(dir.is_dir(), "../shared/traces/real/ is not present");
    let files = pickles(&dir);
    assert!(!files.is_empty());
    for f in &files {
        check_snapshot(f);
    }
}

#[test]
fn diff_of_two_traces_groups_by_what_both_hold() {
    let dir = root().join("tests/pools/snapshots");
    let a = load(&dir.join("serving-warmup.torch2.15.pickle"));
    let b = load(&dir.join("graph-shared.torch2.15.pickle"));
    let s = scenario("", "2.15");
    let input = |trace, name| DiffInput {
        trace,
        name,
        scenario: &s,
        start: Start::Fresh,
    };
    let d = diff(input(&a, "a"), input(&b, "b")).unwrap();
    let stacks = |t: &Trace| t.alloc_frames.iter().any(Option::is_some);
    let by = if stacks(&a) && stacks(&b) {
        GroupBy::Frame
    } else if a.phases.is_empty() && b.phases.is_empty() {
        GroupBy::Size
    } else {
        GroupBy::PhaseAndSize
    };
    assert_eq!(d.grouped_by, by);
    assert_eq!(
        d.groups.iter().map(|g| g.delta_bytes).sum::<i64>(),
        d.allocated_delta_bytes
    );
    // Largest change first.
    for w in d.groups.windows(2) {
        assert!(w[0].delta_bytes.unsigned_abs() >= w[1].delta_bytes.unsigned_abs());
    }
}
