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
//! Greedy by size places largest first, each at the lowest offset it fits
//! (the classic heuristic); a branch and bound search improves the plan
//! of a small trace, and proves it optimal when it reaches the bound or
//! finishes. Both are pure algorithms of the allocator crate
//! (`vramlab_allocator::policies::plan`), which also replays a plan as a
//! policy; this module makes the buffers from a trace and compares.

mod recipes;

use std::sync::Arc;

use serde::Serialize;
use vramlab_allocator::PolicySpec;
use vramlab_allocator::policies::plan::{
    self as placement, ExactOutcome, check, exact, greedy, lower_bound,
};
use vramlab_traces::Trace;

pub use recipes::Recipe;
use recipes::recipes;

use crate::engine::scenario::Scenario;
use crate::engine::start::Start;
use crate::engine::static_plan::{plan_buffers, static_plan};
use crate::engine::{ReplayError, ReplayOptions};

/// How a plan starts `trace`: a trace that starts mid-run starts fresh, its
/// blocks in use at the first entry allocated first and planned too (their
/// frees are in the trace); `None` for a trace that starts empty.
pub fn plan_start(trace: &Trace) -> Option<Start> {
    trace.initial.as_ref().map(|_| Start::Fresh)
}

/// The buffers a plan of `trace` places (see [`plan_start`]).
pub fn buffers(trace: &Trace) -> Vec<placement::Buffer> {
    plan_buffers(trace, plan_start(trace).unwrap_or_default())
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

impl PolicyGap {
    /// `setting`'s peak (and whether it ran out of memory) against the
    /// plan's peak `planned` and the bound `bound`.
    pub fn new(setting: String, peak: u64, oom: bool, planned: u64, bound: u64) -> PolicyGap {
        PolicyGap {
            setting,
            peak_reserved_bytes: peak,
            gap_to_plan_bytes: peak as i64 - planned as i64,
            gap_to_bound_bytes: peak.saturating_sub(bound),
            fragmentation_ratio: if peak > 0 {
                1.0 - bound.min(peak) as f64 / peak as f64
            } else {
                0.0
            },
            oom,
        }
    }
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
    /// How the trace starts: `fresh` for one recorded mid-run (its blocks
    /// in use at the first entry are allocated first and planned too);
    /// `None` for one that starts empty.
    pub start: Option<Start>,
    /// The blocks in use at the first entry, planned with the rest.
    pub initial_blocks: usize,
    /// The plan replayed as a policy (`plan`: the static plan of the
    /// trace — greedy's, or the search's on traces of at most 5,000
    /// allocations — in one arena mapped in 2 MiB pages, PyTorch's
    /// allocator under the first setting's release for anything else).
    /// When a setting is itself the plan policy, its replay is reused.
    pub policy_peak_bytes: u64,
    /// The plan as a policy ran out of memory (on the capacity given).
    pub policy_oom: bool,
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
    let start = plan_start(trace);
    let bufs = buffers(trace);
    let bound = lower_bound(&bufs);
    let g = greedy(&bufs);
    check(&bufs, &g).map_err(ReplayError::Malformed)?;
    let search = (bufs.len() <= search_up_to).then(|| exact(&bufs, budget));
    let best = search
        .as_ref()
        .map_or(g.peak, |s| s.placement.peak.min(g.peak));
    let opts = ReplayOptions {
        check_invariants: false,
        start: start.unwrap_or_default(),
        ..Default::default()
    };
    let mut policies = Vec::with_capacity(scenarios.len());
    let mut plan_policy = None;
    for s in scenarios {
        let run = s.run(trace, &opts)?;
        let peak = run.summary.peak_reserved_bytes;
        if plan_policy.is_none() && matches!(s.policy, PolicySpec::Plan(_)) {
            plan_policy = Some((peak, run.oom.is_some()));
        }
        policies.push(PolicyGap::new(
            s.label(),
            peak,
            run.oom.is_some(),
            best,
            bound,
        ));
    }
    let release = scenarios
        .first()
        .and_then(|s| match &s.policy {
            PolicySpec::Plan(p) => Some(&p.fallback),
            other => other.native_conf(),
        })
        .map_or(vramlab_allocator::TorchVersion::NEWEST, |c| c.version);
    let (policy_peak_bytes, policy_oom) = match plan_policy {
        Some(done) => done,
        None => replay_plan(trace, &bufs, release, scenarios.first(), &opts)?,
    };
    let recipes = recipes(trace, release, best, scenarios.first())?;
    Ok(PlanReport {
        recipes,
        buffers: bufs.len(),
        peak_live_bytes: bound,
        greedy_peak_bytes: g.peak,
        planned_peak_bytes: best,
        proved_optimal: best <= bound || search.as_ref().is_some_and(|s| s.proved),
        search,
        start,
        initial_blocks: initial_blocks(trace),
        policy_peak_bytes,
        policy_oom,
        policies,
    })
}

/// The blocks in use at the first entry of a trace recorded mid-run.
fn initial_blocks(trace: &Trace) -> usize {
    trace.initial.as_ref().map_or(0, |i| i.live_blocks())
}

/// The peak of `trace` replayed under the `plan` policy (the static plan
/// of `bufs`, PyTorch's defaults of `release` for the rest), on the device
/// of `like` (the first setting's), and whether it ran out of memory.
fn replay_plan(
    trace: &Trace,
    bufs: &[placement::Buffer],
    release: vramlab_allocator::TorchVersion,
    like: Option<&Scenario>,
    opts: &ReplayOptions,
) -> Result<(u64, bool), ReplayError> {
    let settings = placement::Settings::parse("", release).map_err(ReplayError::Malformed)?;
    let plan = static_plan(bufs).map_err(ReplayError::Malformed)?;
    let mut s = like
        .cloned()
        .unwrap_or_else(|| Scenario::new(PolicySpec::Plan(settings.clone())));
    s.policy = PolicySpec::Plan(settings.with_plan(Arc::new(plan)));
    s.memory_fraction = None;
    let run = s.run(trace, opts)?;
    Ok((run.summary.peak_reserved_bytes, run.oom.is_some()))
}
