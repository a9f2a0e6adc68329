//! `vramlab colocate` on the trainer and rollout of tests/colocate/: an
//! 80 MiB device where the trainer's cached activations leave the rollout's
//! 28 MiB KV cache no room (PyTorch's rules: one segment per request above
//! 10 MiB, cached when freed), unless the trainer empties its cache first.

mod common;

use common::vramlab;

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn colocate(trainer: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "colocate",
        trainer,
        "tests/colocate/rollout.csv",
        "--name",
        "trainer",
        "--name",
        "rollout",
        "--capacity",
        "80MiB",
    ];
    args.extend_from_slice(extra);
    vramlab(&args)
}

#[test]
fn the_rollout_runs_out_where_the_trainers_cache_holds_the_memory() {
    let (code, out, err) = colocate("tests/colocate/trainer.csv", &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["first_oom"], serde_json::json!(["rollout", 0]));
    assert_eq!(v["tenants"][0]["peak_reserved_bytes"], 60u64 << 20);
    assert_eq!(v["tenants"][1]["num_alloc_retries"], 1);
    // A rollout that catches its OOM goes on and fails again at its second
    // generation: two retries, the first OOM still at its event 0.
    let (code, out, err) = colocate(
        "tests/colocate/trainer.csv",
        &["--continue-on-oom", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["tenants"][1]["num_alloc_retries"], 2);
    assert_eq!(v["tenants"][1]["oom_event"], 0);
    let (code, out, err) = colocate("tests/colocate/trainer-empty-cache.csv", &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["first_oom"], serde_json::Value::Null);
    assert_eq!(v["device_peak_bytes"], 78u64 << 20);
    assert_eq!(v["tenants"][1]["peak_reserved_bytes"], 28u64 << 20);
}

#[test]
fn a_schedule_that_names_no_tenant_is_refused_with_the_names() {
    let (code, _, err) = colocate(
        "tests/colocate/trainer.csv",
        &["--schedule", "trainer,critic"],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains(
            "--schedule: 'critic' names no tenant (the tenants: trainer, rollout, or 0 to 1)"
        ),
        "{err}"
    );
    let (code, _, err) = vramlab(&["colocate", "tests/colocate/rollout.csv"]);
    assert_ne!(code, 0);
    assert!(err.contains("colocate needs the card they share"), "{err}");
}

/// Every job of tests/colocate/jobs (engine pools that sleep and wake,
/// memory outside PyTorch, engines sized by utilization, the searches)
/// replays to the figures PyTorch's own processes gave on one shared fake
/// GPU: each tenant's peak reserved bytes, cudaMalloc calls, retries and
/// first OOM, the device's used memory after every step, and the searched
/// utilization (the judge's answers, committed in
/// docs/results/colocation/oracle-*.json by scripts/colocate_judged.sh).
#[test]
fn every_job_replays_to_the_judges_figures() {
    let mut jobs: Vec<_> = std::fs::read_dir("tests/colocate/jobs")
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    jobs.sort();
    assert!(jobs.len() >= 16, "{} jobs", jobs.len());
    for job in jobs {
        let name = job.file_stem().unwrap().to_str().unwrap().to_string();
        let judged = std::fs::read_to_string(format!("docs/results/colocation/oracle-{name}.json"))
            .unwrap_or_else(|e| panic!("{name}: no judged result ({e})"));
        let judged = json(&judged);
        let oracle = &judged["oracle"];
        // The judge lets a process that ran out of memory go on.
        let (code, out, err) = vramlab(&[
            "colocate",
            job.to_str().unwrap(),
            "--continue-on-oom",
            "--json",
        ]);
        assert_eq!(code, 0, "{name}: {err}");
        let v = json(&out);
        let tenants = v["tenants"].as_array().unwrap();
        for (ours, theirs) in tenants.iter().zip(oracle["tenants"].as_array().unwrap()) {
            let who = format!("{name}/{}", ours["name"]);
            assert_eq!(
                ours["peak_reserved_bytes"], theirs["torch_peak_reserved_bytes"],
                "{who}"
            );
            assert_eq!(
                ours["num_device_alloc"], theirs["torch_num_device_alloc"],
                "{who}"
            );
            assert_eq!(
                ours["num_alloc_retries"], theirs["torch_num_alloc_retries"],
                "{who}"
            );
            assert_eq!(ours["oom_event"], theirs["torch_oom_event"], "{who}");
        }
        let steps = v["steps"].as_array().unwrap();
        let torch_steps = oracle["steps"].as_array().unwrap();
        assert_eq!(steps.len(), torch_steps.len(), "{name}: steps");
        for (k, (ours, theirs)) in steps.iter().zip(torch_steps).enumerate() {
            assert_eq!(ours["tenant"], theirs["tenant"], "{name}: step {k}");
            assert_eq!(
                ours["device_used_bytes"], theirs["torch_device_used_bytes"],
                "{name}: step {k}"
            );
        }
        if let Some(s) = oracle.get("search") {
            assert_eq!(
                (
                    &v["search"]["largest_fitting"],
                    &v["search"]["smallest_with_room"]
                ),
                (
                    &s["torch"]["largest_fitting"],
                    &s["torch"]["smallest_with_room"]
                ),
                "{name}: search"
            );
        }
    }
}

#[test]
fn a_wake_that_finds_the_trainers_cache_is_the_first_oom_and_is_drawn() {
    let dir = std::env::temp_dir().join(format!("vramlab-colocate-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("hybrid");
    let (code, out, err) = vramlab(&[
        "colocate",
        "tests/colocate/jobs/hybrid.json",
        "--plot",
        base.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("hybrid runs out of memory first, at its event 20 (phase wake): out of memory: waking engine pool"),
        "{out}"
    );
    let svg = std::fs::read_to_string(base.with_extension("svg")).unwrap();
    assert!(svg.contains("OOM: hybrid"), "the plot marks the OOM");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn manifests_and_utilizations_are_checked() {
    let dir = std::env::temp_dir().join(format!("vramlab-colocate-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"capacity": "1GiB", "tenants": [{"trace": "x.csv", "util": 0.5}]}"#,
    )
    .unwrap();
    let (code, _, err) = vramlab(&["colocate", bad.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("not a colocation manifest") && err.contains("unknown field `util`"),
        "{err}"
    );
    let (code, _, err) = colocate("tests/colocate/trainer.csv", &["--kv-util", "rollout=1.5"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("utilization 1.5 is not a share of the device"),
        "{err}"
    );
    let (code, _, err) = colocate("tests/colocate/trainer.csv", &["--kv-util", "critic=0.5"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("no tenant is named 'critic' (the tenants: trainer, rollout)"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A recording's `record_function` scopes are its phases, and an engine
/// pool's `vramlab.pool_sleep` / `vramlab.pool_wake` scopes its sleeps and
/// wakes, in their places among the events (the GRPO step of
/// workloads/record/examples/grpo_step.py, recorded with PyTorch 2.15).
#[test]
fn a_recordings_scopes_are_its_phases_and_its_engines_sleeps() {
    let dir = std::env::temp_dir().join(format!("vramlab-grpo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("grpo.csv");
    let (code, _, err) = vramlab(&[
        "convert",
        "tests/colocate/recorded/grpo-one.torch2.15.pickle.gz",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("# vramlab trace v4\n"), "{}", &text[..200]);
    assert!(text.contains("# pool.0: engine 0,1\n"));
    assert!(text.contains("# phase: kv_cache\n"));
    assert_eq!(
        text.matches("# phase: sleep\npool_sleep,0,,\n# phase: train\n")
            .count(),
        2
    );
    assert_eq!(
        text.matches("# phase: wake\npool_wake,0,,\n# phase: sync\n")
            .count(),
        2
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--what-if` replays the remedies on the whole job. On the hybrid job the
/// first two answers are the judge's (`hybrid`, `hybrid-es`: the wake, event
/// 20, finds the trainer's cache either way); emptying the cache at every
/// phase end lets the engine wake.
#[test]
fn what_if_replays_the_remedies_on_the_whole_job() {
    let (code, out, err) = vramlab(&[
        "colocate",
        "tests/colocate/jobs/hybrid.json",
        "--what-if",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let rows = v["what_if"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["variant"] == name)
            .unwrap_or_else(|| panic!("no row {name}: {rows:?}"))
    };
    assert_eq!(
        row("as given")["first_oom"],
        serde_json::json!(["hybrid", 20])
    );
    assert_eq!(
        row("hybrid: expandable_segments:True")["first_oom"],
        serde_json::json!(["hybrid", 20])
    );
    assert_eq!(
        row("hybrid: empty_cache() at every phase end")["first_oom"],
        serde_json::Value::Null
    );
}
