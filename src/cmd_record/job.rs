//! `vramlab record --world-size N`: a script written for `torchrun`, one
//! recording per chosen rank on its own fake GPU, as a job folder
//! (`job.json` and `rankR.pickle`) that every vramlab command reads.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::json;
use vramlab_traces::{JOB_FILE, Job};

/// Bytes NCCL's buffers take per communicator of more than one rank, as
/// the CPU recorder estimates them (`vramlab_record.distributed`): a ring's
/// two neighbours × 16 channels × NCCL_BUFFSIZE (4 MiB). NCCL does not run
/// on the fake GPU, so this is a model, and labelled so in the manifest.
const NCCL_PER_GROUP: u64 = 2 * 16 * (4 << 20);

/// The ranks `--ranks` names: `all`, or a comma list of ranks and `A-B`
/// ranges, each in `0..world`.
pub(super) fn parse_ranks(text: &str, world: u32) -> Result<Vec<u32>> {
    if text.trim() == "all" {
        return Ok((0..world).collect());
    }
    let mut ranks = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = || format!("--ranks: '{part}' is not a rank, a range A-B or 'all'");
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let a: u32 = a.parse().with_context(bad)?;
        let b: u32 = b.parse().with_context(bad)?;
        for r in a..=b {
            if r >= world {
                bail!(
                    "--ranks: rank {r} is outside the world of {world} ranks (0..{})",
                    world - 1
                );
            }
            ranks.push(r);
        }
    }
    ranks.sort_unstable();
    ranks.dedup();
    if ranks.is_empty() {
        bail!("--ranks: no rank given");
    }
    Ok(ranks)
}

/// The environment `torchrun` gives rank `rank` of `world` with
/// `per_node` GPUs per node.
pub(super) fn rank_env(rank: u32, world: u32, per_node: u32) -> Vec<(String, String)> {
    let node = rank / per_node;
    [
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", world.to_string()),
        ("LOCAL_RANK", (rank % per_node).to_string()),
        ("LOCAL_WORLD_SIZE", per_node.to_string()),
        ("GROUP_RANK", node.to_string()),
        ("NODE_RANK", node.to_string()),
        ("MASTER_ADDR", "127.0.0.1".to_string()),
        ("MASTER_PORT", "29500".to_string()),
        ("VRAMLAB_RECORD_FAKE_WORLD", "1".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Where rank `rank`'s snapshot goes in the job folder.
pub(super) fn rank_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank{rank}.pickle"))
}

/// One recorded rank, as the manifest needs it.
pub(super) struct Recorded {
    /// The rank.
    pub rank: u32,
    /// Its events' digest (ranks with equal digests made the same requests).
    pub digest: Option<String>,
    /// The sizes of the process groups it was in.
    pub groups: Vec<u64>,
}

/// Writes `dir/job.json`: each recorded rank with its snapshot, or `same_as`
/// an earlier recorded rank whose events it repeats (`recorded`; its file
/// removed); every other rank like the first recorded one (`assumed`); and
/// NCCL's buffers estimated from the process groups. Read back through
/// [`Job::read`], so that what is written is what vramlab reads.
pub(super) fn write_manifest(
    dir: &Path,
    world: u32,
    recorded: &[Recorded],
    script: &str,
) -> Result<Job> {
    let Some(first) = recorded.first().map(|r| r.rank) else {
        bail!("no rank was recorded");
    };
    let mut kept: Vec<&Recorded> = Vec::new();
    let mut entries = Vec::with_capacity(world as usize);
    for r in 0..world {
        let Some(rec) = recorded.iter().find(|x| x.rank == r) else {
            entries.push(json!({"rank": r, "same_as": first, "basis": "assumed"}));
            continue;
        };
        let twin = kept
            .iter()
            .find(|k| k.digest.is_some() && k.digest == rec.digest)
            .map(|k| k.rank);
        match twin {
            Some(t) => {
                let file = rank_file(dir, r);
                std::fs::remove_file(&file)
                    .with_context(|| format!("removing {}", file.display()))?;
                entries.push(json!({"rank": r, "same_as": t, "basis": "recorded"}));
            }
            None => {
                kept.push(rec);
                entries.push(json!({"rank": r, "trace": format!("rank{r}.pickle")}));
            }
        }
    }
    let nccl = recorded
        .iter()
        .map(|r| r.groups.iter().filter(|&&n| n > 1).count() as u64 * NCCL_PER_GROUP)
        .max()
        .unwrap_or(0);
    let mut manifest = json!({
        "vramlab_job": 1,
        "world_size": world,
        "source": format!("vramlab record --world-size {world}: {script} on the fake GPU, one process per recorded rank, the other ranks taken to hold its data (a process group whose collectives move nothing)"),
        "ranks": entries,
    });
    if let (true, Some(top)) = (nccl > 0, manifest.as_object_mut()) {
        top.insert(
            "outside_allocator".into(),
            json!({
                "bytes": nccl,
                "what": "NCCL buffers, estimate (NCCL does not run on the fake GPU): 2 ring neighbours x 16 channels x 4 MiB per communicator of more than one rank",
            }),
        );
    }
    let path = dir.join(JOB_FILE);
    let text = serde_json::to_string_pretty(&manifest)? + "\n";
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Job::read(&path).map_err(|e| anyhow::anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_read_as_torchrun_numbers_them() {
        assert_eq!(parse_ranks("all", 3).unwrap(), [0, 1, 2]);
        assert_eq!(parse_ranks("0, 5-6,5", 8).unwrap(), [0, 5, 6]);
        assert!(
            parse_ranks("8", 8)
                .unwrap_err()
                .to_string()
                .contains("outside the world of 8")
        );
        assert!(
            parse_ranks("x", 8)
                .unwrap_err()
                .to_string()
                .contains("'x' is not a rank")
        );
        let env = rank_env(9, 16, 8);
        assert!(env.contains(&("LOCAL_RANK".into(), "1".into())));
        assert!(env.contains(&("NODE_RANK".into(), "1".into())));
    }
}
