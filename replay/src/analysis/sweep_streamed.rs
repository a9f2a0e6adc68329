//! A sweep of one trace file replayed as it is read: every setting of the
//! grid is a scenario of one streamed replay ([`replay_streamed`]), so the
//! file is read once, the settings replay each block in parallel, and
//! memory is bounded by what each setting holds live, not by the length
//! of the trace. The rows are those [`run_sweep`](super::sweep::run_sweep)
//! gives for the trace read whole.

use vramlab_allocator::Placement;
use vramlab_traces::{EventBlocks, StreamEnd};

use crate::analysis::grid::GridEntry;
use crate::analysis::sweep::{Shard, SweepRow, row_of};
use crate::engine::ReplayOptions;
use crate::engine::scenario::Scenario;
use crate::engine::start::{Start, start_for};
use crate::engine::stream::{StreamError, replay_streamed};

/// One trace file of a streamed sweep.
#[derive(Debug, Clone, Copy)]
pub struct SweepFile<'a> {
    /// The trace's name in the rows.
    pub name: &'a str,
    /// The index of the trace's first (trace, setting) pair in the whole
    /// sweep: its place among the traces times the grid's length.
    pub first_index: u64,
}

/// Rows of one streamed sweep, and the end of the read (the trace without
/// its events, its notes and counts).
#[derive(Debug, Clone)]
pub struct StreamedSweep {
    /// One row per setting of this shard, in grid order.
    pub rows: Vec<SweepRow>,
    /// The end of the read.
    pub end: StreamEnd,
}

/// Replays `events` (opened with `IdUse::Recycled`) under every setting of
/// `grid` that belongs to `shard` while the file is read, on a device of
/// `capacity` whose driver places segments as `placement` says; a trace
/// that starts mid-run begins as `start` says, or as
/// [`start_for`] chooses for the whole grid. Rows come in grid order.
pub fn sweep_streamed<E: EventBlocks + Send>(
    events: E,
    file: SweepFile<'_>,
    grid: &[GridEntry],
    (capacity, placement): (Option<u64>, Placement),
    shard: Option<Shard>,
    start: Option<Start>,
) -> Result<StreamedSweep, StreamError> {
    let chosen: Vec<(u64, &GridEntry)> = grid
        .iter()
        .enumerate()
        .map(|(g, e)| (file.first_index + g as u64, e))
        .filter(|(i, _)| shard.is_none_or(|s| s.contains(*i)))
        .collect();
    let all: Vec<Scenario> = grid.iter().map(|g| g.scenario(capacity)).collect();
    let start = start_for(events.trace(), &all, start);
    let scenarios: Vec<Scenario> = chosen
        .iter()
        .map(|(_, g)| g.scenario(capacity).with_placement(placement))
        .collect();
    let opts = ReplayOptions::figures_only(start.unwrap_or_default());
    let streamed = replay_streamed(events, &scenarios, &opts)?;
    let mut rows: Vec<SweepRow> = chosen
        .iter()
        .zip(&streamed.runs)
        .map(|((index, entry), run)| row_of(*index, file.name, entry, capacity, run))
        .collect();
    crate::analysis::sweep::mark_same(&mut rows);
    Ok(StreamedSweep {
        rows,
        end: streamed.end,
    })
}
