//! The replay engine: trace × policy × device → [`Run`].
//!
//! The loop is the inner loop of every sweep and search: per event it does a
//! policy call, a few array updates and a handful of comparisons; no heap
//! allocation, hashing or formatting unless something happens (an OOM, a
//! device call, a timeline point).

use vramlab_allocator::device::{Device, DeviceCallKind};
use vramlab_allocator::{AllocError, Allocator, BlockHandle, PoolKind, SeedBlock, SeedBlockState};
use vramlab_traces::{Event, InitialBlockState, SegmentEventKind, Trace};

use crate::device::SimDevice;
use crate::run::{LoggedCall, OomEvent, Run, Summary, TimelinePoint};

/// What the engine needs from a device beyond [`Device`].
pub trait ReplayDevice: Device {
    /// Place the next segment or reservation at `addr` (fidelity mode).
    fn place_next(&mut self, _addr: u64) {}
    /// Forget unused placements.
    fn clear_placements(&mut self) {}
    /// Time spent in driver calls so far, microseconds.
    fn device_time_us(&self) -> f64 {
        0.0
    }
}

impl ReplayDevice for SimDevice {
    fn place_next(&mut self, addr: u64) {
        SimDevice::place_next(self, addr);
    }
    fn clear_placements(&mut self) {
        SimDevice::clear_placements(self);
    }
    fn device_time_us(&self) -> f64 {
        self.time_us()
    }
}

/// How to replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayOptions {
    /// End the replay at the first OOM (default). Otherwise the failed
    /// allocation is skipped, and so are its frees.
    pub stop_at_oom: bool,
    /// Maximum number of timeline points.
    pub timeline_points: usize,
    /// Run the policy's invariant checker after every event (slow; on in
    /// debug builds by default).
    pub check_invariants: bool,
    /// Place new segments where the trace's expected record says the real
    /// allocator got them (fidelity mode; needs a device that can place).
    pub place_at_expected: bool,
    /// Keep the address of every allocation ([`Run::alloc_addresses`]).
    pub record_addresses: bool,
    /// Keep the segment layout at the reserved peak ([`Run::segments_at_peak`]).
    pub segments_at_peak: bool,
    /// Keep the segment layout at the end ([`Run::final_segments`]).
    pub final_segments: bool,
    /// Told the number of events replayed so far at every timeline point
    /// (at most [`ReplayOptions::timeline_points`] calls), for a progress
    /// display on long replays.
    pub progress: Option<ProgressHook>,
}

/// A callback for [`ReplayOptions::progress`]. Two hooks are equal when
/// they are the same callback.
#[derive(Clone)]
pub struct ProgressHook(pub std::sync::Arc<dyn Fn(u64) + Send + Sync>);

impl ProgressHook {
    /// Wraps `f`.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> Self {
        ProgressHook(std::sync::Arc::new(f))
    }
}

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

impl PartialEq for ProgressHook {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ProgressHook {}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            stop_at_oom: true,
            timeline_points: 2000,
            check_invariants: cfg!(debug_assertions),
            place_at_expected: false,
            record_addresses: false,
            segments_at_peak: false,
            final_segments: false,
            progress: None,
        }
    }
}

/// Why a replay could not run to its end. An OOM is not an error: it is
/// part of the [`Run`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The trace is inconsistent at this event.
    #[error("event {event_index}: {message}")]
    Trace {
        /// Index of the offending event.
        event_index: u64,
        /// What is wrong.
        message: String,
    },
    /// The trace as a whole is inconsistent (found before any event runs).
    #[error("{0}")]
    Malformed(String),
    /// The initial state could not be rebuilt.
    #[error("initial state: {0}")]
    Initial(String),
    /// The policy failed for a reason other than running out of memory.
    #[error("event {event_index}: {message}")]
    Allocator {
        /// Index of the event.
        event_index: u64,
        /// The policy's error.
        message: String,
    },
    /// The invariant checker found an inconsistency (a bug in the policy).
    #[error("invariant violated after event {event_index}: {message}")]
    Invariant {
        /// Index of the event after which the check failed.
        event_index: u64,
        /// The violation.
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdState {
    Unused,
    Live,
    Pending,
    Freed,
    Failed,
}

/// What the replay knows about one allocation id.
#[derive(Debug, Clone, Copy)]
struct IdSlot {
    /// The policy's handle while the block is live or pending.
    handle: BlockHandle,
    /// Requested bytes.
    size: u64,
    state: IdState,
}

impl IdSlot {
    const UNUSED: IdSlot = IdSlot {
        handle: BlockHandle::NULL,
        size: 0,
        state: IdState::Unused,
    };
}

fn describe(state: IdState) -> &'static str {
    match state {
        IdState::Unused => "was never allocated",
        IdState::Live => "is live",
        IdState::Pending => "has a free pending",
        IdState::Freed => "was already freed",
        IdState::Failed => "failed to allocate",
    }
}

/// Replays `trace` through `alloc`.
pub fn replay<A>(trace: &Trace, alloc: &mut A, opts: &ReplayOptions) -> Result<Run, ReplayError>
where
    A: Allocator,
    A::Dev: ReplayDevice,
{
    let n_ids = trace.num_ids as usize;
    // Every id needs an allocation (an event or an initial block), so a
    // larger count is an error; refusing it here also keeps a hand-built
    // trace from sizing the tables below to billions of slots.
    let initial_blocks = trace.initial.as_ref().map_or(0, |i| i.live_blocks());
    if n_ids > trace.events.len().saturating_add(initial_blocks) {
        return Err(ReplayError::Malformed(format!(
            "the trace declares {} allocation ids but holds {} events and {initial_blocks} live initial blocks",
            trace.num_ids,
            trace.events.len()
        )));
    }
    // One slot per id. The trace is not trusted to keep its ids below
    // `num_ids` (a library user may hand-build it): every lookup is a
    // `get`, and an id out of range is a [`ReplayError::Trace`].
    let mut slots = vec![IdSlot::UNUSED; n_ids];
    // Empty unless `opts.record_addresses`.
    let mut addresses = if opts.record_addresses {
        vec![0u64; n_ids]
    } else {
        Vec::new()
    };
    let mut live_requested = 0u64;

    seed_initial_state(trace, alloc, opts, &mut slots, &mut live_requested)?;
    let seed_calls = alloc.device().calls().len();
    let mut seen_calls = seed_calls;
    let mut device_log: Vec<LoggedCall> = alloc
        .device()
        .calls()
        .iter()
        .map(|c| LoggedCall {
            event_index: None,
            kind: c.kind,
            ptr: c.ptr,
            size: c.size,
        })
        .collect();

    let mut expected_segments = match (&trace.expected, opts.place_at_expected) {
        (Some(e), true) => e.segment_events.as_slice(),
        _ => &[],
    };

    let events = trace.events.len();
    let bucket = events.div_ceil(opts.timeline_points.max(1)).max(1);
    let mut timeline = Vec::with_capacity(events.div_ceil(bucket) + 1);
    let mut window = TimelinePoint::default();
    let mut until_point = bucket;

    let mut peak_requested = live_requested;
    let mut peak_reserved_seen = alloc.stats().reserved_bytes.all.current as u64;
    let mut waste_at_peak =
        peak_reserved_seen.saturating_sub(alloc.stats().allocated_bytes.all.current as u64);
    let mut segments_at_peak = Vec::new();
    let mut oom: Option<OomEvent> = None;
    let mut allocs = 0u64;
    let mut frees = 0u64;
    let mut replayed = 0u64;

    for (i, ev) in trace.events.iter().enumerate() {
        let ei = i as u64;
        let mut placed = false;
        while let Some((s, rest)) = expected_segments.split_first() {
            if s.event_index as usize > i {
                break;
            }
            if s.event_index as usize == i
                && matches!(s.kind, SegmentEventKind::Alloc | SegmentEventKind::Map)
            {
                alloc.device_mut().place_next(s.address);
                placed = true;
            }
            expected_segments = rest;
        }
        let mut stop = false;
        match *ev {
            Event::Alloc { id, stream, size } => {
                let idu = id as usize;
                let slot = slots
                    .get_mut(idu)
                    .ok_or_else(|| bad_id(ei, id, trace.num_ids))?;
                let st = slot.state;
                if st != IdState::Unused {
                    return Err(trace_err(
                        ei,
                        format!("alloc of id {id}, which {}", describe(st)),
                    ));
                }
                let raw_stream = *trace.streams.get(stream as usize).ok_or_else(|| {
                    trace_err(
                        ei,
                        format!("stream index {stream} is not in the stream table"),
                    )
                })?;
                allocs += 1;
                match alloc.malloc(size, raw_stream) {
                    Ok(h) => {
                        *slot = IdSlot {
                            handle: h,
                            size,
                            state: IdState::Live,
                        };
                        // Saturating: seeded blocks carry unchecked sizes.
                        live_requested = live_requested.saturating_add(size);
                        // `addresses` has an entry per id when recording.
                        if let Some(a) = addresses.get_mut(idu) {
                            *a = alloc.block_ptr(h);
                        }
                    }
                    Err(AllocError::OutOfMemory(report)) => {
                        slot.state = IdState::Failed;
                        if oom.is_none() {
                            let st = alloc.stats();
                            oom = Some(OomEvent {
                                event_index: ei,
                                requested_bytes: size,
                                rounded_bytes: report.rounded,
                                device_request_bytes: report.device_request,
                                reserved_bytes: st.reserved_bytes.all.current as u64,
                                allocated_bytes: st.allocated_bytes.all.current as u64,
                                live_requested_bytes: live_requested,
                                largest_free_block: alloc.largest_free_block(),
                                device_free_bytes: report.device_free,
                                message: report.to_string(),
                                segments: alloc.segments(),
                            });
                        }
                        stop = opts.stop_at_oom;
                    }
                    Err(e) => return Err(alloc_err(ei, e)),
                }
            }
            Event::Free { id } | Event::FreeRequested { id } => {
                let slot = slots
                    .get_mut(id as usize)
                    .ok_or_else(|| bad_id(ei, id, trace.num_ids))?;
                let st = slot.state;
                match st {
                    IdState::Live => {
                        frees += 1;
                        let deferred = matches!(ev, Event::FreeRequested { .. });
                        let r = if deferred {
                            alloc.free_deferred(slot.handle)
                        } else {
                            alloc.free(slot.handle)
                        };
                        r.map_err(|e| alloc_err(ei, e))?;
                        slot.state = if deferred {
                            IdState::Pending
                        } else {
                            IdState::Freed
                        };
                        live_requested = live_requested.saturating_sub(slot.size);
                    }
                    IdState::Failed => {}
                    _ => {
                        return Err(trace_err(
                            ei,
                            format!("free of id {id}, which {}", describe(st)),
                        ));
                    }
                }
            }
            Event::FreeCompleted { id } => {
                let slot = slots
                    .get_mut(id as usize)
                    .ok_or_else(|| bad_id(ei, id, trace.num_ids))?;
                let st = slot.state;
                match st {
                    IdState::Pending => {
                        alloc
                            .complete_free(slot.handle)
                            .map_err(|e| alloc_err(ei, e))?;
                        slot.state = IdState::Freed;
                    }
                    IdState::Failed => {}
                    _ => {
                        return Err(trace_err(
                            ei,
                            format!(
                                "free_completed of id {id}, which {} (no free_requested before it)",
                                describe(st)
                            ),
                        ));
                    }
                }
            }
            Event::EmptyCache => alloc.empty_cache().map_err(|e| alloc_err(ei, e))?,
        }
        if placed {
            alloc.device_mut().clear_placements();
        }
        replayed += 1;

        let st = alloc.stats();
        let reserved = st.reserved_bytes.all.current as u64;
        let allocated = st.allocated_bytes.all.current as u64;
        let active = st.active_bytes.all.current as u64;
        if reserved > peak_reserved_seen {
            peak_reserved_seen = reserved;
            waste_at_peak = reserved - allocated;
            if opts.segments_at_peak {
                segments_at_peak = alloc.segments();
            }
        }
        peak_requested = peak_requested.max(live_requested);
        window.requested = window.requested.max(live_requested);
        window.allocated = window.allocated.max(allocated);
        window.active = window.active.max(active);
        window.reserved = window.reserved.max(reserved);
        until_point -= 1;
        if until_point == 0 || i + 1 == events || stop {
            until_point = bucket;
            window.event_index = ei;
            window.largest_free = alloc.largest_free_block();
            timeline.push(window);
            window = TimelinePoint::default();
            if let Some(p) = &opts.progress {
                (p.0)(ei + 1);
            }
        }
        if opts.check_invariants {
            alloc
                .check_invariants()
                .map_err(|message| ReplayError::Invariant {
                    event_index: ei,
                    message,
                })?;
        }
        let calls = alloc.device().calls();
        if calls.len() > seen_calls {
            device_log.extend(calls.iter().skip(seen_calls).map(|c| LoggedCall {
                event_index: Some(i as u32),
                kind: c.kind,
                ptr: c.ptr,
                size: c.size,
            }));
            seen_calls = calls.len();
        }
        if stop {
            break;
        }
    }

    let st = alloc.stats();
    // The first `seed_calls` entries rebuilt the initial state.
    let count = |kinds: &[DeviceCallKind]| {
        device_log
            .iter()
            .skip(seed_calls)
            .filter(|c| kinds.contains(&c.kind))
            .count() as u64
    };
    let peak_reserved = st.reserved_bytes.all.peak as u64;
    let peak_active = st.active_bytes.all.peak as u64;
    let utilization = if peak_reserved == 0 {
        1.0
    } else {
        peak_active as f64 / peak_reserved as f64
    };
    let summary = Summary {
        events: events as u64,
        events_replayed: replayed,
        allocs,
        frees,
        peak_requested_bytes: peak_requested,
        peak_allocated_bytes: st.allocated_bytes.all.peak as u64,
        peak_active_bytes: peak_active,
        peak_reserved_bytes: peak_reserved,
        final_reserved_bytes: st.reserved_bytes.all.current as u64,
        final_allocated_bytes: st.allocated_bytes.all.current as u64,
        waste_at_peak_bytes: waste_at_peak,
        utilization,
        fragmentation: 1.0 - utilization,
        num_device_alloc: count(&[DeviceCallKind::Malloc, DeviceCallKind::Map]),
        num_device_free: count(&[DeviceCallKind::Free, DeviceCallKind::Unmap]),
        num_sync_all_streams: st.num_sync_all_streams as u64,
        num_alloc_retries: st.num_alloc_retries as u64,
        num_ooms: st.num_ooms as u64,
        device_time_us: alloc.device().device_time_us(),
    };
    Ok(Run {
        policy: alloc.name().to_string(),
        conf: String::new(),
        capacity: None,
        summary,
        timeline,
        device_log,
        oom,
        stats: *st,
        alloc_addresses: addresses,
        segments_at_peak,
        final_segments: if opts.final_segments {
            alloc.segments()
        } else {
            Vec::new()
        },
    })
}

fn trace_err(event_index: u64, message: String) -> ReplayError {
    ReplayError::Trace {
        event_index,
        message,
    }
}

fn bad_id(event_index: u64, id: u32, num_ids: u32) -> ReplayError {
    trace_err(
        event_index,
        format!("id {id} is out of range (the trace declares {num_ids} ids)"),
    )
}

fn alloc_err(event_index: u64, e: AllocError) -> ReplayError {
    ReplayError::Allocator {
        event_index,
        message: e.to_string(),
    }
}

fn seed_initial_state<A>(
    trace: &Trace,
    alloc: &mut A,
    opts: &ReplayOptions,
    slots: &mut [IdSlot],
    live_requested: &mut u64,
) -> Result<(), ReplayError>
where
    A: Allocator,
    A::Dev: ReplayDevice,
{
    let Some(init) = &trace.initial else {
        return Ok(());
    };
    let mut blocks = Vec::new();
    for seg in &init.segments {
        if seg.is_expandable {
            return Err(ReplayError::Initial(format!(
                "segment at {:#x} is part of an expandable segment; starting mid-run from expandable segments is not supported",
                seg.address
            )));
        }
        blocks.clear();
        blocks.extend(seg.blocks.iter().map(|b| SeedBlock {
            size: b.size,
            requested: b.requested,
            state: match b.state {
                InitialBlockState::Free => SeedBlockState::Free,
                InitialBlockState::Allocated(_) => SeedBlockState::Allocated,
                InitialBlockState::PendingFree(_) => SeedBlockState::PendingFree,
            },
        }));
        let stream = *trace.streams.get(seg.stream as usize).ok_or_else(|| {
            ReplayError::Initial(format!(
                "segment at {:#x}: unknown stream index",
                seg.address
            ))
        })?;
        if opts.place_at_expected {
            alloc.device_mut().place_next(seg.address);
        }
        let pool = if seg.is_small {
            PoolKind::Small
        } else {
            PoolKind::Large
        };
        let got = alloc
            .seed_segment(pool, stream, &blocks)
            .map_err(|e| ReplayError::Initial(format!("segment at {:#x}: {e}", seg.address)))?;
        alloc.device_mut().clear_placements();
        for (b, h) in seg.blocks.iter().zip(got) {
            let (id, st) = match b.state {
                InitialBlockState::Free => continue,
                InitialBlockState::Allocated(id) => (id, IdState::Live),
                InitialBlockState::PendingFree(id) => (id, IdState::Pending),
            };
            let slot = match slots.get_mut(id as usize) {
                Some(slot) if slot.state == IdState::Unused => slot,
                _ => {
                    return Err(ReplayError::Initial(format!(
                        "block at {:#x}: id {id} is out of range or used twice",
                        b.address
                    )));
                }
            };
            *slot = IdSlot {
                handle: h.unwrap_or(BlockHandle::NULL),
                size: b.requested,
                state: st,
            };
            if st == IdState::Live {
                // `requested` comes from the trace file, unchecked.
                *live_requested = live_requested.saturating_add(b.requested);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use vramlab_allocator::{AllocConf, TorchVersion};
    use vramlab_traces::{InitialBlock, InitialSegment, InitialState, TraceHeader};

    use super::*;
    use crate::scenario::Scenario;

    /// A hand-built trace: nothing checks it before the replay does.
    fn trace(num_ids: u32, events: Vec<Event>) -> Trace {
        let mut t = Trace::new(TraceHeader::default());
        t.num_ids = num_ids;
        t.events = events;
        t
    }

    fn run(t: &Trace) -> Result<Run, ReplayError> {
        Scenario::native(AllocConf::new(TorchVersion::default())).run(t, &ReplayOptions::default())
    }

    fn err(t: &Trace) -> String {
        run(t).unwrap_err().to_string()
    }

    #[test]
    fn ids_beyond_num_ids_are_errors_not_panics() {
        let alloc = |id| Event::Alloc {
            id,
            stream: 0,
            size: 512,
        };
        assert_eq!(
            err(&trace(1, vec![alloc(0), alloc(1)])),
            "event 1: id 1 is out of range (the trace declares 1 ids)"
        );
        assert_eq!(
            err(&trace(0, vec![alloc(u32::MAX)])),
            "event 0: id 4294967295 is out of range (the trace declares 0 ids)"
        );
        for ev in [
            Event::Free { id: 3 },
            Event::FreeRequested { id: 3 },
            Event::FreeCompleted { id: 3 },
        ] {
            assert_eq!(
                err(&trace(1, vec![alloc(0), ev])),
                "event 1: id 3 is out of range (the trace declares 1 ids)"
            );
        }
        // In range, the same trace replays.
        let ok = trace(1, vec![alloc(0), Event::Free { id: 0 }]);
        assert_eq!(run(&ok).unwrap().summary.frees, 1);
    }

    #[test]
    fn more_ids_than_allocations_is_refused_before_any_table_is_sized() {
        // Four billion ids and no events would otherwise ask for ~96 GB.
        assert_eq!(
            err(&trace(u32::MAX, vec![])),
            "the trace declares 4294967295 allocation ids but holds 0 events and 0 live initial blocks"
        );
        assert_eq!(
            err(&trace(2, vec![Event::EmptyCache])),
            "the trace declares 2 allocation ids but holds 1 events and 0 live initial blocks"
        );
    }

    #[test]
    fn a_stream_beyond_the_stream_table_is_an_error() {
        let t = trace(
            1,
            vec![Event::Alloc {
                id: 0,
                stream: 5,
                size: 512,
            }],
        );
        assert_eq!(
            err(&t),
            "event 0: stream index 5 is not in the stream table"
        );
        let mut empty = t.clone();
        empty.streams.clear();
        assert_eq!(
            err(&empty),
            "event 0: stream index 5 is not in the stream table"
        );
    }

    #[test]
    fn initial_block_ids_beyond_num_ids_are_errors() {
        let seg = |stream, id| InitialSegment {
            address: 0x7f00_0000_0000,
            size: 2 << 20,
            stream,
            is_small: false,
            is_expandable: false,
            blocks: vec![InitialBlock {
                address: 0x7f00_0000_0000,
                size: 2 << 20,
                requested: 2 << 20,
                state: InitialBlockState::Allocated(id),
            }],
        };
        let mut t = trace(1, vec![Event::EmptyCache]);
        t.initial = Some(InitialState {
            segments: vec![seg(0, 1)],
        });
        assert_eq!(
            err(&t),
            "initial state: block at 0x7f0000000000: id 1 is out of range or used twice"
        );
        t.initial = Some(InitialState {
            segments: vec![seg(9, 0)],
        });
        assert_eq!(
            err(&t),
            "initial state: segment at 0x7f0000000000: unknown stream index"
        );
        t.initial = Some(InitialState {
            segments: vec![seg(0, 0)],
        });
        assert_eq!(run(&t).unwrap().summary.events_replayed, 1);
    }
}
