//! A sweep of one trace over the passes it is read by ([`ReplayPasses`]):
//! every setting of the grid is a scenario of one pass, so a trace file
//! is read once with the settings replaying each block in parallel, and
//! memory is bounded by what each setting holds live, not by the length
//! of the trace; a trace held in memory replays its settings in parallel.
//! The rows are those [`run_sweep`](super::sweep::run_sweep) gives.

use vramlab_allocator::Placement;

use crate::analysis::grid::GridEntry;
use crate::analysis::sweep::{Shard, SweepRow, row_of};
use crate::engine::ReplayOptions;
use crate::engine::passes::ReplayPasses;
use crate::engine::scenario::Scenario;
use crate::engine::start::{Start, start_for};
use crate::engine::stream::StreamError;

/// One trace file of a streamed sweep.
#[derive(Debug, Clone, Copy)]
pub struct SweepFile<'a> {
    /// The trace's name in the rows.
    pub name: &'a str,
    /// The index of the trace's first (trace, setting) pair in the whole
    /// sweep: its place among the traces times the grid's length.
    pub first_index: u64,
}

/// Replays the trace of `passes` under every setting of `grid` that
/// belongs to `shard`, in one pass, on a device of `capacity` whose driver
/// places segments as `placement` says; a trace that starts mid-run begins
/// as `start` says, or as [`start_for`] chooses for the whole grid. Rows
/// come in grid order; `done` is called once per finished setting.
pub fn sweep_trace(
    passes: &dyn ReplayPasses,
    file: SweepFile<'_>,
    grid: &[GridEntry],
    (capacity, placement): (Option<u64>, Placement),
    shard: Option<Shard>,
    start: Option<Start>,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<SweepRow>, StreamError> {
    let chosen: Vec<(u64, &GridEntry)> = grid
        .iter()
        .enumerate()
        .map(|(g, e)| (file.first_index + g as u64, e))
        .filter(|(i, _)| shard.is_none_or(|s| s.contains(*i)))
        .collect();
    let all: Vec<Scenario> = grid.iter().map(|g| g.scenario(capacity)).collect();
    let start = start_for(passes.trace(), &all, start);
    let scenarios: Vec<Scenario> = chosen
        .iter()
        .map(|(_, g)| g.scenario(capacity).with_placement(placement))
        .collect();
    let opts = ReplayOptions::figures_only(start.unwrap_or_default());
    let runs = passes.replay_counted(&scenarios, &opts, done)?;
    let mut rows: Vec<SweepRow> = chosen
        .iter()
        .zip(&runs)
        .map(|((index, entry), run)| row_of(*index, file.name, entry, capacity, run))
        .collect();
    crate::analysis::sweep::mark_same(&mut rows);
    Ok(rows)
}
