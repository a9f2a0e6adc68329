//! A multi-rank job (a folder with `job.json`, or the manifest itself) as
//! the TRACE of `replay`, `recommend`, `oom-point` and `sweep`: each
//! distinct trace is read and replayed once, and the job's answer is its
//! worst rank ([`vramlab_replay::job_setting`]). Each command's job mode
//! is its own `job_mode` child module; this one reads the job.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Serialize;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{Inputs, Pick, RankGroup};
use vramlab_traces::{Job, Trace};

/// The manifest `path` names, when it is a job.
pub fn job_file(path: &Path) -> Option<PathBuf> {
    Job::file_of(path)
}

/// A job with its distinct traces read.
pub struct LoadedJob {
    /// The manifest.
    pub job: Job,
    /// Each distinct trace's ranks, in the order of their lowest rank.
    pub groups: Vec<RankGroup>,
    /// The traces, in the same order.
    pub traces: Vec<Trace>,
}

impl LoadedJob {
    /// Reads the manifest at `file` and each distinct trace (snapshots
    /// under `version`'s rules, device `device` of a multi-device one).
    pub fn read(file: &Path, version: Option<TorchVersion>, device: Option<u32>) -> Result<Self> {
        let job = Job::read(file)?;
        let mut groups = Vec::new();
        let mut traces = Vec::new();
        for t in job.traces() {
            let inputs = Inputs::new([&t.path])
                .pick(Pick::One(device))
                .torch(version);
            let group = RankGroup::of(&t);
            let Some(input) = crate::inputs::read(inputs)?.into_iter().next() else {
                bail!(
                    "{}: {}: no trace in {}",
                    file.display(),
                    group.label,
                    t.path.display()
                );
            };
            if input.trace.events.is_empty() {
                bail!(
                    "{}: {}: nothing to replay in {}",
                    file.display(),
                    group.label,
                    t.path.display()
                );
            }
            groups.push(group);
            traces.push(input.trace);
        }
        Ok(LoadedJob {
            job,
            groups,
            traces,
        })
    }

    /// Bytes per rank outside the allocator.
    pub fn outside(&self) -> u64 {
        self.job.outside_bytes()
    }

    /// `(label, trace)` pairs for a sweep: each trace named by its ranks.
    pub fn named(&self) -> Vec<(String, Trace)> {
        self.groups
            .iter()
            .zip(&self.traces)
            .map(|(g, t)| (row_name(g), t.clone()))
            .collect()
    }
}

/// A group's name in sweep rows: `rank0.csv.gz [ranks 0-2 (…)]`.
pub fn row_name(g: &RankGroup) -> String {
    let file = Path::new(&g.trace)
        .file_name()
        .map_or(g.trace.clone(), |f| f.to_string_lossy().into_owned());
    format!("{file} [{}]", g.label)
}

/// One distinct trace's results in a job's JSON.
#[derive(Debug, Serialize)]
pub struct TraceResults<T> {
    /// Its ranks.
    pub ranks: String,
    /// The trace file.
    pub trace: String,
    /// What the command answers for it.
    pub results: T,
}

/// Refuses a job for options that name one trace.
pub fn refuse(command: &str, what: &str, file: &Path) -> Result<()> {
    Err(crate::invoke::BadArgument(format!(
        "{}: {command} of a job does not take {what} (give one rank's trace instead)",
        file.display()
    ))
    .into())
}
