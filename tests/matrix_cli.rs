//! `vramlab matrix`, `vramlab concat` and the per-phase readout of
//! `vramlab stats`, end to end (issue 16).

mod common;
use common::vramlab;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("matrix-cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = vramlab(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

/// Every cell is what `gen` + `replay` and `oom-point` say of that variant
/// under that setting; the baseline saves nothing; CSV, JSON and the plot
/// are written.
#[test]
fn matrix_cells_equal_replays_of_the_generated_traces() {
    let (csv, js, plot) = (tmp("m.csv"), tmp("m.json"), tmp("plot"));
    let (code, out, err) = vramlab(&[
        "matrix",
        "sd15",
        "--resolution",
        "512",
        "--capacity",
        "3GiB",
        "--conf",
        "default",
        "--conf",
        "expandable_segments:True",
        "--csv",
        csv.to_str().unwrap(),
        "--json",
        js.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("baseline: --precision fp16 --attention flash under default"),
        "{out}"
    );
    assert!(plot.join("matrix.png").exists() && plot.join("matrix.svg").exists());
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&js).unwrap()).unwrap();
    let cells = m["cells"].as_array().unwrap();
    // Every recorded variant of sd15 (at least precision x attention), two
    // settings each.
    let rows = m["variants"].as_array().unwrap().len();
    assert!(rows >= 3, "{m}");
    assert_eq!(cells.len(), rows * 2);
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap().lines().count(),
        1 + rows * 2
    );
    for c in cells {
        // The variant as `gen` options (a parenthesised remark, such as a
        // tile grid, is not an option).
        let variant: Vec<&str> = c["variant"]
            .as_str()
            .unwrap()
            .split(' ')
            .filter(|w| !w.starts_with('(') && !w.ends_with(')'))
            .collect();
        let trace = tmp("cell.csv");
        let mut gen_args = vec![
            "gen",
            "sd15",
            "--resolution",
            "512",
            "-o",
            trace.to_str().unwrap(),
        ];
        gen_args.extend(&variant);
        let (code, _, err) = vramlab(&gen_args);
        assert_eq!(code, 0, "{err}");
        let setting = c["setting"].as_str().unwrap();
        let r = json(&[
            "replay",
            trace.to_str().unwrap(),
            "--conf",
            setting,
            "--json",
        ]);
        assert_eq!(c["peak_reserved_bytes"], r["peak_reserved_bytes"], "{c}");
        let p = json(&[
            "oom-point",
            trace.to_str().unwrap(),
            "--conf",
            setting,
            "--json",
        ]);
        let p = if p.is_array() { p[0].clone() } else { p };
        assert_eq!(c["min_capacity_bytes"], p["min_capacity"], "{c} vs {p}");
        assert_eq!(
            c["fits"].as_bool().unwrap(),
            c["min_capacity_bytes"].as_u64().unwrap() <= 3 << 30
        );
    }
    let base = cells
        .iter()
        .find(|c| c["variant"] == m["baseline_variant"] && c["setting"] == "default")
        .unwrap();
    assert_eq!(base["saved_vs_baseline"], 0.0);
}

#[test]
fn matrix_errors_name_the_problem() {
    let (code, _, err) = vramlab(&["matrix", "no-such-model"]);
    assert_ne!(code, 0);
    assert!(err.contains("unknown workload 'no-such-model'"), "{err}");
    let (code, _, err) = vramlab(&["matrix", "sd15", "--conf", "max_split_size_mb:abc"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--conf \"max_split_size_mb:abc\""), "{err}");
}

/// Job A then job B: A's leftovers stay live under B; the marks say which
/// job each phase belongs to, and `stats` prints them.
#[test]
fn concat_joins_two_jobs_and_stats_reads_their_phases() {
    let out = tmp("ab.csv");
    let (code, _, err) = vramlab(&[
        "concat",
        "workloads/data/gpt-small-train-seq128.csv.gz",
        "workloads/data/gpt-small-train-seq256.csv.gz",
        "--empty-cache-between",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let s = json(&["stats", out.to_str().unwrap(), "--json"]);
    let s = &s[0];
    let a = json(&[
        "stats",
        "workloads/data/gpt-small-train-seq128.csv.gz",
        "--json",
    ]);
    let b = json(&[
        "stats",
        "workloads/data/gpt-small-train-seq256.csv.gz",
        "--json",
    ]);
    let events = |v: &serde_json::Value| v[0]["events"].as_u64().unwrap();
    assert_eq!(s["events"].as_u64().unwrap(), events(&a) + 1 + events(&b));
    assert_eq!(s["empty_cache"].as_u64().unwrap(), 1);
    let labels: Vec<&str> = s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert!(labels.first().unwrap().starts_with("A: "), "{labels:?}");
    assert!(labels.contains(&"empty_cache()"), "{labels:?}");
    assert!(labels.last().unwrap().starts_with("B: "), "{labels:?}");
    let (code, text, _) = vramlab(&["stats", out.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(text.contains("B: step 0"), "{text}");
    // The phases partition the events.
    let sum: u64 = s["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["events"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, s["events"].as_u64().unwrap());
}
