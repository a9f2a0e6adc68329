//! `vramlab sweep JOB`: rows per distinct trace (named by its ranks) and
//! the job's worst-rank row per setting.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use vramlab_replay::{JobSetting, JobView, RankPeak, SweepRow, worst_rows};

use super::SweepArgs;
use crate::job::{LoadedJob, refuse, refuse_trace_device};
use crate::render::job::FitsFrom;

/// What `sweep --json FILE` writes for a job.
#[derive(Debug, Serialize)]
pub struct JobSweep {
    /// The job and, per setting, its worst rank, imbalance and card.
    pub job: JobView<JobSetting>,
    /// What each rank's allocator had: the card less the bytes outside the
    /// allocator (`None`: unlimited).
    pub capacity_bytes: Option<u64>,
    /// Each distinct trace's rows (`trace`: the file and its ranks).
    pub rows: Vec<SweepRow>,
    /// The job's row per setting: its worst rank's.
    pub job_rows: Vec<SweepRow>,
}

/// Runs `sweep` on the job at `file`.
pub fn run(args: &SweepArgs, file: &Path) -> Result<()> {
    if args.shard.is_some() || args.plan.is_some() {
        return refuse("sweep", "--shard or --plan", file);
    }
    refuse_trace_device("sweep", args.device, file)?;
    args.grid.one_release("sweep")?;
    let job = LoadedJob::read(file, args.grid.torch_version(), args.card.bytes())?;
    let named = job.named();
    let target = args.grid.target_of_all(&named);
    let grid = args.grid.entries(&target)?;
    let rows = crate::cmd_sweep::sweep_rows(
        &named,
        &grid,
        (job.capacity, args.card.placement),
        None,
        args.start.start,
        args.quiet,
    )?;
    let per_trace: Vec<Vec<SweepRow>> = rows.chunks(grid.len().max(1)).map(<[_]>::to_vec).collect();
    let job_rows = worst_rows(&per_trace, rows.len() as u64);
    let settings = job.settings(
        &per_trace,
        |r| r.setting.clone(),
        |r| RankPeak {
            peak_reserved_bytes: r.peak_reserved_bytes,
            oom: !r.fits(),
        },
    )?;
    let mut all = rows.clone();
    all.extend(job_rows.iter().cloned());
    if let Some(p) = &args.csv {
        let mut s = String::from(vramlab_replay::SWEEP_CSV_HEADER);
        s.push('\n');
        for r in &all {
            s.push_str(&r.to_csv());
            s.push('\n');
        }
        std::fs::write(p, s).with_context(|| format!("cannot write {}", p.display()))?;
        errln!(
            "wrote {} ({} rows, the last {} the job's)",
            p.display(),
            all.len(),
            job_rows.len()
        );
    }
    let answer = JobSweep {
        job: JobView::new(&job.job, settings),
        capacity_bytes: job.capacity,
        rows,
        job_rows,
    };
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&answer)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        errln!("wrote {}", p.display());
    }
    crate::render::job::print_header(&job.job, &job.groups);
    if let Some(line) = job.capacity_line(args.card.describe()) {
        outln!("{line}");
    }
    outln!();
    crate::render::sweep::print_sweep(&all);
    outln!();
    let from = FitsFrom::PeakReserved {
        on_card: job.capacity.is_some(),
    };
    crate::render::job::print_job(&job.job, &answer.job.settings, "peak reserved", from);
    Ok(())
}
