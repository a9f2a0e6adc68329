//! One trace under several settings, through PyTorch's allocator and
//! vramlab's replay, side by side.

use std::path::{Path, PathBuf};

use serde::Serialize;
use vramlab_replay::{ReplayOptions, Run, Scenario, Start};
use vramlab_traces::{Event, Trace, advice::Opt};

use crate::OracleError;
use crate::device_log::{first_difference, from_replay, read_fake_log};
use crate::fake::{FakeDevice, FakeDir};
use crate::install::Interpreter;
use crate::torch_side::{TorchResult, TorchRun, run_torch};

/// The trace both allocators replay: a recording that starts mid-run
/// begins fresh (the blocks in use at its first entry allocated first, in
/// address order, as `vramlab convert --start fresh` writes them), and
/// deferred frees complete where they were requested — PyTorch is driven
/// through `caching_allocator_delete`, with no cross-stream uses to wait
/// for. The notes say what was changed.
pub fn oracle_trace(trace: &Trace) -> (Trace, Vec<String>) {
    let mut notes = Vec::new();
    let mut t = trace.with_fresh_start();
    if trace.initial.is_some() {
        notes.push("recorded mid-run: both replays start fresh (the blocks in use at the first entry allocated first, in address order)".to_string());
    }
    let deferred = t
        .events
        .iter()
        .filter(|e| matches!(e, Event::FreeRequested { .. }))
        .count();
    if deferred > 0 {
        let mut events = Vec::with_capacity(t.events.len());
        let mut old_to_new = Vec::with_capacity(t.events.len() + 1);
        for e in &t.events {
            old_to_new.push(events.len() as u64);
            match *e {
                Event::FreeRequested { id } => events.push(Event::Free { id }),
                Event::FreeCompleted { .. } => {}
                other => events.push(other),
            }
        }
        old_to_new.push(events.len() as u64);
        for p in &mut t.phases {
            p.event_index = old_to_new
                .get(p.event_index as usize)
                .copied()
                .unwrap_or(events.len() as u64);
        }
        t.events = events;
        notes.push(format!(
            "{deferred} deferred frees (free_requested … free_completed) replayed as frees at the request: PyTorch is driven through caching_allocator_delete, with no cross-stream uses to wait for"
        ));
    }
    (t, notes)
}

/// PyTorch's and vramlab's results for one trace and setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OracleRow {
    /// The trace file.
    pub trace: String,
    /// The setting as vramlab labels it (`default`, `expandable_segments:True`, …).
    pub setting: String,
    /// The `PYTORCH_CUDA_ALLOC_CONF` value PyTorch ran under.
    pub conf: String,
    /// `torch.__version__` of the judge.
    pub torch_version: String,
    /// The PyTorch release whose rules vramlab replayed.
    pub vramlab_rules: String,
    /// Events in the replayed trace.
    pub events: u64,
    /// PyTorch's `reserved_bytes.all.peak`.
    pub torch_peak_reserved_bytes: u64,
    /// PyTorch's `allocated_bytes.all.peak`.
    pub torch_peak_allocated_bytes: u64,
    /// PyTorch's `num_device_alloc` (`None`: the release does not count it,
    /// before 2.3; the device calls are compared one by one all the same).
    pub torch_num_device_alloc: Option<u64>,
    /// PyTorch's `num_device_free` (`None` before 2.3).
    pub torch_num_device_free: Option<u64>,
    /// PyTorch's `num_alloc_retries`.
    pub torch_num_alloc_retries: u64,
    /// The event of PyTorch's first OOM.
    pub torch_oom_event: Option<u64>,
    /// vramlab's peak reserved bytes.
    pub vramlab_peak_reserved_bytes: u64,
    /// vramlab's peak allocated bytes.
    pub vramlab_peak_allocated_bytes: u64,
    /// vramlab's `num_device_alloc`.
    pub vramlab_num_device_alloc: u64,
    /// vramlab's `num_device_free`.
    pub vramlab_num_device_free: u64,
    /// vramlab's `num_alloc_retries`.
    pub vramlab_num_alloc_retries: u64,
    /// The event of vramlab's first OOM.
    pub vramlab_oom_event: Option<u64>,
    /// Device calls PyTorch made (cudaMalloc, cudaFree, reserve, map, …).
    pub device_calls: u64,
    /// Everything equal: the figures and every device call in order.
    pub exact: bool,
    /// The figures that differ (`peak_reserved_bytes`, …).
    pub differing: Vec<String>,
    /// The first device call that differs, in words.
    pub first_difference: Option<String>,
    /// The event where the two first part.
    pub first_difference_event: Option<u64>,
    /// PyTorch's host allocations from CUDA (`num_host_alloc`; traces with
    /// pinned host rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch_host_num_alloc: Option<u64>,
    /// PyTorch's peak pinned bytes (`host_memory_stats()`'s
    /// `allocated_bytes.peak`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torch_host_peak_bytes: Option<u64>,
    /// vramlab's host allocations from CUDA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vramlab_host_num_alloc: Option<u64>,
    /// vramlab's peak pinned bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vramlab_host_peak_bytes: Option<u64>,
}

/// How to judge.
#[derive(Debug, Clone)]
pub struct JudgeOptions<'a> {
    /// The wheel.
    pub interp: &'a Interpreter,
    /// The fake device for it.
    pub fake: &'a FakeDir,
    /// A scratch folder (the CSV, PyTorch's outputs, the device logs).
    pub work: PathBuf,
    /// Also keep PyTorch's own snapshot of each replay in this folder.
    pub snapshot_out: Option<PathBuf>,
    /// The release whose rules vramlab applied, for the rows.
    pub vramlab_rules: String,
}

fn slug(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "default".into() } else { s }
}

/// PyTorch's side of one run: its results and its device calls.
struct TorchSide<'a> {
    result: &'a TorchResult,
    calls: &'a [crate::device_log::Call],
    /// The calls are compared one by one. Not for a trace with engine
    /// pools or memory outside PyTorch: the engine's allocator reserves
    /// and maps where PyTorch's would `cudaMalloc`, and both sides' calls
    /// are theirs, not the caching allocator's; the figures still are.
    compare_calls: bool,
}

fn compare(
    label: &str,
    s: &Scenario,
    conf: &str,
    torch: TorchSide<'_>,
    run: &Run,
    events: u64,
    opts: &JudgeOptions<'_>,
) -> OracleRow {
    let (t, torch_calls) = (torch.result, torch.calls);
    let ours = from_replay(&run.device_log);
    let divergence = if torch.compare_calls {
        first_difference(torch_calls, &ours)
    } else {
        None
    };
    let v = &run.summary;
    let vramlab_oom = run.oom.as_ref().map(|o| o.event_index);
    let torch_oom = t.oom.as_ref().map(|o| o.event_index);
    let mut differing = Vec::new();
    let mut check = |name: &str, a: u64, b: u64| {
        if a != b {
            differing.push(name.to_string());
        }
    };
    check(
        "peak_reserved_bytes",
        t.peak_reserved_bytes,
        v.peak_reserved_bytes,
    );
    check(
        "peak_allocated_bytes",
        t.peak_allocated_bytes,
        v.peak_allocated_bytes,
    );
    if let Some(n) = t.num_device_alloc {
        check("num_device_alloc", n, v.num_device_alloc);
    }
    if let Some(n) = t.num_device_free {
        check("num_device_free", n, v.num_device_free);
    }
    check(
        "num_alloc_retries",
        t.num_alloc_retries,
        v.num_alloc_retries,
    );
    match (&t.host, &run.host) {
        (Some(th), Some(vh)) => {
            check("host_num_alloc", th.num_host_alloc, vh.host_num_allocs);
            check(
                "host_peak_bytes",
                th.peak_bytes,
                vh.host_peak_reserved_bytes,
            );
            check(
                "host_final_bytes",
                th.current_bytes,
                vh.host_final_block_bytes,
            );
        }
        (None, None) => {}
        _ => check("host", 0, 1),
    }
    if torch_oom != vramlab_oom {
        differing.push("oom".to_string());
    }
    OracleRow {
        trace: label.to_string(),
        setting: s.label(),
        conf: conf.to_string(),
        torch_version: t.torch_version.clone(),
        vramlab_rules: opts.vramlab_rules.clone(),
        events,
        torch_peak_reserved_bytes: t.peak_reserved_bytes,
        torch_peak_allocated_bytes: t.peak_allocated_bytes,
        torch_num_device_alloc: t.num_device_alloc,
        torch_num_device_free: t.num_device_free,
        torch_num_alloc_retries: t.num_alloc_retries,
        torch_oom_event: torch_oom,
        vramlab_peak_reserved_bytes: v.peak_reserved_bytes,
        vramlab_peak_allocated_bytes: v.peak_allocated_bytes,
        vramlab_num_device_alloc: v.num_device_alloc,
        vramlab_num_device_free: v.num_device_free,
        vramlab_num_alloc_retries: v.num_alloc_retries,
        vramlab_oom_event: vramlab_oom,
        device_calls: torch_calls.len() as u64,
        exact: differing.is_empty() && divergence.is_none(),
        differing,
        first_difference_event: divergence.as_ref().and_then(|d| d.event()),
        first_difference: divergence.map(|d| d.to_string()),
        torch_host_num_alloc: t.host.as_ref().map(|h| h.num_host_alloc),
        torch_host_peak_bytes: t.host.as_ref().map(|h| h.peak_bytes),
        vramlab_host_num_alloc: run.host.as_ref().map(|h| h.host_num_allocs),
        vramlab_host_peak_bytes: run.host.as_ref().map(|h| h.host_peak_block_bytes),
    }
}

fn write_inputs(trace: &Trace, work: &Path) -> Result<(PathBuf, PathBuf), OracleError> {
    std::fs::create_dir_all(work).map_err(OracleError::io(work))?;
    let csv = work.join("trace.csv");
    let file = std::fs::File::create(&csv).map_err(OracleError::io(&csv))?;
    let mut w = std::io::BufWriter::new(file);
    vramlab_traces::write_csv(trace, &mut w, &csv.display().to_string())
        .map_err(|e| OracleError::Replay(e.to_string()))?;
    std::io::Write::flush(&mut w).map_err(OracleError::io(&csv))?;
    let script = crate::torch_side::write_replay_script(work)?;
    Ok((csv, script))
}

/// Judges `trace` (already made by [`oracle_trace`]) under each scenario
/// (native policy only): PyTorch's replay on the fake device, vramlab's
/// on its simulated one, with the same capacity, total memory and
/// placement. `on_row` sees each row as it is made.
pub fn judge_trace(
    label: &str,
    trace: &Trace,
    scenarios: &[Scenario],
    opts: &JudgeOptions<'_>,
    mut on_row: impl FnMut(&OracleRow),
) -> Result<Vec<OracleRow>, OracleError> {
    let (csv, script) = write_inputs(trace, &opts.work)?;
    let mut rows = Vec::with_capacity(scenarios.len());
    for (i, s) in scenarios.iter().enumerate() {
        let Some(conf) = s.policy.native_conf() else {
            return Err(OracleError::Replay(format!(
                "{}: the oracle judges PyTorch's native allocator, not {}",
                s.label(),
                Opt::Policy.with_word(s.policy.name())
            )));
        };
        let out = opts.work.join(format!("{i}-{}", slug(&s.label())));
        let log = out.join("device-calls.log");
        let dev = s.device(trace);
        let device = FakeDevice {
            capacity: s.capacity,
            total: Some(vramlab_allocator::Device::mem_info(&dev).total),
            placement: s.placement,
            runtime_version: opts.interp.wheel.runtime_version(),
            log: Some(log.clone()),
            events_on_sync: trace.events.iter().any(Event::is_host),
            ..Default::default()
        };
        let run = TorchRun {
            csv: &csv,
            label,
            conf: &conf.raw,
            fraction: s.memory_fraction,
            device,
            out: out.clone(),
            history: opts.snapshot_out.is_some(),
        };
        let torch = run_torch(opts.interp, opts.fake, &script, &run)?;
        let torch_calls = read_fake_log(&log)?;
        let replay_opts = ReplayOptions {
            start: Start::Fresh,
            stop_at_oom: true,
            ..Default::default()
        };
        let ours = s
            .run(trace, &replay_opts)
            .map_err(|e| OracleError::Replay(format!("{label} under {}: {e}", s.label())))?;
        if let Some(dir) = &opts.snapshot_out {
            std::fs::create_dir_all(dir).map_err(OracleError::io(dir))?;
            let stem = Path::new(label)
                .file_stem()
                .and_then(|n| n.to_str())
                .unwrap_or("trace");
            let to = dir.join(format!("{}.{}.pickle", slug(stem), slug(&s.label())));
            let from = out.join("snapshot.pickle");
            std::fs::copy(&from, &to).map_err(OracleError::io(&from))?;
        }
        let side = TorchSide {
            result: &torch,
            calls: &torch_calls,
            compare_calls: !trace.has_tenant_events(),
        };
        let row = compare(
            label,
            s,
            &conf.raw,
            side,
            &ours,
            trace.events.len() as u64,
            opts,
        );
        on_row(&row);
        rows.push(row);
    }
    Ok(rows)
}
