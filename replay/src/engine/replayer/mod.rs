//! The per-event steps of a replay: the state one replay keeps (one slot
//! per allocation id, the peaks, the timeline window, the device log) and
//! what each kind of event does to it (the private pools' calls in
//! `pool_calls`, fidelity mode's placements and refusals in `fidelity`).

mod fidelity;
mod host;
mod oom;
mod pool_calls;
mod streamed;
mod tenant;

use vramlab_allocator::Refusal;
use vramlab_allocator::{AllocError, Allocator, BlockHandle};
use vramlab_allocator::{Device, DeviceCallKind};
use vramlab_traces::{Event, ExpectedOom, ExpectedSegmentEvent, Trace};

use super::addresses::AddressBook;
use super::run::{LoggedCall, OomEvent, Run, Summary, TimelinePoint};
use super::start::{Seeded, Start, StartOom, seed};
use super::{ReplayDevice, ReplayError, ReplayOptions};

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
    /// The id reported for it (an OOM's allocation, the largest live
    /// ones): the slot's own id, or with recycled ids the allocation's
    /// number in the trace (the id a whole read gives it).
    number: u32,
}

impl IdSlot {
    const UNUSED: IdSlot = IdSlot {
        handle: BlockHandle::NULL,
        size: 0,
        state: IdState::Unused,
        number: 0,
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

/// The state of one replay.
pub(super) struct Replayer<'t> {
    trace: &'t Trace,
    opts: &'t ReplayOptions,
    /// The trace's stream table; a streamed replay learns new streams as
    /// the file is read ([`Replayer::add_streams`]).
    streams: std::borrow::Cow<'t, [u64]>,
    /// Events in the trace: `None` while a streamed replay reads them
    /// ([`Replayer::set_events`] at the end).
    n_events: Option<usize>,
    /// Ids are recycled (a streamed read, `IdUse::Recycled`): the slot
    /// table grows with the ids met, an id whose allocation ended may be
    /// allocated again, and ids are reported by allocation number.
    recycled: bool,
    /// With recycled ids, the trace's own id of each `alloc` of the block
    /// being replayed, when the reader renamed them
    /// ([`Replayer::set_numbers`]); empty: an allocation's number is its
    /// place among the `alloc`s.
    numbers: Vec<u32>,
    /// The next entry of `numbers`.
    next_number: usize,
    /// With recycled ids, the trace's own id of each block of the initial
    /// state, by the id handed over (empty: the ids are the trace's).
    initial_numbers: Vec<u32>,
    /// What the run's summary counts as the trace's events.
    total_events: u64,
    /// One slot per id. The trace is not trusted to keep its ids below
    /// `num_ids` (a library user may hand-build it): every lookup is a
    /// `get`, and an id out of range is a [`ReplayError::Trace`].
    slots: Vec<IdSlot>,
    /// Empty unless `opts.record_addresses`.
    book: AddressBook,
    live_requested: u64,
    start: Option<Start>,
    /// Device calls made while seeding the initial state.
    seed_calls: usize,
    seen_calls: usize,
    device_log: Vec<LoggedCall>,
    /// Device allocations (malloc, map) and frees (free, unmap) after the
    /// seed.
    device_allocs: u64,
    device_frees: u64,
    expected_segments: &'t [ExpectedSegmentEvent],
    /// Fidelity mode: events whose first device request the real device
    /// refused, and events that ran out of memory (both in order).
    expected_retries: &'t [u32],
    expected_ooms: &'t [ExpectedOom],
    timeline: Vec<TimelinePoint>,
    window: TimelinePoint,
    bucket: usize,
    until_point: usize,
    peak_requested: u64,
    peak_reserved_seen: u64,
    waste_at_peak: u64,
    /// The event after which reserved reached its peak (`None`: the state
    /// the replay began with).
    peak_event: Option<u64>,
    segments_at_peak: Vec<vramlab_allocator::SegmentView>,
    oom: Option<OomEvent>,
    allocs: u64,
    frees: u64,
    replayed: u64,
    /// The pinned host allocator, made at the first host event.
    host: Option<host::HostSide>,
    /// Its rules, when the caller's options do not say.
    host_rules: Option<vramlab_allocator::host::HostRules>,
    /// Engine pools' sleeps and memory outside PyTorch, from the first
    /// such event.
    tenants: Option<tenant::TenantSide>,
}

impl<'t> Replayer<'t> {
    /// A replay of `trace`'s events.
    pub(super) fn new(trace: &'t Trace, opts: &'t ReplayOptions) -> Self {
        Replayer::with_events(trace, opts, Some(trace.events.len()))
    }

    fn with_events(trace: &'t Trace, opts: &'t ReplayOptions, n_events: Option<usize>) -> Self {
        let n_ids = trace.num_ids as usize;
        let bucket = n_events.map_or(usize::MAX, |n| {
            n.div_ceil(opts.timeline_points.max(1)).max(1)
        });
        let points = n_events.map_or(1, |n| n.div_ceil(bucket) + 1);
        Replayer {
            trace,
            opts,
            streams: std::borrow::Cow::Borrowed(trace.streams.as_slice()),
            n_events,
            recycled: false,
            numbers: Vec::new(),
            next_number: 0,
            initial_numbers: Vec::new(),
            total_events: n_events.unwrap_or(0) as u64,
            slots: vec![IdSlot::UNUSED; n_ids],
            book: AddressBook::new(opts.record_addresses, n_ids),
            live_requested: 0,
            start: trace.initial.as_ref().map(|_| opts.start),
            seed_calls: 0,
            seen_calls: 0,
            device_log: Vec::new(),
            device_allocs: 0,
            device_frees: 0,
            expected_segments: match (&trace.expected, opts.place_at_expected) {
                (Some(e), true) => e.segment_events.as_slice(),
                _ => &[],
            },
            expected_retries: match (&trace.expected, opts.place_at_expected) {
                (Some(e), true) => e.retries.as_slice(),
                _ => &[],
            },
            expected_ooms: match (&trace.expected, opts.place_at_expected) {
                (Some(e), true) => e.ooms.as_slice(),
                _ => &[],
            },
            timeline: Vec::with_capacity(points),
            window: TimelinePoint::default(),
            bucket,
            until_point: bucket,
            peak_requested: 0,
            peak_reserved_seen: 0,
            waste_at_peak: 0,
            peak_event: None,
            segments_at_peak: Vec::new(),
            oom: None,
            allocs: 0,
            frees: 0,
            replayed: 0,
            host: None,
            host_rules: None,
            tenants: None,
        }
    }

    /// Seeds the initial state, if any; an OOM there is returned.
    pub(super) fn seed<A>(&mut self, alloc: &mut A) -> Result<Option<StartOom>, ReplayError>
    where
        A: Allocator,
        A::Dev: ReplayDevice,
    {
        let Some(init) = &self.trace.initial else {
            return Ok(None);
        };
        let slots = &mut self.slots;
        let live = &mut self.live_requested;
        let numbers = &self.initial_numbers;
        let mut each = |b: Seeded| -> Result<(), ReplayError> {
            let slot = match slots.get_mut(b.id as usize) {
                Some(slot) if slot.state == IdState::Unused => slot,
                _ => {
                    return Err(ReplayError::Initial(format!(
                        "block at {:#x}: id {} is out of range or used twice",
                        b.address, b.id
                    )));
                }
            };
            *slot = IdSlot {
                handle: b.handle,
                size: b.requested,
                state: if b.pending {
                    IdState::Pending
                } else {
                    IdState::Live
                },
                number: numbers.get(b.id as usize).copied().unwrap_or(b.id),
            };
            if !b.pending {
                // `requested` comes from the trace file, unchecked.
                *live = live.saturating_add(b.requested);
            }
            Ok(())
        };
        let oom = seed(
            self.trace,
            init,
            self.opts.start,
            alloc,
            self.opts.stop_at_oom,
            &mut each,
        )?;
        let slots = &self.slots;
        self.book.seeded(alloc, |id| match slots.get(id) {
            Some(s) if matches!(s.state, IdState::Live | IdState::Pending) => {
                alloc.block_ptr(s.handle)
            }
            _ => 0,
        });
        if let Some(o) = &oom {
            for &id in &o.lost {
                if let Some(slot) = self.slots.get_mut(id as usize) {
                    if slot.state == IdState::Unused {
                        slot.state = IdState::Failed;
                    }
                }
            }
        }
        Ok(oom)
    }

    /// Takes the state after seeding as the starting point of the figures.
    pub(super) fn begin<A: Allocator>(&mut self, alloc: &mut A) {
        if self.opts.forget_device_calls {
            alloc.device_mut().forget_calls();
        }
        self.seed_calls = alloc.device().calls().len();
        self.seen_calls = self.seed_calls;
        self.device_log = alloc
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
        let st = alloc.stats();
        self.peak_requested = self.live_requested;
        self.peak_reserved_seen = st.reserved_bytes.all.current as u64;
        self.waste_at_peak = self
            .peak_reserved_seen
            .saturating_sub(st.allocated_bytes.all.current as u64);
        if self.opts.segments_at_peak {
            self.segments_at_peak = alloc.segments();
        }
    }

    /// Replays event `i`; `Ok(true)` when the replay must stop (an OOM).
    pub(super) fn event<A>(
        &mut self,
        alloc: &mut A,
        i: usize,
        ev: &Event,
    ) -> Result<bool, ReplayError>
    where
        A: Allocator,
        A::Dev: ReplayDevice,
    {
        // Fidelity mode only: the recording's placements and refusals.
        let as_recorded = !self.expected_segments.is_empty()
            || !self.expected_retries.is_empty()
            || !self.expected_ooms.is_empty();
        let (placed, refused) = if as_recorded {
            (
                self.place_segments(alloc, i),
                self.refuse_as_recorded(alloc, i),
            )
        } else {
            (false, false)
        };
        let ei = i as u64;
        let stop = match *ev {
            Event::Alloc { id, stream, size } => self.alloc(alloc, ei, id, stream, size)?,
            Event::Free { id } => self.free(alloc, ei, id, false)?,
            Event::FreeRequested { id } => self.free(alloc, ei, id, true)?,
            Event::FreeCompleted { id } => self.free_completed(alloc, ei, id)?,
            Event::EmptyCache => {
                alloc.empty_cache().map_err(|e| alloc_err(ei, e))?;
                false
            }
            Event::HostAlloc { .. }
            | Event::HostFree { .. }
            | Event::HostFreeRequested { .. }
            | Event::HostFreeCompleted { .. }
            | Event::HostEmptyCache => self.host_event(ei, ev)?,
            Event::PoolSleep { .. }
            | Event::PoolWake { .. }
            | Event::RawAlloc { .. }
            | Event::RawFree { .. } => self.tenant_event(alloc, ei, ev)?,
            pool_event => {
                self.pool_event(alloc, &pool_event)
                    .map_err(|e| alloc_err(ei, e))?;
                false
            }
        };
        if placed {
            alloc.device_mut().clear_placements();
        }
        if refused {
            alloc.device_mut().refuse(Refusal::None);
        }
        self.replayed += 1;
        self.after_event(alloc, i, stop)?;
        if self.opts.forget_device_calls && self.seen_calls > 0 {
            alloc.device_mut().forget_calls();
            self.seen_calls = 0;
        }
        Ok(stop)
    }

    fn alloc<A: Allocator>(
        &mut self,
        alloc: &mut A,
        ei: u64,
        id: u32,
        stream: u32,
        size: u64,
    ) -> Result<bool, ReplayError> {
        let idu = id as usize;
        if self.recycled && idu >= self.slots.len() {
            // Recycled ids stay below the most allocations live at once.
            self.slots.resize(idu + 1, IdSlot::UNUSED);
        }
        // With recycled ids, the allocation's number in the trace.
        let number = if self.recycled {
            let n = self.numbers.get(self.next_number).copied();
            self.next_number += 1;
            let host = self.host.as_ref().map_or(0, host::HostSide::allocs);
            n.unwrap_or_else(|| u32::try_from(self.allocs + host).unwrap_or(u32::MAX))
        } else {
            id
        };
        let slot = self
            .slots
            .get_mut(idu)
            .ok_or_else(|| bad_id(ei, id, self.trace.num_ids))?;
        let free_slot = slot.state == IdState::Unused
            || (self.recycled && matches!(slot.state, IdState::Freed | IdState::Failed));
        if !free_slot {
            return Err(trace_err(
                ei,
                format!("alloc of id {id}, which {}", describe(slot.state)),
            ));
        }
        let raw_stream = *self.streams.get(stream as usize).ok_or_else(|| {
            trace_err(
                ei,
                format!("stream index {stream} is not in the stream table"),
            )
        })?;
        self.allocs += 1;
        let before = self.book.allocated_before(alloc);
        match alloc.malloc(size, raw_stream) {
            Ok(h) => {
                *slot = IdSlot {
                    handle: h,
                    size,
                    state: IdState::Live,
                    number,
                };
                // Saturating: seeded blocks carry unchecked sizes.
                self.live_requested = self.live_requested.saturating_add(size);
                if self.book.recording() {
                    let grew = alloc.stats().allocated_bytes.all.current - before;
                    self.book
                        .allocated(idu, alloc.block_ptr(h), u64::try_from(grew).unwrap_or(0));
                }
                Ok(false)
            }
            Err(AllocError::OutOfMemory(report)) => {
                slot.state = IdState::Failed;
                if self.oom.is_none() {
                    self.oom = Some(self.oom_event(alloc, ei, size, Some(number), &report, false));
                }
                Ok(self.opts.stop_at_oom)
            }
            Err(e) => Err(alloc_err(ei, e)),
        }
    }

    fn free<A: Allocator>(
        &mut self,
        alloc: &mut A,
        ei: u64,
        id: u32,
        deferred: bool,
    ) -> Result<bool, ReplayError> {
        let slot = self
            .slots
            .get_mut(id as usize)
            .ok_or_else(|| bad_id(ei, id, self.trace.num_ids))?;
        match slot.state {
            IdState::Live => {
                self.frees += 1;
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
                self.live_requested = self.live_requested.saturating_sub(slot.size);
                Ok(false)
            }
            IdState::Failed => Ok(false),
            st => Err(trace_err(
                ei,
                format!("free of id {id}, which {}", describe(st)),
            )),
        }
    }

    fn free_completed<A: Allocator>(
        &mut self,
        alloc: &mut A,
        ei: u64,
        id: u32,
    ) -> Result<bool, ReplayError> {
        let slot = self
            .slots
            .get_mut(id as usize)
            .ok_or_else(|| bad_id(ei, id, self.trace.num_ids))?;
        match slot.state {
            IdState::Pending => {
                alloc
                    .complete_free(slot.handle)
                    .map_err(|e| alloc_err(ei, e))?;
                slot.state = IdState::Freed;
                Ok(false)
            }
            IdState::Failed => Ok(false),
            st => Err(trace_err(
                ei,
                format!(
                    "free_completed of id {id}, which {} (no free_requested before it)",
                    describe(st)
                ),
            )),
        }
    }

    /// Peaks, timeline, invariants and the device log after event `i`.
    fn after_event<A: Allocator>(
        &mut self,
        alloc: &A,
        i: usize,
        stop: bool,
    ) -> Result<(), ReplayError> {
        let ei = i as u64;
        let st = alloc.stats();
        let reserved = st.reserved_bytes.all.current as u64;
        let allocated = st.allocated_bytes.all.current as u64;
        let active = st.active_bytes.all.current as u64;
        // Waste at peak: reserved − allocated when reserved peaks; while
        // reserved stays at its peak, the moment allocated is highest.
        let waste = reserved.saturating_sub(allocated);
        if reserved > self.peak_reserved_seen
            || (reserved == self.peak_reserved_seen && waste < self.waste_at_peak)
        {
            self.peak_reserved_seen = reserved;
            self.waste_at_peak = waste;
            self.peak_event = Some(ei);
            if self.opts.segments_at_peak {
                self.segments_at_peak = alloc.segments();
            }
        }
        self.peak_requested = self.peak_requested.max(self.live_requested);
        let w = &mut self.window;
        w.requested = w.requested.max(self.live_requested);
        w.allocated = w.allocated.max(allocated);
        w.active = w.active.max(active);
        w.reserved = w.reserved.max(reserved);
        self.until_point -= 1;
        if self.until_point == 0 || Some(i + 1) == self.n_events || stop {
            self.until_point = self.bucket;
            self.window.event_index = ei;
            self.window.largest_free = alloc.largest_free_block();
            self.timeline.push(self.window);
            self.window = TimelinePoint::default();
            if let Some(p) = &self.opts.progress {
                (p.0)(ei + 1);
            }
        }
        if self.opts.check_invariants {
            alloc
                .check_invariants()
                .map_err(|message| ReplayError::Invariant {
                    event_index: ei,
                    message,
                })?;
        }
        let calls = alloc.device().calls();
        if calls.len() > self.seen_calls {
            if let Some(h) = &self.opts.growth_hook {
                let grew = calls
                    .iter()
                    .skip(self.seen_calls)
                    .any(|c| matches!(c.kind, DeviceCallKind::Malloc | DeviceCallKind::Map));
                if grew {
                    (h.0)(ei, &alloc.segments());
                }
            }
            let new = calls.get(self.seen_calls..).unwrap_or_default();
            for c in new {
                match c.kind {
                    DeviceCallKind::Malloc | DeviceCallKind::Map => self.device_allocs += 1,
                    DeviceCallKind::Free | DeviceCallKind::Unmap => self.device_frees += 1,
                    _ => {}
                }
            }
            if !self.opts.forget_device_calls {
                self.device_log.extend(new.iter().map(|c| LoggedCall {
                    event_index: Some(i as u32),
                    kind: c.kind,
                    ptr: c.ptr,
                    size: c.size,
                }));
            }
            self.seen_calls = calls.len();
        }
        Ok(())
    }

    pub(super) fn finish<A>(mut self, alloc: &A) -> Run
    where
        A: Allocator,
        A::Dev: ReplayDevice,
    {
        let st = alloc.stats();
        let peak_reserved = st.reserved_bytes.all.peak as u64;
        let peak_active = st.active_bytes.all.peak as u64;
        let utilization = if peak_reserved == 0 {
            1.0
        } else {
            peak_active as f64 / peak_reserved as f64
        };
        if self.n_events.is_none() && self.until_point != self.bucket && self.replayed > 0 {
            // A streamed replay's one point: the window since the start.
            self.window.event_index = self.replayed - 1;
            self.window.largest_free = alloc.largest_free_block();
            self.timeline.push(self.window);
        }
        let summary = Summary {
            events: self.total_events,
            events_replayed: self.replayed,
            allocs: self.allocs,
            frees: self.frees,
            peak_requested_bytes: self.peak_requested,
            peak_allocated_bytes: st.allocated_bytes.all.peak as u64,
            peak_active_bytes: peak_active,
            peak_reserved_bytes: peak_reserved,
            final_reserved_bytes: st.reserved_bytes.all.current as u64,
            final_allocated_bytes: st.allocated_bytes.all.current as u64,
            waste_at_peak_bytes: self.waste_at_peak,
            utilization,
            fragmentation: 1.0 - utilization,
            num_device_alloc: self.device_allocs,
            num_device_free: self.device_frees,
            num_sync_all_streams: st.num_sync_all_streams as u64,
            num_alloc_retries: st.num_alloc_retries as u64,
            num_ooms: st.num_ooms as u64,
            device_time_us: alloc.device().device_time_us(),
        };
        let mut run = Run {
            policy: alloc.name().to_string(),
            conf: String::new(),
            capacity: None,
            start: self.start,
            summary,
            timeline: self.timeline,
            device_log: self.device_log,
            oom: self.oom,
            stats: *st,
            alloc_addresses: self.book.addresses,
            alloc_block_sizes: self.book.sizes,
            peak_event_index: self.peak_event,
            segments_at_peak: self.segments_at_peak,
            final_segments: if self.opts.final_segments {
                alloc.segments()
            } else {
                Vec::new()
            },
            placement_free: !alloc.placement_may_have_decided(),
            host: None,
            host_oom: None,
            host_decisions: Vec::new(),
        };
        if let Some(h) = self.host {
            let (summary, oom, decisions) = h.finish(self.opts.ranks_per_node);
            run.host = Some(summary);
            run.host_oom = oom;
            run.host_decisions = decisions;
        }
        run
    }
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
