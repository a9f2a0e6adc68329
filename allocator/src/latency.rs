//! Per-call latency histograms (HdrHistogram, nanoseconds).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency a histogram tracks: one hour. Longer calls are clamped.
const MAX_NS: u64 = 3_600_000_000_000;

/// A latency histogram in nanoseconds with three significant figures.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    total_ns: u128,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram (1 ns to 1 h, 3 significant figures).
    // Expect: `new_with_bounds` (hdrhistogram 7) fails only when `low` is 0
    // or above `u64::MAX / 2`, `high < 2 * low`, `sigfig > 5`,
    // `log2(low)` plus the sub-bucket bits (11 for 3 figures) exceeds 63, or
    // the bucket array does not fit a `usize`. The arguments are the
    // constants 1, `MAX_NS` (3.6e12) and 3, so none applies; every test that
    // builds a histogram exercises this call.
    #[allow(clippy::expect_used)]
    pub fn new() -> Self {
        LatencyHistogram {
            hist: Histogram::new_with_bounds(1, MAX_NS, 3)
                .expect("constant bounds are valid for HdrHistogram"),
            total_ns: 0,
        }
    }

    /// Records one call that took `d`.
    pub fn record(&mut self, d: Duration) {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records one call that took `ns` nanoseconds (0 is counted as 1 ns,
    /// anything above one hour as one hour).
    pub(crate) fn record_ns(&mut self, ns: u64) {
        self.hist.saturating_record(ns.clamp(1, MAX_NS));
        self.total_ns += u128::from(ns);
    }

    /// Number of recorded calls.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Latency at quantile `q` (0.0 ..= 1.0) in nanoseconds; 0 when empty.
    pub(crate) fn quantile_ns(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_quantile(q)
        }
    }

    /// Count, mean, p50, p99, max and total.
    pub fn summary(&self) -> LatencySummary {
        let n = self.count();
        LatencySummary {
            count: n,
            p50_ns: self.quantile_ns(0.5),
            p99_ns: self.quantile_ns(0.99),
            max_ns: if n == 0 { 0 } else { self.hist.max() },
            mean_ns: if n == 0 {
                0.0
            } else {
                self.total_ns as f64 / n as f64
            },
            total_ns: u64::try_from(self.total_ns).unwrap_or(u64::MAX),
        }
    }
}

/// The headline figures of a [`LatencyHistogram`], in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Calls recorded.
    pub count: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Slowest call.
    pub max_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Sum of all calls.
    pub total_ns: u64,
}

/// Latencies of the driver calls a GPU device made, one
/// histogram per kind of call. Only successful calls are recorded.
#[derive(Debug, Clone, Default)]
pub struct DeviceLatencies {
    /// `cuMemAlloc` of a segment.
    pub malloc: LatencyHistogram,
    /// `cuMemFree` of a segment.
    pub free: LatencyHistogram,
    /// One [`crate::Device::map`]: `cuMemCreate` + `cuMemMap` per page and
    /// one `cuMemSetAccess` over the range.
    pub map: LatencyHistogram,
    /// One [`crate::Device::unmap`]: a context synchronisation (as PyTorch's
    /// `unmapHandles` does) and `cuMemUnmap` + `cuMemRelease` per page.
    pub unmap: LatencyHistogram,
}

impl DeviceLatencies {
    /// `(name, summary)` for malloc, free, map and unmap, in that order.
    pub fn summaries(&self) -> [(&'static str, LatencySummary); 4] {
        [
            ("malloc", self.malloc.summary()),
            ("free", self.free.summary()),
            ("map", self.map.summary()),
            ("unmap", self.unmap.summary()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_samples() {
        let mut h = LatencyHistogram::new();
        assert_eq!(h.summary(), LatencySummary::default());
        for ns in 1..=100u64 {
            h.record_ns(ns * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 100);
        // Three significant figures: within 0.1 %.
        assert!((s.p50_ns as f64 - 50_000.0).abs() <= 50.0, "{s:?}");
        assert!((s.p99_ns as f64 - 99_000.0).abs() <= 99.0, "{s:?}");
        assert!((s.max_ns as f64 - 100_000.0).abs() <= 100.0, "{s:?}");
        assert!((s.mean_ns - 50_500.0).abs() < 1e-6);
        h.record_ns(0);
        h.record(Duration::from_secs(10_000));
        assert_eq!(h.count(), 102);
    }
}
