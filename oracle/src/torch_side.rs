//! One replay through PyTorch's own allocator: `torch_replay.py` run by a
//! wheel's interpreter on the fake device.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::{Deserialize, Serialize};

use crate::OracleError;
use crate::fake::{FakeDevice, FakeDir};
use crate::install::Interpreter;

/// The replay script, as committed in `workloads/record/torch_replay.py`.
pub(crate) const TORCH_REPLAY_PY: &str = include_str!("../../workloads/record/torch_replay.py");

/// The files the replay script needs beside it: the engine pools' and
/// outside memory's driver (`engine_pool.py`) and the engine pools'
/// allocator (`sleep_pool.c`, compiled on first use).
const BESIDE_SCRIPT: [(&str, &str); 2] = [
    (
        "engine_pool.py",
        include_str!("../../workloads/record/engine_pool.py"),
    ),
    (
        "sleep_pool.c",
        include_str!("../../workloads/record/sleep_pool.c"),
    ),
];

/// Writes the replay script, and what it needs beside it, into `work`;
/// the script's path.
pub(crate) fn write_replay_script(
    work: &std::path::Path,
) -> Result<std::path::PathBuf, crate::OracleError> {
    let script = work.join("torch_replay.py");
    std::fs::write(&script, TORCH_REPLAY_PY).map_err(crate::OracleError::io(&script))?;
    for (name, text) in BESIDE_SCRIPT {
        let path = work.join(name);
        std::fs::write(&path, text).map_err(crate::OracleError::io(&path))?;
    }
    Ok(script)
}

/// What PyTorch's allocator did (from the script's `summary.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TorchResult {
    /// `torch.__version__`.
    pub torch_version: String,
    /// Events the script replayed (it stops at the first OOM).
    pub events_replayed: u64,
    /// `reserved_bytes.all.peak`.
    pub peak_reserved_bytes: u64,
    /// `allocated_bytes.all.peak`.
    pub peak_allocated_bytes: u64,
    /// `num_alloc_retries`.
    pub num_alloc_retries: u64,
    /// `num_ooms`.
    pub num_ooms: u64,
    /// `num_device_alloc` (cudaMalloc calls, or mapped pages with
    /// expandable segments); `None` where the release does not count it
    /// (before 2.3): the device calls are compared all the same.
    pub num_device_alloc: Option<u64>,
    /// `num_device_free` (`None` before 2.3).
    pub num_device_free: Option<u64>,
    /// The first OOM, if any.
    pub oom: Option<TorchOom>,
    /// The pinned host allocator's figures (traces with host rows).
    #[serde(default)]
    pub host: Option<TorchHost>,
}

/// PyTorch's pinned host figures (`torch.cuda.host_memory_stats()`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TorchHost {
    /// `host_alloc` rows replayed.
    pub allocs: u64,
    /// `num_host_alloc`: host allocations from CUDA.
    pub num_host_alloc: u64,
    /// `allocated_bytes.peak`: peak pinned bytes held.
    pub peak_bytes: u64,
    /// `allocated_bytes.current` at the end of the trace.
    pub current_bytes: u64,
}

/// PyTorch's first out-of-memory error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TorchOom {
    /// The event that failed.
    pub event_index: u64,
    /// Its request.
    pub requested_bytes: u64,
    /// PyTorch's (or the engine's) message.
    #[serde(default)]
    pub message: String,
}

/// One run's inputs.
#[derive(Debug, Clone)]
pub(crate) struct TorchRun<'a> {
    /// The trace, in the native CSV format.
    pub csv: &'a Path,
    /// What to call it in messages.
    pub label: &'a str,
    /// `PYTORCH_CUDA_ALLOC_CONF` (`""`: the defaults).
    pub conf: &'a str,
    /// `set_per_process_memory_fraction`.
    pub fraction: Option<f64>,
    /// The fake device.
    pub device: FakeDevice,
    /// Where the script writes its files.
    pub out: PathBuf,
    /// Keep PyTorch's memory history (`snapshot.pickle` in `out`).
    pub history: bool,
}

/// Runs the script; `script` is where [`TORCH_REPLAY_PY`] was written.
pub(crate) fn run_torch(
    interp: &Interpreter,
    fake: &FakeDir,
    script: &Path,
    run: &TorchRun<'_>,
) -> Result<TorchResult, OracleError> {
    std::fs::create_dir_all(&run.out).map_err(OracleError::io(&run.out))?;
    let mut process = fake.python(interp, &run.device);
    let cmd = &mut process.cmd;
    cmd.arg(script)
        .arg(run.csv)
        .arg("--out")
        .arg(&run.out)
        .arg("--conf")
        .arg(run.conf)
        .arg("--quiet");
    if let Some(f) = run.fraction {
        cmd.arg("--fraction").arg(f.to_string());
    }
    if !run.history {
        cmd.arg("--no-history");
    }
    cmd.env_remove("PYTORCH_CUDA_ALLOC_CONF")
        .env_remove("PYTORCH_ALLOC_CONF")
        .stdin(Stdio::null());
    let out = cmd.output().map_err(process.spawn_error())?;
    let summary = run.out.join("summary.json");
    let fail = |why: String| OracleError::TorchReplay {
        trace: run.label.to_string(),
        setting: if run.conf.is_empty() {
            "default".into()
        } else {
            run.conf.into()
        },
        why,
    };
    let text = match std::fs::read_to_string(&summary) {
        Ok(t) => t,
        Err(_) => {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(fail(format!(
                "{} (no summary.json); its stderr ends:\n{}",
                out.status,
                tail.join("\n")
            )));
        }
    };
    serde_json::from_str(&text).map_err(|e| fail(format!("{}: {e}", summary.display())))
}
