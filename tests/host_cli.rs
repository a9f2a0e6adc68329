//! Pinned host memory through the command line: a 2.15 snapshot with
//! `host_traces` (recorded on the fake device by
//! scripts/oracle_experiments/host_snapshot.py; PyTorch's own
//! `host_memory_stats()` of that run in host.torch2.15.stats.json) replayed,
//! checked for fidelity and advised on; native traces with host rows read,
//! written and refused where they are wrong.

mod common;

use common::vramlab;

const SNAP: &str = "tests/releases/host.torch2.15.pickle";

/// A fresh folder of this test process (`tag` keeps tests apart).
fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vramlab-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// PyTorch's own figure `key` of the recorded run.
fn torch_stat(key: &str) -> u64 {
    let text = std::fs::read_to_string("tests/releases/host.torch2.15.stats.json").unwrap();
    json(&text)["host_memory_stats"][key].as_u64().unwrap()
}

#[test]
fn a_snapshots_host_traces_replay_as_pytorchs_host_allocator_counted_them() {
    let (code, out, err) = vramlab(&["replay", SNAP, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let row = v.get(0).unwrap_or(&v);
    assert_eq!(row["host_num_allocs"], torch_stat("num_host_alloc"));
    assert_eq!(
        row["host_peak_reserved_bytes"],
        torch_stat("allocated_bytes.peak")
    );
    assert_eq!(
        row["host_final_reserved_bytes"],
        torch_stat("allocated_bytes.current")
    );
    assert_eq!(row["host_allocs"], 7);
    assert!(err.contains("their sizes are PyTorch's blocks"), "{err}");
}

#[test]
fn fidelity_counts_the_host_allocators_decisions() {
    let (code, out, err) = vramlab(&["fidelity", SNAP, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["exact"], true, "{out}");
    let dev = &v["devices"][0];
    assert_eq!(dev["host_allocs"], 7);
    assert_eq!(dev["host_decisions_expected"], 6);
    assert_eq!(dev["host_decisions_matched"], 6);
    assert_eq!(dev["host_decisions_actual"], 6);
}

/// A snapshot of pinned memory alone (no device allocation) is read: the
/// host events are device 0's trace.
#[test]
fn a_trace_of_host_memory_alone_is_replayed() {
    let dir = scratch("host");
    let csv = dir.join("host.csv");
    std::fs::write(
        &csv,
        "# vramlab trace v3\n# framework: torch 2.15\naction,id,size,stream\nhost_alloc,w,21904333824,\nhost_alloc,s,1500000,\nhost_free_requested,s\nhost_alloc,t,1000,\nhost_free_completed,s\nhost_free,t\n",
    )
    .unwrap();
    let (code, out, err) = vramlab(&[
        "replay",
        csv.to_str().unwrap(),
        "--conf",
        "default",
        "--conf",
        "pinned_max_round_threshold_mb:64",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    // 20.4 GiB asked: a 32 GiB block under the defaults (R1.2), the exact
    // size above the threshold (R1.3); 1.5 MB takes 2 MiB either way.
    assert_eq!(
        v[0]["host_peak_reserved_bytes"],
        (32u64 << 30) + (2 << 20) + 1024
    );
    assert_eq!(
        v[1]["host_peak_reserved_bytes"],
        21904333824u64 + (2 << 20) + 1024
    );
    // The written trace reads back the same (v3).
    let vlt = dir.join("host.vlt");
    let (code, _, err) = vramlab(&["convert", csv.to_str().unwrap(), vlt.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let back = dir.join("back.csv");
    let (code, _, err) = vramlab(&["convert", vlt.to_str().unwrap(), back.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&back).unwrap();
    assert!(text.starts_with("# vramlab trace v3\n"), "{text}");
    assert!(text.contains("host_free_requested,1,,\n"), "{text}");
    let (code, out2, err) = vramlab(&[
        "replay",
        back.to_str().unwrap(),
        "--conf",
        "default",
        "--conf",
        "pinned_max_round_threshold_mb:64",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        json(&out2)[1]["host_peak_reserved_bytes"],
        v[1]["host_peak_reserved_bytes"]
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn recommend_names_the_host_waste_and_the_key_that_removes_it() {
    let dir = scratch("host-rec");
    let csv = dir.join("offload.csv");
    std::fs::write(
        &csv,
        "# vramlab trace v3\naction,id,size,stream\nalloc,x,4096,0\nhost_alloc,w,21904333824,\n",
    )
    .unwrap();
    let (code, out, err) = vramlab(&[
        "recommend",
        csv.to_str().unwrap(),
        "--torch-version",
        "2.15",
        "--ranks-per-node",
        "8",
        "--host-ram",
        "200GiB",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Pinned host memory: 32.00 GiB pinned at the peak for 20.40 GiB asked (1.57x; 11.60 GiB more) (256.00 GiB per node of 8 ranks)."),
        "{out}"
    );
    assert!(out.contains("the host's RAM runs out"), "{out}");
    assert!(
        out.contains("pinned_max_round_threshold_mb:64 pins 20.40 GiB (11.60 GiB less per process, 92.80 GiB less per node)"),
        "{out}"
    );
    assert!(
        out.contains("export PYTORCH_ALLOC_CONF=\"pinned_max_round_threshold_mb:64\""),
        "{out}"
    );
    // 2.11 has no key for it: the advice says what 2.15 would pin.
    let (code, out, err) = vramlab(&[
        "recommend",
        csv.to_str().unwrap(),
        "--torch-version",
        "2.11",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("This release has no safe key for it"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn host_rows_that_contradict_themselves_are_refused_with_the_line() {
    let cases = [
        (
            "# vramlab trace v3\naction,id,size,stream\nhost_alloc,a,10,\nfree,a\n",
            "t.csv:4: free of id 'a', which is a pinned host allocation (free it with host_free)",
        ),
        (
            "# vramlab trace v3\naction,id,size,stream\nalloc,a,10,0\nhost_free,a\n",
            "t.csv:4: host_free of id 'a', which is a device allocation (free it with free)",
        ),
        (
            "# vramlab trace v3\naction,id,size,stream\nhost_alloc,a,10,7\n",
            "t.csv:3: host_alloc takes no stream",
        ),
        (
            "# vramlab trace v3\naction,id,size,stream\nhost_alloc,a,10,\nhost_free_completed,a\n",
            "t.csv:4: host_free_completed of id 'a' without a host_free_requested before it",
        ),
        (
            "action,id,size,stream\nhost_alloc,a,10,\n",
            "t.csv:2: host_alloc: pinned host rows need the format line '# vramlab trace v3' at the top of the file",
        ),
    ];
    let dir = scratch("host-bad");
    for (text, want) in cases {
        let path = dir.join("t.csv");
        std::fs::write(&path, text).unwrap();
        let (code, _, err) = vramlab(&["stats", path.to_str().unwrap()]);
        assert_ne!(code, 0);
        let err = err.replace(&format!("{}/", dir.display()), "");
        assert!(err.contains(want), "{err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `recommend` on an offload recording (the sglang scenario of
/// docs/results/pinned-host-offload.md, recorded with its requests): the
/// waste and the key that removes it, with PyTorch's own figures under the
/// defaults and under that key (replay/tests/data/host/*.json).
#[test]
fn recommend_on_an_offload_recording_names_the_key_with_pytorchs_figures() {
    let dir = "replay/tests/data/host";
    let peak = |setting: &str| {
        let path = format!("{dir}/sglang_cpu_offload.torch2.15{setting}.json");
        let v = json(&std::fs::read_to_string(&path).unwrap());
        v["stats"]["allocated_bytes.peak"].as_u64().unwrap()
    };
    let (code, out, err) = vramlab(&[
        "recommend",
        &format!("{dir}/sglang_cpu_offload.csv"),
        "--torch-version",
        "2.15",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let host = &json(&out)["host"];
    assert_eq!(host["default"]["peak_pinned_bytes"], peak(""));
    assert_eq!(host["best"]["setting"], "pinned_max_round_threshold_mb:1");
    assert_eq!(host["best"]["peak_pinned_bytes"], peak(".round1"));
    assert!(host["peak_requested_bytes"].as_u64().unwrap() < peak(".round1"));
}

/// 2.13 hands a cached block out whatever its size (a 1.2 MiB block for a
/// 1.5 MiB request under a 1 MiB round threshold); 2.14 pins a new one:
/// the figures of the 2.13.0 and 2.14.1 wheels' own host allocators
/// (`vramlab oracle`, docs/results/pinned-host-offload/small-block-*.json).
#[test]
fn a_213_host_block_too_small_for_its_request_is_handed_out_as_the_wheel_does() {
    for release in ["2.13", "2.14"] {
        let path = format!("docs/results/pinned-host-offload/small-block-torch{release}.json");
        let torch = json(&std::fs::read_to_string(&path).unwrap());
        let (code, out, err) = vramlab(&[
            "replay",
            "tests/host/small-block-2.13.csv",
            "--torch-version",
            release,
            "--conf",
            "pinned_max_round_threshold_mb:1",
            "--json",
        ]);
        assert_eq!(code, 0, "{err}");
        let v = json(&out);
        let row = v.get(0).unwrap_or(&v);
        assert_eq!(
            row["host_num_allocs"], torch[0]["torch_host_num_alloc"],
            "{release}"
        );
        assert_eq!(
            row["host_peak_reserved_bytes"], torch[0]["torch_host_peak_bytes"],
            "{release}"
        );
    }
}

/// A snapshot dumped mid-run (scripts/oracle_experiments/host_snapshot_midrun.py):
/// weights pinned before the history began are only in host_segments, and
/// a block cached before it is reused after; the replay starts with them
/// and ends as PyTorch did (its host_memory_stats(), peaks reset where the
/// history starts), and fidelity is exact.
#[test]
fn a_mid_run_snapshots_pinned_blocks_from_before_the_history_are_replayed() {
    let snap = "tests/releases/host-midrun.torch2.15.pickle";
    let text = std::fs::read_to_string("tests/releases/host-midrun.torch2.15.stats.json").unwrap();
    let torch = &json(&text)["host_memory_stats"];
    let (code, out, err) = vramlab(&["replay", snap, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let row = v.get(0).unwrap_or(&v);
    assert_eq!(row["host_num_allocs"], torch["num_host_alloc"]);
    assert_eq!(
        row["host_peak_reserved_bytes"],
        torch["allocated_bytes.peak"]
    );
    assert_eq!(
        row["host_final_reserved_bytes"],
        torch["allocated_bytes.current"]
    );
    assert!(
        err.contains("5 block(s) pinned before the history began"),
        "{err}"
    );
    let (code, out, err) = vramlab(&["fidelity", snap, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["exact"], true, "{out}");
}
