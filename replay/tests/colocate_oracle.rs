//! Two PyTorch 2.15 processes on one fake GPU of 1 GiB
//! (`VRAMLAB_FAKECUDA_SHARED`, scripts/oracle_experiments/shared_device.py;
//! their `memory_stats()` after every step in docs/results/colocation/)
//! against `replay_colocated` of the same steps: each process's peak and
//! final reserved bytes, retries, OOMs and device calls, under the
//! defaults and with expandable segments.

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{ReplayOptions, Scenario, Step, Tenant, replay_colocated};
use vramlab_traces::{Trace, read_csv};

const MIB: u64 = 1 << 20;

/// A process's steps, each its own phase, as a CSV trace.
fn trace(ops: &[&str]) -> Trace {
    let mut csv = String::from("action,id,size,stream\n");
    for (i, op) in ops.iter().enumerate() {
        csv.push_str(&format!("# phase: {i}\n{op}\n"));
    }
    read_csv(csv.as_bytes(), "t.csv").unwrap()
}

/// PyTorch's figures of `process` after the last step of `scenario`.
fn torch_figures(file: &str, process: &str) -> serde_json::Value {
    let path = format!("../docs/results/colocation/{file}.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let steps = v["steps"].as_array().unwrap();
    steps.last().unwrap()["figures"][process].clone()
}

/// `ops` of A and B, run in the order `order` names them ('A'/'B'), on a
/// 1 GiB device under `conf`; each process's figures checked against
/// PyTorch's in `file`.
fn judge(file: &str, conf: &str, a: &[&str], b: &[&str], order: &str) {
    let (ta, tb) = (trace(a), trace(b));
    let version = TorchVersion::new(2, 15);
    let tenant = |name: &str, t| Tenant {
        name: name.into(),
        trace: t,
        scenario: Scenario::native(AllocConf::parse(conf, version).unwrap()),
        kv_util: None,
    };
    let tenants = [tenant("A", &ta), tenant("B", &tb)];
    let schedule: Vec<Step> = order
        .chars()
        .map(|c| Step {
            tenant: usize::from(c == 'B'),
            until_mark: true,
        })
        .collect();
    // A process that catches its OOM goes on, as the scripts do.
    let opts = ReplayOptions {
        stop_at_oom: false,
        ..ReplayOptions::default()
    };
    let run = replay_colocated(&tenants, Some(1 << 30), None, &schedule, &opts).unwrap();
    for (i, p) in ["A", "B"].into_iter().enumerate() {
        let torch = torch_figures(file, p);
        let s = &run.runs[i].summary;
        let mine = [
            ("reserved_peak_bytes", s.peak_reserved_bytes),
            ("reserved_bytes", s.final_reserved_bytes),
            ("num_alloc_retries", s.num_alloc_retries),
            ("num_ooms", s.num_ooms),
            ("num_device_alloc", s.num_device_alloc),
            ("num_device_free", s.num_device_free),
        ];
        for (key, got) in mine {
            assert_eq!(Some(got), torch[key].as_u64(), "{file}, process {p}: {key}");
        }
    }
}

fn alloc(id: &str, mib: u64) -> String {
    format!("alloc,{id},{},0", mib * MIB)
}

#[test]
fn another_process_frees_and_empties_its_cache() {
    let (x, y) = (alloc("x", 700), alloc("y", 500));
    let y2 = alloc("y2", 500);
    let a = [x.as_str(), "free,x", "empty_cache"];
    let b = [y.as_str(), y2.as_str()];
    judge("other_frees", "", &a, &b, "ABAAB");
    judge(
        "other_frees.expandable_segments-True",
        "expandable_segments:True",
        &a,
        &b,
        "ABAAB",
    );
}

#[test]
fn another_processes_cache_holds_the_memory_until_it_is_emptied() {
    let (x, x2, y) = (alloc("x", 700), alloc("x2", 700), alloc("y", 500));
    let a = [x.as_str(), x2.as_str()];
    let b = [y.as_str(), "free,y", "empty_cache"];
    judge("others_cache", "", &a, &b, "BBABA");
    judge(
        "others_cache.expandable_segments-True",
        "expandable_segments:True",
        &a,
        &b,
        "BBABA",
    );
}

#[test]
fn a_process_frees_its_own_cache_and_retries() {
    let (x, y, z) = (alloc("x", 500), alloc("y", 300), alloc("z", 400));
    let a = [x.as_str()];
    let b = [y.as_str(), "free,y", z.as_str()];
    judge("own_cache", "", &a, &b, "BBAB");
    // With expandable segments B's segment grows in place: no retry.
    judge(
        "own_cache.expandable_segments-True",
        "expandable_segments:True",
        &a,
        &b,
        "BBAB",
    );
}
