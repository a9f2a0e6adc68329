//! Walking one device's trace entries into a [`Trace`]'s events, with the
//! real allocator's decisions kept as the expected record.
//!
//! Allocations are named by dense ids. A block the trace frees before it
//! allocates it was live when the recording began: it gets an id here and
//! becomes part of the initial state (see `initial.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::error::{Location, TraceError};
use crate::model::*;
use crate::snapshot::bursts::{ReleaseBurst, classify_release_burst, is_release};
use crate::snapshot::model::*;
use crate::snapshot::pool_plan::PoolPlan;
use crate::snapshot::pool_sections::PoolSections;
use crate::snapshot::size_rules::SizeRules;

#[derive(Debug, Clone, Copy)]
enum LiveState {
    Allocated(AllocId),
    Pending(AllocId),
}

/// A block the trace frees before allocating it: live at the first entry.
#[derive(Debug, Clone, Copy)]
pub(super) struct FreedFirst {
    /// Its address.
    pub address: u64,
    /// The id the trace's free refers to.
    pub id: AllocId,
    /// The caller's request (the free entry's size).
    pub requested: u64,
    /// Raw stream of the free entry (the block's stream).
    pub stream: u64,
    /// Its free was requested before the recording began.
    pub pending: bool,
    /// Entry at which the trace frees it.
    pub freed_at: usize,
}

/// A segment event as the walk saw it, with its stream.
#[derive(Debug, Clone, Copy)]
pub(super) struct SegmentEntry {
    /// What happened.
    pub kind: SegmentEventKind,
    /// Segment or range address.
    pub address: u64,
    /// Bytes.
    pub size: u64,
    /// Raw stream.
    pub stream: u64,
    /// The pool, where the entry tells: a cudaMalloc segment is small iff
    /// it is 2 MiB; a mapping serves the allocation that follows it.
    pub is_small: Option<bool>,
}

/// What walking the entries produced.
pub(super) struct Walked {
    /// The events (and streams, frames) so far; the initial state is added later.
    pub trace: Trace,
    /// Addresses, segment events and OOMs PyTorch recorded.
    pub expected: ExpectedRecord,
    /// Blocks live at the first entry, in the order the trace frees them.
    pub freed_first: Vec<FreedFirst>,
    /// Every segment event, in order.
    pub segment_entries: Vec<SegmentEntry>,
    /// Entry index at which each block address is first mentioned.
    pub first_mention: BTreeMap<u64, usize>,
    /// Every block address the trace mentions.
    pub touched: HashSet<u64>,
    /// The next free id.
    pub next_id: AllocId,
    /// Which requests went to which private pool.
    pub pools: PoolPlan,
    /// The number of events before each entry (kept when asked: to put a
    /// snapshot's host events among them).
    pub entry_starts: Vec<u32>,
}

/// The note of a device without trace entries.
pub(super) const NO_ENTRIES_NOTE: &str = "the snapshot holds no trace entries for this device (recorded with enabled=\"state\", or without _record_memory_history): there is nothing to replay; record with torch.cuda.memory._record_memory_history(max_entries=...)";

/// The note of a file that is `torch.cuda.memory_snapshot()`'s segment list.
pub(super) const LEGACY_LIST_NOTE: &str = "this file is the list of segments torch.cuda.memory_snapshot() returns: the allocator state only, without the allocation history or the settings (stats and the state's segment map work; replays need history). Record a full snapshot with torch.cuda.memory._record_memory_history(max_entries=100000) before the work and torch.cuda.memory._dump_snapshot(\"run.pickle\") after it";

/// The per-entry state of the walk.
struct Walk<'a> {
    entries: &'a [TraceEntry],
    device: u32,
    path: &'a str,
    rules: &'a SizeRules<'a>,
    out: Walked,
    streams: StreamInterner,
    live: HashMap<u64, LiveState>,
    /// Index of the `EmptyCache` event owning the current release burst.
    burst_event: Option<usize>,
    unknown_actions: BTreeMap<String, u64>,
    inferred_empty_cache: u64,
    retries: u64,
    skipped_entries: u64,
    /// `annotate` entries (2.14+), skipped.
    annotations: u64,
    pools: PoolSections,
}

/// Walks `entries` (one device's trace, whose final segments are
/// `segments`) into events.
pub(super) fn walk_entries(
    entries: &[TraceEntry],
    segments: &[&Segment],
    header: TraceHeader,
    device: u32,
    path: &str,
    rules: &SizeRules<'_>,
    keep_starts: bool,
) -> Result<Walked, TraceError> {
    let plan = PoolPlan::of(entries, segments);
    let mut trace = Trace::new(header);
    trace.pools = plan.decls.clone();
    let mut w = Walk {
        entries,
        device,
        path,
        rules,
        out: Walked {
            trace,
            expected: ExpectedRecord::default(),
            freed_first: Vec::new(),
            segment_entries: Vec::new(),
            first_mention: BTreeMap::new(),
            touched: HashSet::new(),
            next_id: 0,
            pools: PoolPlan::default(),
            entry_starts: Vec::new(),
        },
        streams: StreamInterner::default(),
        live: HashMap::new(),
        burst_event: None,
        unknown_actions: BTreeMap::new(),
        inferred_empty_cache: 0,
        retries: 0,
        skipped_entries: 0,
        annotations: 0,
        pools: PoolSections::new(plan),
    };
    let mut k = 0usize;
    while let Some(e) = entries.get(k) {
        let before = w.out.trace.events.len() as u32;
        let took = w.entry(k, e)?;
        if keep_starts {
            let n = took.min(entries.len() - k);
            w.out.entry_starts.extend(std::iter::repeat_n(before, n));
        }
        k += took;
    }
    w.pools.finish(&mut w.out.trace.events);
    w.finish_notes();
    let mut out = w.out;
    out.pools = w.pools.plan;
    Ok(out)
}

impl Walk<'_> {
    fn err(&self, k: usize, msg: String) -> TraceError {
        TraceError::new(
            self.path,
            Location::Entry(k as u64),
            format!("device_traces[{}]: {msg}", self.device),
        )
    }

    fn new_id(&mut self, k: usize) -> Result<AllocId, TraceError> {
        let id = self.out.next_id;
        self.out.next_id = id
            .checked_add(1)
            .ok_or_else(|| self.err(k, "more than 4294967295 allocations".into()))?;
        Ok(id)
    }

    fn set_addr(&mut self, id: AllocId, addr: Option<u64>) {
        put(&mut self.out.expected.alloc_addresses, id, addr);
    }

    /// Handles entry `k`; returns how many entries it consumed.
    fn entry(&mut self, k: usize, e: &TraceEntry) -> Result<usize, TraceError> {
        let addr = e.addr.unwrap_or(0);
        if !is_release(&e.action) {
            self.burst_event = None;
        }
        if matches!(
            e.action,
            Action::Alloc | Action::FreeRequested | Action::FreeCompleted
        ) {
            self.out.first_mention.entry(addr).or_insert(k);
        }
        match &e.action {
            Action::Alloc => self.alloc(k, e, addr)?,
            Action::FreeRequested => return self.free_requested(k, e, addr),
            Action::FreeCompleted => self.free_completed(k, e, addr)?,
            Action::SegmentAlloc => self.segment(k, e, SegmentEventKind::Alloc),
            Action::SegmentFree => self.segment(k, e, SegmentEventKind::Free),
            Action::SegmentMap => self.segment(k, e, SegmentEventKind::Map),
            Action::SegmentUnmap => self.segment(k, e, SegmentEventKind::Unmap),
            Action::Oom => self.oom(k, e)?,
            Action::Snapshot | Action::UserDefined => self.skipped_entries += 1,
            Action::Annotate => self.annotations += 1,
            Action::Other(name) => *self.unknown_actions.entry(name.clone()).or_default() += 1,
        }
        Ok(1)
    }

    fn alloc(&mut self, k: usize, e: &TraceEntry, addr: u64) -> Result<(), TraceError> {
        if let Some(prev) = self.live.get(&addr) {
            let what = match prev {
                LiveState::Allocated(_) => "allocated",
                LiveState::Pending(_) => "waiting for its free to complete",
            };
            return Err(self.err(k, format!("alloc at {addr:#x}, which is still {what}")));
        }
        let id = self.new_id(k)?;
        let stream = self.streams.index(&mut self.out.trace, e.stream);
        self.pools.enter(k, stream, &mut self.out.trace.events);
        self.out.trace.events.push(Event::Alloc {
            id,
            stream,
            size: e.size,
        });
        self.pools.after_request(k, &mut self.out.trace.events);
        self.set_addr(id, Some(addr));
        if let Some(f) = e.frames {
            put(&mut self.out.trace.alloc_frames, id, Some(f.0));
        }
        self.live.insert(addr, LiveState::Allocated(id));
        self.out.touched.insert(addr);
        Ok(())
    }

    /// A block the trace frees before allocating it: live at the start.
    fn freed_first(
        &mut self,
        k: usize,
        e: &TraceEntry,
        addr: u64,
        pending: bool,
    ) -> Result<AllocId, TraceError> {
        let id = self.new_id(k)?;
        self.out.freed_first.push(FreedFirst {
            address: addr,
            id,
            requested: e.size,
            stream: e.stream,
            pending,
            freed_at: k,
        });
        self.set_addr(id, Some(addr));
        // A free entry carries the stack of the allocation it frees.
        if let Some(f) = e.frames {
            put(&mut self.out.trace.alloc_frames, id, Some(f.0));
        }
        self.out.touched.insert(addr);
        Ok(id)
    }

    fn free_requested(&mut self, k: usize, e: &TraceEntry, addr: u64) -> Result<usize, TraceError> {
        let id = match self.live.get(&addr) {
            Some(LiveState::Allocated(id)) => *id,
            Some(LiveState::Pending(_)) => {
                return Err(self.err(
                    k,
                    format!("free_requested at {addr:#x}, whose free was already requested"),
                ));
            }
            None if !self.out.touched.contains(&addr) => self.freed_first(k, e, addr, false)?,
            None => {
                return Err(self.err(
                    k,
                    format!("free_requested at {addr:#x}, which is not allocated"),
                ));
            }
        };
        // PyTorch writes free_completed right after free_requested for a
        // block without recorded streams: one immediate free.
        let completes_now = self
            .entries
            .get(k + 1)
            .is_some_and(|n| n.action == Action::FreeCompleted && n.addr == e.addr);
        if completes_now {
            self.out.trace.events.push(Event::Free { id });
            self.live.remove(&addr);
            Ok(2)
        } else {
            self.out.trace.events.push(Event::FreeRequested { id });
            self.live.insert(addr, LiveState::Pending(id));
            Ok(1)
        }
    }

    fn free_completed(&mut self, k: usize, e: &TraceEntry, addr: u64) -> Result<(), TraceError> {
        match self.live.get(&addr) {
            Some(LiveState::Pending(id)) => {
                self.out.trace.events.push(Event::FreeCompleted { id: *id });
                self.live.remove(&addr);
            }
            Some(LiveState::Allocated(_)) => {
                return Err(self.err(
                    k,
                    format!("free_completed at {addr:#x} without a free_requested"),
                ));
            }
            None if !self.out.touched.contains(&addr) => {
                // Its free was requested before the recording began.
                let id = self.freed_first(k, e, addr, true)?;
                self.out.trace.events.push(Event::FreeCompleted { id });
            }
            None => {
                return Err(self.err(
                    k,
                    format!("free_completed at {addr:#x}, which is not allocated"),
                ));
            }
        }
        Ok(())
    }

    fn segment(&mut self, k: usize, e: &TraceEntry, kind: SegmentEventKind) {
        let addr = e.addr.unwrap_or(0);
        let release = matches!(kind, SegmentEventKind::Free | SegmentEventKind::Unmap);
        let burst_starts = release
            && (k == 0
                || self
                    .entries
                    .get(k - 1)
                    .is_some_and(|p| !is_release(&p.action)));
        let only_mempools = burst_starts
            && self
                .pools
                .release_for_burst(self.entries, k, &mut self.out.trace.events);
        let burst = if only_mempools {
            None
        } else if release {
            classify_release_burst(self.entries, k, self.rules)
        } else {
            None
        };
        match burst {
            Some(ReleaseBurst::EmptyCache) => {
                // The trace has no entry for torch.cuda.empty_cache():
                // the burst stands for it and owns its segment events.
                self.out.trace.events.push(Event::EmptyCache);
                self.inferred_empty_cache += 1;
                self.burst_event = Some(self.out.trace.events.len() - 1);
            }
            Some(ReleaseBurst::MallocRetry) => {
                // The allocation that follows the burst retried.
                self.enter_next_pool(k);
                self.retries += 1;
                let next = self.out.trace.events.len() as u32;
                self.out.expected.retries.push(next);
            }
            None if !release => self.enter_next_pool(k),
            None => {}
        }
        // A segment event belongs to the event that follows it (a malloc
        // records segment_alloc before its alloc entry); an inferred
        // empty_cache owns its own burst, a deleted MemPool its segments.
        let owner = if release {
            self.pools.owner_of(k)
        } else {
            None
        };
        let event_index = owner
            .map(|i| i as usize)
            .or(self.burst_event)
            .unwrap_or(self.out.trace.events.len());
        self.out.expected.segment_events.push(ExpectedSegmentEvent {
            event_index: event_index as u32,
            kind,
            address: addr,
            size: e.size,
        });
        let is_small = match kind {
            SegmentEventKind::Alloc | SegmentEventKind::Free => Some(e.size == 2 << 20),
            SegmentEventKind::Map => self.pool_of_next_request(k),
            SegmentEventKind::Unmap => None,
        };
        self.out.segment_entries.push(SegmentEntry {
            kind,
            address: addr,
            size: e.size,
            stream: e.stream,
            is_small,
        });
    }

    /// Opens the pool section of the request after entry `k`, when it goes
    /// to a private pool (before the segment events that are its own).
    fn enter_next_pool(&mut self, k: usize) {
        if let Some((j, raw)) = self.pools.next_pool_request(self.entries, k) {
            let stream = self.streams.index(&mut self.out.trace, raw);
            self.pools.enter(j, stream, &mut self.out.trace.events);
        }
    }

    /// Whether the request after entry `k` (the allocation a mapping
    /// serves) goes to the small pool.
    fn pool_of_next_request(&self, k: usize) -> Option<bool> {
        let next = self
            .entries
            .get(k + 1..)?
            .iter()
            .find(|e| !matches!(e.action, Action::SegmentMap | Action::SegmentAlloc))?;
        match next.action {
            Action::Alloc if next.size < 1 << 60 => Some((self.rules.round)(next.size) <= 1 << 20),
            Action::Oom => Some(next.size <= 1 << 20),
            _ => None,
        }
    }

    fn oom(&mut self, k: usize, e: &TraceEntry) -> Result<(), TraceError> {
        // The failed request has no alloc entry: replay it so the replay
        // fails at the same point.
        let id = self.new_id(k)?;
        let stream = self.streams.index(&mut self.out.trace, e.stream);
        self.pools.enter(k, stream, &mut self.out.trace.events);
        self.out.expected.ooms.push(ExpectedOom {
            event_index: self.out.trace.events.len() as u32,
            size: e.size,
            device_free: e.device_free.unwrap_or(0),
        });
        self.out.trace.events.push(Event::Alloc {
            id,
            stream,
            size: e.size,
        });
        self.pools.after_request(k, &mut self.out.trace.events);
        self.set_addr(id, None);
        Ok(())
    }

    fn finish_notes(&mut self) {
        let notes = &mut self.out.trace.notes;
        if let Some(n) = self.pools.note() {
            notes.push(n);
        }
        if self.entries.is_empty() {
            notes.push(NO_ENTRIES_NOTE.into());
        }
        for (name, n) in &self.unknown_actions {
            notes.push(format!(
                "{n} trace entries with the unknown action '{name}' were ignored"
            ));
        }
        if self.annotations > 0 {
            notes.push(format!(
                "{} 'annotate' entries (metadata attached to a live allocation by _annotate_tensor) carry no allocation and were skipped",
                self.annotations
            ));
        }
        if self.skipped_entries > 0 {
            notes.push(format!(
                "{} 'snapshot'/'user_defined' marker entries carry no allocation and were skipped",
                self.skipped_entries
            ));
        }
        if self.inferred_empty_cache > 0 {
            notes.push(format!(
                "inferred {} empty_cache() call(s) from segment_free/segment_unmap bursts that no malloc explains",
                self.inferred_empty_cache
            ));
        }
        if self.retries > 0 {
            notes.push(format!(
                "{} segment_free/segment_unmap burst(s) read as a malloc that released the cache and retried (none of the segments released could have served the allocation that follows)",
                self.retries
            ));
        }
    }
}

/// Sets `v[id]`, first growing `v` with `None`s when it is shorter.
pub(super) fn put<T: Clone>(v: &mut Vec<Option<T>>, id: AllocId, x: Option<T>) {
    let i = id as usize;
    match v.get_mut(i) {
        Some(slot) => *slot = x,
        None => {
            v.resize(i, None);
            v.push(x);
        }
    }
}
