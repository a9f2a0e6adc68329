//! How much a prediction depends on where the driver places segments.
//!
//! PyTorch's best fit breaks ties between equal-size free blocks by
//! address, so the order in which the driver hands out segments can change
//! which block an allocation takes, and from there every later decision.
//! The simulated device follows one placement policy (by default the
//! CUDA driver's as measured on an H200); a [`PlacementRange`] replays the
//! same scenario under the other one too, so that a prediction the model
//! cannot settle is reported as a range instead of a single number.

use serde::Serialize;
use vramlab_allocator::Placement;
use vramlab_allocator::format::bytes_words;
use vramlab_traces::Trace;

use crate::analysis::sweep::SweepRow;
use crate::engine::run::Run;
use crate::engine::scenario::Scenario;
use crate::engine::{ReplayError, ReplayOptions};

/// One scenario's peak reserved under both placement policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlacementRange {
    /// The placement of the prediction.
    pub placement: Placement,
    /// Its peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// Its first OOM's event, if any.
    pub oom_event: Option<u64>,
    /// The other placement.
    pub other: Placement,
    /// Peak reserved bytes under the other placement.
    pub other_peak_reserved_bytes: u64,
    /// The first OOM's event under the other placement, if any.
    pub other_oom_event: Option<u64>,
}

impl PlacementRange {
    /// Both placements gave the same peak and the same OOM: the prediction
    /// does not depend on the driver's address order.
    pub(crate) fn settled(&self) -> bool {
        self.peak_reserved_bytes == self.other_peak_reserved_bytes
            && self.oom_event == self.other_oom_event
    }

    /// The lower of the two peaks.
    pub(crate) fn low(&self) -> u64 {
        self.peak_reserved_bytes.min(self.other_peak_reserved_bytes)
    }

    /// The higher of the two peaks.
    pub(crate) fn high(&self) -> u64 {
        self.peak_reserved_bytes.max(self.other_peak_reserved_bytes)
    }
}

/// A setting's [`PlacementRange`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SettingRange {
    /// The setting's label.
    pub setting: String,
    /// Its peaks under both placements.
    #[serde(flatten)]
    pub range: PlacementRange,
}

/// What a replay predicted, as much of it as a [`PlacementRange`] needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Predicted {
    /// Peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// The first OOM's event, if any.
    pub oom_event: Option<u64>,
    /// Device calls (allocations and frees) made during the events.
    pub device_calls: u64,
    /// No decision depended on how the device's addresses compare
    /// ([`Run::placement_free`]; `false` when unknown).
    pub placement_free: bool,
}

impl From<&Run> for Predicted {
    fn from(r: &Run) -> Self {
        Predicted {
            peak_reserved_bytes: r.summary.peak_reserved_bytes,
            oom_event: r.oom.as_ref().map(|o| o.event_index),
            device_calls: r.summary.num_device_alloc + r.summary.num_device_free,
            placement_free: r.placement_free,
        }
    }
}

impl From<&SweepRow> for Predicted {
    fn from(r: &SweepRow) -> Self {
        Predicted {
            peak_reserved_bytes: r.peak_reserved_bytes,
            oom_event: u64::try_from(r.oom_event).ok(),
            device_calls: r.num_device_alloc + r.num_device_free,
            placement_free: r.placement_free,
        }
    }
}

/// Replays `scenario` under the placement it did not use and pairs the
/// result with `seen`, the scenario's own prediction (replayed with
/// `opts`). A run that made no device call during its events is settled
/// without a replay: the two placements differ only from the first new
/// segment on, and the other replay makes the same calls for as long as
/// its decisions agree.
pub fn placement_range(
    trace: &Trace,
    scenario: &Scenario,
    seen: Predicted,
    opts: &ReplayOptions,
) -> Result<PlacementRange, ReplayError> {
    placement_range_with(trace, scenario, seen, opts, |other, lean| {
        other.run(trace, lean)
    })
}

/// [`placement_range`] with the other placement's replay made by
/// `replay_other` (called with the scenario under the other placement and
/// lean options, only when the range is not settled without it): a
/// streamed trace is read again rather than kept in memory. `trace` needs
/// its header and initial state only.
pub fn placement_range_with<E>(
    trace: &Trace,
    scenario: &Scenario,
    seen: Predicted,
    opts: &ReplayOptions,
    replay_other: impl FnOnce(&Scenario, &ReplayOptions) -> Result<Run, E>,
) -> Result<PlacementRange, E> {
    let other = scenario.placement.other();
    let mut range = PlacementRange {
        placement: scenario.placement,
        peak_reserved_bytes: seen.peak_reserved_bytes,
        oom_event: seen.oom_event,
        other,
        other_peak_reserved_bytes: seen.peak_reserved_bytes,
        other_oom_event: seen.oom_event,
    };
    // No decision compared two segments' addresses: the other placement
    // decides alike (allocator/src/policies/native/ties.rs).
    if seen.device_calls == 0 || seen.placement_free {
        return Ok(range);
    }
    // From 2.12 PyTorch orders free blocks of one size by allocation order,
    // and by address only inside one segment, where both placements agree:
    // a replay that starts empty or fresh decides alike under either order
    // (allocator/tests/native_tie_order.rs; 0 of 608 corpus pairs differ,
    // scripts/placement_ranges.sh). A recorded start is not covered: its
    // segments' ages are guessed from their addresses.
    let fresh = trace.initial.is_none() || opts.start == crate::engine::start::Start::Fresh;
    if fresh
        && scenario
            .policy
            .native_conf()
            .is_some_and(|c| !c.ties_by_address())
    {
        return Ok(range);
    }
    let lean = ReplayOptions {
        timeline_points: 1,
        check_invariants: false,
        record_addresses: false,
        segments_at_peak: false,
        final_segments: false,
        progress: None,
        ..opts.clone()
    };
    let other_run = replay_other(&scenario.clone().with_placement(other), &lean)?;
    range.other_peak_reserved_bytes = other_run.summary.peak_reserved_bytes;
    range.other_oom_event = other_run.oom.as_ref().map(|o| o.event_index);
    Ok(range)
}

/// What the other placement predicts, in words: `"5.21 GiB"` or `"5.21 GiB
/// and an OOM at event 1,234"`.
fn other_words(r: &PlacementRange) -> String {
    let peak = bytes_words(r.other_peak_reserved_bytes);
    match r.other_oom_event {
        Some(e) if r.oom_event != Some(e) => format!("{peak} and an OOM at event {e}"),
        None if r.oom_event.is_some() => format!("{peak} and no OOM"),
        _ => peak,
    }
}

/// A sentence for the settings whose prediction the driver's address
/// order decides, or `None` when every one is settled.
pub fn placement_note(ranges: &[SettingRange]) -> Option<String> {
    let open: Vec<String> = ranges
        .iter()
        .filter(|s| !s.range.settled())
        .map(
            |SettingRange {
                 setting: label,
                 range: r,
             }| {
                format!(
                    "{label}: {} with {}, {} with {}",
                    bytes_words(r.peak_reserved_bytes),
                    r.placement.describe(),
                    other_words(r),
                    r.other.describe()
                )
            },
        )
        .collect();
    if open.is_empty() {
        return None;
    }
    Some(format!(
        "Where the driver places segments decides a tie on this trace (PyTorch picks the lower address among equal free blocks). Peak reserved under {}. The trace cannot say which order your driver uses (docs/driver-placement.md).",
        open.join("; ")
    ))
}
