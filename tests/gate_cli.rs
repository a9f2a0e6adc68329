//! `vramlab gate` on three recordings of workloads/record/examples/ci_step.py
//! (PyTorch 2.15 on the fake GPU, tests/gate/): the baseline, the same step
//! with one 256 MiB buffer held across its peak (`--extra-mib 256`), and the
//! step recorded again.

mod common;

use common::vramlab;

const BASE: &str = "tests/gate/baseline.torch2.15.pickle.gz";
const PLUS: &str = "tests/gate/candidate-plus-256mib.torch2.15.pickle.gz";
const AGAIN: &str = "tests/gate/rerecorded.torch2.15.pickle.gz";

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn an_added_buffer_held_across_the_peak_fails_and_is_named_by_its_line() {
    let dir = std::env::temp_dir().join(format!("vramlab-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let md = dir.join("summary.md");
    let junit = dir.join("gate.xml");
    let (code, out, err) = vramlab(&[
        "gate",
        BASE,
        PLUS,
        "--markdown",
        md.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("+256.00 MiB examples/ci_step.py:27 in main"),
        "{out}"
    );
    assert!(
        out.contains("peak reserved grew by 256.00 MiB (more than 2%)"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("FAIL"), "{out}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.starts_with("### vramlab memory gate: ❌ FAIL"), "{md}");
    assert!(
        md.contains("| `default` | 362.00 MiB | 618.00 MiB | +256.00 MiB (+70.7%) |"),
        "{md}"
    );
    assert!(
        md.contains("- `+256.00 MiB examples/ci_step.py:27 in main`"),
        "{md}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"1\" failures=\"1\""), "{xml}");
    assert!(
        xml.contains("<failure message=\"peak reserved grew by 256.00 MiB (more than 2%)\">"),
        "{xml}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_same_step_recorded_again_passes() {
    let (code, out, err) = vramlab(&["gate", BASE, AGAIN, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["passed"], true);
    assert_eq!(v["rows"][0]["reserved_delta_bytes"], 0);
    assert_eq!(v["rows"][0]["baseline_peak_reserved_bytes"], 362u64 << 20);
}

#[test]
fn the_limit_can_be_a_size_and_each_setting_is_a_row() {
    let (code, out, err) = vramlab(&[
        "gate",
        BASE,
        PLUS,
        "--max-increase",
        "300MiB",
        "--conf",
        "default",
        "--conf",
        "expandable_segments:True",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter()
            .all(|r| r["passed"] == true && r["limit_bytes"] == 300u64 << 20)
    );
    let (code, _, err) = vramlab(&["gate", BASE, PLUS, "--max-increase", "two"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("'two' is not a percentage (2%) or a size (256MiB)"),
        "{err}"
    );
}

#[test]
fn a_candidate_that_no_longer_fits_the_card_fails() {
    let (code, out, _) = vramlab(&[
        "gate",
        BASE,
        PLUS,
        "--max-increase",
        "1GiB",
        "--capacity",
        "400MiB",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("it no longer fits on the card"), "{out}");
}

/// Writes a two-rank job in `dir`: rank 0's trace `rank0`, rank 1's
/// `rank1` (the same file: recorded identical).
fn job(dir: &std::path::Path, rank0: &str, rank1: &str) {
    job_with_outside(dir, rank0, rank1, 0);
}

/// [`job`], with `outside` bytes per rank outside the allocator.
fn job_with_outside(dir: &std::path::Path, rank0: &str, rank1: &str, outside: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join(rank0), dir.join("rank0.pickle.gz")).unwrap();
    let rank1_entry = if rank0 == rank1 {
        r#"{"rank": 1, "same_as": 0, "basis": "recorded"}"#.to_string()
    } else {
        std::fs::copy(root.join(rank1), dir.join("rank1.pickle.gz")).unwrap();
        r#"{"rank": 1, "trace": "rank1.pickle.gz"}"#.to_string()
    };
    std::fs::write(
        dir.join("job.json"),
        format!(
            r#"{{"vramlab_job": 1, "world_size": 2, "ranks": [{{"rank": 0, "trace": "rank0.pickle.gz"}}, {rank1_entry}], "outside_allocator": {{"bytes": {outside}, "what": "test"}}}}"#
        ),
    )
    .unwrap();
}

/// Two jobs are gated rank by rank: the rank whose step grew fails and is
/// named, the rank whose step did not passes.
#[test]
fn two_jobs_are_gated_rank_by_rank() {
    let dir = std::env::temp_dir().join(format!("vramlab-gate-jobs-{}", std::process::id()));
    let (base, cand) = (dir.join("base"), dir.join("cand"));
    job(&base, BASE, BASE);
    job(&cand, PLUS, AGAIN);
    let (code, out, err) = vramlab(&[
        "gate",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let v = json(&out);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(rows[0]["ranks"], "rank 0");
    assert_eq!(rows[0]["passed"], false);
    assert_eq!(rows[0]["reserved_delta_bytes"], 256 << 20);
    assert_eq!(rows[1]["ranks"], "rank 1");
    assert_eq!(rows[1]["passed"], true);
    // A job against a single trace is refused, naming both.
    let (code, _, err) = vramlab(&["gate", base.to_str().unwrap(), BASE]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is a multi-rank job but"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each job's memory outside the allocator counts for its own smallest
/// card: the same step with 20 GiB more outside the allocator per rank
/// needs a larger card, though the allocator's peak did not change.
#[test]
fn each_job_counts_its_own_memory_outside_the_allocator() {
    let dir = std::env::temp_dir().join(format!("vramlab-gate-outside-{}", std::process::id()));
    let (base, cand) = (dir.join("base"), dir.join("cand"));
    job_with_outside(&base, BASE, BASE, 0);
    job_with_outside(&cand, BASE, BASE, 20 << 30);
    let (code, out, err) = vramlab(&[
        "gate",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let v = json(&out);
    let row = &v["rows"][0];
    assert_eq!(row["reserved_delta_bytes"], 0);
    assert_ne!(
        row["baseline_smallest_card"], row["candidate_smallest_card"],
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
