//! The policy benchmark: every policy and setting of a grid on every
//! trace, its memory figures, and its replay throughput on the trace
//! repeated to a length where timing is stable.

use std::time::Instant;

use vramlab_traces::Trace;

use crate::analysis::grid::GridEntry;
use crate::engine::run::Summary;
use crate::engine::start::Start;
use crate::engine::{ReplayError, ReplayOptions};

/// One (trace, setting) of the benchmark.
#[derive(Debug, Clone)]
pub struct BenchRow {
    /// Trace name.
    pub trace: String,
    /// Setting label.
    pub setting: String,
    /// Events per replay.
    pub events: u64,
    /// Headline figures.
    pub summary: Summary,
    /// Replay throughput, events per second (fastest of the repetitions).
    pub events_per_second: f64,
}

/// Replays every trace under every grid entry: the figures from one
/// replay, the throughput from the fastest of `repeat` timed replays of the
/// trace repeated to `min_events`. A trace recorded mid-run starts fresh
/// (the only start every policy can make).
pub fn bench(
    traces: &[(String, Trace)],
    grid: &[GridEntry],
    min_events: usize,
    repeat: u32,
) -> Result<Vec<BenchRow>, (String, String, ReplayError)> {
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        start: Start::Fresh,
        ..Default::default()
    };
    let mut rows = Vec::new();
    for (name, t) in traces {
        let timed_trace = vramlab_traces::repeat(&t.with_fresh_start(), min_events);
        for g in grid {
            let err = |e| (name.clone(), g.label(), e);
            let s = g.scenario(None);
            let run = s.run(t, &opts).map_err(err)?;
            let mut best = f64::INFINITY;
            for _ in 0..repeat.max(1) {
                let t0 = Instant::now();
                let r = s.run(&timed_trace, &opts).map_err(err)?;
                best = best.min(t0.elapsed().as_secs_f64());
                std::hint::black_box(r.summary.peak_reserved_bytes);
            }
            rows.push(BenchRow {
                trace: name.clone(),
                setting: g.label(),
                events: run.summary.events,
                events_per_second: timed_trace.events.len() as f64 / best,
                summary: run.summary,
            });
        }
    }
    Ok(rows)
}
