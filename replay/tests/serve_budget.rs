//! The serving budget on decode-step forwards of a Llama-3.2-1B-shaped
//! model (tests/serve/, recorded on the CPU by
//! workloads/record/examples/llama_1b_decode_forwards.py).
//!
//! PyTorch's own graph pool (torch 2.15 on the fake device, replaying the
//! start-ups `serve-budget --emit-trace` writes, its pool read from its own
//! snapshot by scripts/serve_budget_check.py) is 58 MiB in 5 segments for
//! the 8 sizes captured largest first and 90 MiB in 6 smallest first: the
//! figures below (docs/results/serve-budget.md).

use std::path::{Path, PathBuf};

use vramlab_allocator::AllocConf;
use vramlab_replay::{ForwardRecording, KvCache, Scenario, serve_budget};

const MIB: u64 = 1 << 20;
const SIZES_DESC: [u64; 8] = [128, 64, 32, 16, 8, 4, 2, 1];

fn recording(name: &str) -> ForwardRecording {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/serve")
        .join(name);
    let t = vramlab_traces::read_traces(&p, None, &Default::default(), None)
        .expect("read")
        .remove(0);
    ForwardRecording::from_trace(&t).expect("forwards")
}

fn scenario() -> Scenario {
    Scenario::native(AllocConf::default())
}

#[test]
fn the_pool_from_three_recorded_sizes_is_pytorchs_for_eight() {
    for name in [
        "llama-1b-decode-bs1-16-128.csv",
        "llama-1b-decode-bs1-128.csv.gz",
    ] {
        let rec = recording(name);
        let desc = serve_budget(&rec, &SIZES_DESC, &scenario(), None, None).expect("desc");
        assert_eq!(
            (desc.graph_pool_bytes, desc.graph_pool_segments),
            (58 * MIB, 5),
            "{name}"
        );
        let mut asc = SIZES_DESC;
        asc.reverse();
        let asc = serve_budget(&rec, &asc, &scenario(), None, None).expect("asc");
        assert_eq!(
            (asc.graph_pool_bytes, asc.graph_pool_segments),
            (90 * MIB, 6),
            "{name}"
        );
        let after: Vec<u64> = asc
            .captures
            .iter()
            .map(|c| c.pool_bytes_after / MIB)
            .collect();
        assert_eq!(after, [34, 34, 34, 54, 54, 56, 58, 90], "{name}");
        // vLLM's two-graph extrapolation: first + 7 × max(second's growth, 1 MiB).
        assert_eq!(desc.linear_estimate_bytes, 65 * MIB, "{name}");
        assert_eq!(asc.linear_estimate_bytes, 41 * MIB, "{name}");
    }
    let rec = recording("llama-1b-decode-bs1-16-128.csv");
    let d = serve_budget(&rec, &SIZES_DESC, &scenario(), None, None).expect("desc");
    let interpolated: Vec<u64> = d
        .captures
        .iter()
        .filter(|c| c.interpolated)
        .map(|c| c.batch)
        .collect();
    assert_eq!(interpolated, [64, 32, 8, 4, 2]);
}

#[test]
fn the_kv_cache_is_the_largest_that_fits_the_budget() {
    let rec = recording("llama-1b-decode-bs1-16-128.csv");
    let kv = KvCache {
        bytes_per_token: 32768,
        tensors: 16,
        block_tokens: 16,
    };
    let budget = 20 << 30;
    let s = scenario();
    let a = serve_budget(&rec, &SIZES_DESC, &s, Some(budget), Some(kv)).expect("budget");
    let tokens = a.kv_tokens.expect("fits");
    assert_eq!(tokens % 16, 0);
    assert!(a.peak_reserved_bytes.expect("peak") <= budget);
    // One more block does not fit: the start-up with it runs out of memory.
    let more =
        vramlab_replay::start_up_trace(&rec, &SIZES_DESC, Some((kv, tokens + 16))).expect("trace");
    let run = s
        .with_capacity(Some(budget))
        .run(&more, &Default::default())
        .expect("replay");
    assert!(run.oom.is_some());
}

#[test]
fn traces_without_marked_forwards_are_refused_with_the_reason() {
    let t = vramlab_traces::read_traces(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/pools/graph-shared.csv"),
        None,
        &Default::default(),
        None,
    )
    .expect("read")
    .remove(0);
    let e = ForwardRecording::from_trace(&t).expect_err("no marks");
    assert!(e.contains("names a batch size"), "{e}");
    assert_eq!(
        recording("llama-1b-decode-bs1-16-128.csv").sizes(),
        [1, 16, 128]
    );
}

#[test]
fn captured_forwards_are_read_as_the_forwards_they_capture() {
    use vramlab_traces::{Event, PhaseMark, PoolDecl};
    let p: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/serve/llama-1b-decode-bs1-16-128.csv");
    let t = vramlab_traces::read_traces(&p, None, &Default::default(), None)
        .expect("read")
        .remove(0);
    // The same recording with each forward captured (an eager warm-up is
    // not needed: the phase is read as what its capture holds).
    let mut c = t.clone();
    c.pools = vec![PoolDecl::graph((0, 1))];
    let s = c.stream_index(7);
    c.events.clear();
    c.phases.clear();
    let starts: Vec<usize> = t.phases.iter().map(|m| m.event_index as usize).collect();
    for (i, e) in t.events.iter().enumerate() {
        if let Some(k) = starts.iter().position(|&x| x == i) {
            if k > 0 {
                c.events.push(Event::CaptureEnd { pool: 0 });
            }
            c.phases.push(PhaseMark {
                event_index: c.events.len() as u64,
                label: t.phases[k].label.clone(),
            });
            c.events.push(Event::CaptureBegin { pool: 0, stream: s });
        }
        let mut e = *e;
        if let Event::Alloc { stream, .. } = &mut e {
            if !c.phases.is_empty() {
                *stream = s;
            }
        }
        c.events.push(e);
    }
    c.events.push(Event::CaptureEnd { pool: 0 });
    let a = serve_budget(
        &ForwardRecording::from_trace(&c).expect("captured"),
        &SIZES_DESC,
        &scenario(),
        None,
        None,
    )
    .expect("budget");
    assert_eq!(a.graph_pool_bytes, 58 * MIB);
}
