//! The OOM point of a trace: the search of [`OomSearch`] (where the
//! method is described), every setting's searches run in lock-step over
//! the passes the trace is read by ([`ReplayPasses`]): each pass replays
//! what every search needs next. A trace held in memory replays those in
//! parallel; a trace file is read once per step of the searches instead
//! of being held, memory bounded by what the replays hold live. The
//! answers, probe for probe, are the same.

use vramlab_traces::{EventBlocks, StreamEnd, Trace, TraceError};

use crate::analysis::oom_search::{OomPoint, OomSearch};
use crate::engine::passes::{ReplayPasses, TraceFile};
use crate::engine::run::Run;
use crate::engine::scenario::Scenario;
use crate::engine::start::Start;
use crate::engine::stream::StreamError;
use crate::engine::{ReplayError, ReplayOptions};

/// Finds the smallest capacity at which `trace` replays without OOM under
/// `scenario` (its own capacity is ignored). A trace that starts mid-run
/// begins as `start` says; the search starts at what that state alone needs.
pub fn find_oom_point(
    trace: &Trace,
    scenario: &Scenario,
    start: Start,
) -> Result<OomPoint, ReplayError> {
    let points = find_oom_points_with(trace, std::slice::from_ref(scenario), start).map_err(
        |e| match e {
            StreamError::Replay { error, .. } => error,
            StreamError::Read(e) => ReplayError::Malformed(e.to_string()),
        },
    )?;
    points
        .into_iter()
        .next()
        .ok_or_else(|| ReplayError::Malformed("the trace has no events".into()))
}

/// What [`find_oom_points_streamed`] gives.
#[derive(Debug, Clone)]
pub struct StreamedOomPoints {
    /// One point per scenario, in their order.
    pub points: Vec<OomPoint>,
    /// The end of the first read: the trace without its events, its notes
    /// and counts.
    pub end: StreamEnd,
    /// How many times the file was read through.
    pub reads: u32,
}

/// The OOM point of every scenario over the trace that `open` opens (with
/// `IdUse::Recycled`) once per step of the searches. A trace that starts
/// mid-run begins as `start` says. The first error in the scenarios'
/// order is the answer when a search fails.
pub fn find_oom_points_streamed<E, F>(
    open: F,
    scenarios: &[Scenario],
    start: Start,
) -> Result<StreamedOomPoints, StreamError>
where
    E: EventBlocks + Send,
    F: Fn() -> Result<E, TraceError>,
{
    let file = TraceFile::new(open)?;
    let points = find_oom_points_with(&file, scenarios, start)?;
    let end = file.first_end().ok_or_else(|| {
        StreamError::Read(TraceError::new(
            String::new(),
            vramlab_traces::Location::File,
            "the file was never read through".to_string(),
        ))
    })?;
    Ok(StreamedOomPoints {
        points,
        end,
        reads: file.reads(),
    })
}

/// The OOM point of every scenario over the trace of `passes`, the
/// searches run in lock-step: each pass replays what every search needs
/// next.
pub fn find_oom_points_with(
    passes: &dyn ReplayPasses,
    scenarios: &[Scenario],
    start: Start,
) -> Result<Vec<OomPoint>, StreamError> {
    let opts = ReplayOptions::figures_only(start);
    // Planned once for every pass.
    let scenarios = &*passes.planned(scenarios, start)?;
    let mut searches: Vec<Result<OomSearch, ReplayError>> =
        scenarios.iter().map(|s| Ok(OomSearch::new(s))).collect();
    let mut first = true;
    loop {
        let mut batch = Vec::new();
        let mut owners = Vec::new();
        for (k, (search, s)) in searches.iter().zip(scenarios).enumerate() {
            for c in search.iter().flat_map(OomSearch::wanted) {
                batch.push(s.clone().with_capacity(c));
                owners.push(k);
            }
        }
        // The first pass happens even without a setting: it says what the
        // trace holds.
        if batch.is_empty() && !first {
            break;
        }
        let runs = passes.replay(&batch, &opts)?;
        if first && passes.trace().initial.is_some() {
            for (search, s) in searches.iter_mut().zip(scenarios) {
                let reserved = passes.start_reserved(&s.clone().with_capacity(None), &opts)?;
                if let Ok(search) = search {
                    search.set_start_reserved(reserved);
                }
            }
        }
        first = false;
        let mut runs = runs.into_iter();
        for (k, search) in searches.iter_mut().enumerate() {
            let n = owners.iter().filter(|&&o| o == k).count();
            let mine: Vec<Run> = runs.by_ref().take(n).collect();
            if let Ok(s) = search {
                if let Err(e) = s.feed(&mine) {
                    *search = Err(e);
                }
            }
        }
    }
    searches
        .into_iter()
        .zip(scenarios)
        .map(|(search, s)| {
            let in_words = |error| StreamError::Replay {
                scenario: s.label(),
                error,
            };
            search
                .map_err(in_words)?
                .into_point()
                .ok_or_else(|| in_words(ReplayError::Malformed("the search did not end".into())))
        })
        .collect()
}
