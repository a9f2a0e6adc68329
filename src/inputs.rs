//! Reading the traces named on the command line through
//! [`vramlab_replay::Inputs`], with a bar for a large file on a terminal
//! and each file's notes printed as it is read.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use vramlab_replay::DeviceTraces;
use vramlab_replay::{Input, InputError, Inputs, Pick, Reading};
use vramlab_traces::{Trace, TraceError};

use crate::progress::ReadBar;

/// Reads `inputs` file by file (folders expanded): a reading bar for each
/// large file, its notes on stderr once it is read, the traces it gave.
pub fn read(inputs: Inputs<'_>) -> Result<Vec<Input>> {
    let files = inputs.files()?;
    read_files(inputs, &files)
}

/// [`read`] of `files` as they are (a folder is not expanded).
pub fn read_files(inputs: Inputs<'_>, files: &[PathBuf]) -> Result<Vec<Input>> {
    let bar = ReadBar::default();
    let report = |r: Reading<'_>| bar.report(r);
    let inputs = inputs.progress(&report);
    let mut out = Vec::new();
    for path in files {
        let loaded = inputs.read_file(path)?;
        for note in &loaded.notes {
            errln!("{note}");
        }
        out.extend(loaded.inputs);
    }
    Ok(out)
}

/// Every device of `path`, each read on its own, with a reading bar for a
/// large file.
pub fn devices(inputs: Inputs<'_>, path: &Path) -> Result<DeviceTraces, TraceError> {
    let bar = ReadBar::default();
    let report = |r: Reading<'_>| bar.report(r);
    inputs.progress(&report).devices(path)
}

/// Every trace with events in `folder`, by label, for the developer
/// commands (`bench`, `bench-check`); their notes are not printed.
pub fn folder(folder: &Path) -> Result<Vec<(String, Trace)>> {
    if let Err(error) = std::fs::read_dir(folder) {
        return Err(InputError::List {
            folder: folder.to_path_buf(),
            error,
        }
        .into());
    }
    let loaded = match Inputs::new([folder]).pick(Pick::Pool(None)).read() {
        Err(InputError::EmptyFolder(_)) => bail!("no traces in {}", folder.display()),
        r => r?,
    };
    Ok(loaded
        .inputs
        .into_iter()
        .map(|i| (i.label, i.trace))
        .collect())
}

/// The error for a trace without events at `path`: the first of its
/// `notes` says why, when there is one.
pub fn nothing_to_replay(path: &Path, notes: &[String]) -> anyhow::Error {
    let why = notes.first().map_or("the trace has no events", |n| n);
    anyhow::anyhow!("{}: nothing to replay: {why}", path.display())
}

/// The notes of a trace replayed as it is read, as [`read`] prints them
/// for one trace read whole: `notes` of the file (those known when it was
/// opened, then at the end those learnt while reading it), and at the end
/// (`counts`) a warning when it has events but no allocation.
pub fn print_streamed_notes(
    path: &Path,
    notes: &[String],
    counts: Option<vramlab_traces::StreamCounts>,
) {
    let file = path.display().to_string();
    for note in notes {
        let note = vramlab_replay::InputNote::Trace {
            file: file.clone(),
            note: note.clone(),
        };
        errln!("{note}");
    }
    if counts.is_some_and(|c| c.events > 0 && c.allocs == 0) {
        errln!(
            "{}",
            vramlab_replay::InputNote::NoAllocations { name: file }
        );
    }
}
