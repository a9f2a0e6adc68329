//! PyTorch memory snapshots (`torch.cuda.memory._dump_snapshot()`): the
//! typed model, reading from pickles, conversion to traces, and writing.
//!
//! This namespace is the typed model ([`Snapshot`] and its parts), reading
//! ([`read_snapshot`]), conversion ([`snapshot_to_traces`],
//! [`snapshot_to_device_traces`] under [`SizeRules`]) and the PyTorch
//! releases that could have written a snapshot ([`releases_of`]); how a
//! snapshot is walked stays inside the crate.

mod annotations;
mod bursts;
mod convert;
mod host;
mod initial;
mod model;
mod parse;
mod pool_plan;
mod pool_sections;
mod release;
mod size_rules;
mod walk;

pub use convert::{snapshot_to_device_traces, snapshot_to_traces};
pub use model::{
    Action, AllocatorSettings, Annotation, Frame, FramesRef, Segment, Snapshot, SnapshotBlock,
    SnapshotBlockState, TraceEntry,
};
pub(crate) use parse::snapshot_from_doc;

/// Reads a snapshot pickle from `reader` as [`read_snapshot`] reads bytes,
/// without holding the input whole; `len` is its length if known, else 0.
/// `None`: the streamed read cannot vouch for this input (an error, a
/// pickle not shaped as PyTorch writes one): read the file again whole.
/// `read_snapshot_file` is the way to read a file; this is public for the
/// fuzz targets, which check it against [`read_snapshot_whole`].
#[doc(hidden)]
pub fn read_snapshot_streamed(reader: &mut dyn std::io::Read, len: usize) -> Option<Snapshot> {
    parse::snapshot_streamed_from(reader, len)
}
pub use release::{EVIDENCE_KEY, RELEASES_KEY, ReleaseRange, releases_of};
pub use size_rules::SizeRules;

use crate::error::{Location, TraceError};
use crate::pickle::PickleDoc;

/// Reads a snapshot from the bytes of a pickle file. `path` is for messages.
///
/// The trace entries are converted as the pickle is read, and what the
/// document no longer needs is freed; a pickle not shaped as PyTorch writes
/// one is read whole instead (same answer, same errors).
pub fn read_snapshot(bytes: &[u8], path: &str) -> Result<Snapshot, TraceError> {
    if let Some(snap) = parse::snapshot_streamed(bytes) {
        return Ok(snap);
    }
    let doc = parse_pickle(bytes, path)?;
    typed(&doc, path)
}

/// [`read_snapshot`] without converting entries as the pickle is read: the
/// reference the streamed read is checked against (tests, fuzzing).
#[doc(hidden)]
pub fn read_snapshot_whole(bytes: &[u8], path: &str) -> Result<Snapshot, TraceError> {
    let doc = parse_pickle(bytes, path)?;
    typed(&doc, path)
}

/// [`read_snapshot_whole`] of bytes it drops once the pickle is parsed
/// (the document holds copies of its strings): the file's bytes and the
/// typed snapshot are never in memory together. For files the streamed
/// read ([`read_snapshot_streamed`]) handed back.
pub(crate) fn read_snapshot_whole_owned(
    bytes: Vec<u8>,
    path: &str,
) -> Result<Snapshot, TraceError> {
    let doc = parse_pickle(&bytes, path)?;
    drop(bytes);
    typed(&doc, path)
}

fn parse_pickle(bytes: &[u8], path: &str) -> Result<PickleDoc, TraceError> {
    PickleDoc::from_slice(bytes).map_err(|e| {
        let msg = e.to_string();
        TraceError::new(
            path,
            Location::File,
            format!("not a readable pickle: {msg}"),
        )
    })
}

fn typed(doc: &PickleDoc, path: &str) -> Result<Snapshot, TraceError> {
    snapshot_from_doc(doc)
        .map_err(|p| TraceError::new(path, Location::File, format!("{}: {}", p.path, p.message)))
}
