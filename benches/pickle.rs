//! Pickle reader throughput on the real PyTorch snapshots in
//! `../shared/traces/real/` (skipped with a message when absent), plus the
//! writer on the same data.
//!
//! Run with `cd benches && cargo bench --bench pickle`.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vramlab_traces::{PickleDoc, PickleWriter};

fn real_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/real")
}

fn real_files() -> Vec<(String, Vec<u8>)> {
    let dir = real_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!(
            "pickle bench: {} not found; skipping the real-snapshot benchmarks",
            dir.display()
        );
        return Vec::new();
    };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            Some((name, std::fs::read(&p).ok()?))
        })
        .collect();
    files.sort();
    files
}

fn bench_read(c: &mut Criterion) {
    let files = real_files();
    let mut group = c.benchmark_group("pickle_read");
    for (name, bytes) in &files {
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(name.as_str(), |b| {
            b.iter(|| PickleDoc::from_slice(black_box(bytes)).map(|d| d.node_count()))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("pickle_write");
    for (name, bytes) in &files {
        let Ok(doc) = PickleDoc::from_slice(bytes) else {
            continue;
        };
        let value = doc.root().to_value();
        let out_len = PickleWriter::new().to_vec(&value).len();
        group.throughput(Throughput::Bytes(out_len as u64));
        group.bench_function(name.as_str(), |b| {
            b.iter(|| PickleWriter::new().to_vec(black_box(&value)).len())
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_read
}
criterion_main!(benches);
