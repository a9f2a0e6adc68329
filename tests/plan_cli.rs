//! `vramlab plan` on bundled traces: the plan lies between peak live and
//! PyTorch's default, and every policy is measured against both.

mod common;

use common::vramlab;

#[test]
fn the_plan_lies_between_peak_live_and_the_default() {
    for trace in [
        "workloads/data/gpt-small-train.csv",
        "workloads/data/llama-1b-train-seq1024.csv.gz",
        "tests/gate/baseline.torch2.15.pickle.gz",
    ] {
        let (code, out, err) = vramlab(&[
            "plan",
            trace,
            "--conf",
            "default",
            "--conf",
            "expandable_segments:True",
            "--json",
        ]);
        assert_eq!(code, 0, "{trace}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let live = v["peak_live_bytes"].as_u64().unwrap();
        let planned = v["planned_peak_bytes"].as_u64().unwrap();
        let default = v["policies"][0]["peak_reserved_bytes"].as_u64().unwrap();
        assert!(
            live <= planned && planned <= default,
            "{trace}: {live} {planned} {default}"
        );
        assert_eq!(
            v["policies"][0]["gap_to_bound_bytes"].as_u64().unwrap(),
            default - live,
            "{trace}"
        );
    }
}

#[test]
fn a_small_trace_is_searched_and_proved_optimal_at_the_bound() {
    // Five buffers whose optimum is peak live.
    let dir = std::env::temp_dir().join(format!("vramlab-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("small.csv");
    std::fs::write(
        &csv,
        "action,id,size,stream\nalloc,a,3072\nalloc,d,2048\nfree,d\nalloc,c,2048\nfree,a\nalloc,b,3072\nalloc,e,2048\nfree,c\nfree,b\nfree,e\n",
    )
    .unwrap();
    let (code, out, err) = vramlab(&["plan", csv.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["proved_optimal"], true, "{out}");
    assert_eq!(v["planned_peak_bytes"], v["peak_live_bytes"]);
    assert!(v["search"].is_object());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The recipes are replayed: priming the cache with the plan's peak lowers
/// the uneven-MoE step's peak below the defaults'.
#[test]
fn priming_with_the_plans_peak_is_replayed() {
    let (code, out, err) = vramlab(&[
        "plan",
        "tests/plan/moe-uneven.torch2.15.pickle.gz",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let recipes = v["recipes"].as_array().unwrap();
    assert_eq!(recipes.len(), 3);
    let primed = recipes[0]["peak_reserved_bytes"].as_u64().unwrap();
    let default = v["policies"][0]["peak_reserved_bytes"].as_u64().unwrap();
    assert!(primed < default, "{primed} {default}");
    assert!(
        recipes[1]["conf"]
            .as_str()
            .unwrap()
            .starts_with("roundup_power2_divisions:[")
    );
}
