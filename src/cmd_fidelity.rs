//! `vramlab fidelity`: prove, event by event, that the native policy makes
//! PyTorch's decisions on a recorded snapshot.

use std::path::PathBuf;

use crate::progress::load_traces;
use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_sim::fidelity::{FidelityReport, check_fidelity};
use vramlab_sim::load::recorded_conf;

use crate::table::{Table, count, percent};

/// Arguments of `vramlab fidelity`.
#[derive(Debug, Args)]
pub struct FidelityArgs {
    /// A PyTorch memory snapshot (.pickle from torch.cuda.memory._dump_snapshot).
    #[arg(value_name = "SNAPSHOT")]
    snapshot: PathBuf,
    /// Only this device.
    #[arg(long, value_name = "N")]
    device: Option<u32>,
    /// Settings to replay instead of the recorded ones.
    #[arg(long, value_name = "STR")]
    conf: Option<String>,
    /// PyTorch release whose allocator rules apply.
    #[arg(long = "torch-version", value_name = "X.Y", default_value_t = TorchVersion::NEWEST)]
    torch_version: TorchVersion,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the command; fails (exit 1) when the replay does not match.
pub fn run(args: FidelityArgs) -> Result<()> {
    let v = args.torch_version;
    let traces = load_traces(&args.snapshot, None, v)?;
    let mut reports = Vec::new();
    for t in &traces {
        if args.device.is_some_and(|d| d != t.header.device) {
            continue;
        }
        let conf = match &args.conf {
            Some(s) => AllocConf::parse(s, v).with_context(|| format!("in --conf {s:?}"))?,
            None => recorded_conf(t, v)
                .map_err(anyhow::Error::msg)?
                .unwrap_or_else(|| AllocConf::new(v)),
        };
        let r = check_fidelity(t, conf)
            .with_context(|| format!("replaying device {}", t.header.device))?;
        reports.push(r);
    }
    let Some(first) = reports.first() else {
        bail!(
            "{}: no device{} with allocation events",
            args.snapshot.display(),
            args.device.map_or(String::new(), |d| format!(" {d}"))
        );
    };
    let mut total = FidelityReport {
        conf: first.conf.clone(),
        ..Default::default()
    };
    for r in &reports {
        total.add(r);
    }
    if args.json {
        let Value::Object(mut v) = serde_json::to_value(&total)? else {
            bail!("internal error: the fidelity report is not a JSON object");
        };
        v.insert(
            "snapshot".into(),
            json!(args.snapshot.display().to_string()),
        );
        v.insert(
            "exact".into(),
            json!(total.is_exact() && reports.iter().all(FidelityReport::is_exact)),
        );
        v.insert("devices".into(), serde_json::to_value(&reports)?);
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        outln!("snapshot: {}", args.snapshot.display());
        let mut t = Table::new(vec![
            "device".into(),
            "settings".into(),
            "events".into(),
            "allocs".into(),
            "addresses matched".into(),
            "segment events matched".into(),
            "final state".into(),
        ]);
        for r in &reports {
            t.row(vec![
                r.device.map_or("-".into(), |d| d.to_string()),
                r.conf.clone(),
                count(r.events),
                count(r.allocs),
                format!(
                    "{} ({})",
                    count(r.alloc_addresses_matched),
                    ratio(r.alloc_addresses_matched, r.allocs)
                ),
                format!(
                    "{} of {} ({})",
                    count(r.segment_events_matched),
                    count(r.segment_events_expected),
                    ratio(r.segment_events_matched, r.segment_events_expected)
                ),
                match r.final_state_matched {
                    Some(true) => "matches".into(),
                    Some(false) => "differs".into(),
                    None => "-".into(),
                },
            ]);
        }
        out!("{}", t.render());
        for r in &reports {
            if let Some(m) = &r.first_mismatch {
                outln!(
                    "\ndevice {}: first mismatch at event {} ({}):\n  expected: {}\n  replayed: {}",
                    r.device.unwrap_or(0),
                    m.event_index,
                    m.kind,
                    m.expected,
                    m.actual
                );
                let blocks: Vec<String> = m
                    .free_blocks
                    .iter()
                    .take(20)
                    .map(|b| format!("{:#x}+{}", b.address, b.size))
                    .collect();
                outln!(
                    "  free blocks of that stream before it ({}): {}",
                    m.free_blocks.len(),
                    blocks.join(", ")
                );
            }
        }
        outln!(
            "\n{}",
            if reports.iter().all(FidelityReport::is_exact) {
                "every allocation address and segment decision matches PyTorch"
            } else {
                "the replay differs from the recording"
            }
        );
    }
    if !reports.iter().all(FidelityReport::is_exact) {
        std::process::exit(1);
    }
    Ok(())
}

fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "n/a".into()
    } else {
        percent(a as f64 / b as f64)
    }
}
