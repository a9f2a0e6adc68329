//! End-to-end tests of the `vramlab` binary: exit codes, JSON keys, error
//! messages.

mod common;
use common::{vramlab, vramlab_in_columns};

const TRACE: &str = "workloads/data/gpt-small-train.csv";

#[test]
fn replay_json_has_the_documented_keys() {
    let (code, out, err) = vramlab(&["replay", TRACE, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    for k in [
        "events",
        "allocs",
        "peak_requested_bytes",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "final_reserved_bytes",
        "num_device_alloc",
        "num_device_free",
        "oom",
        "stats",
    ] {
        assert!(v.get(k).is_some(), "missing key {k}");
    }
    assert!(v["oom"].is_null());
    assert_eq!(v["events"], 3280);
    assert_eq!(v["allocs"], 1640);
    assert_eq!(
        v["stats"]["reserved_bytes.all.peak"], v["peak_reserved_bytes"],
        "stats use PyTorch's names"
    );
    assert!(v["peak_reserved_bytes"].as_u64() >= v["peak_requested_bytes"].as_u64());
}

#[test]
fn an_oom_is_a_result_not_an_error() {
    let (code, out, err) = vramlab(&["replay", TRACE, "--capacity", "512MiB", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let oom = &v["oom"];
    assert!(oom["event_index"].as_u64().is_some());
    assert!(oom["requested_bytes"].as_u64().unwrap() > 0);
    assert!(
        oom["message"]
            .as_str()
            .unwrap()
            .starts_with("CUDA out of memory. Tried to allocate")
    );
}

#[test]
fn several_settings_print_a_comparison() {
    let (code, out, _) = vramlab(&[
        "replay",
        TRACE,
        "--conf",
        "default",
        "--conf",
        "expandable_segments:True",
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("peak reserved"));
    assert!(out.contains("expandable_segments:True"));
    assert!(out.contains("lowest peak reserved without OOM"));
}

#[test]
fn bad_settings_get_pytorchs_message_and_exit_2() {
    let (code, _, err) = vramlab(&["replay", TRACE, "--conf", "max_split_size_mb:abc"]);
    assert_eq!(code, 2);
    assert!(err.contains("max_split_size_mb"), "{err}");
    let (code, _, err) = vramlab(&["conf", "foo:1"]);
    assert_eq!(code, 2);
    assert!(err.contains("foo"), "{err}");
}

#[test]
fn conf_sizes_pinned_host_requests_as_each_release_does() {
    // PyTorch's CachingHostAllocator (docs/host-allocator-spec.md, R1.2,
    // R1.3, R4.6): a power of two, or from 2.13 the exact size above the
    // round threshold; a block above the cache limit is given back.
    let (code, out, err) = vramlab(&["conf", "", "--torch-version", "2.11", "--size", "20.4GiB"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("20.40 GiB  32.00 GiB      cached"), "{out}");
    let settings = "pinned_max_round_threshold_mb:64,pinned_max_cached_size_mb:1024";
    let args = [
        "conf",
        settings,
        "--torch-version",
        "2.15",
        "--size",
        "20.4GiB",
    ];
    let (code, out, err) = vramlab(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("20.40 GiB  20.40 GiB  given back"), "{out}");
}

#[test]
fn conf_explains_settings() {
    let (code, out, err) = vramlab(&[
        "conf",
        "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
        "--size",
        "1100MiB",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1.07 GiB") || out.contains("1.12 GiB"),
        "{out}"
    );
    // 2.11 rules: [1 GiB, 2 GiB) gets 4 divisions -> 1100 MiB rounds to 1.25 GiB
    assert!(out.contains("1.25 GiB"), "{out}");
    let (_, out29, _) = vramlab(&[
        "conf",
        "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
        "--size",
        "1100MiB",
        "--torch-version",
        "2.9",
    ]);
    // 2.9 rules: '>' overwrote that interval with 8 -> 1.125 GiB
    assert!(out29.contains("1.12 GiB"), "{out29}");
}

#[test]
fn bad_trace_names_file_and_line() {
    let dir = std::env::temp_dir().join(format!("vramlab-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.csv");
    std::fs::write(&p, "action,id,size,stream\nalloc,a,100\nfree,b\n").unwrap();
    let (code, _, err) = vramlab(&["replay", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.csv:3: free of id 'b', which is not allocated"),
        "{err}"
    );
    let (code, _, err) = vramlab(&["replay", "no/such/file.csv"]);
    assert_eq!(code, 2);
    assert!(err.contains("no/such/file.csv"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sizes_accept_units() {
    for cap in ["24GiB", "80GB", "512MiB", "1073741824"] {
        let (code, _, err) = vramlab(&["replay", TRACE, "--capacity", cap, "--json"]);
        assert_eq!(code, 0, "{cap}: {err}");
    }
    let (code, _, err) = vramlab(&["replay", TRACE, "--capacity", "lots"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid size 'lots'"), "{err}");
}

/// `report` and `recommend` are about one device: of a snapshot of two,
/// they take the one with the most allocations and say so, or the one
/// `--trace-device` names.
#[test]
fn commands_about_one_device_name_the_device_of_a_two_device_snapshot() {
    use vramlab_traces::{DictBuilder, PickleWriter, Value};
    let entry = |action: &str, addr: i64| {
        DictBuilder::new()
            .entry("action", action)
            .entry("addr", addr)
            .entry("size", 4096i64)
            .entry("stream", 0i64)
            .build()
    };
    let device = |base: i64, n: i64| {
        Value::list((0..n).flat_map(|i| {
            let a = base + i * 4096;
            [
                entry("alloc", a),
                entry("free_requested", a),
                entry("free_completed", a),
            ]
        }))
    };
    let snap = DictBuilder::new()
        .entry("segments", Value::list(Vec::<Value>::new()))
        .entry(
            "device_traces",
            Value::list([device(0x7f00_0000_0000, 1), device(0x7e00_0000_0000, 2)]),
        )
        .build();
    let dir = std::env::temp_dir().join(format!("vramlab-cli-2dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("two.pickle");
    std::fs::write(&path, PickleWriter::new().to_vec(&snap)).unwrap();
    let p = path.to_str().unwrap();
    let out = dir.join("report");
    for args in [
        vec!["report", p, "--out", out.to_str().unwrap()],
        vec!["recommend", p, "--capacity", "1GiB"],
        vec!["replay", p],
        vec!["oom-point", p],
    ] {
        let (code, _, err) = vramlab(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(
            err.contains("holds devices 0, 1; using device 1 (the most allocations); pick another with --trace-device N"),
            "{args:?}: {err}"
        );
        let mut with_device = args.clone();
        with_device.extend(["--trace-device", "0"]);
        let (code, _, err) = vramlab(&with_device);
        assert_eq!(code, 0, "{with_device:?}: {err}");
        assert!(!err.contains("holds devices"), "{with_device:?}: {err}");
    }
    let (code, _, err) = vramlab(&["replay", p, "--trace-device", "5"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no trace for device 5 (devices in the file: 0, 1)"),
        "{err}"
    );
    let (code, stdout, err) = vramlab(&["stats", p]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("(device 1)"), "{stdout}");
    std::fs::remove_dir_all(&dir).ok();
}

/// At an OOM, the Python line that asked for the memory is shown (when the
/// snapshot recorded stacks), and that of the largest live allocation.
#[test]
fn the_code_that_ran_out_of_memory_is_named() {
    use vramlab_traces::{DictBuilder, PickleWriter, Value};
    let frame = |file: &str, line: i64, name: &str| {
        DictBuilder::new()
            .entry("filename", file)
            .entry("line", line)
            .entry("name", name)
            .build()
    };
    let stack = |inner: Value| {
        Value::list([
            frame(
                "/usr/lib/python3.12/site-packages/torch/nn/modules/linear.py",
                125,
                "forward",
            ),
            inner,
            frame("/home/me/train.py", 88, "train_step"),
        ])
    };
    let entry = |action: &str, addr: i64, size: i64, frames: Value| {
        DictBuilder::new()
            .entry("action", action)
            .entry("addr", addr)
            .entry("size", size)
            .entry("stream", 0i64)
            .entry("frames", frames)
            .build()
    };
    let (a, b) = (0x7f00_0000_0000i64, 0x7f00_1000_0000i64);
    let mib = 1i64 << 20;
    let snap = DictBuilder::new()
        .entry("segments", Value::list(Vec::<Value>::new()))
        .entry(
            "device_traces",
            Value::list([Value::list([
                entry(
                    "segment_alloc",
                    a,
                    200 * mib,
                    Value::list(Vec::<Value>::new()),
                ),
                entry(
                    "alloc",
                    a,
                    200 * mib,
                    stack(frame("/home/me/model.py", 40, "__init__")),
                ),
                entry(
                    "segment_alloc",
                    b,
                    100 * mib,
                    Value::list(Vec::<Value>::new()),
                ),
                entry(
                    "alloc",
                    b,
                    100 * mib,
                    stack(frame("/home/me/model.py", 54, "forward")),
                ),
            ])]),
        )
        .build();
    let dir = std::env::temp_dir().join(format!("vramlab-cli-frames-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("frames.pickle");
    std::fs::write(&path, PickleWriter::new().to_vec(&snap)).unwrap();
    let p = path.to_str().unwrap();
    let (code, stdout, err) = vramlab(&["oom-point", p, "--capacity", "250MiB"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("the allocation that failed: me/model.py:54 in forward  (called from me/train.py:88 in train_step)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("200.00 MiB  me/model.py:40 in __init__"),
        "{stdout}"
    );
    let (code, stdout, _) = vramlab(&["replay", p, "--capacity", "250MiB"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("me/model.py:54 in forward"), "{stdout}");
    let (_, stdout, _) = vramlab(&["oom-point", p, "--capacity", "250MiB", "--json"]);
    assert!(stdout.contains("\"failing_stack\""), "{stdout}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn stats_describes_an_empty_snapshot_and_exits_0() {
    let empty = "tests/malformed/empty-snapshot.pickle";
    let (code, out, err) = vramlab(&["stats", empty]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!(
            "{empty}: an empty snapshot: 0 segments and 0 trace entries"
        )),
        "{out}"
    );
    assert!(out.contains("_record_memory_history"), "{out}");
    let (code, out, err) = vramlab(&["stats", empty, "--json"]);
    assert_eq!((code, out.trim()), (0, "[]"), "{err}");
    assert!(err.contains("an empty snapshot"), "{err}");
}

#[test]
fn recommend_names_the_setting_a_snapshot_was_recorded_with() {
    // A snapshot recorded under expandable segments (vramlab writes one).
    let dir = std::env::temp_dir().join(format!("vramlab-yours-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let snap = dir.join("es.pickle");
    let snap_arg = snap.to_str().unwrap();
    let (code, _, err) = vramlab(&[
        "replay",
        "workloads/data/sdxl-resolution1024.csv.gz",
        "--conf",
        "expandable_segments:True",
        "--snapshot-out",
        snap_arg,
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = vramlab(&["recommend", snap_arg, "--gpu", "rtx4090", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let why = v["why"].as_str().unwrap();
    // The defaults fit with room to spare, and the user's own setting is
    // named, with its figures, instead of reading as advice to drop it.
    assert_eq!(v["verdict"], "defaults_are_fine", "{why}");
    assert!(
        why.contains(
            "Your setting (recorded with the trace), expandable_segments:True: 10.18 GiB reserved at peak, 13.31 GiB headroom; ranked 2 of "
        ),
        "{why}"
    );
    assert!(
        why.ends_with("It is fine to keep; so would be the defaults."),
        "{why}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A snapshot written by PyTorch 2.14 on the fake device with an `annotate`
/// entry (`torch.cuda.memory._annotate_tensor`;
/// scripts/oracle_experiments/annotate.py): read as 2.14–2.15, the entry
/// skipped with a note that says what it is, and the recording replayed
/// exactly.
#[test]
fn an_annotated_2_14_snapshot_is_read_as_2_14() {
    let snap = "tests/releases/annotate.torch2.14.pickle";
    let (code, out, err) = vramlab(&["stats", snap]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("torch_releases: 2.14–2.15"), "{out}");
    assert!(!out.contains("newer than"), "{out}");
    assert!(
        out.contains("1 'annotate' entries (metadata attached to a live allocation by _annotate_tensor) carry no allocation and were skipped"),
        "{out}"
    );
    let (code, out, err) = vramlab(&["fidelity", snap]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("every allocation address and segment decision matches PyTorch"),
        "{out}"
    );
}

/// A native trace (CSV, or a .vlt converted from a snapshot that starts
/// mid-run with private pools) is replayed while it is read unless an
/// option needs it whole (`--timeline`): both paths print the same table,
/// the same JSON and the same notes, OOMs included.
#[test]
fn a_native_trace_replayed_as_it_is_read_answers_as_when_read_whole() {
    let dir = std::env::temp_dir().join(format!("vramlab-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let timeline = dir.join("t.csv");
    let timeline = timeline.to_str().unwrap();
    let vlt = dir.join("midrun.vlt.zst");
    let vlt = vlt.to_str().unwrap();
    let snap = "tests/pools/snapshots/serving-warmup-midrun.torch2.15.pickle";
    let (code, _, err) = vramlab(&["convert", snap, vlt]);
    assert_eq!(code, 0, "{err}");
    for (trace, extra) in [
        (
            "workloads/data/gpt-small-train.csv",
            &["--conf", "", "--conf", "expandable_segments:True"][..],
        ),
        (
            "workloads/data/gpt-small-train.csv",
            &["--gpu", "a10g", "--json"][..],
        ),
        (
            "workloads/data/gpt-small-train.csv",
            &["--capacity", "300MiB", "--continue-on-oom"][..],
        ),
        (vlt, &[][..]),
        (vlt, &["--conf", "expandable_segments:True", "--json"][..]),
        (vlt, &["--capacity", "3GiB"][..]),
    ] {
        let mut streamed = vec!["replay", trace];
        streamed.extend_from_slice(extra);
        let mut whole = streamed.clone();
        whole.extend_from_slice(&["--timeline", timeline]);
        let (c1, out1, err1) = vramlab(&streamed);
        let (c2, out2, err2) = vramlab(&whole);
        assert_eq!((c1, &out1), (c2, &out2), "{trace} {extra:?}");
        let notes = |e: &str| {
            e.lines()
                .filter(|l| !l.contains("timeline"))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(notes(&err1), notes(&err2), "{trace} {extra:?}");
        assert!(out1.contains("peak"), "{out1}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// With `COLUMNS=100` every command's help, and the default output of the
/// commands users read (on a bundled trace), fits 100 columns; `--wide`
/// lets a table run long again.
#[test]
fn help_and_tables_fit_100_columns() {
    let widest = |text: &str| text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let (_, top, _) = vramlab_in_columns(100, &["--help"]);
    assert!(widest(&top) <= 100, "{top}");
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() > 10, "{top}");
    for c in &commands {
        let (code, help, err) = vramlab_in_columns(100, &[c.as_str(), "--help"]);
        assert_eq!(code, 0, "{c}: {err}");
        assert!(widest(&help) <= 100, "{c} --help:\n{help}");
    }
    let gpt = "workloads/data/gpt-small-train.csv";
    for args in [
        vec![
            "replay",
            gpt,
            "--conf",
            "default",
            "--conf",
            "expandable_segments:True",
        ],
        vec!["sweep", gpt],
        vec!["recommend", gpt, "--gpu", "rtx4090"],
        vec!["recommend", gpt],
        vec!["explain", "tests/explain/pinned-split.csv"],
        vec![
            "diff",
            gpt,
            "--conf",
            "default",
            "--conf",
            "expandable_segments:True",
        ],
        vec!["stats", gpt],
        vec!["gpus"],
    ] {
        let (code, out, err) = vramlab_in_columns(100, &args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(widest(&out) <= 100, "{args:?}:\n{out}");
        assert!(!out.starts_with('\n'), "{args:?} begins with a blank line");
    }
    let (_, wide, _) = vramlab_in_columns(100, &["sweep", gpt, "--wide"]);
    assert!(widest(&wide) > 100, "--wide keeps rows on one line");
}

/// Settings whose replays are the same in every figure share one row of
/// sweep's table (the first names the rest), and sweep's CSV keeps every
/// row with `same_as` naming the first; "best" is a PyTorch setting, other
/// designs listed apart.
#[test]
fn identical_settings_share_a_row_and_best_is_a_pytorch_setting() {
    let gpt = "workloads/data/gpt-small-train.csv";
    let dir = std::env::temp_dir().join(format!("vramlab-same-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("rows.csv");
    let (code, summary, err) = vramlab(&["sweep", gpt, "--csv", csv.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    assert_eq!(header.last(), Some(&"same_as"));
    let rows = vramlab_replay::read_rows_csv(&text, "rows.csv").unwrap();
    let same: Vec<_> = rows.iter().filter(|r| !r.same_as.is_empty()).collect();
    assert!(
        !same.is_empty(),
        "the default grid has settings that change nothing here"
    );
    for r in &same {
        let first = rows.iter().find(|f| f.setting == r.same_as).unwrap();
        assert!(first.same_as.is_empty() && first.index < r.index);
        assert!(vramlab_replay::same_result(first, r));
    }
    // The summary's best is a PyTorch setting, never another design.
    let best = summary
        .lines()
        .nth(2)
        .unwrap()
        .split("  ")
        .last()
        .unwrap()
        .trim();
    let row = rows
        .iter()
        .find(|r| r.setting == best)
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(row.is_pytorch_setting(), "{summary}");
    // The table: one row per distinct result; designs under their own
    // heading.
    let (_, table, _) = vramlab(&["sweep", gpt]);
    let firsts = rows.iter().filter(|r| r.same_as.is_empty()).count();
    let listed = table
        .lines()
        .filter(|l| !l.chars().all(|c| c == '-'))
        .filter(|l| l.ends_with(" -") || l.contains(" event "))
        .count();
    assert_eq!(listed, firsts, "{table}");
    assert!(
        table.contains("other allocator designs (not PyTorch settings"),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The one rule for "recommended": on every real snapshot, with no card
/// and with a roomy and a tight one, `report` prints the verdict and the
/// export lines `recommend` prints.
#[test]
#[ignore = "needs ../shared/traces/real; run with -- --ignored"]
fn report_and_recommend_agree_on_every_real_snapshot() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces/real");
    assert!(dir.is_dir(), "../shared/traces/real/ is not present");
    let mut snaps: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
        .collect();
    snaps.sort();
    assert!(!snaps.is_empty());
    // The sentence after "TRACE on CARD (…)" and the export lines.
    let advice = |out: &str| -> Vec<String> {
        let lines: Vec<&str> = out.lines().collect();
        let head = lines
            .iter()
            .position(|l| l.contains(" on ") && l.contains(" events, peak live "))
            .unwrap_or_else(|| panic!("no advice in:\n{out}"));
        let mut v = vec![lines[head + 2].to_string()];
        v.extend(
            lines
                .iter()
                .filter(|l| l.starts_with("  bash") || l.starts_with("  Python"))
                .map(|l| l.to_string()),
        );
        v
    };
    let out_dir = std::env::temp_dir().join(format!("vramlab-agree-{}", std::process::id()));
    for snap in &snaps {
        let s = snap.to_str().unwrap();
        for card in [&[][..], &["--gpu", "h100-80gb"][..], &["--gpu", "t4"][..]] {
            let mut rec = vec!["recommend", s];
            rec.extend(card);
            let (code, r, err) = vramlab(&rec);
            assert_eq!(code, 0, "{rec:?}: {err}");
            let o = out_dir.to_str().unwrap();
            let mut rep = vec!["report", s, "--out", o, "--no-explorer"];
            rep.extend(card);
            let (code, p, err) = vramlab(&rep);
            assert_eq!(code, 0, "{rep:?}: {err}");
            assert_eq!(advice(&r), advice(&p), "{s} {card:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}
