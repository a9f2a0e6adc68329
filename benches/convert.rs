//! Conversion throughput: PyTorch snapshot → trace (parse + typed model +
//! conversion with initial-state rebuild), and trace → binary → trace, on
//! the real snapshots in ../shared/traces/real/ (skipped when absent).
//!
//!     cd benches && cargo bench --bench convert

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vramlab_traces::snapshot::{SizeRules, read_snapshot, snapshot_to_traces};
use vramlab_traces::{read_binary, write_binary};

fn bench_convert(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/real");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} is not present", dir.display());
        return;
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    files.sort();
    let mut g = c.benchmark_group("convert");
    g.sample_size(10);
    for f in files {
        let bytes = std::fs::read(&f).expect("read snapshot");
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(format!("snapshot_to_trace/{name}"), |b| {
            b.iter(|| {
                let s = read_snapshot(&bytes, "s").expect("snapshot");
                black_box(
                    snapshot_to_traces(&s, "s", &SizeRules::default())
                        .expect("convert")
                        .len(),
                )
            })
        });
        let trace = snapshot_to_traces(
            &read_snapshot(&bytes, "s").expect("snapshot"),
            "s",
            &SizeRules::default(),
        )
        .expect("convert")
        .remove(0);
        let mut vlt = Vec::new();
        write_binary(&trace, &mut vlt, true, "t").expect("write");
        g.throughput(Throughput::Elements(trace.events.len() as u64));
        g.bench_function(format!("vlt_zst_round_trip/{name}"), |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(vlt.len());
                write_binary(&trace, &mut out, true, "t").expect("write");
                black_box(read_binary(out.as_slice(), "t").expect("read").events.len())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_convert);
criterion_main!(benches);
