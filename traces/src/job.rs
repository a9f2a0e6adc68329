//! A multi-rank job: the manifest (`job.json`) of a sharded run recorded
//! one trace per rank (FSDP, DDP, tensor parallel).
//!
//! ```json
//! {"vramlab_job": 1, "world_size": 4, "source": "how it was recorded",
//!  "ranks": [{"rank": 0, "trace": "rank0.csv.gz"},
//!            {"rank": 1, "same_as": 0, "basis": "recorded"},
//!            {"rank": 2, "same_as": 0, "basis": "assumed"},
//!            {"rank": 3, "trace": "rank3.csv.gz"}],
//!  "outside_allocator": {"bytes": 905969664, "what": "NCCL buffers"}}
//! ```
//!
//! Every rank `0..world_size` appears once, with its own `trace` (a path
//! relative to the manifest's folder; `format`, optional, names its format
//! when the extension does not say: csv, csv.gz, vlt, vlt.zst, snapshot,
//! rmm) or `same_as` a rank that has one (`basis`: `recorded`, the events
//! are identical, or `assumed`, the rank was not recorded). `world_size` is
//! at most [`MAX_WORLD_SIZE`]. Unknown top-level keys are ignored. [`Job::read`]
//! checks all of it and that every trace file exists; [`JobTrace`] is one
//! distinct trace and the ranks it stands for.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::io::Format;

/// The manifest's file name in a job folder.
pub const JOB_FILE: &str = "job.json";

/// The manifest version this release reads.
pub const JOB_VERSION: u64 = 1;

/// The most ranks a manifest may have.
pub const MAX_WORLD_SIZE: u64 = 1 << 20;

/// How a rank without its own trace is known to be like another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Recorded: its events are identical to the other rank's.
    Recorded,
    /// Not recorded: taken to be like the other rank.
    Assumed,
}

/// Where one rank's events come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RankSource {
    /// Its own trace file (resolved against the manifest's folder).
    Trace {
        /// The file.
        path: PathBuf,
        /// Its format, when the manifest names it.
        format: Option<Format>,
    },
    /// Another rank's trace.
    SameAs {
        /// The rank whose trace it shares.
        rank: u32,
        /// Why.
        basis: Basis,
    },
}

/// Memory each rank spends outside PyTorch's caching allocator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutsideAllocator {
    /// Bytes per rank.
    pub bytes: u64,
    /// What they are, as the manifest says.
    pub what: String,
}

/// A job manifest, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The manifest file.
    pub path: PathBuf,
    /// Number of ranks.
    pub world_size: u32,
    /// How the job was recorded (free text).
    pub source: Option<String>,
    /// Each rank's source, indexed by rank.
    pub ranks: Vec<RankSource>,
    /// Memory outside the allocator, per rank.
    pub outside: Option<OutsideAllocator>,
}

/// One distinct trace of a job and the ranks it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobTrace {
    /// The trace file.
    pub path: PathBuf,
    /// Its format, when the manifest names it (else its extension says).
    #[serde(skip)]
    pub format: Option<Format>,
    /// The lowest rank that names the file.
    pub rank: u32,
    /// Every rank it stands for, ascending.
    pub ranks: Vec<u32>,
    /// Ranks recorded identical (`same_as`, `recorded`; or naming the same file).
    pub recorded: Vec<u32>,
    /// Ranks assumed like it (`same_as`, `assumed`).
    pub assumed: Vec<u32>,
}

/// A manifest that cannot be used: the file and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct JobError {
    /// The manifest.
    pub path: PathBuf,
    /// What is wrong (naming the rank or key).
    pub message: String,
}

/// `rank 3`, `ranks 0-2, 5`: ranks as ranges, with the word.
pub fn ranks_phrase(ranks: &[u32]) -> String {
    let word = if ranks.len() == 1 { "rank" } else { "ranks" };
    format!("{word} {}", rank_ranges(ranks))
}

/// `1-3, 5`: ranks as ranges.
pub fn rank_ranges(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(&first) = ranks.get(i) {
        let mut last = first;
        while ranks.get(i + 1) == Some(&(last + 1)) {
            last += 1;
            i += 1;
        }
        parts.push(if last == first {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
        i += 1;
    }
    parts.join(", ")
}

impl JobTrace {
    /// `ranks 0-6 (rank 0's trace; 1-6 recorded identical)`, `rank 7`.
    pub fn label(&self) -> String {
        let mut why = Vec::new();
        if !self.recorded.is_empty() {
            why.push(format!(
                "{} recorded identical",
                rank_ranges(&self.recorded)
            ));
        }
        if !self.assumed.is_empty() {
            why.push(format!("{} assumed alike", rank_ranges(&self.assumed)));
        }
        let mut s = ranks_phrase(&self.ranks);
        if !why.is_empty() {
            s.push_str(&format!(
                " (rank {}'s trace; {})",
                self.rank,
                why.join("; ")
            ));
        }
        s
    }
}

impl Job {
    /// The manifest `path` names: `path/job.json` for a folder that has
    /// one, `path` itself for a file named `job.json` or `*.job.json`.
    pub fn file_of(path: &Path) -> Option<PathBuf> {
        if path.is_dir() {
            let f = path.join(JOB_FILE);
            return f.is_file().then_some(f);
        }
        let name = path.file_name()?.to_str()?;
        (name == JOB_FILE || name.ends_with(".job.json")).then(|| path.to_path_buf())
    }

    /// Reads and checks the manifest at `path` (every trace file must
    /// exist, and its format be known).
    pub fn read(path: &Path) -> Result<Job, JobError> {
        let text = std::fs::read_to_string(path).map_err(|e| JobError {
            path: path.to_path_buf(),
            message: format!("cannot read: {e}"),
        })?;
        let job = Job::parse(&text, path)?;
        for (rank, src) in job.ranks.iter().enumerate() {
            let RankSource::Trace { path: p, format } = src else {
                continue;
            };
            let problem = if p.is_dir() {
                Some("is a folder, not a trace file".to_string())
            } else if !p.is_file() {
                Some("no such file".to_string())
            } else if format.is_none() && Format::from_path(p).is_none() {
                let names: Vec<&str> = Format::ALL.iter().map(|(_, n, _)| *n).collect();
                Some(format!(
                    "the file name does not say its format: give it in the manifest, {{\"rank\": {rank}, \"trace\": ..., \"format\": \"csv\"}} ({})",
                    names.join(", ")
                ))
            } else {
                None
            };
            if let Some(why) = problem {
                return Err(job.error(format!("rank {rank}: trace {}: {why}", p.display())));
            }
        }
        Ok(job)
    }

    /// Parses manifest text; trace paths are resolved against `path`'s
    /// folder but not checked.
    pub fn parse(text: &str, path: &Path) -> Result<Job, JobError> {
        let err = |message: String| JobError {
            path: path.to_path_buf(),
            message,
        };
        let v: Value =
            serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
        let top = v
            .as_object()
            .ok_or_else(|| err("a job manifest is a JSON object".into()))?;
        match top.get("vramlab_job") {
            None => return Err(err("not a vramlab job: no \"vramlab_job\" key".into())),
            Some(n) if whole(n) == Some(JOB_VERSION) => {}
            Some(n) if whole(n).is_none() => {
                return Err(err(format!(
                    "\"vramlab_job\": {n}: the version is an integer (this release reads {JOB_VERSION})"
                )));
            }
            Some(n) => {
                return Err(err(format!(
                    "vramlab_job {n} is not supported (this release reads version {JOB_VERSION})"
                )));
            }
        }
        let world_size = match top.get("world_size").map(|v| (v, whole(v))) {
            Some((_, Some(n))) if (1..=MAX_WORLD_SIZE).contains(&n) => n as u32,
            Some((v, Some(n))) if n > MAX_WORLD_SIZE => {
                return Err(err(format!(
                    "\"world_size\": {v} is more ranks than this release takes (at most {MAX_WORLD_SIZE})"
                )));
            }
            _ => return Err(err("\"world_size\" must be a whole number ≥ 1".into())),
        };
        let source = match top.get("source") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(err("\"source\" must be a string".into())),
        };
        let folder = path.parent().unwrap_or(Path::new(""));
        let ranks = parse_ranks(top, world_size, folder).map_err(err)?;
        let outside = parse_outside(top.get("outside_allocator")).map_err(err)?;
        Ok(Job {
            path: path.to_path_buf(),
            world_size,
            source,
            ranks,
            outside,
        })
    }

    fn error(&self, message: String) -> JobError {
        JobError {
            path: self.path.clone(),
            message,
        }
    }

    /// Bytes per rank outside the allocator (0 when the manifest says none).
    pub fn outside_bytes(&self) -> u64 {
        self.outside.as_ref().map_or(0, |o| o.bytes)
    }

    /// The distinct traces, by the lowest rank that names each; ranks
    /// naming the same file share it as recorded identical.
    pub fn traces(&self) -> Vec<JobTrace> {
        let mut out: Vec<JobTrace> = Vec::new();
        let mut owner_of = vec![0usize; self.ranks.len()];
        for (rank, src) in self.ranks.iter().enumerate() {
            let RankSource::Trace { path: p, format } = src else {
                continue;
            };
            let rank = rank as u32;
            let at = match out.iter().position(|t| &t.path == p) {
                Some(i) => {
                    if let Some(t) = out.get_mut(i) {
                        t.recorded.push(rank);
                        t.format = t.format.or(*format);
                    }
                    i
                }
                None => {
                    out.push(JobTrace {
                        path: p.clone(),
                        format: *format,
                        rank,
                        ranks: Vec::new(),
                        recorded: Vec::new(),
                        assumed: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            if let Some(o) = owner_of.get_mut(rank as usize) {
                *o = at;
            }
        }
        for (rank, src) in self.ranks.iter().enumerate() {
            let rank = rank as u32;
            let at = match src {
                RankSource::Trace { .. } => owner_of.get(rank as usize).copied(),
                RankSource::SameAs { rank: r, basis } => {
                    let at = owner_of.get(*r as usize).copied();
                    if let Some(t) = at.and_then(|i| out.get_mut(i)) {
                        match basis {
                            Basis::Recorded => t.recorded.push(rank),
                            Basis::Assumed => t.assumed.push(rank),
                        }
                    }
                    at
                }
            };
            if let Some(t) = at.and_then(|i| out.get_mut(i)) {
                t.ranks.push(rank);
            }
        }
        for t in &mut out {
            t.recorded.sort_unstable();
            t.assumed.sort_unstable();
        }
        out
    }
}

/// A JSON number that is a whole number (`1` or `1.0`).
fn whole(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    })
}

/// Entry `i`'s rank number.
fn rank_of(i: usize, entry: &Value) -> Result<u64, String> {
    entry
        .as_object()
        .ok_or_else(|| format!("ranks[{i}] must be an object"))?
        .get("rank")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("ranks[{i}]: \"rank\" must be a whole number"))
}

/// Why `list` cannot hold every rank of `0..world_size` once, found
/// without a slot per rank: an entry without a rank, a rank out of range,
/// one twice, or the ranks missing.
fn count_mismatch(list: &[Value], world_size: u32) -> String {
    let last = u64::from(world_size) - 1;
    let mut seen = std::collections::BTreeSet::new();
    for (i, entry) in list.iter().enumerate() {
        let rank = match rank_of(i, entry) {
            Ok(r) => r,
            Err(e) => return e,
        };
        if rank > last {
            return format!("rank {rank}: out of range (world_size {world_size}: ranks 0-{last})");
        }
        if !seen.insert(rank) {
            return format!("rank {rank} appears twice");
        }
    }
    // Fewer entries than ranks, each once: name the gaps as ranges.
    let mut gaps: Vec<String> = Vec::new();
    let mut next = 0u64;
    let mut missing = 0u64;
    for r in seen.iter().copied().chain(std::iter::once(last + 1)) {
        if r > next {
            missing += r - next;
            gaps.push(if r - 1 == next {
                next.to_string()
            } else {
                format!("{next}-{}", r - 1)
            });
        }
        next = r + 1;
    }
    format!(
        "{} {} missing (every rank 0-{last} must appear once)",
        if missing == 1 { "rank" } else { "ranks" },
        gaps.join(", ")
    )
}

/// The `ranks` array: every rank once, each with a trace or a `same_as`
/// a rank that has one.
fn parse_ranks(
    top: &Map<String, Value>,
    world_size: u32,
    folder: &Path,
) -> Result<Vec<RankSource>, String> {
    let list = top
        .get("ranks")
        .and_then(Value::as_array)
        .ok_or("\"ranks\" must be an array of {\"rank\": N, ...}")?;
    // One slot per rank only once there are as many entries as ranks.
    if list.len() != world_size as usize {
        return Err(count_mismatch(list, world_size));
    }
    let mut ranks: Vec<Option<RankSource>> = vec![None; list.len()];
    for (i, entry) in list.iter().enumerate() {
        let rank = rank_of(i, entry)?;
        let obj = entry
            .as_object()
            .ok_or_else(|| format!("ranks[{i}] must be an object"))?;
        let last = world_size - 1;
        let slot = usize::try_from(rank)
            .ok()
            .and_then(|r| ranks.get_mut(r))
            .ok_or_else(|| {
                format!("rank {rank}: out of range (world_size {world_size}: ranks 0-{last})")
            })?;
        if slot.is_some() {
            return Err(format!("rank {rank} appears twice"));
        }
        *slot = Some(rank_source(obj, rank, folder)?);
    }
    let missing: Vec<u32> = (0..world_size)
        .filter(|&r| ranks.get(r as usize).is_none_or(Option::is_none))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} missing (every rank 0-{} must appear once)",
            ranks_phrase(&missing),
            world_size - 1
        ));
    }
    let ranks: Vec<RankSource> = ranks.into_iter().flatten().collect();
    for (rank, src) in ranks.iter().enumerate() {
        match src {
            RankSource::SameAs { rank: other, .. } => {
                if !matches!(ranks.get(*other as usize), Some(RankSource::Trace { .. })) {
                    return Err(format!(
                        "rank {rank}: same_as {other}, but rank {other} has no trace (same_as must name a rank with a \"trace\")"
                    ));
                }
            }
            RankSource::Trace {
                path,
                format: Some(f),
            } => {
                let clash = ranks.iter().enumerate().find(|(_, o)| {
                    matches!(o, RankSource::Trace { path: p, format: Some(g) } if p == path && g != f)
                });
                if let Some((other, _)) = clash {
                    return Err(format!(
                        "ranks {rank} and {other} name {} with different formats",
                        path.display()
                    ));
                }
            }
            RankSource::Trace { format: None, .. } => {}
        }
    }
    Ok(ranks)
}

/// One entry of `ranks`: its `trace` (and `format`), or `same_as` with its
/// `basis`.
fn rank_source(obj: &Map<String, Value>, rank: u64, folder: &Path) -> Result<RankSource, String> {
    if let Some(k) = obj.keys().find(|k| {
        !matches!(
            k.as_str(),
            "rank" | "trace" | "format" | "same_as" | "basis"
        )
    }) {
        return Err(format!(
            "rank {rank}: unknown key \"{k}\" (a rank has rank, and trace (with format, optional) or same_as with basis)"
        ));
    }
    match (obj.get("trace"), obj.get("same_as")) {
        (Some(_), Some(_)) => Err(format!(
            "rank {rank}: give \"trace\" or \"same_as\", not both"
        )),
        (None, None) => Err(format!(
            "rank {rank}: needs \"trace\" (a file) or \"same_as\" (a rank with one)"
        )),
        (Some(t), None) => {
            if obj.contains_key("basis") {
                return Err(format!(
                    "rank {rank}: \"basis\" goes with \"same_as\", not with \"trace\""
                ));
            }
            let format = match obj.get("format") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_str().and_then(Format::from_name).ok_or_else(|| {
                    let names: Vec<&str> = Format::ALL.iter().map(|(_, n, _)| *n).collect();
                    format!(
                        "rank {rank}: \"format\": {v} is not one of {}",
                        names.join(", ")
                    )
                })?),
            };
            match t.as_str() {
                Some(s) if Path::new(s).is_absolute() => Err(format!(
                    "rank {rank}: \"trace\": {s} is an absolute path; give it relative to the job's folder"
                )),
                Some(s) if !s.is_empty() => Ok(RankSource::Trace {
                    path: folder.join(s),
                    format,
                }),
                _ => Err(format!(
                    "rank {rank}: \"trace\" must be a file name (relative to the job's folder)"
                )),
            }
        }
        (None, Some(s)) => {
            if obj.contains_key("format") {
                return Err(format!(
                    "rank {rank}: \"format\" goes with \"trace\", not with \"same_as\""
                ));
            }
            let other = s
                .as_u64()
                .and_then(|r| u32::try_from(r).ok())
                .ok_or_else(|| format!("rank {rank}: \"same_as\" must be a rank number"))?;
            let basis = match obj.get("basis").and_then(Value::as_str) {
                Some("recorded") => Basis::Recorded,
                Some("assumed") => Basis::Assumed,
                _ => {
                    return Err(format!(
                        "rank {rank}: \"basis\" must be \"recorded\" (recorded, identical events) or \"assumed\" (not recorded)"
                    ));
                }
            };
            Ok(RankSource::SameAs { rank: other, basis })
        }
    }
}

/// `outside_allocator`: `{"bytes": N, "what": "..."}`, optional.
fn parse_outside(v: Option<&Value>) -> Result<Option<OutsideAllocator>, String> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let obj = v
        .as_object()
        .ok_or("\"outside_allocator\" must be {\"bytes\": N, \"what\": \"...\"}")?;
    let bytes = obj
        .get("bytes")
        .and_then(Value::as_u64)
        .ok_or("outside_allocator: \"bytes\" must be a whole number of bytes")?;
    let what = match obj.get("what") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("outside_allocator: \"what\" must be a string".into()),
    };
    Ok(Some(OutsideAllocator { bytes, what }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    const GOOD: &str = r#"{"vramlab_job": 1, "world_size": 5, "source": "test", "extra": [1],
        "ranks": [{"rank": 0, "trace": "a.csv"}, {"rank": 1, "same_as": 0, "basis": "recorded"},
                  {"rank": 4, "trace": "b.csv"}, {"rank": 2, "same_as": 0, "basis": "assumed"},
                  {"rank": 3, "same_as": 0, "basis": "recorded"}],
        "outside_allocator": {"bytes": 1024, "what": "NCCL"}}"#;

    fn parse(text: &str) -> Result<Job, String> {
        Job::parse(text, Path::new("j/job.json")).map_err(|e| e.to_string())
    }

    fn bad(text: &str) -> String {
        parse(text).unwrap_err()
    }

    #[test]
    fn a_good_manifest_groups_ranks_by_trace() {
        let job = parse(GOOD).unwrap();
        assert_eq!(job.world_size, 5);
        assert_eq!(job.source.as_deref(), Some("test"));
        assert_eq!(job.outside_bytes(), 1024);
        let t = job.traces();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].path, Path::new("j/a.csv"));
        assert_eq!(t[0].ranks, vec![0, 1, 2, 3]);
        assert_eq!(t[0].recorded, vec![1, 3]);
        assert_eq!(t[0].assumed, vec![2]);
        assert_eq!(
            t[0].label(),
            "ranks 0-3 (rank 0's trace; 1, 3 recorded identical; 2 assumed alike)"
        );
        assert_eq!(t[1].label(), "rank 4");
        assert_eq!(rank_ranges(&[0, 1, 2, 5, 7, 8]), "0-2, 5, 7-8");
    }

    #[test]
    fn ranks_naming_one_file_share_it() {
        let job = parse(
            r#"{"vramlab_job": 1, "world_size": 2,
                "ranks": [{"rank": 1, "trace": "a.csv"}, {"rank": 0, "trace": "a.csv"}]}"#,
        )
        .unwrap();
        let t = job.traces();
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].rank, t[0].ranks.clone()), (0, vec![0, 1]));
        assert_eq!(job.outside, None);
    }

    #[test]
    fn each_violation_names_the_file_and_the_rank_or_key() {
        let w =
            |ranks: &str| format!(r#"{{"vramlab_job": 1, "world_size": 3, "ranks": [{ranks}]}}"#);
        let t = |r: u32| format!(r#"{{"rank": {r}, "trace": "a.csv"}}"#);
        let cases = [
            (
                "{".to_string(),
                "j/job.json: not valid JSON: EOF while parsing",
            ),
            ("[]".into(), "j/job.json: a job manifest is a JSON object"),
            (r#"{"world_size": 1}"#.into(), "no \"vramlab_job\" key"),
            (
                r#"{"vramlab_job": 2}"#.into(),
                "vramlab_job 2 is not supported",
            ),
            (
                r#"{"vramlab_job": 1, "world_size": 0}"#.into(),
                "\"world_size\" must be",
            ),
            (
                r#"{"vramlab_job": 1, "world_size": 1}"#.into(),
                "\"ranks\" must be an array",
            ),
            (
                w(&format!("{},{}", t(0), t(1))),
                "rank 2 missing (every rank 0-2 must appear once)",
            ),
            (
                w(&format!("{},{},{},{}", t(0), t(1), t(2), t(1))),
                "rank 1 appears twice",
            ),
            (
                w(&format!("{},{},{}", t(0), t(1), t(3))),
                "rank 3: out of range (world_size 3: ranks 0-2)",
            ),
            (
                w(&format!(
                    r#"{},{},{{"rank": 2, "same_as": 3, "basis": "recorded"}}"#,
                    t(0),
                    t(1)
                )),
                "rank 2: same_as 3, but rank 3 has no trace",
            ),
            (
                w(&format!(
                    r#"{},{{"rank": 1, "same_as": 2, "basis": "assumed"}},{{"rank": 2, "same_as": 0, "basis": "assumed"}}"#,
                    t(0)
                )),
                "rank 1: same_as 2, but rank 2 has no trace",
            ),
            (
                w(&format!(r#"{},{},{{"rank": 2, "same_as": 0}}"#, t(0), t(1))),
                "rank 2: \"basis\" must be \"recorded\"",
            ),
            (
                w(&format!(r#"{},{},{{"rank": 2}}"#, t(0), t(1))),
                "rank 2: needs \"trace\"",
            ),
            (
                w(&format!(
                    r#"{},{},{{"rank": 2, "trace": "x", "same_as": 0}}"#,
                    t(0),
                    t(1)
                )),
                "rank 2: give \"trace\" or \"same_as\", not both",
            ),
            (
                w(&format!(r#"{},{},{{"rank": 2, "trace": 7}}"#, t(0), t(1))),
                "rank 2: \"trace\" must be a file name",
            ),
            (
                w(&format!(
                    r#"{},{},{{"rank": 2, "trace": "x", "basis": "assumed"}}"#,
                    t(0),
                    t(1)
                )),
                "rank 2: \"basis\" goes with \"same_as\"",
            ),
            (
                w(&format!(
                    r#"{},{},{{"rank": 2, "trace": "x", "sameas": 0}}"#,
                    t(0),
                    t(1)
                )),
                "rank 2: unknown key \"sameas\"",
            ),
            (
                w(&format!(
                    r#"{},{},{{"rank": -1, "trace": "x"}}"#,
                    t(0),
                    t(1)
                )),
                "ranks[2]: \"rank\" must be a whole number",
            ),
            (
                format!(
                    r#"{{"vramlab_job": 1, "world_size": 1, "ranks": [{}], "outside_allocator": {{"bytes": "1GiB"}}}}"#,
                    t(0)
                ),
                "outside_allocator: \"bytes\" must be a whole number of bytes",
            ),
        ];
        for (text, want) in cases {
            let e = bad(&text);
            assert!(e.starts_with("j/job.json: "), "{e}");
            assert!(e.contains(want), "{text}\n  gave: {e}\n  want: {want}");
        }
    }

    #[test]
    fn counts_are_checked_before_a_slot_per_rank_is_made() {
        let e = bad(r#"{"vramlab_job": 1, "world_size": 4000000000, "ranks": []}"#);
        assert!(
            e.contains(
                "\"world_size\": 4000000000 is more ranks than this release takes (at most 1048576)"
            ),
            "{e}"
        );
        let e = bad(r#"{"vramlab_job": 1, "world_size": 1048576, "ranks": []}"#);
        assert!(
            e.contains("ranks 0-1048575 missing (every rank 0-1048575 must appear once)"),
            "{e}"
        );
        let t = |r: u32| format!(r#"{{"rank": {r}, "trace": "a.csv"}}"#);
        let w = |n: u32, ranks: &[u32]| {
            let list: Vec<String> = ranks.iter().map(|&r| t(r)).collect();
            format!(
                r#"{{"vramlab_job": 1, "world_size": {n}, "ranks": [{}]}}"#,
                list.join(",")
            )
        };
        assert!(bad(&w(6, &[2, 4])).contains("ranks 0-1, 3, 5 missing"));
        assert!(bad(&w(3, &[2])).contains("ranks 0-1 missing (every rank 0-2"));
        assert!(bad(&w(3, &[0, 2])).contains(": rank 1 missing"));
        assert!(bad(&w(2, &[0, 1, 1])).contains("rank 1 appears twice"));
        assert!(bad(&w(2, &[0, 5, 1])).contains("rank 5: out of range"));
        assert!(bad(&w(2, &[0])).contains("rank 1 missing"));
    }

    #[test]
    fn versions_formats_and_paths() {
        let one = |extra: &str, rank: &str| {
            format!(r#"{{"vramlab_job": 1{extra}, "world_size": 1, "ranks": [{rank}]}}"#)
        };
        let r0 = r#"{"rank": 0, "trace": "a.csv"}"#;
        let job =
            parse(&one("", r0).replace("\"vramlab_job\": 1", "\"vramlab_job\": 1.0")).unwrap();
        assert_eq!(job.world_size, 1);
        let e = bad(&one("", r0).replace("\"vramlab_job\": 1", "\"vramlab_job\": 1.5"));
        assert!(e.contains("the version is an integer"), "{e}");
        let e = bad(&one("", r#"{"rank": 0, "trace": "/abs/a.csv"}"#));
        assert!(
            e.contains("rank 0: \"trace\": /abs/a.csv is an absolute path; give it relative to the job's folder"),
            "{e}"
        );
        let job = parse(&one(
            "",
            r#"{"rank": 0, "trace": "a.log", "format": "csv.gz"}"#,
        ))
        .unwrap();
        assert_eq!(job.traces()[0].format, Some(Format::CsvGz));
        let e = bad(&one(
            "",
            r#"{"rank": 0, "trace": "a.log", "format": "tsv"}"#,
        ));
        assert!(
            e.contains(
                "rank 0: \"format\": \"tsv\" is not one of csv, csv.gz, vlt, vlt.zst, snapshot, rmm"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_missing_trace_file_is_named_with_its_rank() {
        let dir = std::env::temp_dir().join(format!("vramlab-job-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("job.json");
        std::fs::write(
            &f,
            r#"{"vramlab_job": 1, "world_size": 1, "ranks": [{"rank": 0, "trace": "gone.csv"}]}"#,
        )
        .unwrap();
        let e = Job::read(&f).unwrap_err().to_string();
        assert_eq!(Job::file_of(&dir), Some(f.clone()));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("job.json: rank 0: trace "), "{e}");
        assert!(e.contains("gone.csv: no such file"), "{e}");
        assert_eq!(
            Job::file_of(Path::new("x/run.job.json")),
            Some("x/run.job.json".into())
        );
        assert_eq!(Job::file_of(Path::new("x/run.json")), None);
    }
}
