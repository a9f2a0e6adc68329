//! Recording a user's script on the fake device (`vramlab record`): the
//! script runs unchanged under a torch wheel's interpreter with memory
//! history on, PyTorch's allocator and NVIDIA's libraries decide every
//! allocation, and PyTorch's own snapshot is what comes out.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::{Deserialize, Serialize};

use crate::OracleError;
use crate::fake::{FakeDevice, FakeDir};
use crate::install::Interpreter;

/// The launcher that runs the script (`record_script.py`).
const RECORD_SCRIPT_PY: &str = include_str!("record_script.py");
/// The value rules it follows uniform values with (the CPU recorder's).
const DATADEP_PY: &str = include_str!("../../workloads/record/vramlab_record/datadep.py");

/// The card the fake device pretends to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeCard {
    /// What `cudaGetDeviceProperties` calls it (`NVIDIA H200`).
    pub name: String,
    /// The fake device's card model (`VRAMLAB_FAKECUDA_CARD`: `h200`,
    /// `a100`, …), whose compute capability, SMs and caches it reports.
    pub model: String,
    /// Memory the driver reports (`cudaMemGetInfo`'s total).
    pub total_bytes: u64,
    /// Memory PyTorch can use (the total less the context): allocations
    /// beyond it fail as on the card.
    pub usable_bytes: u64,
}

/// How to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The script.
    pub script: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The card.
    pub card: FakeCard,
    /// Where the launcher writes `snapshot.pickle` and `summary.json`.
    pub work: PathBuf,
    /// `max_entries` of PyTorch's memory history.
    pub max_entries: u64,
    /// `python` (Python frames) or `all` (C++ too; slower).
    pub stacks: String,
    /// Follow known values so that reads of them (`bool(t)`, `.item()`)
    /// answer as on a GPU ("track"), or leave every read to the device
    /// ("device": what was copied there, else zero).
    pub track_values: bool,
    /// Events complete only when something synchronizes them
    /// (`VRAMLAB_FAKECUDA_EVENTS=sync`), not at once.
    pub events_on_sync: bool,
    /// Devices the fake has (ranks of one node see one each).
    pub devices: u32,
    /// Extra environment for the script (the torchrun variables of a rank).
    pub env: Vec<(String, String)>,
}

/// What the launcher saw (its `summary.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordSummary {
    /// `torch.__version__`.
    pub torch_version: String,
    /// The device's name as PyTorch read it.
    pub device_name: Option<String>,
    /// The script's exit status (0: it ran to the end).
    pub exit_status: i32,
    /// The exception that stopped it, if one did.
    pub error: Option<String>,
    /// Whether the script used CUDA at all.
    pub cuda_used: bool,
    /// `reserved_bytes.all.peak`.
    pub peak_reserved_bytes: Option<u64>,
    /// `allocated_bytes.all.peak`.
    pub peak_allocated_bytes: Option<u64>,
    /// `num_alloc_retries`.
    pub num_alloc_retries: Option<u64>,
    /// `num_ooms`.
    pub num_ooms: Option<u64>,
    /// `num_device_alloc`.
    pub num_device_alloc: Option<u64>,
    /// How reads of device values were answered (with value tracking).
    #[serde(default)]
    pub values: Option<ValueReads>,
    /// The size of each process group this rank was in (with a fake world).
    #[serde(default)]
    pub process_groups: Vec<u64>,
    /// A digest of the recorded events without addresses: equal digests,
    /// equal requests in the same order.
    #[serde(default)]
    pub events_digest: Option<String>,
}

/// Reads of device values (`.item()`, `bool(t)`) during a recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueReads {
    /// Of values known exactly (`torch.ones`, a `full` of a Python value,
    /// and what follows from them).
    pub known_reads: u64,
    /// Of values assumed by the typical-data policy (no EOS token, no NaN).
    pub assumed_reads: u64,
    /// Left to the device: what was copied there, else zero.
    pub device_reads: u64,
    /// Where the first assumed reads happened, with the value given.
    pub examples: Vec<String>,
}

/// A finished recording.
#[derive(Debug, Clone)]
pub struct Recording {
    /// PyTorch's snapshot (absent when the script never used CUDA).
    pub snapshot: Option<PathBuf>,
    /// What the launcher saw.
    pub summary: RecordSummary,
}

/// Runs the script on the fake device; its stdout and stderr are the
/// caller's.
pub fn record_script(
    interp: &Interpreter,
    fake: &FakeDir,
    opts: &RecordOptions,
) -> Result<Recording, OracleError> {
    if !opts.script.is_file() {
        return Err(OracleError::Record(format!(
            "{}: no such script",
            opts.script.display()
        )));
    }
    std::fs::create_dir_all(&opts.work).map_err(OracleError::io(&opts.work))?;
    let launcher = opts.work.join("record_script.py");
    std::fs::write(&launcher, RECORD_SCRIPT_PY).map_err(OracleError::io(&launcher))?;
    let rules = opts.work.join("vramlab_datadep.py");
    std::fs::write(&rules, DATADEP_PY).map_err(OracleError::io(&rules))?;
    let summary_path = opts.work.join("summary.json");
    let _ = std::fs::remove_file(&summary_path);
    let device = FakeDevice {
        capacity: Some(opts.card.usable_bytes),
        total: Some(opts.card.total_bytes),
        runtime_version: interp.wheel.runtime_version(),
        name: Some(opts.card.name.clone()),
        model: Some(opts.card.model.clone()),
        devices: Some(opts.devices),
        events_on_sync: opts.events_on_sync,
        ..Default::default()
    };
    let mut process = fake.python(interp, &device);
    let cmd = &mut process.cmd;
    cmd.arg(&launcher)
        .arg("--out")
        .arg(&opts.work)
        .arg("--max-entries")
        .arg(opts.max_entries.to_string())
        .arg("--stacks")
        .arg(&opts.stacks)
        .arg("--values")
        .arg(if opts.track_values { "track" } else { "device" })
        .arg("--")
        .arg(&opts.script)
        .args(&opts.args)
        .envs(opts.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::inherit());
    if std::env::var_os("TORCHINDUCTOR_CACHE_DIR").is_none() {
        // A fresh compile, as on a first run: inductor's cached autotuning
        // would skip the benchmarks whose buffers a first run allocates,
        // and make two recordings of one script differ.
        cmd.env("TORCHINDUCTOR_CACHE_DIR", opts.work.join("inductor-cache"));
    }
    let status = cmd.status().map_err(process.spawn_error())?;
    let text = std::fs::read_to_string(&summary_path).map_err(|_| {
        OracleError::Record(format!(
            "{} stopped ({status}) before the recording was written (see its output above)",
            opts.script.display()
        ))
    })?;
    let summary: RecordSummary = serde_json::from_str(&text)
        .map_err(|e| OracleError::Record(format!("{}: {e}", summary_path.display())))?;
    let snapshot = opts.work.join("snapshot.pickle");
    Ok(Recording {
        snapshot: snapshot.is_file().then_some(snapshot),
        summary,
    })
}

/// Copies a recording's snapshot to `to`.
pub fn keep_snapshot(rec: &Recording, to: &Path) -> Result<(), OracleError> {
    let Some(from) = &rec.snapshot else {
        return Err(OracleError::Record(
            "the script never used CUDA: there is no snapshot to write".into(),
        ));
    };
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(OracleError::io(dir))?;
    }
    std::fs::copy(from, to).map_err(OracleError::io(to))?;
    Ok(())
}
