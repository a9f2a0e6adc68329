//! vramlab-workloads: traces of real LLM and diffusion jobs at any batch
//! size, sequence length or resolution, generated from the recorded corpus.
//!
//! The corpus (`data/*.csv.gz` in this crate, listed in `data/MANIFEST.tsv`
//! and compiled into the library) holds, for each workload *family* (a
//! workload with fixed variant parameters: precision, attention, activation
//! checkpointing, KV cache), recordings of the same code at three values of
//! its scaling parameter at batch 1, and one at batch 2. At run time the
//! family's recordings are read and a [`Template`] is learned from them
//! (milliseconds): the event sequences are checked to line up event by
//! event, every allocation's size is fitted exactly — constant, linear or
//! quadratic in the sequence length or in the latent pixel count, with
//! integer arithmetic — and the batch-2 recording is aligned to give each
//! size its batch dependence. [`generate`] then instantiates the template at
//! the requested size. There are no template files to keep in sync: the
//! recordings are the only data.
//!
//! A generated trace at a recorded size reproduces that recording's events
//! exactly; between and beyond them sizes follow the fitted functions
//! ([`check_family`] measures both, with one size held back).
//!
//! Your own recordings (from `vramlab_record`, at two or three sizes of one
//! parameter, optionally one at another batch size) become a template with
//! [`learn_files`].
//!
//! The recordings are made by the Python recorder in `record/`
//! (`vramlab_record`), which lives beside this crate but is not part of it.
//!
//! The public surface is the crate root alone (every module is private): a
//! request ([`GenRequest`], its knobs [`Precision`], [`Attention`],
//! [`KvCache`], [`ModelSize`], [`Offload`]) and [`generate`]; the presets
//! ([`PRESETS`], [`preset`], [`Preset`], [`Variant`]) and their
//! recordings ([`corpus`], [`read_recording_bytes`]); templates
//! ([`Template`], [`load_template`], [`learn_files`]); and the checks
//! ([`check_family`], [`peak_live_bytes`]).
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
#![warn(missing_docs)]

mod check;
mod corpus;
mod fit;
mod knobs;
mod opt;
mod preset;
mod read;
mod template;

use std::path::Path;

pub use check::{Check, CheckKind, check_family};
pub use corpus::{CorpusEntry, corpus};
pub use knobs::{Attention, KvCache, ModelSize, Offload, Precision};
pub use preset::{GenRequest, PRESETS, Preset, Variant, generate, load_template, preset};
pub use read::{Recording, read_recording_bytes};
pub use template::{Scaling, Template, peak_live_bytes};

use read::read_recording;
use template::Sample;

#[cfg(test)]
mod tests;
use vramlab_traces::TraceError;

/// Why a trace could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// A recording is unreadable or does not fit the others (names the
    /// file and the event).
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The request cannot be served (unknown preset, variant that was not
    /// recorded, parameter out of range); the message says what is
    /// available.
    #[error("{0}")]
    Request(String),
}

/// Learns a template from recording files (`.csv` / `.csv.gz`). Each file's
/// batch and scaling value come from its `# param.batch:` and
/// `# param.seq:` / `# param.resolution:` header lines (as
/// `vramlab_record` writes them) unless `overrides` gives them, as
/// `(file index, key, value)`.
pub fn learn_files(
    name: &str,
    paths: &[&Path],
    overrides: &[(usize, String, u64)],
) -> Result<Template, GenError> {
    let recs: Vec<Recording> = paths
        .iter()
        .map(|p| read_recording(p))
        .collect::<Result<_, _>>()?;
    learn_recordings(name, &recs, overrides)
}

/// [`learn_files`] on recordings already read.
pub(crate) fn learn_recordings(
    name: &str,
    recs: &[Recording],
    overrides: &[(usize, String, u64)],
) -> Result<Template, GenError> {
    let get = |i: usize, key: &str| -> Option<u64> {
        overrides
            .iter()
            .rev()
            .find(|(j, k, _)| *j == i && k == key)
            .map(|(_, _, v)| *v)
            .or_else(|| recs.get(i)?.param_u64(key))
    };
    let scaling = {
        let has = |key: &str| (0..recs.len()).all(|i| get(i, key).is_some());
        if has("seq") {
            Scaling::Seq
        } else if has("resolution") {
            Scaling::Resolution
        } else {
            return Err(GenError::Request(format!(
                "{name}: every recording needs a seq or resolution value (a '# param.seq: N' header line, or NAME@seq=N)"
            )));
        }
    };
    let samples: Vec<Sample<'_>> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| Sample {
            rec: r,
            batch: get(i, "batch").unwrap_or(1),
            value: get(i, scaling.param()).unwrap_or(0),
        })
        .collect();
    Template::learn(name, scaling, &samples)
}
