//! The OOM point of a trace held in memory: the search of
//! [`OomSearch`] (where the method is described) with each replay it asks
//! for run in turn.

use vramlab_traces::Trace;

use crate::analysis::oom_search::{OomPoint, OomSearch};
use crate::engine::run::Run;
use crate::engine::scenario::Scenario;
use crate::engine::start::Start;
use crate::engine::{ReplayError, ReplayOptions};

/// Finds the smallest capacity at which `trace` replays without OOM under
/// `scenario` (its own capacity is ignored). A trace that starts mid-run
/// begins as `start` says; the search starts at what that state alone needs.
pub fn find_oom_point(
    trace: &Trace,
    scenario: &Scenario,
    start: Start,
) -> Result<OomPoint, ReplayError> {
    let opts = ReplayOptions::figures_only(start);
    let mut search = OomSearch::new(scenario);
    let run = |capacity: Option<u64>| scenario.clone().with_capacity(capacity).run(trace, &opts);
    let mut first = true;
    loop {
        let wanted = search.wanted();
        if wanted.is_empty() {
            break;
        }
        let runs = wanted
            .into_iter()
            .map(run)
            .collect::<Result<Vec<Run>, _>>()?;
        if first && trace.initial.is_some() {
            let only_start = ReplayOptions {
                stop_before: Some(0),
                ..opts.clone()
            };
            let r = scenario
                .clone()
                .with_capacity(None)
                .run(trace, &only_start)?;
            search.set_start_reserved(r.summary.peak_reserved_bytes);
        }
        first = false;
        search.feed(&runs)?;
    }
    search
        .into_point()
        .ok_or_else(|| ReplayError::Malformed("the OOM-point search did not end".into()))
}
