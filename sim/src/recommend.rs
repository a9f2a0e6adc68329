//! Recommendations: settings ranked for a device, with the reasons and the
//! lines to export.

use serde::Serialize;
use vramlab_allocator::TorchVersion;

use crate::sweep::SweepRow;

/// One ranked setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    /// Rank, 1 = best.
    pub rank: u32,
    /// The sweep row.
    pub row: SweepRow,
    /// Capacity − peak reserved (negative when it does not fit).
    pub headroom_bytes: i64,
}

/// A recommendation for one trace and capacity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    /// All native settings ranked: those that fit first, then by peak
    /// reserved, device calls and synchronising flushes.
    pub ranked: Vec<Ranked>,
    /// Other policies, ranked the same way, for comparison.
    pub other_policies: Vec<Ranked>,
    /// Why the winner wins, in a sentence or two.
    pub why: String,
    /// `export …` for bash/zsh, `$env:…` for PowerShell, `set …` for cmd;
    /// empty when the defaults win or nothing fits.
    pub export: Vec<(String, String)>,
    /// A Python line for a memory fraction, when the winner uses one.
    pub python: Option<String>,
}

fn rank(rows: &[SweepRow], capacity: u64) -> Vec<Ranked> {
    let mut v: Vec<&SweepRow> = rows.iter().collect();
    // Settings that fit first, by peak reserved, then device calls and
    // flushes; then those that do not, the ones that get furthest first.
    let key = |r: &SweepRow| {
        if r.fits() {
            (
                0,
                r.peak_reserved_bytes,
                r.num_device_alloc + r.num_device_free,
                r.num_sync_all_streams,
                r.index,
            )
        } else {
            (
                1,
                u64::MAX - r.oom_event as u64,
                r.peak_reserved_bytes,
                0,
                r.index,
            )
        }
    };
    v.sort_by_key(|r| key(r));
    v.into_iter()
        .enumerate()
        .map(|(i, r)| Ranked {
            rank: i as u32 + 1,
            row: r.clone(),
            headroom_bytes: if capacity == 0 {
                0
            } else if r.fits() {
                capacity as i64 - r.peak_reserved_bytes as i64
            } else {
                -(r.oom_requested_bytes as i64)
            },
        })
        .collect()
}

/// Bytes for a sentence: MiB below 10 GiB, GiB with two decimals above.
fn mib(n: u64) -> String {
    if n >= 10 << 30 {
        format!("{:.2} GiB", n as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.0} MiB", n as f64 / 1048576.0)
    }
}

/// The environment variable a PyTorch release reads for CUDA settings.
///
/// 2.9 introduced `PYTORCH_ALLOC_CONF`, but its CUDA-specific parser still
/// read only `PYTORCH_CUDA_ALLOC_CONF` (pytorch/pytorch#183387), so older
/// targets get the CUDA name; 2.10+ read either (the CUDA name first).
pub fn env_var_for(version: TorchVersion) -> &'static str {
    if version.at_least(2, 10) {
        "PYTORCH_ALLOC_CONF"
    } else {
        "PYTORCH_CUDA_ALLOC_CONF"
    }
}

/// Ranks the rows of one trace (a sweep at `capacity`, 0 = unlimited);
/// `peak_live` is the trace's peak of live bytes (the bound no setting
/// can beat).
pub fn recommend(
    rows: &[SweepRow],
    capacity: u64,
    peak_live: u64,
    version: TorchVersion,
) -> Recommendation {
    let native: Vec<SweepRow> = rows
        .iter()
        .filter(|r| r.policy == "native")
        .cloned()
        .collect();
    let others: Vec<SweepRow> = rows
        .iter()
        .filter(|r| r.policy != "native")
        .cloned()
        .collect();
    let ranked = rank(&native, capacity);
    let other_policies = rank(&others, capacity);
    let baseline = native.iter().find(|r| r.grid_line == "default");
    let mut export = Vec::new();
    let mut python = None;
    let why = match (ranked.first(), baseline) {
        (None, _) => "no PyTorch settings were replayed".to_string(),
        (Some(w), _) if !w.row.fits() => format!(
            "no setting fits {}: the one that gets furthest, {}, runs out of memory at event {} of {} ({} requested). The job holds {} of live tensors at its peak{}",
            mib(capacity),
            w.row.setting,
            w.row.oom_event,
            w.row.events,
            mib(w.row.oom_requested_bytes),
            mib(peak_live),
            if peak_live > capacity {
                ": more than the device has, whatever the allocator does — reduce the batch, sequence length or precision, or use a larger GPU".to_string()
            } else {
                format!(
                    ", so a better-packed allocator could fit in principle ({} of slack)",
                    mib(capacity - peak_live)
                )
            }
        ),
        (Some(w), Some(b)) => {
            let settings = w
                .row
                .grid_line
                .split_whitespace()
                .last()
                .unwrap_or("default")
                .to_string();
            if settings != "default" {
                let var = env_var_for(version);
                export.push(("bash".to_string(), format!("export {var}=\"{settings}\"")));
                export.push((
                    "PowerShell".to_string(),
                    format!("$env:{var}=\"{settings}\""),
                ));
                export.push(("cmd".to_string(), format!("set {var}={settings}")));
            }
            if let Some(f) = w
                .row
                .grid_line
                .split_whitespace()
                .find_map(|t| t.strip_prefix("fraction="))
            {
                python = Some(format!("torch.cuda.set_per_process_memory_fraction({f})"));
            }
            if w.row.grid_line == "default" {
                format!(
                    "PyTorch's defaults are already best: {} reserved at peak for {} of live tensors ({} wasted at the peak, utilization {:.1}%)",
                    mib(w.row.peak_reserved_bytes),
                    mib(w.row.peak_requested_bytes),
                    mib(w.row.waste_at_peak_bytes),
                    w.row.utilization * 100.0
                )
            } else {
                if !b.fits() {
                    format!(
                        "With the defaults the job runs out of memory at event {} with {} reserved, {} of it reserved but unallocated. {} fits: {} reserved at peak ({} headroom), {} wasted at the peak, utilization {:.1}%.",
                        b.oom_event,
                        mib(b.peak_reserved_bytes),
                        mib(b.waste_at_peak_bytes),
                        w.row.setting,
                        mib(w.row.peak_reserved_bytes),
                        mib(capacity.saturating_sub(w.row.peak_reserved_bytes)),
                        mib(w.row.waste_at_peak_bytes),
                        w.row.utilization * 100.0
                    )
                } else {
                    let saved = b.peak_reserved_bytes as i64 - w.row.peak_reserved_bytes as i64;
                    format!(
                        "{} reserves {} at peak against {} with the defaults ({} {}): reserved-but-unallocated memory at the peak drops from {} to {}, utilization rises from {:.1}% to {:.1}%.",
                        w.row.setting,
                        mib(w.row.peak_reserved_bytes),
                        mib(b.peak_reserved_bytes),
                        mib(saved.unsigned_abs()),
                        if saved >= 0 { "less" } else { "more" },
                        mib(b.waste_at_peak_bytes),
                        mib(w.row.waste_at_peak_bytes),
                        b.utilization * 100.0,
                        w.row.utilization * 100.0
                    )
                }
            }
        }
        (Some(w), None) => format!(
            "{} ranks first ({} reserved at peak)",
            w.row.setting,
            mib(w.row.peak_reserved_bytes)
        ),
    };
    Recommendation {
        ranked,
        other_policies,
        why,
        export,
        python,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: u64, line: &str, peak: u64, oom: i64, calls: u64) -> SweepRow {
        SweepRow {
            index: i,
            trace: "t".into(),
            setting: line.into(),
            policy: if line.starts_with("policy=") {
                "bfc".into()
            } else {
                "native".into()
            },
            grid_line: line.into(),
            capacity: 1000 << 20,
            events: 10,
            peak_requested_bytes: 500 << 20,
            peak_allocated_bytes: 500 << 20,
            peak_reserved_bytes: peak << 20,
            waste_at_peak_bytes: (peak - 500) << 20,
            utilization: 500.0 / peak as f64,
            num_device_alloc: calls,
            num_device_free: 0,
            num_sync_all_streams: 0,
            num_alloc_retries: 0,
            device_time_us: 0.0,
            oom_event: oom,
            oom_requested_bytes: if oom >= 0 { 64 << 20 } else { 0 },
            start: String::new(),
            oom_at_start: false,
        }
    }

    #[test]
    fn fitting_settings_rank_first_then_by_peak_then_calls() {
        let rows = vec![
            row(0, "default", 1100, 40, 10),
            row(1, "expandable_segments:True", 900, -1, 30),
            row(2, "max_split_size_mb:128", 900, -1, 20),
            row(3, "roundup_power2_divisions:4", 950, -1, 5),
            row(4, "policy=bfc", 600, -1, 1),
        ];
        let r = recommend(&rows, 1000 << 20, 500 << 20, TorchVersion::NEWEST);
        let order: Vec<&str> = r.ranked.iter().map(|x| x.row.grid_line.as_str()).collect();
        assert_eq!(
            order,
            [
                "max_split_size_mb:128",
                "expandable_segments:True",
                "roundup_power2_divisions:4",
                "default"
            ]
        );
        assert_eq!(r.ranked[0].headroom_bytes, 100 << 20);
        assert!(r.ranked[3].headroom_bytes < 0);
        assert_eq!(
            r.other_policies.len(),
            1,
            "other policies are shown, not recommended"
        );
        assert_eq!(
            r.export[0].1,
            "export PYTORCH_ALLOC_CONF=\"max_split_size_mb:128\""
        );
        assert_eq!(
            r.export[1].1,
            "$env:PYTORCH_ALLOC_CONF=\"max_split_size_mb:128\""
        );
        assert_eq!(
            r.export[2].1,
            "set PYTORCH_ALLOC_CONF=max_split_size_mb:128"
        );
        assert!(
            r.why
                .contains("With the defaults the job runs out of memory at event 40"),
            "{}",
            r.why
        );
        // older releases read the CUDA variable
        let r29 = recommend(&rows, 1000 << 20, 500 << 20, "2.9".parse().unwrap());
        assert!(
            r29.export[0]
                .1
                .starts_with("export PYTORCH_CUDA_ALLOC_CONF=")
        );
    }

    #[test]
    fn fractions_and_nothing_fits() {
        let rows = vec![
            row(0, "default", 1100, 40, 10),
            row(
                1,
                "fraction=0.9 garbage_collection_threshold:0.8",
                990,
                -1,
                9,
            ),
        ];
        let r = recommend(&rows, 1000 << 20, 500 << 20, TorchVersion::NEWEST);
        assert_eq!(
            r.python.as_deref(),
            Some("torch.cuda.set_per_process_memory_fraction(0.9)")
        );
        assert!(r.export[0].1.contains("garbage_collection_threshold:0.8"));
        let none = recommend(
            &[
                row(0, "default", 1100, 40, 10),
                row(1, "max_split_size_mb:128", 1050, 60, 10),
            ],
            1000 << 20,
            1100 << 20,
            TorchVersion::NEWEST,
        );
        // the setting that gets furthest ranks first
        assert_eq!(none.ranked[0].row.grid_line, "max_split_size_mb:128");
        assert!(
            none.why.contains("more than the device has"),
            "{}",
            none.why
        );
        assert!(none.why.starts_with("no setting fits"), "{}", none.why);
        assert!(none.export.is_empty());
    }
}
