//! Replay throughput: events per second of the native policy on a ~1M-event
//! trace (the bundled GPT training-step recording, repeated), for the
//! default settings and a few others.
//!
//!     cd benches && cargo bench --bench replay

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{ReplayOptions, Scenario};
use vramlab_traces::{Trace, repeat};

/// The bundled trace repeated until it has at least `min_events` events.
fn repeated_trace(min_events: usize) -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let base = vramlab_replay::Inputs::new([&path])
        .trace()
        .expect("bundled trace");
    repeat(&base, min_events)
}

fn bench_replay(c: &mut Criterion) {
    let trace = repeated_trace(1_000_000);
    let opts = ReplayOptions {
        check_invariants: false,
        ..Default::default()
    };
    let mut g = c.benchmark_group("replay");
    g.throughput(Throughput::Elements(trace.events.len() as u64));
    g.sample_size(10);
    let v = TorchVersion::NEWEST;
    for (name, conf) in [
        ("default", ""),
        ("expandable_segments", "expandable_segments:True"),
        ("max_split_size_mb_256", "max_split_size_mb:256"),
        ("roundup_power2_divisions_4", "roundup_power2_divisions:4"),
    ] {
        let scenario = Scenario::native(AllocConf::parse(conf, v).expect("conf"));
        g.bench_function(name, |b| {
            b.iter(|| {
                black_box(
                    scenario
                        .run(&trace, &opts)
                        .expect("replay")
                        .summary
                        .peak_reserved_bytes,
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_replay);
criterion_main!(benches);
