//! `vramlab record`: a user's script, unchanged, on the fake GPU — PyTorch's
//! and NVIDIA's own code deciding every allocation — and PyTorch's snapshot
//! of it.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use vramlab_oracle::fake::{locate, prepare};
use vramlab_oracle::{
    FakeCard, Installer, Interpreter, RecordOptions, keep_snapshot, record_script,
};
use vramlab_replay::gpus::{Gpu, find_gpu};

use vramlab_allocator::format::{bytes_words, count};

/// Arguments of `vramlab record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where PyTorch's memory snapshot goes (a .pickle every vramlab
    /// command reads; `vramlab convert` turns it into CSV or .vlt).
    #[arg(short = 'o', long = "out", value_name = "OUT")]
    out: PathBuf,
    /// The card the fake GPU is: its name, memory and properties, so that
    /// PyTorch and NVIDIA's libraries choose as they would on it
    /// (h100-80gb, h100-94gb or h200: the cards whose properties the fake
    /// device has).
    #[arg(long, value_name = "NAME", default_value = "h200")]
    gpu: String,
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
    /// Keep the launcher, its summary and the snapshot here (default: a
    /// temporary folder, removed afterwards).
    #[arg(long, value_name = "DIR")]
    work: Option<PathBuf>,
    /// The script, then its arguments (after `--`).
    #[arg(value_name = "SCRIPT", required = true, last = true)]
    command: Vec<OsString>,
}

/// The cards whose properties the fake device reports (compute capability
/// 9.0), by `--gpu` name, with the name `cudaGetDeviceProperties` gives.
const FAKE_CARDS: &[(&str, &str)] = &[
    ("h100-80gb", "NVIDIA H100 80GB HBM3"),
    ("h100-94gb", "NVIDIA H100 NVL"),
    ("h200", "NVIDIA H200"),
];

/// The fake card for `--gpu NAME`.
fn card(name: &str) -> Result<FakeCard> {
    let gpu: &Gpu = find_gpu(name).map_err(anyhow::Error::msg)?;
    let Some((_, device_name)) = FAKE_CARDS.iter().find(|(n, _)| *n == gpu.name) else {
        let known: Vec<&str> = FAKE_CARDS.iter().map(|(n, _)| *n).collect();
        bail!(
            "--gpu {name}: the fake GPU reports the properties of compute capability 9.0 cards only ({}); \
             on {} PyTorch and NVIDIA's libraries would choose kernels and workspaces for a card it is not",
            known.join(", "),
            gpu.description
        );
    };
    Ok(FakeCard {
        name: (*device_name).to_string(),
        total_bytes: gpu.total_bytes(),
        usable_bytes: gpu.usable_bytes(),
    })
}

struct Scratch {
    dir: PathBuf,
    keep: bool,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs the command.
pub fn run(args: RecordArgs) -> Result<()> {
    let card = card(&args.gpu)?;
    let Some((script, script_args)) = args.command.split_first() else {
        bail!("no script: give it after `--` (vramlab record -o OUT.pickle -- train.py ARGS)");
    };
    let script = PathBuf::from(script);
    if !script.is_file() {
        bail!("{}: no such script", script.display());
    }
    let interp = match &args.python {
        Some(p) => Interpreter::given(p)?,
        None => Installer::default().ensure(&args.torch)?,
    };
    let lib = locate()?;
    let fake = prepare(&lib, &interp.wheel.soname, &vramlab_oracle::cache_dir())?;
    let scratch = Scratch {
        dir: args.work.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("vramlab-record-{}", std::process::id()))
        }),
        keep: args.work.is_some(),
    };
    errln!(
        "record: {} on a fake {} ({} usable) with torch {}",
        script.display(),
        card.name,
        bytes_words(card.usable_bytes),
        interp.wheel.torch_version
    );
    let opts = RecordOptions {
        script: script.clone(),
        args: script_args.to_vec(),
        card,
        work: scratch.dir.clone(),
        max_entries: args.max_entries,
        stacks: args.stacks.clone(),
        track_values: args.values == "track",
        devices: 1,
        env: Vec::new(),
    };
    let rec = record_script(&interp, &fake, &opts)?;
    let s = &rec.summary;
    if rec.snapshot.is_some() {
        keep_snapshot(&rec, &args.out)?;
        errln!(
            "record: wrote {} (PyTorch {}: peak reserved {}, peak allocated {}, {} cudaMalloc calls, {} OOMs)",
            args.out.display(),
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
                "record: device values read: {} known, {} assumed (typical data){}, {} from the device (copied there, else zero)",
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
                "{} exited with status {} ({why}); the recording up to there is in {}",
                script.display(),
                s.exit_status,
                args.out.display()
            );
        }
        bail!(
            "{} exited with status {} ({why})",
            script.display(),
            s.exit_status
        );
    }
    if rec.snapshot.is_none() {
        bail!(
            "{} ran without using CUDA: nothing to record (does it choose its device with torch.cuda.is_available()?)",
            script.display()
        );
    }
    Ok(())
}
