//! Fidelity on PyTorch's own snapshots of the private-pool scenarios
//! (tests/pools/snapshots/, written by scripts/make_pool_snapshots.sh:
//! torch 2.15 and 2.11 on the fake CUDA device, the memory history on).
//!
//! From 2.12 every trace entry names its pool, so every recording replays
//! exactly; 2.11 records pools only on the final segments, so a recording
//! whose private pools gave their memory back before the dump cannot tell
//! which requests went there: those four are pinned as differing, with the
//! note that says why.

use std::path::{Path, PathBuf};

use vramlab_replay::{Inputs, Pick, check_fidelity, recorded_conf, target_of};
use vramlab_traces::{PoolDecl, PrivatePoolKind, Trace};

fn snapshot(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/pools/snapshots")
        .join(name)
}

fn trace_of(name: &str) -> Trace {
    let loaded = Inputs::new([snapshot(name)])
        .pick(Pick::Each(None))
        .read()
        .expect("load");
    let mut traces = loaded.into_traces();
    assert_eq!(traces.len(), 1, "{name}: one device");
    traces.remove(0)
}

fn exact(name: &str) -> bool {
    let t = trace_of(name);
    let v = target_of(&t, None).rules;
    let conf = recorded_conf(&t, v)
        .expect("conf")
        .expect("recorded settings");
    let r = check_fidelity(&t, conf).expect("replay");
    if !r.is_exact() {
        eprintln!("{name}: {:?}", r.first_mismatch);
    }
    r.is_exact() && r.final_state_matched != Some(false)
}

const SCENARIOS: [&str; 8] = [
    "capture-oom",
    "empty-cache-routed",
    "graph-shared",
    "mempool-no-split",
    "mempool-use-on-oom",
    "mempool",
    "serving-warmup",
    "serving-warmup-midrun",
];

#[test]
fn every_torch_2_15_pool_snapshot_replays_exactly() {
    for s in SCENARIOS {
        assert!(exact(&format!("{s}.torch2.15.pickle")), "{s} (torch 2.15)");
    }
}

#[test]
fn torch_2_11_pool_snapshots_replay_exactly_where_the_final_segments_tell_the_pools() {
    let tells = [
        "mempool-use-on-oom",
        "serving-warmup",
        "serving-warmup-midrun",
    ];
    for s in SCENARIOS {
        let name = format!("{s}.torch2.11.pickle");
        if tells.contains(&s) {
            assert!(exact(&name), "{name}");
        } else {
            assert!(
                !exact(&name),
                "{name}: now exact: move it to the exact list"
            );
        }
    }
    // Its pool gave everything back before the dump: nothing tells it was there.
    assert!(trace_of("graph-shared.torch2.11.pickle").pools.is_empty());
    let t = trace_of("serving-warmup.torch2.11.pickle");
    assert_eq!(t.pools, vec![PoolDecl::graph((0, 1))]);
    assert!(
        t.notes
            .iter()
            .any(|n| n.contains("this release records no pool per entry")),
        "{:?}",
        t.notes
    );
}

#[test]
fn the_pools_kinds_and_sections_are_read_from_the_entries() {
    let t = trace_of("graph-shared.torch2.15.pickle");
    assert_eq!(t.pools, vec![PoolDecl::graph((0, 1))]);
    let s = vramlab_traces::TraceSummary::of(&t);
    // The two captures follow each other with no default-pool request on
    // the capture stream between them: one section holds both.
    assert_eq!(s.captures, 1);
    assert_eq!(s.private_pools, 1);
    let t = trace_of("mempool.torch2.15.pickle");
    assert_eq!(t.pools.len(), 1);
    assert_eq!(t.pools[0].kind, PrivatePoolKind::MemPool);
    // The mid-run recording starts with the pool holding segments.
    let t = trace_of("serving-warmup-midrun.torch2.15.pickle");
    let init = t.initial.as_ref().expect("mid-run");
    assert!(init.segments.iter().any(|s| s.pool == Some(0)));
    assert!(init.segments.iter().any(|s| s.pool.is_none()));
}

/// Every row of docs/results/pool-snapshots-torch{2.15,2.11}.json (PyTorch's
/// own allocator replaying each snapshot, started fresh, under three
/// settings) is what vramlab's replay of the snapshot, started fresh in
/// process, gives: peak reserved, and (for recordings from an empty
/// allocator, where no fresh prologue is left out of the counts) the
/// cudaMalloc and cudaFree counts.
#[test]
fn fresh_starts_of_the_pool_snapshots_are_pytorchs_figures() {
    use vramlab_allocator::{AllocConf, TorchVersion};
    use vramlab_replay::{ReplayOptions, Scenario, Start};
    for release in ["2.15", "2.11"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
            "../docs/results/pool-snapshots-torch{release}.json"
        ));
        let rows: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("rows")).expect("json");
        assert_eq!(rows.len(), 48, "{release}");
        let v: TorchVersion = release.parse().expect("release");
        for row in &rows {
            let name = row["trace"].as_str().expect("trace");
            let conf = AllocConf::parse(row["conf"].as_str().expect("conf"), v).expect("conf");
            let t = trace_of(name);
            let opts = ReplayOptions {
                start: Start::Fresh,
                check_invariants: true,
                ..Default::default()
            };
            let run = Scenario::native(conf).run(&t, &opts).expect("replay");
            let s = &run.summary;
            let want = |k: &str| row[k].as_u64().expect(k);
            assert_eq!(
                s.peak_reserved_bytes,
                want("torch_peak_reserved_bytes"),
                "{name} [{}] under {release}",
                row["setting"]
            );
            if t.initial.is_some() {
                continue;
            }
            assert_eq!(
                (s.peak_reserved_bytes, s.num_device_alloc, s.num_device_free),
                (
                    want("torch_peak_reserved_bytes"),
                    want("torch_num_device_alloc"),
                    want("torch_num_device_free")
                ),
                "{name} [{}] under {release}",
                row["setting"]
            );
        }
    }
}
