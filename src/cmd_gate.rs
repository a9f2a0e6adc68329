//! `vramlab gate`: a memory regression gate for a team's CI. Two runs of
//! the same job — a recording committed as the baseline, one made in CI —
//! replayed under each setting; the change in peak reserved bytes, waste
//! and smallest card, what grew by source line (`diff`'s attribution), and
//! a verdict against `--max-increase`, as a table, Markdown for a
//! pull-request comment, JSON and JUnit XML. Exit status 1 when it fails.

mod limit;
mod pairs;
mod report;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use vramlab_replay::{DiffGroup, DiffInput, card_for, diff, start_for};
use vramlab_traces::Trace;

use crate::args::{ConfArgs, DeviceArgs, TraceArgs, scenarios};
use crate::invoke::BadArgument;
use limit::Limit;

/// Arguments of `vramlab gate`.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// The baseline: a recording of the job (any format `replay` reads, or
    /// a multi-rank job: a folder with a job.json), committed with the
    /// code.
    #[arg(value_name = "BASELINE")]
    baseline: PathBuf,
    /// The candidate: the same job recorded on the change under review
    /// (a job is compared with a job, rank by rank).
    #[arg(value_name = "CANDIDATE")]
    candidate: PathBuf,
    /// The largest growth of peak reserved memory that passes: a share of
    /// the baseline's (`2%`) or a size (`256MiB`).
    #[arg(long, value_name = "PCT|SIZE", default_value = "2%", value_parser = limit::parse)]
    max_increase: Limit,
    /// Which GPU of multi-device snapshots to use (default: the device
    /// with the most allocations).
    #[arg(long = "trace-device", value_name = "N")]
    device_index: Option<u32>,
    /// The settings to gate under (each a row; default: the recorded
    /// settings, else PyTorch's defaults) and the release.
    #[command(flatten)]
    conf: ConfArgs,
    /// The card the job runs on: the candidate also fails when it no
    /// longer fits where the baseline did.
    #[command(flatten)]
    device: DeviceArgs,
    /// Write the summary as Markdown here (a pull-request comment).
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Write the verdict as JUnit XML here (one test case per setting).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// How many grown source lines to name per setting.
    #[arg(long, value_name = "N", default_value_t = 5)]
    top: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// One setting's verdict.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GateRow {
    setting: String,
    /// The ranks this row stands for (two multi-rank jobs).
    #[serde(skip_serializing_if = "Option::is_none")]
    ranks: Option<String>,
    baseline_peak_reserved_bytes: u64,
    candidate_peak_reserved_bytes: u64,
    reserved_delta_bytes: i64,
    /// The change as a share of the baseline's peak (`None`: the baseline
    /// reserved nothing).
    reserved_delta_ratio: Option<f64>,
    waste_delta_bytes: i64,
    allocated_delta_bytes: i64,
    baseline_smallest_card: Option<String>,
    candidate_smallest_card: Option<String>,
    baseline_oom: Option<String>,
    candidate_oom: Option<String>,
    /// What grew most at the peak, by source line (or phase and size).
    grew: Vec<DiffGroup>,
    /// How the groups are keyed (`frame`, `phase_and_size`, `size`).
    grouped_by: String,
    /// The largest growth that passes, in bytes.
    limit_bytes: u64,
    passed: bool,
    /// Why it failed, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl GateRow {
    /// The setting, with the ranks it stands for when the row is one of a
    /// job's.
    pub(crate) fn label(&self) -> String {
        match &self.ranks {
            Some(r) => format!("{} · {r}", self.setting),
            None => self.setting.clone(),
        }
    }
}

/// `gate --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GateOut {
    baseline: String,
    candidate: String,
    max_increase: String,
    card: Option<String>,
    passed: bool,
    rows: Vec<GateRow>,
}

fn load(args: &GateArgs, path: &std::path::Path) -> Result<Trace> {
    let release = args.conf.torch_versions.first().copied();
    let t = TraceArgs {
        trace: path.to_path_buf(),
        format: None,
        device: args.device_index,
    };
    Ok(t.load(release)?.trace)
}

/// Runs `gate`.
pub fn run(args: GateArgs) -> Result<()> {
    if args.conf.torch_versions.len() > 1 {
        bail!(BadArgument(
            "gate compares two recordings under one release: give at most one --torch-version"
                .into()
        ));
    }
    let release = args.conf.torch_versions.first().copied();
    let pairs = pairs::pairs(
        &args.baseline,
        &args.candidate,
        release,
        args.device.bytes(),
        |p| load(&args, p),
    )?;
    let name_a = args.baseline.display().to_string();
    let name_b = args.candidate.display().to_string();
    let mut rows = Vec::new();
    for pair in &pairs {
        let (a, b) = (&pair.baseline, &pair.candidate);
        let with_capacity = |v: Vec<vramlab_replay::Scenario>, capacity: Option<u64>| {
            if capacity.is_none() {
                return v;
            }
            v.into_iter().map(|s| s.with_capacity(capacity)).collect()
        };
        let [cap_a, cap_b] = pair.capacity;
        let sa = with_capacity(scenarios(&args.conf, &args.device, a)?, cap_a);
        let sb = with_capacity(scenarios(&args.conf, &args.device, b)?, cap_b);
        for (x, y) in sa.iter().zip(&sb) {
            let start_a = start_for(a, std::slice::from_ref(x), None).unwrap_or_default();
            let start_b = start_for(b, std::slice::from_ref(y), None).unwrap_or_default();
            let d = diff(
                DiffInput {
                    trace: a,
                    name: &name_a,
                    scenario: x,
                    start: start_a,
                },
                DiffInput {
                    trace: b,
                    name: &name_b,
                    scenario: y,
                    start: start_b,
                },
            )
            .with_context(|| {
                format!(
                    "comparing {name_a} with {name_b}{} under {}",
                    pair.ranks
                        .as_ref()
                        .map_or(String::new(), |r| format!(" ({r})")),
                    x.label()
                )
            })?;
            let mut row = verdict(
                &d,
                args.max_increase,
                args.top,
                args.device.bytes().is_some(),
                pair.outside,
            );
            row.ranks = pair.ranks.clone();
            rows.push(row);
        }
    }
    let out = GateOut {
        baseline: name_a,
        candidate: name_b,
        max_increase: args.max_increase.to_string(),
        card: args.device.describe(),
        passed: rows.iter().all(|r| r.passed),
        rows,
    };
    if let Some(p) = &args.markdown {
        std::fs::write(p, report::markdown(&out))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &args.junit {
        std::fs::write(p, report::junit(&out))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if args.json {
        crate::render::json::print(&out)?;
    } else {
        report::human(&out);
    }
    if out.passed {
        Ok(())
    } else {
        Err(crate::CheckFailed.into())
    }
}

/// One setting's comparison judged against the limit.
fn verdict(
    d: &vramlab_replay::RunDiff,
    limit: Limit,
    top: usize,
    on_card: bool,
    [outside_a, outside_b]: [u64; 2],
) -> GateRow {
    let base = d.a.peak_reserved_bytes;
    let limit_bytes = limit.bytes_of(base);
    let grew: Vec<DiffGroup> = d
        .groups
        .iter()
        .filter(|g| g.delta_bytes > 0)
        .take(top)
        .cloned()
        .collect();
    let mut reason = None;
    if d.reserved_delta_bytes > 0 && d.reserved_delta_bytes.unsigned_abs() > limit_bytes {
        reason = Some(format!(
            "peak reserved grew by {} (more than {})",
            crate::render::table::bytes(d.reserved_delta_bytes.unsigned_abs()),
            limit
        ));
    }
    if on_card && d.a.oom.is_none() && d.b.oom.is_some() {
        reason = Some(format!(
            "it no longer fits on the card: {}",
            d.b.oom.as_deref().unwrap_or("out of memory")
        ));
    }
    // Each recording replays under its own recorded settings when none
    // are given: name both when they differ.
    let setting = if d.a.setting == d.b.setting {
        d.a.setting.clone()
    } else {
        format!("{} → {}", d.a.setting, d.b.setting)
    };
    GateRow {
        setting,
        ranks: None,
        baseline_peak_reserved_bytes: base,
        candidate_peak_reserved_bytes: d.b.peak_reserved_bytes,
        reserved_delta_bytes: d.reserved_delta_bytes,
        reserved_delta_ratio: (base > 0).then(|| d.reserved_delta_bytes as f64 / base as f64),
        waste_delta_bytes: d.waste_delta_bytes,
        allocated_delta_bytes: d.allocated_delta_bytes,
        baseline_smallest_card: card_for(base, outside_a),
        candidate_smallest_card: card_for(d.b.peak_reserved_bytes, outside_b),
        baseline_oom: d.a.oom.clone(),
        candidate_oom: d.b.oom.clone(),
        grew,
        grouped_by: serde_json::to_value(d.grouped_by)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        limit_bytes,
        passed: reason.is_none(),
        reason,
    }
}
