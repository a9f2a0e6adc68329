//! The largest utilization an engine tenant can take without any tenant
//! running out of memory, found by bisection over hundredths (vLLM's
//! `gpu_memory_utilization` as people set it). The values that fit form a
//! window: below it the engine has no room for its KV cache (or refuses to
//! start), above it some tenant runs out of memory. A run is asked for each
//! tried value, by replay or by the judge: first the window's lower edge,
//! then its upper one.

use anyhow::Result;
use serde::Serialize;

/// How a run at one utilization went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every tenant ran to its end.
    Fits,
    /// The engine found no room for its KV cache: more would fit better.
    TooSmall,
    /// A tenant ran out of memory otherwise.
    TooBig,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilSearch {
    /// The tenant searched.
    pub tenant: String,
    /// The largest utilization that fits (`None`: none from 0.01 to 1).
    pub largest_fitting: Option<f64>,
    /// The smallest that gives the engine room for its KV cache.
    pub smallest_with_room: Option<f64>,
    /// Each value tried and how it went, in the order tried.
    pub tried: Vec<(f64, Outcome)>,
}

/// Hundredths as a utilization.
fn util(h: u32) -> f64 {
    f64::from(h) / 100.0
}

/// Bisection over 0.01 … 1.00 with `run(u)` telling how a run went.
pub fn largest_fitting(
    tenant: &str,
    mut run: impl FnMut(f64) -> Result<Outcome>,
) -> Result<UtilSearch> {
    let mut tried: Vec<(f64, Outcome)> = Vec::new();
    let mut known: std::collections::BTreeMap<u32, Outcome> = Default::default();
    let mut ask = |h: u32, tried: &mut Vec<(f64, Outcome)>| -> Result<Outcome> {
        if let Some(&o) = known.get(&h) {
            return Ok(o);
        }
        let o = run(util(h))?;
        known.insert(h, o);
        tried.push((util(h), o));
        Ok(o)
    };
    // The lower edge: the smallest value that is not too small (`hi`).
    let (mut lo, mut hi) = (0u32, 101u32);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ask(mid, &mut tried)? == Outcome::TooSmall {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if hi > 100 {
        return Ok(UtilSearch {
            tenant: tenant.into(),
            largest_fitting: None,
            smallest_with_room: None,
            tried,
        });
    }
    let edge = hi;
    // The upper edge: the largest value from `edge` up that fits.
    let (mut lo, mut hi) = (edge - 1, 101u32);
    if ask(edge, &mut tried)? != Outcome::Fits {
        hi = edge;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ask(mid, &mut tried)? == Outcome::Fits {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(UtilSearch {
        tenant: tenant.into(),
        largest_fitting: (lo >= edge).then(|| util(lo)),
        smallest_with_room: Some(util(edge)),
        tried,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_window() {
        for (low, high) in [(1u32, 100u32), (26, 49), (26, 26), (60, 100), (1, 1)] {
            let s = largest_fitting("e", |u| {
                let h = (u * 100.0).round() as u32;
                Ok(if h < low {
                    Outcome::TooSmall
                } else if h <= high {
                    Outcome::Fits
                } else {
                    Outcome::TooBig
                })
            })
            .unwrap();
            assert_eq!(s.largest_fitting, Some(util(high)), "{low}-{high}");
            assert_eq!(s.smallest_with_room, Some(util(low)), "{low}-{high}");
            assert!(s.tried.len() <= 16, "{low}-{high}: {} tries", s.tried.len());
        }
        let none = largest_fitting("e", |_| Ok(Outcome::TooBig)).unwrap();
        assert_eq!(none.largest_fitting, None);
        let small = largest_fitting("e", |_| Ok(Outcome::TooSmall)).unwrap();
        assert_eq!(small.largest_fitting, None);
    }
}
