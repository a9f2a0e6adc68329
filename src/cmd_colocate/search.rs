//! The largest utilization an engine tenant can take without any tenant
//! running out of memory, found by bisection over hundredths (vLLM's
//! `gpu_memory_utilization` as people set it): a run is asked for each
//! tried value, by replay or by the judge, and must fit at the answer and
//! not one hundredth above it.

use anyhow::Result;
use serde::Serialize;

/// What a search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilSearch {
    /// The tenant searched.
    pub tenant: String,
    /// The largest utilization that fits (`None`: not even 0.01).
    pub largest_fitting: Option<f64>,
    /// Each value tried and whether it fitted, in the order tried.
    pub tried: Vec<(f64, bool)>,
}

/// Hundredths as a utilization.
fn util(h: u32) -> f64 {
    f64::from(h) / 100.0
}

/// Bisection over 0.01 … 1.00: `fits(u)` says whether every tenant runs to
/// its end with the searched one at `u`. More memory for the engine never
/// makes a tenant fit that did not, so the answer is the largest fitting
/// value.
pub fn largest_fitting(
    tenant: &str,
    mut fits: impl FnMut(f64) -> Result<bool>,
) -> Result<UtilSearch> {
    let mut tried = Vec::new();
    let mut ask = |h: u32, tried: &mut Vec<(f64, bool)>| -> Result<bool> {
        let ok = fits(util(h))?;
        tried.push((util(h), ok));
        Ok(ok)
    };
    // The invariant: `lo` fits (0: nothing tried yet), `hi` does not.
    let (mut lo, mut hi) = (0u32, 101u32);
    if ask(100, &mut tried)? {
        lo = 100;
    } else {
        hi = 100;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ask(mid, &mut tried)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(UtilSearch {
        tenant: tenant.to_string(),
        largest_fitting: (lo > 0).then(|| util(lo)),
        tried,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_edge() {
        for edge in [0u32, 1, 37, 99, 100] {
            let s = largest_fitting("e", |u| Ok(u <= util(edge) + 1e-9)).unwrap();
            assert_eq!(s.largest_fitting, (edge > 0).then(|| util(edge)), "{edge}");
            assert!(s.tried.len() <= 8, "{edge}: {} tries", s.tried.len());
        }
    }
}
