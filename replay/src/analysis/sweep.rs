//! Sweeps: every (trace, setting) pair replayed in parallel, with results
//! as rows that pandas reads (CSV or JSON), shards for job arrays, and a
//! merge of shard outputs.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use vramlab_allocator::Placement;
use vramlab_traces::Trace;

use crate::analysis::grid::GridEntry;
use crate::engine::run::Run;
use crate::engine::scenario::Scenario;
use crate::engine::start::{Start, start_for};
use crate::engine::{ReplayError, ReplayOptions};

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
    /// How a trace that starts mid-run began: `recorded`, `fresh`, or
    /// empty for a trace that starts from an empty allocator.
    pub start: String,
    /// The first OOM came before the first event: the state at the start
    /// of the recording did not fit.
    pub oom_at_start: bool,
    /// The setting of an earlier row of the same trace, policy kind and
    /// capacity whose result is the same as this one's in every figure
    /// ([`same_result`]); empty when none is. Tables show such rows once.
    #[serde(default)]
    pub same_as: String,
    /// No decision of the replay depended on how the device's addresses
    /// compare ([`Run::placement_free`]): the other placement predicts the
    /// same. Not written (a row read back says `false`, which is safe).
    #[serde(skip)]
    pub placement_free: bool,
}

/// The CSV header of [`SweepRow`]s, in field order.
pub const SWEEP_CSV_HEADER: &str = "index,trace,setting,policy,grid_line,capacity,events,peak_requested_bytes,peak_allocated_bytes,peak_reserved_bytes,waste_at_peak_bytes,utilization,num_device_alloc,num_device_free,num_sync_all_streams,num_alloc_retries,device_time_us,oom_event,oom_requested_bytes,start,oom_at_start,same_as";

/// The header before `same_as` was a column: such files still merge.
const SWEEP_CSV_HEADER_V1: &str = "index,trace,setting,policy,grid_line,capacity,events,peak_requested_bytes,peak_allocated_bytes,peak_reserved_bytes,waste_at_peak_bytes,utilization,num_device_alloc,num_device_free,num_sync_all_streams,num_alloc_retries,device_time_us,oom_event,oom_requested_bytes,start,oom_at_start";

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl SweepRow {
    /// The row as CSV (matching [`SWEEP_CSV_HEADER`]).
    pub fn to_csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{:.6},{},{},{},{},{:.1},{},{},{},{},{}",
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
            self.oom_requested_bytes,
            self.start,
            self.oom_at_start,
            quote(&self.same_as)
        )
    }

    /// `true` when the replay ran without OOM.
    pub fn fits(&self) -> bool {
        self.oom_event < 0
    }

    /// `true` for a PyTorch setting (the native policy), which a user can
    /// export; `false` for another allocator design, shown for comparison.
    pub fn is_pytorch_setting(&self) -> bool {
        self.policy == "native"
    }
}

/// `true` when two rows are the same result: one trace, capacity and kind
/// (PyTorch setting or design), and every figure of the replay equal —
/// peaks, waste, utilization, device calls and their simulated time,
/// flushes, retries and the OOM. Utilization and time count as the CSV
/// writes them (6 and 1 decimals), so that rows read back from a file
/// group as the sweep that wrote them did.
pub fn same_result(a: &SweepRow, b: &SweepRow) -> bool {
    a.result_key() == b.result_key()
}

/// What [`same_result`] compares.
type ResultKey<'a> = (
    (&'a str, u64, bool, u64, &'a str),
    (u64, u64, u64, u64, String),
    (u64, u64, u64, u64, String),
    (i64, u64, bool),
);

impl SweepRow {
    fn result_key(&self) -> ResultKey<'_> {
        (
            (
                self.trace.as_str(),
                self.capacity,
                self.is_pytorch_setting(),
                self.events,
                self.start.as_str(),
            ),
            (
                self.peak_requested_bytes,
                self.peak_allocated_bytes,
                self.peak_reserved_bytes,
                self.waste_at_peak_bytes,
                format!("{:.6}", self.utilization),
            ),
            (
                self.num_device_alloc,
                self.num_device_free,
                self.num_sync_all_streams,
                self.num_alloc_retries,
                format!("{:.1}", self.device_time_us),
            ),
            (self.oom_event, self.oom_requested_bytes, self.oom_at_start),
        )
    }
}

/// Sets each row's [`SweepRow::same_as`]: the setting of the first row (in
/// `rows`' order) with the same result, or empty.
pub fn mark_same(rows: &mut [SweepRow]) {
    let mut first: std::collections::HashMap<ResultKey<'_>, &str> =
        std::collections::HashMap::with_capacity(rows.len());
    let marks: Vec<String> = rows
        .iter()
        .map(|r| match first.entry(r.result_key()) {
            std::collections::hash_map::Entry::Occupied(e) => (*e.get()).to_string(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(r.setting.as_str());
                String::new()
            }
        })
        .collect();
    for (r, m) in rows.iter_mut().zip(marks) {
        r.same_as = m;
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
    pub(crate) fn contains(&self, index: u64) -> bool {
        index % self.n as u64 == (self.k - 1) as u64
    }
}

/// Replays every (trace, setting) pair of this shard in parallel; rows come
/// back in pair order. `progress` is called once per finished pair. A trace
/// that starts mid-run begins as `start` says, or as
/// [`crate::engine::start::start_for`] chooses for the whole grid (so every setting
/// of a trace starts alike). The simulated driver places segments as
/// `placement` says.
pub fn run_sweep(
    traces: &[(String, Trace)],
    grid: &[GridEntry],
    capacity: Option<u64>,
    placement: Placement,
    shard: Option<Shard>,
    start: Option<Start>,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<SweepRow>, (String, String, ReplayError)> {
    let scenarios: Vec<Scenario> = grid.iter().map(|g| g.scenario(capacity)).collect();
    let starts: Vec<Option<Start>> = traces
        .iter()
        .map(|(_, t)| start_for(t, &scenarios, start))
        .collect();
    let pairs: Vec<(u64, usize, &GridEntry)> = (0..traces.len())
        .flat_map(|t| grid.iter().map(move |g| (t, g)))
        .enumerate()
        .map(|(i, (t, g))| (i as u64, t, g))
        .filter(|(i, _, _)| shard.is_none_or(|s| s.contains(*i)))
        .collect();
    pairs
        .par_iter()
        .map(|&(index, t, entry): &(u64, usize, &GridEntry)| {
            let (Some((name, trace)), Some(start)) = (traces.get(t), starts.get(t)) else {
                return Err((
                    String::new(),
                    entry.label(),
                    ReplayError::Malformed("no such trace".into()),
                ));
            };
            let opts = ReplayOptions::figures_only(start.unwrap_or_default());
            let run = entry
                .scenario(capacity)
                .with_placement(placement)
                .run(trace, &opts)
                .map_err(|e| (name.clone(), entry.label(), e))?;
            progress();
            Ok(row_of(index, name, entry, capacity, &run))
        })
        .collect::<Vec<_>>()
        .into_iter()
        // The first failure in pair order, whichever thread hit it: the
        // same error every time.
        .collect::<Result<Vec<SweepRow>, _>>()
        .map(|mut rows| {
            mark_same(&mut rows);
            rows
        })
}

pub(crate) fn row_of(
    index: u64,
    name: &str,
    entry: &GridEntry,
    capacity: Option<u64>,
    run: &Run,
) -> SweepRow {
    let s = &run.summary;
    SweepRow {
        index,
        trace: name.to_string(),
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
        start: run.start.map_or(String::new(), |s| s.name().to_string()),
        oom_at_start: run.oom.as_ref().is_some_and(|o| o.at_start),
        same_as: String::new(),
        placement_free: run.placement_free,
    }
}

/// Reads rows from a CSV written with [`SWEEP_CSV_HEADER`] (a shard's output).
pub fn read_rows_csv(text: &str, path: &str) -> Result<Vec<SweepRow>, String> {
    let mut lines = text.lines();
    // A file of the first header has no same_as: it is worked out anew.
    let first_header = match lines.next().map(str::trim) {
        Some(SWEEP_CSV_HEADER) => false,
        Some(SWEEP_CSV_HEADER_V1) => true,
        _ => {
            return Err(format!(
                "{path}: not a vramlab sweep CSV (the header differs)"
            ));
        }
    };
    let expected = if first_header { 21 } else { 22 };
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_no = n + 2;
        let mut fields = split_csv(line);
        if fields.len() != expected {
            return Err(format!(
                "{path}:{line_no}: expected {expected} fields, found {}",
                fields.len()
            ));
        }
        if first_header {
            fields.push(String::new());
        }
        let fields: [String; 22] = fields.try_into().map_err(|f: Vec<String>| {
            format!("{path}:{line_no}: expected 22 fields, found {}", f.len())
        })?;
        let [
            index,
            trace,
            setting,
            policy,
            grid_line,
            capacity,
            events,
            peak_requested_bytes,
            peak_allocated_bytes,
            peak_reserved_bytes,
            waste_at_peak_bytes,
            utilization,
            num_device_alloc,
            num_device_free,
            num_sync_all_streams,
            num_alloc_retries,
            device_time_us,
            oom_event,
            oom_requested_bytes,
            start,
            oom_at_start,
            same_as,
        ] = fields;
        rows.push(SweepRow {
            index: parse_field(&index, 1, path, line_no)?,
            trace,
            setting,
            policy,
            grid_line,
            capacity: parse_field(&capacity, 6, path, line_no)?,
            events: parse_field(&events, 7, path, line_no)?,
            peak_requested_bytes: parse_field(&peak_requested_bytes, 8, path, line_no)?,
            peak_allocated_bytes: parse_field(&peak_allocated_bytes, 9, path, line_no)?,
            peak_reserved_bytes: parse_field(&peak_reserved_bytes, 10, path, line_no)?,
            waste_at_peak_bytes: parse_field(&waste_at_peak_bytes, 11, path, line_no)?,
            utilization: parse_field(&utilization, 12, path, line_no)?,
            num_device_alloc: parse_field(&num_device_alloc, 13, path, line_no)?,
            num_device_free: parse_field(&num_device_free, 14, path, line_no)?,
            num_sync_all_streams: parse_field(&num_sync_all_streams, 15, path, line_no)?,
            num_alloc_retries: parse_field(&num_alloc_retries, 16, path, line_no)?,
            device_time_us: parse_field(&device_time_us, 17, path, line_no)?,
            oom_event: parse_field(&oom_event, 18, path, line_no)?,
            oom_requested_bytes: parse_field(&oom_requested_bytes, 19, path, line_no)?,
            start,
            oom_at_start: parse_bool(&oom_at_start, 21, path, line_no)?,
            same_as,
            placement_free: false,
        });
    }
    Ok(rows)
}

/// Field `field` (1-based) of line `line_no` of `path`, as a number.
fn parse_field<T: std::str::FromStr>(
    s: &str,
    field: usize,
    path: &str,
    line_no: usize,
) -> Result<T, String> {
    s.parse()
        .map_err(|_| format!("{path}:{line_no}: field {field} is not a number"))
}

fn parse_bool(s: &str, field: usize, path: &str, line_no: usize) -> Result<bool, String> {
    match s {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!(
            "{path}:{line_no}: field {field} is not true or false"
        )),
    }
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
    // Each shard saw only its own rows: which are the same is decided
    // again over the whole sweep.
    for r in &mut rows {
        r.same_as.clear();
    }
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
    mark_same(&mut out);
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
            start: "fresh".into(),
            oom_at_start: false,
            same_as: "default".into(),
            placement_free: false,
        };
        let text = format!("{SWEEP_CSV_HEADER}\n{}\n", r.to_csv());
        assert_eq!(read_rows_csv(&text, "x.csv").unwrap(), vec![r.clone()]);
        let merged = merge_rows(vec![r.clone(), r.clone()]).unwrap();
        assert_eq!(merged.len(), 1);
        let mut other = r.clone();
        other.peak_reserved_bytes = 9;
        assert!(merge_rows(vec![r, other]).is_err());
    }

    #[test]
    fn bad_csv_rows_name_the_file_line_and_field() {
        let row = "0,t.csv,default,native,,0,10,1,2,3,1,0.5,1,0,0,0,25.0,-1,0,,false,";
        let read = |body: &str| read_rows_csv(&format!("{SWEEP_CSV_HEADER}\n{body}\n"), "s.csv");
        assert_eq!(read(row).unwrap().len(), 1);
        // A file of the first header (no same_as) still reads; each header
        // its own field count.
        let old_row = row.trim_end_matches(',');
        let v1 = format!("{SWEEP_CSV_HEADER_V1}\n{old_row}\n");
        assert_eq!(read_rows_csv(&v1, "s.csv").unwrap().len(), 1);
        assert_eq!(
            read(old_row).unwrap_err(),
            "s.csv:2: expected 22 fields, found 21"
        );
        assert_eq!(
            read("1,2,3").unwrap_err(),
            "s.csv:2: expected 22 fields, found 3"
        );
        assert_eq!(
            read(&format!("{row},extra")).unwrap_err(),
            "s.csv:2: expected 22 fields, found 23"
        );
        assert_eq!(
            read(&format!("{row}\n\n{}", row.replace("0.5", "half"))).unwrap_err(),
            "s.csv:4: field 12 is not a number"
        );
        assert_eq!(
            read(&row.replace(",-1,", ",x,")).unwrap_err(),
            "s.csv:2: field 18 is not a number"
        );
        assert_eq!(
            read(&row.replace(",false,", ",maybe,")).unwrap_err(),
            "s.csv:2: field 21 is not true or false"
        );
    }
}
