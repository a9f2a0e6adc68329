//! Reading the traces named on the command line: folders expand, one
//! device is picked (and named) or every device is taken, and a device
//! that cannot be read is noted without stopping the others.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use vramlab_allocator::TorchVersion;
use vramlab_replay::io::load::Loaded;

use crate::progress::load_devices;
use vramlab_traces::Trace;
use vramlab_traces::io::Format;

/// `paths` with every folder replaced by the trace files inside it (by
/// extension, sorted; not recursing). A folder without traces is an error.
pub fn expand_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut inside: Vec<PathBuf> = std::fs::read_dir(p)
            .with_context(|| format!("cannot list {}", p.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.is_file() && Format::from_path(f).is_some())
            .collect();
        if inside.is_empty() {
            bail!(
                "{}: a folder with no traces in it (known extensions: .pickle, .pkl, .pickle.gz, .csv, .csv.gz, .vlt, .vlt.zst)",
                p.display()
            );
        }
        inside.sort();
        out.extend(inside);
    }
    Ok(out)
}

/// The name a trace goes by in tables: the file name, with `#N` for a
/// device other than 0.
pub fn display_name(path: &Path, t: &Trace) -> String {
    let mut name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().to_string(),
    );
    if t.header.device != 0 {
        name.push_str(&format!("#{}", t.header.device));
    }
    name
}

/// Picks one device's trace: `device`, the only one, or the one with the
/// most allocations (named in a note). Devices that could not be read are
/// noted, and stop nothing unless asked for.
pub fn pick_device(path: &Path, loaded: Loaded, device: Option<u32>) -> Result<Trace> {
    let name = path.display();
    let notes: Vec<String> = loaded
        .failed
        .iter()
        .filter(|_| device.is_none())
        .map(|(d, e)| format!("note: {name}: device {d} skipped: {e}"))
        .collect();
    let t = pick_readable(path, loaded, device)?;
    for n in notes {
        errln!("{n}");
    }
    Ok(t)
}

fn pick_readable(path: &Path, loaded: Loaded, device: Option<u32>) -> Result<Trace> {
    let name = path.display();
    let have = || {
        loaded
            .traces
            .iter()
            .map(|t| t.header.device.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(d) = device {
        if let Some((_, e)) = loaded.failed.iter().find(|(x, _)| *x == d) {
            bail!("device {d}: {e}");
        }
        let list = have();
        return loaded
            .traces
            .into_iter()
            .find(|t| t.header.device == d)
            .with_context(|| {
                format!("{name}: no trace for device {d} (devices in the file: {list})")
            });
    }
    let n = loaded.traces.len();
    if n == 0 {
        match loaded.failed.into_iter().next() {
            Some((_, e)) => return Err(e.into()),
            None => bail!("{name}: the file holds no allocation events"),
        }
    }
    if n > 1 {
        let list = have();
        let best = loaded
            .traces
            .iter()
            .enumerate()
            .max_by_key(|(i, t)| (t.num_allocs(), std::cmp::Reverse(*i)))
            .map_or(0, |(i, _)| i);
        let t = loaded.traces.into_iter().nth(best).context("no device")?;
        errln!(
            "note: {name} holds devices {list}; using device {} (the most allocations); pick another with --trace-device N",
            t.header.device
        );
        return Ok(t);
    }
    loaded.traces.into_iter().next().context("no device")
}

/// Loads traces named on the command line: every device of each file (or
/// only `device`), skipping devices without events and those that cannot
/// be read (each named in a note).
pub fn load_all(
    paths: &[PathBuf],
    version: Option<TorchVersion>,
    device: Option<u32>,
) -> Result<Vec<(String, Trace)>> {
    let mut out = Vec::new();
    for p in crate::inputs::expand_dirs(paths)? {
        let p = &p;
        let loaded = crate::progress::load_devices(p, None, version)?;
        let file = p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().to_string(),
        );
        if let Some((d, e)) = loaded.failed.iter().find(|(d, _)| device == Some(*d)) {
            bail!("{file}: device {d}: {e}");
        }
        if loaded.traces.is_empty() {
            if let Some((_, e)) = loaded.failed.first() {
                bail!("{e}");
            }
        }
        if device.is_none() {
            for (d, e) in &loaded.failed {
                errln!("note: {file}: device {d} skipped: {e}");
            }
        }
        for t in loaded.traces {
            if device.is_some_and(|d| d != t.header.device) {
                continue;
            }
            let mut name = file.clone();
            if t.header.device != 0 {
                name.push_str(&format!("#{}", t.header.device));
            }
            if t.events.is_empty() {
                errln!("note: {name}: no events, skipped");
                continue;
            }
            if t.num_allocs() == 0 {
                errln!(
                    "warning: {name}: the trace has no allocations: every setting reserves the same"
                );
            }
            out.push((name, t));
        }
    }
    if out.is_empty() {
        bail!(
            "no traces with events to sweep{}",
            device.map_or(String::new(), |d| format!(" on device {d}"))
        );
    }
    Ok(out)
}

/// The devices of `path` that could be read (only `device` when given);
/// the others are named in a note, or are the error when asked for.
pub fn readable_devices(
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
            errln!("note: {}: device {d} skipped: {e}", path.display());
        }
    }
    Ok(traces)
}

/// The trace files in `dir` (csv, csv.gz, vlt, vlt.zst, pickle), sorted by name.
pub fn trace_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| vramlab_traces::io::Format::from_path(p).is_some())
        .collect();
    v.sort();
    if v.is_empty() {
        bail!("no traces in {}", dir.display());
    }
    Ok(v)
}

pub fn load_dir(dir: &Path) -> Result<Vec<(String, Trace)>> {
    let mut out = Vec::new();
    for p in trace_files(dir)? {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        for t in vramlab_replay::io::load::load_traces(&p, None, None::<TorchVersion>)? {
            if t.events.is_empty() {
                continue;
            }
            let mut n = name.clone();
            if t.header.device != 0 {
                n.push_str(&format!("#{}", t.header.device));
            }
            out.push((n, t));
        }
    }
    Ok(out)
}
