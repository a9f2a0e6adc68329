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
