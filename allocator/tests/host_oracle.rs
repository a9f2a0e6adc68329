//! The pinned host allocator judged by PyTorch's own: the steps of
//! `tests/data/host-sequence.json` (pins, frees, `non_blocking` copies,
//! `empty_cache`) were run by each release's official wheel on the fake
//! CUDA device (`scripts/oracle_experiments/host_sequence.py`; its output
//! is `tests/data/host-oracle-torch*.json`), and vramlab's host allocator
//! must give the same `host_memory_stats()` after every step and reuse the
//! same earlier block for every pin; once more under 2.15 with `pinned_*`
//! settings (`PYTORCH_ALLOC_CONF=… run.sh 2.15 host_sequence.py …`). The fake device completes every
//! event at once, so events complete here at once too.

use std::collections::HashMap;

use serde_json::Value;
use vramlab_allocator::host::{HostAllocator, HostBlockId, HostEventId, HostRules};
use vramlab_allocator::{AllocConf, Stat, TorchVersion};

fn data(name: &str) -> Value {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("test data");
    serde_json::from_str(&text).expect("JSON")
}

fn quad(s: Stat) -> Value {
    serde_json::json!([s.current, s.peak, s.allocated, s.freed])
}

/// Replays the sequence under `release` (and the settings the oracle's
/// run had, `conf`) and compares step by step.
fn judge(release: TorchVersion, oracle: &str) {
    let steps = data("host-sequence.json");
    let want = data(oracle);
    let conf = want["conf"].as_str().unwrap_or_default();
    let conf = AllocConf::parse(conf, release).expect("the run's settings");
    let steps = steps["steps"].as_array().expect("steps");
    let want = want["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), want.len());
    let mut h = HostAllocator::new(HostRules::of(&conf));
    let done = |_: HostEventId| true;
    let mut held: HashMap<String, HostBlockId> = HashMap::new();
    let mut address: Vec<(String, u64)> = Vec::new();
    for (i, (step, w)) in steps.iter().zip(want).enumerate() {
        let id = step["id"].as_str().unwrap_or_default().to_string();
        let mut reuses = Value::Null;
        match step["op"].as_str().expect("op") {
            "pin" => {
                let bytes = step["bytes"].as_u64().expect("bytes");
                if let Some(b) = h.allocate(bytes, &done) {
                    let (ptr, _) = h.block(b).expect("a live block");
                    let earlier = address
                        .iter()
                        .rev()
                        .find(|(k, p)| *p == ptr && !held.contains_key(k));
                    if let Some((k, _)) = earlier {
                        reuses = Value::from(k.clone());
                    }
                    address.push((id.clone(), ptr));
                    held.insert(id.clone(), b);
                }
            }
            "free" => {
                if let Some(b) = held.remove(&id) {
                    h.free(b);
                }
            }
            "copy" => {
                if let Some(&b) = held.get(&id) {
                    h.record_stream(b, 1);
                }
            }
            "empty_cache" => h.empty_cache(&done),
            other => panic!("unknown op {other}"),
        }
        let s = h.stats();
        let got = serde_json::json!({
            "allocations": quad(s.allocations),
            "allocated_bytes": quad(s.allocated_bytes),
            "active_requests": quad(s.active_requests()),
            "active_bytes": quad(s.active_bytes()),
            "num_host_alloc": s.allocations.allocated,
            "num_host_free": s.allocations.freed,
            "host_alloc_calls": s.host_alloc_calls,
            "host_free_calls": s.host_free_calls,
        });
        let what = format!("{release}, step {i} ({step})");
        assert_eq!(got, w["stats"], "{what}");
        if step["op"] == "pin" {
            assert_eq!(reuses, w["reuses"], "{what}");
        }
    }
}

#[test]
fn release_2_11_gives_the_wheels_host_statistics() {
    judge(TorchVersion::new(2, 11), "host-oracle-torch2.11.json");
}

#[test]
fn release_2_15_gives_the_wheels_host_statistics() {
    judge(TorchVersion::new(2, 15), "host-oracle-torch2.15.json");
}

/// The same sequence with exact sizes (round threshold 0), a 1 MiB limit
/// per cached block and a 1 MiB reserve segment (`PYTORCH_ALLOC_CONF` of
/// the wheel's run, in the oracle file).
#[test]
fn release_2_15_with_pinned_settings_gives_the_wheels_host_statistics() {
    judge(
        TorchVersion::new(2, 15),
        "host-oracle-torch2.15-pinned-settings.json",
    );
}
