//! A multi-rank job for people: each distinct trace's compact results, and
//! the job's worst rank, imbalance and card per setting.

use vramlab_replay::gpus::CONTEXT_ALLOWANCE;
use vramlab_replay::{
    JobOomPoint, JobSetting, RankFit, RankGroup, Recommendation, RowFit, Run, TorchTarget,
};
use vramlab_traces::{Job, Trace};

use crate::render::table::{Table, bytes, count};

/// The job's header: its ranks, where they come from, the outside bytes.
pub fn print_header(job: &Job, groups: &[RankGroup]) {
    outln!(
        "job: {} ({} rank{}, {} distinct trace{})",
        job.path.display(),
        job.world_size,
        if job.world_size == 1 { "" } else { "s" },
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    if let Some(s) = &job.source {
        outln!("source: {s}");
    }
    match &job.outside {
        Some(o) => outln!(
            "outside the allocator: {} per rank{}",
            bytes(o.bytes),
            if o.what.is_empty() {
                String::new()
            } else {
                format!(" ({})", o.what)
            }
        ),
        None => outln!("outside the allocator: none given"),
    }
}

/// Each distinct trace under each setting, one compact table per trace
/// (`capacity`: the line that says what the allocator has on the card;
/// `None`: an unlimited device).
pub fn print_traces(
    job: &Job,
    groups: &[RankGroup],
    traces: &[Trace],
    runs: &[Vec<Run>],
    capacity: Option<&str>,
) {
    print_header(job, groups);
    outln!("{}", capacity.unwrap_or("device: unlimited capacity"));
    for ((g, t), runs) in groups.iter().zip(traces).zip(runs) {
        outln!();
        outln!(
            "{}: {} ({} events)",
            g.label,
            g.trace,
            count(t.events.len() as u64)
        );
        let mut tab = Table::new(vec![
            "setting".into(),
            "peak live".into(),
            "peak allocated".into(),
            "peak reserved".into(),
            "waste at peak".into(),
            "OOM".into(),
        ]);
        for r in runs {
            let s = &r.summary;
            tab.row(vec![
                r.conf.clone(),
                bytes(s.peak_requested_bytes),
                bytes(s.peak_allocated_bytes),
                bytes(s.peak_reserved_bytes),
                bytes(s.waste_at_peak_bytes),
                r.oom
                    .as_ref()
                    .map_or("none".into(), |o| format!("event {}", count(o.event_index))),
            ]);
        }
        out!("{}", tab.render());
    }
}

/// Where the "needs" and "fits on" of [`print_job`] come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitsFrom {
    /// The worst rank's peak reserved (`replay`, `sweep`), on an
    /// unlimited device or (`on_card`) on the capacity the card leaves.
    PeakReserved {
        /// A card was given.
        on_card: bool,
    },
    /// The job's smallest capacity, searched (`recommend`).
    SmallestCapacity,
}

/// The job per setting: worst rank, its peak, the least, the imbalance,
/// the outside bytes and the card it fits on (`from`: how that was found).
pub fn print_job(job: &Job, settings: &[JobSetting], what: &str, from: FitsFrom) {
    outln!("job ({} ranks), worst rank per setting:", job.world_size);
    let mut tab = Table::new(vec![
        "setting".into(),
        "worst rank".into(),
        what.into(),
        "least rank".into(),
        "imbalance".into(),
        "outside".into(),
        "needs".into(),
        "fits on".into(),
    ]);
    for s in settings {
        tab.row(vec![
            s.setting.clone(),
            s.worst_rank.to_string(),
            bytes(s.peak_reserved_bytes),
            match (s.least_rank, s.least_peak_reserved_bytes) {
                (Some(r), Some(b)) => format!("{r} ({})", bytes(b)),
                _ => "- (all OOM)".into(),
            },
            format!("{} ({:.1}%)", bytes(s.imbalance_bytes), s.imbalance_percent),
            bytes(s.outside_allocator_bytes),
            bytes(s.needs_bytes),
            fits_cell(s),
        ]);
    }
    out!("{}", tab.render());
    for s in settings.iter().filter(|s| !s.oom_ranks.is_empty()) {
        outln!(
            "under {}, {} ran out of memory: the job does not fit this capacity",
            s.setting,
            vramlab_traces::ranks_phrase(&s.oom_ranks)
        );
    }
    outln!("{}", fits_note(from));
}

fn fits_cell(s: &JobSetting) -> String {
    match (&s.fits_on, s.oom_ranks.is_empty()) {
        (Some(c), _) => c.clone(),
        (None, true) => "none".into(),
        (None, false) => "OOM".into(),
    }
}

/// What the columns of [`print_job`] mean.
pub fn fits_note(from: FitsFrom) -> String {
    let (needs, fits) = match from {
        FitsFrom::PeakReserved { on_card } => (
            "the worst rank's peak reserved",
            format!(
                "from peak reserved on {}; `vramlab oom-point JOB` gives the smallest card, which can be smaller",
                if on_card {
                    "the capacity above"
                } else {
                    "an unlimited device"
                }
            ),
        ),
        FitsFrom::SmallestCapacity => (
            "the job's smallest capacity",
            "from the job's smallest capacity, the largest of its ranks'".to_string(),
        ),
    };
    format!(
        "(least rank: of the ranks that did not run out of memory; imbalance: worst − least peak reserved, as a share of the least; needs: {needs} + the bytes outside the allocator; fits on ({fits}): the smallest GPU of `vramlab gpus` whose memory, less {} for the CUDA context and less the outside bytes, holds the worst rank)",
        bytes(CONTEXT_ALLOWANCE)
    )
}

/// What the job table of [`print_oom_points`] means.
fn oom_point_note() -> String {
    format!(
        "(smallest capacity: the worst rank's, the largest of the ranks'; needs: it + the bytes outside the allocator; card: the smallest GPU of `vramlab gpus` whose memory, less {} for the CUDA context and less the outside bytes, holds it)",
        bytes(CONTEXT_ALLOWANCE)
    )
}

/// The OOM points: per trace, then the job's per setting.
pub fn print_oom_points(
    job: &Job,
    groups: &[RankGroup],
    per_trace: &[Vec<vramlab_replay::OomPoint>],
    points: &[JobOomPoint],
) {
    print_header(job, groups);
    outln!();
    let mut tab = Table::new(vec![
        "ranks".into(),
        "setting".into(),
        "smallest capacity".into(),
        "live peak (bound)".into(),
        "checked".into(),
    ])
    .left(1);
    for (g, ps) in groups.iter().zip(per_trace) {
        for p in ps {
            tab.row(vec![
                g.label.clone(),
                p.setting.clone(),
                bytes(p.min_capacity),
                bytes(p.lower_bound),
                if p.verified { "yes" } else { "no" }.into(),
            ]);
        }
    }
    out!("{}", tab.render());
    outln!();
    outln!("job ({} ranks), worst rank per setting:", job.world_size);
    let mut tab = Table::new(vec![
        "setting".into(),
        "worst rank".into(),
        "smallest capacity".into(),
        "outside".into(),
        "needs".into(),
        "card".into(),
    ]);
    for p in points {
        tab.row(vec![
            p.setting.clone(),
            p.worst_rank.to_string(),
            bytes(p.min_capacity),
            bytes(p.outside_allocator_bytes),
            bytes(p.needs_bytes),
            p.card.clone().unwrap_or_else(|| "none".into()),
        ]);
    }
    out!("{}", tab.render());
    outln!("{}", oom_point_note());
}

/// `recommend JOB` for people: the job, the capacity, the ranking, each
/// rank.
/// What [`print_recommend`] shows.
pub struct JobAdvice<'a> {
    /// What each rank's allocator may use.
    pub capacity: u64,
    /// The ranking of the job's rows.
    pub recommendation: &'a Recommendation,
    /// How many ranked settings to show.
    pub top: usize,
    /// Each rank group under the first-ranked setting and the defaults.
    pub per_rank: &'a [RankFit],
    /// The job's figures under those settings.
    pub settings: &'a [JobSetting],
}

pub fn print_recommend(
    (job, groups): (&Job, &[RankGroup]),
    capacity_line: Option<String>,
    a: &JobAdvice<'_>,
    target: &TorchTarget,
) {
    print_header(job, groups);
    if let Some(line) = capacity_line {
        outln!("{line}");
    }
    outln!("{}", target.describe());
    let name = format!("job (worst of {} ranks)", job.world_size);
    crate::render::recommendation::print_recommendation(
        &name,
        &bytes(a.capacity),
        a.recommendation,
        a.top,
    );
    outln!();
    let cell = |f: &Option<RowFit>| match f {
        Some(f) => (
            bytes(f.peak_reserved_bytes),
            if f.fits { "yes" } else { "no" }.to_string(),
        ),
        None => ("-".into(), "-".into()),
    };
    let winner = a
        .per_rank
        .iter()
        .find_map(|r| r.recommended.as_ref().map(|f| f.setting.clone()))
        .unwrap_or_default();
    outln!("per rank (recommended: {winner}):");
    let mut tab = Table::new(vec![
        "ranks".into(),
        "recommended".into(),
        "fits".into(),
        "default".into(),
        "fits".into(),
    ]);
    for r in a.per_rank {
        let (p, f) = cell(&r.recommended);
        let (dp, df) = cell(&r.default);
        tab.row(vec![r.ranks.clone(), p, f, dp, df]);
    }
    out!("{}", tab.render());
    outln!();
    print_job(job, a.settings, "peak reserved", FitsFrom::SmallestCapacity);
}
