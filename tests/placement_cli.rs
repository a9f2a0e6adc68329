//! `--placement` and the range of peak reserved under both address orders
//! (issue 15): pinned byte counts on a corpus trace whose prediction the
//! driver's order decides, and on one it does not.

mod common;
use common::vramlab;

/// Llama-3-8B inference: two equal free blocks meet a request, and under
/// PyTorch 2.11's rules (ties broken by address) the address order picks
/// the one that ends up needing a new segment.
const TIED: &str = "workloads/data/llama-3-8b-infer-eager-seq2048.csv.gz";
const SETTLED: &str = "workloads/data/gpt-small-train.csv";

fn replay_json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = vramlab(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("one JSON object")
}

#[test]
fn a_tie_the_order_decides_is_reported_as_a_range() {
    let v = replay_json(&["replay", TIED, "--json", "--torch-version", "2.11"]);
    assert_eq!(v["placement"], "driver");
    assert_eq!(v["peak_reserved_bytes"], 18_503_172_096u64);
    assert_eq!(v["other_placement"]["placement"], "ascending");
    assert_eq!(
        v["other_placement"]["peak_reserved_bytes"],
        17_966_301_184u64
    );
    assert_eq!(
        v["peak_reserved_range_bytes"],
        serde_json::json!([17_966_301_184u64, 18_503_172_096u64])
    );
    assert_eq!(v["placement_settled"], false);

    // The other order as the prediction: the same two numbers, swapped.
    let a = replay_json(&[
        "replay",
        TIED,
        "--json",
        "--placement",
        "ascending",
        "--torch-version",
        "2.11",
    ]);
    assert_eq!(a["peak_reserved_bytes"], 17_966_301_184u64);
    assert_eq!(
        a["other_placement"]["peak_reserved_bytes"],
        18_503_172_096u64
    );
    assert_eq!(
        a["peak_reserved_range_bytes"],
        v["peak_reserved_range_bytes"]
    );

    let (code, out, err) = vramlab(&["replay", TIED, "--torch-version", "2.11"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Peak reserved under default: 17.23 GiB with the H200 driver's order, 16.73 GiB with ascending addresses"),
        "{out}"
    );
}

#[test]
fn a_prediction_the_order_does_not_change_says_nothing_more() {
    let v = replay_json(&["replay", SETTLED, "--json"]);
    assert_eq!(v["placement_settled"], true);
    assert_eq!(v["peak_reserved_bytes"], 905_969_664u64);
    assert_eq!(
        v["peak_reserved_range_bytes"],
        serde_json::json!([905_969_664u64, 905_969_664u64])
    );
    let (code, out, err) = vramlab(&["replay", SETTLED]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("driver places"), "{out}");
}

#[test]
fn recommend_gives_the_range_of_the_settings_it_compares() {
    let (code, out, err) = vramlab(&[
        "recommend",
        TIED,
        "--capacity",
        "24GiB",
        "--json",
        "--torch-version",
        "2.11",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ranges = v["placement_ranges"].as_array().expect("placement_ranges");
    assert_eq!(ranges[0]["setting"], "default");
    assert_eq!(ranges[0]["peak_reserved_bytes"], 18_503_172_096u64);
    assert_eq!(ranges[0]["other_peak_reserved_bytes"], 17_966_301_184u64);
    assert!(
        v["placement_note"]
            .as_str()
            .is_some_and(|n| n.contains("default: 17.23 GiB")),
        "{v}"
    );
}

#[test]
fn an_unknown_placement_is_named() {
    let (code, _, err) = vramlab(&["replay", SETTLED, "--placement", "sideways"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown placement 'sideways' (known: driver, ascending)"),
        "{err}"
    );
}

#[test]
fn the_placement_check_can_be_left_out() {
    let v = replay_json(&[
        "replay",
        TIED,
        "--json",
        "--no-placement-check",
        "--torch-version",
        "2.11",
    ]);
    assert_eq!(v["peak_reserved_bytes"], 18_503_172_096u64);
    assert!(v.get("peak_reserved_range_bytes").is_none(), "{v}");
    let (code, out, err) = vramlab(&[
        "replay",
        TIED,
        "--no-placement-check",
        "--torch-version",
        "2.11",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("driver places"), "{out}");
}

/// From 2.13 PyTorch breaks ties between free blocks of one size by the age
/// of their segments, not their addresses (pytorch#183591; pinned against
/// its own allocator by the oracle): the same trace is settled, at the
/// peak the ascending order gave under 2.11.
#[test]
fn segment_age_ties_do_not_depend_on_the_address_order() {
    for order in ["driver", "ascending"] {
        let v = replay_json(&[
            "replay",
            TIED,
            "--json",
            "--torch-version",
            "2.15",
            "--placement",
            order,
        ]);
        assert_eq!(v["peak_reserved_bytes"], 17_966_301_184u64, "{order}");
        assert_eq!(v["placement_settled"], true, "{order}");
    }
}

/// What an upgrade does: each setting under each release, side by side,
/// and one line per setting (2.11 -> 2.15 takes the tie of this trace away).
#[test]
fn an_upgrade_is_shown_side_by_side() {
    let (code, out, err) = vramlab(&[
        "replay",
        TIED,
        "--torch-version",
        "2.11",
        "--torch-version",
        "2.15",
        "--gpu",
        "h100-80gb",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("default @ torch 2.11"), "{out}");
    assert!(
        out.contains(
            "upgrading torch 2.11 -> 2.15 under default: peak reserved 17.23 GiB -> 16.73 GiB (-512.00 MiB); fits still"
        ),
        "{out}"
    );
    let (code, _, err) = vramlab(&[
        "oom-point",
        TIED,
        "--torch-version",
        "2.11",
        "--torch-version",
        "2.15",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("takes one --torch-version"), "{err}");
}

/// `recommend` and `report` under two releases: each release's advice, the
/// upgrade's lines (the defaults' -512 MiB of the replay above), the JSON
/// rows, and the report's upgrade section; a third release or the same one
/// twice is refused.
#[test]
fn recommend_and_report_show_what_an_upgrade_does() {
    let both = ["--torch-version", "2.11", "--torch-version", "2.15"];
    let line = "upgrading torch 2.11 -> 2.15 under default: peak reserved 17.23 GiB -> 16.73 GiB (-512.00 MiB); fits still";
    let mut args = vec!["recommend", TIED, "--gpu", "h100-80gb"];
    args.extend(both);
    let (code, out, err) = vramlab(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("advice for PyTorch 2.11"), "{out}");
    assert!(out.contains("advice for PyTorch 2.15"), "{out}");
    assert!(
        out.contains("upgrading torch 2.11 -> 2.15: the advice stays (the defaults are fine)"),
        "{out}"
    );
    assert!(out.contains(line), "{out}");
    args.push("--json");
    let v = replay_json(&args);
    assert_eq!(v["from_torch"], "2.11");
    assert_eq!(v["to_torch"], "2.15");
    let rows = v["settings"].as_array().expect("settings");
    let default = rows
        .iter()
        .find(|r| r["setting"] == "default")
        .expect("the defaults under both releases");
    assert_eq!(default["peak_reserved_before_bytes"], 18_503_172_096u64);
    assert_eq!(default["peak_reserved_after_bytes"], 17_966_301_184u64);
    assert_eq!(default["fit"], "fits_still");
    assert_eq!(v["before"]["torch"], "2.11");
    assert_eq!(v["after"]["torch"], "2.15");

    let dir = std::env::temp_dir().join(format!("vramlab-upgrade-report-{}", std::process::id()));
    let out_dir = dir.to_str().expect("utf-8 temp dir");
    let mut args = vec!["report", TIED, "--gpu", "h100-80gb", "--out", out_dir];
    args.extend(both);
    let (code, out, err) = vramlab(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(line), "{out}");
    let html = std::fs::read_to_string(dir.join("index.html")).expect("index.html");
    assert!(html.contains("<h2 id=\"upgrade\">Upgrading PyTorch 2.11 → 2.15</h2>"));
    assert!(html.contains("<table id=\"upgrade-settings\">"));
    std::fs::remove_dir_all(&dir).ok();

    let (code, _, err) = vramlab(&[
        "recommend",
        TIED,
        "--gpu",
        "h100-80gb",
        "--torch-version",
        "2.11",
        "--torch-version",
        "2.13",
        "--torch-version",
        "2.15",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("compares two releases at most"), "{err}");
    let (code, _, err) = vramlab(&[
        "report",
        TIED,
        "--out",
        out_dir,
        "--torch-version",
        "2.15",
        "--torch-version",
        "2.15",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is given twice"), "{err}");
}
