//! `vramlab fidelity`: prove, event by event, that the native policy makes
//! PyTorch's decisions on a recorded snapshot.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_replay::FidelityOutcome;
use vramlab_replay::check_fidelity;
use vramlab_replay::{Inputs, recorded_conf};
use vramlab_traces::{SegmentEventKind, Trace};

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
    let inputs = Inputs::new([&args.snapshot]).torch(args.torch_version);
    let loaded = crate::inputs::devices(inputs, &args.snapshot)?;
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
        let v = vramlab_replay::target_of(t, args.torch_version).rules;
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
    let shown = args.snapshot.display().to_string();
    let Some(outcome) = FidelityOutcome::new(&shown, reports) else {
        if let Some((d, why)) = unchecked.first() {
            bail!("{shown}: device {d} cannot be checked: {why}");
        }
        bail!(
            "{shown}: no device{} with allocation events",
            args.device.map_or(String::new(), |d| format!(" {d}"))
        );
    };
    crate::render::fidelity::print_fidelity(&outcome, args.json)?;
    if !outcome.devices_exact() {
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
