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
//! - a **candidate** is a live allocation with free space beside it at
//!   the peak (the bytes that would join its block if it were freed: its
//!   *pinned* bytes). Its **counterfactual** is the peak reserved of the
//!   same trace replayed without it ([`Trace::without_allocation`]); the
//!   candidates of one source line are also replayed away together
//!   ([`Trace::without_allocations`]).
//! - a **culprit** is a candidate (or a line's candidates) whose removal
//!   lowers the peak reserved — decided by that replay, nothing else —
//!   ranked by what it saves (`analysis/culprits.rs`). Beside each, the
//!   growing requests it kept from cached space (seen through
//!   [`crate::GrowthHook`]) say how.
//! - a **fix** is a setting aimed at the waste (expandable segments; a
//!   `max_split_size_mb` that keeps the top culprit from splitting a
//!   larger cached block), replayed.
//!
//! A trace that starts mid-run is explained from a fresh start
//! ([`Trace::with_fresh_start`]): the blocks in use at the first entry are
//! its first allocations, so any of them can be named and removed, and the
//! ids are those of `vramlab convert TRACE --start fresh`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use vramlab_allocator::format::{bytes_words, count};
use vramlab_allocator::{BlockState, DeviceCallKind};
use vramlab_traces::{Event, Trace};

pub use crate::analysis::culprits::{Culprit, LineCulprit};
use crate::analysis::culprits::{Failing, Found, Search, search, signed_saving};
use crate::analysis::growth::{GrowthLog, blocked_by};
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
    /// Culprits (and culprit lines) to list, the largest saving first.
    /// Every candidate is replayed whatever this says.
    pub top: usize,
    /// Replay at most this many candidates, the most pinned bytes first
    /// (`None`: every one).
    pub max_candidates: Option<usize>,
    /// Replay the settings aimed at the waste (native policy only).
    pub fixes: bool,
    /// Told the number of replays done so far, after each.
    pub progress: Option<ProgressHook>,
    /// Told the number of replays the explanation takes, once known.
    pub total: Option<ProgressHook>,
}

/// Candidates replayed by default: the rest, with the fewest pinned bytes,
/// are counted and said to be left.
pub const DEFAULT_MAX_CANDIDATES: usize = 2000;

impl Default for ExplainOptions {
    fn default() -> Self {
        ExplainOptions {
            top: 5,
            max_candidates: Some(DEFAULT_MAX_CANDIDATES),
            fixes: true,
            progress: None,
            total: None,
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
    /// Live allocations at the peak with free space beside them: the
    /// candidates.
    pub candidates: usize,
    /// Of them, replayed without (all unless more than the options allow;
    /// the most pinned bytes first).
    pub candidates_replayed: usize,
    /// Source lines with two or more candidates, each replayed without all
    /// of them.
    pub lines_replayed: usize,
    /// Candidates whose removal lowers the peak (all of them, not only the
    /// listed ones).
    pub culprits_found: usize,
    /// The top culprits, the largest saving first, each with its
    /// counterfactual (every one lowers the peak).
    pub culprits: Vec<Culprit>,
    /// Source lines whose candidates, removed together, lower the peak
    /// (all of them).
    pub line_culprits_found: usize,
    /// The top of those lines, the largest saving first.
    pub line_culprits: Vec<LineCulprit>,
    /// What the search found, in one or two sentences (the verdict when
    /// nothing one allocation or line does lowers the peak).
    pub finding: String,
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
    let done = AtomicU64::new(0);
    let tick = || {
        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(p) = &opts.progress {
            (p.0)(n);
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
    let peak = state.run.summary.peak_reserved_bytes;
    let fix_count = if opts.fixes { 2 } else { 0 };
    let set_total = |n: u64| {
        if let Some(t) = &opts.total {
            (t.0)(1 + n + fix_count);
        }
    };
    let mut found = search(&Search {
        trace,
        scenario,
        opts: &replay_opts,
        state: &state,
        blocked: &blocked,
        failing,
        max_candidates: opts.max_candidates,
        tick: &tick,
        total: &set_total,
    })?;
    let culprits_found = found.culprits.len();
    let line_culprits_found = found.lines.len();
    let finding = finding_words(&found, peak, failing.is_some());
    found.culprits.truncate(opts.top);
    found.lines.truncate(opts.top);
    let mut fixes = Vec::new();
    if opts.fixes {
        for (setting, why) in fix_candidates(scenario, &found.culprits, &state) {
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
        candidates: found.candidates,
        candidates_replayed: found.replayed,
        lines_replayed: found.lines_replayed,
        culprits_found,
        culprits: found.culprits,
        line_culprits_found,
        line_culprits: found.lines,
        finding,
        fixes,
        oom: state.run.oom.as_ref().map(|o| o.message.clone()),
        at_failure: failing.is_some(),
        failed_request_bytes: failing.map(|f| f.size),
    })
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

/// What the search found, in words: the culprits and lines that lower
/// the peak, or that none does and the settings are what remain.
fn finding_words(found: &Found, peak: u64, at_failure: bool) -> String {
    // What a culprit does: at an OOM, lets the run fit; else lowers the
    // peak.
    let does = if at_failure {
        "let the run fit the card".to_string()
    } else {
        format!("lower the {} peak", bytes_words(peak))
    };
    let left = found.candidates - found.replayed;
    let left = if left > 0 {
        format!(
            " ({} candidates with the fewest pinned bytes were not replayed.)",
            count(left as u64)
        )
    } else {
        String::new()
    };
    if found.candidates == 0 {
        return "No live allocation at the peak has free space beside it: the waste is whole cached segments, which the settings below (and empty_cache()) act on.".into();
    }
    let best = found
        .culprits
        .first()
        .map(|c| c.saving_bytes)
        .into_iter()
        .chain(found.lines.first().map(|l| l.saving_bytes))
        .max();
    match best {
        None => format!(
            "None of the {} live allocations with free space beside them at the peak would {does} when replayed away, alone or with the others of its source line ({} lines tried): the waste comes from how the allocator packs the whole run, not from one tensor, and the settings below are what act on it.{left}",
            count(found.replayed as u64),
            count(found.lines_replayed as u64)
        ),
        Some(saving) => {
            let lines = if found.lines_replayed > 0 {
                format!(
                    ", and {} of {} source lines when their allocations go together",
                    count(found.lines.len() as u64),
                    count(found.lines_replayed as u64)
                )
            } else {
                String::new()
            };
            let most = if saving > 0 {
                format!(
                    "; the largest saving is {}",
                    bytes_words(saving.unsigned_abs())
                )
            } else {
                String::new()
            };
            format!(
                "{} of {} live allocations with free space beside them {does} when replayed away{lines}{most}.{left}",
                count(found.culprits.len() as u64),
                count(found.replayed as u64),
            )
        }
    }
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
