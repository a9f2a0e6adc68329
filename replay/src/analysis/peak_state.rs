//! The allocator's state at the reserved peak, each block named by the
//! allocation id it serves, and what `empty_cache()` would give back
//! there: what `explain` and `diff` read.
//!
//! The peak is the moment [`crate::Summary::waste_at_peak_bytes`]
//! describes ([`crate::Run::peak_event_index`]). The state there is
//! re-created by a second replay that stops after that event, so the
//! engine's loop keeps no per-event copies.

use std::collections::HashMap;

use vramlab_allocator::{BlockState, PoolKind, SegmentView};
use vramlab_traces::{AllocId, Event, Trace};

use crate::engine::run::Run;
use crate::engine::scenario::{EmptyCacheOutcome, Scenario};
use crate::engine::{ReplayError, ReplayOptions};

/// An event index that may be absent, in 8 bytes (an `Option<u64>` takes
/// 16): the lifetimes of a long trace's millions of allocations are held
/// at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct At(u64);

impl At {
    /// No event.
    const NONE: At = At(u64::MAX);

    fn get(self) -> Option<u64> {
        (self != At::NONE).then_some(self.0)
    }

    /// Sets the index unless one is already set (the first event wins).
    fn first(&mut self, i: u64) {
        if *self == At::NONE {
            self.0 = i;
        }
    }
}

/// When an allocation lived, in event indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lifetime {
    allocated_at: At,
    freed_at: At,
    released_at: At,
    /// The caller's request in bytes.
    pub requested: u64,
    /// In use when the trace began (a block of its initial state).
    pub initial: bool,
}

impl Default for Lifetime {
    fn default() -> Self {
        Lifetime {
            allocated_at: At::NONE,
            freed_at: At::NONE,
            released_at: At::NONE,
            requested: 0,
            initial: false,
        }
    }
}

impl Lifetime {
    /// Its `Alloc` event (`None`: in use when the trace began, or never
    /// allocated).
    pub(crate) fn allocated_at(&self) -> Option<u64> {
        self.allocated_at.get()
    }

    /// The caller's free (`Free` or `FreeRequested`; `None`: never freed).
    pub(crate) fn freed_at(&self) -> Option<u64> {
        self.freed_at.get()
    }

    /// When its block went back to the allocator (`Free` or
    /// `FreeCompleted`; `None`: never).
    pub(crate) fn released_at(&self) -> Option<u64> {
        self.released_at.get()
    }

    /// Its block is held (allocated, or freed and waiting for other
    /// streams) after event `at` (`None`: before the first event).
    fn holds_block_after(&self, at: Option<u64>) -> bool {
        let began =
            self.initial || matches!((self.allocated_at(), at), (Some(a), Some(p)) if a <= p);
        let ended = matches!((self.released_at(), at), (Some(r), Some(p)) if r <= p);
        began && !ended && self.requested > 0
    }
}

/// Every allocation's lifetime, indexed by id.
pub(crate) fn lifetimes(trace: &Trace) -> Vec<Lifetime> {
    let mut out = vec![Lifetime::default(); trace.num_ids as usize];
    if let Some(init) = &trace.initial {
        for b in &init.live {
            if let Some(l) = out.get_mut(b.id() as usize) {
                l.initial = true;
                l.requested = b.requested;
            }
        }
    }
    for (i, ev) in trace.events.iter().enumerate() {
        let i = i as u64;
        match *ev {
            Event::Alloc { id, size, .. } => {
                if let Some(l) = out.get_mut(id as usize) {
                    l.allocated_at.first(i);
                    l.requested = size;
                }
            }
            Event::Free { id } => {
                if let Some(l) = out.get_mut(id as usize) {
                    l.freed_at.first(i);
                    l.released_at.first(i);
                }
            }
            Event::FreeRequested { id } => {
                if let Some(l) = out.get_mut(id as usize) {
                    l.freed_at.first(i);
                }
            }
            Event::FreeCompleted { id } => {
                if let Some(l) = out.get_mut(id as usize) {
                    l.released_at.first(i);
                }
            }
            _ => {}
        }
    }
    out
}

/// A block at the peak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeakBlock {
    /// Address.
    pub ptr: u64,
    /// Block size (the rounded request of an allocated block).
    pub size: u64,
    /// The caller's request it serves (stale when free).
    pub requested: u64,
    /// Allocated, pending free or free.
    pub state: BlockState,
    /// The allocation it serves (allocated and pending-free blocks).
    pub id: Option<AllocId>,
}

/// A segment at the peak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeakSegment {
    /// Base address.
    pub ptr: u64,
    /// Bytes.
    pub size: u64,
    /// Raw stream handle.
    pub stream: u64,
    /// Small or large pool.
    pub pool: PoolKind,
    /// The private pool it belongs to (`None`: the default pool).
    pub private_pool: Option<u32>,
    /// A mapped range of an expandable segment.
    pub is_expandable: bool,
    /// Blocks in address order.
    pub blocks: Vec<PeakBlock>,
}

impl PeakSegment {
    /// Some block of it is allocated or waiting for other streams.
    pub(crate) fn holds_live(&self) -> bool {
        self.blocks.iter().any(|b| b.state != BlockState::Free)
    }
}

/// The state at the reserved peak of one replay.
#[derive(Debug, Clone)]
pub(crate) struct PeakState {
    /// The whole replay.
    pub run: Run,
    /// The event after which the peak was reached (`None`: before the
    /// first event).
    pub at: Option<u64>,
    /// The segments there, blocks named.
    pub segments: Vec<PeakSegment>,
    /// `reserved_bytes.all.current` there.
    pub reserved_bytes: u64,
    /// `allocated_bytes.all.current` there.
    pub allocated_bytes: u64,
    /// What `empty_cache()` would give back there.
    pub empty_cache: EmptyCacheOutcome,
    /// Every allocation's lifetime, by id.
    pub lifetimes: Vec<Lifetime>,
    /// The address each id got, in the replay to the peak (0: none yet).
    pub addresses: Vec<u64>,
    /// The device calls of the replay to the peak.
    pub device_log: Vec<crate::engine::run::LoggedCall>,
}

/// Which moment of a replay to re-create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moment {
    /// The reserved peak.
    Peak,
    /// Just before the failing request when the replay ran out of memory
    /// (after its first events), else the reserved peak.
    FailureOrPeak,
}

/// Replays `trace` under `scenario` (`opts` as given) and re-creates the
/// state at `moment`; `growth`, when given, sees every event up to it that
/// made the device allocate.
pub(crate) fn peak_state(
    trace: &Trace,
    scenario: &Scenario,
    opts: &ReplayOptions,
    growth: Option<crate::engine::GrowthHook>,
    moment: Moment,
) -> Result<PeakState, ReplayError> {
    let run = scenario.run(trace, opts)?;
    let at = match (&run.oom, moment) {
        (Some(o), Moment::FailureOrPeak) if !o.at_start => o.event_index.checked_sub(1),
        _ => run.peak_event_index,
    };
    let to_peak = ReplayOptions {
        stop_before: Some(at.map_or(0, |p| p + 1)),
        record_addresses: true,
        final_segments: true,
        segments_at_peak: false,
        progress: None,
        timeline_points: 1,
        growth_hook: growth,
        ..opts.clone()
    };
    let (there, empty_cache) = scenario.run_then_empty_cache(trace, &to_peak)?;
    let lifetimes = lifetimes(trace);
    let mut by_address: HashMap<u64, AllocId> = HashMap::new();
    for (id, l) in lifetimes.iter().enumerate() {
        if l.holds_block_after(at) {
            if let Some(&ptr) = there.alloc_addresses.get(id) {
                by_address.insert(ptr, id as AllocId);
            }
        }
    }
    let segments = there
        .final_segments
        .iter()
        .map(|s| name_blocks(s, &by_address))
        .collect();
    Ok(PeakState {
        addresses: there.alloc_addresses.clone(),
        device_log: there.device_log.clone(),
        reserved_bytes: there.stats.reserved_bytes.all.current.max(0) as u64,
        allocated_bytes: there.stats.allocated_bytes.all.current.max(0) as u64,
        run,
        at,
        segments,
        empty_cache,
        lifetimes,
    })
}

fn name_blocks(s: &SegmentView, by_address: &HashMap<u64, AllocId>) -> PeakSegment {
    PeakSegment {
        ptr: s.ptr,
        size: s.size,
        stream: s.stream,
        pool: s.pool,
        private_pool: s.private_pool,
        is_expandable: s.is_expandable,
        blocks: s
            .blocks
            .iter()
            .map(|b| PeakBlock {
                ptr: b.ptr,
                size: b.size,
                requested: b.requested,
                state: b.state,
                id: match b.state {
                    BlockState::Free => None,
                    _ => by_address.get(&b.ptr).copied(),
                },
            })
            .collect(),
    }
}

/// The phase the event at `index` belongs to (`None` before the first mark
/// or in a trace without marks).
pub(crate) fn phase_of(trace: &Trace, index: Option<u64>) -> Option<String> {
    let i = index?;
    trace
        .phases
        .iter()
        .take_while(|m| m.event_index <= i)
        .last()
        .map(|m| m.label.clone())
}
