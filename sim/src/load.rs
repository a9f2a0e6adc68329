//! Loading traces with the allocator's knowledge: snapshots that start
//! mid-run are laid out with their recorded settings' rounding.

use std::path::Path;

use vramlab_allocator::native::rounding::round_size;
use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_traces::io::{
    Format, ReadProgress, pick_device, read_snapshot_file_with_progress, read_traces_with_progress,
};
use vramlab_traces::snapshot::{SizeRules, snapshot_to_traces};
use vramlab_traces::{Trace, TraceError};

/// The settings a trace was recorded under, if it says (`None` when the
/// trace does not record them). An unparsable recorded string is an error.
pub fn recorded_conf(trace: &Trace, version: TorchVersion) -> Result<Option<AllocConf>, String> {
    match &trace.header.alloc_conf {
        None => Ok(None),
        Some(s) => AllocConf::parse(s, version).map(Some).map_err(|e| {
            format!("the recorded settings {s:?} do not parse under PyTorch {version} rules: {e}")
        }),
    }
}

/// Reads every device's trace from `path`.
pub fn load_traces(
    path: &Path,
    format: Option<Format>,
    version: TorchVersion,
) -> Result<Vec<Trace>, TraceError> {
    load_traces_with_progress(path, format, version, None)
}

/// [`load_traces`], reporting the bytes read from the file to `progress`.
pub fn load_traces_with_progress(
    path: &Path,
    format: Option<Format>,
    version: TorchVersion,
    progress: Option<ReadProgress<'_>>,
) -> Result<Vec<Trace>, TraceError> {
    let fmt = format.or_else(|| Format::from_path(path));
    if fmt == Some(Format::Snapshot) {
        let snap = read_snapshot_file_with_progress(path, progress)?;
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
        };
        return snapshot_to_traces(&snap, &path.display().to_string(), &rules);
    }
    read_traces_with_progress(path, format, &SizeRules::default(), progress)
}

/// Reads one device's trace from `path`.
pub fn load_trace(
    path: &Path,
    format: Option<Format>,
    device: Option<u32>,
    version: TorchVersion,
) -> Result<Trace, TraceError> {
    pick_device(load_traces(path, format, version)?, path, device)
}
