//! A native trace file that a command reads several times instead of
//! holding it (`oom-point`'s searches, `recommend`'s passes): each read
//! opens it again, with ids recycled, and shows a bar of its bytes on a
//! terminal when the file is large.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use vramlab_traces::{Format, IdUse, Location, TraceError, TraceEvents, open_events};

/// The reads of one file (see the module's doc).
pub struct Rereads {
    path: PathBuf,
    format: Option<Format>,
    /// What the bar says is being done: "`doing` (read N) in FILE".
    doing: &'static str,
    bar: RefCell<Option<ProgressBar>>,
    opened: Cell<u32>,
}

impl Rereads {
    /// The reads of `path` (in `format`, or as its extension says).
    pub fn new(path: &Path, format: Option<Format>, doing: &'static str) -> Self {
        Rereads {
            path: path.to_path_buf(),
            format,
            doing,
            bar: RefCell::new(None),
            opened: Cell::new(0),
        }
    }

    /// Opens the file for its first read; `None` for a snapshot (which is
    /// not read as it streams).
    pub fn open_first(&self) -> Result<Option<TraceEvents>, TraceError> {
        self.opened.set(self.opened.get() + 1);
        let doing = format!("{} (read {}) in", self.doing, self.opened.get());
        let (pb, hook) = crate::progress::stream_bar(&self.path, &doing).unzip();
        if let Some(old) = self.bar.replace(pb) {
            old.finish_and_clear();
        }
        let events = open_events(&self.path, self.format, IdUse::Recycled, hook);
        if !matches!(events, Ok(Some(_))) {
            self.done();
        }
        events
    }

    /// Opens the file again; a file that no longer reads as a native trace
    /// is an error.
    pub fn open(&self) -> Result<TraceEvents, TraceError> {
        self.open_first()?.ok_or_else(|| {
            TraceError::new(
                self.path.display().to_string(),
                Location::File,
                "the file changed while it was read: it is no longer a native trace".to_string(),
            )
        })
    }

    /// Clears the bar of the last read.
    pub fn done(&self) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
        }
    }
}
