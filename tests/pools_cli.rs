//! Private pools on the command line: `stats`, `replay` and `report` show
//! each pool of PyTorch's own snapshot of a serving warm-up (a mid-run
//! recording whose graph pool holds 4 segments at the first entry).

mod common;

use common::vramlab;

const SNAPSHOT: &str = "tests/pools/snapshots/serving-warmup-midrun.torch2.15.pickle";

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = vramlab(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("json")
}

#[test]
fn stats_lists_each_pool() {
    let v = json(&["stats", SNAPSHOT, "--json"]);
    let pools = v[0]["pools"].as_array().expect("pools[]");
    assert_eq!(pools.len(), 2);
    assert_eq!(pools[1]["kind"], "graph");
    assert_eq!(pools[1]["id"], serde_json::json!([0, 1]));
    assert_eq!(pools[1]["at_start"]["segments"], 4);
    assert_eq!(pools[1]["at_start"]["reserved_bytes"], 41943040);
    assert_eq!(pools[1]["at_end"]["segments"], 4);
}

#[test]
fn replay_shows_each_pool_at_the_peak() {
    let v = json(&["replay", SNAPSHOT, "--json"]);
    let pools = v["pools"].as_array().expect("pools[]");
    // Recorded start: the graph pool's 4 recorded segments.
    assert_eq!(pools[1]["at_peak"]["reserved_bytes"], 41943040);
    let (code, out, err) = vramlab(&["replay", SNAPSHOT]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("graph pool (0,1) at peak"), "{out}");
}

#[test]
fn the_report_has_a_pool_table() {
    let dir = std::env::temp_dir().join(format!("vramlab-pools-report-{}", std::process::id()));
    let d = dir.to_str().expect("utf-8");
    let (code, _, err) = vramlab(&["report", SNAPSHOT, "--out", d, "--gpu", "h100-80gb"]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(dir.join("index.html")).expect("index.html");
    assert!(html.contains("<table id=\"pools\">"));
    assert!(html.contains("<td>graph (0,1)</td>"));
    // One column per setting shown (identical ones are folded into one).
    let headers = html
        .split("<table id=\"settings\">")
        .nth(1)
        .unwrap()
        .split("</tbody>")
        .next()
        .unwrap()
        .matches("<tr")
        .count()
        - 1;
    let pools = html
        .split("<table id=\"pools\">")
        .nth(1)
        .unwrap()
        .split("</tr>")
        .nth(1)
        .unwrap();
    assert_eq!(pools.matches("<td>").count(), 3 + headers, "{pools}");
    let _ = std::fs::remove_dir_all(&dir);
}
