//! The OOM point: the smallest device capacity at which a trace replays
//! without running out of memory under a scenario.
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
use vramlab_traces::Trace;

use crate::engine::run::Run;
use crate::engine::scenario::Scenario;
use crate::engine::start::Start;
use crate::engine::{ReplayError, ReplayOptions};

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

fn fits(
    trace: &Trace,
    scenario: &Scenario,
    capacity: u64,
    opts: &ReplayOptions,
) -> Result<bool, ReplayError> {
    let s = scenario.clone().with_capacity(Some(capacity));
    Ok(s.run(trace, opts)?.oom.is_none())
}

/// Finds the smallest capacity at which `trace` replays without OOM under
/// `scenario` (its own capacity is ignored). A trace that starts mid-run
/// begins as `start` says; the search starts at what that state alone needs.
pub fn find_oom_point(
    trace: &Trace,
    scenario: &Scenario,
    start: Start,
) -> Result<OomPoint, ReplayError> {
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        start,
        forget_device_calls: true,
        ..Default::default()
    };
    let unlimited: Run = scenario.clone().with_capacity(None).run(trace, &opts)?;
    let start_reserved = match &trace.initial {
        Some(_) => {
            let only_start = ReplayOptions {
                stop_before: Some(0),
                ..opts.clone()
            };
            let r = scenario
                .clone()
                .with_capacity(None)
                .run(trace, &only_start)?;
            Some(r.summary.peak_reserved_bytes)
        }
        None => None,
    };
    let lower = unlimited
        .summary
        .peak_requested_bytes
        .max(start_reserved.unwrap_or(0));
    let mut replays = 1u32;
    let mut hi = unlimited
        .summary
        .peak_reserved_bytes
        .div_ceil(OOM_POINT_STEP)
        .max(1);
    // A capacity also sets the device's total (memory fractions, expandable
    // reservations); make sure the upper end really fits, growing if not.
    while !fits(trace, scenario, hi * OOM_POINT_STEP, &opts)? {
        replays += 1;
        hi = hi.saturating_mul(2);
        if hi > (1u64 << 50) / OOM_POINT_STEP {
            return Err(ReplayError::Initial(
                "the trace does not fit on any capacity up to 1 PiB under this setting".into(),
            ));
        }
    }
    replays += 1;
    let mut lo = (lower / OOM_POINT_STEP).saturating_sub(1); // lo*OOM_POINT_STEP does not fit (below the bound)
    if lower == 0 {
        lo = 0;
    }
    // Invariant: hi fits; lo does not (or is 0).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        replays += 1;
        if fits(trace, scenario, mid * OOM_POINT_STEP, &opts)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let answer = hi * OOM_POINT_STEP;
    let verified = {
        replays += 2;
        fits(trace, scenario, answer, &opts)?
            && (answer < OOM_POINT_STEP || !fits(trace, scenario, answer - OOM_POINT_STEP, &opts)?)
    };
    // Probe above the answer for non-monotone feasibility.
    let mut not_monotone_at = Vec::new();
    let top = unlimited.summary.peak_reserved_bytes.max(answer);
    let mut probes: Vec<u64> = (1..=8)
        .map(|k| answer.saturating_add(k * OOM_POINT_STEP))
        .collect();
    let span = top.saturating_sub(answer);
    // span / 8 * k: no overflow for spans near 2^64 (requests up to 2^60).
    probes.extend(
        (1..=8).map(|k| answer.saturating_add((span / 8 * k) / OOM_POINT_STEP * OOM_POINT_STEP)),
    );
    probes.sort_unstable();
    probes.dedup();
    for c in probes {
        if c > answer {
            replays += 1;
            if !fits(trace, scenario, c, &opts)? {
                not_monotone_at.push(c);
            }
        }
    }
    Ok(OomPoint {
        setting: scenario.label(),
        min_capacity: answer,
        lower_bound: lower,
        unlimited_peak_reserved: unlimited.summary.peak_reserved_bytes,
        verified,
        not_monotone_at,
        replays,
        start: unlimited.start,
        start_reserved_bytes: start_reserved,
    })
}
