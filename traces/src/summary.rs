//! What a trace contains: counts, sizes, streams, live-bytes peak — without
//! replaying it through a policy.

use serde::Serialize;

use crate::model::{Event, InitialBlockState, Trace};
use crate::pool_summary::{PoolSummary, pool_summaries};
use crate::state_summary::StateSummary;

/// One bucket of the request-size histogram: sizes in `[lo, hi)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeBucket {
    /// Inclusive lower bound in bytes.
    pub lo: u64,
    /// Exclusive upper bound in bytes.
    pub hi: u64,
    /// Number of allocations.
    pub count: u64,
    /// Sum of their sizes.
    pub bytes: u64,
}

/// Facts about a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceSummary {
    /// Device ordinal.
    pub device: u32,
    /// Events.
    pub events: u64,
    /// `Alloc` events.
    pub allocs: u64,
    /// Immediate frees.
    pub frees: u64,
    /// Deferred frees (`free_requested`).
    pub deferred_frees: u64,
    /// `empty_cache` calls.
    pub empty_cache: u64,
    /// CUDA graph captures begun (`capture_begin` events).
    #[serde(skip_serializing_if = "is_zero")]
    pub captures: u64,
    /// Private pools the trace declares (graphs' pools, MemPools).
    #[serde(skip_serializing_if = "is_zero")]
    pub private_pools: u64,
    /// Distinct streams.
    pub streams: u64,
    /// Allocations never freed by the end of the trace.
    pub live_at_end: u64,
    /// Bytes requested by allocations.
    pub total_requested_bytes: u64,
    /// Largest single request.
    pub max_request_bytes: u64,
    /// Peak of live requested bytes (including blocks live at the start).
    pub peak_live_bytes: u64,
    /// Live bytes at the start (traces that start mid-run).
    pub initial_live_bytes: u64,
    /// Segments at the start (0 when the trace starts from an empty
    /// allocator, or its layout could not be rebuilt).
    pub initial_segments: u64,
    /// Blocks in use at the start (allocated or waiting for their free).
    pub initial_live_blocks: u64,
    /// The trace starts mid-run (an initial state exists).
    pub starts_mid_run: bool,
    /// Why the recorded layout at the start could not be rebuilt.
    pub initial_layout_error: Option<String>,
    /// The recorded allocator state at the start (traces that start
    /// mid-run, and state-only snapshots), when its layout was rebuilt.
    pub initial_state: Option<StateSummary>,
    /// Wall-clock span of the recording in microseconds, when known.
    pub duration_us: Option<u64>,
    /// Power-of-two histogram of request sizes (empty buckets omitted).
    pub size_histogram: Vec<SizeBucket>,
    /// Remarks from reading the trace.
    pub notes: Vec<String>,
    /// Live bytes per recorded phase (empty when the trace has no phase
    /// marks).
    pub phases: Vec<PhaseSummary>,
    /// The default pool and each private pool (empty when the trace has no
    /// private pools).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolSummary>,
}

/// What happened in one recorded phase (from its mark to the next).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhaseSummary {
    /// The recorder's label (`step 0: forward`).
    pub label: String,
    /// Index of its first event.
    pub first_event: u64,
    /// Events in it.
    pub events: u64,
    /// Allocations made in it.
    pub allocs: u64,
    /// Bytes those allocations requested.
    pub allocated_bytes: u64,
    /// Frees (immediate and requested) in it.
    pub frees: u64,
    /// Live bytes when it began.
    pub live_at_start_bytes: u64,
    /// Peak of live bytes during it.
    pub peak_live_bytes: u64,
    /// Live bytes when it ended.
    pub live_at_end_bytes: u64,
}

impl PhaseSummary {
    fn open(label: &str, first_event: u64, live: u64) -> Self {
        PhaseSummary {
            label: label.to_string(),
            first_event,
            events: 0,
            allocs: 0,
            allocated_bytes: 0,
            frees: 0,
            live_at_start_bytes: live,
            peak_live_bytes: live,
            live_at_end_bytes: live,
        }
    }
}

impl TraceSummary {
    /// Computes the summary of `t`.
    pub fn of(t: &Trace) -> TraceSummary {
        let mut sizes = vec![0u64; t.num_ids as usize];
        let mut live = vec![false; t.num_ids as usize];
        let mut cur = 0u64;
        let mut initial_live = 0u64;
        let mut initial_segments = 0u64;
        if let Some(init) = &t.initial {
            initial_segments = init.segments.len() as u64;
            for b in &init.live {
                if let InitialBlockState::Allocated(id) = b.state {
                    let i = id as usize;
                    if let (Some(s), Some(l)) = (sizes.get_mut(i), live.get_mut(i)) {
                        *s = b.requested;
                        *l = true;
                        // Sizes come from the file: sums saturate.
                        cur = cur.saturating_add(b.requested);
                        initial_live = initial_live.saturating_add(b.requested);
                    }
                }
            }
        }
        let mut s = TraceSummary {
            device: t.header.device,
            events: t.events.len() as u64,
            allocs: 0,
            frees: 0,
            deferred_frees: 0,
            empty_cache: 0,
            captures: 0,
            private_pools: t.pools.len() as u64,
            streams: t.streams.len() as u64,
            live_at_end: 0,
            total_requested_bytes: 0,
            max_request_bytes: 0,
            peak_live_bytes: cur,
            initial_live_bytes: initial_live,
            initial_segments,
            initial_live_blocks: t.initial.as_ref().map_or(0, |i| i.live_blocks() as u64),
            starts_mid_run: t.initial.is_some(),
            initial_layout_error: t.initial.as_ref().and_then(|i| i.layout_error.clone()),
            initial_state: t
                .initial
                .as_ref()
                .filter(|i| i.layout_error.is_none() && !i.segments.is_empty())
                .map(StateSummary::of),
            duration_us: t
                .header
                .extra
                .get("duration_us")
                .and_then(|d| d.parse().ok()),
            size_histogram: Vec::new(),
            notes: t.notes.clone(),
            phases: Vec::new(),
            pools: pool_summaries(t),
        };
        let mut hist = [(0u64, 0u64); 65];
        let mut marks = t.phases.iter().peekable();
        let mut phase: Option<PhaseSummary> = None;
        for (i, e) in t.events.iter().enumerate() {
            if !t.phases.is_empty() {
                let i = i as u64;
                let mut next = None;
                while let Some(m) = marks.next_if(|m| m.event_index <= i) {
                    next = Some(m);
                }
                match (next, &phase) {
                    (Some(m), _) => {
                        s.phases.extend(phase.take());
                        phase = Some(PhaseSummary::open(&m.label, i, cur));
                    }
                    (None, None) => {
                        phase = Some(PhaseSummary::open("(before the first mark)", i, cur))
                    }
                    (None, Some(_)) => {}
                }
            }
            let before = (s.allocs, s.frees + s.deferred_frees);
            match *e {
                Event::Alloc { id, size, .. } => {
                    s.allocs += 1;
                    // Sizes come from the file (up to 2^64 - 1): sums saturate.
                    s.total_requested_bytes = s.total_requested_bytes.saturating_add(size);
                    s.max_request_bytes = s.max_request_bytes.max(size);
                    add_to_bucket(&mut hist, size);
                    let i = id as usize;
                    if let (Some(slot), Some(l)) = (sizes.get_mut(i), live.get_mut(i)) {
                        *slot = size;
                        *l = true;
                    }
                    cur = cur.saturating_add(size);
                    s.peak_live_bytes = s.peak_live_bytes.max(cur);
                }
                Event::Free { id } | Event::FreeRequested { id } => {
                    if matches!(e, Event::Free { .. }) {
                        s.frees += 1;
                    } else {
                        s.deferred_frees += 1;
                    }
                    let i = id as usize;
                    if let (Some(l), Some(&size)) = (live.get_mut(i), sizes.get(i)) {
                        if *l {
                            *l = false;
                            cur = cur.saturating_sub(size);
                        }
                    }
                }
                Event::FreeCompleted { .. } => {}
                Event::EmptyCache => s.empty_cache += 1,
                Event::CaptureBegin { .. } => s.captures += 1,
                Event::PoolCreate { .. }
                | Event::CaptureEnd { .. }
                | Event::PoolEnter { .. }
                | Event::PoolExit { .. }
                | Event::PoolRelease { .. } => {}
            }
            if let Some(p) = &mut phase {
                p.events += 1;
                if s.allocs > before.0 {
                    p.allocs += 1;
                    if let Event::Alloc { size, .. } = *e {
                        p.allocated_bytes = p.allocated_bytes.saturating_add(size);
                    }
                }
                p.frees += s.frees + s.deferred_frees - before.1;
                p.peak_live_bytes = p.peak_live_bytes.max(cur);
                p.live_at_end_bytes = cur;
            }
        }
        s.phases.extend(phase);
        s.live_at_end = live.iter().filter(|&&l| l).count() as u64;
        for (b, &(count, bytes)) in hist.iter().enumerate() {
            if count > 0 {
                let lo = if b == 0 { 0 } else { 1u64 << (b - 1) };
                let hi = if b == 0 {
                    1
                } else if b == 64 {
                    u64::MAX
                } else {
                    1u64 << b
                };
                s.size_histogram.push(SizeBucket {
                    lo,
                    hi,
                    count,
                    bytes,
                });
            }
        }
        s
    }
}

/// Counts `size` in its power-of-two bucket: 0 holds size 0, bucket `b > 0`
/// sizes in `[2^(b-1), 2^b)`.
// Indexing: the bucket is `64 - leading_zeros(size)`, at most 64, and the
// table has 65 entries.
#[allow(clippy::indexing_slicing)]
fn add_to_bucket(hist: &mut [(u64, u64); 65], size: u64) {
    let b = (u64::BITS - size.leading_zeros()) as usize;
    hist[b].0 += 1;
    // Sizes come from the file (up to 2^64 - 1): sums saturate.
    hist[b].1 = hist[b].1.saturating_add(size);
}

/// For `skip_serializing_if`: a count that is 0 is left out of the JSON
/// (traces without private pools read as they did).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::read_csv;

    #[test]
    fn counts_and_peaks() {
        let t = read_csv(
            "action,id,size,stream\nalloc,a,1000,0\nalloc,b,3000,1\nfree,a\nalloc,c,100\nfree_requested,b\nfree_completed,b\nempty_cache\n"
                .as_bytes(),
            "t.csv",
        )
        .unwrap();
        let s = TraceSummary::of(&t);
        assert_eq!(
            (s.events, s.allocs, s.frees, s.deferred_frees, s.empty_cache),
            (7, 3, 1, 1, 1)
        );
        assert_eq!(s.streams, 2);
        assert_eq!(s.peak_live_bytes, 4000);
        assert_eq!(s.live_at_end, 1);
        assert!(s.phases.is_empty());
        assert_eq!(s.max_request_bytes, 3000);
        assert_eq!(s.size_histogram.len(), 3);
        assert_eq!(
            s.size_histogram[1],
            SizeBucket {
                lo: 512,
                hi: 1024,
                count: 1,
                bytes: 1000
            }
        );
    }

    #[test]
    fn phases_split_the_events_at_their_marks() {
        let t = read_csv(
            "action,id,size,stream\nalloc,w,100,0\n# phase: forward\nalloc,a,50,0\nalloc,b,30,0\nfree,a\n# phase: backward\nfree,b\n# phase: empty\n"
                .as_bytes(),
            "t.csv",
        )
        .unwrap();
        let s = TraceSummary::of(&t);
        let got: Vec<(&str, u64, u64, u64, u64, u64, u64)> = s
            .phases
            .iter()
            .map(|p| {
                (
                    p.label.as_str(),
                    p.first_event,
                    p.events,
                    p.allocs,
                    p.live_at_start_bytes,
                    p.peak_live_bytes,
                    p.live_at_end_bytes,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("(before the first mark)", 0, 1, 1, 0, 100, 100),
                ("forward", 1, 3, 2, 100, 180, 130),
                ("backward", 4, 1, 0, 130, 130, 100),
            ]
        );
        assert_eq!(s.phases[1].frees, 1);
        assert_eq!(s.phases[1].allocated_bytes, 80);
    }
}
