//! A sweep of the default grid (44 settings) over a 100k-event trace, in
//! parallel on all cores: the figure issue 6 asks for (under 2 s on 2
//! cores).
//!
//!     cd benches && cargo bench --bench sweep

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use vramlab_allocator::TorchVersion;
use vramlab_replay::{default_grid, run_sweep};
use vramlab_traces::{Trace, repeat};

fn trace_100k() -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let base = vramlab_replay::Inputs::new([&path])
        .trace()
        .expect("bundled trace");
    repeat(&base, 100_000)
}

fn bench_sweep(c: &mut Criterion) {
    let traces = vec![("gpt-small-train x31".to_string(), trace_100k())];
    let grid = default_grid(TorchVersion::NEWEST);
    assert!(grid.len() >= 40);
    let mut g = c.benchmark_group("sweep");
    g.sample_size(10);
    g.bench_function(
        format!("default_grid_{}_settings_100k_events", grid.len()),
        |b| {
            b.iter(|| {
                black_box(
                    run_sweep(
                        &traces,
                        &grid,
                        Some(24 << 30),
                        Default::default(),
                        None,
                        None,
                        &|| {},
                    )
                    .expect("sweep")
                    .len(),
                )
            })
        },
    );
    g.finish();
}

criterion_group!(benches, bench_sweep);
criterion_main!(benches);
