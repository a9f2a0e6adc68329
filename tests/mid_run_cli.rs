//! Every command on snapshots shaped the way users record them: three GPUs
//! in one file, recorded mid-run, one with expandable segments, one whose
//! trace is broken; and the bare segment list of
//! `torch.cuda.memory_snapshot()`. Each command must answer (exit 0) and
//! say which device and which start it used.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::snapshot_value;
use vramlab_replay::{ReplayOptions, Scenario};
use vramlab_traces::{PickleWriter, Value};

mod common;
use common::vramlab;

/// 2.11: the last release whose free blocks of one size are ordered by
/// address. From 2.12 the order is by segment age, which a recording that
/// starts mid-run does not hold for the segments it begins with; `fidelity`
/// guesses it from the driver model (NativeAllocator::seeded_counter),
/// which this fixture need not satisfy.
const V: TorchVersion = TorchVersion::new(2, 11);

fn key(k: &Value, name: &str) -> bool {
    matches!(k, Value::Str(s) if &**s == name)
}

fn get<'a>(d: &'a Value, name: &str) -> &'a Value {
    let Value::Dict(d) = d else {
        panic!("not a dict")
    };
    &d.iter().find(|(k, _)| key(k, name)).expect(name).1
}

fn set(d: &Value, name: &str, v: Value) -> Value {
    let Value::Dict(d) = d else {
        panic!("not a dict")
    };
    let mut items = (**d).clone();
    for (k, x) in &mut items {
        if key(k, name) {
            *x = v.clone();
        }
    }
    Value::Dict(Arc::new(items))
}

fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::List(l) => (**l).clone(),
        _ => panic!("not a list"),
    }
}

/// The snapshot of the bundled small GPT trace run under `conf`.
fn snapshot(conf: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&p]).trace().unwrap();
    let conf = AllocConf::parse(conf, V).unwrap();
    let run = Scenario::native(conf.clone())
        .run(
            &trace,
            &ReplayOptions {
                record_addresses: true,
                final_segments: true,
                check_invariants: false,
                ..Default::default()
            },
        )
        .unwrap();
    snapshot_value(&trace, &run, Some(&conf))
}

/// Device 0's entries from `from` on, and its segments, as device `d`.
fn device_part(snap: &Value, d: i64, from: usize) -> (Vec<Value>, Vec<Value>) {
    let entries = list(&list(get(snap, "device_traces"))[0]);
    let segments = list(get(snap, "segments"))
        .iter()
        .map(|s| set(s, "device", Value::from(d)))
        .collect();
    (entries[from..].to_vec(), segments)
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, PickleWriter::new().to_vec(v)).unwrap();
    p
}

#[test]
fn every_command_answers_on_three_gpus_recorded_mid_run() {
    let dir = std::env::temp_dir().join(format!("vramlab-midrun-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = snapshot("");
    let expandable = snapshot("expandable_segments:True");
    let n = list(&list(get(&plain, "device_traces"))[0]).len();
    let (e0, s0) = device_part(&plain, 0, n / 3);
    let (e1, s1) = device_part(&expandable, 1, n / 2);
    // Device 2: an alloc at an address that is still allocated.
    let (mut e2, s2) = device_part(&plain, 2, n / 2);
    let first_alloc = e2
        .iter()
        .position(|e| matches!(get(e, "action"), Value::Str(a) if &**a == "alloc"))
        .unwrap();
    e2.insert(first_alloc + 1, e2[first_alloc].clone());
    let three = set(
        &set(
            &plain,
            "device_traces",
            Value::list([Value::list(e0), Value::list(e1), Value::list(e2)]),
        ),
        "segments",
        Value::list(s0.into_iter().chain(s1).chain(s2)),
    );
    let f = write(&dir, "three.pickle", &three);
    let f = f.to_str().unwrap();
    let out = dir.join("report");
    let out = out.to_str().unwrap();
    let csv = dir.join("rows.csv");
    let csv = csv.to_str().unwrap();
    let conv = dir.join("conv-{device}.vlt");
    let conv = conv.to_str().unwrap();
    let fresh = dir.join("fresh-{device}.csv");
    let fresh = fresh.to_str().unwrap();
    let what_if = dir.join("what-if.pickle");
    let what_if = what_if.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["stats", f],
        vec!["convert", f, conv],
        vec!["convert", f, fresh, "--start", "fresh"],
        vec!["fidelity", f, "--trace-device", "0"],
        vec!["replay", f],
        vec!["replay", f, "--trace-device", "1"],
        vec!["replay", f, "--conf", "expandable_segments:True"],
        vec![
            "replay",
            f,
            "--policy",
            "bfc",
            "--conf",
            "allow_growth:true",
        ],
        vec!["replay", f, "--policy", "async"],
        vec!["replay", f, "--policy", "stitch"],
        vec!["replay", f, "--policy", "direct"],
        vec!["replay", f, "--capacity", "100MiB"],
        vec!["replay", f, "--snapshot-out", what_if],
        vec!["sweep", f, "--csv", csv, "--quiet"],
        vec!["recommend", f, "--capacity", "24GiB"],
        vec!["oom-point", f],
        vec!["oom-point", f, "--capacity", "64MiB"],
        vec!["explain", f],
        vec!["explain", f, "--trace-device", "1"],
        vec!["explain", f, "--capacity", "64MiB", "--json"],
        vec![
            "diff",
            f,
            "--conf",
            "default",
            "--conf",
            "expandable_segments:True",
        ],
        vec!["diff", f, f, "--trace-device", "1"],
        vec![
            "report",
            f,
            "--out",
            out,
            "--capacity",
            "24GiB",
            "--plots",
            "1",
        ],
    ];
    for args in &commands {
        let (code, stdout, err) = vramlab(args);
        assert_eq!(code, 0, "{args:?}:\n{err}\n{stdout}");
        // Unless a device is asked for, the broken one is named.
        let named = err.contains("device 2 skipped: ") && err.contains("which is still allocated");
        assert_eq!(
            named,
            !args.contains(&"--trace-device"),
            "{args:?}: the broken device is named only when no device is asked for:\n{err}"
        );
    }
    // The device picked, and the start, are said.
    let (_, stdout, err) = vramlab(&["replay", f]);
    assert!(
        err.contains("holds devices 0, 1; using device 0 (the most allocations)"),
        "{err}"
    );
    assert!(stdout.contains("start: recorded: "), "{stdout}");
    let (_, stdout, _) = vramlab(&["replay", f, "--conf", "expandable_segments:True", "--json"]);
    assert!(stdout.contains("\"start\": \"fresh\""), "{stdout}");
    // Fidelity checks the devices it can, names the one it cannot.
    let (code, stdout, err) = vramlab(&["fidelity", f]);
    assert_eq!(
        code, 1,
        "device 1 ran expandable segments, the file says otherwise"
    );
    assert!(stdout.contains("0 ") && stdout.contains("1 "), "{stdout}");
    assert!(err.contains("device 2 not checked"), "{err}");
    // The sweep covers both readable devices.
    let rows = std::fs::read_to_string(dir.join("rows.csv")).unwrap();
    assert!(rows.contains("three.pickle#1"), "{rows}");
    assert!(
        rows.lines().skip(1).all(|l| l.contains(",fresh,false,")),
        "{rows}"
    );
    // The what-if snapshot is itself a mid-run snapshot fidelity can check.
    let (code, stdout, err) = vramlab(&["fidelity", what_if]);
    assert_eq!(code, 0, "{stdout}\n{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_segment_list_of_memory_snapshot_gets_stats_and_a_state_report() {
    let dir = std::env::temp_dir().join(format!("vramlab-legacy-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let segments = get(&snapshot(""), "segments").clone();
    let f = write(&dir, "segments.pickle", &segments);
    let f = f.to_str().unwrap();
    let (code, stdout, err) = vramlab(&["stats", f]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("allocator state (no history): "),
        "{stdout}"
    );
    assert!(stdout.contains("torch.cuda.memory_snapshot()"), "{stdout}");
    let out = dir.join("report");
    let (code, stdout, err) = vramlab(&["report", f, "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("report of the allocator state"), "{stdout}");
    assert!(out.join("segments-1-recorded-state.png").is_file());
    let (code, _, err) = vramlab(&["replay", f]);
    assert_eq!(code, 2);
    assert!(err.contains("nothing to replay"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
