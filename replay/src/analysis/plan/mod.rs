//! The offline plan: every allocation of a trace placed in one address
//! range knowing all lifetimes in advance (the static planning of STAlloc
//! and MiniMalloc). Its peak is what an allocator that saw the future could
//! reserve; the trace's peak live bytes bound every plan from below. A
//! policy's gap to the plan is the fragmentation no online choice avoids
//! for free; its gap to the bound, what no placement can avoid at all.
//!
//! Sizes are the requests rounded to PyTorch's 512-byte blocks. Two
//! buffers conflict when their lifetimes overlap; a plan gives each an
//! offset so that conflicting buffers do not overlap in addresses.
//! [`greedy`] places by size, largest first, each at the lowest offset it
//! fits (the classic greedy-by-size heuristic); [`exact`] searches the
//! placements of a small trace by branch and bound, and proves a plan
//! optimal when it reaches the bound.

mod exact;
mod recipes;

use serde::Serialize;
use vramlab_traces::{Event, Trace};

pub use exact::{ExactOutcome, exact};
pub use recipes::Recipe;
use recipes::recipes;

use crate::engine::scenario::Scenario;
use crate::engine::{ReplayError, ReplayOptions};

/// PyTorch's smallest block: requests are rounded up to a multiple.
pub const ROUND: u64 = 512;

/// One allocation to place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buffer {
    /// Bytes (the request rounded up to [`ROUND`]).
    pub size: u64,
    /// The event that allocates it.
    pub start: u64,
    /// The event after its last use (its free, or its free's completion;
    /// the trace's length if never freed).
    pub end: u64,
}

impl Buffer {
    /// Their lifetimes overlap.
    pub fn conflicts(&self, other: &Buffer) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// A placement: each buffer's offset, and the top of the range used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// Offsets, in the buffers' order.
    pub offsets: Vec<u64>,
    /// The largest end address: what the plan reserves.
    pub peak: u64,
}

/// The buffers of `trace`'s device allocations. `Err` for a trace a plan
/// cannot cover: one that starts mid-run (its first blocks' lifetimes are
/// not known).
pub fn buffers(trace: &Trace) -> Result<Vec<Buffer>, String> {
    if trace
        .initial
        .as_ref()
        .is_some_and(|i| !i.segments.is_empty() || !i.live.is_empty())
    {
        return Err(
            "the trace starts mid-run: the lifetimes of its first blocks are not known (start it fresh: `vramlab convert --start fresh`)".into(),
        );
    }
    let n = trace.events.len() as u64;
    let mut open: Vec<Option<usize>> = vec![None; trace.num_ids as usize];
    let mut out: Vec<Buffer> = Vec::new();
    for (i, ev) in trace.events.iter().enumerate() {
        let i = i as u64;
        match *ev {
            Event::Alloc { id, size, .. } if size > 0 => {
                if let Some(slot) = open.get_mut(id as usize) {
                    *slot = Some(out.len());
                }
                out.push(Buffer {
                    size: size.div_ceil(ROUND) * ROUND,
                    start: i,
                    end: n,
                });
            }
            Event::Free { id } | Event::FreeCompleted { id } => {
                if let Some(b) = open.get_mut(id as usize).and_then(Option::take) {
                    if let Some(buf) = out.get_mut(b) {
                        buf.end = i;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The most bytes live at once: no plan reserves less.
pub fn lower_bound(bufs: &[Buffer]) -> u64 {
    let mut edges: Vec<(u64, i64)> = Vec::with_capacity(bufs.len() * 2);
    for b in bufs {
        edges.push((b.start, b.size as i64));
        edges.push((b.end, -(b.size as i64)));
    }
    // Frees before allocations at the same event.
    edges.sort_unstable_by_key(|&(t, d)| (t, d));
    let (mut cur, mut peak) = (0i64, 0i64);
    for (_, d) in edges {
        cur += d;
        peak = peak.max(cur);
    }
    peak.max(0) as u64
}

/// The order the heuristics place in: largest first, then the longest
/// lived, then the earliest (ties by index: deterministic).
pub(crate) fn size_order(bufs: &[Buffer]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..bufs.len()).collect();
    order.sort_by_key(|&i| {
        let b = bufs.get(i).copied().unwrap_or(Buffer {
            size: 0,
            start: 0,
            end: 0,
        });
        (
            std::cmp::Reverse(b.size),
            std::cmp::Reverse(b.end - b.start),
            b.start,
            i,
        )
    });
    order
}

/// The lowest offset at which `b` overlaps none of `placed` (offset and
/// buffer, sorted by offset).
pub(crate) fn lowest_fit(b: &Buffer, placed: &[(u64, Buffer)]) -> u64 {
    let mut at = 0u64;
    for &(off, p) in placed {
        if !p.conflicts(b) {
            continue;
        }
        if off >= at.saturating_add(b.size) {
            break;
        }
        at = at.max(off + p.size);
    }
    at
}

/// Greedy by size: each buffer, largest first, at the lowest offset where
/// it overlaps no buffer live at the same time.
pub fn greedy(bufs: &[Buffer]) -> Placement {
    let mut offsets = vec![0u64; bufs.len()];
    // Placed buffers, kept sorted by offset.
    let mut placed: Vec<(u64, Buffer)> = Vec::with_capacity(bufs.len());
    let mut peak = 0u64;
    for i in size_order(bufs) {
        let Some(&b) = bufs.get(i) else { continue };
        let at = lowest_fit(&b, &placed);
        if let Some(o) = offsets.get_mut(i) {
            *o = at;
        }
        peak = peak.max(at + b.size);
        let pos = placed.partition_point(|&(o, _)| o <= at);
        placed.insert(pos, (at, b));
    }
    Placement { offsets, peak }
}

/// `Err` names two buffers that live at once and overlap in addresses.
pub fn check(bufs: &[Buffer], p: &Placement) -> Result<(), String> {
    let mut idx: Vec<usize> = (0..bufs.len()).collect();
    idx.sort_by_key(|&i| p.offsets.get(i).copied().unwrap_or(0));
    for (k, &i) in idx.iter().enumerate() {
        let (Some(a), Some(&oa)) = (bufs.get(i), p.offsets.get(i)) else {
            continue;
        };
        for &j in idx.iter().skip(k + 1) {
            let (Some(b), Some(&ob)) = (bufs.get(j), p.offsets.get(j)) else {
                continue;
            };
            if ob >= oa + a.size {
                break;
            }
            if a.conflicts(b) {
                return Err(format!(
                    "buffers {i} and {j} live at once and overlap at {ob:#x}"
                ));
            }
        }
        if oa + a.size > p.peak {
            return Err(format!("buffer {i} ends above the plan's peak"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(size: u64, start: u64, end: u64) -> Buffer {
        Buffer { size, start, end }
    }

    #[test]
    fn greedy_is_valid_and_between_the_bound_and_the_sum() {
        let bufs = vec![b(4, 0, 4), b(2, 1, 3), b(2, 3, 6), b(3, 4, 8), b(1, 0, 8)];
        let p = greedy(&bufs);
        check(&bufs, &p).unwrap();
        assert!(p.peak >= lower_bound(&bufs));
        assert_eq!(lower_bound(&bufs), 7);
        assert_eq!(p.peak, 7);
    }

    #[test]
    fn a_buffer_freed_at_an_event_makes_room_for_one_allocated_there() {
        // Frees come before allocations at the same event.
        assert_eq!(lower_bound(&[b(4, 0, 2), b(4, 2, 3)]), 4);
    }
}

/// A policy's peak against the plan and the bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyGap {
    /// The setting replayed.
    pub setting: String,
    /// Its peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// Its peak less the plan's (negative: the policy did better than the
    /// heuristic plan).
    pub gap_to_plan_bytes: i64,
    /// Its peak less peak live.
    pub gap_to_bound_bytes: u64,
    /// 1 − peak live ÷ its peak: the share of its peak no placement needs
    /// (STAlloc's fragmentation ratio).
    pub fragmentation_ratio: f64,
    /// The replay ran out of memory (on the capacity given).
    pub oom: bool,
}

/// What `vramlab plan` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanReport {
    /// Buffers placed.
    pub buffers: usize,
    /// Peak live bytes (rounded to 512 B): the lower bound.
    pub peak_live_bytes: u64,
    /// Greedy by size's peak.
    pub greedy_peak_bytes: u64,
    /// The search's outcome, when the trace is small enough to search.
    pub search: Option<ExactOutcome>,
    /// The best plan's peak.
    pub planned_peak_bytes: u64,
    /// The best plan is proved optimal: it reaches the bound, or the
    /// search tried every canonical plan.
    pub proved_optimal: bool,
    /// Each setting against the plan and the bound.
    pub policies: Vec<PolicyGap>,
    /// What a user can apply today, learned from the trace and the plan,
    /// each replayed under the first setting's release (native policy).
    pub recipes: Vec<Recipe>,
}

/// Plans `trace` (searching when it has at most `search_up_to` buffers,
/// within `budget` nodes) and replays it under each of `scenarios`.
pub fn plan(
    trace: &Trace,
    scenarios: &[Scenario],
    search_up_to: usize,
    budget: u64,
) -> Result<PlanReport, ReplayError> {
    let bufs = buffers(trace).map_err(ReplayError::Malformed)?;
    let bound = lower_bound(&bufs);
    let g = greedy(&bufs);
    check(&bufs, &g).map_err(ReplayError::Malformed)?;
    let search = (bufs.len() <= search_up_to).then(|| exact(&bufs, budget));
    let best = search
        .as_ref()
        .map_or(g.peak, |s| s.placement.peak.min(g.peak));
    let opts = ReplayOptions {
        check_invariants: false,
        ..Default::default()
    };
    let mut policies = Vec::with_capacity(scenarios.len());
    for s in scenarios {
        let run = s.run(trace, &opts)?;
        let peak = run.summary.peak_reserved_bytes;
        policies.push(PolicyGap {
            setting: s.label(),
            peak_reserved_bytes: peak,
            gap_to_plan_bytes: peak as i64 - best as i64,
            gap_to_bound_bytes: peak.saturating_sub(bound),
            fragmentation_ratio: if peak > 0 {
                1.0 - bound.min(peak) as f64 / peak as f64
            } else {
                0.0
            },
            oom: run.oom.is_some(),
        });
    }
    let release = scenarios
        .first()
        .and_then(|s| s.policy.native_conf())
        .map_or(vramlab_allocator::TorchVersion::NEWEST, |c| c.version);
    let recipes = recipes(trace, release, best, scenarios.first())?;
    Ok(PlanReport {
        recipes,
        buffers: bufs.len(),
        peak_live_bytes: bound,
        greedy_peak_bytes: g.peak,
        planned_peak_bytes: best,
        proved_optimal: best <= bound || search.as_ref().is_some_and(|s| s.proved),
        search,
        policies,
    })
}
