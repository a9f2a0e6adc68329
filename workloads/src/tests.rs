//! The generator against the recorded corpus: the corpus loads as its
//! manifest says; a generated trace at a recorded size matches that
//! recording's allocation count exactly and its peak live bytes within 1%;
//! at a held-back size within 5%; generated traces are valid traces. That
//! they replay to their live peak is replay's test
//! (`replay/tests/generated_workloads.rs`). They are unit tests, beside
//! the generator, because they read its knobs and recordings directly.

use std::collections::BTreeMap;

use crate::corpus::{MANIFEST, embedded_files};
use crate::knobs::vae_tile_grid;
use crate::{
    Attention, CheckKind, GenError, GenRequest, KvCache, ModelSize, Offload, PRESETS, Precision,
    Variant, check_family, corpus, generate, learn_recordings, peak_live_bytes, preset,
    read_recording_bytes,
};
use vramlab_traces::{Event, Trace, read_csv, write_csv};

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
        "workloads/src/corpus_files.rs is stale: rerun python -m vramlab_record.corpus --rust-only"
    );
    assert!(gz.len() >= 12, "corpus too small: {}", gz.len());
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let mut total = 0;
    for e in corpus() {
        let on_disk = std::fs::read(data.join(e.file)).expect("corpus file on disk");
        assert_eq!(on_disk, e.bytes, "{}", e.file);
        // The longest recording is the 128-token decode (about 1 MB).
        assert!(
            e.bytes.len() <= 1280 * 1024,
            "{} is {} bytes",
            e.file,
            e.bytes.len()
        );
        total += e.bytes.len();
    }
    assert!(total < 20 << 20, "corpus is {total} bytes");
}

#[test]
fn corpus_loads_as_the_manifest_says() {
    for e in corpus() {
        let r = read_recording_bytes(e.bytes, e.file).unwrap();
        assert_eq!(r.trace.events.len() as u64, e.events, "{}", e.file);
        assert_eq!(r.trace.num_allocs() as u64, e.allocs, "{}", e.file);
        assert_eq!(peak_live_bytes(&r.trace), e.peak_live_bytes, "{}", e.file);
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
                    CheckKind::NewTokens | CheckKind::LargerBatch => {
                        assert_eq!(c.recorded_allocs, c.generated_allocs, "{}", c.file);
                        assert_eq!(c.exact_sizes, c.recorded_allocs, "{}", c.file);
                        assert!(
                            c.peak_error().abs() <= 0.01,
                            "{}: {}",
                            c.file,
                            c.peak_error()
                        );
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
        ("flux", None, Some(640)),
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
        "gpt-small has no --kv-cache option (it has: --precision, --leak, --empty-cache)"
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

/// The recording's events (after the header), for event-by-event
/// comparison with a generated trace.
fn body(trace: &Trace) -> Vec<String> {
    let mut out = Vec::new();
    write_csv(trace, &mut out, "t.csv").unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn new_tokens_extend_the_decode() {
    let p = preset("llama-3-8b-infer").unwrap();
    let v = Variant::default_for(p);
    let longer = p.decode_recordings(&v);
    assert!(longer.len() >= 2, "decode recordings: {}", longer.len());
    // From the 8-token template to each longer recording: event for event.
    for e in &longer {
        let rec = read_recording_bytes(e.bytes, e.file).unwrap();
        let n: u64 = e.params["new_tokens"].parse().unwrap();
        let (g, t) = generate(&GenRequest {
            preset: p.name.into(),
            seq: Some(e.params["seq"].parse().unwrap()),
            new_tokens: Some(n),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(t.recorded_new_tokens(), Some(8));
        assert!(n > 8);
        assert_eq!(body(&g), body(&rec.trace), "{}", e.file);
        assert_eq!(g.header.extra["param.new_tokens"], n.to_string());
    }
    // The KV cache readout: 2 · 32 layers · 8 heads · 128 · 2 bytes per
    // token, prompt + new tokens − 1 positions at the end (dynamic), prompt
    // + new tokens (static).
    let base = GenRequest {
        preset: p.name.into(),
        seq: Some(1000),
        batch: Some(2),
        new_tokens: Some(300),
        ..Default::default()
    };
    let (g, _) = generate(&base).unwrap();
    valid(&g);
    assert_eq!(
        g.header.extra["param.kv_cache_bytes"],
        (131_072u64 * 2 * 1299).to_string()
    );
    let (stat, _) = generate(&GenRequest {
        kv_cache: Some(KvCache::Static),
        new_tokens: None,
        ..base.clone()
    })
    .unwrap();
    assert_eq!(
        stat.header.extra["param.kv_cache_bytes"],
        (131_072u64 * 2 * 1008).to_string()
    );
    // Longer generations hold more: the peak grows once the cache
    // outgrows the prefill's activations.
    let peak = |n: u64| {
        peak_live_bytes(
            &generate(&GenRequest {
                new_tokens: Some(n),
                batch: Some(1),
                ..base.clone()
            })
            .unwrap()
            .0,
        )
    };
    assert!(peak(4000) > peak(8));
    // Every dynamic-cache variant extends; each size too.
    for (precision, attention) in [
        (Precision::Int8, Attention::Flash),
        (Precision::Nf4, Attention::Flash),
        (Precision::Bf16, Attention::Eager),
    ] {
        let (g, _) = generate(&GenRequest {
            precision: Some(precision),
            attention: Some(attention),
            batch: None,
            ..base.clone()
        })
        .unwrap();
        valid(&g);
    }
    for size in ModelSize::ALL {
        let (g, _) = generate(&GenRequest {
            size: Some(size),
            ..base.clone()
        })
        .unwrap();
        assert_eq!(
            g.header.extra["param.kv_cache_bytes"],
            (size.kv_bytes_per_token() * 2 * 1299).to_string()
        );
    }
    // What cannot be extended says so.
    let err = |req: GenRequest| generate(&req).unwrap_err().to_string();
    let e = err(GenRequest {
        new_tokens: Some(2),
        ..base.clone()
    });
    assert!(e.contains("at least 3"), "{e}");
    // Fewer tokens than recorded: the same steps, stopped early.
    let at = |n: u64| {
        generate(&GenRequest {
            new_tokens: Some(n),
            ..base.clone()
        })
        .unwrap()
        .0
    };
    let (five, eight, nine) = (at(5), at(8), at(9));
    valid(&five);
    let step = nine.num_allocs() - eight.num_allocs();
    assert_eq!(eight.num_allocs() - five.num_allocs(), 3 * step);
    let (b5, b8) = (body(&five), body(&eight));
    let teardown = b8
        .iter()
        .rev()
        .take_while(|l| l.starts_with("free"))
        .count();
    let kept = b5.len() - teardown;
    assert_eq!(b5[..kept], b8[..kept]);
    assert_eq!(
        five.header.extra["param.kv_cache_bytes"],
        (131_072u64 * 2 * 1004).to_string()
    );
    let e = err(GenRequest {
        kv_cache: Some(KvCache::Static),
        ..base.clone()
    });
    assert!(e.contains("use --kv-cache dynamic"), "{e}");
    let e = err(GenRequest {
        preset: "llama-3-8b-train".into(),
        new_tokens: Some(16),
        ..Default::default()
    });
    assert!(e.contains("has no --new-tokens option"), "{e}");
    let e = err(GenRequest {
        new_tokens: Some(u64::MAX),
        ..base.clone()
    });
    assert!(
        e.contains("--new-tokens: more than 4294967295 events"),
        "{e}"
    );
}

#[test]
fn llama_sizes_are_recorded_for_training_and_inference() {
    for name in ["llama-3-8b-train", "llama-3-8b-infer"] {
        let p = preset(name).unwrap();
        let mut last = 0;
        for size in ModelSize::ALL {
            let v = Variant {
                size: Some(size),
                ..Variant::default_for(p)
            };
            assert!(
                p.variants().contains_key(&v),
                "{name} --size {}",
                size.name()
            );
            let (g, t) = generate(&GenRequest {
                preset: name.into(),
                seq: Some(1536),
                size: Some(size),
                ..Default::default()
            })
            .unwrap();
            if size != ModelSize::B8 {
                assert!(t.name.ends_with(&format!("--size {}", size.name())));
                assert_eq!(g.header.extra["param.size"], size.name());
            }
            let peak = peak_live_bytes(&g);
            assert!(
                peak > last,
                "{name} --size {}: {peak} <= {last}",
                size.name()
            );
            last = peak;
        }
    }
    // 70B in bf16 with AdamW: weights, gradients and two states of 70.6e9
    // parameters (about 565 GB) at least.
    let (g, _) = generate(&GenRequest {
        preset: "llama-3-8b-train".into(),
        size: Some(ModelSize::B70),
        ..Default::default()
    })
    .unwrap();
    assert!(peak_live_bytes(&g) > 560_000_000_000);
    let e = generate(&GenRequest {
        preset: "sd15".into(),
        size: Some(ModelSize::B1),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("sd15 has no --size option"), "{e}");
    assert_eq!(ModelSize::from_name("70B"), Some(ModelSize::B70));
    assert_eq!(ModelSize::from_name("13"), Some(ModelSize::B13));
    assert_eq!(ModelSize::from_name("7b"), None);
}

#[test]
fn vae_tiling_and_slicing_are_recorded_knobs() {
    let gen_body = |req: &GenRequest| {
        let (g, _) = generate(req).unwrap_or_else(|e| panic!("{req:?}: {e}"));
        valid(&g);
        g
    };
    for (name, native, grids) in [
        ("sd15", 512, [(640, 2), (1024, 3)]),
        ("sdxl", 1024, [(1408, 2), (2048, 3)]),
    ] {
        let plain = GenRequest {
            preset: name.into(),
            ..Default::default()
        };
        let tiled = GenRequest {
            vae_tiling: true,
            ..plain.clone()
        };
        // At and below the VAE's sample size tiling does not engage: the
        // plain decode.
        for res in [native - 64, native] {
            let a = gen_body(&GenRequest {
                resolution: Some(res),
                ..plain.clone()
            });
            let b = gen_body(&GenRequest {
                resolution: Some(res),
                ..tiled.clone()
            });
            assert_eq!(body(&a), body(&b), "{name} {res}");
            assert_eq!(b.header.extra["vae_tiles"], "1x1");
        }
        // Above it, each tile grid is its own recorded family.
        let p = preset(name).unwrap();
        for (res, n) in grids {
            assert_eq!(vae_tile_grid(name, res), Some(n));
            let v = Variant {
                vae_tiling: Some(n),
                ..Variant::default_for(p)
            };
            assert!(p.variants().contains_key(&v), "{name} {n}x{n}");
            let a = gen_body(&GenRequest {
                resolution: Some(res),
                ..plain.clone()
            });
            let b = gen_body(&GenRequest {
                resolution: Some(res),
                ..tiled.clone()
            });
            assert_eq!(b.header.extra["vae_tiles"], format!("{n}x{n}"));
            assert!(b.num_allocs() > a.num_allocs(), "{name} {res}");
        }
        // A grid that was not recorded says which were.
        let e = generate(&GenRequest {
            resolution: Some(native * 3),
            ..tiled.clone()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("was not recorded with") && e.contains("--vae-tiling (2x2 tiles)"),
            "{e}"
        );
        // Slicing: at batch 1 the plain decode; at batch 2 two decodes of
        // one image; beyond, the second one repeated, event for event as
        // recorded.
        let sliced = GenRequest {
            vae_slicing: true,
            ..plain.clone()
        };
        assert_eq!(body(&gen_body(&plain)), body(&gen_body(&sliced)));
        let two = |r: &GenRequest| {
            gen_body(&GenRequest {
                batch: Some(2),
                ..r.clone()
            })
        };
        assert!(two(&sliced).num_allocs() > two(&plain).num_allocs());
        let v = Variant {
            vae_slicing: true,
            ..Variant::default_for(p)
        };
        let checks = p.batch_recordings(&v);
        assert_eq!(checks.len(), 1, "{name}");
        for e in checks {
            let rec = read_recording_bytes(e.bytes, e.file).unwrap();
            let g = gen_body(&GenRequest {
                batch: Some(e.params["batch"].parse().unwrap()),
                resolution: Some(e.params["resolution"].parse().unwrap()),
                ..sliced.clone()
            });
            assert_eq!(body(&g), body(&rec.trace), "{}", e.file);
        }
        let eight = |r: &GenRequest| {
            peak_live_bytes(&gen_body(&GenRequest {
                batch: Some(8),
                ..r.clone()
            }))
        };
        assert!(eight(&sliced) < eight(&plain), "{name}");
        let e = generate(&GenRequest {
            batch: Some(3),
            steps: Some(5),
            ..sliced.clone()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("--steps with --vae-slicing"), "{e}");
    }
    let e = generate(&GenRequest {
        preset: "gpt-small".into(),
        vae_tiling: true,
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("gpt-small has no --vae-tiling option"), "{e}");
}

#[test]
fn offload_keeps_only_the_gpu_side() {
    for (name, models) in [("sd15", 3), ("sdxl", 4)] {
        let p = preset(name).unwrap();
        let peak = |offload: Offload| {
            let v = Variant {
                offload,
                ..Variant::default_for(p)
            };
            assert!(p.variants().contains_key(&v), "{name} {offload:?}");
            let (g, t) = generate(&GenRequest {
                preset: name.into(),
                offload: Some(offload),
                ..Default::default()
            })
            .unwrap();
            valid(&g);
            if offload != Offload::None {
                assert!(t.name.ends_with(&format!("--offload {}", offload.name())));
            }
            let empties = g
                .events
                .iter()
                .filter(|e| matches!(e, Event::EmptyCache))
                .count();
            (peak_live_bytes(&g), empties)
        };
        let (none, e0) = peak(Offload::None);
        let (model, e1) = peak(Offload::Model);
        let (sequential, e2) = peak(Offload::Sequential);
        // enable_model_cpu_offload() empties the cache once, each hook that
        // moves the previous model back once more, and the end of the call
        // once: 1 + (models − 1) + 1.
        assert_eq!((e0, e1, e2), (0, models + 1, 0), "{name}");
        assert!(
            sequential < model && model < none,
            "{name}: {sequential} {model} {none}"
        );
    }
    let e = generate(&GenRequest {
        preset: "flux".into(),
        offload: Some(Offload::Model),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("flux has no --offload option"), "{e}");
    let e = generate(&GenRequest {
        preset: "flux".into(),
        resolution: Some(520),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("multiple of 16"), "{e}");
    assert_eq!(Offload::from_name("Sequential"), Some(Offload::Sequential));
}

#[test]
fn a_leak_grows_with_the_steps_and_empty_cache_does_not_free_it() {
    let p = preset("gpt-small").unwrap();
    for (leak, empty_cache) in [(true, false), (true, true)] {
        let v = Variant {
            leak,
            empty_cache,
            ..Variant::default_for(p)
        };
        assert!(p.variants().contains_key(&v), "{}", v.describe(p));
    }
    let base = GenRequest {
        preset: "gpt-small".into(),
        seq: Some(384),
        batch: Some(4),
        leak: true,
        ..Default::default()
    };
    let run = |req: GenRequest| {
        let (g, _) = generate(&req).unwrap_or_else(|e| panic!("{req:?}: {e}"));
        valid(&g);
        let empties = g
            .events
            .iter()
            .filter(|e| matches!(e, Event::EmptyCache))
            .count();
        (peak_live_bytes(&g), empties, g.num_allocs())
    };
    let (three, e3, a3) = run(base.clone());
    let (ten, e10, a10) = run(GenRequest {
        steps: Some(10),
        ..base.clone()
    });
    assert_eq!((e3, e10), (0, 0));
    assert!(a10 > a3);
    // Each step keeps its fp32 logits (batch × seq × vocab × 4 bytes).
    let logits = 4 * 384 * 8192 * 4;
    assert_eq!(ten - three, 7 * logits, "{ten} {three}");
    // Without the leak the steady state does not grow.
    let plain = |steps| {
        run(GenRequest {
            leak: false,
            steps,
            ..base.clone()
        })
        .0
    };
    assert_eq!(plain(Some(10)), plain(None));
    // empty_cache() after every step: one event per step, the same live
    // bytes.
    let (ec, n, _) = run(GenRequest {
        empty_cache: true,
        steps: Some(10),
        ..base.clone()
    });
    assert_eq!((ec, n), (ten, 10));
    let e = generate(&GenRequest {
        preset: "sd15".into(),
        leak: true,
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("sd15 has no --leak option"), "{e}");
}

#[test]
fn every_variant_is_a_request() {
    // `for_variant` names only the options a preset has, and the request
    // resolves back to the variant (the tile grid from the resolution).
    for p in PRESETS {
        for (v, entries) in p.variants() {
            let value = entries[0].params[p.scaling.param()].parse().unwrap();
            let base = GenRequest {
                preset: p.name.into(),
                seq: (p.scaling.param() == "seq").then_some(value),
                resolution: (p.scaling.param() == "resolution").then_some(value),
                ..Default::default()
            };
            let (q, w) = base.for_variant(&v).resolve().unwrap();
            assert_eq!((q.name, w), (p.name, v), "{}", v.describe(p));
        }
    }
}
