//! `vramlab explain` and `vramlab diff` on the command line: the tables,
//! the JSON, the errors, and the report's "why" section.

mod common;

use common::vramlab;

const SPLIT: &str = "tests/explain/pinned-split.csv";

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = vramlab(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("json")
}

#[test]
fn explain_names_the_block_that_pins_the_cached_segment() {
    let (code, out, err) = vramlab(&["explain", SPLIT]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("peak reserved 232.00 MiB after event 7"),
        "{out}"
    );
    assert!(out.contains("pinned      72.00 MiB"), "{out}");
    assert!(out.contains("releasable  20.00 MiB"), "{out}");
    let row = out
        .lines()
        .find(|l| l.starts_with("4 "))
        .unwrap_or_else(|| panic!("no culprit row for id 4: {out}"));
    for cell in ["30.00 MiB", "70.00 MiB", "152.00 MiB", "80.00 MiB less"] {
        assert!(row.contains(cell), "{row}");
    }
    assert!(
        !out.lines().any(|l| l.starts_with("0 ")),
        "the decoy is not named: {out}"
    );
    assert!(
        out.contains("expandable_segments:True     142.00 MiB"),
        "{out}"
    );
}

#[test]
fn explain_json_has_the_documented_fields() {
    let v = json(&["explain", SPLIT, "--json", "--top", "1"]);
    assert_eq!(v["peak_reserved_bytes"], 232u64 << 20);
    assert_eq!(v["waste_at_peak_bytes"], (92u64 << 20) - 1024);
    assert_eq!(v["waste"]["rounding_bytes"], 24);
    assert_eq!(v["waste"]["pinned_bytes"], (72u64 << 20) - 1024);
    assert_eq!(v["waste"]["releasable_bytes"], 20u64 << 20);
    let c = &v["culprits"][0];
    assert_eq!(c["id"], 4);
    assert_eq!(c["size_bytes"], 30u64 << 20);
    assert_eq!(c["pinned_bytes"], 70u64 << 20);
    assert_eq!(c["frame"], serde_json::Value::Null);
    assert_eq!(c["peak_reserved_without_bytes"], 152u64 << 20);
    let none = json(&["explain", SPLIT, "--json", "--top", "0", "--no-fixes"]);
    assert_eq!(none["culprits"].as_array().unwrap().len(), 0);
    // 4, and 1: without the 1000-byte block no 2 MiB small segment is made
    // (the peak 2 MiB lower).
    assert_eq!(none["culprits_found"], 2);
    assert_eq!(none["fixes"].as_array().unwrap().len(), 0);
}

#[test]
fn explain_refuses_two_settings_and_diff_needs_two_runs() {
    let (code, _, err) = vramlab(&[
        "explain",
        SPLIT,
        "--conf",
        "",
        "--conf",
        "expandable_segments:True",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("explain explains one setting"), "{err}");
    let (code, _, err) = vramlab(&["diff", SPLIT]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("give a second trace"), "{err}");
    let (code, _, err) = vramlab(&[
        "diff", SPLIT, "--conf", "a:1", "--conf", "b:2", "--conf", "c:3",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at most two --conf (3 given)"), "{err}");
    let (code, _, err) = vramlab(&["diff", SPLIT, "tests/explain/no-such.csv"]);
    assert_ne!(code, 0);
    assert!(err.contains("no-such.csv"), "{err}");
}

#[test]
fn diff_under_two_settings_adds_up() {
    let v = json(&[
        "diff",
        SPLIT,
        "--conf",
        "",
        "--conf",
        "expandable_segments:True",
        "--json",
    ]);
    assert_eq!(v["a"]["peak_reserved_bytes"], 232u64 << 20);
    assert_eq!(v["b"]["peak_reserved_bytes"], 142u64 << 20);
    assert_eq!(v["reserved_delta_bytes"], -(90i64 << 20));
    assert_eq!(v["allocated_delta_bytes"], 0);
    assert_eq!(v["waste_delta_bytes"], -(90i64 << 20));
    assert_eq!(v["grouped_by"], "size");
    let groups = v["groups"].as_array().unwrap();
    let a: u64 = groups.iter().map(|g| g["a_bytes"].as_u64().unwrap()).sum();
    assert_eq!(a, v["a"]["allocated_at_peak_bytes"].as_u64().unwrap());
    let (code, out, err) = vramlab(&[
        "diff",
        SPLIT,
        "--conf",
        "",
        "--conf",
        "expandable_segments:True",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("reserved -90.00 MiB = allocated 0 B + waste -90.00 MiB"),
        "{out}"
    );
}

#[test]
fn diff_of_two_traces() {
    let v = json(&[
        "diff",
        SPLIT,
        "tests/explain/pinned-split-without-4.csv",
        "--json",
    ]);
    assert_eq!(v["reserved_delta_bytes"], -(80i64 << 20));
    let sum: i64 = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["delta_bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(sum, v["allocated_delta_bytes"].as_i64().unwrap());
}

#[test]
fn the_report_has_a_why_section() {
    let dir = std::env::temp_dir().join(format!("vramlab-why-report-{}", std::process::id()));
    let d = dir.to_str().expect("utf-8");
    let (code, _, err) = vramlab(&["report", SPLIT, "--out", d, "--plots", "1"]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(dir.join("index.html")).expect("index.html");
    assert!(html.contains("<h2 id=\"why\">"), "no why section");
    assert!(html.contains("<table id=\"culprits\">"));
    assert!(
        html.contains("<tr><td>4</td><td>30.0 MiB</td><td>70.0 MiB</td>"),
        "{html}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// PyTorch's own allocator agrees: 2.11 reserves 12,614 MiB on this trace,
/// 2.15 12,518 MiB (docs/results/upgrade-llama-1b-torch2.11-vs-2.15.json,
/// `vramlab oracle TRACE --torch R --torch-version R --conf default --json`).
#[test]
fn diff_under_two_releases_shows_what_an_upgrade_does() {
    let v = json(&[
        "diff",
        "workloads/data/llama-1b-train-seq1024.csv.gz",
        "--torch-version",
        "2.11",
        "--torch-version",
        "2.15",
        "--json",
    ]);
    assert_eq!(v["a"]["torch_version"], "2.11");
    assert_eq!(v["b"]["torch_version"], "2.15");
    assert_eq!(v["reserved_delta_bytes"], -(96i64 << 20));
    assert_eq!(
        v["reserved_delta_bytes"].as_i64().unwrap(),
        v["allocated_delta_bytes"].as_i64().unwrap() + v["waste_delta_bytes"].as_i64().unwrap()
    );
    let (code, _, err) = vramlab(&[
        "diff",
        SPLIT,
        "--torch-version",
        "2.9",
        "--torch-version",
        "2.11",
        "--torch-version",
        "2.15",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("at most two --torch-version (3 given)"),
        "{err}"
    );
}

/// On a card too small, explain the state the error message describes:
/// the 80 MiB request fails with 72 MiB reserved but unallocated, 70 MiB
/// of it beside allocation 4; without 4 (or with expandable segments) the
/// trace fits.
#[test]
fn explain_at_an_oom_names_what_keeps_the_failing_request_out() {
    let v = json(&["explain", SPLIT, "--capacity", "150MiB", "--json"]);
    assert_eq!(v["at_failure"], true);
    assert_eq!(v["failed_request_bytes"], 80u64 << 20);
    assert_eq!(v["peak_event_index"], 6);
    assert_eq!(v["waste_at_peak_bytes"], (72u64 << 20) - 1024);
    assert!(
        v["oom"]
            .as_str()
            .unwrap()
            .contains("72.00 MiB is reserved by PyTorch but unallocated")
    );
    let c = &v["culprits"][0];
    assert_eq!(c["id"], 4);
    assert_eq!(c["pinned_bytes"], 70u64 << 20);
    assert_eq!(c["fits_without"], true);
    let es = v["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["setting"] == "expandable_segments:True")
        .unwrap();
    assert_eq!(es["oom"], false);
    let (code, out, err) = vramlab(&["explain", SPLIT, "--capacity", "150MiB"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("out of memory at event 7, a request of 80.00 MiB"),
        "{out}"
    );
    assert!(out.contains("fits without"), "{out}");
}
