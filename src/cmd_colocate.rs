//! `vramlab colocate`: several processes on one GPU (an RL trainer and its
//! rollout engine, co-located services), each with its own allocator, all
//! drawing on one device: who holds what, phase by phase, and who runs out
//! of memory first.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{Inputs, Pick, ReplayOptions, Scenario, Step, Tenant, replay_colocated};

use crate::args::DeviceArgs;
use crate::render::table::{Table, bytes, count};

/// Arguments of `vramlab colocate`.
#[derive(Debug, Args)]
pub struct ColocateArgs {
    /// The tenants' traces, one process each (snapshot, CSV, .vlt).
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Each tenant's name, in the traces' order (default: the file's name).
    #[arg(long = "name", value_name = "NAME")]
    names: Vec<String>,
    /// Each tenant's PYTORCH_ALLOC_CONF, in the traces' order (`default`:
    /// PyTorch's defaults, the default for a tenant not given one).
    #[arg(long = "tenant-conf", value_name = "STR")]
    confs: Vec<String>,
    /// The card (--gpu NAME) or the memory (--capacity SIZE) they share.
    #[command(flatten)]
    device: DeviceArgs,
    /// The PyTorch release whose rules every tenant's allocator follows.
    /// (default: with --oracle the judge's release, else 2.15).
    #[arg(long, value_name = "X.Y")]
    torch_version: Option<TorchVersion>,
    /// Whose events run when: tenants by name or number, each running up
    /// to its next phase mark (`trainer,rollout,trainer`); what is left of
    /// each runs at the end, in the tenants' order. Default: one phase of
    /// each tenant in turn until all are done.
    #[arg(long, value_name = "LIST")]
    schedule: Option<String>,
    /// A tenant that runs out of memory goes on (the process caught the
    /// error): its failed request is skipped, and so are its frees. By
    /// default a tenant stops at its first OOM.
    #[arg(long)]
    continue_on_oom: bool,
    /// Judge the replay: the same traces as PyTorch processes (the official
    /// wheel of --torch) on one shared fake GPU, released phase by phase in
    /// the schedule's order; each tenant's peak reserved, cudaMalloc calls,
    /// retries and first OOM against vramlab's. Processes that run out of
    /// memory go on (as with --continue-on-oom, which it implies).
    #[arg(long)]
    oracle: bool,
    /// The PyTorch release that judges (with --oracle): its official wheel,
    /// installed on first use into the oracle's cache.
    #[arg(long = "torch", value_name = "X.Y", default_value = "2.15")]
    torch: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// One tenant's figures.
#[derive(Debug, Serialize)]
struct TenantRow {
    name: String,
    conf: String,
    peak_reserved_bytes: u64,
    peak_allocated_bytes: u64,
    num_device_alloc: u64,
    num_alloc_retries: u64,
    oom_event: Option<u64>,
}

/// The device after one step.
#[derive(Debug, Serialize)]
struct StepRow {
    tenant: String,
    phase: String,
    reserved_bytes: Vec<u64>,
    device_peak_bytes: u64,
}

/// `colocate --json`.
#[derive(Debug, Serialize)]
struct ColocateOut {
    capacity: u64,
    device_peak_bytes: u64,
    first_oom: Option<(String, u64)>,
    tenants: Vec<TenantRow>,
    steps: Vec<StepRow>,
    /// With --oracle: PyTorch's processes, tenant by tenant.
    #[serde(skip_serializing_if = "Option::is_none")]
    oracle: Option<Vec<JudgedRow>>,
}

/// One tenant as PyTorch's process and vramlab's replay saw it.
#[derive(Debug, Serialize)]
struct JudgedRow {
    name: String,
    torch_version: String,
    torch_peak_reserved_bytes: u64,
    torch_num_device_alloc: Option<u64>,
    torch_num_alloc_retries: u64,
    torch_oom_event: Option<u64>,
    exact: bool,
}

/// Runs `colocate`.
pub fn run(args: ColocateArgs) -> Result<()> {
    let Some(capacity) = args.device.bytes() else {
        bail!(
            "colocate needs the card they share: --gpu NAME (`vramlab gpus` lists them) or --capacity SIZE"
        );
    };
    if args.names.len() > args.traces.len() || args.confs.len() > args.traces.len() {
        bail!(
            "{} traces, but {} --name and {} --tenant-conf: give at most one of each per trace",
            args.traces.len(),
            args.names.len(),
            args.confs.len()
        );
    }
    let release = args.torch_version.unwrap_or_else(|| {
        // X.Y of the judge's X.Y or X.Y.Z.
        let xy: String = args.torch.split('.').take(2).collect::<Vec<_>>().join(".");
        let judge = args
            .oracle
            .then(|| xy.parse::<TorchVersion>().ok())
            .flatten();
        judge.unwrap_or(TorchVersion::new(2, 15))
    });
    let mut traces = Vec::new();
    for path in &args.traces {
        let inputs = Inputs::new([path]).pick(Pick::One(None)).torch(release);
        let mut read = crate::inputs::read(inputs)?;
        let input = read
            .pop()
            .with_context(|| format!("{}: no trace", path.display()))?;
        traces.push(input);
    }
    let mut tenants = Vec::new();
    for (i, input) in traces.iter().enumerate() {
        let conf_text = args.confs.get(i).map_or("default", String::as_str);
        let parsed = if conf_text == "default" {
            ""
        } else {
            conf_text
        };
        let conf = AllocConf::parse(parsed, release)
            .map_err(|e| anyhow::anyhow!("--tenant-conf {conf_text:?} of tenant {i}: {e}"))?;
        tenants.push(Tenant {
            name: args
                .names
                .get(i)
                .cloned()
                .unwrap_or_else(|| input.label.clone()),
            trace: &input.trace,
            scenario: Scenario::native(conf).with_placement(args.device.placement),
        });
    }
    let schedule = match &args.schedule {
        Some(s) => parse_schedule(s, &tenants)?,
        None => turns(&tenants),
    };
    let opts = ReplayOptions {
        check_invariants: false,
        stop_at_oom: !(args.continue_on_oom || args.oracle),
        ..ReplayOptions::default()
    };
    let total = args.device.gpu.map(|g| g.total_bytes());
    let run = replay_colocated(&tenants, Some(capacity), total, &schedule, &opts)?;
    let name = |i: usize| tenants.get(i).map_or(String::new(), |t| t.name.clone());
    let out = ColocateOut {
        capacity,
        device_peak_bytes: run.device_peak,
        first_oom: run.first_oom.map(|(t, e)| (name(t), e)),
        tenants: tenants
            .iter()
            .zip(&run.runs)
            .zip(args.confs.iter().map(Some).chain(std::iter::repeat(None)))
            .map(|((t, r), c)| TenantRow {
                name: t.name.clone(),
                conf: c.cloned().unwrap_or_else(|| "default".into()),
                peak_reserved_bytes: r.summary.peak_reserved_bytes,
                peak_allocated_bytes: r.summary.peak_allocated_bytes,
                num_device_alloc: r.summary.num_device_alloc,
                num_alloc_retries: r.summary.num_alloc_retries,
                oom_event: r.oom.as_ref().map(|o| o.event_index),
            })
            .collect(),
        steps: run
            .steps
            .iter()
            .map(|s| StepRow {
                tenant: name(s.tenant),
                phase: s.phase.clone(),
                reserved_bytes: s.reserved.clone(),
                device_peak_bytes: s.device_peak,
            })
            .collect(),
        oracle: None,
    };
    let mut out = out;
    if args.oracle {
        out.oracle = Some(judge(
            &args,
            &tenants,
            &schedule,
            capacity,
            total,
            &out.tenants,
        )?);
    }
    if args.json {
        crate::render::json::print(&out)?;
    } else {
        print_human(&out, args.device.describe().as_deref().unwrap_or(""));
    }
    let differ = out.oracle.iter().flatten().filter(|j| !j.exact).count();
    if differ > 0 {
        bail!("{differ} tenant(s) differ from PyTorch's processes");
    }
    Ok(())
}

/// PyTorch's processes on one shared fake GPU, against `rows` (vramlab's).
fn judge(
    args: &ColocateArgs,
    tenants: &[Tenant<'_>],
    schedule: &[Step],
    capacity: u64,
    total: Option<u64>,
    rows: &[TenantRow],
) -> Result<Vec<JudgedRow>> {
    use vramlab_oracle::{ColocatedJudge, ColocatedProcess, Installer, judge_colocated};
    let interp = Installer::default().ensure(&args.torch)?;
    let lib = vramlab_oracle::fake::locate()?;
    let fake =
        vramlab_oracle::fake::prepare(&lib, &interp.wheel.soname, &vramlab_oracle::cache_dir())?;
    let scratch = crate::scratch::Scratch::new(None, "colocate");
    let processes: Vec<ColocatedProcess<'_>> = tenants
        .iter()
        .zip(rows)
        .map(|(t, r)| ColocatedProcess {
            label: t.name.clone(),
            trace: t.trace,
            conf: if r.conf == "default" {
                String::new()
            } else {
                r.conf.clone()
            },
        })
        .collect();
    let order: Vec<(usize, bool)> = schedule.iter().map(|s| (s.tenant, s.until_mark)).collect();
    let torch = judge_colocated(
        &processes,
        &order,
        &ColocatedJudge {
            interp: &interp,
            fake: &fake,
            work: scratch.dir().to_path_buf(),
            capacity,
            total,
            placement: args.device.placement,
        },
    )?;
    Ok(rows
        .iter()
        .zip(torch)
        .map(|(r, t)| JudgedRow {
            exact: t.peak_reserved_bytes == r.peak_reserved_bytes
                && t.num_device_alloc.is_none_or(|n| n == r.num_device_alloc)
                && t.num_alloc_retries == r.num_alloc_retries
                && t.oom_event == r.oom_event,
            name: r.name.clone(),
            torch_version: t.torch_version,
            torch_peak_reserved_bytes: t.peak_reserved_bytes,
            torch_num_device_alloc: t.num_device_alloc,
            torch_num_alloc_retries: t.num_alloc_retries,
            torch_oom_event: t.oom_event,
        })
        .collect())
}

/// One phase of each tenant in turn, until every tenant has run its last.
fn turns(tenants: &[Tenant<'_>]) -> Vec<Step> {
    let rounds = tenants
        .iter()
        .map(|t| t.trace.phases.len() + 1)
        .max()
        .unwrap_or(1);
    (0..rounds)
        .flat_map(|_| {
            (0..tenants.len()).map(|tenant| Step {
                tenant,
                until_mark: true,
            })
        })
        .collect()
}

/// `trainer,rollout,0`: tenants by name or number.
fn parse_schedule(s: &str, tenants: &[Tenant<'_>]) -> Result<Vec<Step>> {
    s.split(',')
        .map(|w| {
            let w = w.trim();
            let tenant = tenants
                .iter()
                .position(|t| t.name == w)
                .or_else(|| w.parse::<usize>().ok().filter(|&i| i < tenants.len()))
                .with_context(|| {
                    let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
                    format!(
                        "--schedule: '{w}' names no tenant (the tenants: {}, or 0 to {})",
                        names.join(", "),
                        tenants.len().saturating_sub(1)
                    )
                })?;
            Ok(Step {
                tenant,
                until_mark: true,
            })
        })
        .collect()
}

fn print_human(out: &ColocateOut, card: &str) {
    outln!(
        "{} tenants on one device ({card}): the device peaks at {} of {}",
        out.tenants.len(),
        bytes(out.device_peak_bytes),
        bytes(out.capacity)
    );
    match &out.first_oom {
        Some((t, e)) => outln!("{t} runs out of memory first, at its event {}", count(*e)),
        None => outln!("every tenant runs to its end"),
    }
    outln!();
    let mut t = Table::new(vec![
        "tenant".into(),
        "settings".into(),
        "peak reserved".into(),
        "peak allocated".into(),
        "cudaMalloc".into(),
        "retries".into(),
        "OOM".into(),
    ])
    .left(1);
    for r in &out.tenants {
        t.row(vec![
            r.name.clone(),
            r.conf.clone(),
            bytes(r.peak_reserved_bytes),
            bytes(r.peak_allocated_bytes),
            count(r.num_device_alloc),
            count(r.num_alloc_retries),
            r.oom_event
                .map_or("none".into(), |e| format!("event {}", count(e))),
        ]);
    }
    out!("{}", t.render());
    outln!();
    let mut head = vec!["step".to_string(), "tenant".into(), "phase".into()];
    head.extend(out.tenants.iter().map(|r| format!("{} reserved", r.name)));
    head.push("device peak".into());
    let mut s = Table::new(head).left(1).left(2);
    for (i, step) in out.steps.iter().enumerate() {
        let mut row = vec![(i + 1).to_string(), step.tenant.clone(), step.phase.clone()];
        row.extend(step.reserved_bytes.iter().map(|&b| bytes(b)));
        row.push(bytes(step.device_peak_bytes));
        s.row(row);
    }
    out!("{}", s.render());
    if let Some(judged) = &out.oracle {
        outln!();
        let exact = judged.iter().filter(|j| j.exact).count();
        for j in judged {
            outln!(
                "oracle: {} [torch {}]: peak reserved {}, cudaMalloc {}, retries {}, OOM {}: {}",
                j.name,
                j.torch_version,
                bytes(j.torch_peak_reserved_bytes),
                j.torch_num_device_alloc.map_or("-".into(), count),
                count(j.torch_num_alloc_retries),
                j.torch_oom_event
                    .map_or("none".into(), |e| format!("event {}", count(e))),
                if j.exact { "exact" } else { "DIFFERS" }
            );
        }
        outln!(
            "{exact} of {} tenants exact (PyTorch's processes on one shared fake GPU vs vramlab's replay)",
            judged.len()
        );
    }
}
