//! `vramlab colocate`: several processes on one GPU (an RL trainer and its
//! rollout engine, co-located services), each with its own allocator, all
//! drawing on one device: who holds what, phase by phase, and who runs out
//! of memory first; the largest utilization an engine can take; the
//! device over time, stacked by tenant; and, with `--oracle`, PyTorch's
//! own processes on one shared fake GPU as the judge.

mod judge;
mod manifest;
mod print;
mod search;
mod what_if;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::{
    ColocatedRun, Inputs, Pick, ReplayOptions, Scenario, Step, Tenant, replay_colocated,
};

use crate::args::DeviceArgs;
use crate::args::{parse_gpu_arg, parse_size_arg};
use search::UtilSearch;

/// Arguments of `vramlab colocate`.
#[derive(Debug, Args)]
pub struct ColocateArgs {
    /// The tenants' traces, one process each (snapshot, CSV, .vlt); or one
    /// job manifest (a JSON file with a `tenants` list, or a folder holding
    /// colocate.json: docs/guide/usage.md).
    #[arg(required = true, value_name = "TRACE|JOB")]
    traces: Vec<PathBuf>,
    /// Each tenant's name, in the traces' order (default: the file's name).
    #[arg(long = "name", value_name = "NAME")]
    names: Vec<String>,
    /// Each tenant's PYTORCH_ALLOC_CONF, in the traces' order (`default`:
    /// PyTorch's defaults, the default for a tenant not given one).
    #[arg(long = "tenant-conf", value_name = "STR")]
    confs: Vec<String>,
    /// An inference engine sized by vLLM's rule (gpu_memory_utilization):
    /// tenant NAME may use UTIL × the device's total memory, refuses to
    /// start when less is free, and the allocations of its `# phase:
    /// kv_cache` phases share what is left after its weights and
    /// activations (each rounded down to 2 MiB).
    #[arg(long = "kv-util", value_name = "NAME=UTIL")]
    kv_utils: Vec<String>,
    /// Find the largest utilization (in hundredths) tenant NAME can take
    /// with every tenant running to its end, by replaying each value a
    /// bisection tries (with --oracle, the judge runs the same bisection).
    #[arg(long, value_name = "NAME")]
    search_util: Option<String>,
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
    /// retries and first OOM, and the device's used memory after each
    /// step, against vramlab's. Processes that run out of memory go on (as
    /// with --continue-on-oom, which it implies).
    #[arg(long)]
    oracle: bool,
    /// The PyTorch release that judges (with --oracle): its official wheel,
    /// installed on first use into the oracle's cache.
    #[arg(long = "torch", value_name = "X.Y", default_value = "2.15")]
    torch: String,
    /// Replay the remedies people try, each on the whole job: every tenant
    /// with expandable_segments:True, and emptying its cache at the end of
    /// every phase; who runs out of memory first, the device's peak and
    /// each tenant's peak reserved under each.
    #[arg(long)]
    what_if: bool,
    /// Draw the device over the steps, stacked by tenant, with each step's
    /// peak and any OOM: BASE.png and BASE.svg.
    #[arg(long, value_name = "BASE")]
    plot: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// One tenant's figures.
#[derive(Debug, Serialize)]
struct TenantRow {
    name: String,
    conf: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    kv_util: Option<f64>,
    peak_reserved_bytes: u64,
    peak_allocated_bytes: u64,
    num_device_alloc: u64,
    num_alloc_retries: u64,
    oom_event: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    oom_message: Option<String>,
    /// The phase the OOM fell in.
    #[serde(skip_serializing_if = "Option::is_none")]
    oom_phase: Option<String>,
    /// The source line of the request that failed (its first frame
    /// outside PyTorch), when the trace has stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    oom_line: Option<String>,
}

/// The device after one step.
#[derive(Debug, Serialize)]
struct StepRow {
    tenant: String,
    phase: String,
    reserved_bytes: Vec<u64>,
    held_bytes: Vec<u64>,
    device_used_bytes: u64,
    device_peak_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    oom_event: Option<u64>,
}

/// `colocate --json`.
#[derive(Debug, Serialize)]
struct ColocateOut {
    capacity: u64,
    device_peak_bytes: u64,
    first_oom: Option<(String, u64)>,
    tenants: Vec<TenantRow>,
    steps: Vec<StepRow>,
    /// With --search-util.
    #[serde(skip_serializing_if = "Option::is_none")]
    search: Option<UtilSearch>,
    /// With --what-if.
    #[serde(skip_serializing_if = "Option::is_none")]
    what_if: Option<Vec<what_if::WhatIf>>,
    /// With --oracle: PyTorch's processes, tenant by tenant.
    #[serde(skip_serializing_if = "Option::is_none")]
    oracle: Option<judge::Judged>,
}

/// One tenant as the command was given it.
struct TenantSpec {
    name: String,
    path: PathBuf,
    conf: String,
    kv_util: Option<f64>,
}

/// The job: the tenants, whatever the manifest and the options say.
fn tenants_of(args: &mut ColocateArgs) -> Result<Vec<TenantSpec>> {
    let from_file = match args.traces.as_slice() {
        [one] => manifest::find(one)?,
        _ => None,
    };
    let mut specs = Vec::new();
    if let Some((m, base)) = from_file {
        if args.device.gpu.is_none() && args.device.capacity.is_none() {
            args.device.gpu = m
                .gpu
                .as_deref()
                .map(parse_gpu_arg)
                .transpose()
                .map_err(anyhow::Error::msg)?;
            args.device.capacity = m
                .capacity
                .as_deref()
                .map(parse_size_arg)
                .transpose()
                .map_err(anyhow::Error::msg)?;
        }
        if args.torch_version.is_none() {
            args.torch_version = m
                .torch_version
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|e| anyhow::anyhow!("the manifest's torch_version: {e}"))?;
        }
        if args.schedule.is_none() {
            args.schedule.clone_from(&m.schedule);
        }
        if args.search_util.is_none() {
            args.search_util.clone_from(&m.search_util);
        }
        for t in m.tenants {
            let path = base.join(&t.trace);
            specs.push(TenantSpec {
                name: t.name.unwrap_or_else(|| file_name(&path)),
                path,
                conf: t.conf.unwrap_or_else(|| "default".into()),
                kv_util: t.kv_util,
            });
        }
    } else {
        for p in &args.traces {
            specs.push(TenantSpec {
                name: file_name(p),
                path: p.clone(),
                conf: "default".into(),
                kv_util: None,
            });
        }
    }
    if args.names.len() > specs.len() || args.confs.len() > specs.len() {
        bail!(
            "{} tenants, but {} --name and {} --tenant-conf: give at most one of each per tenant",
            specs.len(),
            args.names.len(),
            args.confs.len()
        );
    }
    for (s, n) in specs.iter_mut().zip(&args.names) {
        s.name.clone_from(n);
    }
    for (s, c) in specs.iter_mut().zip(&args.confs) {
        s.conf.clone_from(c);
    }
    for (i, s) in specs.iter().enumerate() {
        if let Some(j) = specs.iter().skip(i + 1).position(|o| o.name == s.name) {
            bail!(
                "tenants {} and {} are both named '{}': name them with --name (or `name` in the manifest)",
                i,
                i + 1 + j,
                s.name
            );
        }
    }
    for kv in &args.kv_utils {
        let (name, u) = kv
            .split_once('=')
            .with_context(|| format!("--kv-util {kv:?}: expected NAME=UTIL (rollout=0.4)"))?;
        let u: f64 = u
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("--kv-util {kv:?}: '{u}' is not a number"))?;
        manifest::check_util(u).with_context(|| format!("--kv-util {kv:?}"))?;
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        let joined = names.join(", ");
        let s = specs
            .iter_mut()
            .find(|s| s.name == name.trim())
            .with_context(|| {
                format!("--kv-util {kv:?}: no tenant is named '{name}' (the tenants: {joined})")
            })?;
        s.kv_util = Some(u);
    }
    Ok(specs)
}

fn file_name(p: &std::path::Path) -> String {
    p.file_stem().map_or_else(
        || p.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Runs `colocate`.
pub fn run(mut args: ColocateArgs) -> Result<()> {
    let specs = tenants_of(&mut args)?;
    let Some(capacity) = args.device.bytes() else {
        bail!(
            "colocate needs the card they share: --gpu NAME (`vramlab gpus` lists them) or --capacity SIZE"
        );
    };
    let release = args.torch_version.unwrap_or_else(|| {
        // X.Y of the judge's X.Y or X.Y.Z.
        let xy: String = args.torch.split('.').take(2).collect::<Vec<_>>().join(".");
        let judge = args
            .oracle
            .then(|| xy.parse::<TorchVersion>().ok())
            .flatten();
        judge.unwrap_or(TorchVersion::new(2, 15))
    });
    let mut inputs = Vec::new();
    for s in &specs {
        let inp = Inputs::new([&s.path]).pick(Pick::One(None)).torch(release);
        let mut read = crate::inputs::read(inp)?;
        let input = read
            .pop()
            .with_context(|| format!("{}: no trace", s.path.display()))?;
        inputs.push(input);
    }
    let mut tenants = Vec::new();
    for (spec, input) in specs.iter().zip(&inputs) {
        let parsed = if spec.conf == "default" {
            ""
        } else {
            &spec.conf
        };
        let conf = AllocConf::parse(parsed, release).map_err(|e| {
            anyhow::anyhow!("the settings {:?} of tenant {}: {e}", spec.conf, spec.name)
        })?;
        tenants.push(Tenant {
            name: spec.name.clone(),
            trace: &input.trace,
            scenario: Scenario::native(conf).with_placement(args.device.placement),
            kv_util: spec.kv_util,
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
    let mut out = output(&run, &tenants, &specs, capacity);
    let searched = match &args.search_util {
        Some(name) => {
            let i = tenants
                .iter()
                .position(|t| &t.name == name)
                .with_context(|| format!("--search-util: no tenant is named '{name}'"))?;
            Some((
                i,
                replay_search(&tenants, i, capacity, total, &schedule, &opts)?,
            ))
        }
        None => None,
    };
    out.search = searched.as_ref().map(|(_, s)| s.clone());
    if args.what_if {
        out.what_if = Some(what_if::explore(
            &tenants, &specs, release, capacity, total, &schedule, &opts,
        )?);
    }
    if args.oracle {
        let setup = judge::Setup {
            torch: &args.torch,
            placement: args.device.placement,
            capacity,
            total,
        };
        out.oracle = Some(judge::judge(
            &setup,
            &tenants,
            &schedule,
            &out,
            searched.as_ref().map(|(i, _)| *i),
        )?);
    }
    if let Some(base) = &args.plot {
        print::plot(base, &out)?;
    }
    if args.json {
        crate::render::json::print(&out)?;
    } else {
        print::human(&out, args.device.describe().as_deref().unwrap_or(""));
    }
    if let Some(j) = &out.oracle {
        let differ = j.differing();
        if differ > 0 {
            bail!("{differ} figure(s) differ from PyTorch's processes");
        }
    }
    Ok(())
}

/// The search by replay: tenant `i` at each tried utilization.
fn replay_search(
    tenants: &[Tenant<'_>],
    i: usize,
    capacity: u64,
    total: Option<u64>,
    schedule: &[Step],
    opts: &ReplayOptions,
) -> Result<UtilSearch> {
    let name = tenants.get(i).map_or("", |t| t.name.as_str());
    search::largest_fitting(name, |u| {
        let mut ts = tenants.to_vec();
        if let Some(t) = ts.get_mut(i) {
            t.kv_util = Some(u);
        }
        let r = replay_colocated(&ts, Some(capacity), total, schedule, opts)?;
        let no_room = r
            .runs
            .get(i)
            .and_then(|x| x.oom.as_ref())
            .is_some_and(|o| o.message.starts_with(vramlab_replay::KV_NO_ROOM));
        Ok(match r.first_oom {
            None => search::Outcome::Fits,
            Some(_) if no_room => search::Outcome::TooSmall,
            Some(_) => search::Outcome::TooBig,
        })
    })
}

/// The command's answer from a replay.
fn output(
    run: &ColocatedRun,
    tenants: &[Tenant<'_>],
    specs: &[TenantSpec],
    capacity: u64,
) -> ColocateOut {
    let name = |i: usize| tenants.get(i).map_or(String::new(), |t| t.name.clone());
    ColocateOut {
        capacity,
        device_peak_bytes: run.device_peak,
        first_oom: run.first_oom.map(|(t, e)| (name(t), e)),
        tenants: tenants
            .iter()
            .zip(&run.runs)
            .zip(specs)
            .map(|((t, r), s)| TenantRow {
                name: t.name.clone(),
                conf: s.conf.clone(),
                kv_util: s.kv_util,
                peak_reserved_bytes: r.summary.peak_reserved_bytes,
                peak_allocated_bytes: r.summary.peak_allocated_bytes,
                num_device_alloc: r.summary.num_device_alloc,
                num_alloc_retries: r.summary.num_alloc_retries,
                oom_event: r.oom.as_ref().map(|o| o.event_index),
                oom_message: r.oom.as_ref().map(|o| o.message.clone()),
                oom_phase: r.oom.as_ref().and_then(|o| {
                    t.trace
                        .phases
                        .iter()
                        .rfind(|m| m.event_index <= o.event_index)
                        .map(|m| m.label.clone())
                }),
                oom_line: r.oom.as_ref().and_then(|o| o.alloc_id).and_then(|id| {
                    vramlab_traces::code_frames(t.trace.stack_of(id))
                        .first()
                        .map(|f| f.short())
                }),
            })
            .collect(),
        steps: run
            .steps
            .iter()
            .map(|s| StepRow {
                tenant: name(s.tenant),
                phase: s.phase.clone(),
                reserved_bytes: s.reserved.clone(),
                held_bytes: s.held.clone(),
                device_used_bytes: s.device_used,
                device_peak_bytes: s.device_peak,
                oom_event: s.oom_event,
            })
            .collect(),
        search: None,
        what_if: None,
        oracle: None,
    }
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
