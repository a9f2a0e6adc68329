//! Several PyTorch processes on one shared fake GPU
//! (`VRAMLAB_FAKECUDA_SHARED`), each replaying its trace through its own
//! allocator (`torch_replay.py --gate`), released phase by phase in a
//! schedule's order: the judge of `vramlab colocate`.
//!
//! A process writes the number of the phase it waits before to
//! `GATE/at` (`done` at its end) and runs it once `GATE/go-K` exists; every
//! process keeps what it holds until `GATE/go-end`, as a colocated replay's
//! tenants do.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use vramlab_allocator::Placement;
use vramlab_traces::Trace;

use crate::OracleError;
use crate::fake::{FakeDevice, FakeDir};
use crate::install::Interpreter;
use crate::torch_side::TorchResult;

/// One process on the shared device.
#[derive(Debug, Clone)]
pub struct ColocatedProcess<'a> {
    /// Its name in messages.
    pub label: String,
    /// Its trace (its `# phase:` marks are its steps).
    pub trace: &'a Trace,
    /// Its `PYTORCH_CUDA_ALLOC_CONF` (`""`: the defaults).
    pub conf: String,
    /// An inference engine sized by vLLM's rule: its utilization
    /// (`torch_replay.py --kv-util`).
    pub kv_util: Option<f64>,
}

/// The shared device and where the processes work.
#[derive(Debug, Clone)]
pub struct ColocatedJudge<'a> {
    /// The wheel.
    pub interp: &'a Interpreter,
    /// The fake device for it.
    pub fake: &'a FakeDir,
    /// A scratch folder.
    pub work: PathBuf,
    /// The device's memory.
    pub capacity: u64,
    /// What `cudaMemGetInfo` reports as total (`None`: the capacity).
    pub total: Option<u64>,
    /// Where segments go.
    pub placement: Placement,
}

/// What PyTorch's allocator of one process did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColocatedTorch {
    /// `torch.__version__`.
    pub torch_version: String,
    /// `reserved_bytes.all.peak`.
    pub peak_reserved_bytes: u64,
    /// `num_device_alloc` (`None` before 2.3).
    pub num_device_alloc: Option<u64>,
    /// `num_alloc_retries`.
    pub num_alloc_retries: u64,
    /// The event of its first OOM.
    pub oom_event: Option<u64>,
    /// Its message (an engine with no room for its KV cache says so).
    pub oom_message: Option<String>,
}

/// What the processes did together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColocatedJudged {
    /// Each process, in the processes' order.
    pub processes: Vec<ColocatedTorch>,
    /// The device's used bytes (`cudaMemGetInfo`) after each step of the
    /// schedule that ran something, in order: the step's process, and the
    /// bytes.
    pub used_after_steps: Vec<(usize, u64)>,
}

/// A started process and its gate.
struct Running {
    child: Child,
    gate: PathBuf,
    out: PathBuf,
    label: String,
    /// The next phase it will be let into.
    next: usize,
    done: bool,
    /// The device's used bytes it last reported.
    used: u64,
}

/// Runs `processes` on one shared fake device, releasing their phases in
/// the order of `schedule` (`(process, one phase)`; `false`: all that is
/// left), then what is left of each in their order.
pub fn judge_colocated(
    processes: &[ColocatedProcess<'_>],
    schedule: &[(usize, bool)],
    judge: &ColocatedJudge<'_>,
) -> Result<ColocatedJudged, OracleError> {
    let work = &judge.work;
    std::fs::create_dir_all(work).map_err(OracleError::io(work))?;
    let script = crate::torch_side::write_replay_script(work)?;
    let shared = work.join("shared-device");
    let _ = std::fs::remove_file(&shared);
    let mut running = Vec::with_capacity(processes.len());
    for (i, p) in processes.iter().enumerate() {
        running.push(start(p, i, &script, &shared, judge)?);
    }
    let rest = (0..processes.len()).map(|i| (i, false));
    let mut used_after_steps = Vec::new();
    let result = schedule
        .iter()
        .copied()
        .chain(rest)
        .try_for_each(|(i, one)| match running.get_mut(i) {
            Some(r) => {
                if release(r, one)? {
                    used_after_steps.push((i, r.used));
                }
                Ok(())
            }
            None => Ok(()),
        });
    for r in &running {
        let end = r.gate.join("go-end");
        std::fs::write(&end, b"").map_err(OracleError::io(&end))?;
    }
    let mut statuses = Vec::with_capacity(running.len());
    for r in &mut running {
        statuses.push(r.child.wait().map_err(OracleError::io(&r.gate))?);
    }
    result?;
    let processes = running
        .iter()
        .zip(statuses)
        .map(|(r, status)| read_result(&r.out, &r.label, status.success()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ColocatedJudged {
        processes,
        used_after_steps,
    })
}

fn start(
    p: &ColocatedProcess<'_>,
    i: usize,
    script: &Path,
    shared: &Path,
    judge: &ColocatedJudge<'_>,
) -> Result<Running, OracleError> {
    let dir = judge.work.join(format!("{i}"));
    let gate = dir.join("gate");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&gate).map_err(OracleError::io(&gate))?;
    let csv = dir.join("trace.csv");
    let file = std::fs::File::create(&csv).map_err(OracleError::io(&csv))?;
    let mut w = std::io::BufWriter::new(file);
    vramlab_traces::write_csv(p.trace, &mut w, &csv.display().to_string())
        .map_err(|e| OracleError::Replay(e.to_string()))?;
    std::io::Write::flush(&mut w).map_err(OracleError::io(&csv))?;
    drop(w);
    let device = FakeDevice {
        capacity: Some(judge.capacity),
        total: judge.total.or(Some(judge.capacity)),
        placement: judge.placement,
        runtime_version: judge.interp.wheel.runtime_version(),
        ..Default::default()
    };
    let out = dir.join("out");
    let mut process = judge.fake.python(judge.interp, &device);
    process
        .cmd
        .arg(script)
        .arg(&csv)
        .arg("--out")
        .arg(&out)
        .arg("--conf")
        .arg(&p.conf)
        .arg("--gate")
        .arg(&gate)
        .arg("--no-history")
        .arg("--continue-on-oom")
        .arg("--quiet")
        .args(
            p.kv_util
                .map(|u| vec!["--kv-util".to_string(), u.to_string()])
                .unwrap_or_default(),
        )
        .env("VRAMLAB_FAKECUDA_SHARED", shared)
        .env_remove("PYTORCH_CUDA_ALLOC_CONF")
        .env_remove("PYTORCH_ALLOC_CONF")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.join("stderr.txt")).map_err(OracleError::io(&dir))?,
        ));
    let child = process.cmd.spawn().map_err(process.spawn_error())?;
    Ok(Running {
        child,
        gate,
        out,
        label: p.label.clone(),
        next: 0,
        done: false,
        used: 0,
    })
}

/// Lets `r` into its next phase (`one`), or all that are left, and waits
/// until it is through; whether it ran anything.
fn release(r: &mut Running, one: bool) -> Result<bool, OracleError> {
    let mut ran = false;
    loop {
        if r.done {
            return Ok(ran);
        }
        // Where it waits: its next phase, or its end.
        let at = wait_at(r)?;
        if at == "done" {
            r.done = true;
            return Ok(ran);
        }
        ran = true;
        let go = r.gate.join(format!("go-{}", r.next));
        std::fs::write(&go, b"").map_err(OracleError::io(&go))?;
        r.next += 1;
        // Through once it waits at the next phase or is done.
        let want = r.next.to_string();
        loop {
            let now = wait_at(r)?;
            if now == want || now == "done" {
                r.done = now == "done";
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if one {
            return Ok(ran);
        }
    }
}

/// What `r` last wrote to its gate (the phase it waits before, or
/// `done`), once it has written something; the device's used bytes it
/// wrote beside it are kept in `r.used`.
fn wait_at(r: &mut Running) -> Result<String, OracleError> {
    let at = r.gate.join("at");
    loop {
        if let Ok(s) = std::fs::read_to_string(&at) {
            let mut words = s.split_whitespace();
            let word = words.next().unwrap_or("").to_string();
            if let Some(used) = words.next().and_then(|u| u.parse::<u64>().ok()) {
                r.used = used;
            }
            return Ok(word);
        }
        if let Ok(Some(status)) = r.child.try_wait() {
            let err =
                std::fs::read_to_string(r.gate.with_file_name("stderr.txt")).unwrap_or_default();
            let tail: Vec<&str> = err.lines().rev().take(10).collect();
            return Err(OracleError::Replay(format!(
                "{}: the process ended ({status}) before its replay began:\n{}",
                r.label,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn read_result(out: &Path, label: &str, ok: bool) -> Result<ColocatedTorch, OracleError> {
    let summary = out.join("summary.json");
    let text = std::fs::read_to_string(&summary).map_err(|e| {
        OracleError::Replay(format!(
            "{label}: no {} ({e}; the process {})",
            summary.display(),
            if ok { "ended" } else { "failed" }
        ))
    })?;
    let t: TorchResult = serde_json::from_str(&text)
        .map_err(|e| OracleError::Replay(format!("{}: {e}", summary.display())))?;
    Ok(ColocatedTorch {
        torch_version: t.torch_version,
        peak_reserved_bytes: t.peak_reserved_bytes,
        num_device_alloc: t.num_device_alloc,
        num_alloc_retries: t.num_alloc_retries,
        oom_message: t.oom.as_ref().map(|o| o.message.clone()),
        oom_event: t.oom.map(|o| o.event_index),
    })
}
