//! Each pool of a trace with private pools, without replaying it: which
//! requests went to it (routed as the allocator routes them: a capture
//! takes its stream's requests, a `use_mem_pool` context every request),
//! and what it held at the first entry and, for a snapshot, at the dump.

use serde::Serialize;

use crate::model::{Event, StreamIndex, Trace};
use crate::pools::PoolIndex;
use crate::state_summary::StateSummary;

/// One pool of a trace: the default pool, a graph's pool or a MemPool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSummary {
    /// PyTorch's `MempoolId_t`: `[0, 0]` for the default pool.
    pub id: [u64; 2],
    /// `default`, `graph` or `mempool`.
    pub kind: &'static str,
    /// MemPool `use_on_oom`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub use_on_oom: bool,
    /// MemPool `no_split`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_split: bool,
    /// Requests routed to it by the trace's events.
    pub allocations: u64,
    /// Bytes those requests asked for.
    pub requested_bytes: u64,
    /// Peak of its live requested bytes (blocks live at the start included).
    pub peak_live_bytes: u64,
    /// Its segments at the first entry (traces that start mid-run, when the
    /// layout was rebuilt).
    pub at_start: Option<StateSummary>,
    /// Its segments when the snapshot was taken (snapshots only).
    pub at_end: Option<StateSummary>,
}

/// The default pool first, then each private pool in declaration order;
/// empty for a trace without private pools.
pub(crate) fn pool_summaries(t: &Trace) -> Vec<PoolSummary> {
    if t.pools.is_empty() {
        return Vec::new();
    }
    // Slot 0: the default pool; slot p + 1: private pool p.
    let slot = |p: Option<PoolIndex>| p.map_or(0, |p| p as usize + 1);
    let mut out: Vec<PoolSummary> = std::iter::once(PoolSummary::new([0, 0], "default"))
        .chain(t.pools.iter().map(|d| PoolSummary {
            use_on_oom: d.use_on_oom,
            no_split: d.no_split,
            ..PoolSummary::new([d.id.0, d.id.1], d.kind.name())
        }))
        .collect();
    let mut live = vec![0u64; out.len()];
    // The pool and size of each live request, by id.
    let mut owner: Vec<Option<(usize, u64)>> = vec![None; t.num_ids as usize];
    if let Some(init) = &t.initial {
        for b in &init.live {
            let s = slot(b.pool);
            if let (Some(l), Some(o)) = (live.get_mut(s), owner.get_mut(b.id() as usize)) {
                *l = l.saturating_add(b.requested);
                *o = Some((s, b.requested));
            }
        }
        let mut states = vec![StateSummary::default(); out.len()];
        for g in &init.segments {
            if let Some(st) = states.get_mut(slot(g.pool)) {
                st.add_segment(g.size, g.blocks.iter().map(|b| (b.size, b.state)));
            }
        }
        if init.layout_error.is_none() && !init.segments.is_empty() {
            for (p, st) in out.iter_mut().zip(states) {
                p.at_start = Some(st.finish());
            }
        }
    }
    if let Some(x) = t.expected.as_ref().filter(|x| !x.final_segments.is_empty()) {
        let mut states = vec![StateSummary::default(); out.len()];
        for g in &x.final_segments {
            if let Some(st) = states.get_mut(slot(g.pool)) {
                st.add_segment(
                    g.size,
                    g.blocks.iter().map(|&(_, size, state)| (size, state)),
                );
            }
        }
        for (p, st) in out.iter_mut().zip(states) {
            p.at_end = Some(st.finish());
        }
    }
    for (p, &l) in out.iter_mut().zip(&live) {
        p.peak_live_bytes = l;
    }
    let mut routes: Vec<(PoolIndex, Option<StreamIndex>)> = Vec::new();
    for e in &t.events {
        match *e {
            Event::CaptureBegin { pool, stream } => routes.push((pool, Some(stream))),
            Event::PoolEnter { pool } => routes.push((pool, None)),
            Event::CaptureEnd { pool } | Event::PoolExit { pool } => {
                if let Some(i) = routes.iter().position(|&(p, _)| p == pool) {
                    routes.remove(i);
                }
            }
            Event::Alloc { id, stream, size } => {
                let to = routes
                    .iter()
                    .find(|&&(_, s)| s.is_none_or(|s| s == stream))
                    .map(|&(p, _)| p);
                let s = slot(to);
                if let (Some(p), Some(l), Some(o)) =
                    (out.get_mut(s), live.get_mut(s), owner.get_mut(id as usize))
                {
                    p.allocations += 1;
                    p.requested_bytes = p.requested_bytes.saturating_add(size);
                    *l = l.saturating_add(size);
                    p.peak_live_bytes = p.peak_live_bytes.max(*l);
                    *o = Some((s, size));
                }
            }
            Event::Free { id } | Event::FreeRequested { id } => {
                if let Some((s, size)) = owner.get_mut(id as usize).and_then(Option::take) {
                    if let Some(l) = live.get_mut(s) {
                        *l = l.saturating_sub(size);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

impl PoolSummary {
    fn new(id: [u64; 2], kind: &'static str) -> PoolSummary {
        PoolSummary {
            id,
            kind,
            use_on_oom: false,
            no_split: false,
            allocations: 0,
            requested_bytes: 0,
            peak_live_bytes: 0,
            at_start: None,
            at_end: None,
        }
    }
}
