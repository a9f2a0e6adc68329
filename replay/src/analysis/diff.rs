//! `diff`: what changed between two runs at their reserved peaks — two
//! traces, or one trace under two settings.
//!
//! Each side is replayed and its state at the reserved peak re-created
//! ([`crate::analysis::peak_state`]). The allocated bytes there are grouped
//! by the source line that allocated them (the first user frame) when both
//! traces have stacks, else by the phase each block was allocated in and
//! its size class. Groups add up exactly to each side's allocated bytes at
//! the peak (a block the replay cannot name is a group of its own), so
//! the change in reserved bytes = the change in allocated bytes (the
//! groups' deltas) + the change in waste.

use std::collections::BTreeMap;

use serde::Serialize;
use vramlab_allocator::BlockState;
use vramlab_traces::{Trace, code_frames};

use crate::analysis::peak_state::{Moment, PeakState, peak_state, phase_of};
use crate::engine::scenario::Scenario;
use crate::engine::start::Start;
use crate::engine::{ReplayError, ReplayOptions};

/// One side of a diff.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffSide {
    /// The trace's name as the caller gave it.
    pub trace: String,
    /// The setting replayed (its label).
    pub setting: String,
    /// The PyTorch release whose rules it was replayed under (`None`: a
    /// policy other than PyTorch's).
    pub torch_version: Option<String>,
    /// How a trace that starts mid-run began (`None`: it starts empty).
    pub start: Option<Start>,
    /// Peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// Allocated bytes at the reserved peak.
    pub allocated_at_peak_bytes: u64,
    /// Reserved − allocated at the reserved peak.
    pub waste_at_peak_bytes: u64,
    /// The event after which reserved peaked (`None`: before the first).
    pub peak_event_index: Option<u64>,
    /// The phase of that event.
    pub phase_at_peak: Option<String>,
    /// The replay ran out of memory: its message.
    pub oom: Option<String>,
}

/// The allocated bytes of one group at each side's peak.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffGroup {
    /// The source line (`file.py:LINE in fn`), or `phase · size class`.
    pub key: String,
    /// Bytes at A's peak.
    pub a_bytes: u64,
    /// Bytes at B's peak.
    pub b_bytes: u64,
    /// `b_bytes − a_bytes`.
    pub delta_bytes: i64,
    /// Blocks at A's peak.
    pub a_blocks: u64,
    /// Blocks at B's peak.
    pub b_blocks: u64,
}

/// How [`DiffGroup`]s are keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The first user frame of the allocating stack (both traces have stacks).
    Frame,
    /// The phase the block was allocated in and its size class.
    PhaseAndSize,
    /// The block's size class (neither trace has stacks or phase marks).
    Size,
}

/// What `vramlab diff` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    /// The first run.
    pub a: DiffSide,
    /// The second run.
    pub b: DiffSide,
    /// How the groups are keyed.
    pub grouped_by: GroupBy,
    /// Every group, largest change first (ties by key).
    pub groups: Vec<DiffGroup>,
    /// B's peak reserved − A's.
    pub reserved_delta_bytes: i64,
    /// B's allocated at the peak − A's (= the groups' deltas, summed).
    pub allocated_delta_bytes: i64,
    /// B's waste at the peak − A's.
    pub waste_delta_bytes: i64,
}

/// One side to compare: a trace, its name, the scenario and the start.
#[derive(Debug, Clone, Copy)]
pub struct DiffInput<'a> {
    /// The trace.
    pub trace: &'a Trace,
    /// Its name in the output (a path, `file#device`).
    pub name: &'a str,
    /// Policy, settings and device.
    pub scenario: &'a Scenario,
    /// How it begins if it starts mid-run.
    pub start: Start,
}

/// Replays both sides and compares them at their reserved peaks.
pub fn diff(a: DiffInput<'_>, b: DiffInput<'_>) -> Result<RunDiff, ReplayError> {
    let by = if has_stacks(a.trace) && has_stacks(b.trace) {
        GroupBy::Frame
    } else if a.trace.phases.is_empty() && b.trace.phases.is_empty() {
        GroupBy::Size
    } else {
        GroupBy::PhaseAndSize
    };
    let (sa, ga) = side(a, by)?;
    let (sb, gb) = side(b, by)?;
    let mut merged: BTreeMap<String, DiffGroup> = BTreeMap::new();
    for (key, (bytes, blocks)) in ga {
        let g = merged
            .entry(key.clone())
            .or_insert_with(|| empty_group(key));
        g.a_bytes = bytes;
        g.a_blocks = blocks;
    }
    for (key, (bytes, blocks)) in gb {
        let g = merged
            .entry(key.clone())
            .or_insert_with(|| empty_group(key));
        g.b_bytes = bytes;
        g.b_blocks = blocks;
    }
    let mut groups: Vec<DiffGroup> = merged
        .into_values()
        .map(|mut g| {
            g.delta_bytes = delta(g.a_bytes, g.b_bytes);
            g
        })
        .collect();
    groups.sort_by(|x, y| {
        y.delta_bytes
            .unsigned_abs()
            .cmp(&x.delta_bytes.unsigned_abs())
            .then(y.b_bytes.max(y.a_bytes).cmp(&x.b_bytes.max(x.a_bytes)))
            .then(x.key.cmp(&y.key))
    });
    Ok(RunDiff {
        reserved_delta_bytes: delta(sa.peak_reserved_bytes, sb.peak_reserved_bytes),
        allocated_delta_bytes: delta(sa.allocated_at_peak_bytes, sb.allocated_at_peak_bytes),
        waste_delta_bytes: delta(sa.waste_at_peak_bytes, sb.waste_at_peak_bytes),
        a: sa,
        b: sb,
        grouped_by: by,
        groups,
    })
}

fn empty_group(key: String) -> DiffGroup {
    DiffGroup {
        key,
        a_bytes: 0,
        b_bytes: 0,
        delta_bytes: 0,
        a_blocks: 0,
        b_blocks: 0,
    }
}

fn delta(a: u64, b: u64) -> i64 {
    (b as i128 - a as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn has_stacks(t: &Trace) -> bool {
    t.alloc_frames.iter().any(Option::is_some)
}

type Groups = BTreeMap<String, (u64, u64)>;

/// One side replayed: its figures and its allocated bytes at the peak by
/// group.
fn side(input: DiffInput<'_>, by: GroupBy) -> Result<(DiffSide, Groups), ReplayError> {
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        start: input.start,
        ..ReplayOptions::default()
    };
    let state = peak_state(input.trace, input.scenario, &opts, None, Moment::Peak)?;
    let groups = group_allocated(input.trace, &state, by);
    let s = &state.run.summary;
    let side = DiffSide {
        trace: input.name.to_string(),
        setting: input.scenario.label(),
        torch_version: input
            .scenario
            .policy
            .native_conf()
            .map(|c| c.version.to_string()),
        start: state.run.start,
        peak_reserved_bytes: s.peak_reserved_bytes,
        allocated_at_peak_bytes: state.allocated_bytes,
        waste_at_peak_bytes: s.waste_at_peak_bytes,
        peak_event_index: state.at,
        phase_at_peak: phase_of(input.trace, state.at),
        oom: state.run.oom.as_ref().map(|o| o.message.clone()),
    };
    Ok((side, groups))
}

/// The allocated blocks at the peak by key; what the blocks do not account
/// for of the allocator's own count is a group of its own, so the groups
/// add up to `state.allocated_bytes`.
fn group_allocated(trace: &Trace, state: &PeakState, by: GroupBy) -> Groups {
    let mut out = Groups::new();
    let mut counted = 0u64;
    for b in state.segments.iter().flat_map(|s| &s.blocks) {
        if b.state != BlockState::Allocated {
            continue;
        }
        let key = match b.id {
            None => "(a block no allocation of the trace names)".to_string(),
            Some(_) if by == GroupBy::Size => size_class(b.size).to_string(),
            Some(id) if by == GroupBy::Frame => code_frames(trace.stack_of(id))
                .first()
                .map_or_else(|| "(no Python frame recorded)".to_string(), |f| f.short()),
            Some(id) => {
                let life = state
                    .lifetimes
                    .get(id as usize)
                    .copied()
                    .unwrap_or_default();
                let phase = match (life.initial, phase_of(trace, life.allocated_at())) {
                    (true, _) => "in use at the start".to_string(),
                    (false, Some(p)) => p,
                    (false, None) => "before the first phase mark".to_string(),
                };
                format!("{phase} · {}", size_class(b.size))
            }
        };
        let e = out.entry(key).or_insert((0, 0));
        e.0 = e.0.saturating_add(b.size);
        e.1 += 1;
        counted = counted.saturating_add(b.size);
    }
    if counted != state.allocated_bytes {
        // Policies whose statistics count bytes outside their blocks.
        let e = out
            .entry("(allocated outside the blocks listed)".to_string())
            .or_insert((0, 0));
        e.0 =
            e.0.saturating_add(state.allocated_bytes.saturating_sub(counted));
    }
    out
}

/// A block's size class: the small pool, then decades of MiB.
fn size_class(size: u64) -> &'static str {
    const MIB: u64 = 1 << 20;
    match size {
        s if s <= MIB => "≤ 1 MiB",
        s if s <= 10 * MIB => "1–10 MiB",
        s if s <= 100 * MIB => "10–100 MiB",
        s if s <= 1024 * MIB => "100 MiB–1 GiB",
        _ => "> 1 GiB",
    }
}
