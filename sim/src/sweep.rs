//! Sweeps: every (trace, setting) pair replayed in parallel, with results
//! as rows that pandas reads (CSV or JSON), shards for job arrays, and a
//! merge of shard outputs.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use vramlab_traces::Trace;

use crate::grid::GridEntry;
use crate::replay::{ReplayError, ReplayOptions};

/// One (trace, setting) result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// Position of the pair in the full (unsharded) sweep.
    pub index: u64,
    /// Trace name (file name).
    pub trace: String,
    /// Setting label.
    pub setting: String,
    /// Policy name.
    pub policy: String,
    /// Settings string (a grid line).
    pub grid_line: String,
    /// Device capacity, bytes (0 = unlimited).
    pub capacity: u64,
    /// Events in the trace.
    pub events: u64,
    /// Peak live (requested) bytes: the lower bound.
    pub peak_requested_bytes: u64,
    /// Peak allocated bytes.
    pub peak_allocated_bytes: u64,
    /// Peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// Reserved − allocated when reserved peaked.
    pub waste_at_peak_bytes: u64,
    /// Peak active / peak reserved.
    pub utilization: f64,
    /// Device allocations (cudaMalloc + map).
    pub num_device_alloc: u64,
    /// Device frees (cudaFree + unmap).
    pub num_device_free: u64,
    /// Cache flushes that synchronised all streams.
    pub num_sync_all_streams: u64,
    /// Retries after a flush.
    pub num_alloc_retries: u64,
    /// Simulated driver time, microseconds.
    pub device_time_us: f64,
    /// Event of the first OOM (-1 = none).
    pub oom_event: i64,
    /// Bytes requested at the first OOM (0 = none).
    pub oom_requested_bytes: u64,
}

/// The CSV header of [`SweepRow`]s, in field order.
pub const CSV_HEADER: &str = "index,trace,setting,policy,grid_line,capacity,events,peak_requested_bytes,peak_allocated_bytes,peak_reserved_bytes,waste_at_peak_bytes,utilization,num_device_alloc,num_device_free,num_sync_all_streams,num_alloc_retries,device_time_us,oom_event,oom_requested_bytes";

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl SweepRow {
    /// The row as CSV (matching [`CSV_HEADER`]).
    pub fn to_csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{:.6},{},{},{},{},{:.1},{},{}",
            self.index,
            quote(&self.trace),
            quote(&self.setting),
            self.policy,
            quote(&self.grid_line),
            self.capacity,
            self.events,
            self.peak_requested_bytes,
            self.peak_allocated_bytes,
            self.peak_reserved_bytes,
            self.waste_at_peak_bytes,
            self.utilization,
            self.num_device_alloc,
            self.num_device_free,
            self.num_sync_all_streams,
            self.num_alloc_retries,
            self.device_time_us,
            self.oom_event,
            self.oom_requested_bytes
        )
    }

    /// `true` when the replay ran without OOM.
    pub fn fits(&self) -> bool {
        self.oom_event < 0
    }
}

/// A shard of a sweep: `k` of `n` (1-based), as `--shard K/N` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, 1-based.
    pub k: u32,
    /// Number of shards.
    pub n: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let err = || format!("invalid shard '{s}': expected K/N with 1 <= K <= N, e.g. 3/8");
        let (k, n) = s.split_once('/').ok_or_else(err)?;
        let k: u32 = k.trim().parse().map_err(|_| err())?;
        let n: u32 = n.trim().parse().map_err(|_| err())?;
        if k == 0 || n == 0 || k > n {
            return Err(err());
        }
        Ok(Shard { k, n })
    }
}

impl Shard {
    /// `true` if pair `index` belongs to this shard (round-robin, so shards
    /// get similar mixes of traces and settings).
    pub fn contains(&self, index: u64) -> bool {
        index % self.n as u64 == (self.k - 1) as u64
    }
}

/// Replays every (trace, setting) pair of this shard in parallel; rows come
/// back in pair order. `progress` is called once per finished pair.
pub fn run_sweep(
    traces: &[(String, Trace)],
    grid: &[GridEntry],
    capacity: Option<u64>,
    shard: Option<Shard>,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<SweepRow>, (String, String, ReplayError)> {
    let pairs: Vec<(u64, usize, usize)> = (0..traces.len())
        .flat_map(|t| (0..grid.len()).map(move |g| (t, g)))
        .enumerate()
        .map(|(i, (t, g))| (i as u64, t, g))
        .filter(|(i, _, _)| shard.is_none_or(|s| s.contains(*i)))
        .collect();
    let opts = ReplayOptions {
        check_invariants: false,
        timeline_points: 1,
        ..Default::default()
    };
    pairs
        .par_iter()
        .map(|&(index, t, g)| {
            let (name, trace) = &traces[t];
            let entry = &grid[g];
            let scenario = entry.scenario(capacity);
            let run = scenario
                .run(trace, &opts)
                .map_err(|e| (name.clone(), entry.label(), e))?;
            progress();
            let s = &run.summary;
            Ok(SweepRow {
                index,
                trace: name.clone(),
                setting: entry.label(),
                policy: entry.policy.name().to_string(),
                grid_line: entry.to_line(),
                capacity: capacity.unwrap_or(0),
                events: s.events,
                peak_requested_bytes: s.peak_requested_bytes,
                peak_allocated_bytes: s.peak_allocated_bytes,
                peak_reserved_bytes: s.peak_reserved_bytes,
                waste_at_peak_bytes: s.waste_at_peak_bytes,
                utilization: s.utilization,
                num_device_alloc: s.num_device_alloc,
                num_device_free: s.num_device_free,
                num_sync_all_streams: s.num_sync_all_streams,
                num_alloc_retries: s.num_alloc_retries,
                device_time_us: s.device_time_us,
                oom_event: run.oom.as_ref().map_or(-1, |o| o.event_index as i64),
                oom_requested_bytes: run.oom.as_ref().map_or(0, |o| o.requested_bytes),
            })
        })
        .collect()
}

/// Reads rows from a CSV written with [`CSV_HEADER`] (a shard's output).
pub fn read_rows_csv(text: &str, path: &str) -> Result<Vec<SweepRow>, String> {
    let mut lines = text.lines();
    match lines.next() {
        Some(h) if h.trim() == CSV_HEADER => {}
        _ => {
            return Err(format!(
                "{path}: not a vramlab sweep CSV (the header differs)"
            ));
        }
    }
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let f = split_csv(line);
        let err = |what: &str| format!("{path}:{}: {what}", n + 2);
        if f.len() != 19 {
            return Err(err(&format!("expected 19 fields, found {}", f.len())));
        }
        let u = |i: usize| {
            f[i].parse::<u64>()
                .map_err(|_| err(&format!("field {} is not a number", i + 1)))
        };
        let fl = |i: usize| {
            f[i].parse::<f64>()
                .map_err(|_| err(&format!("field {} is not a number", i + 1)))
        };
        rows.push(SweepRow {
            index: u(0)?,
            trace: f[1].clone(),
            setting: f[2].clone(),
            policy: f[3].clone(),
            grid_line: f[4].clone(),
            capacity: u(5)?,
            events: u(6)?,
            peak_requested_bytes: u(7)?,
            peak_allocated_bytes: u(8)?,
            peak_reserved_bytes: u(9)?,
            waste_at_peak_bytes: u(10)?,
            utilization: fl(11)?,
            num_device_alloc: u(12)?,
            num_device_free: u(13)?,
            num_sync_all_streams: u(14)?,
            num_alloc_retries: u(15)?,
            device_time_us: fl(16)?,
            oom_event: f[17].parse().map_err(|_| err("field 18 is not a number"))?,
            oom_requested_bytes: u(18)?,
        });
    }
    Ok(rows)
}

fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Merges shard outputs: sorted by pair index; a pair present twice with
/// different results is an error, twice with the same result is kept once.
pub fn merge_rows(mut rows: Vec<SweepRow>) -> Result<Vec<SweepRow>, String> {
    rows.sort_by_key(|r| r.index);
    let mut out: Vec<SweepRow> = Vec::with_capacity(rows.len());
    for r in rows {
        match out.last() {
            Some(last) if last.index == r.index => {
                if *last != r {
                    return Err(format!(
                        "pair {} ({} / {}) appears in two shards with different results",
                        r.index, r.trace, r.setting
                    ));
                }
            }
            _ => out.push(r),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_pairs() {
        let shards: Vec<Shard> = (1..=3).map(|k| format!("{k}/3").parse().unwrap()).collect();
        for i in 0..30u64 {
            assert_eq!(shards.iter().filter(|s| s.contains(i)).count(), 1);
        }
        assert!("0/3".parse::<Shard>().is_err());
        assert!("4/3".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
    }

    #[test]
    fn csv_round_trip_with_quotes() {
        let r = SweepRow {
            index: 7,
            trace: "a,b.csv".into(),
            setting: "roundup_power2_divisions:[256:1,>:8]".into(),
            policy: "native".into(),
            grid_line: "x \"y\"".into(),
            capacity: 0,
            events: 10,
            peak_requested_bytes: 1,
            peak_allocated_bytes: 2,
            peak_reserved_bytes: 3,
            waste_at_peak_bytes: 1,
            utilization: 0.5,
            num_device_alloc: 1,
            num_device_free: 0,
            num_sync_all_streams: 0,
            num_alloc_retries: 0,
            device_time_us: 25.0,
            oom_event: -1,
            oom_requested_bytes: 0,
        };
        let text = format!("{CSV_HEADER}\n{}\n", r.to_csv());
        assert_eq!(read_rows_csv(&text, "x.csv").unwrap(), vec![r.clone()]);
        let merged = merge_rows(vec![r.clone(), r.clone()]).unwrap();
        assert_eq!(merged.len(), 1);
        let mut other = r.clone();
        other.peak_reserved_bytes = 9;
        assert!(merge_rows(vec![r, other]).is_err());
    }
}
