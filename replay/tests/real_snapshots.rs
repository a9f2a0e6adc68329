//! Fidelity on the real PyTorch snapshots in ../shared/traces/real/: every
//! allocation address and every segment event must match, and the final
//! state must equal the snapshot's. The tests are `#[ignore]`d, so that a
//! checkout without the folder shows them as ignored rather than passing
//! them silently; `.ci/run` runs them with `--ignored` when the folder is
//! there:
//!
//! ```sh
//! cargo test -p vramlab-replay --test real_snapshots -- --ignored
//! ```

use std::path::{Path, PathBuf};

use vramlab_allocator::TorchVersion;
use vramlab_replay::check_fidelity;
use vramlab_replay::{Inputs, Pick, recorded_conf};

fn real_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/real");
    d.is_dir().then_some(d)
}

fn snapshots() -> Vec<PathBuf> {
    let Some(dir) = real_dir() else {
        panic!("../shared/traces/real/ is not present: these tests read the real snapshots there");
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    v.sort();
    v
}

#[test]
#[ignore = "needs ../shared/traces/real; run with -- --ignored"]
fn every_real_snapshot_replays_exactly() {
    let files = snapshots();
    for path in &files {
        let v = TorchVersion::NEWEST;
        let loaded = Inputs::new([path])
            .pick(Pick::Each(None))
            .torch(v)
            .read()
            .expect("load");
        assert!(
            loaded.notes.is_empty(),
            "{}: {:?}",
            path.display(),
            loaded.notes
        );
        let traces = loaded.into_traces();
        assert!(!traces.is_empty(), "{}: no traces", path.display());
        for t in &traces {
            // Under the rules of the release that wrote it, as `vramlab
            // fidelity` does.
            let v = vramlab_replay::target_of(t, None).rules;
            let conf = recorded_conf(t, v)
                .expect("conf")
                .expect("recorded settings");
            let r = check_fidelity(t, conf).expect("replay");
            eprintln!(
                "{}: device {:?}: {} allocs, {} matched; {} of {} segment events; final state {:?}",
                path.file_name().unwrap().to_string_lossy(),
                r.device,
                r.allocs,
                r.alloc_addresses_matched,
                r.segment_events_matched,
                r.segment_events_expected,
                r.final_state_matched
            );
            assert!(r.is_exact(), "{}: {:?}", path.display(), r.first_mismatch);
            assert_eq!(r.final_state_matched, Some(true), "{}", path.display());
            assert!(r.allocs > 0);
        }
    }
    if !files.is_empty() {
        assert_eq!(
            files.len(),
            8,
            "docs/guide/validation.md lists eight snapshots"
        );
    }
}

#[test]
#[ignore = "needs ../shared/traces/real; run with -- --ignored"]
fn real_snapshots_recorded_mid_run_get_an_initial_state() {
    for path in snapshots() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let t = &Inputs::new([&path])
            .pick(Pick::Each(None))
            .torch(TorchVersion::NEWEST)
            .read()
            .expect("load")
            .into_traces()[0];
        // The 2.11 recordings start mid-run; the others start from an empty allocator.
        assert_eq!(t.initial.is_some(), name.contains("torch2.11"), "{name}");
    }
}

/// Every real snapshot replays under its own plan, started fresh (every
/// block planned: the arena alone, in whole pages) and from the recorded
/// layout (the first blocks in the fallback's seeded segments), with the
/// invariants checked after every event.
#[test]
#[ignore = "needs ../shared/traces/real; run with -- --ignored"]
fn real_snapshots_replay_under_their_plan() {
    use vramlab_allocator::policies::plan::Settings;
    use vramlab_replay::{PolicySpec, ReplayOptions, Scenario, Start, plan_buffers, static_plan};
    for path in &snapshots() {
        let loaded = Inputs::new([path])
            .pick(Pick::Each(None))
            .torch(TorchVersion::NEWEST)
            .read()
            .expect("load");
        for t in &loaded.into_traces() {
            let v = vramlab_replay::target_of(t, None).rules;
            let s = Scenario::new(PolicySpec::Plan(Settings::parse("", v).unwrap()));
            for start in [Start::Fresh, Start::Recorded] {
                let opts = ReplayOptions {
                    check_invariants: true,
                    timeline_points: 10,
                    start,
                    ..Default::default()
                };
                let run = s
                    .run(t, &opts)
                    .unwrap_or_else(|e| panic!("{} ({start}): {e}", path.display()));
                assert!(run.oom.is_none(), "{} ({start})", path.display());
                assert_eq!(run.summary.events_replayed, run.summary.events);
                if start == Start::Fresh {
                    let page = 2u64 << 20;
                    let planned = static_plan(&plan_buffers(t)).unwrap().peak();
                    assert_eq!(
                        run.summary.peak_reserved_bytes,
                        planned.div_ceil(page) * page,
                        "{}",
                        path.display()
                    );
                }
            }
        }
    }
}
