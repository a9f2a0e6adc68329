//! The pinned host allocator of a replay against PyTorch's own, on the
//! offloading scenarios of scripts/oracle_experiments/host_offload.py
//! (docs/results/pinned-host-offload.md). For each scenario,
//! tests/data/host/ holds the trace of its pinned requests (recorded on torch
//! 2.15 with `pinned_max_round_threshold_mb:0,pinned_max_cached_size_mb:0`,
//! so each block is its request) and PyTorch's `host_memory_stats()` at the
//! end of the same run under several releases and settings
//! (`SCENARIO.torchX.Y[.setting].json`, each naming its settings and the
//! command that made it). The replay of the trace under the same release
//! and settings must give PyTorch's figures:
//!
//! - `host_num_allocs` = `num_host_alloc` (blocks created);
//! - `host_peak_reserved_bytes` = `allocated_bytes.peak` (no reserve
//!   segment in these runs);
//! - `host_final_reserved_bytes` = `allocated_bytes.current`;
//! - `host_peak_requested_bytes` = the peak of the bytes the script asked
//!   to pin and had not freed (its own count);
//! - from 2.13, `host_peak_allocated_bytes` = the largest
//!   `active_bytes.current` seen after a pin (2.11's active statistics are
//!   not the bytes handed out: docs/host-allocator-spec.md R5.4).
//!
//! `SCENARIO.torch2.15[.round1|.cached1].pickle.gz` are recordings of the
//! scenario (`record_pinned_host_memory=True`) under 2.15's defaults and
//! under `pinned_max_round_threshold_mb:1` / `pinned_max_cached_size_mb:1`:
//! `vramlab fidelity` of each must match every host decision (segment_alloc
//! and segment_free) PyTorch recorded. (The `.fidelity.json` beside them
//! are the reports when the data was made, for the results note.)
//!
//! Remake the data with `bash scripts/oracle_experiments/host_offload.sh`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{
    HostSummary, Inputs, Pick, ReplayOptions, Scenario, check_fidelity, recorded_conf, target_of,
};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/host")
}

/// The scenarios: each trace (`SCENARIO.csv` or `.csv.gz`) and its name.
fn scenarios() -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(dir())
        .expect("tests/data/host")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            let s = name
                .strip_suffix(".csv.gz")
                .or_else(|| name.strip_suffix(".csv"))?;
            Some((s.to_string(), p))
        })
        .collect();
    v.sort();
    v
}

/// PyTorch's results for `scenario`: (file name, the JSON), by name.
fn results(scenario: &str) -> Vec<(String, Value)> {
    let prefix = format!("{scenario}.torch");
    let mut v: Vec<(String, Value)> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            (name.starts_with(&prefix)
                && name.ends_with(".json")
                && !name.ends_with(".fidelity.json"))
            .then_some((name, p))
        })
        .map(|(name, p)| {
            let text = std::fs::read_to_string(&p).unwrap();
            (name, serde_json::from_str(&text).unwrap())
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The release of a `torch.__version__` such as "2.15.0+cu132".
fn release(version: &str) -> TorchVersion {
    let mut parts = version.split('.');
    let xy = format!("{}.{}", parts.next().unwrap(), parts.next().unwrap());
    xy.parse()
        .unwrap_or_else(|e| panic!("torch {version}: {e:?}"))
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// The replay of `path` under the release and settings of `result`.
fn replayed(path: &Path, result: &Value) -> HostSummary {
    let v = release(result["torch"].as_str().unwrap());
    let conf = AllocConf::parse(result["conf"].as_str().unwrap(), v).unwrap();
    let trace = Inputs::new([path]).pick(Pick::One(None)).trace().unwrap();
    let run = Scenario::native(conf)
        .run(&trace, &ReplayOptions::default())
        .unwrap();
    run.host.expect("the trace has host requests")
}

#[test]
fn every_offload_scenario_replays_to_pytorchs_host_statistics() {
    let all = scenarios();
    assert!(
        all.len() >= 10,
        "{} scenarios in tests/data/host",
        all.len()
    );
    let mut wrong = Vec::new();
    let mut compared = 0;
    for (scenario, path) in &all {
        let rs = results(scenario);
        assert!(rs.len() >= 5, "{scenario}: {} results", rs.len());
        for (file, r) in &rs {
            let h = replayed(path, r);
            let st = &r["stats"];
            let v = release(r["torch"].as_str().unwrap());
            let mut figures = vec![
                (
                    "host_num_allocs",
                    "num_host_alloc",
                    h.host_num_allocs,
                    num(st, "num_host_alloc"),
                ),
                (
                    "host_peak_reserved_bytes",
                    "allocated_bytes.peak",
                    h.host_peak_reserved_bytes,
                    num(st, "allocated_bytes.peak"),
                ),
                (
                    "host_final_reserved_bytes",
                    "allocated_bytes.current",
                    h.host_final_reserved_bytes,
                    num(st, "allocated_bytes.current"),
                ),
                (
                    "host_peak_requested_bytes",
                    "requested.peak_bytes (the script's count)",
                    h.host_peak_requested_bytes,
                    num(&r["requested"], "peak_bytes"),
                ),
            ];
            if v >= TorchVersion::new(2, 13) {
                figures.push((
                    "host_peak_allocated_bytes",
                    "max active_bytes.current after a pin",
                    h.host_peak_allocated_bytes,
                    num(r, "max_active_bytes_current"),
                ));
            }
            for (ours, theirs, got, want) in figures {
                compared += 1;
                if got != want {
                    wrong.push(format!(
                        "{scenario} / {file} (torch {}, conf {:?}): {ours} = {got}, PyTorch's {theirs} = {want}",
                        r["torch"].as_str().unwrap(),
                        r["conf"].as_str().unwrap()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {compared} figures differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The recordings of `scenario` kept for fidelity whose settings `keep`
/// accepts (by the file's setting: "" for the defaults, "round1", "cached1").
fn recordings(scenario: &str, keep: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let prefix = format!("{scenario}.torch2.15");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.strip_prefix(&prefix)
                .and_then(|r| r.strip_suffix(".pickle.gz"))
                .is_some_and(|setting| keep(setting.trim_start_matches('.')))
        })
        .collect();
    v.sort();
    v
}

/// `vramlab fidelity` of each recording `keep` accepts: the disagreements.
fn fidelity_of(keep: &dyn Fn(&str) -> bool) -> (usize, Vec<String>) {
    let mut wrong = Vec::new();
    let mut n = 0;
    for (scenario, _) in scenarios() {
        for path in recordings(&scenario, keep) {
            n += 1;
            let traces = Inputs::new([&path])
                .pick(Pick::Each(None))
                .torch(TorchVersion::NEWEST)
                .read()
                .unwrap()
                .into_traces();
            for t in &traces {
                let v = target_of(t, None).rules;
                let conf = recorded_conf(t, v).unwrap().expect("recorded settings");
                let label = conf.to_string();
                let r = check_fidelity(t, conf).unwrap();
                if !r.is_exact() || r.host_decisions_expected == 0 {
                    wrong.push(format!(
                        "{} (settings {label:?}): {} of {} host decisions matched ({} made by the replay); first mismatch: {:?}",
                        path.file_name().unwrap().to_string_lossy(),
                        r.host_decisions_matched,
                        r.host_decisions_expected,
                        r.host_decisions_actual,
                        r.first_mismatch
                    ));
                }
            }
        }
    }
    (n, wrong)
}

#[test]
fn every_default_recording_has_its_host_decisions_replayed() {
    let (n, wrong) = fidelity_of(&|setting| setting.is_empty());
    assert!(n >= 10, "{n} recordings under the defaults");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Recordings under `pinned_max_round_threshold_mb:1` and
/// `pinned_max_cached_size_mb:1`: `vramlab fidelity` replays them under the
/// settings they record.
#[test]
fn every_recording_under_pinned_settings_has_its_host_decisions_replayed() {
    let (n, wrong) = fidelity_of(&|setting| !setting.is_empty());
    assert!(n >= 20, "{n} recordings under pinned settings");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
