//! Opening trace files by format: chosen by extension or named explicitly.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use crate::csv::{read_csv, write_csv};
use crate::error::{Location, TraceError};
use crate::model::Trace;
use crate::snapshot::{SizeRules, Snapshot, read_snapshot, snapshot_to_traces};

/// A trace file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The native CSV text format (`.csv`).
    Csv,
    /// A PyTorch memory snapshot pickle (`.pickle`, `.pkl`).
    Snapshot,
}

impl Format {
    /// All formats with their names, for help texts.
    pub const ALL: [(Format, &'static str, &'static str); 1] =
        [(Format::Csv, "csv", "native CSV (.csv)")];

    /// The format named `name` (`csv`, …).
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(f, _, _)| *f)
    }

    /// The format a file name's extension says.
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".csv") {
            Some(Format::Csv)
        } else if name.ends_with(".pickle") || name.ends_with(".pkl") {
            Some(Format::Snapshot)
        } else {
            None
        }
    }
}

fn open_error(path: &Path, e: std::io::Error) -> TraceError {
    TraceError::new(
        path.display().to_string(),
        Location::File,
        format!("cannot open: {e}"),
    )
}

fn resolve(path: &Path, format: Option<Format>) -> Result<Format, TraceError> {
    format.or_else(|| Format::from_path(path)).ok_or_else(|| {
        TraceError::new(
            path.display().to_string(),
            Location::File,
            "cannot tell the format from the file name; name it with --format (csv)",
        )
    })
}

/// Reads the trace(s) in a file: one per device that has events. Snapshots
/// that start mid-run get their initial layout from `rules` (the recorded
/// settings' rounding; [`SizeRules::default`] is PyTorch's default).
pub fn read_traces_with(
    path: &Path,
    format: Option<Format>,
    rules: &SizeRules<'_>,
) -> Result<Vec<Trace>, TraceError> {
    let fmt = resolve(path, format)?;
    let name = path.display().to_string();
    match fmt {
        Format::Csv => {
            let f = File::open(path).map_err(|e| open_error(path, e))?;
            Ok(vec![read_csv(BufReader::new(f), &name)?])
        }
        Format::Snapshot => {
            let snap = read_snapshot_file(path)?;
            snapshot_to_traces(&snap, &name, rules)
        }
    }
}

/// Reads a PyTorch memory snapshot file.
pub fn read_snapshot_file(path: &Path) -> Result<Snapshot, TraceError> {
    let bytes = std::fs::read(path).map_err(|e| open_error(path, e))?;
    read_snapshot(&bytes, &path.display().to_string())
}

/// [`read_traces_with`] PyTorch's default size rules.
pub fn read_traces(path: &Path, format: Option<Format>) -> Result<Vec<Trace>, TraceError> {
    read_traces_with(path, format, &SizeRules::default())
}

/// Reads a file that must hold one device's trace, or picks `device` from a
/// multi-device file.
pub fn read_trace(
    path: &Path,
    format: Option<Format>,
    device: Option<u32>,
) -> Result<Trace, TraceError> {
    pick_device(read_traces(path, format)?, path, device)
}

/// Picks one device's trace: `device`, or the only one.
pub fn pick_device(
    mut traces: Vec<Trace>,
    path: &Path,
    device: Option<u32>,
) -> Result<Trace, TraceError> {
    let name = path.display().to_string();
    match device {
        Some(d) => {
            let pos = traces
                .iter()
                .position(|t| t.header.device == d)
                .ok_or_else(|| {
                    let have: Vec<String> =
                        traces.iter().map(|t| t.header.device.to_string()).collect();
                    TraceError::new(
                        &name,
                        Location::File,
                        format!(
                            "no trace for device {d} (devices with events: {})",
                            have.join(", ")
                        ),
                    )
                })?;
            Ok(traces.swap_remove(pos))
        }
        None if traces.len() == 1 => Ok(traces.pop().expect("one trace")),
        None if traces.is_empty() => Err(TraceError::new(
            &name,
            Location::File,
            "the file holds no allocation events",
        )),
        None => {
            let have: Vec<String> = traces.iter().map(|t| t.header.device.to_string()).collect();
            Err(TraceError::new(
                &name,
                Location::File,
                format!(
                    "the file holds traces of several devices ({}); choose one with --device N",
                    have.join(", ")
                ),
            ))
        }
    }
}

/// Writes a trace in `format` (or the one the extension says).
pub fn write_trace(trace: &Trace, path: &Path, format: Option<Format>) -> Result<(), TraceError> {
    let fmt = resolve(path, format)?;
    let name = path.display().to_string();
    let f = File::create(path)
        .map_err(|e| TraceError::new(&name, Location::File, format!("cannot create: {e}")))?;
    match fmt {
        Format::Csv => write_csv(trace, BufWriter::new(f), &name),
        Format::Snapshot => Err(TraceError::new(
            &name,
            Location::File,
            "writing a trace as a snapshot needs a replay: use `vramlab replay --snapshot-out`",
        )),
    }
}
