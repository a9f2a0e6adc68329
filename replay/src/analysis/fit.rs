//! Max scale: the largest size (batch, sequence length, resolution) of a
//! generated workload that fits a device under a scenario.
//!
//! The search doubles the size from a start until a replay runs out of
//! memory (or a limit is reached), then bisects between the last size that
//! fit and the first that did not. It assumes memory grows with the size;
//! every probe is kept, so a caller can plot peak reserved against size and
//! see where that assumption fails.

use serde::Serialize;
use vramlab_traces::Trace;

use crate::engine::scenario::Scenario;
use crate::engine::{ReplayError, ReplayOptions};

/// One replay of the search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitProbe {
    /// The size tried.
    pub size: u64,
    /// It replayed without OOM.
    pub fits: bool,
    /// Peak reserved bytes (at the OOM, when it did not fit).
    pub peak_reserved_bytes: u64,
    /// Peak live bytes of the generated trace.
    pub peak_requested_bytes: u64,
}

/// Result of a max-scale search under one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitResult {
    /// Scenario label.
    pub setting: String,
    /// Largest size that fits (`None` when even `start` does not).
    pub max_size: Option<u64>,
    /// `true` when `limit` fits too (the true maximum may be larger).
    pub hit_limit: bool,
    /// Every size tried, in increasing size order.
    pub probes: Vec<FitProbe>,
}

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// The workload generator failed for a size.
    #[error("generating size {size}: {message}")]
    Generate {
        /// The size.
        size: u64,
        /// Its message.
        message: String,
    },
    /// A replay failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

/// Finds the largest size in `[start, limit]` whose trace `make(size)`
/// replays without OOM under `scenario` (its capacity decides).
pub fn max_fitting_size(
    make: &dyn Fn(u64) -> Result<Trace, String>,
    scenario: &Scenario,
    start: u64,
    limit: u64,
) -> Result<FitResult, FitError> {
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        ..Default::default()
    };
    let mut probes: Vec<FitProbe> = Vec::new();
    let probe = |size: u64, probes: &mut Vec<FitProbe>| -> Result<bool, FitError> {
        if let Some(p) = probes.iter().find(|p| p.size == size) {
            return Ok(p.fits);
        }
        let trace = make(size).map_err(|message| FitError::Generate { size, message })?;
        let run = scenario.run(&trace, &opts)?;
        let fits = run.oom.is_none();
        probes.push(FitProbe {
            size,
            fits,
            peak_reserved_bytes: run.summary.peak_reserved_bytes,
            peak_requested_bytes: run.summary.peak_requested_bytes,
        });
        Ok(fits)
    };
    let start = start.max(1);
    let limit = limit.max(start);
    let mut result = FitResult {
        setting: scenario.label(),
        max_size: None,
        hit_limit: false,
        probes: Vec::new(),
    };
    if !probe(start, &mut probes)? {
        probes.sort_by_key(|p| p.size);
        result.probes = probes;
        return Ok(result);
    }
    // Double until it does not fit.
    let mut good = start;
    let mut bad = None;
    while bad.is_none() {
        if good == limit {
            result.hit_limit = true;
            break;
        }
        let next = good.saturating_mul(2).min(limit);
        if probe(next, &mut probes)? {
            good = next;
        } else {
            bad = Some(next);
        }
    }
    // Bisect.
    if let Some(mut b) = bad {
        while b - good > 1 {
            let mid = good + (b - good) / 2;
            if probe(mid, &mut probes)? {
                good = mid;
            } else {
                b = mid;
            }
        }
    }
    probes.sort_by_key(|p| p.size);
    result.max_size = Some(good);
    result.probes = probes;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramlab_allocator::AllocConf;
    use vramlab_traces::{Event, TraceHeader};

    /// `n` live 10 MiB tensors: 10n MiB reserved with the defaults.
    fn make(n: u64) -> Result<Trace, String> {
        let mut t = Trace::new(TraceHeader::default());
        for i in 0..n as u32 {
            t.events.push(Event::Alloc {
                id: i,
                stream: 0,
                size: 10 << 20,
            });
        }
        t.num_ids = n as u32;
        Ok(t)
    }

    #[test]
    fn finds_the_exact_maximum() {
        // 10 MiB each -> 10 MiB segments: 37 fit in 375 MiB, 38 do not.
        let s = Scenario::native(AllocConf::default()).with_capacity(Some(375 << 20));
        let r = max_fitting_size(&make, &s, 1, 10_000).unwrap();
        assert_eq!(r.max_size, Some(37));
        assert!(!r.hit_limit);
        assert!(r.probes.iter().any(|p| p.size == 38 && !p.fits));
        let r = max_fitting_size(&make, &s, 1, 20).unwrap();
        assert_eq!(r.max_size, Some(20));
        assert!(r.hit_limit);
        let tiny = Scenario::native(AllocConf::default()).with_capacity(Some(5 << 20));
        assert_eq!(
            max_fitting_size(&make, &tiny, 1, 100).unwrap().max_size,
            None
        );
    }
}
