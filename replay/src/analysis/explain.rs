//! `explain`: why a replay reserves more than it allocates at its peak —
//! the waste split by cause, the live allocations that pin free space
//! beside them, and each claim proved by a replay without that allocation.
//!
//! At the reserved peak ([`crate::Run::peak_event_index`]) — or, when the
//! replay runs out of memory on the given capacity, just before the
//! request that failed, where "reserved but unallocated" is what the
//! error message complains of:
//!
//! - **waste** (reserved − allocated) = `releasable` (what `empty_cache()`
//!   gives back there, replayed) + `pool_cached` (whole free segments of
//!   private pools that `empty_cache()` keeps while their graph or MemPool
//!   lives) + `pinned` (the rest: free space inside segments that hold
//!   live blocks, which no release can return). `rounding` (allocated −
//!   requested) is beside it, not in it.
//! - a **culprit** is a live allocation with free space beside it at the
//!   peak (the bytes that would join its block if it were freed: its
//!   *pinned* bytes) that kept a growing request from cached space: at
//!   some event by the peak that made the device allocate, the request —
//!   on the culprit's stream, from its pool — would have fitted in the
//!   culprit's block and the free space beside it *then* (the state after
//!   each growing event, seen through [`crate::GrowthHook`]). Culprits are
//!   ranked by pinned bytes.
//! - the **counterfactual** of a culprit is the peak reserved of the same
//!   trace replayed without it ([`Trace::without_allocation`]); a
//!   **fix** is a setting aimed at what the culprits show (expandable
//!   segments; a `max_split_size_mb` that keeps the top culprit from
//!   splitting a larger cached block), replayed.
//!
//! A trace that starts mid-run is explained from a fresh start
//! ([`Trace::with_fresh_start`]): the blocks in use at the first entry are
//! its first allocations, so any of them can be named and removed, and the
//! ids are those of `vramlab convert TRACE --start fresh`.

use serde::Serialize;
use vramlab_allocator::{BlockState, DeviceCallKind};
use vramlab_traces::{AllocId, Event, Trace, code_frames};

use std::collections::HashMap;

use crate::analysis::growth::{Blocked, GrowthLog, blocked_by};
use crate::analysis::peak_state::{Moment, PeakSegment, PeakState, peak_state, phase_of};
use crate::engine::scenario::Scenario;
use crate::engine::start::Start;
use crate::engine::{ProgressHook, ReplayError, ReplayOptions};

/// 1 MiB.
const MIB: u64 = 1 << 20;
/// PyTorch refuses `max_split_size_mb` at or below 20.
const MIN_MAX_SPLIT_MB: u64 = 21;

/// How far `explain` goes.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// Culprits to name (each costs one replay for its counterfactual).
    pub top: usize,
    /// Replay the settings aimed at the waste (native policy only).
    pub fixes: bool,
    /// Told the number of replays done so far, after each.
    pub progress: Option<ProgressHook>,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        ExplainOptions {
            top: 5,
            fixes: true,
            progress: None,
        }
    }
}

/// The reserved-but-unallocated bytes at the peak, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WasteSplit {
    /// Block sizes above the callers' requests (allocated − requested;
    /// not part of the waste).
    pub rounding_bytes: u64,
    /// Free space inside segments that hold live blocks: no release
    /// returns it while they live.
    pub pinned_bytes: u64,
    /// What `empty_cache()` at the peak gives back to the device.
    pub releasable_bytes: u64,
    /// Whole free segments of private pools (CUDA graphs, MemPools) that
    /// `empty_cache()` keeps while the pool is in use.
    pub pool_cached_bytes: u64,
    /// Of the waste, blocks freed by their callers and still waiting for
    /// other streams' work (`record_stream`).
    pub pending_free_bytes: u64,
}

/// A live allocation that pins free space at the peak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Culprit {
    /// Its allocation id (as in `vramlab convert TRACE --start fresh`).
    pub id: AllocId,
    /// The caller's request in bytes.
    pub size_bytes: u64,
    /// Its block's size.
    pub block_bytes: u64,
    /// Free bytes beside its block that would join it if it were freed.
    pub pinned_bytes: u64,
    /// The segment it sits in: base address and size.
    pub segment_address: u64,
    /// Size of that segment (of the mapped range, for expandable segments).
    pub segment_bytes: u64,
    /// Raw stream handle.
    pub stream: u64,
    /// The private pool it came from (`None`: the default pool).
    pub private_pool: Option<u32>,
    /// Its first user frame (`file.py:LINE in fn`), when the trace has stacks.
    pub frame: Option<String>,
    /// Its user frames, innermost first (at most 4).
    pub frames: Vec<String>,
    /// Its `Alloc` event (`None` only for a block the replay began with).
    pub allocated_at: Option<u64>,
    /// Its free (`None`: still allocated at the end).
    pub freed_at: Option<u64>,
    /// The phase it was allocated in.
    pub phase: Option<String>,
    /// Requests by the peak that made the device allocate while it was
    /// live and would have fitted in its block and the free space beside it
    /// then (same stream and pool).
    pub blocked_requests: u64,
    /// The device bytes those requests took.
    pub blocked_device_bytes: u64,
    /// Peak reserved of the trace replayed without this allocation.
    pub peak_reserved_without_bytes: u64,
    /// Peak reserved − that: what removing it saves (negative: costs).
    pub saving_bytes: i64,
    /// When the explained replay ran out of memory: whether it runs to the
    /// end without this allocation.
    pub fits_without: Option<bool>,
}

/// A setting aimed at the waste, replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fix {
    /// The settings string replayed.
    pub setting: String,
    /// What it targets, in words.
    pub why: String,
    /// Its peak reserved.
    pub peak_reserved_bytes: u64,
    /// Peak reserved under the explained setting − this (negative: worse).
    pub saving_bytes: i64,
    /// It ran out of memory on the explained capacity.
    pub oom: bool,
}

/// What `vramlab explain` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The setting explained (its label).
    pub setting: String,
    /// `fresh` when the trace began mid-run and was explained from a
    /// fresh start.
    pub start: Option<Start>,
    /// Events replayed (the fresh start's prologue included).
    pub events: u64,
    /// The event after which reserved peaked (`None`: before the first).
    pub peak_event_index: Option<u64>,
    /// The phase of that event.
    pub phase_at_peak: Option<String>,
    /// Peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// Allocated bytes at the peak.
    pub allocated_at_peak_bytes: u64,
    /// Live caller bytes at the peak.
    pub requested_at_peak_bytes: u64,
    /// Reserved − allocated at the peak.
    pub waste_at_peak_bytes: u64,
    /// The waste by cause (pinned + releasable + pool_cached = waste).
    pub waste: WasteSplit,
    /// Segments at the peak.
    pub segments_at_peak: usize,
    /// Of them, segments that hold live blocks.
    pub segments_with_live_blocks: usize,
    /// Device allocations (new segments, mapped pages) by the peak.
    pub growth_requests: u64,
    /// Live allocations found pinning space (all of them, not only the
    /// named ones).
    pub culprits_found: usize,
    /// The top culprits, each with its counterfactual.
    pub culprits: Vec<Culprit>,
    /// Settings aimed at the waste, each replayed (best first).
    pub fixes: Vec<Fix>,
    /// The replay ran out of memory (on the given capacity): its message.
    pub oom: Option<String>,
    /// The moment explained is the state just before the failing request
    /// (the replay ran out of memory), not the reserved peak:
    /// `peak_event_index` is then the event before the failure, and the
    /// `*_at_peak_bytes` figures and the waste are that state's.
    pub at_failure: bool,
    /// The caller's bytes of the request that failed.
    pub failed_request_bytes: Option<u64>,
}

/// Explains `trace`'s reserved peak under `scenario`.
pub fn explain(
    trace: &Trace,
    scenario: &Scenario,
    opts: &ExplainOptions,
) -> Result<Explanation, ReplayError> {
    let fresh;
    let (trace, start) = if trace.initial.is_some() {
        fresh = trace.with_fresh_start();
        (&fresh, Some(Start::Fresh))
    } else {
        (trace, None)
    };
    let replay_opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        ..ReplayOptions::default()
    };
    let mut done = 0u64;
    let mut tick = || {
        done += 1;
        if let Some(p) = &opts.progress {
            (p.0)(done);
        }
    };
    let log = GrowthLog::default();
    let state = peak_state(
        trace,
        scenario,
        &replay_opts,
        Some(log.hook()),
        Moment::FailureOrPeak,
    )?;
    tick();
    let waste = waste_split(&state);
    let blocked = blocked_by(trace, &log, &state);
    let failing = failing_request(trace, &state);
    let native = scenario.policy.native_conf().is_some();
    let mut found = find_culprits(trace, &state, &blocked, failing, native);
    let culprits_found = found.len();
    found.truncate(opts.top);
    let peak = state.run.summary.peak_reserved_bytes;
    for c in &mut found {
        let without = trace.without_allocation(c.id);
        let run = scenario.run(&without, &replay_opts)?;
        tick();
        c.peak_reserved_without_bytes = run.summary.peak_reserved_bytes;
        c.saving_bytes = signed_saving(peak, run.summary.peak_reserved_bytes);
        c.fits_without = failing.map(|_| run.oom.is_none());
    }
    let mut fixes = Vec::new();
    if opts.fixes {
        for (setting, why) in fix_candidates(scenario, &found, &state) {
            let Ok(s) = setting else { continue };
            let run = s.run(trace, &replay_opts)?;
            tick();
            fixes.push(Fix {
                setting: s.label(),
                why,
                peak_reserved_bytes: run.summary.peak_reserved_bytes,
                saving_bytes: signed_saving(peak, run.summary.peak_reserved_bytes),
                oom: run.oom.is_some(),
            });
        }
        // Those that fit first, then by saving.
        fixes.sort_by_key(|f| (f.oom, std::cmp::Reverse(f.saving_bytes)));
    }
    let segments = &state.segments;
    Ok(Explanation {
        setting: scenario.label(),
        start,
        events: trace.events.len() as u64,
        peak_event_index: state.at,
        phase_at_peak: phase_of(trace, state.at),
        peak_reserved_bytes: peak,
        allocated_at_peak_bytes: state.allocated_bytes,
        requested_at_peak_bytes: requested_at_peak(segments),
        waste_at_peak_bytes: state.reserved_bytes.saturating_sub(state.allocated_bytes),
        waste,
        segments_at_peak: segments.len(),
        segments_with_live_blocks: segments.iter().filter(|s| s.holds_live()).count(),
        growth_requests: growth_events(&state),
        culprits_found,
        culprits: found,
        fixes,
        oom: state.run.oom.as_ref().map(|o| o.message.clone()),
        at_failure: failing.is_some(),
        failed_request_bytes: failing.map(|f| f.size),
    })
}

/// The request the replay ran out of memory at, when it is an event (not
/// the state the trace began with).
#[derive(Debug, Clone, Copy)]
struct Failing {
    stream: u64,
    size: u64,
}

fn failing_request(trace: &Trace, state: &PeakState) -> Option<Failing> {
    let o = state.run.oom.as_ref().filter(|o| !o.at_start)?;
    match trace.events.get(o.event_index as usize)? {
        &Event::Alloc { stream, size, .. } => Some(Failing {
            stream: trace.streams.get(stream as usize).copied().unwrap_or(0),
            size,
        }),
        _ => None,
    }
}

fn signed_saving(peak: u64, other: u64) -> i64 {
    (peak as i128 - other as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Live caller bytes at the peak: the requests of its allocated blocks.
fn requested_at_peak(segments: &[PeakSegment]) -> u64 {
    segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == BlockState::Allocated)
        .fold(0u64, |t, b| t.saturating_add(b.requested))
}

/// The waste at the peak by cause. `pinned` is what neither a release nor
/// a pool's cache accounts for, so the three add up to the waste exactly.
fn waste_split(state: &PeakState) -> WasteSplit {
    let waste = state.reserved_bytes.saturating_sub(state.allocated_bytes);
    let releasable = state.empty_cache.released_bytes.min(waste);
    let pool_cached = state
        .empty_cache
        .segments_after
        .iter()
        .filter(|s| s.private_pool.is_some() && !s.is_expandable)
        .filter(|s| s.blocks.iter().all(|b| b.state == BlockState::Free))
        .fold(0u64, |t, s| t.saturating_add(s.size))
        .min(waste - releasable);
    let blocks = || state.segments.iter().flat_map(|s| &s.blocks);
    let pending = blocks()
        .filter(|b| b.state == BlockState::PendingFree)
        .fold(0u64, |t, b| t.saturating_add(b.size));
    let allocated = blocks()
        .filter(|b| b.state == BlockState::Allocated)
        .fold(0u64, |t, b| t.saturating_add(b.size));
    WasteSplit {
        rounding_bytes: allocated.saturating_sub(requested_at_peak(&state.segments)),
        pinned_bytes: waste - releasable - pool_cached,
        releasable_bytes: releasable,
        pool_cached_bytes: pool_cached,
        pending_free_bytes: pending,
    }
}

/// Events by the peak that made the device allocate (a segment, or mapped
/// pages of an expandable one).
fn growth_events(state: &PeakState) -> u64 {
    let mut last = None;
    let mut n = 0;
    for c in &state.device_log {
        if matches!(c.kind, DeviceCallKind::Malloc | DeviceCallKind::Map)
            && c.event_index.is_some()
            && c.event_index != last
        {
            n += 1;
            last = c.event_index;
        }
    }
    n
}

/// Every live block at the peak with free space beside it that kept a
/// growing request from cached space, ranked by pinned bytes.
fn find_culprits(
    trace: &Trace,
    state: &PeakState,
    blocked: &HashMap<AllocId, Blocked>,
    failing: Option<Failing>,
    native: bool,
) -> Vec<Culprit> {
    let mut out = Vec::new();
    for seg in &state.segments {
        for (i, b) in seg.blocks.iter().enumerate() {
            let Some(id) = b.id.filter(|_| b.state == BlockState::Allocated) else {
                continue;
            };
            let pinned = free_beside(seg, i);
            // The failing request would have fitted in this block and the
            // free space beside it (same stream and pool).
            let fails_here = failing.is_some_and(|f| {
                f.stream == seg.stream
                    && seg.private_pool.is_none()
                    && pinned.saturating_add(b.size) >= f.size
                    && (!native
                        || (f.size <= MIB) == (seg.pool == vramlab_allocator::PoolKind::Small))
            });
            let mut kept = blocked.get(&id).copied().unwrap_or_default();
            kept.requests += u64::from(fails_here);
            if pinned == 0 || kept.requests == 0 {
                continue;
            }
            let life = state
                .lifetimes
                .get(id as usize)
                .copied()
                .unwrap_or_default();
            let frames: Vec<String> = code_frames(trace.stack_of(id))
                .into_iter()
                .take(4)
                .map(|f| f.short())
                .collect();
            out.push(Culprit {
                id,
                size_bytes: life.requested,
                block_bytes: b.size,
                pinned_bytes: pinned,
                segment_address: seg.ptr,
                segment_bytes: seg.size,
                stream: seg.stream,
                private_pool: seg.private_pool,
                frame: frames.first().cloned(),
                frames,
                allocated_at: life.allocated_at(),
                freed_at: life.freed_at(),
                phase: phase_of(trace, life.allocated_at()),
                blocked_requests: kept.requests,
                blocked_device_bytes: kept.device_bytes,
                peak_reserved_without_bytes: 0,
                saving_bytes: 0,
                fits_without: None,
            });
        }
    }
    out.sort_by(|a, b| {
        b.pinned_bytes
            .cmp(&a.pinned_bytes)
            .then(b.block_bytes.cmp(&a.block_bytes))
            .then(a.id.cmp(&b.id))
    });
    out
}

/// Free bytes of the blocks right before and after block `i` of `seg`:
/// what would join it if it were freed.
fn free_beside(seg: &PeakSegment, i: usize) -> u64 {
    let free = |j: Option<usize>| {
        j.and_then(|j| seg.blocks.get(j))
            .filter(|b| b.state == BlockState::Free)
            .map_or(0, |b| b.size)
    };
    free(i.checked_sub(1)).saturating_add(free(i.checked_add(1)))
}

/// Settings aimed at what the culprits show, for the native policy:
/// expandable segments (free space beside live blocks becomes usable by
/// any size), and a `max_split_size_mb` just above the top culprit that
/// keeps it from taking (and splitting) a larger cached block.
fn fix_candidates(
    scenario: &Scenario,
    culprits: &[Culprit],
    state: &PeakState,
) -> Vec<(Result<Scenario, String>, String)> {
    let Some(conf) = scenario.policy.native_conf() else {
        return Vec::new();
    };
    let with = |update: &str| -> Result<Scenario, String> {
        let c = conf.parse_update(update).map_err(|e| e.to_string())?;
        let mut s = scenario.clone();
        s.policy = vramlab_allocator::PolicySpec::Native(c);
        Ok(s)
    };
    let mut out = Vec::new();
    let pinned = state
        .segments
        .iter()
        .any(|s| s.holds_live() && !s.is_expandable);
    if !conf.expandable_segments && pinned {
        out.push((
            with("expandable_segments:True"),
            "one growing segment per stream: free space beside live blocks serves any size".into(),
        ));
    }
    if let Some(top) = culprits.iter().find(|c| c.block_bytes > MIB) {
        let mb = (top.block_bytes / MIB + 1).max(MIN_MAX_SPLIT_MB);
        let effective = conf.max_split_size.is_none_or(|m| m > mb * MIB);
        if mb * MIB < top.segment_bytes && effective && !conf.expandable_segments {
            out.push((
                with(&format!("max_split_size_mb:{mb}")),
                format!(
                    "requests below {mb} MiB (the top culprit's block) no longer take cached blocks of {mb} MiB or more"
                ),
            ));
        }
    }
    out
}
