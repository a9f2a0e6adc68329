//! The bundled corpus and generated workloads through the replay engine:
//! under the defaults, with no capacity limit, a replay's peak of requested
//! bytes is the trace's own peak of live bytes, and nothing runs out of
//! memory. The requests are those of the generator's tests
//! (`workloads/src/tests.rs`): unrecorded sizes, repeated steps, longer
//! decodes, VAE tiling and slicing, offloading, a leak.

use vramlab_allocator::AllocConf;
use vramlab_replay::{ReplayOptions, Scenario};
use vramlab_traces::Trace;
use vramlab_workloads::{
    Attention, GenRequest, Offload, Precision, corpus, generate, peak_live_bytes,
    read_recording_bytes,
};

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
fn the_corpus_replays_to_its_live_peak() {
    for e in corpus() {
        let r = read_recording_bytes(e.bytes, e.file).unwrap();
        assert_eq!(replay_peak(&r.trace), e.peak_live_bytes, "{}", e.file);
    }
}

/// Every request `workloads/src/tests.rs` checks a generated trace of.
fn requests() -> Vec<GenRequest> {
    let mut out = Vec::new();
    let unrecorded = [
        ("gpt-small", Some(777), None),
        ("llama-3-8b-train", Some(4096), None),
        ("llama-3-8b-infer", Some(3000), None),
        ("sd15", None, Some(640)),
        ("sdxl", None, Some(1536)),
        ("flux", None, Some(640)),
    ];
    for (name, seq, resolution) in unrecorded {
        for batch in [1, 3] {
            out.push(GenRequest {
                preset: name.into(),
                batch: Some(batch),
                seq,
                resolution,
                ..Default::default()
            });
        }
    }
    out.push(GenRequest {
        preset: "gpt-small".into(),
        seq: Some(256),
        steps: Some(10),
        ..Default::default()
    });
    out.push(GenRequest {
        preset: "sd15".into(),
        batch: Some(2),
        resolution: Some(576),
        steps: Some(30),
        ..Default::default()
    });
    let decode = GenRequest {
        preset: "llama-3-8b-infer".into(),
        seq: Some(1000),
        batch: Some(2),
        new_tokens: Some(300),
        ..Default::default()
    };
    for (precision, attention) in [
        (Precision::Int8, Attention::Flash),
        (Precision::Nf4, Attention::Flash),
        (Precision::Bf16, Attention::Eager),
    ] {
        out.push(GenRequest {
            precision: Some(precision),
            attention: Some(attention),
            batch: None,
            ..decode.clone()
        });
    }
    out.push(GenRequest {
        new_tokens: Some(5),
        ..decode.clone()
    });
    out.push(decode);
    for (name, native, grids) in [("sd15", 512, [640, 1024]), ("sdxl", 1024, [1408, 2048])] {
        for resolution in [native - 64, native].into_iter().chain(grids) {
            for vae_tiling in [false, true] {
                out.push(GenRequest {
                    preset: name.into(),
                    resolution: Some(resolution),
                    vae_tiling,
                    ..Default::default()
                });
            }
        }
        for batch in [None, Some(2), Some(8)] {
            for vae_slicing in [false, true] {
                out.push(GenRequest {
                    preset: name.into(),
                    batch,
                    vae_slicing,
                    ..Default::default()
                });
            }
        }
        for offload in [Offload::None, Offload::Model, Offload::Sequential] {
            out.push(GenRequest {
                preset: name.into(),
                offload: Some(offload),
                ..Default::default()
            });
        }
    }
    let leak = GenRequest {
        preset: "gpt-small".into(),
        seq: Some(384),
        batch: Some(4),
        leak: true,
        ..Default::default()
    };
    for (leak_on, empty_cache, steps) in [
        (true, false, None),
        (true, false, Some(10)),
        (false, false, None),
        (false, false, Some(10)),
        (true, true, Some(10)),
    ] {
        out.push(GenRequest {
            leak: leak_on,
            empty_cache,
            steps,
            ..leak.clone()
        });
    }
    out
}

#[test]
fn generated_workloads_replay_to_their_live_peak() {
    for req in requests() {
        let (trace, _) = generate(&req).unwrap_or_else(|e| panic!("{req:?}: {e}"));
        assert_eq!(replay_peak(&trace), peak_live_bytes(&trace), "{req:?}");
    }
}
