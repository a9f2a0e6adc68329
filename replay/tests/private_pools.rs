//! Private pools (CUDA graphs' pools, MemPools), pinned against PyTorch's
//! own allocator: every row `vramlab oracle` wrote for the scenario traces
//! of `tests/pools/` (docs/results/pools-*.json, torch 2.11 and 2.15 on the
//! fake device; `scripts/make_pool_traces.py` writes the traces) is
//! replayed here under the same release, setting and capacity, and must
//! give PyTorch's peak reserved and allocated bytes, cudaMalloc and
//! cudaFree counts and OOM event.

use std::path::{Path, PathBuf};

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{ReplayOptions, Scenario, Start};
use vramlab_traces::{Event, Trace};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn pool_trace(name: &str) -> Trace {
    vramlab_replay::Inputs::new([root().join("tests/pools").join(name)])
        .trace()
        .expect("scenario trace")
}

fn replay(t: &Trace, conf: &str, version: &str, capacity: Option<u64>) -> vramlab_replay::Run {
    let v: TorchVersion = version.parse().unwrap();
    let conf = AllocConf::parse(if conf == "default" { "" } else { conf }, v).unwrap();
    Scenario::native(conf)
        .with_capacity(capacity)
        .run(
            t,
            &ReplayOptions {
                start: Start::Fresh,
                stop_at_oom: true,
                check_invariants: true,
                ..Default::default()
            },
        )
        .unwrap()
}

#[test]
fn every_oracle_row_is_pytorchs_figures() {
    let mut rows_seen = 0;
    for (file, capacity) in [
        ("pools-torch2.15.json", None),
        ("pools-torch2.11.json", None),
        ("pools-oom-torch2.15.json", Some(64u64 << 20)),
        ("pools-oom-torch2.11.json", Some(64u64 << 20)),
    ] {
        let text = std::fs::read_to_string(root().join("docs/results").join(file)).unwrap();
        let rows: serde_json::Value = serde_json::from_str(&text).unwrap();
        for r in rows.as_array().unwrap() {
            let trace = r["trace"].as_str().unwrap();
            let name = Path::new(trace).file_name().unwrap().to_str().unwrap();
            let setting = r["setting"].as_str().unwrap();
            let version = r["torch_version"].as_str().unwrap();
            let version = &version[..version.rfind('.').unwrap()];
            let t = pool_trace(name);
            let run = replay(&t, setting, version, capacity);
            let s = &run.summary;
            let what = format!("{name} [{setting}] torch {version}");
            assert!(
                r["exact"].as_bool().unwrap(),
                "{what}: the oracle row is not exact"
            );
            assert_eq!(
                s.peak_reserved_bytes,
                r["torch_peak_reserved_bytes"].as_u64().unwrap(),
                "{what}"
            );
            assert_eq!(
                s.peak_allocated_bytes,
                r["torch_peak_allocated_bytes"].as_u64().unwrap(),
                "{what}"
            );
            assert_eq!(
                Some(s.num_device_alloc),
                r["torch_num_device_alloc"].as_u64(),
                "{what}"
            );
            assert_eq!(
                Some(s.num_device_free),
                r["torch_num_device_free"].as_u64(),
                "{what}"
            );
            assert_eq!(
                run.oom.as_ref().map(|o| o.event_index),
                r["torch_oom_event"].as_u64(),
                "{what}"
            );
            rows_seen += 1;
        }
    }
    assert_eq!(rows_seen, 38);
}

/// The pools decide the figures: the same requests with the pool events
/// taken out are served differently — under 2.11 a capture cannot free
/// the default pool's cache to make room, so the request fails.
#[test]
fn without_its_pools_a_trace_is_served_differently() {
    let t = pool_trace("capture-oom.csv");
    let mut flat = t.clone();
    flat.events.retain(|e| e.pool().is_none());
    flat.pools.clear();
    let with = replay(&t, "default", "2.11", Some(64 << 20));
    let without = replay(&flat, "default", "2.11", Some(64 << 20));
    assert!(with.oom.is_some() && without.oom.is_none());
    assert_eq!(with.summary.peak_reserved_bytes, 48 << 20);
    assert_eq!(without.summary.peak_reserved_bytes, 54 << 20);
}

/// Up to 2.12 a capture cannot free the default pool's cache to make room
/// (the request fails); from 2.13 it can (PyTorch 2.15 retries).
#[test]
fn a_capture_frees_the_cache_from_2_13_on() {
    let t = pool_trace("capture-oom.csv");
    let old = replay(&t, "default", "2.11", Some(64 << 20));
    assert_eq!(old.oom.as_ref().map(|o| o.event_index), Some(4));
    let new = replay(&t, "default", "2.15", Some(64 << 20));
    assert!(new.oom.is_none());
    assert_eq!(new.summary.num_alloc_retries, 1);
}

/// `empty_cache()` inside a MemPool context or a capture frees nothing up
/// to 2.12 and frees the default pool's cache from 2.13 (PyTorch 2.11: 3
/// cudaMalloc, 2.15: 5).
#[test]
fn empty_cache_while_routed_follows_the_release() {
    let t = pool_trace("empty-cache-routed.csv");
    assert_eq!(
        replay(&t, "default", "2.11", None).summary.num_device_alloc,
        3
    );
    assert_eq!(
        replay(&t, "default", "2.15", None).summary.num_device_alloc,
        5
    );
}

/// A trace with pools reads back from the CSV (v2) and binary (v4)
/// formats as it was.
#[test]
fn pools_survive_both_formats() {
    let t = pool_trace("graph-shared.csv");
    assert_eq!(t.pools.len(), 1);
    let mut csv = Vec::new();
    vramlab_traces::write_csv(&t, &mut csv, "t.csv").unwrap();
    let text = String::from_utf8(csv.clone()).unwrap();
    assert!(text.starts_with("# vramlab trace v2\n"), "{text}");
    assert!(text.contains("# pool.0: graph 0,1\n"), "{text}");
    let back = vramlab_traces::read_csv(&csv[..], "t.csv").unwrap();
    assert_eq!((&back.events, &back.pools), (&t.events, &t.pools));
    let mut bin = Vec::new();
    vramlab_traces::write_binary(&t, &mut bin, false, "t.vlt").unwrap();
    let back = vramlab_traces::read_binary(&bin[..], "t.vlt").unwrap();
    assert_eq!((&back.events, &back.pools), (&t.events, &t.pools));
    assert!(
        t.events
            .iter()
            .any(|e| matches!(e, Event::CaptureBegin { .. }))
    );
}
