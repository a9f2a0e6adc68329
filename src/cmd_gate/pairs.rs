//! What `gate` compares: two traces, or two multi-rank jobs (folders with a
//! `job.json`, as `vramlab record --world-size N` writes them) rank by rank
//! — each pair of distinct traces once, named by the ranks that share it.

use std::path::Path;

use anyhow::{Result, bail};
use vramlab_allocator::TorchVersion;
use vramlab_traces::Trace;

use crate::invoke::BadArgument;
use crate::job::{LoadedJob, job_file};

/// One comparison: a baseline trace, its candidate, and the ranks they
/// stand for (`None`: two single traces).
pub(crate) struct Pair {
    /// `ranks 0-6`.
    pub ranks: Option<String>,
    pub baseline: Trace,
    pub candidate: Trace,
    /// Each side's allocator capacity on the card: the card less what a
    /// rank of that job spends outside the allocator (jobs only; `None`:
    /// the card's, as given).
    pub capacity: [Option<u64>; 2],
    /// Each side's bytes per rank outside the allocator (jobs only).
    pub outside: [u64; 2],
}

/// The pairs of `baseline` and `candidate`: two traces (read by `load`)
/// or two jobs.
pub(crate) fn pairs(
    baseline: &Path,
    candidate: &Path,
    release: Option<TorchVersion>,
    card: Option<u64>,
    load: impl Fn(&Path) -> Result<Trace>,
) -> Result<Vec<Pair>> {
    match (job_file(baseline), job_file(candidate)) {
        (None, None) => Ok(vec![Pair {
            ranks: None,
            baseline: load(baseline)?,
            candidate: load(candidate)?,
            capacity: [None, None],
            outside: [0, 0],
        }]),
        (Some(a), Some(b)) => job_pairs(&a, &b, release, card),
        (a, _) => {
            let (job, trace) = if a.is_some() {
                (baseline, candidate)
            } else {
                (candidate, baseline)
            };
            bail!(BadArgument(format!(
                "{} is a multi-rank job but {} is a single trace: gate two jobs (each a folder with a job.json) or two traces",
                job.display(),
                trace.display()
            )))
        }
    }
}

/// Rank by rank: each rank's baseline trace against its candidate trace,
/// each distinct pair once.
fn job_pairs(
    a: &Path,
    b: &Path,
    release: Option<TorchVersion>,
    card: Option<u64>,
) -> Result<Vec<Pair>> {
    let ja = LoadedJob::read(a, release, card)?;
    let jb = LoadedJob::read(b, release, card)?;
    if ja.job.world_size != jb.job.world_size {
        bail!(BadArgument(format!(
            "{} has {} ranks and {} has {}: gate the same job recorded twice",
            a.display(),
            ja.job.world_size,
            b.display(),
            jb.job.world_size
        )));
    }
    let group_of = |j: &LoadedJob, rank: u32| j.groups.iter().position(|g| g.ranks.contains(&rank));
    // (baseline group, candidate group) → its ranks, in rank order.
    let mut seen: Vec<((usize, usize), Vec<u32>)> = Vec::new();
    for rank in 0..ja.job.world_size {
        let (Some(ga), Some(gb)) = (group_of(&ja, rank), group_of(&jb, rank)) else {
            bail!(BadArgument(format!(
                "rank {rank} has no trace in {}",
                if group_of(&ja, rank).is_none() {
                    a.display()
                } else {
                    b.display()
                }
            )));
        };
        match seen.iter_mut().find(|(k, _)| *k == (ga, gb)) {
            Some((_, ranks)) => ranks.push(rank),
            None => seen.push(((ga, gb), vec![rank])),
        }
    }
    let mut out = Vec::with_capacity(seen.len());
    for ((ga, gb), ranks) in seen {
        let (Some(ta), Some(tb)) = (ja.traces.get(ga), jb.traces.get(gb)) else {
            continue;
        };
        out.push(Pair {
            ranks: Some(format!(
                "{} {}",
                if ranks.len() == 1 { "rank" } else { "ranks" },
                vramlab_traces::rank_ranges(&ranks)
            )),
            baseline: ta.clone(),
            candidate: tb.clone(),
            capacity: [ja.capacity, jb.capacity],
            outside: [ja.outside(), jb.outside()],
        });
    }
    Ok(out)
}
