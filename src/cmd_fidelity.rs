//! `vramlab fidelity`: prove, event by event, that the native policy makes
//! PyTorch's decisions on a recorded snapshot.

use std::path::PathBuf;

use crate::progress::load_devices;
use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::analysis::fidelity::{FidelityReport, check_fidelity};
use vramlab_replay::io::load::recorded_conf;
use vramlab_traces::{SegmentEventKind, Trace};

use crate::render::table::{Table, count, percent};

/// Arguments of `vramlab fidelity`.
#[derive(Debug, Args)]
pub struct FidelityArgs {
    /// A PyTorch memory snapshot (.pickle, .pkl, .pickle.gz: what
    /// torch.cuda.memory._dump_snapshot writes), or a .vlt converted from one.
    #[arg(value_name = "SNAPSHOT")]
    snapshot: PathBuf,
    /// Only this GPU of a multi-device snapshot (default: every device).
    #[arg(long = "trace-device", value_name = "N")]
    device: Option<u32>,
    /// Settings to replay instead of the recorded ones.
    #[arg(long, value_name = "STR")]
    conf: Option<String>,
    /// PyTorch release whose allocator rules apply (default: the release
    /// the snapshot was recorded with, detected from its keys).
    #[arg(long = "torch-version", value_name = "X.Y")]
    torch_version: Option<TorchVersion>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the command; fails (exit 1) when the replay does not match.
pub fn run(args: FidelityArgs) -> Result<()> {
    let loaded = load_devices(&args.snapshot, None, args.torch_version)?;
    let mut reports = Vec::new();
    // Devices that cannot be checked: (device, why). They stop nothing.
    let mut unchecked: Vec<(u32, String)> = loaded
        .failed
        .iter()
        .filter(|(d, _)| args.device.is_none_or(|x| x == *d))
        .map(|(d, e)| (*d, e.to_string()))
        .collect();
    for t in &loaded.traces {
        let d = t.header.device;
        if args.device.is_some_and(|x| x != d) {
            continue;
        }
        if let Some(why) = uncheckable(t) {
            unchecked.push((d, why));
            continue;
        }
        let v = vramlab_replay::torch_release::target_of(t, args.torch_version).rules;
        let conf = match &args.conf {
            Some(s) => AllocConf::parse(s, v).with_context(|| format!("in --conf {s:?}"))?,
            None => recorded_conf(t, v)
                .map_err(anyhow::Error::msg)?
                .unwrap_or_else(|| AllocConf::new(v)),
        };
        check_settings(t, &conf)?;
        let r = check_fidelity(t, conf).with_context(|| format!("replaying device {d}"))?;
        reports.push(r);
    }
    unchecked.sort_by_key(|(d, _)| *d);
    if !reports.is_empty() {
        for (d, why) in &unchecked {
            errln!(
                "note: {}: device {d} not checked: {why}",
                args.snapshot.display()
            );
        }
    }
    let Some(first) = reports.first() else {
        if let Some((d, why)) = unchecked.first() {
            bail!(
                "{}: device {d} cannot be checked: {why}",
                args.snapshot.display()
            );
        }
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
        return Err(crate::CheckFailed.into());
    }
    Ok(())
}

/// Why a device's trace cannot be checked against the recording, if so.
fn uncheckable(t: &Trace) -> Option<String> {
    if t.events.is_empty() {
        return Some(
            t.notes
                .first()
                .cloned()
                .unwrap_or_else(|| "the trace holds no events".into()),
        );
    }
    let init = t.initial.as_ref()?;
    init.layout_error.as_ref().map(|e| {
        format!(
            "the recording starts mid-run and the allocator state at its first entry could not be rebuilt ({e}); fidelity replays from that state, so this device cannot be checked (`vramlab replay` starts such traces fresh)"
        )
    })
}

/// Settings that cannot reproduce the recording are refused: expandable
/// segments on or off changes every segment decision.
fn check_settings(t: &Trace, conf: &AllocConf) -> Result<()> {
    let expected = t.expected.as_ref();
    let recorded_expandable = match t.header.extra.get("recorded_expandable_segments") {
        Some(v) => v == "true",
        None => expected.is_some_and(|e| {
            e.final_segments.iter().any(|s| s.is_expandable)
                || e.segment_events
                    .iter()
                    .any(|s| matches!(s.kind, SegmentEventKind::Map | SegmentEventKind::Unmap))
        }),
    };
    if conf.expandable_segments != recorded_expandable {
        bail!(
            "device {}: the snapshot was recorded {} expandable segments and --conf turns them {}: every segment decision would differ, so nothing can match. Fidelity checks a replay against what PyTorch did; for a what-if under other settings use `vramlab replay --conf ...`",
            t.header.device,
            if recorded_expandable {
                "with"
            } else {
                "without"
            },
            if conf.expandable_segments {
                "on"
            } else {
                "off"
            }
        );
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
