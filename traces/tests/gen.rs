//! The generator against the recorded corpus: the corpus loads and
//! replays; a generated trace at a recorded size matches that recording's
//! allocation count exactly and its peak live bytes within 1%; at a
//! held-back size within 5%; generated traces are valid traces.

use std::collections::BTreeMap;

use vramlab_allocator::AllocConf;
use vramlab_replay::{ReplayOptions, Scenario};
use vramlab_traces::csv::{read_csv, write_csv};
use vramlab_traces::r#gen::{
    CheckKind, GenError, GenRequest, KvCache, MANIFEST, PRESETS, Precision, Variant, check_family,
    corpus, embedded_files, generate, learn_recordings, peak_live_bytes, preset,
    read_recording_bytes,
};
use vramlab_traces::{Event, Trace};

fn replay_peak(trace: &Trace) -> u64 {
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 10,
        ..Default::default()
    };
    let run = Scenario::native(AllocConf::default())
        .run(trace, &opts)
        .unwrap_or_else(|e| panic!("replay of {} failed: {e}", trace.header.source));
    assert!(run.oom.is_none() && run.summary.num_ooms == 0);
    run.summary.peak_requested_bytes
}

#[test]
fn manifest_lists_every_embedded_file_and_its_numbers() {
    let rows: Vec<Vec<&str>> = MANIFEST
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    let gz: Vec<&str> = rows
        .iter()
        .map(|r| r[0])
        .filter(|f| f.ends_with(".csv.gz"))
        .collect();
    let embedded: Vec<&str> = embedded_files().collect();
    assert_eq!(
        gz, embedded,
        "traces/src/gen/corpus_files.rs is stale: rerun python -m vramlab_record.corpus --rust-only"
    );
    assert!(gz.len() >= 12, "corpus too small: {}", gz.len());
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let mut total = 0;
    for e in corpus() {
        let on_disk = std::fs::read(data.join(e.file)).expect("corpus file on disk");
        assert_eq!(on_disk, e.bytes, "{}", e.file);
        assert!(
            e.bytes.len() <= 600 * 1024,
            "{} is {} bytes",
            e.file,
            e.bytes.len()
        );
        total += e.bytes.len();
    }
    assert!(total < 8 << 20, "corpus is {total} bytes");
}

#[test]
fn corpus_loads_and_replays() {
    for e in corpus() {
        let r = read_recording_bytes(e.bytes, e.file).unwrap();
        assert_eq!(r.trace.events.len() as u64, e.events, "{}", e.file);
        assert_eq!(r.trace.num_allocs() as u64, e.allocs, "{}", e.file);
        let peak = peak_live_bytes(&r.trace);
        assert_eq!(peak, e.peak_live_bytes, "{}", e.file);
        assert_eq!(replay_peak(&r.trace), peak, "{}", e.file);
    }
}

#[test]
fn every_variant_reproduces_its_recordings() {
    let mut report = String::new();
    let mut families = 0;
    for p in PRESETS {
        for v in p.variants().keys() {
            families += 1;
            let checks =
                check_family(p, v).unwrap_or_else(|e| panic!("{} {}: {e}", p.name, v.describe(p)));
            let mut held_back = false;
            for c in &checks {
                report.push_str(&format!(
                    "{:<46} {:<12} b{} {:>5}: allocs {:>6} vs {:>6}, exact sizes {:>6}, peak {:>12} vs {:>12} ({:+.3}%)\n",
                    c.file,
                    c.kind.to_string(),
                    c.batch,
                    c.value,
                    c.recorded_allocs,
                    c.generated_allocs,
                    c.exact_sizes,
                    c.recorded_peak,
                    c.generated_peak,
                    100.0 * c.peak_error()
                ));
                match c.kind {
                    CheckKind::Recorded => {
                        assert_eq!(c.recorded_allocs, c.generated_allocs, "{}", c.file);
                        assert_eq!(c.exact_sizes, c.recorded_allocs, "{}", c.file);
                        assert!(
                            c.peak_error().abs() <= 0.01,
                            "{}: {}",
                            c.file,
                            c.peak_error()
                        );
                    }
                    CheckKind::HeldBack => {
                        held_back = true;
                        assert_eq!(c.recorded_allocs, c.generated_allocs, "{}", c.file);
                        assert!(
                            c.peak_error().abs() <= 0.05,
                            "{}: {}",
                            c.file,
                            c.peak_error()
                        );
                    }
                    CheckKind::Extrapolated => {
                        assert_eq!(c.recorded_allocs, c.generated_allocs, "{}", c.file);
                    }
                }
            }
            assert!(held_back, "{} {}: no held-back size", p.name, v.describe(p));
        }
    }
    println!("{report}");
    assert!(families >= 5);
}

fn valid(trace: &Trace) {
    let mut out = Vec::new();
    write_csv(trace, &mut out, "gen.csv").unwrap();
    let back = read_csv(out.as_slice(), "gen.csv").unwrap();
    assert_eq!(back.events.len(), trace.events.len());
    let peak = peak_live_bytes(trace);
    assert_eq!(replay_peak(trace), peak);
    // Everything allocated is freed by the end (the recorder's workloads tear
    // down), except the cuBLAS workspaces of the forward and backward threads.
    let mut live = BTreeMap::new();
    for e in &trace.events {
        match *e {
            Event::Alloc { id, size, .. } => {
                live.insert(id, size);
            }
            Event::Free { id } => {
                live.remove(&id).expect("free of a live id");
            }
            _ => {}
        }
    }
    assert!(live.len() <= 2, "{} allocations never freed", live.len());
}

#[test]
fn generates_valid_traces_at_unrecorded_sizes() {
    for (name, seq, res) in [
        ("gpt-small", Some(777), None),
        ("llama-3-8b-train", Some(4096), None),
        ("llama-3-8b-infer", Some(3000), None),
        ("sd15", None, Some(640)),
        ("sdxl", None, Some(1536)),
    ] {
        let p = preset(name).unwrap();
        if p.variants().is_empty() {
            continue;
        }
        for batch in [1, 3] {
            let req = GenRequest {
                preset: name.into(),
                batch: Some(batch),
                seq,
                resolution: res,
                ..Default::default()
            };
            let (t, _) = generate(&req).unwrap_or_else(|e| panic!("{name}: {e}"));
            valid(&t);
            assert_eq!(t.header.extra["param.batch"], batch.to_string());
        }
    }
}

#[test]
fn larger_sizes_need_more_memory() {
    let p = preset("gpt-small").unwrap();
    let mut last = 0;
    for seq in [128, 256, 512, 1024, 2048] {
        let req = GenRequest {
            preset: p.name.into(),
            seq: Some(seq),
            batch: Some(4),
            ..Default::default()
        };
        let (t, _) = generate(&req).unwrap();
        let peak = peak_live_bytes(&t);
        assert!(peak > last, "seq {seq}: {peak} <= {last}");
        last = peak;
    }
}

#[test]
fn steps_repeat_the_last_step() {
    let base = GenRequest {
        preset: "gpt-small".into(),
        seq: Some(256),
        ..Default::default()
    };
    let (three, t) = generate(&base).unwrap();
    assert_eq!(t.recorded_steps(), Some(3));
    let (ten, _) = generate(&GenRequest {
        steps: Some(10),
        ..base.clone()
    })
    .unwrap();
    assert!(ten.events.len() > three.events.len() * 2);
    valid(&ten);
    // The steady state repeats: the peak does not grow with more steps.
    assert_eq!(peak_live_bytes(&ten), peak_live_bytes(&three));
    let e = generate(&GenRequest {
        steps: Some(2),
        ..base.clone()
    })
    .unwrap_err();
    assert!(e.to_string().contains("recorded with 3 steps"), "{e}");
    // More events than 32-bit ids can name: an error before any memory is
    // reserved, not an abort.
    let e = generate(&GenRequest {
        steps: Some(u32::MAX),
        ..base.clone()
    })
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("--steps: more than 4294967295 events"),
        "{e}"
    );
    // Denoising steps: the latents carry over; what the prompt encoding made
    // is freed once, after the last step.
    let sd = GenRequest {
        preset: "sd15".into(),
        batch: Some(2),
        resolution: Some(576),
        ..Default::default()
    };
    let (two, _) = generate(&sd).unwrap();
    let (thirty, _) = generate(&GenRequest {
        steps: Some(30),
        ..sd.clone()
    })
    .unwrap();
    valid(&thirty);
    assert_eq!(peak_live_bytes(&thirty), peak_live_bytes(&two));
    assert!(thirty.events.len() > 5 * two.events.len());
    // Inference with a KV cache has no repeatable step.
    let e = generate(&GenRequest {
        preset: "llama-3-8b-infer".into(),
        steps: Some(4),
        ..Default::default()
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("not recorded with repeated steps"),
        "{e}"
    );
}

#[test]
fn errors_say_what_is_available() {
    let err = |req: GenRequest| generate(&req).unwrap_err().to_string();
    let e = err(GenRequest {
        preset: "gpt-5".into(),
        ..Default::default()
    });
    assert!(
        e.starts_with("unknown workload 'gpt-5'; presets: llama-3-8b-train"),
        "{e}"
    );
    let e = err(GenRequest {
        preset: "gpt-small".into(),
        precision: Some(Precision::Nf4),
        ..Default::default()
    });
    assert!(
        e.contains("was not recorded with --precision nf4")
            && e.contains("recorded variants: --precision fp32"),
        "{e}"
    );
    let e = err(GenRequest {
        preset: "gpt-small".into(),
        kv_cache: Some(KvCache::Static),
        ..Default::default()
    });
    assert_eq!(
        e,
        "gpt-small has no --kv-cache option (it has: --precision)"
    );
    let e = err(GenRequest {
        preset: "gpt-small".into(),
        resolution: Some(512),
        ..Default::default()
    });
    assert_eq!(e, "gpt-small scales with --seq, not --resolution");
    let e = err(GenRequest {
        preset: "gpt-small".into(),
        seq: Some(0),
        ..Default::default()
    });
    assert!(e.ends_with("--seq must be at least 1"), "{e}");
    if !preset("sd15").unwrap().variants().is_empty() {
        let e = err(GenRequest {
            preset: "sd15".into(),
            resolution: Some(500),
            ..Default::default()
        });
        assert!(e.contains("multiple of 8"), "{e}");
    }
}

#[test]
fn learning_needs_recordings_that_line_up() {
    let by_name = |n: &str| {
        let e = corpus().iter().find(|e| e.file == n).unwrap();
        read_recording_bytes(e.bytes, e.file).unwrap()
    };
    let a = by_name("gpt-small-train-seq128.csv.gz");
    let b = by_name("gpt-small-train-seq512.csv.gz");
    // Two sizes of one workload: fine, and exact at both.
    let t = learn_recordings("mine", &[a.clone(), b.clone()], &[]).unwrap();
    assert_eq!(t.values, vec![128, 512]);
    let g = t.instantiate(1, 512, None).unwrap();
    assert_eq!(peak_live_bytes(&g), peak_live_bytes(&b.trace));
    // A recording of other code at "another size" is refused, naming the file and event.
    let mut other = a.clone();
    other.name = "other.csv".into();
    other.trace.events.swap(10, 11);
    let e = learn_recordings("mine", &[a.clone(), other], &[(1, "seq".into(), 256)]).unwrap_err();
    assert!(matches!(e, GenError::Trace(_)));
    let msg = e.to_string();
    assert!(
        msg.starts_with("other.csv: entry ")
            && msg.contains(": does not line up with gpt-small-train-seq128.csv.gz: event "),
        "{msg}"
    );
    // One size only: not enough.
    let e = learn_recordings("mine", &[a], &[]).unwrap_err().to_string();
    assert!(
        e.contains("needs recordings at two or three values of seq"),
        "{e}"
    );
}

#[test]
fn default_variants_exist_for_every_preset_with_recordings() {
    for p in PRESETS {
        let v = p.variants();
        if !v.is_empty() {
            assert!(v.contains_key(&Variant::default_for(p)), "{}", p.name);
        }
    }
}
