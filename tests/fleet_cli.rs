//! `vramlab sweep --plan` and `vramlab run-case`: each planned case,
//! replayed alone, gives the row the whole sweep gives.

mod common;

use common::vramlab;

#[test]
fn each_planned_case_replayed_alone_is_the_sweeps_row() {
    let dir = std::env::temp_dir().join(format!("vramlab-fleet-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let grid = dir.join("grid.txt");
    std::fs::write(
        &grid,
        "default\nexpandable_segments:True\npolicy=bfc allow_growth:true\nfraction=0.9 garbage_collection_threshold:0.8\n",
    )
    .unwrap();
    let plan = dir.join("plan.json");
    let rows = dir.join("rows.json");
    let traces = [
        "workloads/data/gpt-small-train.csv",
        "tests/pools/snapshots/serving-warmup-midrun.torch2.15.pickle",
    ];
    let mut args = vec!["sweep"];
    args.extend(traces);
    args.extend(["--grid", grid.to_str().unwrap(), "--capacity", "8GiB"]);
    let mut planned = args.clone();
    planned.extend(["--plan", plan.to_str().unwrap()]);
    let (code, _, err) = vramlab(&planned);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("8 cases: 2 traces x 4 settings"), "{err}");
    let mut swept = args.clone();
    swept.extend(["--json", rows.to_str().unwrap(), "--quiet"]);
    let (code, _, err) = vramlab(&swept);
    assert_eq!(code, 0, "{err}");
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&rows).unwrap()).unwrap();
    assert_eq!(cases.len(), rows.len());
    for (case, row) in cases.iter().zip(&rows) {
        let (code, out, err) = vramlab(&["run-case", &case.to_string()]);
        assert_eq!(code, 0, "{err}");
        let got: serde_json::Value = serde_json::from_str(&out).unwrap();
        // A case alone cannot know which other rows match it: `same_as`
        // is the whole sweep's (vramlab.sweep_on sets it over the rows).
        assert_eq!(got["same_as"], "", "case {case}");
        let mut whole = row.clone();
        whole["same_as"] = "".into();
        assert_eq!(got, whole, "case {case}");
    }
    // The mid-run snapshot starts as the whole sweep starts it.
    assert_eq!(cases[5]["start"], "fresh");
    // A case file by @FILE; a broken case is a clear error.
    let one = dir.join("case.json");
    std::fs::write(&one, cases[0].to_string()).unwrap();
    let (code, _, err) = vramlab(&["run-case", &format!("@{}", one.display())]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = vramlab(&["run-case", "{\"index\": 0}"]);
    assert_eq!(code, 2);
    assert!(err.contains("the case is not a sweep case"), "{err}");
    let mut bad = cases[0].clone();
    bad["schema"] = serde_json::json!(9);
    let (code, _, err) = vramlab(&["run-case", &bad.to_string()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("schema 9 (this vramlab reads schema 1)"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
