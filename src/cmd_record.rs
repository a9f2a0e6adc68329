//! `vramlab record`: a user's script, unchanged, on the fake GPU — PyTorch's
//! and NVIDIA's own code deciding every allocation — and PyTorch's snapshot
//! of it.

mod job;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_oracle::fake::{locate, prepare};
use vramlab_oracle::{
    FakeCard, Installer, Interpreter, RecordOptions, Recording, keep_snapshot, record_script,
};
use vramlab_replay::gpus::{Gpu, find_gpu};

use vramlab_allocator::format::{bytes_words, count};

use crate::args::parse_size_arg;
use crate::scratch::Scratch;

/// Arguments of `vramlab record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where PyTorch's memory snapshot goes (a .pickle every vramlab
    /// command reads; `vramlab convert` turns it into CSV or .vlt); with
    /// --world-size, a job folder.
    #[arg(short = 'o', long = "out", value_name = "OUT")]
    out: PathBuf,
    /// The card the fake GPU is: its name, memory and properties, so that
    /// PyTorch and NVIDIA's libraries choose as they would on it
    /// (h200, h100-80gb, h100-94gb, a100-40gb, a100-80gb, l4, rtx4090: the
    /// cards whose properties the fake device has).
    #[arg(long, value_name = "NAME", default_value = "h200")]
    gpu: String,
    /// Memory PyTorch may use on the fake card, instead of the card's usable
    /// memory (e.g. 2TiB to see what a job that does not fit would need;
    /// the card's other properties stay).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    capacity: Option<u64>,
    /// The PyTorch release to run: its official wheel from PyPI (the newest
    /// patch of X.Y), installed on first use into the cache `vramlab oracle`
    /// uses ($VRAMLAB_ORACLE_CACHE, default ~/.cache/vramlab/oracle). Install
    /// your script's other packages (transformers, …) into that
    /// environment, or use --python.
    #[arg(long = "torch", value_name = "X.Y", default_value = "2.11")]
    torch: String,
    /// Run this Python instead (your environment, with a CUDA build of torch
    /// and whatever your script imports; nothing is installed into it).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Keep at most this many entries of memory history (PyTorch's
    /// `max_entries`; the oldest are dropped beyond it).
    #[arg(long, value_name = "N", default_value_t = 10_000_000)]
    max_entries: u64,
    /// Stack frames kept per allocation: python, or all (C++ too; slower).
    #[arg(long, value_name = "KIND", default_value = "python", value_parser = ["python", "all"])]
    stacks: String,
    /// How reads of device values (`.item()`, `bool(t)`, a Python `if` on a
    /// tensor) are answered, since kernels do not run: track (follow the
    /// values that are uniform and known — `torch.ones`, `full`, masks and
    /// comparisons made from them — and assume typical data for the rest:
    /// no EOS token, no NaN, so `generate` runs to `max_new_tokens`), or
    /// device (what the script copied to the device, else zero).
    #[arg(long, value_name = "HOW", default_value = "track", value_parser = ["track", "device"])]
    values: String,
    /// When a stream's events complete, which decides when PyTorch's pinned
    /// host allocator may reuse a block a `non_blocking` copy used:
    /// complete (at once: a GPU done with every copy by the next pinned
    /// request, the fewest bytes pinned) or sync (only when the script
    /// synchronizes the stream, an event or the device: the most). The
    /// truth on a GPU lies between.
    #[arg(long, value_name = "WHEN", default_value = "complete", value_parser = ["complete", "sync"])]
    events: String,
    /// Record a script written for `torchrun` as ranks of a world of this
    /// many: each chosen rank runs in its own process with torchrun's
    /// environment and its own fake GPU, and every process group completes
    /// its collectives at once, as if every rank held this rank's data (NCCL
    /// does not run: its buffers are estimated).
    /// OUT is then a job folder (job.json, rankR.pickle). 1 is a world of
    /// one: torchrun's environment and process group, one rank.
    #[arg(long, value_name = "N")]
    world_size: Option<u32>,
    /// The ranks to record (with --world-size): all, or a list such as
    /// 0,7 or 0-3; the others are taken to be like the first (default: 0).
    #[arg(long, value_name = "LIST")]
    ranks: Option<String>,
    /// GPUs per node (with --world-size): LOCAL_RANK is the rank modulo it.
    #[arg(long, value_name = "N", default_value_t = 8)]
    gpus_per_node: u32,
    /// Ranks recorded at once (with --world-size; default: one per core).
    /// Each is a Python process with the script's host memory.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Keep the launcher, its summary and the snapshot here (default: a
    /// temporary folder, removed afterwards).
    #[arg(long, value_name = "DIR")]
    work: Option<PathBuf>,
    /// The script, then its arguments (after `--`).
    #[arg(value_name = "SCRIPT", required = true, last = true)]
    command: Vec<OsString>,
}

/// The cards whose properties the fake device has, by `--gpu` name: the
/// name `cudaGetDeviceProperties` gives, and the fake's card model
/// (`VRAMLAB_FAKECUDA_CARD`: compute capability, SMs, caches, shared memory).
const FAKE_CARDS: &[(&str, &str, &str)] = &[
    ("h100-80gb", "NVIDIA H100 80GB HBM3", "h100-80gb"),
    ("h100-94gb", "NVIDIA H100 NVL", "h100-94gb"),
    ("h200", "NVIDIA H200", "h200"),
    ("a100-40gb", "NVIDIA A100-SXM4-40GB", "a100"),
    ("a100-80gb", "NVIDIA A100-SXM4-80GB", "a100"),
    ("l4", "NVIDIA L4", "l4"),
    ("rtx4090", "NVIDIA GeForce RTX 4090", "rtx4090"),
];

/// The fake card for `--gpu NAME`.
fn card(name: &str) -> Result<FakeCard> {
    let gpu: &Gpu = find_gpu(name).map_err(anyhow::Error::msg)?;
    let Some((_, device_name, model)) = FAKE_CARDS.iter().find(|(n, _, _)| *n == gpu.name) else {
        let known: Vec<&str> = FAKE_CARDS.iter().map(|(n, _, _)| *n).collect();
        bail!(
            "--gpu {name}: the fake GPU has the properties of {} only; on {} PyTorch and NVIDIA's \
             libraries would choose kernels and workspaces for a card it is not",
            known.join(", "),
            gpu.description
        );
    };
    Ok(FakeCard {
        name: (*device_name).to_string(),
        model: (*model).to_string(),
        total_bytes: gpu.total_bytes(),
        usable_bytes: gpu.usable_bytes(),
    })
}

/// One process of the recording: its label, output file and environment.
struct Run {
    /// `rank 3: ` or empty.
    label: String,
    /// Where its snapshot goes.
    out: PathBuf,
    /// Its work folder.
    work: PathBuf,
    /// The torchrun environment of its rank.
    env: Vec<(String, String)>,
}

/// Runs the command.
pub fn run(args: RecordArgs) -> Result<()> {
    let mut card = card(&args.gpu)?;
    if let Some(c) = args.capacity {
        card.usable_bytes = c;
        card.total_bytes = card.total_bytes.max(c);
    }
    let Some((script, script_args)) = args.command.split_first() else {
        bail!("no script: give it after `--` (vramlab record -o OUT.pickle -- train.py ARGS)");
    };
    let script = PathBuf::from(script);
    if !script.is_file() {
        bail!("{}: no such script", script.display());
    }
    let sharded = args.world_size.is_some();
    let world = args.world_size.unwrap_or(1);
    if world == 0 {
        bail!("--world-size must be at least 1");
    }
    let ranks = match (&args.ranks, sharded) {
        (Some(_), false) => bail!("--ranks needs --world-size N (the script's world)"),
        (Some(text), true) => job::parse_ranks(text, world)?,
        (None, _) => vec![0],
    };
    let per_node = args.gpus_per_node.clamp(1, world);
    let interp = match &args.python {
        Some(p) => Interpreter::given(p)?,
        None => Installer::default().ensure(&args.torch)?,
    };
    let lib = locate()?;
    let fake = prepare(&lib, &interp.wheel.soname, &vramlab_oracle::cache_dir())?;
    let scratch = Scratch::new(args.work.as_deref(), "record");
    errln!(
        "record: {} on a fake {} ({} usable) with torch {}{}",
        script.display(),
        card.name,
        bytes_words(card.usable_bytes),
        interp.wheel.torch_version,
        if sharded {
            format!(
                ", as rank {} of {world}",
                vramlab_traces::rank_ranges(&ranks)
            )
        } else {
            String::new()
        }
    );
    let runs: Vec<Run> = if !sharded {
        vec![Run {
            label: String::new(),
            out: args.out.clone(),
            work: scratch.dir().to_path_buf(),
            env: Vec::new(),
        }]
    } else {
        std::fs::create_dir_all(&args.out)
            .with_context(|| format!("creating the job folder {}", args.out.display()))?;
        ranks
            .iter()
            .map(|&r| Run {
                label: format!("rank {r}: "),
                out: job::rank_file(&args.out, r),
                work: scratch.dir().join(format!("rank{r}")),
                env: job::rank_env(r, world, per_node),
            })
            .collect()
    };
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .clamp(1, runs.len().max(1));
    let record_one = |one: &Run| -> Result<Recording> {
        let opts = RecordOptions {
            script: script.clone(),
            args: script_args.to_vec(),
            card: card.clone(),
            work: one.work.clone(),
            max_entries: args.max_entries,
            stacks: args.stacks.clone(),
            track_values: args.values == "track",
            events_on_sync: args.events == "sync",
            devices: per_node,
            env: one.env.clone(),
        };
        let rec = record_script(&interp, &fake, &opts)?;
        say(one, &rec, &script, &interp.python)?;
        Ok(rec)
    };
    // Ranks are separate processes: up to `jobs` at once, results in rank order.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .context("starting the recording threads")?;
    let recs: Vec<Recording> = pool.install(|| {
        use rayon::prelude::*;
        runs.par_iter().map(record_one).collect::<Result<Vec<_>>>()
    })?;
    if sharded {
        let recorded: Vec<job::Recorded> = ranks
            .iter()
            .zip(&recs)
            .map(|(&rank, rec)| job::Recorded {
                rank,
                digest: rec.summary.events_digest.clone(),
                groups: rec.summary.process_groups.clone(),
            })
            .collect();
        let manifest =
            job::write_manifest(&args.out, world, &recorded, &script.display().to_string())?;
        let traces: Vec<String> = manifest.traces().iter().map(|t| t.label()).collect();
        errln!(
            "record: wrote {} (world of {world}: {})",
            args.out.join(vramlab_traces::JOB_FILE).display(),
            traces.join("; ")
        );
    }
    Ok(())
}

/// Keeps one process's snapshot and says what it recorded; fails when the
/// script failed or never used CUDA.
fn say(one: &Run, rec: &Recording, script: &Path, python: &Path) -> Result<()> {
    let s = &rec.summary;
    let label = &one.label;
    if rec.snapshot.is_some() {
        keep_snapshot(rec, &one.out)?;
        errln!(
            "record: {label}wrote {} (PyTorch {}: peak reserved {}, peak allocated {}, {} cudaMalloc calls, {} OOMs)",
            one.out.display(),
            s.torch_version,
            bytes_words(s.peak_reserved_bytes.unwrap_or(0)),
            bytes_words(s.peak_allocated_bytes.unwrap_or(0)),
            count(s.num_device_alloc.unwrap_or(0)),
            count(s.num_ooms.unwrap_or(0))
        );
    }
    if let Some(v) = &s.values {
        if v.assumed_reads + v.device_reads > 0 {
            errln!(
                "record: {label}device values read: {} known, {} assumed (typical data){}, {} from the device (copied there, else zero)",
                count(v.known_reads),
                count(v.assumed_reads),
                if v.examples.is_empty() {
                    String::new()
                } else {
                    format!(", e.g. {}", v.examples.join("; "))
                },
                count(v.device_reads)
            );
        }
    }
    if s.exit_status != 0 {
        let why = s.error.as_deref().unwrap_or("see its output above");
        if rec.snapshot.is_some() {
            bail!(
                "{label}{} exited with status {} ({why}); the recording up to there is in {}",
                script.display(),
                s.exit_status,
                one.out.display()
            );
        }
        if let Some(module) = why
            .strip_prefix("ModuleNotFoundError: No module named '")
            .and_then(|m| m.split(['\'', '.']).next())
        {
            bail!(
                "{label}{} exited with status {} ({why}): install what it imports into the interpreter that runs it \
                 (`{} -m pip install {module}`), or give your own environment with --python",
                script.display(),
                s.exit_status,
                python.display()
            );
        }
        bail!(
            "{label}{} exited with status {} ({why})",
            script.display(),
            s.exit_status
        );
    }
    if rec.snapshot.is_none() {
        bail!(
            "{label}{} ran without using CUDA: nothing to record (does it choose its device with torch.cuda.is_available()?)",
            script.display()
        );
    }
    Ok(())
}
