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
    /// Requests to the pinned host allocator (`None` when the trace has
    /// none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostSummary>,
}

/// What a trace asked of the pinned host allocator.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostSummary {
    /// `host_alloc` events.
    pub allocs: u64,
    /// Immediate frees.
    pub frees: u64,
    /// Frees that waited for streams' events (`host_free_requested`).
    pub deferred_frees: u64,
    /// `host_empty_cache` calls.
    pub empty_cache: u64,
    /// Bytes requested.
    pub requested_bytes: u64,
    /// Largest single request.
    pub max_request_bytes: u64,
    /// Peak of live requested bytes.
    pub peak_live_bytes: u64,
    /// Host allocations never freed by the end of the trace.
    pub live_at_end: u64,
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
        let mut b = SummaryBuilder::new(t);
        b.events(&t.events, &t.phases);
        b.finish(t)
    }
}

/// A [`TraceSummary`] built block by block, for a trace read as it is
/// read (`CsvEvents`): memory follows the ids in use, not the trace's
/// length. Ids may be recycled (an id whose allocation ended allocated
/// again). Private pools' summaries need the whole trace: a trace that
/// declares pools is summarised with [`TraceSummary::of`].
pub struct SummaryBuilder {
    s: TraceSummary,
    /// Requested bytes and liveness of each id.
    sizes: Vec<u64>,
    live: Vec<bool>,
    /// Live bytes now.
    cur: u64,
    /// The pinned host allocator's requests, and its live bytes now.
    host: HostSummary,
    host_cur: u64,
    hist: [(u64, u64); 65],
    /// Phase marks taken so far, and the phase open.
    marks_taken: usize,
    phase: Option<PhaseSummary>,
    /// Index of the next event.
    next: u64,
    /// Ids are recycled ([`SummaryBuilder::streamed`]): the tables grow
    /// with the ids met.
    grows: bool,
    /// With recycled ids, the ids of the initial state are below this.
    id_floor: usize,
}

impl SummaryBuilder {
    /// Starts the summary of `t` (its header, initial state and pools; its
    /// events come through [`SummaryBuilder::events`]).
    pub fn new(t: &Trace) -> Self {
        Self::with_ids(t, t.num_ids as usize)
    }

    /// [`SummaryBuilder::new`] with tables for the ids below `n`.
    fn with_ids(t: &Trace, n: usize) -> Self {
        let mut b = SummaryBuilder {
            s: TraceSummary {
                device: t.header.device,
                events: 0,
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
                peak_live_bytes: 0,
                initial_live_bytes: 0,
                initial_segments: t.initial.as_ref().map_or(0, |i| i.segments.len() as u64),
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
                notes: Vec::new(),
                phases: Vec::new(),
                pools: pool_summaries(t),
                host: None,
            },
            sizes: vec![0u64; n],
            live: vec![false; n],
            cur: 0,
            host: HostSummary::default(),
            host_cur: 0,
            hist: [(0u64, 0u64); 65],
            marks_taken: 0,
            phase: None,
            next: 0,
            grows: false,
            id_floor: 0,
        };
        if let Some(init) = &t.initial {
            for l in &init.live {
                if let InitialBlockState::Allocated(id) = l.state {
                    let i = id as usize;
                    if let (Some(s), Some(live)) = (b.sizes.get_mut(i), b.live.get_mut(i)) {
                        *s = l.requested;
                        *live = true;
                        // Sizes come from the file: sums saturate.
                        b.cur = b.cur.saturating_add(l.requested);
                        b.s.initial_live_bytes = b.s.initial_live_bytes.saturating_add(l.requested);
                    }
                }
            }
        }
        b.s.peak_live_bytes = b.cur;
        b
    }

    /// Starts the summary of a trace read as it is read, with recycled ids
    /// (`IdUse::Recycled`): `t` holds what was read before its events.
    pub fn streamed(t: &Trace) -> Self {
        // Tables for the initial state's ids only (recycled ids start
        // above them); they grow with the ids met.
        let n = t
            .initial
            .as_ref()
            .map_or(0, crate::model::InitialState::id_bound);
        let mut b = SummaryBuilder::with_ids(t, n);
        b.grows = true;
        b.id_floor = n;
        b
    }

    /// Counts the next `events`; `phases` are the trace's marks known so
    /// far (every mark at or before the last of these events among them).
    pub fn events(&mut self, events: &[Event], phases: &[crate::model::PhaseMark]) {
        for e in events {
            let i = self.next;
            self.next += 1;
            if !phases.is_empty() {
                self.phase_at(i, phases);
            }
            self.event(e);
        }
    }

    /// Opens the phase event `i` begins, if a mark says so.
    fn phase_at(&mut self, i: u64, phases: &[crate::model::PhaseMark]) {
        let mut mark = None;
        while let Some(m) = phases.get(self.marks_taken).filter(|m| m.event_index <= i) {
            mark = Some(m);
            self.marks_taken += 1;
        }
        match (mark, &self.phase) {
            (Some(m), _) => {
                self.s.phases.extend(self.phase.take());
                self.phase = Some(PhaseSummary::open(&m.label, i, self.cur));
            }
            (None, None) => {
                self.phase = Some(PhaseSummary::open("(before the first mark)", i, self.cur))
            }
            (None, Some(_)) => {}
        }
    }

    /// Id `id` is live with `size` requested bytes.
    fn take(&mut self, id: u32, size: u64) {
        let i = id as usize;
        if self.grows && i >= self.sizes.len() && i <= self.id_floor + self.next as usize {
            // Recycled ids stay below the initial state's ids plus the
            // events read so far.
            self.sizes.resize(i + 1, 0);
            self.live.resize(i + 1, false);
        }
        if let (Some(slot), Some(l)) = (self.sizes.get_mut(i), self.live.get_mut(i)) {
            *slot = size;
            *l = true;
        }
    }

    /// Id `id` is no longer live: the bytes it held (0 if it was not).
    fn release(&mut self, id: u32) -> u64 {
        let i = id as usize;
        match (self.live.get_mut(i), self.sizes.get(i)) {
            (Some(l), Some(&size)) if *l => {
                *l = false;
                size
            }
            _ => 0,
        }
    }

    fn event(&mut self, e: &Event) {
        let before = (self.s.allocs, self.s.frees + self.s.deferred_frees);
        match *e {
            Event::Alloc { id, size, .. } => {
                self.s.allocs += 1;
                // Sizes come from the file (up to 2^64 - 1): sums saturate.
                self.s.total_requested_bytes = self.s.total_requested_bytes.saturating_add(size);
                self.s.max_request_bytes = self.s.max_request_bytes.max(size);
                add_to_bucket(&mut self.hist, size);
                self.take(id, size);
                self.cur = self.cur.saturating_add(size);
                self.s.peak_live_bytes = self.s.peak_live_bytes.max(self.cur);
            }
            Event::Free { id } | Event::FreeRequested { id } => {
                if matches!(e, Event::Free { .. }) {
                    self.s.frees += 1;
                } else {
                    self.s.deferred_frees += 1;
                }
                let size = self.release(id);
                self.cur = self.cur.saturating_sub(size);
            }
            Event::HostAlloc { id, size } => {
                let h = &mut self.host;
                h.allocs += 1;
                h.requested_bytes = h.requested_bytes.saturating_add(size);
                h.max_request_bytes = h.max_request_bytes.max(size);
                self.take(id, size);
                self.host_cur = self.host_cur.saturating_add(size);
                self.host.live_at_end += 1;
                self.host.peak_live_bytes = self.host.peak_live_bytes.max(self.host_cur);
            }
            Event::HostFree { id } | Event::HostFreeRequested { id } => {
                if matches!(e, Event::HostFree { .. }) {
                    self.host.frees += 1;
                } else {
                    self.host.deferred_frees += 1;
                }
                let size = self.release(id);
                self.host_cur = self.host_cur.saturating_sub(size);
                self.host.live_at_end = self.host.live_at_end.saturating_sub(1);
            }
            Event::HostEmptyCache => self.host.empty_cache += 1,
            Event::HostFreeCompleted { .. } => {}
            Event::FreeCompleted { .. } => {}
            Event::EmptyCache => self.s.empty_cache += 1,
            Event::CaptureBegin { .. } => self.s.captures += 1,
            Event::PoolCreate { .. }
            | Event::CaptureEnd { .. }
            | Event::PoolEnter { .. }
            | Event::PoolExit { .. }
            | Event::PoolRelease { .. }
            // Tenants beside the allocator: no PyTorch request.
            | Event::PoolSleep { .. }
            | Event::PoolWake { .. }
            | Event::RawAlloc { .. }
            | Event::RawFree { .. } => {}
        }
        if let Some(p) = &mut self.phase {
            p.events += 1;
            if self.s.allocs > before.0 {
                p.allocs += 1;
                if let Event::Alloc { size, .. } = *e {
                    p.allocated_bytes = p.allocated_bytes.saturating_add(size);
                }
            }
            p.frees += self.s.frees + self.s.deferred_frees - before.1;
            p.peak_live_bytes = p.peak_live_bytes.max(self.cur);
            p.live_at_end_bytes = self.cur;
        }
    }

    /// The summary; `t` is the trace as read to its end (its streams and
    /// notes).
    pub fn finish(mut self, t: &Trace) -> TraceSummary {
        let mut s = self.s;
        s.events = self.next;
        s.streams = t.streams.len() as u64;
        s.notes = t.notes.clone();
        // A log's duration is known once it is read to its end.
        if let Some(d) = t
            .header
            .extra
            .get("duration_us")
            .and_then(|d| d.parse().ok())
        {
            s.duration_us = Some(d);
        }
        s.phases.extend(self.phase.take());
        let live = self.live.iter().filter(|&&l| l).count() as u64;
        s.live_at_end = live.saturating_sub(self.host.live_at_end);
        if self.host != HostSummary::default() {
            s.host = Some(self.host);
        }
        for (b, &(count, bytes)) in self.hist.iter().enumerate() {
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

    /// Counted block by block with recycled ids, a trace with phase marks
    /// gives the summary of the whole read.
    #[test]
    fn a_summary_counted_as_read_is_the_whole_reads() {
        let mut csv = String::from("action,id,size,stream\nalloc,w,100,0\n");
        for step in 0..300 {
            csv.push_str(&format!("# phase: step {step}\n"));
            for i in 0..50 {
                csv.push_str(&format!("alloc,{step}_{i},{},{}\n", 512 * (i + 1), i % 3));
            }
            for i in 0..50 {
                let free = if i % 7 == 0 { "free_requested" } else { "free" };
                csv.push_str(&format!("{free},{step}_{i}\n"));
                if i % 7 == 0 {
                    csv.push_str(&format!("free_completed,{step}_{i}\n"));
                }
            }
        }
        let whole = TraceSummary::of(&read_csv(csv.as_bytes(), "t.csv").unwrap());
        let mut events =
            crate::CsvEvents::open(csv.as_bytes(), "t.csv", crate::IdUse::Recycled).unwrap();
        let mut b = SummaryBuilder::streamed(events.trace());
        let mut block = Vec::new();
        while events.next_block(&mut block).unwrap() {
            // Smaller blocks than a read hands over: marks between them.
            for part in block.chunks(37) {
                b.events(part, &events.trace().phases);
            }
        }
        let end = events.finish().unwrap();
        assert!(end.trace.num_ids < 60, "{}", end.trace.num_ids);
        assert_eq!(b.finish(&end.trace), whole);
        assert_eq!(whole.phases.len(), 301);
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
