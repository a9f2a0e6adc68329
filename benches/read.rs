//! Reading throughput (bytes per second) of the native CSV and the binary
//! `.vlt` format on a 1,000,000-event trace: the bundled GPT training step
//! repeated with fresh ids, written by vramlab's own writers (numeric ids),
//! and the CSV once more with text ids (`17_3`) as other tools write them.
//!
//!     cd benches && cargo bench --bench read

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vramlab_traces::{Trace, read_binary, read_csv, repeat, write_binary, write_csv};

const EVENTS: usize = 1_000_000;

/// The bundled trace repeated to [`EVENTS`] events, ids renamed per copy.
fn million() -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let base = vramlab_replay::Inputs::new([&path])
        .trace()
        .expect("bundled trace");
    // Exactly EVENTS: the last repetition is cut (its blocks stay live).
    let mut t = repeat(&base, EVENTS);
    t.events.truncate(EVENTS);
    t
}

/// The CSV with every id `n` written as `n_copy` (text ids).
fn with_text_ids(csv: &[u8], ids_per_copy: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(csv.len() * 11 / 10);
    for line in csv.split_inclusive(|&b| b == b'\n') {
        let mut cols = line.splitn(3, |&b| b == b',');
        let (Some(action), Some(id), rest) = (cols.next(), cols.next(), cols.next()) else {
            out.extend_from_slice(line);
            continue;
        };
        let digits = id.strip_suffix(b"\n").unwrap_or(id);
        match std::str::from_utf8(digits)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        {
            Some(n) => {
                out.extend_from_slice(action);
                let text = format!(",{}_{}", n % ids_per_copy, n / ids_per_copy);
                out.extend_from_slice(text.as_bytes());
                if digits.len() < id.len() {
                    out.push(b'\n');
                }
                if let Some(r) = rest {
                    out.push(b',');
                    out.extend_from_slice(r);
                }
            }
            None => out.extend_from_slice(line),
        }
    }
    out
}

fn bench_read(c: &mut Criterion) {
    let trace = million();
    let mut csv = Vec::new();
    write_csv(&trace, &mut csv, "1m.csv").expect("write csv");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/data/gpt-small-train.csv");
    let per_copy = vramlab_replay::Inputs::new([&path])
        .trace()
        .expect("bundled trace")
        .num_ids;
    let text = with_text_ids(&csv, u64::from(per_copy));
    let mut vlt = Vec::new();
    write_binary(&trace, &mut vlt, false, "1m.vlt").expect("write vlt");
    let mut vlt_zstd = Vec::new();
    write_binary(&trace, &mut vlt_zstd, true, "1m.vlt").expect("write vlt");
    // The readers agree on what they read.
    for (name, bytes) in [("csv", &csv), ("csv with text ids", &text)] {
        let t = read_csv(bytes.as_slice(), name).expect("read back");
        assert_eq!(t.events, trace.events, "{name}");
    }

    let mut g = c.benchmark_group("read_1m_events");
    g.sample_size(10);
    for (name, bytes) in [("csv", &csv), ("csv_text_ids", &text)] {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| read_csv(black_box(bytes.as_slice()), "1m.csv").map(|t| t.events.len()))
        });
    }
    for (name, bytes) in [("vlt", &vlt), ("vlt_zstd", &vlt_zstd)] {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| read_binary(black_box(bytes.as_slice()), "1m.vlt").map(|t| t.events.len()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_read);
criterion_main!(benches);
