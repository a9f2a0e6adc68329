//! A multi-rank job (a folder with `job.json`, or the manifest itself) as
//! the TRACE of `replay`, `recommend`, `oom-point` and `sweep`: each
//! distinct trace is read and replayed once, and the job's answer is its
//! worst rank ([`vramlab_replay::job_setting`]). Each command's job mode
//! is its own `job_mode` child module; this one reads the job, works out
//! the capacity the allocator has on the card, and holds what the job
//! modes share.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Serialize;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{Inputs, JobSetting, Pick, RankGroup, RankPeak, job_setting};
use vramlab_traces::{Job, Trace};

use crate::args::TraceArgs;
use crate::render::table::bytes;

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
    /// The card's usable bytes, when one is given (`--gpu`, `--capacity`).
    pub card: Option<u64>,
    /// What each rank's allocator may use: the card less the bytes the
    /// rank spends outside the allocator (`None`: unlimited).
    pub capacity: Option<u64>,
}

impl LoadedJob {
    /// Reads the manifest at `file` and each distinct trace (snapshots
    /// under `version`'s rules); on `card` (usable bytes), the allocator
    /// has the card less the outside bytes, which must leave some.
    pub fn read(file: &Path, version: Option<TorchVersion>, card: Option<u64>) -> Result<Self> {
        let job = Job::read(file)?;
        let outside = job.outside_bytes();
        let capacity = match card {
            Some(c) if outside >= c => bail!(
                "{}: the card's {} do not cover the {} each rank spends outside the allocator",
                file.display(),
                bytes(c),
                bytes(outside)
            ),
            Some(c) => Some(c - outside),
            None => None,
        };
        let mut groups = Vec::new();
        let mut traces = Vec::new();
        for t in job.traces() {
            let inputs = Inputs::new([&t.path])
                .format(t.format)
                .pick(Pick::One(None))
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
            card,
            capacity,
        })
    }

    /// Bytes per rank outside the allocator.
    pub fn outside(&self) -> u64 {
        self.job.outside_bytes()
    }

    /// `capacity for the allocator: X = CARD less Y outside the allocator`,
    /// when a card is given (`card`: how it was given, for people).
    pub fn capacity_line(&self, card: Option<String>) -> Option<String> {
        let (c, cap) = (self.card?, self.capacity?);
        Some(format!(
            "capacity for the allocator: {} = {} less {} outside the allocator",
            bytes(cap),
            card.unwrap_or_else(|| bytes(c)),
            bytes(self.outside())
        ))
    }

    /// `(label, trace)` pairs for a sweep: each trace named by its ranks.
    pub fn named(&self) -> Vec<(String, Trace)> {
        self.groups
            .iter()
            .zip(&self.traces)
            .map(|(g, t)| (row_name(g), t.clone()))
            .collect()
    }

    /// Each distinct trace as an input of its own, named by its ranks.
    pub fn inputs(&self) -> impl Iterator<Item = vramlab_replay::Input> + '_ {
        self.groups
            .iter()
            .zip(&self.traces)
            .map(|(g, t)| vramlab_replay::Input {
                path: g.trace.clone().into(),
                label: row_name(g),
                trace: t.clone(),
            })
    }

    /// The settings every distinct trace runs under (`labels[g]`: group
    /// `g`'s, in order), which must be the same: the job is compared rank
    /// against rank under each setting. Traces can get their own with
    /// `--recorded-conf`, or with a PyTorch release detected per trace.
    pub fn common_labels(&self, labels: &[Vec<String>]) -> Result<Vec<String>> {
        let first = labels.first().cloned().unwrap_or_default();
        for (g, these) in self.groups.iter().zip(labels).skip(1) {
            if *these != first {
                let r0 = self.groups.first().map_or(0, |g| g.rank);
                return Err(crate::invoke::BadArgument(format!(
                    "{}: the ranks' traces do not run under the same settings (rank {r0}: {}; {}: {}), so the job's worst rank cannot be named setting by setting: give the settings with --conf, the same for every rank (e.g. --conf default)",
                    self.job.path.display(),
                    first.join(", "),
                    g.label,
                    these.join(", "),
                ))
                .into());
            }
        }
        Ok(first)
    }

    /// The job's figures per setting from each distinct trace's results
    /// (`results[g]`: group `g`'s, one per setting in order): the settings
    /// checked the same ([`LoadedJob::common_labels`]), then per setting
    /// each trace's peak, then [`job_setting`].
    pub fn settings<R>(
        &self,
        results: &[Vec<R>],
        label: impl Fn(&R) -> String,
        peak: impl Fn(&R) -> RankPeak,
    ) -> Result<Vec<JobSetting>> {
        let labels: Vec<Vec<String>> = results
            .iter()
            .map(|rs| rs.iter().map(&label).collect())
            .collect();
        let common = self.common_labels(&labels)?;
        Ok(common
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let peaks: Vec<RankPeak> = results
                    .iter()
                    .map(|rs| {
                        rs.get(i).map_or(
                            RankPeak {
                                peak_reserved_bytes: 0,
                                oom: false,
                            },
                            &peak,
                        )
                    })
                    .collect();
                job_setting(l, &self.groups, &peaks, self.outside())
            })
            .collect())
    }

    /// [`LoadedJob::settings`] of sweep rows: each row's setting, its peak
    /// reserved and whether it ran out of memory.
    pub fn sweep_settings(
        &self,
        rows: &[Vec<vramlab_replay::SweepRow>],
    ) -> Result<Vec<JobSetting>> {
        self.settings(
            rows,
            |r| r.setting.clone(),
            |r| RankPeak {
                peak_reserved_bytes: r.peak_reserved_bytes,
                oom: !r.fits(),
            },
        )
    }

    /// Each distinct trace's results (`results[g]`: group `g`'s), named by
    /// its ranks and file.
    pub fn trace_results<T>(&self, results: Vec<T>) -> Vec<TraceResults<T>> {
        self.groups
            .iter()
            .zip(results)
            .map(|(g, results)| TraceResults {
                ranks: g.label.clone(),
                trace: g.trace.clone(),
                results,
            })
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
    refuse_because(command, what, "give one rank's trace instead", file)
}

/// Refuses a job for option `what`, saying `why`.
fn refuse_because(command: &str, what: &str, why: &str, file: &Path) -> Result<()> {
    Err(crate::invoke::BadArgument(format!(
        "{}: {command} of a job does not take {what} ({why})",
        file.display()
    ))
    .into())
}

/// Refuses `--trace-device` for a job: each rank's snapshot has its own.
pub fn refuse_trace_device(command: &str, device: Option<u32>, file: &Path) -> Result<()> {
    match device {
        Some(_) => refuse_because(
            command,
            "--trace-device",
            "each rank's snapshot has its own device, and the device with the most allocations is used; give one rank's trace to pick a device of it",
            file,
        ),
        None => Ok(()),
    }
}

/// Refuses the trace options a job cannot take: `--format` (the manifest
/// names a rank's format) and `--trace-device`.
pub fn refuse_trace_args(command: &str, t: &TraceArgs, file: &Path) -> Result<()> {
    if t.format.is_some() {
        return refuse_because(
            command,
            "--format",
            "a rank's format goes in job.json when its file name does not say: {\"rank\": 0, \"trace\": \"...\", \"format\": \"csv\"}",
            file,
        );
    }
    refuse_trace_device(command, t.device, file)
}
