//! What a read tells its caller: notes on what was skipped or chosen, and
//! why paths gave no traces. The options they advise are data
//! ([`Opt`]), spelled by the front end that shows them.

use std::fmt;
use std::path::PathBuf;

use vramlab_traces::TraceError;
use vramlab_traces::advice::Opt;

use super::Pick;

/// Something a read did that the user should know of. Its
/// [`Display`](fmt::Display) is the line to show (`note: …`, `warning: …`).
#[derive(Debug)]
pub enum InputNote {
    /// A device could not be read; the others were taken.
    DeviceSkipped {
        /// The file, as messages name it.
        file: String,
        /// The device.
        device: u32,
        /// Why it could not be read.
        error: TraceError,
    },
    /// A file holds several devices and none was asked for: the one with
    /// the most allocations was taken.
    Busiest {
        /// The file, as messages name it.
        file: String,
        /// The devices it holds.
        devices: Vec<u32>,
        /// The one taken.
        device: u32,
    },
    /// A note the reader left on the trace (what it had to interpret).
    Trace {
        /// The file, as messages name it.
        file: String,
        /// The note.
        note: String,
    },
    /// A trace without events was left out.
    NoEvents {
        /// The trace's label.
        label: String,
    },
    /// A trace has events but no allocations: every setting reserves the
    /// same.
    NoAllocations {
        /// The trace, as messages name it.
        name: String,
    },
}

impl fmt::Display for InputNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputNote::DeviceSkipped {
                file,
                device,
                error,
            } => write!(f, "note: {file}: device {device} skipped: {error}"),
            InputNote::Busiest {
                file,
                devices,
                device,
            } => write!(
                f,
                "note: {file} holds devices {}; using device {device} (the most allocations); pick another with {}",
                list(devices),
                Opt::TraceDevice.with_placeholder("N")
            ),
            InputNote::Trace { file, note } => write!(f, "note: {file}: {note}"),
            InputNote::NoEvents { label } => write!(f, "note: {label}: no events, skipped"),
            InputNote::NoAllocations { name } => write!(
                f,
                "warning: {name}: the trace has no allocations: every setting reserves the same"
            ),
        }
    }
}

/// Why paths gave no traces.
#[derive(Debug)]
pub enum InputError {
    /// A file could not be read (or none of its devices could).
    Trace(TraceError),
    /// A folder could not be listed.
    List {
        /// The folder.
        folder: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A folder holds no trace files.
    EmptyFolder(PathBuf),
    /// A folder holds no trace files but job folders (each with a
    /// `job.json`), which are read one at a time.
    JobsInFolder {
        /// The folder.
        folder: PathBuf,
        /// The job folders' names, sorted.
        jobs: Vec<String>,
    },
    /// The device asked for could not be read.
    Device {
        /// The file, as messages name it.
        file: String,
        /// How devices were picked.
        pick: Pick,
        /// The device.
        device: u32,
        /// Why it could not be read.
        error: TraceError,
    },
    /// A snapshot with no segments and no trace entries on any device
    /// (dumped with nothing on the GPU and no memory history).
    EmptySnapshot {
        /// The file, as messages name it.
        file: String,
    },
    /// A file gave no trace (of the device asked for).
    NoTrace {
        /// The file, as messages name it.
        file: String,
        /// How devices were picked.
        pick: Pick,
        /// The devices the file holds.
        devices: Vec<u32>,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Trace(e) => write!(f, "{e}"),
            InputError::List { folder, error } => {
                write!(f, "cannot list {}: {error}", folder.display())
            }
            InputError::EmptyFolder(p) => write!(
                f,
                "{}: a folder with no traces in it (known extensions: .pickle, .pkl, .pickle.gz, .csv, .csv.gz, .vlt, .vlt.zst)",
                p.display()
            ),
            InputError::JobsInFolder { folder, jobs } => {
                let first = jobs.first().map_or("", String::as_str);
                write!(
                    f,
                    "{}: no trace files in it, but {} job folder(s) ({}): give one job at a time, e.g. `vramlab replay {}`",
                    folder.display(),
                    jobs.len(),
                    jobs.join(", "),
                    folder.join(first).display()
                )
            }
            InputError::Device {
                file,
                pick,
                device,
                error,
            } => match pick {
                Pick::Pool(_) => write!(f, "{file}: device {device}: {error}"),
                _ => write!(f, "device {device}: {error}"),
            },
            InputError::EmptySnapshot { file } => write!(
                f,
                "{file}: an empty snapshot: 0 segments and 0 trace entries (dumped with nothing allocated on the GPU and no memory history): nothing to replay. Record one with torch.cuda.memory._record_memory_history(max_entries=1000000) before the work, then torch.cuda.memory._dump_snapshot(FILE)"
            ),
            InputError::NoTrace {
                file,
                pick,
                devices,
            } => match pick {
                Pick::One(Some(d)) => write!(
                    f,
                    "{file}: no trace for device {d} (devices in the file: {})",
                    list(devices)
                ),
                Pick::One(None) => write!(f, "{file}: the file holds no allocation events"),
                Pick::Each(Some(d)) | Pick::Pool(Some(d)) => {
                    write!(f, "{file}: no trace for device {d}")
                }
                Pick::Each(None) | Pick::Pool(None) => write!(f, "{file}: no trace"),
            },
        }
    }
}

impl std::error::Error for InputError {}

impl From<TraceError> for InputError {
    fn from(e: TraceError) -> Self {
        InputError::Trace(e)
    }
}

fn list(devices: &[u32]) -> String {
    devices
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
