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

/// The colocated replay against the solo one on the same events: one
/// tenant (the per-event cost of the shared device and the lock-step), and
/// two tenants (each its own copy of the trace, a phase each in turn).
fn bench_colocate(c: &mut Criterion) {
    use vramlab_replay::{Step, Tenant, replay_colocated};
    let trace = repeated_trace(1_000_000);
    let opts = ReplayOptions {
        check_invariants: false,
        ..Default::default()
    };
    let v = TorchVersion::NEWEST;
    let tenant = |name: &str| Tenant {
        name: name.into(),
        trace: &trace,
        scenario: Scenario::native(AllocConf::new(v)),
        kv_util: None,
    };
    let mut g = c.benchmark_group("colocate");
    g.sample_size(10);
    g.throughput(Throughput::Elements(trace.events.len() as u64));
    let solo = Scenario::native(AllocConf::new(v));
    g.bench_function("solo_replay", |b| {
        b.iter(|| {
            black_box(
                solo.run(&trace, &opts)
                    .expect("replay")
                    .summary
                    .peak_reserved_bytes,
            )
        })
    });
    let one = [tenant("a")];
    g.bench_function("one_tenant", |b| {
        b.iter(|| {
            black_box(
                replay_colocated(&one, None, None, &[], &opts)
                    .expect("colocate")
                    .device_peak,
            )
        })
    });
    g.throughput(Throughput::Elements(2 * trace.events.len() as u64));
    let two = [tenant("a"), tenant("b")];
    let turns: Vec<Step> = (0..trace.phases.len() + 1)
        .flat_map(|_| {
            [0, 1].map(|t| Step {
                tenant: t,
                until_mark: true,
            })
        })
        .collect();
    g.bench_function("two_tenants", |b| {
        b.iter(|| {
            black_box(
                replay_colocated(&two, None, None, &turns, &opts)
                    .expect("colocate")
                    .device_peak,
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench_replay, bench_colocate);
criterion_main!(benches);
