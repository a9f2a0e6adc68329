//! Loading traces with the allocator's knowledge: snapshots that start
//! mid-run are laid out with their recorded settings' rounding.

use std::path::Path;

use vramlab_allocator::policies::native::rounding::round_size;
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_traces::io::{
    Format, ReadProgress, pick_device, read_snapshot_file_with_progress, read_traces_with_progress,
};
use vramlab_traces::snapshot::{SizeRules, Snapshot, snapshot_to_device_traces};
use vramlab_traces::{Trace, TraceError};

pub use crate::engine::start::recorded_conf;

/// Reads every device's trace from `path`. A device whose entries are
/// malformed fails the whole read; [`load_devices`] keeps the others.
pub fn load_traces(
    path: &Path,
    format: Option<Format>,
    version: impl Into<Option<TorchVersion>>,
) -> Result<Vec<Trace>, TraceError> {
    load_traces_with_progress(path, format, version, None)
}

/// [`load_traces`], reporting the bytes read from the file to `progress`.
pub fn load_traces_with_progress(
    path: &Path,
    format: Option<Format>,
    version: impl Into<Option<TorchVersion>>,
    progress: Option<ReadProgress<'_>>,
) -> Result<Vec<Trace>, TraceError> {
    let loaded = load_devices(path, format, version, progress)?;
    if let Some((_, e)) = loaded.failed.into_iter().next() {
        return Err(e);
    }
    Ok(loaded.traces)
}

/// The devices of a file: those that converted, and those that did not
/// (with why), so that one device never blocks another.
#[derive(Debug, Default)]
pub struct Loaded {
    /// One trace per device that converted, in device order.
    pub traces: Vec<Trace>,
    /// Devices whose trace could not be read, with the error.
    pub failed: Vec<(u32, TraceError)>,
}

/// Reads every device of `path` on its own: a snapshot device whose
/// entries are malformed is reported in [`Loaded::failed`] and the others
/// are kept. Errors that concern the whole file are errors.
pub fn load_devices(
    path: &Path,
    format: Option<Format>,
    version: impl Into<Option<TorchVersion>>,
    progress: Option<ReadProgress<'_>>,
) -> Result<Loaded, TraceError> {
    let fmt = format.or_else(|| Format::from_path(path));
    if fmt == Some(Format::Snapshot) {
        let snap = read_snapshot_file_with_progress(path, progress)?;
        return Ok(snapshot_devices(
            &snap,
            &path.display().to_string(),
            version,
        ));
    }
    Ok(Loaded {
        traces: read_traces_with_progress(path, format, &SizeRules::default(), progress)?,
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
) -> Loaded {
    {
        let version = version.into().unwrap_or_else(|| {
            let r = vramlab_traces::snapshot::releases_of(snap);
            crate::torch_release::parse_range(&r.label())
                .and_then(|v| v.last().copied())
                .unwrap_or(TorchVersion::NEWEST)
        });
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
        let mut out = Loaded::default();
        for (d, r) in snapshot_to_device_traces(snap, name, &rules) {
            match r {
                Ok(t) => out.traces.push(t),
                Err(e) => out.failed.push((d, e)),
            }
        }
        out
    }
}

/// Reads one device's trace from `path`.
pub fn load_trace(
    path: &Path,
    format: Option<Format>,
    device: Option<u32>,
    version: impl Into<Option<TorchVersion>>,
) -> Result<Trace, TraceError> {
    pick_device(load_traces(path, format, version)?, path, device)
}
