//! A recommendation for one trace: the grid swept, the settings ranked
//! for the card, the smallest capacity of the defaults and of the best
//! setting, their peaks under the other placement. The replays come from
//! [`ReplayPasses`]: the trace held in memory ([`recommend_trace`]) or a
//! trace file read again for each pass ([`recommend_with`] and a
//! [`crate::TraceFile`]), with the same answers.

use vramlab_allocator::format::bytes_words as size_words;

use crate::analysis::oom_point::find_oom_points_with;
use crate::analysis::placement::{SettingRange, placement_range_with};
use crate::analysis::recommend::{MinCapacity, Ranked, Recommendation, Verdict, recommend};
use crate::analysis::sweep::{SweepRow, row_of};
use crate::engine::ReplayOptions;
use crate::engine::passes::ReplayPasses;
use crate::engine::stream::StreamError;
use crate::torch_release::TorchTarget;

/// What to recommend for: one trace, its settings grid and the card.
pub struct RecommendRequest<'a> {
    /// The trace's name in rows and tables.
    pub name: &'a str,
    /// The trace.
    pub trace: &'a vramlab_traces::Trace,
    /// Settings to rank.
    pub grid: &'a [crate::analysis::grid::GridEntry],
    /// The GPU memory the job may use (`None` = unlimited).
    pub capacity: Option<u64>,
    /// The PyTorch release(s) the advice is for.
    pub target: &'a TorchTarget,
    /// The user's start for a trace recorded mid-run.
    pub start: Option<crate::engine::start::Start>,
    /// Where the simulated driver places segments.
    pub placement: vramlab_allocator::Placement,
}

/// Sweeps the grid over the trace in parallel, ranks the settings, and
/// (with a capacity) finds the smallest capacity of the defaults and of the
/// best setting, so that the advice can lead with cards. `progress` is
/// called once per replay of the sweep.
pub fn recommend_trace(
    req: &RecommendRequest<'_>,
    progress: &(dyn Fn() + Sync),
) -> Result<(Vec<SweepRow>, Recommendation), (String, String, crate::engine::ReplayError)> {
    recommend_with(req, req.trace, progress).map_err(|e| match e {
        StreamError::Replay { scenario, error } => (req.name.to_string(), scenario, error),
        // A trace in memory is never read.
        StreamError::Read(e) => (
            req.name.to_string(),
            String::new(),
            crate::engine::ReplayError::Malformed(e.to_string()),
        ),
    })
}

/// [`recommend_trace`] with the replays of `passes` (`req.trace` needs
/// the trace's description only: header and initial state). `progress` is
/// called once per replay of the sweep that ended.
pub fn recommend_with(
    req: &RecommendRequest<'_>,
    passes: &dyn ReplayPasses,
    progress: &(dyn Fn() + Sync),
) -> Result<(Vec<SweepRow>, Recommendation), StreamError> {
    // The setting the job was recorded with is ranked too, so that the
    // advice can speak of it ("yours").
    let yours = recorded_setting(req);
    let mut grid_owned = req.grid.to_vec();
    if let Some(y) = &yours {
        if !grid_owned.iter().any(|g| g.to_line() == y.to_line()) {
            grid_owned.push(y.clone());
        }
    }
    let req = &RecommendRequest {
        grid: &grid_owned,
        ..*req
    };
    let scenarios: Vec<crate::Scenario> =
        req.grid.iter().map(|g| g.scenario(req.capacity)).collect();
    let start = crate::engine::start::start_for(req.trace, &scenarios, req.start);
    let rows = sweep_rows(req, passes, start, progress)?;
    let peak_live = passes.peak_live()?;
    let capacity = req.capacity.unwrap_or(0);
    let first = recommend(&rows, capacity, peak_live, req.target, &[]);
    let mut caps = Vec::new();
    if req.capacity.is_some() {
        let mut lines: Vec<&str> = vec!["default"];
        if let Some(w) = first.ranked.first() {
            lines.push(&w.row.grid_line);
        }
        lines.dedup();
        let searched: Vec<(&str, crate::Scenario)> = lines
            .into_iter()
            .filter_map(|line| {
                let g = req.grid.iter().find(|g| g.to_line() == line)?;
                Some((line, g.scenario(None).with_placement(req.placement)))
            })
            .collect();
        let scenarios: Vec<crate::Scenario> = searched.iter().map(|(_, s)| s.clone()).collect();
        let points = find_oom_points_with(passes, &scenarios, start.unwrap_or_default())?;
        for ((line, _), p) in searched.iter().zip(points) {
            caps.push(MinCapacity {
                grid_line: line.to_string(),
                bytes: p.min_capacity,
            });
        }
    }
    let mut rec = recommend(&rows, capacity, peak_live, req.target, &caps);
    if let Some(y) = &yours {
        speak_of_yours(&mut rec, &y.to_line(), capacity);
    }
    rec.placement_ranges = placement_ranges(req, passes, &rec, start)?;
    rec.placement_note = crate::analysis::placement::placement_note(&rec.placement_ranges);
    Ok((rows, rec))
}

/// The sweep's rows: every setting of the grid in one pass, in grid order.
fn sweep_rows(
    req: &RecommendRequest<'_>,
    passes: &dyn ReplayPasses,
    start: Option<crate::engine::start::Start>,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<SweepRow>, StreamError> {
    let scenarios: Vec<crate::Scenario> = req
        .grid
        .iter()
        .map(|g| g.scenario(req.capacity).with_placement(req.placement))
        .collect();
    let opts = ReplayOptions::figures_only(start.unwrap_or_default());
    let runs = passes.replay_counted(&scenarios, &opts, progress)?;
    Ok(req
        .grid
        .iter()
        .zip(&runs)
        .enumerate()
        .map(|(i, (entry, run))| row_of(i as u64, req.name, entry, req.capacity, run))
        .collect())
}

/// The non-default setting the trace was recorded with (a snapshot's
/// `allocator_settings`, a native trace's `alloc_conf` header), as a grid
/// entry, when the target release reads it.
fn recorded_setting(req: &RecommendRequest<'_>) -> Option<crate::analysis::grid::GridEntry> {
    let conf = req.trace.header.alloc_conf.as_deref()?.trim();
    if conf.is_empty() || conf == "default" {
        return None;
    }
    let entry = crate::analysis::grid::parse_grid_line(conf, req.target.rules).ok()?;
    (entry.to_line() != "default").then_some(entry)
}

/// Names the recorded setting in the advice: where it ranks, what it
/// reserves, and — where the verdict is that the defaults are fine — that
/// the user's own setting is fine too when it fits (so that the verdict
/// does not read as advice to drop it).
fn speak_of_yours(rec: &mut Recommendation, line: &str, capacity: u64) {
    let total = rec.ranked.len();
    let Some(y) = rec.ranked.iter().find(|r| r.row.grid_line == line) else {
        return;
    };
    let figures = if !y.row.fits() {
        format!(
            "runs out of memory at event {} of {}",
            y.row.oom_event, y.row.events
        )
    } else if capacity > 0 {
        format!(
            "{} reserved at peak, {} headroom",
            size_words(y.row.peak_reserved_bytes),
            size_words(capacity.saturating_sub(y.row.peak_reserved_bytes))
        )
    } else {
        format!("{} reserved at peak", size_words(y.row.peak_reserved_bytes))
    };
    let sentence = format!(
        "Your setting (recorded with the trace), {}: {figures}; ranked {} of {total} settings.",
        y.row.setting, y.rank
    );
    let fits = y.row.fits();
    if rec.verdict == Verdict::DefaultsAreFine && fits {
        if let Some(stem) = rec.why.strip_suffix(" The defaults are fine.") {
            rec.why = format!("{stem} {sentence} It is fine to keep; so would be the defaults.");
            return;
        }
    }
    rec.why = format!("{} {sentence}", rec.why);
}

/// The defaults' and the first-ranked setting's peak under the other
/// placement too (the settings the verdict compares).
fn placement_ranges(
    req: &RecommendRequest<'_>,
    passes: &dyn ReplayPasses,
    rec: &Recommendation,
    start: Option<crate::engine::start::Start>,
) -> Result<Vec<SettingRange>, StreamError> {
    let mut named: Vec<&Ranked> = rec.ranked.iter().take(1).collect();
    if let Some(b) = rec.ranked.iter().find(|r| r.row.grid_line == "default") {
        if named.first().is_none_or(|w| w.row.grid_line != "default") {
            named.insert(0, b);
        }
    }
    let opts = ReplayOptions {
        start: start.unwrap_or_default(),
        ..Default::default()
    };
    named
        .into_iter()
        .filter_map(|r| {
            let g = req.grid.iter().find(|g| g.to_line() == r.row.grid_line)?;
            let s = g.scenario(req.capacity).with_placement(req.placement);
            let other = |o: &crate::Scenario, lean: &ReplayOptions| {
                let runs = passes.replay(std::slice::from_ref(o), lean)?;
                runs.into_iter().next().ok_or_else(|| StreamError::Replay {
                    scenario: o.label(),
                    error: crate::engine::ReplayError::Malformed("the replay gave no run".into()),
                })
            };
            Some(
                placement_range_with(passes.trace(), &s, (&r.row).into(), &opts, other).map(
                    |range| SettingRange {
                        setting: r.row.setting.clone(),
                        range,
                    },
                ),
            )
        })
        .collect()
}
