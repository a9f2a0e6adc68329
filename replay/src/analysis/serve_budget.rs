//! The serving budget: how large a CUDA graph pool a serving engine's
//! start-up captures, and how much KV cache is left on a card.
//!
//! The input is a recording of the model's forward at a few batch sizes,
//! one phase per forward whose label names its size (`bs=8`, `batch 8`;
//! a phase that captures a graph counts as the forward it captures): the
//! events before the first forward are the engine's state (weights,
//! buffers). A start-up is then built as vLLM's runs it: the state, an
//! eager profile forward at the largest capture size, the KV cache, and for
//! each capture size in the given order an eager warm-up forward and a
//! capture of the same forward into one shared graph pool on a capture
//! stream (blocks the forward keeps are the graph's outputs and stay). A
//! forward at a size that was not recorded is interpolated allocation by
//! allocation between the two nearest recorded sizes (extrapolated beyond
//! them), which needs their allocation sequences to line up.
//!
//! Every figure is a replay of that start-up through the allocator: the
//! pool is its segments after the last capture, and the largest KV cache is
//! found by bisection on the card's budget.

use std::collections::BTreeMap;

use serde::Serialize;
use vramlab_traces::{AllocId, Event, PoolDecl, StreamIndex, Trace, TraceHeader};

use crate::engine::scenario::Scenario;
use crate::engine::{ReplayError, ReplayOptions};

/// A raw stream handle for the capture stream (any non-default stream).
const CAPTURE_STREAM: u64 = 7;

/// One recorded forward: its operations, ids local to the forward.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    /// The forward's `n`-th allocation, of `size` bytes.
    Alloc(u64),
    /// Frees the forward's allocation with this local index.
    Free(usize),
}

/// The forwards of a recording, by batch size, and the state before them.
#[derive(Debug, Clone)]
pub struct ForwardRecording {
    base: Trace,
    forwards: BTreeMap<u64, Vec<Op>>,
}

/// What `serve_budget` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServeBudget {
    /// Recorded forward sizes.
    pub recorded_sizes: Vec<u64>,
    /// Capture sizes in capture order.
    pub capture_sizes: Vec<u64>,
    /// The graph pool after every capture: bytes reserved.
    pub graph_pool_bytes: u64,
    /// Its segments.
    pub graph_pool_segments: u64,
    /// Per capture, in order.
    pub captures: Vec<CaptureStep>,
    /// vLLM's two-graph extrapolation of the pool (vllm#45178): the first
    /// capture's memory plus (N − 1) × the second capture's growth (at
    /// least 1 MiB), in the capture order.
    pub linear_estimate_bytes: u64,
    /// The memory the engine may use (`gpu_memory_utilization` × card).
    pub budget_bytes: Option<u64>,
    /// Peak reserved of the start-up without a KV cache.
    pub peak_reserved_without_kv_bytes: u64,
    /// Bytes per KV-cache token (all layers).
    pub kv_bytes_per_token: Option<u64>,
    /// Largest KV cache that fits the budget, in tokens (a multiple of the
    /// block size).
    pub kv_tokens: Option<u64>,
    /// Its bytes.
    pub kv_bytes: Option<u64>,
    /// Peak reserved with that KV cache.
    pub peak_reserved_bytes: Option<u64>,
}

/// One capture of the start-up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaptureStep {
    /// Batch size.
    pub batch: u64,
    /// Interpolated from the recorded sizes (not recorded itself).
    pub interpolated: bool,
    /// The pool's reserved bytes after this capture.
    pub pool_bytes_after: u64,
    /// What this capture added to the pool.
    pub growth_bytes: u64,
}

/// The KV cache part of a budget question.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvCache {
    /// Bytes per token, all layers together.
    pub bytes_per_token: u64,
    /// Tensors it is allocated as (one per layer in vLLM).
    pub tensors: u64,
    /// Tokens per block: the cache grows in whole blocks.
    pub block_tokens: u64,
}

/// Reads the batch size a phase label names (`bs=8`, `bs 8`, `batch=8`,
/// `batch 8`, `batch_size=8`).
pub fn batch_of_label(label: &str) -> Option<u64> {
    let l = label.to_ascii_lowercase();
    for key in ["batch_size", "batch", "bs"] {
        if let Some(i) = l.find(key) {
            let rest = l.get(i + key.len()..)?.trim_start_matches([' ', '=', ':']);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse::<u64>() {
                return Some(n);
            }
        }
    }
    None
}

impl ForwardRecording {
    /// Splits `trace` at its phase marks into the state before the first
    /// forward and one forward per phase whose label names a batch size.
    pub fn from_trace(trace: &Trace) -> Result<ForwardRecording, String> {
        if trace.initial.is_some() {
            return Err("serve-budget reads a recording of forwards from an empty allocator (this one starts mid-run): record the engine's start from the beginning".into());
        }
        let marks: Vec<(usize, Option<u64>, &str)> = trace
            .phases
            .iter()
            .map(|m| {
                (
                    m.event_index as usize,
                    batch_of_label(&m.label),
                    m.label.as_str(),
                )
            })
            .collect();
        let Some(first) = marks.iter().find(|m| m.1.is_some()) else {
            return Err("the trace has no phase whose label names a batch size (e.g. 'forward bs=8'): mark each recorded forward".into());
        };
        if let Some(i) = trace
            .events
            .get(..first.0)
            .and_then(|b| b.iter().position(|e| e.pool().is_some()))
        {
            return Err(format!(
                "event {i}, before the first forward, uses a private pool: serve-budget captures the forwards itself, so the engine's state before them must be eager"
            ));
        }
        let mut base = trace.clone();
        base.pools.clear();
        base.events.truncate(first.0);
        base.num_ids = base
            .events
            .iter()
            .filter_map(|e| match *e {
                Event::Alloc { id, .. } => Some(id),
                _ => None,
            })
            .max()
            .map_or(0, |m| m + 1);
        base.phases.clear();
        base.expected = None;
        let mut forwards = BTreeMap::new();
        for (i, &(start, batch, label)) in marks.iter().enumerate() {
            let Some(batch) = batch else { continue };
            let end = marks.get(i + 1).map_or(trace.events.len(), |m| m.0);
            let events = trace.events.get(start..end).unwrap_or(&[]);
            let ops = forward_ops(events);
            if forwards.insert(batch, ops).is_some() {
                return Err(format!(
                    "two phases record batch size {batch} (the second: '{label}')"
                ));
            }
        }
        Ok(ForwardRecording { base, forwards })
    }

    /// The recorded batch sizes.
    pub fn sizes(&self) -> Vec<u64> {
        self.forwards.keys().copied().collect()
    }

    /// The forward at `batch`: recorded, or interpolated between (or
    /// extrapolated from) the two nearest recorded sizes.
    fn forward(&self, batch: u64) -> Result<Vec<Op>, String> {
        if let Some(f) = self.forwards.get(&batch) {
            return Ok(f.clone());
        }
        // The two recorded sizes nearest to `batch` whose forwards line up
        // (the same allocations and frees in the same order), between
        // them where possible.
        let mut near: Vec<(&u64, &Vec<Op>)> = self.forwards.iter().collect();
        near.sort_by_key(|(s, _)| (s.abs_diff(batch), **s));
        let mut pairs: Vec<(u64, usize, usize)> = Vec::new();
        for i in 0..near.len() {
            for j in i + 1..near.len() {
                if let (Some(a), Some(b)) = (near.get(i), near.get(j)) {
                    let straddles = (*a.0 < batch) != (*b.0 < batch);
                    let cost = a.0.abs_diff(batch) + b.0.abs_diff(batch);
                    pairs.push((cost * 2 + u64::from(!straddles), i, j));
                }
            }
        }
        pairs.sort_unstable();
        let found = pairs.iter().find_map(|&(_, i, j)| {
            let (a, b) = (near.get(i)?, near.get(j)?);
            lined_up(a.1, b.1).then(|| if a.0 < b.0 { (*a, *b) } else { (*b, *a) })
        });
        let Some(((&ba, fa), (&bb, fb))) = found else {
            return Err(format!(
                "batch size {batch} was not recorded, and no two recorded forwards ({}) allocate in the same order to interpolate it from: record it",
                self.sizes()
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let ops = fa
            .iter()
            .zip(fb)
            .map(|(x, y)| match (x, y) {
                (Op::Alloc(sa), Op::Alloc(sb)) => {
                    let (sa, sb) = (*sa as i128, *sb as i128);
                    let v =
                        sa + (sb - sa) * (batch as i128 - ba as i128) / (bb as i128 - ba as i128);
                    Op::Alloc(v.max(0) as u64)
                }
                (op, _) => op.clone(),
            })
            .collect();
        Ok(ops)
    }
}

/// `true` when two forwards make the same allocations and frees in the
/// same order (sizes aside).
fn lined_up(a: &[Op], b: &[Op]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Op::Alloc(_), Op::Alloc(_)) => true,
            (Op::Free(i), Op::Free(j)) => i == j,
            _ => false,
        })
}

/// A forward's events as operations local to it; frees of blocks made
/// before it are left out (a forward frees what it made). A phase that
/// captures a graph is read as the captured forward: the events between its
/// first `capture_begin` and the `capture_end` that follows.
fn forward_ops(events: &[Event]) -> Vec<Op> {
    let events = match events
        .iter()
        .position(|e| matches!(e, Event::CaptureBegin { .. }))
    {
        Some(b) => {
            let rest = events.get(b + 1..).unwrap_or(&[]);
            let end = rest
                .iter()
                .position(|e| matches!(e, Event::CaptureEnd { .. }))
                .unwrap_or(rest.len());
            rest.get(..end).unwrap_or(&[])
        }
        None => events,
    };
    let mut local: BTreeMap<AllocId, usize> = BTreeMap::new();
    let mut ops = Vec::new();
    for e in events {
        match *e {
            Event::Alloc { id, size, .. } => {
                local.insert(id, local.len());
                ops.push(Op::Alloc(size));
            }
            Event::Free { id } | Event::FreeRequested { id } => {
                if let Some(&i) = local.get(&id) {
                    ops.push(Op::Free(i));
                }
            }
            _ => {}
        }
    }
    ops
}

/// Builds start-ups of one recording.
struct Builder<'a> {
    rec: &'a ForwardRecording,
    capture_stream: StreamIndex,
    trace: Trace,
}

impl Builder<'_> {
    fn new(rec: &ForwardRecording) -> Builder<'_> {
        let mut trace = rec.base.clone();
        trace.header = TraceHeader {
            source: format!("serve-budget start-up of {}", rec.base.header.source),
            ..rec.base.header.clone()
        };
        trace.pools = vec![PoolDecl::graph((0, 1))];
        let capture_stream = trace.stream_index(CAPTURE_STREAM);
        Builder {
            rec,
            capture_stream,
            trace,
        }
    }

    fn alloc(&mut self, size: u64, stream: StreamIndex) -> AllocId {
        let id = self.trace.num_ids;
        self.trace.num_ids += 1;
        self.trace.events.push(Event::Alloc { id, stream, size });
        id
    }

    /// Runs `ops` on `stream`; returns the ids still live after it.
    fn run(&mut self, ops: &[Op], stream: StreamIndex) -> Vec<AllocId> {
        let mut ids: Vec<Option<AllocId>> = Vec::new();
        for op in ops {
            match *op {
                Op::Alloc(size) => {
                    let id = self.alloc(size, stream);
                    ids.push(Some(id));
                }
                Op::Free(i) => {
                    if let Some(id) = ids.get_mut(i).and_then(Option::take) {
                        self.trace.events.push(Event::Free { id });
                    }
                }
            }
        }
        ids.into_iter().flatten().collect()
    }

    /// An eager forward: everything it keeps is freed after it.
    fn eager(&mut self, ops: &[Op]) {
        for id in self.run(ops, 0) {
            self.trace.events.push(Event::Free { id });
        }
    }

    /// The start-up: profile run, KV cache, warm-up and capture per size.
    /// Returns the trace and the index of each `CaptureEnd`.
    fn start_up(
        mut self,
        order: &[u64],
        kv: Option<(KvCache, u64)>,
    ) -> Result<(Trace, Vec<usize>), String> {
        let largest = order.iter().copied().max().unwrap_or(1);
        let profile = self.rec.forward(largest)?;
        self.eager(&profile);
        if let Some((kv, tokens)) = kv {
            let bytes = tokens.saturating_mul(kv.bytes_per_token);
            let n = kv.tensors.max(1);
            for _ in 0..n {
                self.alloc(bytes.div_ceil(n), 0);
            }
        }
        let mut ends = Vec::new();
        for &b in order {
            let ops = self.rec.forward(b)?;
            self.eager(&ops);
            self.trace.events.push(Event::CaptureBegin {
                pool: 0,
                stream: self.capture_stream,
            });
            self.run(&ops, self.capture_stream);
            self.trace.events.push(Event::CaptureEnd { pool: 0 });
            ends.push(self.trace.events.len() - 1);
        }
        Ok((self.trace, ends))
    }
}

/// The start-up trace for `order` (and a KV cache of `tokens`), as
/// `serve-budget --emit-trace` writes it.
pub fn start_up_trace(
    rec: &ForwardRecording,
    order: &[u64],
    kv: Option<(KvCache, u64)>,
) -> Result<Trace, String> {
    Builder::new(rec).start_up(order, kv).map(|(t, _)| t)
}

/// Pool bytes and segments after event `stop` (exclusive), replayed.
fn pool_after(
    trace: &Trace,
    scenario: &Scenario,
    stop: Option<usize>,
) -> Result<(u64, u64, u64, bool), ReplayError> {
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        final_segments: true,
        stop_before: stop.map(|s| s as u64),
        ..Default::default()
    };
    let run = scenario.run(trace, &opts)?;
    let pool: Vec<_> = run
        .final_segments
        .iter()
        .filter(|s| s.private_pool == Some(0))
        .collect();
    Ok((
        pool.iter().map(|s| s.size).sum(),
        pool.len() as u64,
        run.summary.peak_reserved_bytes,
        run.oom.is_none(),
    ))
}

/// Answers the serving-budget question (see the module documentation).
pub fn serve_budget(
    rec: &ForwardRecording,
    order: &[u64],
    scenario: &Scenario,
    budget: Option<u64>,
    kv: Option<KvCache>,
) -> Result<ServeBudget, String> {
    let err = |e: ReplayError| e.to_string();
    let unlimited = scenario.clone().with_capacity(None);
    let (trace, ends) = Builder::new(rec).start_up(order, None)?;
    let mut captures = Vec::new();
    let mut before = 0;
    for (&b, &end) in order.iter().zip(&ends) {
        let (after, _, _, _) = pool_after(&trace, &unlimited, Some(end + 1)).map_err(err)?;
        captures.push(CaptureStep {
            batch: b,
            interpolated: !rec.forwards.contains_key(&b),
            pool_bytes_after: after,
            growth_bytes: after.saturating_sub(before),
        });
        before = after;
    }
    let (pool, segments, peak_without, _) = pool_after(&trace, &unlimited, None).map_err(err)?;
    // vLLM's estimate (`profile_cudagraph_memory`, as vllm#45178 quotes
    // it): the first graph's memory, plus the second's marginal memory (at
    // least 1 MiB) for each of the others.
    let linear = match captures.as_slice() {
        [] => 0,
        [one] => one.pool_bytes_after,
        [first, second, ..] => first.pool_bytes_after.saturating_add(
            second
                .growth_bytes
                .max(1 << 20)
                .saturating_mul(captures.len() as u64 - 1),
        ),
    };
    let mut out = ServeBudget {
        recorded_sizes: rec.sizes(),
        capture_sizes: order.to_vec(),
        graph_pool_bytes: pool,
        graph_pool_segments: segments,
        captures,
        linear_estimate_bytes: linear,
        budget_bytes: budget,
        peak_reserved_without_kv_bytes: peak_without,
        kv_bytes_per_token: kv.map(|k| k.bytes_per_token),
        kv_tokens: None,
        kv_bytes: None,
        peak_reserved_bytes: None,
    };
    if let (Some(budget), Some(kv)) = (budget, kv) {
        let on_card = scenario.clone().with_capacity(Some(budget));
        let fits = |blocks: u64| -> Result<Option<u64>, String> {
            let t = start_up_trace(rec, order, Some((kv, blocks * kv.block_tokens)))?;
            let (_, _, peak, ok) = pool_after(&t, &on_card, None).map_err(err)?;
            Ok(ok.then_some(peak))
        };
        let block_bytes = kv
            .bytes_per_token
            .max(1)
            .saturating_mul(kv.block_tokens.max(1));
        // Bisection on whole blocks: `lo` fits (or is 0), `hi` does not.
        let (mut lo, mut hi) = (0u64, budget / block_bytes + 1);
        let mut best = if fits(0)?.is_some() {
            Some((0, peak_without))
        } else {
            None
        };
        if best.is_some() {
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                match fits(mid)? {
                    Some(peak) => {
                        lo = mid;
                        best = Some((mid, peak));
                    }
                    None => hi = mid,
                }
            }
        }
        if let Some((blocks, peak)) = best {
            let tokens = blocks * kv.block_tokens;
            out.kv_tokens = Some(tokens);
            out.kv_bytes = Some(tokens.saturating_mul(kv.bytes_per_token));
            out.peak_reserved_bytes = Some(peak);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_batch_sizes() {
        assert_eq!(batch_of_label("forward bs=8"), Some(8));
        assert_eq!(batch_of_label("batch 16"), Some(16));
        assert_eq!(batch_of_label("Batch_Size: 3"), Some(3));
        assert_eq!(batch_of_label("prefill"), None);
    }
}
