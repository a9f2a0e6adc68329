//! A multi-rank job (a folder with job.json) as the TRACE of `replay`,
//! `recommend`, `oom-point` and `sweep`: pinned numbers on the fixture
//! tests/jobs/two-seqs (ranks 0-2: Llama-1B training at seq 512, rank 3 at
//! seq 2048; 864 MiB per rank outside the allocator), each checked against
//! the single-trace commands, and the malformed manifests' messages.

mod common;
use common::vramlab;
use serde_json::Value;

const JOB: &str = "tests/jobs/two-seqs";
const RANK0: &str = "tests/jobs/two-seqs/rank0.csv.gz";
const RANK3: &str = "tests/jobs/two-seqs/rank3.csv.gz";
const GRID: &str = "tests/jobs/grid.txt";
const OUTSIDE: u64 = 905_969_664;

fn json(args: &[&str]) -> Value {
    let (code, out, err) = vramlab(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).expect("one JSON document")
}

fn u(v: &Value) -> u64 {
    v.as_u64().expect("a whole number")
}

#[test]
fn replay_names_the_worst_rank_of_the_single_trace_replays() {
    let confs = ["--conf", "default", "--conf", "expandable_segments:True"];
    let job = json(&[&["replay", JOB, "--json"][..], &confs].concat());
    let single = |t: &str| json(&[&["replay", t, "--json"][..], &confs].concat());
    let (r0, r3) = (single(RANK0), single(RANK3));
    let s = &job["job"]["settings"];
    assert_eq!(job["job"]["world_size"], 4);
    assert_eq!(u(&job["job"]["outside_allocator"]["bytes"]), OUTSIDE);
    assert_eq!(
        job["job"]["ranks"][0]["label"],
        "ranks 0-2 (rank 0's trace; 1 recorded identical; 2 assumed alike)"
    );
    assert_eq!(job["job"]["ranks"][1]["label"], "rank 3");
    for i in 0..2 {
        let (a, b) = (
            u(&r0[i]["peak_reserved_bytes"]),
            u(&r3[i]["peak_reserved_bytes"]),
        );
        assert_eq!(u(&s[i]["peak_reserved_bytes"]), a.max(b));
        assert_eq!(u(&s[i]["least_peak_reserved_bytes"]), a.min(b));
        assert_eq!(u(&s[i]["needs_bytes"]), a.max(b) + OUTSIDE);
        assert_eq!(s[i]["worst_rank"], 3);
        assert_eq!(
            job["traces"][1]["results"][i]["peak_reserved_bytes"],
            r3[i]["peak_reserved_bytes"]
        );
    }
    assert_eq!(s[0]["setting"], "default");
    assert_eq!(u(&s[0]["peak_reserved_bytes"]), 15_804_137_472);
    assert_eq!(u(&s[0]["least_peak_reserved_bytes"]), 13_012_828_160);
    assert_eq!(u(&s[0]["imbalance_bytes"]), 2_791_309_312);
    assert_eq!(s[0]["imbalance_percent"], 21.5);
    // 14.72 GiB + 864 MiB: more than a V100-16GB holds, an A10G does.
    assert_eq!(s[0]["fits_on"], "a10g");
    assert_eq!(s[1]["setting"], "expandable_segments:True");
    assert_eq!(s[1]["fits_on"], "v100-16gb");

    let (code, out, err) = vramlab(&[&["replay", JOB][..], &confs].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("outside the allocator: 864.00 MiB per rank"),
        "{out}"
    );
    assert!(
        out.contains("default                            3      14.72 GiB  0 (12.12 GiB)  2.60 GiB (21.5%)  864.00 MiB  15.56 GiB       a10g"),
        "{out}"
    );
}

#[test]
fn recommend_ranks_the_worst_rank_on_the_card_less_the_outside_bytes() {
    let job = json(&["recommend", JOB, "--gpu", "v100-16gb", "--json"]);
    let card = (16_160u64 - 512) << 20;
    assert_eq!(u(&job["card_bytes"]), card);
    assert_eq!(u(&job["capacity_bytes"]), card - OUTSIDE);
    let cap = (card - OUTSIDE).to_string();
    // Rank 3 is the worst under every setting: the job's ranking is its.
    let r3 = json(&["recommend", RANK3, "--capacity", &cap, "--json"]);
    // Rows that fit; where a setting runs out, the job's row is the rank
    // that runs out first.
    let lines = |v: &Value| -> Vec<(String, u64)> {
        v.as_array()
            .expect("ranked")
            .iter()
            .filter(|r| r["row"]["oom_event"] == -1)
            .map(|r| {
                (
                    r["row"]["grid_line"].as_str().unwrap_or("").to_string(),
                    u(&r["row"]["peak_reserved_bytes"]),
                )
            })
            .collect()
    };
    let rec = &job["recommendation"];
    assert_eq!(lines(&rec["ranked"]), lines(&r3["ranked"]));
    assert_eq!(rec["verdict"], "defaults_are_fine");
    assert_eq!(
        rec["ranked"][0]["row"]["setting"],
        "expandable_segments:True"
    );
    assert_eq!(rec["ranked"][0]["row"]["trace"], "job (worst rank)");
    assert!(
        rec["why"].as_str().unwrap_or("").contains(
            "13.79 GiB (smallest card: v100-16gb, with 864.00 MiB outside the allocator)"
        ),
        "{}",
        rec["why"]
    );
    // Each combined row is the worst of the ranks' rows on that line.
    let ranked = rec["ranked"].as_array().expect("ranked");
    for r in ranked.iter().filter(|r| r["row"]["oom_event"] == -1) {
        let line = &r["row"]["grid_line"];
        let most = job["traces"]
            .as_array()
            .expect("traces")
            .iter()
            .flat_map(|t| t["results"].as_array().expect("rows").iter())
            .filter(|row| &row["grid_line"] == line)
            .map(|row| u(&row["peak_reserved_bytes"]))
            .max();
        assert_eq!(Some(u(&r["row"]["peak_reserved_bytes"])), most, "{line}");
    }
    let per_rank = &job["per_rank"];
    assert_eq!(per_rank[0]["rank"], 0);
    assert_eq!(per_rank[1]["default"]["fits"], true);
    assert_eq!(
        u(&per_rank[0]["recommended"]["peak_reserved_bytes"]),
        12_499_025_920
    );
    let s = &job["job"]["settings"];
    assert_eq!(s[1]["setting"], "default");
    assert_eq!(s[1]["fits_on"], "v100-16gb");
    assert_eq!(u(&s[1]["needs_bytes"]), 14_807_990_272 + OUTSIDE);

    let (code, out, err) = vramlab(&["recommend", JOB, "--gpu", "v100-16gb"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("capacity for the allocator: 14.44 GiB = v100-16gb (15.28 GiB usable of 15.78 GiB) less 864.00 MiB outside the allocator"),
        "{out}"
    );
    assert!(
        out.contains("per rank (recommended: expandable_segments:True):"),
        "{out}"
    );
}

#[test]
fn oom_point_of_a_job_is_its_worst_ranks_plus_the_outside_bytes() {
    let job = json(&["oom-point", JOB, "--json"]);
    let single = |t: &str| u(&json(&["oom-point", t, "--json"])[0]["min_capacity"]);
    let (a, b) = (single(RANK0), single(RANK3));
    let p = &job["job"]["settings"][0];
    assert_eq!(u(&p["min_capacity"]), a.max(b));
    assert_eq!(u(&p["min_capacity"]), 14_807_990_272);
    assert_eq!(p["worst_rank"], 3);
    assert_eq!(u(&p["needs_bytes"]), 14_807_990_272 + OUTSIDE);
    assert_eq!(p["card"], "v100-16gb");
    assert_eq!(u(&job["traces"][0]["results"][0]["min_capacity"]), a);
}

#[test]
fn sweep_gives_rows_per_trace_and_the_jobs_worst_rank_rows() {
    let out = std::env::temp_dir().join(format!("vramlab-job-sweep-{}.json", std::process::id()));
    let path = out.display().to_string();
    let (code, text, err) = vramlab(&["sweep", JOB, "--grid", GRID, "--json", &path]);
    assert_eq!(code, 0, "{err}");
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("written")).expect("JSON");
    std::fs::remove_file(&out).ok();
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4);
    assert_eq!(
        rows[0]["trace"],
        "rank0.csv.gz [ranks 0-2 (rank 0's trace; 1 recorded identical; 2 assumed alike)]"
    );
    assert_eq!(rows[2]["trace"], "rank3.csv.gz [rank 3]");
    let job_rows = v["job_rows"].as_array().expect("job rows");
    assert_eq!(job_rows.len(), 2);
    for (i, r) in job_rows.iter().enumerate() {
        assert_eq!(r["trace"], "job (worst rank)");
        assert_eq!(r["peak_reserved_bytes"], rows[2 + i]["peak_reserved_bytes"]);
    }
    assert_eq!(u(&job_rows[0]["peak_reserved_bytes"]), 15_804_137_472);
    assert_eq!(v["job"]["settings"][0]["fits_on"], "a10g");
    assert!(text.contains("job (worst rank): 9,300 events"), "{text}");
}

/// Writes `manifest` as job.json in a fresh folder, with a copy of the
/// fixture's rank 0 trace as r0.csv.gz; returns the folder.
fn job_dir(name: &str, manifest: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vramlab-job-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("job.json"), manifest).expect("write");
    let rank0 = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(RANK0);
    std::fs::copy(&rank0, dir.join("r0.csv.gz")).expect("copy");
    std::fs::copy(&rank0, dir.join("r0.trace")).expect("copy");
    std::fs::create_dir_all(dir.join("sub")).expect("sub folder");
    dir
}

#[test]
fn malformed_jobs_are_refused_with_the_file_rank_and_reason() {
    let r0 = "r0.csv.gz";
    let m = |ranks: &str| format!(r#"{{"vramlab_job": 1, "world_size": 3, "ranks": [{ranks}]}}"#);
    let cases = [
        (
            "bad-json",
            "{\"vramlab_job\": 1,".to_string(),
            "not valid JSON: EOF while parsing",
        ),
        (
            "missing-rank",
            m(&format!(
                r#"{{"rank": 0, "trace": "{r0}"}}, {{"rank": 2, "same_as": 0, "basis": "assumed"}}"#
            )),
            "rank 1 missing (every rank 0-2 must appear once)",
        ),
        (
            "duplicate-rank",
            m(&format!(
                r#"{{"rank": 0, "trace": "{r0}"}}, {{"rank": 1, "trace": "{r0}"}}, {{"rank": 1, "trace": "{r0}"}}"#
            )),
            "rank 1 appears twice",
        ),
        (
            "same-as-no-trace",
            m(&format!(
                r#"{{"rank": 0, "trace": "{r0}"}}, {{"rank": 1, "same_as": 2, "basis": "recorded"}}, {{"rank": 2, "same_as": 0, "basis": "recorded"}}"#
            )),
            "rank 1: same_as 2, but rank 2 has no trace (same_as must name a rank with a \"trace\")",
        ),
        (
            "missing-file",
            m(&format!(
                r#"{{"rank": 0, "trace": "{r0}"}}, {{"rank": 1, "trace": "gone.csv.gz"}}, {{"rank": 2, "same_as": 0, "basis": "assumed"}}"#
            )),
            "rank 1: trace ",
        ),
        (
            "ranks-missing",
            m(&format!(r#"{{"rank": 2, "trace": "{r0}"}}"#)),
            ": ranks 0-1 missing (every rank 0-2 must appear once)",
        ),
        (
            "huge-world",
            r#"{"vramlab_job": 1, "world_size": 4000000000, "ranks": []}"#.to_string(),
            "\"world_size\": 4000000000 is more ranks than this release takes (at most 1048576)",
        ),
        (
            "absolute-trace",
            m(&format!(
                r#"{{"rank": 0, "trace": "{r0}"}}, {{"rank": 1, "trace": "/tmp/r1.csv.gz"}}, {{"rank": 2, "same_as": 0, "basis": "assumed"}}"#
            )),
            "rank 1: \"trace\": /tmp/r1.csv.gz is an absolute path; give it relative to the job's folder",
        ),
        (
            "folder-trace",
            m(&format!(
                r#"{{"rank": 0, "trace": "{r0}"}}, {{"rank": 1, "trace": "sub"}}, {{"rank": 2, "same_as": 0, "basis": "assumed"}}"#
            )),
            "sub: is a folder, not a trace file",
        ),
        (
            "unknown-extension",
            m(&format!(
                r#"{{"rank": 0, "trace": "{r0}"}}, {{"rank": 1, "trace": "r0.trace"}}, {{"rank": 2, "same_as": 0, "basis": "assumed"}}"#
            )),
            "r0.trace: the file name does not say its format: give it in the manifest, {\"rank\": 1, \"trace\": ..., \"format\": \"csv\"} (csv, csv.gz, vlt, vlt.zst, snapshot, rmm)",
        ),
        (
            "bad-format",
            m(&format!(
                r#"{{"rank": 0, "trace": "{r0}"}}, {{"rank": 1, "trace": "r0.trace", "format": "gz"}}, {{"rank": 2, "same_as": 0, "basis": "assumed"}}"#
            )),
            "rank 1: \"format\": \"gz\" is not one of csv, csv.gz, vlt, vlt.zst, snapshot, rmm",
        ),
        (
            "fractional-version",
            r#"{"vramlab_job": 1.5, "world_size": 1, "ranks": []}"#.to_string(),
            "\"vramlab_job\": 1.5: the version is an integer (this release reads 1)",
        ),
    ];
    for (name, manifest, want) in cases {
        let dir = job_dir(name, &manifest);
        let d = dir.display().to_string();
        for cmd in [
            &["replay", &d][..],
            &["oom-point", &d],
            &["sweep", &d],
            &["recommend", &d, "--gpu", "a10g"],
        ] {
            let (code, out, err) = vramlab(cmd);
            assert_ne!(code, 0, "{cmd:?}: {out}");
            assert!(err.contains(&format!("{d}/job.json: ")), "{cmd:?}: {err}");
            assert!(err.contains(want), "{cmd:?}: {err}\nwant: {want}");
        }
        if name == "missing-file" {
            let (_, _, err) = vramlab(&["replay", &d]);
            assert!(err.contains("gone.csv.gz: no such file"), "{err}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[test]
fn commands_about_one_trace_refuse_a_job_and_say_which_take_one() {
    let (code, _, err) = vramlab(&["explain", JOB]);
    assert_ne!(code, 0);
    assert!(
        err.contains("tests/jobs/two-seqs is a multi-rank job (tests/jobs/two-seqs/job.json)"),
        "{err}"
    );
    let (code, _, err) = vramlab(&["sweep", JOB, RANK0]);
    assert_ne!(code, 0);
    assert!(err.contains("is a job: sweep it alone"), "{err}");
    let (code, _, err) = vramlab(&["replay", JOB, "--timeline", "t.csv"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("replay of a job does not take --timeline"),
        "{err}"
    );
}

/// Every recorded job of workloads/data/sharded/ (MANIFEST.tsv) replays as a
/// job: its manifest is valid, its worst rank holds at least the recorder's
/// peak of live bytes, the outside bytes are the manifest's, and the peaks
/// are pinned (PyTorch 2.15's rules, the default settings).
#[test]
fn the_sharded_corpus_replays_as_jobs() {
    let manifest =
        std::fs::read_to_string("workloads/data/sharded/MANIFEST.tsv").expect("the manifest");
    let mut lines = manifest.lines();
    let head: Vec<&str> = lines.next().expect("a header").split('\t').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).expect(name);
    let mut seen = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let cells: Vec<&str> = line.split('\t').collect();
        let name = cells[col("job")];
        let dir = format!("workloads/data/sharded/{name}");
        let job = json(&["replay", &dir, "--json", "--torch-version", "2.15"]);
        let s = &job["job"]["settings"][0];
        assert_eq!(s["setting"], "default", "{name}");
        let live = cells[col("peak_live_bytes")]
            .split(' ')
            .map(|kv| {
                kv.split_once('=')
                    .expect("rankN=bytes")
                    .1
                    .parse::<u64>()
                    .expect("bytes")
            })
            .max()
            .expect("a peak");
        assert!(u(&s["peak_reserved_bytes"]) >= live, "{name}");
        assert_eq!(
            u(&job["job"]["outside_allocator"]["bytes"]).to_string(),
            cells[col("outside_allocator_bytes")],
            "{name}"
        );
        assert_eq!(
            job["job"]["world_size"].to_string(),
            cells[col("world_size")],
            "{name}"
        );
        seen.push((name.to_string(), u(&s["peak_reserved_bytes"])));
    }
    let pinned: Vec<(String, u64)> = [
        ("llama-3-8b-fsdp2-8r", 39_531_315_200),
        ("llama-3-8b-fsdp2-64r", 31_824_281_600),
        ("llama-3-8b-hsdp-64r", 39_531_315_200),
        ("llama-3-8b-fsdp2-ckpt-8r", 58_047_070_208),
        ("llama-3-70b-fsdp2-8r", 218_997_194_752),
        ("llama-3-70b-fsdp2-64r", 62_832_771_072),
        ("llama-3-8b-tp-8r", 40_837_840_896),
        ("opt-1.3b-lora-ckpt-fsdp2-4r", 14_977_859_584),
        ("gpt2-ddp-8r", 17_429_430_272),
        ("resnet-50-ddp-8r", 3_699_376_128),
    ]
    .iter()
    .map(|(n, b)| (n.to_string(), *b))
    .collect();
    assert_eq!(seen, pinned);
}

/// The allocator's capacity on a card, and a rank's cut-off peak, from
/// `replay --json` of the fixture on `--capacity BYTES`.
fn replay_on(bytes: u64) -> Value {
    json(&["replay", JOB, "--capacity", &bytes.to_string(), "--json"])
}

#[test]
fn replay_and_sweep_run_on_the_card_less_the_outside_bytes() {
    // Rank 3's smallest capacity (oom-point): one byte less, with the
    // outside bytes on top, and rank 3 runs out; on the card itself it
    // would not have.
    const RANK3_MIN: u64 = 14_807_990_272;
    let tight = RANK3_MIN + OUTSIDE - 1;
    let v = replay_on(tight);
    assert_eq!(u(&v["capacity_bytes"]), RANK3_MIN - 1);
    let s = &v["job"]["settings"][0];
    assert_eq!(s["oom_ranks"], serde_json::json!([3]));
    assert_eq!(s["fits_on"], Value::Null);
    let v = replay_on(tight + 1);
    let s = &v["job"]["settings"][0];
    assert_eq!(s["oom_ranks"], serde_json::json!([]));
    assert_eq!(u(&s["peak_reserved_bytes"]), RANK3_MIN);
    assert_eq!(s["fits_on"], "v100-16gb");

    let (code, out, err) = vramlab(&["replay", JOB, "--capacity", &tight.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("capacity for the allocator: 13.79 GiB = 14.63 GiB less 864.00 MiB outside the allocator"),
        "{out}"
    );
    assert!(
        out.contains("under default, rank 3 ran out of memory: the job does not fit this capacity"),
        "{out}"
    );
    assert!(out.contains("no placement check"), "{out}");
    assert!(
        out.contains("fits on (from peak reserved on the capacity above; `vramlab oom-point JOB` gives the smallest card, which can be smaller)"),
        "{out}"
    );

    let (code, out, err) = vramlab(&[
        "sweep",
        JOB,
        "--grid",
        GRID,
        "--capacity",
        &tight.to_string(),
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("capacity for the allocator: 13.79 GiB = 14.63 GiB less 864.00 MiB outside the allocator"),
        "{out}"
    );
    assert!(
        out.contains("under default, rank 3 ran out of memory"),
        "{out}"
    );

    // A V100-16GB: the allocator has 15.28 GiB less 864 MiB; the default
    // settings fit there (the search says 13.79 GiB), and the card is the
    // one the capacity implies, not the a10g that the peak on an unlimited
    // device asks for.
    let card = (16_160u64 - 512) << 20;
    for cmd in [
        &["replay", JOB, "--gpu", "v100-16gb"][..],
        &[
            "sweep",
            JOB,
            "--grid",
            GRID,
            "--gpu",
            "v100-16gb",
            "--quiet",
        ],
    ] {
        let (code, out, err) = vramlab(cmd);
        assert_eq!(code, 0, "{cmd:?}: {err}");
        assert!(
            out.contains("capacity for the allocator: 14.44 GiB = v100-16gb (15.28 GiB usable of 15.78 GiB) less 864.00 MiB outside the allocator"),
            "{cmd:?}: {out}"
        );
        assert!(out.contains("13.79 GiB"), "{cmd:?}: {out}");
    }
    let v = json(&["replay", JOB, "--gpu", "v100-16gb", "--json"]);
    assert_eq!(u(&v["capacity_bytes"]), card - OUTSIDE);
    assert_eq!(
        u(&v["job"]["settings"][0]["peak_reserved_bytes"]),
        RANK3_MIN
    );
    assert_eq!(v["job"]["settings"][0]["fits_on"], "v100-16gb");

    // Outside bytes that fill the card: refused, by all three.
    let small = OUTSIDE.to_string();
    for cmd in [
        &["replay", JOB, "--capacity", &small][..],
        &["sweep", JOB, "--capacity", &small],
        &["recommend", JOB, "--capacity", &small],
    ] {
        let (code, _, err) = vramlab(cmd);
        assert_ne!(code, 0, "{cmd:?}");
        assert!(
            err.contains("the card's 864.00 MiB do not cover the 864.00 MiB each rank spends outside the allocator"),
            "{cmd:?}: {err}"
        );
    }
}

#[test]
fn the_least_rank_is_one_that_ran_to_the_end() {
    // On rank 0's smallest capacity (+ the outside bytes) rank 3 runs out
    // with a peak cut off below rank 0's: rank 0 is the least.
    let v = replay_on(13_012_828_160 + OUTSIDE);
    let s = &v["job"]["settings"][0];
    assert_eq!(s["oom_ranks"], serde_json::json!([3]));
    assert!(
        u(&v["traces"][1]["results"][0]["peak_reserved_bytes"]) < 13_012_828_160,
        "{v}"
    );
    assert_eq!(s["least_rank"], 0);
    assert_eq!(u(&s["least_peak_reserved_bytes"]), 13_012_828_160);
    // Every rank out: no least.
    let v = replay_on((1 << 30) + OUTSIDE);
    let s = &v["job"]["settings"][0];
    assert_eq!(s["oom_ranks"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(s["least_rank"], Value::Null);
    let (code, out, err) = vramlab(&["replay", JOB, "--capacity", "1888MiB"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("- (all OOM)"), "{out}");
    assert!(
        out.contains("under default, ranks 0-3 ran out of memory"),
        "{out}"
    );
}

#[test]
fn the_jobs_csv_rows_follow_the_traces_rows() {
    let csv = std::env::temp_dir().join(format!("vramlab-job-sweep-{}.csv", std::process::id()));
    let path = csv.display().to_string();
    let (code, _, err) = vramlab(&["sweep", JOB, "--grid", GRID, "--csv", &path, "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&csv).expect("written");
    std::fs::remove_file(&csv).ok();
    let index: Vec<(String, String)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let mut cells = l.splitn(3, ',');
            let i = cells.next().unwrap_or("").to_string();
            let t = cells.next().unwrap_or("").to_string();
            (i, t)
        })
        .collect();
    let want: Vec<String> = (0..6).map(|i| i.to_string()).collect();
    assert_eq!(
        index.iter().map(|(i, _)| i.clone()).collect::<Vec<_>>(),
        want
    );
    assert_eq!(index[4].1, "job (worst rank)");
}

/// A tiny CSV trace that records the settings it ran under.
fn tiny_trace(conf: &str) -> String {
    format!(
        "# vramlab trace v1\n# alloc_conf: {conf}\naction,id,size,stream\nalloc,a,4194304,0\nalloc,b,1048576,0\nfree,a\nfree,b\n"
    )
}

#[test]
fn ranks_under_different_settings_are_refused() {
    let dir = job_dir(
        "settings",
        r#"{"vramlab_job": 1, "world_size": 2, "ranks": [
            {"rank": 0, "trace": "a.csv"}, {"rank": 1, "trace": "b.log", "format": "csv"}]}"#,
    );
    std::fs::write(dir.join("a.csv"), tiny_trace("expandable_segments:True")).expect("a");
    std::fs::write(dir.join("b.log"), tiny_trace("max_split_size_mb:512")).expect("b");
    let d = dir.display().to_string();
    for cmd in [
        &["replay", &d, "--recorded-conf"][..],
        &["oom-point", &d, "--recorded-conf"],
    ] {
        let (code, out, err) = vramlab(cmd);
        assert_eq!(code, 2, "{cmd:?}: {out}{err}");
        assert!(
            err.contains("the ranks' traces do not run under the same settings (rank 0: expandable_segments:True; rank 1: max_split_size_mb:512)"),
            "{cmd:?}: {err}"
        );
        assert!(
            err.contains("give the settings with --conf"),
            "{cmd:?}: {err}"
        );
    }
    // The same settings for both (and "format" read the .log): fine.
    let v = json(&["replay", &d, "--conf", "default", "--json"]);
    assert_eq!(v["job"]["settings"][0]["setting"], "default");
    assert_eq!(u(&v["job"]["settings"][0]["peak_reserved_bytes"]), 22 << 20);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn options_of_one_trace_and_the_notes_of_each_command() {
    let (code, _, err) = vramlab(&["replay", JOB, "--trace-device", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "replay of a job does not take --trace-device (each rank's snapshot has its own device"
        ),
        "{err}"
    );
    let (code, _, err) = vramlab(&["sweep", JOB, "--trace-device", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("sweep of a job does not take --trace-device"),
        "{err}"
    );
    let (code, _, err) = vramlab(&["oom-point", JOB, "--format", "csv"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("oom-point of a job does not take --format (a rank's format goes in job.json"),
        "{err}"
    );
    let (code, out, err) = vramlab(&["oom-point", JOB]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("imbalance"), "{out}");
    assert!(!out.contains("fits on"), "{out}");
    assert!(
        out.contains("(smallest capacity: the worst rank's"),
        "{out}"
    );

    // A manifest version written 1.0 is version 1.
    let dir = job_dir(
        "version-float",
        r#"{"vramlab_job": 1.0, "world_size": 1, "ranks": [{"rank": 0, "trace": "r0.trace", "format": "csv.gz"}]}"#,
    );
    let d = dir.display().to_string();
    let v = json(&["oom-point", &d, "--json"]);
    assert_eq!(u(&v["job"]["settings"][0]["min_capacity"]), 12_486_443_008);
    std::fs::remove_dir_all(&dir).ok();

    // The job sentence is in the help of the four commands that take one.
    for cmd in ["replay", "recommend", "oom-point", "sweep"] {
        let (_, out, _) = vramlab(&[cmd, "--help"]);
        assert!(out.contains("multi-rank job"), "{cmd}: {out}");
    }
    for cmd in ["explain", "report", "serve-budget", "replay-cuda"] {
        let (_, out, _) = vramlab(&[cmd, "--help"]);
        assert!(!out.contains("multi-rank job"), "{cmd}: {out}");
    }
}

/// A folder of job folders is not a folder of traces: the message names the
/// jobs and how to give one.
#[test]
fn a_folder_of_jobs_names_them() {
    let (code, _, err) = vramlab(&["sweep", "workloads/data/sharded"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no trace files in it, but 10 job folder(s) (gpt2-ddp-8r, "),
        "{err}"
    );
    assert!(
        err.contains("`vramlab replay workloads/data/sharded/gpt2-ddp-8r`"),
        "{err}"
    );
}
