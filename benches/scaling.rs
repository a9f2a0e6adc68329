//! Does a replay stay linear on pathological traces? Replays every shape of
//! `vramlab_replay::stress` (many deferred frees, many streams, many free
//! blocks in one segment, many unmaps of one expandable reservation) under
//! every policy at `n` and at `16 n`, and reports nanoseconds per event and
//! the ratio of the times: about 16 for linear work, 256 for quadratic.
//!
//!     cd benches
//!     cargo bench --bench scaling                      # table
//!     cargo bench --bench scaling -- --csv FILE        # and a CSV
//!     cargo bench --bench scaling -- --check           # exit 1 above x100
//!
//! Cargo runs benchmarks in their package directory, `benches/`: a relative
//! FILE is relative to it (`--csv ../docs/bench/scaling.csv`).
//!
//! Linear work still shows ratios of 17-60 here: the large traces no longer
//! fit in the caches, and most structures are ordered maps (log n per
//! operation). The limit of 100 leaves room for that and for a busy
//! machine, and still catches quadratic work (256).
//!
//! Times are the best of five runs (the least disturbed by other work on
//! the machine); a ratio above the limit is measured again before it
//! counts.

use std::time::Instant;

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::stress::SHAPES;
use vramlab_replay::{PolicySpec, ReplayOptions, Scenario};
use vramlab_traces::Trace;

/// Size of the small trace (the large one is 16 times larger). 16 x 2,000
/// blocks of 21 MiB stay under BFC's default memory limit.
const N: u32 = 2_000;
/// Largest accepted ratio of the times at 16 N and N.
const LIMIT: f64 = 100.0;

fn policies() -> Vec<Scenario> {
    let v = TorchVersion::NEWEST;
    let mut out: Vec<Scenario> = ["native", "direct", "bfc", "async", "stitch"]
        .iter()
        .map(|p| Scenario::new(PolicySpec::parse(p, "", v).expect("default settings")))
        .collect();
    out.push(Scenario::native(
        AllocConf::parse("expandable_segments:True", v).expect("valid settings"),
    ));
    out
}

/// Best of five replay times, in seconds.
fn seconds(t: &Trace, s: &Scenario) -> f64 {
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 100,
        ..Default::default()
    };
    (0..5)
        .map(|_| {
            let start = Instant::now();
            let run = s.run(t, &opts).expect("the stress traces are valid");
            assert!(run.oom.is_none(), "{}: unexpected OOM", s.label());
            std::hint::black_box(run);
            start.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    let csv_path = args
        .iter()
        .position(|a| a == "--csv")
        .and_then(|i| args.get(i + 1));
    let mut csv =
        String::from("shape,policy,events_n,events_16n,ns_per_event_n,ns_per_event_16n,ratio\n");
    let mut failures = Vec::new();
    println!(
        "{:<14} {:<30} {:>9} {:>9} {:>9} {:>7}",
        "shape", "policy", "events", "ns/ev n", "ns/ev 16n", "ratio"
    );
    for shape in SHAPES {
        let (small, big) = ((shape.build)(N), (shape.build)(16 * N));
        for s in policies() {
            let (mut a, mut b) = (seconds(&small, &s), seconds(&big, &s));
            if b / a > LIMIT {
                // Measure again before blaming the policy.
                a = a.min(seconds(&small, &s));
                b = b.min(seconds(&big, &s));
            }
            let ratio = b / a;
            let per = |secs: f64, t: &Trace| secs * 1e9 / t.events.len() as f64;
            println!(
                "{:<14} {:<30} {:>9} {:>9.1} {:>9.1} {:>7.1}",
                shape.name,
                s.label(),
                big.events.len(),
                per(a, &small),
                per(b, &big),
                ratio
            );
            csv.push_str(&format!(
                "{},{},{},{},{:.1},{:.1},{ratio:.2}\n",
                shape.name,
                s.label(),
                small.events.len(),
                big.events.len(),
                per(a, &small),
                per(b, &big)
            ));
            if ratio > LIMIT {
                failures.push(format!("{} under {}: x{ratio:.0}", shape.name, s.label()));
            }
        }
    }
    if let Some(path) = csv_path {
        std::fs::write(path, &csv).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
    if failures.is_empty() {
        println!("every ratio is at most {LIMIT} (linear: 16, quadratic: 256)");
    } else {
        eprintln!("superlinear replay time: {failures:?}");
        if check {
            std::process::exit(1);
        }
    }
}
