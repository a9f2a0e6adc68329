//! Malloc/free cost per policy: replay throughput (events per second) of
//! every policy on the bundled traces, each repeated to ~300k events.
//!
//!     cd benches && cargo bench --bench policies

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vramlab_allocator::TorchVersion;
use vramlab_replay::ReplayOptions;
use vramlab_replay::parse_grid_line;
use vramlab_traces::{Trace, repeat};

fn repeated(base: &Trace, min_events: usize) -> Trace {
    repeat(base, min_events)
}

fn bench_policies(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("workloads/data")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| vramlab_traces::Format::from_path(p).is_some())
        .collect();
    files.sort();
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        ..Default::default()
    };
    for f in files {
        let Ok(base) = vramlab_replay::Inputs::new([&f]).trace() else {
            continue;
        };
        if base.initial.is_some() || base.events.is_empty() {
            continue;
        }
        let trace = repeated(&base, 300_000);
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let mut g = c.benchmark_group(format!("policy/{name}"));
        g.throughput(Throughput::Elements(trace.events.len() as u64));
        g.sample_size(10);
        for line in [
            "default",
            "expandable_segments:True",
            "policy=direct",
            "policy=bfc allow_growth:true",
            "policy=async",
            "policy=stitch",
        ] {
            let entry = parse_grid_line(line, TorchVersion::NEWEST).expect("grid line");
            let s = entry.scenario(None);
            g.bench_function(entry.label(), |b| {
                b.iter(|| {
                    black_box(
                        s.run(&trace, &opts)
                            .expect("replay")
                            .summary
                            .peak_reserved_bytes,
                    )
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench_policies);
criterion_main!(benches);
