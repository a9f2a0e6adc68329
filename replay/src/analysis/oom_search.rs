//! The OOM point: the smallest device capacity at which a trace replays
//! without running out of memory under a scenario, and the search that
//! finds it, as a state machine: it says which capacities it needs
//! replayed next and takes their runs, so that the same search runs over a
//! trace in memory (one replay after another) or over a file read once per
//! step, with the steps of every setting in one read. The probes, their
//! order and the answer are the same either way.
//!
//! Every amount a policy obtains from the device is a multiple of 2 MiB
//! (small segments and small expandable pages are 2 MiB, large segments are
//! rounded to 2 MiB, large pages are 20 MiB), so the search runs over
//! multiples of 2 MiB: bisection between the peak of live bytes (no
//! allocator can do with less) and the peak reserved on an unlimited device
//! (which always suffices for policies whose decisions do not depend on the
//! capacity). The answer is then checked: it must fit, and 2 MiB less must
//! not. Feasibility need not be monotone (less memory can change which
//! blocks are reused or released), so capacities above the answer are
//! probed and any that fail are reported.

use serde::Serialize;

use crate::engine::ReplayError;
use crate::engine::run::Run;
use crate::engine::scenario::Scenario;
use crate::engine::start::Start;

/// Granularity of the search.
pub const OOM_POINT_STEP: u64 = 2 << 20;

/// Result of an OOM-point search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomPoint {
    /// Scenario label.
    pub setting: String,
    /// Smallest capacity (a multiple of 2 MiB) at which the trace fits.
    pub min_capacity: u64,
    /// The peak of live requested bytes, or what the state at the start
    /// alone reserves when that is more: no capacity below it fits.
    pub lower_bound: u64,
    /// Peak reserved bytes on an unlimited device.
    pub unlimited_peak_reserved: u64,
    /// The answer was verified: it fits and 2 MiB less does not.
    pub verified: bool,
    /// Capacities above the answer that do not fit (empty when
    /// feasibility looked monotone).
    pub not_monotone_at: Vec<u64>,
    /// Replays performed.
    pub replays: u32,
    /// How a trace that starts mid-run began (`None`: from an empty
    /// allocator).
    pub start: Option<Start>,
    /// Bytes the state at the first entry alone reserves under this
    /// scenario (traces that start mid-run): no smaller capacity fits.
    pub start_reserved_bytes: Option<u64>,
}

/// Where a search stands.
#[derive(Debug, Clone)]
enum Stage {
    /// Needs the replay on an unlimited device.
    Unlimited,
    /// Needs the replay at `hi` steps: the upper end must fit.
    Grow,
    /// Needs the replay at the middle of `lo` and `hi`.
    Bisect,
    /// Needs the replays that check the answer and probe above it.
    Check,
    /// Found.
    Done(OomPoint),
}

/// One scenario's search (the method is in the module's doc).
#[derive(Debug, Clone)]
pub(crate) struct OomSearch {
    label: String,
    stage: Stage,
    replays: u32,
    start_reserved: Option<u64>,
    lower: u64,
    unlimited_peak: u64,
    start: Option<Start>,
    /// In steps of [`OOM_POINT_STEP`]: `hi` fits, `lo` does not (or is 0).
    lo: u64,
    hi: u64,
}

impl OomSearch {
    /// A search under `scenario` (its own capacity is ignored).
    pub(crate) fn new(scenario: &Scenario) -> OomSearch {
        OomSearch {
            label: scenario.label(),
            stage: Stage::Unlimited,
            replays: 0,
            start_reserved: None,
            lower: 0,
            unlimited_peak: 0,
            start: None,
            lo: 0,
            hi: 0,
        }
    }

    /// What the state at the start of a mid-run trace alone reserves under
    /// the scenario: no smaller capacity fits. Set before the first runs
    /// are fed.
    pub(crate) fn set_start_reserved(&mut self, bytes: u64) {
        self.start_reserved = Some(bytes);
    }

    /// The capacities to replay next, in order (`None`: unlimited); empty
    /// once the search is done.
    pub(crate) fn wanted(&self) -> Vec<Option<u64>> {
        match self.stage {
            Stage::Unlimited => vec![None],
            Stage::Grow => vec![Some(self.hi * OOM_POINT_STEP)],
            Stage::Bisect => vec![Some(self.mid() * OOM_POINT_STEP)],
            Stage::Check => {
                let answer = self.answer();
                let mut caps = vec![Some(answer)];
                if answer >= OOM_POINT_STEP {
                    caps.push(Some(answer - OOM_POINT_STEP));
                }
                caps.extend(self.probes_above().into_iter().map(Some));
                caps
            }
            Stage::Done(_) => Vec::new(),
        }
    }

    /// Takes the runs of [`OomSearch::wanted`], in its order.
    pub(crate) fn feed(&mut self, runs: &[Run]) -> Result<(), ReplayError> {
        let fits = |k: usize| runs.get(k).is_some_and(|r| r.oom.is_none());
        match self.stage {
            Stage::Unlimited => {
                let Some(unlimited) = runs.first() else {
                    return Ok(());
                };
                let s = &unlimited.summary;
                self.lower = s.peak_requested_bytes.max(self.start_reserved.unwrap_or(0));
                self.unlimited_peak = s.peak_reserved_bytes;
                self.start = unlimited.start;
                self.replays = 1;
                self.hi = s.peak_reserved_bytes.div_ceil(OOM_POINT_STEP).max(1);
                self.stage = Stage::Grow;
            }
            Stage::Grow => {
                self.replays += 1;
                if fits(0) {
                    self.lo = (self.lower / OOM_POINT_STEP).saturating_sub(1);
                    if self.lower == 0 {
                        self.lo = 0;
                    }
                    self.bisect_or_check();
                } else {
                    // A capacity also sets the device's total (memory
                    // fractions, expandable reservations): grow until the
                    // upper end really fits.
                    self.hi = self.hi.saturating_mul(2);
                    if self.hi > (1u64 << 50) / OOM_POINT_STEP {
                        return Err(ReplayError::Initial(
                            "the trace does not fit on any capacity up to 1 PiB under this setting"
                                .into(),
                        ));
                    }
                }
            }
            Stage::Bisect => {
                self.replays += 1;
                let mid = self.mid();
                if fits(0) {
                    self.hi = mid;
                } else {
                    self.lo = mid;
                }
                self.bisect_or_check();
            }
            Stage::Check => {
                let answer = self.answer();
                self.replays += 2;
                let below = usize::from(answer >= OOM_POINT_STEP);
                let verified = fits(0) && (below == 0 || !fits(1));
                let mut not_monotone_at = Vec::new();
                for (k, c) in self.probes_above().into_iter().enumerate() {
                    self.replays += 1;
                    if !fits(1 + below + k) {
                        not_monotone_at.push(c);
                    }
                }
                self.stage = Stage::Done(OomPoint {
                    setting: self.label.clone(),
                    min_capacity: answer,
                    lower_bound: self.lower,
                    unlimited_peak_reserved: self.unlimited_peak,
                    verified,
                    not_monotone_at,
                    replays: self.replays,
                    start: self.start,
                    start_reserved_bytes: self.start_reserved,
                });
            }
            Stage::Done(_) => {}
        }
        Ok(())
    }

    /// The answer, once the search is done.
    pub(crate) fn into_point(self) -> Option<OomPoint> {
        match self.stage {
            Stage::Done(p) => Some(p),
            _ => None,
        }
    }

    fn mid(&self) -> u64 {
        self.lo + (self.hi - self.lo) / 2
    }

    fn answer(&self) -> u64 {
        self.hi * OOM_POINT_STEP
    }

    fn bisect_or_check(&mut self) {
        self.stage = if self.hi.saturating_sub(self.lo) > 1 {
            Stage::Bisect
        } else {
            Stage::Check
        };
    }

    /// Capacities above the answer probed for feasibility that is not
    /// monotone: the eight steps above it and eight points up to the
    /// unlimited peak, ascending.
    fn probes_above(&self) -> Vec<u64> {
        let answer = self.answer();
        let top = self.unlimited_peak.max(answer);
        let mut probes: Vec<u64> = (1..=8)
            .map(|k| answer.saturating_add(k * OOM_POINT_STEP))
            .collect();
        let span = top.saturating_sub(answer);
        // span / 8 * k: no overflow for spans near 2^64 (requests up to 2^60).
        probes.extend(
            (1..=8)
                .map(|k| answer.saturating_add((span / 8 * k) / OOM_POINT_STEP * OOM_POINT_STEP)),
        );
        probes.sort_unstable();
        probes.dedup();
        probes.retain(|&c| c > answer);
        probes
    }
}
