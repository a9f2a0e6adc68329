//! A multi-rank job ([`vramlab_traces::Job`]) answered from its distinct
//! traces: each is replayed once, and the job's answer is its worst rank
//! (the most reserved; any rank's OOM is the job's), the imbalance across
//! ranks, and the smallest card that holds the worst rank once the memory
//! spent outside PyTorch's allocator is set aside.

use serde::Serialize;
use vramlab_traces::{Job, JobTrace, OutsideAllocator};

use crate::analysis::sweep::SweepRow;
use crate::gpus::smallest_gpu_for;

/// One distinct trace of a job and the ranks it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankGroup {
    /// `ranks 0-6 (rank 0's trace; 1-6 recorded identical)`.
    pub label: String,
    /// The trace file.
    pub trace: String,
    /// The rank whose trace it is (the lowest that names the file).
    pub rank: u32,
    /// Every rank it stands for.
    pub ranks: Vec<u32>,
    /// Ranks recorded identical.
    pub recorded: Vec<u32>,
    /// Ranks assumed alike (not recorded).
    pub assumed: Vec<u32>,
}

impl RankGroup {
    /// The group of one distinct trace.
    pub fn of(t: &JobTrace) -> RankGroup {
        RankGroup {
            label: t.label(),
            trace: t.path.display().to_string(),
            rank: t.rank,
            ranks: t.ranks.clone(),
            recorded: t.recorded.clone(),
            assumed: t.assumed.clone(),
        }
    }
}

/// The job as a command answers it: its ranks and, per setting, the
/// job-wide figures `S` (a [`JobSetting`], or a [`JobOomPoint`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobView<S> {
    /// Number of ranks.
    pub world_size: u32,
    /// How it was recorded.
    pub source: Option<String>,
    /// Bytes per rank outside the allocator, and what they are.
    pub outside_allocator: Option<OutsideAllocator>,
    /// Distinct traces and their ranks.
    pub ranks: Vec<RankGroup>,
    /// Per setting, the job's figures.
    pub settings: Vec<S>,
}

impl<S> JobView<S> {
    /// The view of `job` with `settings`.
    pub fn new(job: &Job, settings: Vec<S>) -> JobView<S> {
        JobView {
            world_size: job.world_size,
            source: job.source.clone(),
            outside_allocator: job.outside.clone(),
            ranks: job.traces().iter().map(RankGroup::of).collect(),
            settings,
        }
    }
}

/// One rank group's result under a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankPeak {
    /// Peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// It ran out of memory.
    pub oom: bool,
}

/// The job under one setting: the worst rank, the imbalance, the card.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSetting {
    /// Setting label.
    pub setting: String,
    /// The worst rank (an OOM first, then the most reserved; the lowest
    /// rank of its group).
    pub worst_rank: u32,
    /// Every rank with the worst rank's trace.
    pub worst_ranks: String,
    /// The worst rank's peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// The rank that reserves least, of those that did not run out of
    /// memory (`None`: every rank did).
    pub least_rank: Option<u32>,
    /// Its peak reserved bytes.
    pub least_peak_reserved_bytes: Option<u64>,
    /// Worst − least peak reserved (0 when every rank ran out).
    pub imbalance_bytes: u64,
    /// The imbalance as a share of the least, in percent.
    pub imbalance_percent: f64,
    /// Ranks that ran out of memory (every rank of each group).
    pub oom_ranks: Vec<u32>,
    /// Bytes per rank outside the allocator.
    pub outside_allocator_bytes: u64,
    /// What a rank needs of the card: the worst rank's peak reserved (or
    /// smallest capacity, when searched) + the outside bytes.
    pub needs_bytes: u64,
    /// The smallest card of `vramlab gpus` whose usable memory, less the
    /// outside bytes, holds the worst rank (`None`: a rank ran out of
    /// memory, or no card is large enough).
    pub fits_on: Option<String>,
}

/// The smallest card whose usable memory less `outside` holds `bytes`.
pub fn card_for(bytes: u64, outside: u64) -> Option<String> {
    smallest_gpu_for(bytes.saturating_add(outside)).map(|g| g.name.to_string())
}

/// The index of the worst of `peaks`: an OOM first, then the most
/// reserved, then the first.
fn worst_index(peaks: &[RankPeak]) -> usize {
    let mut best = 0;
    for (i, p) in peaks.iter().enumerate() {
        if let Some(b) = peaks.get(best) {
            if (p.oom, p.peak_reserved_bytes) > (b.oom, b.peak_reserved_bytes) {
                best = i;
            }
        }
    }
    best
}

/// The job's figures under `setting` from each group's result (`peaks`
/// in the order of `groups`).
pub fn job_setting(
    setting: &str,
    groups: &[RankGroup],
    peaks: &[RankPeak],
    outside: u64,
) -> JobSetting {
    let w = worst_index(peaks);
    // A rank that ran out stopped early: its peak is cut off, not its least.
    let least = peaks
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.oom)
        .min_by_key(|(i, p)| (p.peak_reserved_bytes, *i))
        .map(|(i, _)| i);
    let peak = |i: usize| peaks.get(i).map_or(0, |p| p.peak_reserved_bytes);
    let rank = |i: usize| groups.get(i).map_or(0, |g| g.rank);
    let max = peak(w);
    let min = least.map(peak);
    let imbalance = match min {
        Some(min) => peaks
            .iter()
            .map(|p| p.peak_reserved_bytes)
            .max()
            .unwrap_or(0)
            .saturating_sub(min),
        None => 0,
    };
    let mut oom_ranks: Vec<u32> = groups
        .iter()
        .zip(peaks)
        .filter(|(_, p)| p.oom)
        .flat_map(|(g, _)| g.ranks.iter().copied())
        .collect();
    oom_ranks.sort_unstable();
    JobSetting {
        setting: setting.to_string(),
        worst_rank: rank(w),
        worst_ranks: groups.get(w).map_or(String::new(), |g| g.label.clone()),
        peak_reserved_bytes: max,
        least_rank: least.map(rank),
        least_peak_reserved_bytes: min,
        imbalance_bytes: imbalance,
        imbalance_percent: match min {
            Some(min) if min > 0 => (imbalance as f64 / min as f64 * 1000.0).round() / 10.0,
            _ => 0.0,
        },
        fits_on: if oom_ranks.is_empty() {
            card_for(max, outside)
        } else {
            None
        },
        oom_ranks,
        outside_allocator_bytes: outside,
        needs_bytes: max.saturating_add(outside),
    }
}

/// The name of the job's rows in a sweep.
pub const JOB_ROW_NAME: &str = "job (worst rank)";

/// The job's row per grid line from each group's rows (`rows[g]` are
/// group `g`'s rows in grid order): the worst rank's row (an OOM first —
/// the earliest —, then the most reserved), named [`JOB_ROW_NAME`] and
/// indexed `first_index` + its grid line (give the number of the groups'
/// rows, so that the job's rows follow them without sharing an index).
pub fn worst_rows(rows: &[Vec<SweepRow>], first_index: u64) -> Vec<SweepRow> {
    let n = rows.iter().map(Vec::len).min().unwrap_or(0);
    let mut out = (0..n)
        .filter_map(|i| {
            let line: Vec<&SweepRow> = rows.iter().filter_map(|r| r.get(i)).collect();
            let key = |r: &SweepRow| {
                let oom_key = if r.fits() {
                    0
                } else {
                    u64::MAX - r.oom_event as u64
                };
                (!r.fits(), oom_key, r.peak_reserved_bytes)
            };
            // Ties go to the first group (the lowest rank).
            let mut worst = *line.first()?;
            for r in &line {
                if key(r) > key(worst) {
                    worst = r;
                }
            }
            let mut row = worst.clone();
            row.index = first_index + i as u64;
            row.trace = JOB_ROW_NAME.to_string();
            row.placement_free = line.iter().all(|r| r.placement_free);
            Some(row)
        })
        .collect::<Vec<SweepRow>>();
    // Which job rows are the same is a fact of the job rows, not of the
    // ranks they were taken from.
    crate::analysis::sweep::mark_same(&mut out);
    out
}

/// The job's OOM point under one setting: the largest of its traces'.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobOomPoint {
    /// Setting label.
    pub setting: String,
    /// The rank whose trace needs the most.
    pub worst_rank: u32,
    /// Every rank with that trace.
    pub worst_ranks: String,
    /// Its smallest capacity (the job's).
    pub min_capacity: u64,
    /// Bytes per rank outside the allocator.
    pub outside_allocator_bytes: u64,
    /// `min_capacity` + the outside bytes.
    pub needs_bytes: u64,
    /// The smallest card that holds it (`None`: none of `vramlab gpus`).
    pub card: Option<String>,
}

impl JobOomPoint {
    /// The job's point from each group's smallest capacity.
    pub fn new(setting: &str, groups: &[RankGroup], caps: &[u64], outside: u64) -> JobOomPoint {
        let w = caps
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .map_or(0, |(i, _)| i);
        let cap = caps.get(w).copied().unwrap_or(0);
        JobOomPoint {
            setting: setting.to_string(),
            worst_rank: groups.get(w).map_or(0, |g| g.rank),
            worst_ranks: groups.get(w).map_or(String::new(), |g| g.label.clone()),
            min_capacity: cap,
            outside_allocator_bytes: outside,
            needs_bytes: cap.saturating_add(outside),
            card: card_for(cap, outside),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn group(rank: u32, ranks: Vec<u32>) -> RankGroup {
        RankGroup {
            label: format!("ranks {ranks:?}"),
            trace: format!("r{rank}"),
            rank,
            ranks,
            recorded: vec![],
            assumed: vec![],
        }
    }

    fn row(peak: u64, oom_event: i64) -> SweepRow {
        serde_json::from_value(serde_json::json!({
            "index": 0, "trace": "t", "setting": "s", "policy": "native",
            "grid_line": "default", "capacity": 0, "events": 10,
            "peak_requested_bytes": 1, "peak_allocated_bytes": 1,
            "peak_reserved_bytes": peak, "waste_at_peak_bytes": 0,
            "utilization": 1.0, "num_device_alloc": 0, "num_device_free": 0,
            "num_sync_all_streams": 0, "num_alloc_retries": 0,
            "device_time_us": 0.0, "oom_event": oom_event,
            "oom_requested_bytes": 0, "start": "", "oom_at_start": false
        }))
        .unwrap()
    }

    #[test]
    fn the_jobs_row_is_the_earliest_oom_else_the_most_reserved() {
        let rows = vec![
            vec![row(5, -1), row(9, 7), row(4, -1)],
            vec![row(6, -1), row(8, 3), row(4, -1)],
        ];
        let w = worst_rows(&rows, 6);
        let got: Vec<(u64, i64, u64)> = w
            .iter()
            .map(|r| (r.peak_reserved_bytes, r.oom_event, r.index))
            .collect();
        assert_eq!(got, vec![(6, -1, 6), (8, 3, 7), (4, -1, 8)]);
        assert!(w.iter().all(|r| r.trace == JOB_ROW_NAME));
    }

    #[test]
    fn the_worst_rank_the_imbalance_and_the_card() {
        let g = [group(0, vec![0, 1]), group(2, vec![2])];
        let p = |b: u64, oom| RankPeak {
            peak_reserved_bytes: b,
            oom,
        };
        let s = job_setting(
            "default",
            &g,
            &[p(10 << 30, false), p(15 << 30, false)],
            1 << 30,
        );
        assert_eq!((s.worst_rank, s.least_rank), (2, Some(0)));
        assert_eq!(s.imbalance_bytes, 5 << 30);
        assert_eq!(s.imbalance_percent, 50.0);
        assert_eq!(s.needs_bytes, 16 << 30);
        assert_eq!(s.fits_on.as_deref(), Some("a10g"));
        let s = job_setting("default", &g, &[p(10 << 30, true), p(15 << 30, false)], 0);
        assert_eq!(
            (s.worst_rank, s.oom_ranks.clone(), s.fits_on),
            (0, vec![0, 1], None)
        );
        // The least is of the ranks that ran to the end: rank 0's 10 GiB
        // were cut off by its OOM.
        assert_eq!(
            (s.least_rank, s.least_peak_reserved_bytes),
            (Some(2), Some(15 << 30))
        );
        assert_eq!(s.imbalance_bytes, 0);
        let s = job_setting("default", &g, &[p(10 << 30, true), p(15 << 30, true)], 0);
        assert_eq!((s.least_rank, s.least_peak_reserved_bytes), (None, None));
        assert_eq!((s.imbalance_bytes, s.imbalance_percent), (0, 0.0));
        let o = JobOomPoint::new("default", &g, &[5 << 30, 5 << 30], 0);
        assert_eq!((o.worst_rank, o.card.as_deref()), (0, Some("t4")));
    }
}
