//! `vramlab plan`: the offline plan of a trace — every allocation placed in
//! one address range knowing all lifetimes (greedy by size, then a branch
//! and bound search on small traces) — against peak live bytes, the bound
//! no placement beats, and each setting's gap to both.

use anyhow::{Context, Result};
use clap::Args;
use vramlab_replay::{PlanReport, PolicyGap, plan};

use crate::args::{ConfArgs, DeviceArgs, TraceArgs, scenarios};
use crate::render::table::{Table, bytes, count};

/// Arguments of `vramlab plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// The settings to measure against the plan (default: the recorded
    /// settings, else PyTorch's defaults).
    #[command(flatten)]
    conf: ConfArgs,
    #[command(flatten)]
    device: DeviceArgs,
    /// Search for a better plan than greedy's when the trace has at most
    /// this many allocations.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    search_up_to: usize,
    /// The search's budget, in nodes (a node costs one pass over the
    /// allocations).
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    budget: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `plan`.
pub fn run(args: PlanArgs) -> Result<()> {
    let release = args.conf.torch_versions.first().copied();
    let loaded = args.trace.load(release)?;
    let trace = &loaded.trace;
    let scenarios = scenarios(&args.conf, &args.device, trace)?;
    let report = plan(trace, &scenarios, args.search_up_to, args.budget)
        .with_context(|| format!("planning {}", args.trace.trace.display()))?;
    if args.json {
        crate::render::json::print(&report)
    } else {
        print(&report);
        Ok(())
    }
}

fn print(r: &PlanReport) {
    outln!(
        "{} allocations: peak live {} (no placement reserves less); the plan {} ({})",
        count(r.buffers as u64),
        bytes(r.peak_live_bytes),
        bytes(r.planned_peak_bytes),
        if r.planned_peak_bytes <= r.peak_live_bytes {
            "optimal: it reaches the bound".to_string()
        } else if r.proved_optimal {
            format!(
                "optimal: every canonical plan searched; {} above peak live",
                bytes(r.planned_peak_bytes - r.peak_live_bytes)
            )
        } else {
            match &r.search {
                Some(s) => format!(
                    "greedy by size {}, searched {} nodes{}",
                    bytes(r.greedy_peak_bytes),
                    count(s.nodes),
                    if s.finished { "" } else { ", budget spent" }
                ),
                None => format!(
                    "greedy by size: at most {} above the best plan",
                    bytes(r.planned_peak_bytes - r.peak_live_bytes)
                ),
            }
        }
    );
    if r.start.is_some() {
        outln!(
            "the trace starts mid-run: its {} blocks in use at the first entry are allocated first and planned with the rest (their frees are in the trace); every setting below starts the same way (fresh)",
            count(r.initial_blocks as u64)
        );
    }
    let mut t = Table::new(vec![
        "setting".into(),
        "peak reserved".into(),
        "over the plan".into(),
        "over peak live".into(),
        "fragmentation ratio".into(),
    ])
    .left(0);
    let as_policy = (!r.policies.iter().any(|p| p.setting.starts_with("plan"))).then(|| {
        PolicyGap::new(
            "plan (as a policy)".into(),
            r.policy_peak_bytes,
            r.policy_oom,
            r.planned_peak_bytes,
            r.peak_live_bytes,
        )
    });
    for p in r.policies.iter().chain(&as_policy) {
        let sign = if p.gap_to_plan_bytes < 0 { "-" } else { "+" };
        t.row(vec![
            p.setting.clone(),
            if p.oom {
                format!("{} (OOM)", bytes(p.peak_reserved_bytes))
            } else {
                bytes(p.peak_reserved_bytes)
            },
            format!("{sign}{}", bytes(p.gap_to_plan_bytes.unsigned_abs())),
            format!("+{}", bytes(p.gap_to_bound_bytes)),
            format!("{:.1}%", p.fragmentation_ratio * 100.0),
        ]);
    }
    out!("{}", t.render());
    let over = |peak: u64| {
        let d = peak as i64 - r.planned_peak_bytes as i64;
        format!(
            "{}{}",
            if d < 0 { "-" } else { "+" },
            bytes(d.unsigned_abs())
        )
    };
    if !r.recipes.is_empty() {
        outln!();
        outln!("what you can apply today, each replayed:");
        let mut t = Table::new(vec![
            "recipe".into(),
            "PYTORCH_ALLOC_CONF".into(),
            "peak reserved".into(),
            "over the plan".into(),
        ])
        .left(0)
        .left(1);
        for x in &r.recipes {
            t.row(vec![
                x.what.clone(),
                if x.conf.is_empty() {
                    "(defaults)".into()
                } else {
                    x.conf.clone()
                },
                if x.oom {
                    format!("{} (OOM)", bytes(x.peak_reserved_bytes))
                } else {
                    bytes(x.peak_reserved_bytes)
                },
                over(x.peak_reserved_bytes),
            ]);
        }
        out!("{}", t.render());
    }
}
