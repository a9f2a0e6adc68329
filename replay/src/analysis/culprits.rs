//! `explain`'s culprits, decided by replay: every live allocation at the
//! peak with free space beside it is a candidate, the trace is replayed
//! without each one (and without each source line's candidates together),
//! and only those whose removal lowers the peak reserved are culprits,
//! ranked by what the replay saves. When the explained replay ran out of
//! memory, fitting is the question: a culprit is a removal that lets it
//! run to the end.

use std::collections::BTreeMap;
use std::collections::HashMap;

use rayon::prelude::*;
use serde::Serialize;
use vramlab_allocator::{BlockState, PoolKind};
use vramlab_traces::{AllocId, Trace, code_frames};

use crate::analysis::growth::Blocked;
use crate::analysis::peak_state::{PeakSegment, PeakState, phase_of};
use crate::engine::scenario::Scenario;
use crate::engine::{ReplayError, ReplayOptions};

/// 1 MiB.
const MIB: u64 = 1 << 20;

/// A live allocation at the peak whose removal lowers the peak reserved
/// (replayed).
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
    /// Peak reserved − that: what removing it saves (positive for every
    /// listed culprit, unless the explained replay ran out of memory: then
    /// every listed culprit lets it fit, whatever its peak).
    pub saving_bytes: i64,
    /// When the explained replay ran out of memory: whether it runs to the
    /// end without this allocation.
    pub fits_without: Option<bool>,
}

/// The candidates of one source line removed together (a loop's or a list
/// comprehension's blocks are one decision in the user's code), when that
/// lowers the peak reserved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineCulprit {
    /// The line: its first user frame (`file.py:LINE in fn`).
    pub frame: String,
    /// The allocations removed (the line's candidates), by id.
    pub ids: Vec<AllocId>,
    /// Their blocks' bytes.
    pub block_bytes: u64,
    /// Free bytes beside them at the peak.
    pub pinned_bytes: u64,
    /// Peak reserved of the trace replayed without all of them.
    pub peak_reserved_without_bytes: u64,
    /// Peak reserved − that (positive for every listed line, unless the
    /// explained replay ran out of memory and this removal lets it fit).
    pub saving_bytes: i64,
    /// When the explained replay ran out of memory: whether it runs to the
    /// end without them.
    pub fits_without: Option<bool>,
}

/// What the search by replay found.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Candidates at the peak (live blocks with free space beside them).
    pub candidates: usize,
    /// Of them, replayed without (the most pinned bytes first).
    pub replayed: usize,
    /// Source lines with two or more replayed candidates, each replayed
    /// without all of them.
    pub lines_replayed: usize,
    /// Every culprit, the largest saving first.
    pub culprits: Vec<Culprit>,
    /// Every culprit line, the largest saving first.
    pub lines: Vec<LineCulprit>,
}

/// The request the replay ran out of memory at, when it is an event (not
/// the state the trace began with).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failing {
    /// Its raw stream handle.
    pub stream: u64,
    /// The caller's bytes.
    pub size: u64,
}

/// How the search runs.
pub(crate) struct Search<'a> {
    pub trace: &'a Trace,
    pub scenario: &'a Scenario,
    pub opts: &'a ReplayOptions,
    pub state: &'a PeakState,
    pub blocked: &'a HashMap<AllocId, Blocked>,
    pub failing: Option<Failing>,
    /// Replay at most this many candidates (`None`: all).
    pub max_candidates: Option<usize>,
    /// Called after each replay with the number done.
    pub tick: &'a (dyn Fn() + Sync),
    /// Told the number of replays the search takes, once known.
    pub total: &'a dyn Fn(u64),
}

/// Replays the trace without each candidate and without each source
/// line's candidates; keeps those that lower the peak.
pub(crate) fn search(s: &Search<'_>) -> Result<Found, ReplayError> {
    let mut candidates = candidates(s);
    let total = candidates.len();
    if let Some(max) = s.max_candidates {
        candidates.truncate(max);
    }
    // Each candidate alone, then each source line's candidates together
    // (its ids, block and pinned bytes).
    let mut by_line: BTreeMap<&str, (Vec<AllocId>, u64, u64)> = BTreeMap::new();
    for c in &candidates {
        if let Some(f) = &c.frame {
            let e = by_line.entry(f.as_str()).or_default();
            e.0.push(c.id);
            e.1 = e.1.saturating_add(c.block_bytes);
            e.2 = e.2.saturating_add(c.pinned_bytes);
        }
    }
    let lines: Vec<(String, Vec<AllocId>, u64, u64)> = by_line
        .into_iter()
        .filter(|(_, v)| v.0.len() > 1)
        .map(|(f, (ids, block, pinned))| (f.to_string(), ids, block, pinned))
        .collect();
    let groups: Vec<Vec<AllocId>> = candidates
        .iter()
        .map(|c| vec![c.id])
        .chain(lines.iter().map(|l| l.1.clone()))
        .collect();
    (s.total)(groups.len() as u64);
    let peak = s.state.run.summary.peak_reserved_bytes;
    let outcomes: Vec<(u64, bool)> = groups
        .par_iter()
        .map(|ids: &Vec<AllocId>| {
            let run = s.scenario.run(&s.trace.without_allocations(ids), s.opts)?;
            (s.tick)();
            Ok((run.summary.peak_reserved_bytes, run.oom.is_none()))
        })
        .collect::<Result<_, ReplayError>>()?;
    let (single, grouped) = outcomes.split_at(candidates.len());
    let fits = |ok: bool| s.failing.map(|_| ok);
    let replayed = candidates.len();
    // At an OOM what matters is whether the run fits without it; else
    // whether the peak drops.
    let helps = |without: u64, ok: bool| {
        if s.failing.is_some() {
            ok
        } else {
            without < peak
        }
    };
    let mut culprits: Vec<Culprit> = candidates
        .into_iter()
        .zip(single)
        .filter(|(_, (without, ok))| helps(*without, *ok))
        .map(|(mut c, &(without, ok))| {
            c.peak_reserved_without_bytes = without;
            c.saving_bytes = signed_saving(peak, without);
            c.fits_without = fits(ok);
            c
        })
        .collect();
    culprits.sort_by_key(|c| (std::cmp::Reverse(c.saving_bytes), c.id));
    let mut line_culprits: Vec<LineCulprit> = Vec::new();
    for ((frame, ids, block, pinned), &(without, ok)) in lines.into_iter().zip(grouped) {
        if !helps(without, ok) {
            continue;
        }
        line_culprits.push(LineCulprit {
            frame,
            ids,
            block_bytes: block,
            pinned_bytes: pinned,
            peak_reserved_without_bytes: without,
            saving_bytes: signed_saving(peak, without),
            fits_without: fits(ok),
        });
    }
    line_culprits.sort_by(|a, b| {
        b.saving_bytes
            .cmp(&a.saving_bytes)
            .then(a.frame.cmp(&b.frame))
    });
    Ok(Found {
        candidates: total,
        replayed,
        lines_replayed: groups.len().saturating_sub(replayed),
        culprits,
        lines: line_culprits,
    })
}

/// `peak − other`, as a signed saving.
pub(crate) fn signed_saving(peak: u64, other: u64) -> i64 {
    (peak as i128 - other as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Every live block at the peak with free space beside it, the most
/// pinned bytes first (then the largest block, then the lowest id): the
/// candidates, their counterfactuals not yet replayed.
fn candidates(s: &Search<'_>) -> Vec<Culprit> {
    let (trace, state) = (s.trace, s.state);
    let native = s.scenario.policy.native_conf().is_some();
    let mut out = Vec::new();
    for seg in &state.segments {
        for (i, b) in seg.blocks.iter().enumerate() {
            let Some(id) = b.id.filter(|_| b.state == BlockState::Allocated) else {
                continue;
            };
            let pinned = free_beside(seg, i);
            if pinned == 0 {
                continue;
            }
            // The failing request, had it fitted here, was kept out too.
            let mut kept = s.blocked.get(&id).copied().unwrap_or_default();
            kept.requests += u64::from(fails_here(s.failing, seg, b.size, pinned, native));
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

/// Whether the failing request would have fitted in block `size` of `seg`
/// and the `pinned` bytes beside it (same stream and pool; for the native
/// policy, a pool of its size class).
fn fails_here(
    failing: Option<Failing>,
    seg: &PeakSegment,
    size: u64,
    pinned: u64,
    native: bool,
) -> bool {
    failing.is_some_and(|f| {
        f.stream == seg.stream
            && seg.private_pool.is_none()
            && pinned.saturating_add(size) >= f.size
            && (!native || (f.size <= MIB) == (seg.pool == PoolKind::Small))
    })
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
