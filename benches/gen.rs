//! Generator throughput: instantiating a learned template into a trace of
//! about a million events (the GPT-small and Llama-3-8B training templates
//! with their step repeated), and learning a template from the compiled-in
//! corpus.
//!
//! Run with `cd benches && cargo bench --bench gen`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vramlab_workloads::{Variant, load_template, preset};

fn bench_generate(c: &mut Criterion) {
    let mut g = c.benchmark_group("gen");
    for name in ["gpt-small", "llama-3-8b-train"] {
        let p = preset(name).expect("preset");
        let Ok(t) = load_template(p, &Variant::default_for(p)) else {
            eprintln!("gen bench: no corpus for {name}; skipped");
            continue;
        };
        // Enough repeated steps for at least 1M events.
        let recorded = t.recorded_steps().unwrap_or(1);
        let mut steps = recorded;
        let mut big = t
            .instantiate(2, p.default_value * 2, Some(steps))
            .expect("instantiate");
        while big.events.len() < 1_000_000 {
            let per_step = (big.events.len() / steps as usize).max(1);
            steps += ((1_000_000 - big.events.len()) / per_step) as u32 + 1;
            big = t
                .instantiate(2, p.default_value * 2, Some(steps))
                .expect("instantiate");
        }
        let one = t
            .instantiate(1, p.default_value, None)
            .expect("instantiate");
        eprintln!(
            "gen bench: {name}: {} events with --steps {steps} --batch 2",
            big.events.len()
        );
        g.throughput(Throughput::Elements(big.events.len() as u64));
        g.bench_function(
            format!("instantiate/{name}/{}k-events", big.events.len() / 1000),
            |b| {
                b.iter(|| {
                    black_box(
                        t.instantiate(2, black_box(p.default_value * 2), Some(steps))
                            .expect("instantiate"),
                    )
                })
            },
        );
        g.throughput(Throughput::Elements(one.events.len() as u64));
        g.bench_function(format!("learn/{name}"), |b| {
            b.iter(|| black_box(load_template(p, &Variant::default_for(p)).expect("learn")))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench_generate
}
criterion_main!(benches);
