//! The driver placement model against the addresses an H200 (driver
//! 580.159.04) really returned: every cudaMalloc and cuMemAddressReserve of
//! the `grow`, `mixed`, `reuse`, `sizes` and `vmm` experiments, as offsets
//! from each experiment's first address (`tests/data/driver-placement-h200.txt`,
//! derived from `docs/results/driver-placement-h200/` by
//! `scripts/driver_placement.py --fixture`). The model must predict all of
//! them exactly, free-running (it never sees the recorded addresses).

use std::collections::HashMap;

use vramlab_allocator::Device;
use vramlab_allocator::{Placement, SimDevice};

const MIB: u64 = 1 << 20;

/// What a fresh process held before its first call, rebuilt by the model
/// itself from an empty heap (see `PROLOGUE` in `scripts/driver_placement.py`):
/// a region with 24 MiB free at its top, 64 MiB under it, a newer region
/// with one 2 MiB slot, and 384 MiB under that.
fn prologue(exp: &str) -> &'static [u64] {
    match exp {
        "grow" | "mixed" | "sizes" => &[8, 64, 30, 384],
        _ => &[],
    }
}

struct Call {
    op: String,
    size: u64,
    offset: i64,
}

fn experiments() -> Vec<(String, Vec<Call>)> {
    let text = include_str!("data/driver-placement-h200.txt");
    let mut out: Vec<(String, Vec<Call>)> = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["exp", name] => out.push((name.to_string(), Vec::new())),
            [op, size, offset] => out.last_mut().unwrap().1.push(Call {
                op: op.to_string(),
                size: size.parse::<u64>().unwrap() * MIB,
                offset: offset.parse::<i64>().unwrap() * MIB as i64,
            }),
            _ => panic!("bad fixture line {line:?}"),
        }
    }
    out
}

fn replay(exp: &str, calls: &[Call]) -> (usize, usize) {
    let mut d = SimDevice::unlimited();
    d.set_placement(Placement::Driver);
    for &s in prologue(exp) {
        d.malloc(s * MIB).unwrap();
    }
    let mut base: Option<u64> = None;
    let mut at: HashMap<i64, (u64, u64)> = HashMap::new();
    let (mut ok, mut n) = (0, 0);
    for (k, c) in calls.iter().enumerate() {
        match c.op.as_str() {
            "malloc" | "reserve" => {
                let p = if c.op == "malloc" {
                    d.malloc(c.size)
                } else {
                    d.reserve(c.size)
                }
                .unwrap();
                let b = *base.get_or_insert(p);
                let got = p as i64 - b as i64;
                n += 1;
                if got == c.offset {
                    ok += 1;
                } else {
                    eprintln!(
                        "{exp} call {k}: {} of {} MiB at {} MiB, model says {} MiB",
                        c.op,
                        c.size / MIB,
                        c.offset / MIB as i64,
                        got / MIB as i64
                    );
                }
                at.insert(c.offset, (p, c.size));
            }
            "free" => {
                let (p, s) = at.remove(&c.offset).expect("free of an unknown offset");
                d.free(p, s).unwrap();
            }
            other => panic!("unknown op {other}"),
        }
    }
    (ok, n)
}

#[test]
fn driver_model_predicts_every_recorded_h200_address() {
    let exps = experiments();
    let names: Vec<&str> = exps.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["grow", "mixed", "reuse", "sizes", "vmm"]);
    let mut total = (0, 0);
    for (name, calls) in &exps {
        let (ok, n) = replay(name, calls);
        assert_eq!(ok, n, "{name}: {ok} of {n} addresses predicted");
        total = (total.0 + ok, total.1 + n);
    }
    assert_eq!(total, (488, 488));
}

#[test]
fn ascending_model_misses_the_h200_order() {
    // The bump placement gets the first address of each experiment (by
    // definition) and, in `vmm`, the reservations that ascend.
    let mut ok = 0;
    for (name, calls) in &experiments() {
        let mut d = SimDevice::unlimited();
        d.set_placement(Placement::Ascending);
        let mut base = None;
        let mut at: HashMap<i64, (u64, u64)> = HashMap::new();
        for c in calls {
            if c.op == "free" {
                let (p, s) = at.remove(&c.offset).unwrap();
                d.free(p, s).unwrap();
                continue;
            }
            let p = if c.op == "malloc" {
                d.malloc(c.size)
            } else {
                d.reserve(c.size)
            }
            .unwrap();
            let b = *base.get_or_insert(p);
            ok += usize::from(p as i64 - b as i64 == c.offset);
            at.insert(c.offset, (p, c.size));
            let _ = name;
        }
    }
    assert!(ok < 20, "ascending predicted {ok} of 488");
}
