//! One way in: the traces that paths (files, or folders of them) hold,
//! read with the allocator's knowledge (a snapshot that starts mid-run is
//! laid out under the settings it was recorded with), one device or every
//! device picked, each named (`file#device`), with notes on what was
//! skipped or chosen.
//!
//! ```no_run
//! # fn main() -> Result<(), vramlab_replay::InputError> {
//! use vramlab_replay::{Inputs, Pick};
//! let trace = vramlab_replay::Inputs::new(["train.pickle"]).trace()?;
//! let all = Inputs::new(["runs/"]).pick(Pick::Pool(None)).read()?;
//! for input in &all.inputs {
//!     println!("{}: {} events", input.label, input.trace.events.len());
//! }
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use vramlab_allocator::policies::native::round_size;
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_traces::snapshot::{SizeRules, Snapshot, snapshot_to_device_traces};
use vramlab_traces::{Format, read_snapshot_file, read_traces};
use vramlab_traces::{Trace, TraceError};

mod notes;

pub use notes::{InputError, InputNote};

/// What to read: paths, their format, which devices, under which PyTorch
/// release's rules, with an optional progress callback. [`Inputs::read`]
/// reads them.
#[derive(Clone)]
pub struct Inputs<'a> {
    paths: Vec<PathBuf>,
    format: Option<Format>,
    pick: Pick,
    torch: Option<TorchVersion>,
    progress: Option<&'a dyn Fn(Reading<'_>)>,
}

/// Which traces of each file are taken, and what a file that gives none
/// means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// One trace per file, for a replay: the device given, or the only
    /// one, or the one with the most allocations (noted). A file that gives
    /// none is an error; the trace's own notes are the input's notes.
    One(Option<u32>),
    /// Every device of each file (or only the one given), as read: a file
    /// that gives none is an error.
    Each(Option<u32>),
    /// Every device with events across the files (or only the one given),
    /// for replays side by side: a file without it is skipped, a trace
    /// without events is skipped (noted). Files are named by their file
    /// name, as in tables.
    Pool(Option<u32>),
}

/// Progress of a read, for a caller that shows it.
#[derive(Debug, Clone, Copy)]
pub enum Reading<'p> {
    /// A file's read begins; `bytes` is its size (0 when unknown).
    Started {
        /// The file.
        path: &'p Path,
        /// Its size in bytes.
        bytes: u64,
    },
    /// Bytes read from the file so far (compressed bytes for compressed
    /// files), about every [`vramlab_traces::PROGRESS_STEP`].
    Read(u64),
    /// The file's read (and conversion) ended.
    Finished,
}

/// One trace read, with the name it goes by.
#[derive(Debug, Clone)]
pub struct Input {
    /// The file it came from (a folder's files by their own path).
    pub path: PathBuf,
    /// Its name in tables: the file name, with `#N` for a device other
    /// than 0.
    pub label: String,
    /// The trace.
    pub trace: Trace,
}

/// What [`Inputs::read`] read: the traces, and notes on what was skipped
/// or chosen, in the order they arose.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The traces taken, file by file, in device order.
    pub inputs: Vec<Input>,
    /// What the caller should tell the user.
    pub notes: Vec<InputNote>,
}

impl Loaded {
    /// The traces alone.
    pub fn into_traces(self) -> Vec<Trace> {
        self.inputs.into_iter().map(|i| i.trace).collect()
    }
}

/// The devices of one file, each read on its own: those that converted and
/// those that did not (with why), so that one device never blocks another.
#[derive(Debug, Default)]
pub struct DeviceTraces {
    /// One trace per device that converted, in device order.
    pub traces: Vec<Trace>,
    /// Devices whose trace could not be read, with the error.
    pub failed: Vec<(u32, TraceError)>,
}

/// The name a trace goes by in tables: the file name, with `#N` for a
/// device other than 0.
pub fn label(path: &Path, device: u32) -> String {
    let mut name = file_name(path);
    if device != 0 {
        name.push_str(&format!("#{device}"));
    }
    name
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().to_string(),
    )
}

impl<'a> Inputs<'a> {
    /// The traces in `paths` (files, or folders of trace files): by
    /// default the format each extension says, [`Pick::One`] with no
    /// device, and the release each snapshot was recorded with.
    pub fn new<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Self {
        Inputs {
            paths: paths
                .into_iter()
                .map(|p| p.as_ref().to_path_buf())
                .collect(),
            format: None,
            pick: Pick::One(None),
            torch: None,
            progress: None,
        }
    }

    /// The files' format, when their extensions do not say.
    pub fn format(mut self, format: Option<Format>) -> Self {
        self.format = format;
        self
    }

    /// Which traces of each file are taken.
    pub fn pick(mut self, pick: Pick) -> Self {
        self.pick = pick;
        self
    }

    /// The PyTorch release whose rules lay out snapshots that start mid-run
    /// (`None`: the newest release that could have written each one).
    pub fn torch(mut self, version: impl Into<Option<TorchVersion>>) -> Self {
        self.torch = version.into();
        self
    }

    /// Tells `progress` how each file's read goes.
    pub fn progress(mut self, progress: &'a dyn Fn(Reading<'_>)) -> Self {
        self.progress = Some(progress);
        self
    }

    /// The files to read: the paths, every folder replaced by the trace
    /// files inside it (by extension, sorted; not recursing). A folder
    /// without traces is an error.
    pub fn files(&self) -> Result<Vec<PathBuf>, InputError> {
        let mut out = Vec::new();
        for p in &self.paths {
            if !p.is_dir() {
                out.push(p.clone());
                continue;
            }
            let mut inside: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|error| InputError::List {
                    folder: p.clone(),
                    error,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && Format::from_path(f).is_some())
                .collect();
            if inside.is_empty() {
                return Err(empty_folder(p));
            }
            inside.sort();
            out.extend(inside);
        }
        Ok(out)
    }

    /// Reads every file, picking traces as [`Inputs::pick`] says.
    pub fn read(&self) -> Result<Loaded, InputError> {
        let mut out = Loaded::default();
        for path in self.files()? {
            let one = self.read_file(&path)?;
            out.inputs.extend(one.inputs);
            out.notes.extend(one.notes);
        }
        Ok(out)
    }

    /// The first trace read: with the default pick, the one file's only
    /// device (or the one asked for, or the busiest).
    pub fn trace(&self) -> Result<Trace, InputError> {
        let loaded = self.read()?;
        match loaded.inputs.into_iter().next() {
            Some(i) => Ok(i.trace),
            None => Err(InputError::NoTrace {
                file: self
                    .paths
                    .first()
                    .map_or_else(String::new, |p| p.display().to_string()),
                pick: self.pick,
                devices: Vec::new(),
            }),
        }
    }

    /// Reads one file (not a folder), picking traces as [`Inputs::pick`]
    /// says; a caller that reports file by file calls it for each of
    /// [`Inputs::files`].
    pub fn read_file(&self, path: &Path) -> Result<Loaded, InputError> {
        let devices = self.devices(path)?;
        if devices.traces.is_empty() && devices.failed.is_empty() {
            // Nothing on any device: no segment and no entry.
            return Err(InputError::EmptySnapshot {
                file: path.display().to_string(),
            });
        }
        match self.pick {
            Pick::One(device) => self.pick_one(path, devices, device),
            Pick::Each(device) => pick_each(path, devices, device),
            Pick::Pool(device) => pick_pool(path, devices, device),
        }
    }

    /// Every device of one file, each read on its own: a snapshot device
    /// whose entries are malformed is in [`DeviceTraces::failed`] and the
    /// others are kept. Errors that concern the whole file are errors.
    pub fn devices(&self, path: &Path) -> Result<DeviceTraces, TraceError> {
        let Some(progress) = self.progress else {
            return read_devices(path, self.format, self.torch, None);
        };
        let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
        progress(Reading::Started { path, bytes });
        let report = |n: u64| progress(Reading::Read(n));
        let out = read_devices(path, self.format, self.torch, Some(&report));
        progress(Reading::Finished);
        out
    }

    fn pick_one(
        &self,
        path: &Path,
        devices: DeviceTraces,
        device: Option<u32>,
    ) -> Result<Loaded, InputError> {
        let file = path.display().to_string();
        let mut notes = Vec::new();
        let have: Vec<u32> = devices.traces.iter().map(|t| t.header.device).collect();
        let trace = if let Some(d) = device {
            if let Some((_, e)) = devices.failed.into_iter().find(|(x, _)| *x == d) {
                return Err(InputError::Device {
                    file,
                    pick: self.pick,
                    device: d,
                    error: e,
                });
            }
            match devices.traces.into_iter().find(|t| t.header.device == d) {
                Some(t) => t,
                None => {
                    return Err(InputError::NoTrace {
                        file,
                        pick: self.pick,
                        devices: have,
                    });
                }
            }
        } else {
            let Some(best) = busiest(&devices.traces) else {
                return match devices.failed.into_iter().next() {
                    Some((_, e)) => Err(InputError::Trace(e)),
                    None => Err(InputError::NoTrace {
                        file,
                        pick: self.pick,
                        devices: have,
                    }),
                };
            };
            let many = devices.traces.len() > 1;
            let t = devices
                .traces
                .into_iter()
                .nth(best)
                .ok_or_else(|| InputError::NoTrace {
                    file: file.clone(),
                    pick: self.pick,
                    devices: have.clone(),
                })?;
            if many {
                notes.push(InputNote::Busiest {
                    file: file.clone(),
                    devices: have,
                    device: t.header.device,
                });
            }
            notes.extend(skipped(&file, devices.failed));
            t
        };
        notes.extend(trace.notes.iter().map(|n| InputNote::Trace {
            file: file.clone(),
            note: n.clone(),
        }));
        if !trace.events.is_empty() && trace.num_allocs() == 0 && !trace.host_events {
            notes.push(InputNote::NoAllocations { name: file });
        }
        Ok(Loaded {
            inputs: vec![Input {
                path: path.to_path_buf(),
                label: label(path, trace.header.device),
                trace,
            }],
            notes,
        })
    }
}

/// The trace with the most allocations (the first of equals).
fn busiest(traces: &[Trace]) -> Option<usize> {
    traces
        .iter()
        .enumerate()
        .max_by_key(|(i, t)| (t.num_allocs(), std::cmp::Reverse(*i)))
        .map(|(i, _)| i)
}

/// The note on each device that could not be read.
fn skipped(file: &str, failed: Vec<(u32, TraceError)>) -> impl Iterator<Item = InputNote> + '_ {
    failed
        .into_iter()
        .map(move |(device, error)| InputNote::DeviceSkipped {
            file: file.to_string(),
            device,
            error,
        })
}

fn pick_each(
    path: &Path,
    devices: DeviceTraces,
    device: Option<u32>,
) -> Result<Loaded, InputError> {
    let file = path.display().to_string();
    let pick = Pick::Each(device);
    let mut failed = devices.failed;
    if let Some(d) = device {
        if let Some(pos) = failed.iter().position(|(x, _)| *x == d) {
            let (_, error) = failed.swap_remove(pos);
            return Err(InputError::Device {
                file,
                pick,
                device: d,
                error,
            });
        }
    }
    let have: Vec<u32> = devices.traces.iter().map(|t| t.header.device).collect();
    let traces: Vec<Trace> = devices
        .traces
        .into_iter()
        .filter(|t| device.is_none_or(|d| t.header.device == d))
        .collect();
    if traces.is_empty() {
        return match failed.into_iter().next() {
            Some((_, e)) if device.is_none() => Err(InputError::Trace(e)),
            _ => Err(InputError::NoTrace {
                file,
                pick,
                devices: have,
            }),
        };
    }
    let notes = if device.is_none() {
        skipped(&file, failed).collect()
    } else {
        Vec::new()
    };
    Ok(Loaded {
        inputs: inputs_of(path, traces),
        notes,
    })
}

fn pick_pool(
    path: &Path,
    devices: DeviceTraces,
    device: Option<u32>,
) -> Result<Loaded, InputError> {
    let file = file_name(path);
    let mut failed = devices.failed;
    if let Some(d) = device {
        if let Some(pos) = failed.iter().position(|(x, _)| *x == d) {
            let (_, error) = failed.swap_remove(pos);
            return Err(InputError::Device {
                file,
                pick: Pick::Pool(device),
                device: d,
                error,
            });
        }
    }
    if devices.traces.is_empty() && !failed.is_empty() {
        return Err(InputError::Trace(failed.swap_remove(0).1));
    }
    let mut out = Loaded::default();
    if device.is_none() {
        out.notes.extend(skipped(&file, failed));
    }
    for t in devices.traces {
        if device.is_some_and(|d| d != t.header.device) {
            continue;
        }
        let label = label(path, t.header.device);
        if t.events.is_empty() {
            out.notes.push(InputNote::NoEvents { label });
            continue;
        }
        if t.num_allocs() == 0 && !t.host_events {
            out.notes.push(InputNote::NoAllocations {
                name: label.clone(),
            });
        }
        out.inputs.push(Input {
            path: path.to_path_buf(),
            label,
            trace: t,
        });
    }
    Ok(out)
}

fn inputs_of(path: &Path, traces: Vec<Trace>) -> Vec<Input> {
    traces
        .into_iter()
        .map(|trace| Input {
            path: path.to_path_buf(),
            label: label(path, trace.header.device),
            trace,
        })
        .collect()
}

fn read_devices(
    path: &Path,
    format: Option<Format>,
    version: Option<TorchVersion>,
    progress: Option<&dyn Fn(u64)>,
) -> Result<DeviceTraces, TraceError> {
    let fmt = format.or_else(|| Format::from_path(path));
    if fmt == Some(Format::Snapshot) {
        let snap = read_snapshot_file(path, progress)?;
        return Ok(snapshot_devices(
            &snap,
            &path.display().to_string(),
            version,
        ));
    }
    Ok(DeviceTraces {
        traces: read_traces(path, format, &SizeRules::default(), progress)?,
        failed: Vec::new(),
    })
}

/// Converts every device of a snapshot, laid out with the size rules of the
/// settings it was recorded under: PyTorch `version`'s rules, or (`None`)
/// those of the newest release that could have written it. `name` names
/// the snapshot in messages.
pub fn snapshot_devices(
    snap: &Snapshot,
    name: &str,
    version: impl Into<Option<TorchVersion>>,
) -> DeviceTraces {
    let version = version
        .into()
        .unwrap_or_else(|| vramlab_traces::snapshot::releases_of(snap).rules());
    let raw = snap
        .allocator_settings
        .as_ref()
        .and_then(|s| s.conf_string.clone())
        .unwrap_or_default();
    // Unparsable recorded settings fall back to the defaults here; the
    // fidelity check reports them.
    let conf = AllocConf::parse(&raw, version).unwrap_or_else(|_| AllocConf::new(version));
    let round = |n: u64| round_size(&conf, n);
    let rules = SizeRules {
        round: &round,
        max_split_size: conf.max_split_size_bytes(),
        max_non_split_rounding: conf.max_non_split_rounding_bytes(),
        large_page: conf.large_segment_size_bytes(),
    };
    let mut out = DeviceTraces::default();
    for (d, r) in snapshot_to_device_traces(snap, name, &rules) {
        match r {
            Ok(t) => out.traces.push(t),
            Err(e) => out.failed.push((d, e)),
        }
    }
    out
}

/// The error for a folder without trace files: it names the job folders
/// inside it, when there are some.
fn empty_folder(folder: &Path) -> InputError {
    let mut jobs: Vec<String> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|d| d.join("job.json").is_file())
        .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    if jobs.is_empty() {
        return InputError::EmptyFolder(folder.to_path_buf());
    }
    jobs.sort();
    InputError::JobsInFolder {
        folder: folder.to_path_buf(),
        jobs,
    }
}
