//! PyTorch memory snapshots (`torch.cuda.memory._dump_snapshot()`): the
//! typed model, reading from pickles, conversion to traces, and writing.

mod bursts;
mod convert;
mod initial;
mod model;
mod parse;
pub mod release;
mod size_rules;
mod walk;

pub use bursts::{ReleaseBurst, classify_release_burst};
pub use convert::{snapshot_to_device_traces, snapshot_to_traces};
pub use model::*;
pub use parse::{ParseProblem, snapshot_from_doc};
pub use release::{ReleaseRange, releases_of};
pub use size_rules::SizeRules;

use crate::error::{Location, TraceError};
use crate::pickle::PickleDoc;

/// Reads a snapshot from the bytes of a pickle file. `path` is for messages.
pub fn read_snapshot(bytes: &[u8], path: &str) -> Result<Snapshot, TraceError> {
    let doc = PickleDoc::from_slice(bytes).map_err(|e| {
        let msg = e.to_string();
        TraceError::new(
            path,
            Location::File,
            format!("not a readable pickle: {msg}"),
        )
    })?;
    snapshot_from_doc(&doc)
        .map_err(|p| TraceError::new(path, Location::File, format!("{}: {}", p.path, p.message)))
}
