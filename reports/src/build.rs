//! Building a whole report from a trace: sweep a grid of settings, rank
//! them, replay the chosen ones in detail, find their OOM points and write
//! the page ([`build_report`]); or, for a snapshot that holds only the
//! allocator state, the report of that state ([`state_report`]).
//!
//! This is what `vramlab report` and `vramlab demo` do between parsing
//! their arguments and printing the recommendation; the command line only
//! adds a progress bar (through the callback) and the printing.

use std::path::{Path, PathBuf};

use crate::input::ReportPool;
use rayon::prelude::*;
use vramlab_allocator::format::bytes;
use vramlab_allocator::{AllocConf, Placement, TorchVersion};
use vramlab_replay::GridEntry;
use vramlab_replay::TorchTarget;
use vramlab_replay::find_oom_point;
use vramlab_replay::{ExplainOptions, explain};
use vramlab_replay::{RecommendRequest, Recommendation, UpgradeAdvice, recommend_trace};
use vramlab_replay::{ReplayError, ReplayOptions, Scenario, Start};
use vramlab_traces::advice::{Cmd, Opt};
use vramlab_traces::{Trace, TraceSummary};

use crate::{ReportError, ReportInput, SettingRun, write_report};

/// What a report covers.
#[derive(Debug, Clone, Copy)]
pub struct ReportRequest<'a> {
    /// The trace's name in titles and tables.
    pub name: &'a str,
    /// The trace.
    pub trace: &'a Trace,
    /// The GPU memory the job may use (`None`: unlimited; settings are then
    /// ranked by peak reserved alone).
    pub capacity: Option<u64>,
    /// Settings to sweep.
    pub grid: &'a [GridEntry],
    /// How many settings get plots of their own (the best ones, plus the
    /// defaults).
    pub plots: usize,
    /// The PyTorch release(s) the advice is for.
    pub target: &'a TorchTarget,
    /// The user's start for a trace recorded mid-run.
    pub start: Option<Start>,
    /// Where the simulated driver places segments.
    pub placement: Placement,
    /// Output folder.
    pub out: &'a Path,
    /// Draw the explorer (every allocation of the settings shown, at any
    /// event), for a trace of at most [`crate::EXPLORER_MAX_ALLOCATIONS`]
    /// allocations. `false` leaves it out, and the settings' replays then
    /// keep no per-allocation addresses: a smaller page and less memory for
    /// a long trace.
    pub explorer: bool,
    /// A second PyTorch release and its grid: the report then shows what
    /// upgrading from `target` to it does to every setting (`None`: one
    /// release).
    pub upgrade_to: Option<(&'a TorchTarget, &'a [GridEntry])>,
    /// The host's RAM for pinned memory and the ranks sharing it (traces
    /// with pinned host requests).
    pub host: vramlab_replay::HostLimits,
}

/// What [`build_report`] computed, besides the files it wrote.
#[derive(Debug, Clone)]
pub struct BuiltReport {
    /// The ranking of the grid's settings.
    pub rec: Recommendation,
    /// The recommendation under the second release and what the upgrade
    /// does (with [`ReportRequest::upgrade_to`]).
    pub upgrade: Option<UpgradeAdvice>,
    /// Where `index.html` went.
    pub index: PathBuf,
}

/// Why a report could not be built.
///
/// Each message is complete in itself (it includes the underlying error's
/// text), so [`std::error::Error::source`] is `None`: printing the chain
/// does not repeat it.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A replay of the sweep failed.
    #[error("{trace} under {setting}: {error}")]
    Sweep {
        /// The trace's name.
        trace: String,
        /// The setting's label.
        setting: String,
        /// The replay's error.
        error: ReplayError,
    },
    /// The detailed replay of a chosen setting failed.
    #[error("replaying under {setting}: {error}")]
    Replay {
        /// The setting's label.
        setting: String,
        /// The replay's error.
        error: ReplayError,
    },
    /// The search for a chosen setting's OOM point failed.
    #[error("OOM point under {setting}: {error}")]
    OomPoint {
        /// The setting's label.
        setting: String,
        /// The replay's error.
        error: ReplayError,
    },
    /// A snapshot without events has no segments either.
    #[error("{name}: the snapshot holds neither events nor segments: nothing to report")]
    NothingToReport {
        /// The trace's name.
        name: String,
    },
    /// The recorded allocator state could not be rebuilt.
    #[error("{name}: the allocator state could not be laid out: {error}")]
    Layout {
        /// The trace's name.
        name: String,
        /// Why ([`vramlab_traces::InitialState::layout_error`]).
        error: String,
    },
    /// Replaying the recorded allocator state failed.
    #[error("laying out the state of {name}: {error}")]
    State {
        /// The trace's name.
        name: String,
        /// The replay's error.
        error: ReplayError,
    },
    /// The plots or the page could not be written.
    #[error("writing the report: {0}")]
    Write(ReportError),
}

/// Sweeps `req.grid` over the trace and ranks the settings
/// ([`recommend_trace`]), replays the defaults and the best-ranked settings
/// (up to `req.plots` besides the defaults) in detail, finds their OOM
/// points and writes the report into `req.out`.
///
/// `progress` is called once per finished sweep replay (from the sweep's
/// worker threads), e.g. to move a progress bar of `req.grid.len()` steps.
///
/// # Errors
///
/// A replay that fails (a malformed trace, not an OOM: running out of
/// memory is a result), or the report that cannot be written.
pub fn build_report(
    req: &ReportRequest<'_>,
    progress: &(dyn Fn() + Sync),
) -> Result<BuiltReport, BuildError> {
    let ReportRequest {
        name,
        trace,
        capacity,
        grid,
        plots,
        target,
        start,
        placement,
        out,
        ..
    } = *req;
    let (rows, rec) = recommend_trace(
        &RecommendRequest {
            name,
            trace,
            grid,
            capacity,
            target,
            start,
            placement,
        },
        progress,
    )
    .map_err(sweep_error)?;
    let mut rec = rec;
    rec.host = host_advice(req)?;
    let upgrade = upgrade_advice(req, &rec, progress)?;
    let scenarios: Vec<_> = grid.iter().map(|g| g.scenario(capacity)).collect();
    let start = vramlab_replay::start_for(trace, &scenarios, start);
    let chosen = chosen_settings(grid, &rec, plots);
    // The explorer draws every allocation of the chosen settings' replays:
    // their addresses are recorded only when it is shown.
    let explore = if req.explorer {
        crate::ExploreTrace::of(trace)
    } else {
        None
    };
    let opts = ReplayOptions {
        check_invariants: false,
        segments_at_peak: true,
        record_addresses: explore.is_some(),
        timeline_points: 600,
        start: start.unwrap_or_default(),
        ranks_per_node: req.host.ranks_per_node,
        ..Default::default()
    };
    // The chosen settings' detailed replays and OOM searches, on all cores
    // (results in the chosen order).
    let detailed = chosen
        .par_iter()
        .map(|g: &&GridEntry| {
            let s = g.scenario(capacity).with_placement(placement);
            let run = s.run(trace, &opts).map_err(|error| BuildError::Replay {
                setting: g.label(),
                error,
            })?;
            let p = find_oom_point(trace, &s, start.unwrap_or_default()).map_err(|error| {
                BuildError::OomPoint {
                    setting: g.label(),
                    error,
                }
            })?;
            Ok((g, run, p))
        })
        .collect::<Vec<_>>()
        .into_iter()
        // The first failure in the chosen order, whichever thread hit it.
        .collect::<Result<Vec<_>, BuildError>>()?;
    let mut settings = Vec::new();
    let mut oom_points = Vec::new();
    for (g, run, p) in detailed {
        settings.push(SettingRun::new(g.label(), run));
        oom_points.push(p);
    }
    let mut notes: Vec<String> = trace.notes.clone();
    notes.extend(rec.placement_note.clone());
    if trace.initial.is_some() {
        notes.push(format!(
            "The recording starts mid-run; every replay starts {}.",
            vramlab_replay::describe_start(trace, start)
        ));
    }
    if req.explorer {
        notes.extend(explorer_left_out(trace));
    }
    notes.push(format!("Advice for {}.", target.describe()));
    notes.push(format!(
        "{} settings were replayed; the table ranks {} of them. Full results: `{}`.",
        rows.len(),
        settings.len(),
        Cmd::Sweep.with(
            &[name],
            &[
                Opt::Gpu.with_placeholder("…"),
                Opt::Csv.with_placeholder("rows.csv")
            ]
        )
    ));
    let summary = TraceSummary::of(trace);
    let pools = ReportPool::of(trace, &summary, &settings);
    // Why the first setting shown (the defaults when the grid has them)
    // wastes what it wastes, each culprit's saving replayed.
    let explanation = match chosen.first() {
        Some(g) => Some(
            explain(
                trace,
                &g.scenario(capacity).with_placement(placement),
                &ExplainOptions {
                    top: 5,
                    ..ExplainOptions::default()
                },
            )
            .map_err(|error| BuildError::Replay {
                setting: g.label(),
                error,
            })?,
        ),
        None => None,
    };
    let input = ReportInput {
        title: format!("vramlab report: {name}"),
        trace: name.to_string(),
        capacity,
        settings,
        oom_points,
        fit: None,
        recommendation: Some(rec.clone()),
        notes,
        phases: summary.phases,
        pools,
        explanation,
        explore,
        upgrade: upgrade.clone(),
    };
    let index = write_report(out, &input).map_err(BuildError::Write)?;
    Ok(BuiltReport {
        rec,
        upgrade,
        index,
    })
}

/// The settings replayed in detail: the defaults, then the best-ranked
/// ones (up to `plots` besides the defaults).
fn chosen_settings<'g>(
    grid: &'g [GridEntry],
    rec: &Recommendation,
    plots: usize,
) -> Vec<&'g GridEntry> {
    let mut chosen: Vec<&GridEntry> = Vec::new();
    if let Some(d) = grid.iter().find(|g| g.to_line() == "default") {
        chosen.push(d);
    }
    for r in &rec.ranked {
        if chosen.len() > plots {
            break;
        }
        if let Some(g) = grid.iter().find(|g| g.to_line() == r.row.grid_line) {
            if !chosen.contains(&g) {
                chosen.push(g);
            }
        }
    }
    chosen
}

/// The page's note when the trace has more allocations than the explorer
/// draws ([`crate::EXPLORER_MAX_ALLOCATIONS`]); `vramlab report` prints it
/// too.
pub fn explorer_left_out(trace: &Trace) -> Option<String> {
    (trace.num_ids as usize > crate::EXPLORER_MAX_ALLOCATIONS).then(|| {
        format!(
            "The explorer is left out: the trace has {} allocations, more than the {} one page can draw; the plots, tables and segment maps cover the whole trace.",
            trace.num_ids,
            crate::EXPLORER_MAX_ALLOCATIONS
        )
    })
}

/// The pinned host advice for the trace (traces with host requests).
fn host_advice(req: &ReportRequest<'_>) -> Result<Option<vramlab_replay::HostAdvice>, BuildError> {
    vramlab_replay::advise_host(
        req.trace,
        &vramlab_allocator::AllocConf::new(req.target.rules),
        req.host,
        req.start.unwrap_or_default(),
    )
    .map_err(|e| match e {
        vramlab_replay::StreamError::Replay { scenario, error } => {
            sweep_error((req.name.to_string(), scenario, error))
        }
        // A trace in memory is never read.
        vramlab_replay::StreamError::Read(e) => sweep_error((
            req.name.to_string(),
            String::new(),
            ReplayError::Malformed(e.to_string()),
        )),
    })
}

/// A failed sweep replay as a build error.
fn sweep_error((trace, setting, error): (String, String, ReplayError)) -> BuildError {
    BuildError::Sweep {
        trace,
        setting,
        error,
    }
}

/// The same sweep under the release upgraded to, beside `rec` (`None`
/// without [`ReportRequest::upgrade_to`]).
fn upgrade_advice(
    req: &ReportRequest<'_>,
    rec: &Recommendation,
    progress: &(dyn Fn() + Sync),
) -> Result<Option<UpgradeAdvice>, BuildError> {
    let Some((to, to_grid)) = req.upgrade_to else {
        return Ok(None);
    };
    let (_, after) = recommend_trace(
        &RecommendRequest {
            name: req.name,
            trace: req.trace,
            grid: to_grid,
            capacity: req.capacity,
            target: to,
            start: req.start,
            placement: req.placement,
        },
        progress,
    )
    .map_err(sweep_error)?;
    Ok(Some(UpgradeAdvice::new(
        req.target.rules,
        rec.clone(),
        to.rules,
        after,
    )))
}

/// Writes the report of a snapshot without history
/// (`torch.cuda.memory_snapshot()`'s segment list, or `enabled="state"`)
/// into `out`: the recorded state's numbers and segment map; there is
/// nothing to replay or compare. Returns the path of `index.html`.
///
/// # Errors
///
/// A trace without a recorded state, a state that cannot be laid out, or
/// the report that cannot be written.
pub fn state_report(name: &str, trace: &Trace, out: &Path) -> Result<PathBuf, BuildError> {
    let Some(init) = trace.initial.as_ref() else {
        return Err(BuildError::NothingToReport {
            name: name.to_string(),
        });
    };
    if let Some(e) = &init.layout_error {
        return Err(BuildError::Layout {
            name: name.to_string(),
            error: e.clone(),
        });
    }
    let opts = ReplayOptions {
        check_invariants: false,
        segments_at_peak: true,
        record_addresses: true,
        start: Start::Recorded,
        ..Default::default()
    };
    let run = Scenario::native(AllocConf::new(TorchVersion::NEWEST))
        .run(trace, &opts)
        .map_err(|error| BuildError::State {
            name: name.to_string(),
            error,
        })?;
    let st = TraceSummary::of(trace).initial_state.unwrap_or_default();
    let mut notes = trace.notes.clone();
    notes.push(format!(
        "The snapshot holds the allocator state only: {} segments, {} reserved, {} allocated, {} reserved but unallocated, largest free block {}.",
        st.segments,
        bytes(st.reserved_bytes),
        bytes(st.allocated_bytes),
        bytes(st.waste_bytes),
        bytes(st.largest_free_block)
    ));
    let input = ReportInput {
        title: format!("vramlab report: {name} (allocator state)"),
        trace: name.to_string(),
        capacity: None,
        settings: vec![SettingRun::new("recorded state", run)],
        oom_points: Vec::new(),
        fit: None,
        recommendation: None,
        notes,
        phases: Vec::new(),
        pools: Vec::new(),
        explanation: None,
        explore: crate::ExploreTrace::of(trace),
        upgrade: None,
    };
    write_report(out, &input).map_err(BuildError::Write)
}
