//! The pinned host allocator judged by PyTorch's own: the steps of
//! `tests/data/host-sequence.json` (pins, frees, `non_blocking` copies on
//! named streams, stream and device synchronizes, `empty_cache`) were run
//! by each release's official wheel on the fake CUDA device
//! (`scripts/oracle_experiments/host_sequence.py`; its output is
//! `tests/data/host-oracle-torch*.json`), and vramlab's host allocator
//! must give the same `host_memory_stats()` after every step, reuse the
//! same earlier block for every pin, and fail the same pins; once more
//! under 2.15 with `pinned_*` settings (`PYTORCH_ALLOC_CONF=… run.sh 2.15
//! host_sequence.py …`).
//!
//! The fake device ran with the settings the sequence names (its `env`):
//! `VRAMLAB_FAKECUDA_EVENTS=sync`, so an event recorded at a free completes
//! only when its stream (`sync`) or the device (`synchronize`) is
//! synchronized — which the judge models step by step (`Completion`) —
//! and `VRAMLAB_FAKECUDA_HOST_CAPACITY`, so a pin whose new block would
//! take the bytes held from CUDA past it fails (PyTorch throws; nothing
//! changes, R7.3). The sequence's failing pins come where no completed
//! event is waiting, so the events PyTorch processes before it throws
//! change nothing either.

use std::collections::{HashMap, HashSet};

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

/// Which events have completed, as the fake device decided: at once
/// (`VRAMLAB_FAKECUDA_EVENTS` unset or `complete`), or when their stream
/// or the whole device was synchronized (`sync`).
#[derive(Debug, Default)]
struct Completion {
    on_sync: bool,
    stream_of: HashMap<HostEventId, String>,
    done: HashSet<HostEventId>,
}

impl Completion {
    fn recorded(&mut self, e: HostEventId, stream: &str) {
        self.stream_of.insert(e, stream.to_string());
        if !self.on_sync {
            self.done.insert(e);
        }
    }

    /// `stream.synchronize()`: its events so far complete.
    fn sync(&mut self, stream: &str) {
        let done = self.stream_of.iter().filter(|(_, s)| *s == stream);
        self.done.extend(done.map(|(e, _)| *e));
    }

    /// `torch.cuda.synchronize()`: every event so far completes.
    fn synchronize(&mut self) {
        self.done.extend(self.stream_of.keys().copied());
    }

    fn is_done(&self, e: HostEventId) -> bool {
        self.done.contains(&e)
    }
}

/// A pinned tensor the sequence holds: its block, and the streams its
/// copies ran on, in order (the order vramlab records their events in).
struct Held {
    block: HostBlockId,
    streams: Vec<String>,
}

/// The judge's side of one run.
struct Judge {
    h: HostAllocator,
    events: Completion,
    capacity: Option<i64>,
    held: HashMap<String, Held>,
    address: Vec<(String, u64)>,
    stream_ids: Vec<String>,
}

impl Judge {
    /// A pin: the earlier block it reuses, and whether it failed (the new
    /// block would not fit under the fake's host capacity).
    fn pin(&mut self, id: &str, bytes: u64) -> (Value, bool) {
        let mut trial = self.h.clone();
        let events = &self.events;
        let Some(b) = trial.allocate(bytes, &|e| events.is_done(e)) else {
            return (Value::Null, false);
        };
        let held = trial.stats().reserved_bytes.current;
        if self.capacity.is_some_and(|c| held > c) {
            return (Value::Null, true);
        }
        self.h = trial;
        let (ptr, _) = self.h.block(b).expect("a live block");
        let earlier = self
            .address
            .iter()
            .rev()
            .find(|(k, p)| *p == ptr && !self.held.contains_key(k));
        let reuses = earlier.map_or(Value::Null, |(k, _)| Value::from(k.clone()));
        self.address.push((id.to_string(), ptr));
        let streams = Vec::new();
        self.held.insert(id.to_string(), Held { block: b, streams });
        (reuses, false)
    }

    /// A `non_blocking` copy on `stream`: the block is used on it.
    fn copy(&mut self, id: &str, stream: &str) {
        let number = match self.stream_ids.iter().position(|s| s == stream) {
            Some(i) => i,
            None => {
                self.stream_ids.push(stream.to_string());
                self.stream_ids.len() - 1
            }
        };
        if let Some(held) = self.held.get_mut(id) {
            self.h.record_stream(held.block, number as u64);
            if !held.streams.iter().any(|s| s == stream) {
                held.streams.push(stream.to_string());
            }
        }
    }

    fn free(&mut self, id: &str) {
        if let Some(held) = self.held.remove(id) {
            let recorded = self.h.free(held.block);
            assert_eq!(recorded.len(), held.streams.len(), "one event per stream");
            for (e, s) in recorded.into_iter().zip(&held.streams) {
                self.events.recorded(e, s);
            }
        }
    }

    fn stats(&self) -> Value {
        let s = self.h.stats();
        serde_json::json!({
            "allocations": quad(s.allocations),
            "allocated_bytes": quad(s.allocated_bytes),
            "active_requests": quad(s.active_requests()),
            "active_bytes": quad(s.active_bytes()),
            "num_host_alloc": s.allocations.allocated,
            "num_host_free": s.allocations.freed,
            "host_alloc_calls": s.host_alloc_calls,
            "host_free_calls": s.host_free_calls,
        })
    }
}

/// Replays the sequence under `release` (and the settings the oracle's
/// run had, `conf`) and compares step by step.
fn judge(release: TorchVersion, oracle: &str) {
    let sequence = data("host-sequence.json");
    let want = data(oracle);
    assert_eq!(
        want["env"], sequence["env"],
        "the run had the sequence's fake settings"
    );
    let env = &sequence["env"];
    let conf = want["conf"].as_str().unwrap_or_default();
    let conf = AllocConf::parse(conf, release).expect("the run's settings");
    let steps = sequence["steps"].as_array().expect("steps");
    let want = want["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), want.len());
    let mut j = Judge {
        h: HostAllocator::new(HostRules::of(&conf)),
        events: Completion {
            on_sync: env["VRAMLAB_FAKECUDA_EVENTS"] == "sync",
            ..Completion::default()
        },
        capacity: env["VRAMLAB_FAKECUDA_HOST_CAPACITY"]
            .as_str()
            .map(|c| c.parse().expect("a byte count")),
        held: HashMap::new(),
        address: Vec::new(),
        stream_ids: vec!["default".into()],
    };
    let mut before = Value::Null;
    for (i, (step, w)) in steps.iter().zip(want).enumerate() {
        let id = step["id"].as_str().unwrap_or_default();
        let stream = step["stream"].as_str().unwrap_or("default");
        let what = format!("{release}, step {i} ({step})");
        match step["op"].as_str().expect("op") {
            "pin" => {
                let (reuses, failed) = j.pin(id, step["bytes"].as_u64().expect("bytes"));
                assert_eq!(w["reuses"], reuses, "{what}");
                let error = w["error"].as_str();
                assert_eq!(error.is_some(), failed, "{what}: {error:?}");
                if failed {
                    assert!(error.is_some_and(|e| e.contains("out of memory")), "{what}");
                    assert_eq!(w["stats"], before, "{what}: a failed pin changes nothing");
                }
            }
            "free" => j.free(id),
            "copy" => j.copy(id, stream),
            "sync" => j.events.sync(stream),
            "synchronize" => j.events.synchronize(),
            "empty_cache" => {
                let events = &j.events;
                j.h.empty_cache(&|e| events.is_done(e));
            }
            other => panic!("unknown op {other}"),
        }
        assert_eq!(j.stats(), w["stats"], "{what}");
        before = w["stats"].clone();
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
