//! Options shared by several commands: settings, target version, device.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::format::parse_size;
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::target::gpus::{Gpu, find_gpu};
use vramlab_replay::io::load::Loaded;
use vramlab_replay::target::release::{TorchTarget, target_of};
use vramlab_replay::{PolicySpec, Scenario, Start};
use vramlab_traces::Trace;
use vramlab_traces::io::Format;

/// Which allocator settings to use.
#[derive(Debug, Clone, Args)]
pub struct ConfArgs {
    /// A PYTORCH_ALLOC_CONF string, e.g. "expandable_segments:True" or
    /// "max_split_size_mb:512,roundup_power2_divisions:4". Repeat to compare
    /// several settings side by side. Use "" or "default" for the defaults.
    #[arg(long = "conf", value_name = "STR")]
    pub confs: Vec<String>,

    /// Read the settings from PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF
    /// with the precedence of the target PyTorch version.
    #[arg(long)]
    pub conf_from_env: bool,

    /// Replay the trace's recorded settings (snapshots record them).
    #[arg(long)]
    pub recorded_conf: bool,

    /// PyTorch release whose allocator rules apply (2.1 … 2.11). Default:
    /// the release the snapshot was recorded with (detected from its keys;
    /// the newest of the possible ones), else the trace's framework header,
    /// else 2.11.
    #[arg(long = "torch-version", value_name = "X.Y")]
    pub torch_version: Option<TorchVersion>,

    /// Per-process memory fraction, as torch.cuda.set_per_process_memory_fraction(F).
    #[arg(long, value_name = "F")]
    pub fraction: Option<f64>,

    /// Allocation policy the --conf strings configure: native (PyTorch's
    /// caching allocator), direct (no cache), bfc (TensorFlow/XLA), async
    /// (cudaMallocAsync-like pool), stitch (GMLake-style stitching).
    #[arg(long, value_name = "NAME", default_value = "native")]
    pub policy: String,
}

impl ConfArgs {
    /// The PyTorch release(s) that apply to `trace`.
    pub fn target(&self, trace: Option<&Trace>) -> TorchTarget {
        match trace {
            Some(t) => target_of(t, self.torch_version),
            None => TorchTarget::user(self.torch_version.unwrap_or(TorchVersion::NEWEST)),
        }
    }

    /// The release whose rules apply to `trace`.
    pub fn version_for(&self, trace: Option<&Trace>) -> TorchVersion {
        self.target(trace).rules
    }

    /// The policies to run, in order: `--policy` with each `--conf`.
    pub fn policies(&self, trace: Option<&Trace>) -> Result<Vec<PolicySpec>> {
        if self.policy == "native" {
            return Ok(self
                .settings(trace)?
                .into_iter()
                .map(PolicySpec::Native)
                .collect());
        }
        if self.conf_from_env || self.recorded_conf {
            bail!(
                "--conf-from-env and --recorded-conf are PyTorch settings: they need --policy native"
            );
        }
        if self.fraction.is_some() {
            bail!("--fraction is PyTorch's memory fraction: it needs --policy native");
        }
        let confs: Vec<&str> = if self.confs.is_empty() {
            vec![""]
        } else {
            self.confs.iter().map(String::as_str).collect()
        };
        confs
            .into_iter()
            .map(|c| {
                PolicySpec::parse(&self.policy, c, self.version_for(trace))
                    .map_err(|e| anyhow::anyhow!("--policy {} --conf {c:?}: {e}", self.policy))
            })
            .collect()
    }

    /// The native policy's settings to run, in order.
    pub fn settings(&self, trace: Option<&Trace>) -> Result<Vec<AllocConf>> {
        if self.policy != "native" {
            bail!(
                "this command runs PyTorch's native allocator only (not --policy {})",
                self.policy
            );
        }
        let v = self.version_for(trace);
        let mut out = Vec::new();
        if self.conf_from_env {
            let (c, var) = AllocConf::from_env(v, |k| std::env::var(k).ok())
                .context("in the environment's allocator settings")?;
            if let Some(var) = var {
                eprintln!("note: settings from {var}: {:?}", c.raw);
            } else {
                eprintln!("note: no allocator settings in the environment; using the defaults");
            }
            out.push(c);
        }
        if self.recorded_conf {
            let Some(t) = trace else {
                bail!("--recorded-conf needs a trace");
            };
            match &t.header.alloc_conf {
                Some(s) => out.push(
                    AllocConf::parse(s, v)
                        .with_context(|| format!("in the trace's recorded settings {s:?}"))?,
                ),
                None => bail!("the trace does not record the settings it ran under"),
            }
        }
        for s in &self.confs {
            let s = if s == "default" { "" } else { s.as_str() };
            out.push(AllocConf::parse(s, v).with_context(|| format!("in --conf {s:?}"))?);
        }
        if out.is_empty() {
            out.push(AllocConf::new(v));
        }
        if let Some(f) = self.fraction {
            if !(0.0..=1.0).contains(&f) {
                bail!(
                    "--fraction {f}: must be between 0 and 1, as torch.cuda.set_per_process_memory_fraction requires"
                );
            }
        }
        Ok(out)
    }
}

/// The simulated device: a card by name, or a capacity in bytes.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// The GPU the job runs on, by name (`vramlab gpus` lists them: h100-80gb,
    /// a100-40gb, rtx4090, …): its memory less the CUDA context.
    #[arg(long, value_name = "NAME", value_parser = parse_gpu_arg, conflicts_with = "capacity")]
    pub gpu: Option<&'static Gpu>,
    /// Device capacity, exact: bytes or a size like 24GiB, 80GB (= 80·10^9
    /// bytes, not 80 GiB), 512MiB. For a card, prefer --gpu (default:
    /// unlimited).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub capacity: Option<u64>,
}

impl DeviceArgs {
    /// The capacity in bytes (`None` = unlimited).
    pub fn bytes(&self) -> Option<u64> {
        self.capacity.or(self.gpu.map(Gpu::usable_bytes))
    }

    /// How the capacity was given, for people: `rtx4090 (23.49 GiB
    /// usable)` or `24.00 GiB`.
    pub fn describe(&self) -> Option<String> {
        match (self.gpu, self.capacity) {
            (Some(g), _) => Some(format!(
                "{} ({} usable of {})",
                g.name,
                crate::table::bytes(g.usable_bytes()),
                crate::table::bytes(g.total_bytes())
            )),
            (None, Some(c)) => Some(crate::table::bytes(c)),
            (None, None) => None,
        }
    }
}

/// clap value parser for `--gpu NAME`.
pub fn parse_gpu_arg(s: &str) -> Result<&'static Gpu, String> {
    find_gpu(s)
}

/// clap value parser for sizes.
pub fn parse_size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

/// The trace to read.
#[derive(Debug, Clone, Args)]
pub struct TraceArgs {
    /// Trace file: a PyTorch memory snapshot (.pickle, .pkl, also
    /// gzip-compressed .pickle.gz), a native trace (.csv, .csv.gz, .vlt,
    /// .vlt.zst) or a RAPIDS RMM log (.csv).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// The file's format, when its extension does not say: csv, csv.gz,
    /// vlt, vlt.zst, snapshot, rmm.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    pub format: Option<Format>,

    /// Which GPU of a multi-device snapshot to use (default: the device
    /// with the most allocations, named in a note).
    #[arg(long = "trace-device", value_name = "N")]
    pub device: Option<u32>,
}

/// How a replay of a snapshot recorded mid-run begins.
#[derive(Debug, Clone, Args)]
pub struct StartArgs {
    /// For snapshots recorded mid-run: `recorded` seeds the allocator state
    /// the recording began with, as it was; `fresh` allocates the blocks in
    /// use at the first entry under each setting, then replays. Default:
    /// `recorded` when only the recorded settings are replayed on an
    /// unlimited device, `fresh` for every what-if (another setting, policy
    /// or capacity).
    #[arg(long, value_name = "recorded|fresh")]
    pub start: Option<Start>,
}

pub fn parse_format(s: &str) -> Result<Format, String> {
    Format::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Format::ALL.iter().map(|(_, n, _)| *n).collect();
        format!("unknown format '{s}' (known: {})", names.join(", "))
    })
}

impl TraceArgs {
    /// Reads the trace; snapshots are laid out under PyTorch `version` rules.
    pub fn load(&self, version: Option<TorchVersion>) -> Result<Trace> {
        let t = self.load_any(version)?;
        if t.events.is_empty() {
            let why = t
                .notes
                .first()
                .cloned()
                .unwrap_or_else(|| "the trace has no events".into());
            bail!("{}: nothing to replay: {why}", self.trace.display());
        }
        Ok(t)
    }

    /// Reads the trace, which may have no events (a state-only snapshot).
    pub fn load_any(&self, version: Option<TorchVersion>) -> Result<Trace> {
        if self.trace.is_dir() {
            bail!(
                "{} is a folder: give one trace file (`vramlab sweep {}` takes every trace in a folder)",
                self.trace.display(),
                self.trace.display()
            );
        }
        let loaded = crate::progress::load_devices(&self.trace, self.format, version)?;
        let t = pick_device(&self.trace, loaded, self.device)?;
        for n in &t.notes {
            eprintln!("note: {}: {n}", self.trace.display());
        }
        if !t.events.is_empty() && t.num_allocs() == 0 {
            eprintln!(
                "warning: {}: the trace has no allocations: every setting reserves the same",
                self.trace.display()
            );
        }
        Ok(t)
    }
}

/// `paths` with every folder replaced by the trace files inside it (by
/// extension, sorted; not recursing). A folder without traces is an error.
pub fn expand_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut inside: Vec<PathBuf> = std::fs::read_dir(p)
            .with_context(|| format!("cannot list {}", p.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.is_file() && Format::from_path(f).is_some())
            .collect();
        if inside.is_empty() {
            bail!(
                "{}: a folder with no traces in it (known extensions: .pickle, .pkl, .pickle.gz, .csv, .csv.gz, .vlt, .vlt.zst)",
                p.display()
            );
        }
        inside.sort();
        out.extend(inside);
    }
    Ok(out)
}

/// The name a trace goes by in tables: the file name, with `#N` for a
/// device other than 0.
pub fn display_name(path: &Path, t: &Trace) -> String {
    let mut name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().to_string(),
    );
    if t.header.device != 0 {
        name.push_str(&format!("#{}", t.header.device));
    }
    name
}

/// Picks one device's trace: `device`, the only one, or the one with the
/// most allocations (named in a note). Devices that could not be read are
/// noted, and stop nothing unless asked for.
pub fn pick_device(path: &Path, loaded: Loaded, device: Option<u32>) -> Result<Trace> {
    let name = path.display();
    let notes: Vec<String> = loaded
        .failed
        .iter()
        .filter(|_| device.is_none())
        .map(|(d, e)| format!("note: {name}: device {d} skipped: {e}"))
        .collect();
    let t = pick_readable(path, loaded, device)?;
    for n in notes {
        eprintln!("{n}");
    }
    Ok(t)
}

fn pick_readable(path: &Path, loaded: Loaded, device: Option<u32>) -> Result<Trace> {
    let name = path.display();
    let have = || {
        loaded
            .traces
            .iter()
            .map(|t| t.header.device.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(d) = device {
        if let Some((_, e)) = loaded.failed.iter().find(|(x, _)| *x == d) {
            bail!("device {d}: {e}");
        }
        let list = have();
        return loaded
            .traces
            .into_iter()
            .find(|t| t.header.device == d)
            .with_context(|| {
                format!("{name}: no trace for device {d} (devices in the file: {list})")
            });
    }
    let n = loaded.traces.len();
    if n == 0 {
        match loaded.failed.into_iter().next() {
            Some((_, e)) => return Err(e.into()),
            None => bail!("{name}: the file holds no allocation events"),
        }
    }
    if n > 1 {
        let list = have();
        let best = loaded
            .traces
            .iter()
            .enumerate()
            .max_by_key(|(i, t)| (t.num_allocs(), std::cmp::Reverse(*i)))
            .map_or(0, |(i, _)| i);
        let t = loaded.traces.into_iter().nth(best).context("no device")?;
        eprintln!(
            "note: {name} holds devices {list}; using device {} (the most allocations); pick another with --trace-device N",
            t.header.device
        );
        return Ok(t);
    }
    loaded.traces.into_iter().next().context("no device")
}

/// Builds the scenarios for a trace.
pub fn scenarios(confs: &ConfArgs, dev: &DeviceArgs, trace: &Trace) -> Result<Vec<Scenario>> {
    Ok(confs
        .policies(Some(trace))?
        .into_iter()
        .map(|p| {
            let mut s = Scenario::new(p).with_capacity(dev.bytes());
            s.memory_fraction = confs.fraction;
            s
        })
        .collect())
}
