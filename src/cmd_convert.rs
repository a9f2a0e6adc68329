//! `vramlab convert` and `vramlab stats`: move traces between formats and
//! look at what they contain.

use std::path::PathBuf;

use crate::progress::load_devices;
use anyhow::{Result, bail};
use clap::Args;
use vramlab_allocator::TorchVersion;
use vramlab_traces::io::{Format, write_trace};
use vramlab_traces::summary::TraceSummary;

use crate::common::parse_format;
use crate::table::{Table, bytes, count};

/// Arguments of `vramlab convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Input trace: a PyTorch memory snapshot (.pickle, .pkl, .pickle.gz), a
    /// native trace (.csv, .csv.gz, .vlt, .vlt.zst) or a RAPIDS RMM log (.csv).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// Output trace (.csv, .csv.gz, .vlt, .vlt.zst); with several devices in
    /// the input, `{device}` in the name is replaced by the device index.
    #[arg(value_name = "OUT")]
    output: PathBuf,
    /// Input format, when the extension does not say: csv, csv.gz, vlt,
    /// vlt.zst, snapshot, rmm.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    from: Option<Format>,
    /// Output format, when the extension does not say: csv, csv.gz, vlt,
    /// vlt.zst.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    to: Option<Format>,
    /// Only this device of a multi-device snapshot.
    #[arg(long = "trace-device", value_name = "N")]
    device: Option<u32>,
    /// PyTorch release whose rules lay out snapshots that start mid-run
    /// (default: the release the snapshot was recorded with).
    #[arg(long = "torch-version", value_name = "X.Y")]
    torch_version: Option<TorchVersion>,
    /// For snapshots recorded mid-run: `fresh` writes the blocks in use at
    /// the first entry as the first allocations (any format, CSV included;
    /// what `replay --start fresh` replays); `recorded` (the default) keeps
    /// the recorded state, which only .vlt holds.
    #[arg(long, value_name = "recorded|fresh")]
    start: Option<vramlab_replay::Start>,
}

/// Runs `convert`.
pub fn run_convert(args: ConvertArgs) -> Result<()> {
    let traces = readable_devices(&args.input, args.from, args.torch_version, args.device)?;
    if traces.is_empty() {
        bail!("{}: no trace to convert", args.input.display());
    }
    let template = args.output.to_string_lossy().to_string();
    if traces.len() > 1 && !template.contains("{device}") {
        bail!(
            "{} holds {} devices: put {{device}} in the output name, or pick one with --trace-device N",
            args.input.display(),
            traces.len()
        );
    }
    for t in &traces {
        let fresh;
        let t = if args.start == Some(vramlab_replay::Start::Fresh) {
            fresh = t.with_fresh_start();
            &fresh
        } else {
            t
        };
        let out = PathBuf::from(template.replace("{device}", &t.header.device.to_string()));
        write_trace(t, &out, args.to)?;
        let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "wrote {} ({} events, {})",
            out.display(),
            count(t.events.len() as u64),
            bytes(size)
        );
        for n in &t.notes {
            eprintln!("note: {n}");
        }
        let to_csv = matches!(
            args.to.or_else(|| Format::from_path(&out)),
            Some(Format::Csv | Format::CsvGz)
        );
        if to_csv && (t.expected.is_some() || !t.frames.is_empty()) {
            eprintln!(
                "note: the CSV format keeps the events only: the recorded addresses and segment events (for `vramlab fidelity`) and the stack frames were left out; .vlt keeps them"
            );
        }
    }
    Ok(())
}

/// Arguments of `vramlab stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Trace file: a PyTorch memory snapshot (.pickle, .pkl, .pickle.gz), a
    /// native trace (.csv, .csv.gz, .vlt, .vlt.zst) or a RAPIDS RMM log (.csv).
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// Input format, when the extension does not say: csv, csv.gz, vlt,
    /// vlt.zst, snapshot, rmm.
    #[arg(long, value_name = "FMT", value_parser = parse_format)]
    format: Option<Format>,
    /// PyTorch release whose rules lay out snapshots that start mid-run
    /// (default: the release the snapshot was recorded with).
    #[arg(long = "torch-version", value_name = "X.Y")]
    torch_version: Option<TorchVersion>,
    /// Only this GPU of a multi-device snapshot (default: every device).
    #[arg(long = "trace-device", value_name = "N")]
    device: Option<u32>,
    /// Print JSON (an array, one object per device).
    #[arg(long)]
    json: bool,
}

/// The devices of `path` that could be read (only `device` when given);
/// the others are named in a note, or are the error when asked for.
fn readable_devices(
    path: &std::path::Path,
    format: Option<Format>,
    version: Option<TorchVersion>,
    device: Option<u32>,
) -> Result<Vec<vramlab_traces::Trace>> {
    let loaded = load_devices(path, format, version)?;
    if let Some((d, e)) = loaded.failed.iter().find(|(d, _)| device == Some(*d)) {
        bail!("device {d}: {e}");
    }
    let traces: Vec<_> = loaded
        .traces
        .into_iter()
        .filter(|t| device.is_none_or(|d| t.header.device == d))
        .collect();
    if traces.is_empty() {
        match loaded.failed.into_iter().next() {
            Some((_, e)) if device.is_none() => return Err(e.into()),
            _ => bail!(
                "{}: no trace{}",
                path.display(),
                device.map_or(String::new(), |d| format!(" for device {d}"))
            ),
        }
    }
    if device.is_none() {
        for (d, e) in &loaded.failed {
            eprintln!("note: {}: device {d} skipped: {e}", path.display());
        }
    }
    Ok(traces)
}

/// Runs `stats`.
pub fn run_stats(args: StatsArgs) -> Result<()> {
    // A folder stands for every trace inside it.
    let mut traces = Vec::new();
    for path in crate::common::expand_dirs(std::slice::from_ref(&args.trace))? {
        for t in readable_devices(&path, args.format, args.torch_version, args.device)? {
            traces.push((path.clone(), t));
        }
    }
    let sums: Vec<TraceSummary> = traces.iter().map(|(_, t)| TraceSummary::of(t)).collect();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&sums)?);
        return Ok(());
    }
    for ((path, t), s) in traces.iter().zip(&sums) {
        outln!("{} (device {})", path.display(), s.device);
        if !t.header.source.is_empty() && t.header.source != path.display().to_string() {
            outln!("  source: {}", t.header.source);
        }
        if let Some(fw) = &t.header.framework {
            outln!("  framework: {fw}");
        }
        if let Some(c) = &t.header.alloc_conf {
            outln!(
                "  recorded settings: {}",
                if c.is_empty() { "(defaults)" } else { c }
            );
        }
        for (k, v) in &t.header.extra {
            outln!("  {k}: {v}");
        }
        outln!(
            "  events {}  allocations {}  frees {} (+{} deferred)  empty_cache {}  streams {}",
            count(s.events),
            count(s.allocs),
            count(s.frees),
            count(s.deferred_frees),
            count(s.empty_cache),
            s.streams
        );
        outln!(
            "  peak live {}  requested in total {}  largest request {}  live at end {}",
            bytes(s.peak_live_bytes),
            bytes(s.total_requested_bytes),
            bytes(s.max_request_bytes),
            count(s.live_at_end)
        );
        if s.starts_mid_run && s.events > 0 {
            outln!(
                "  starts mid-run: {} blocks ({}) in use at the first event, {}",
                count(s.initial_live_blocks),
                bytes(s.initial_live_bytes),
                match &s.initial_layout_error {
                    None => format!("{} segments", count(s.initial_segments)),
                    Some(_) => "recorded layout not rebuilt (see the note)".into(),
                }
            );
        }
        if let Some(st) = &s.initial_state {
            outln!(
                "  {}: {} segments, {} reserved, {} allocated{}, {} reserved but unallocated, largest free block {} ({} free blocks)",
                if s.events > 0 {
                    "state at the first event"
                } else {
                    "allocator state (no history)"
                },
                count(st.segments),
                bytes(st.reserved_bytes),
                bytes(st.allocated_bytes),
                if st.pending_free_bytes > 0 {
                    format!(
                        " (+{} waiting for their free)",
                        bytes(st.pending_free_bytes)
                    )
                } else {
                    String::new()
                },
                bytes(st.waste_bytes),
                bytes(st.largest_free_block),
                count(st.free_blocks)
            );
        }
        if let Some(d) = s.duration_us {
            outln!("  duration {:.3} s", d as f64 / 1e6);
        }
        let mut tab = Table::new(vec![
            "request size".into(),
            "allocations".into(),
            "bytes".into(),
            "share".into(),
        ]);
        for b in &s.size_histogram {
            tab.row(vec![
                format!("{} – {}", bytes(b.lo), bytes(b.hi)),
                count(b.count),
                bytes(b.bytes),
                format!(
                    "{:.1}%",
                    100.0 * b.bytes as f64 / s.total_requested_bytes.max(1) as f64
                ),
            ]);
        }
        if !s.size_histogram.is_empty() {
            outln!();
            for line in tab.render().lines() {
                outln!("  {line}");
            }
        }
        for n in &s.notes {
            outln!("  note: {n}");
        }
        outln!();
    }
    Ok(())
}
