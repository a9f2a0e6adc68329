//! What a replaying command (`replay`, `recommend`, `oom-point`) reads,
//! resolved once from its TRACE and options: a multi-rank job, a trace
//! held in memory, or a native trace file (`.csv`, `.csv.gz`, `.vlt`,
//! `.vlt.zst`, an RMM log) read again for each pass instead of held, so
//! that memory is bounded by what the replays hold live. An analysis is
//! written once over [`TraceSource::passes`]; its answers are the same
//! from either kind of trace.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::Result;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{ReplayPasses, TraceFile};
use vramlab_traces::{EventBlocks, Format, StreamCounts, Trace, TraceError, TraceEvents};

use crate::args::TraceArgs;
use crate::rereads::Rereads;

/// What one run reads.
pub enum Source {
    /// A multi-rank job: its manifest.
    Job(PathBuf),
    /// One trace.
    Trace(TraceSource),
}

/// How a run may read a single trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Held in memory: the run needs every event at once (a snapshot to
    /// write, a timeline, host timings, a real GPU, a card's state at the
    /// failure).
    Whole,
    /// Read again for each pass when the file is a native trace; `doing`
    /// says what for on the progress bar ("replaying", "searching").
    Passes(&'static str),
}

impl Source {
    /// Resolves TRACE: a job, or its trace read as `reading` allows
    /// (snapshots and `--trace-device` are always held), snapshots laid
    /// out under `version`'s rules.
    pub fn resolve(
        args: &TraceArgs,
        version: Option<TorchVersion>,
        reading: Reading,
    ) -> Result<Source> {
        if let Some(file) = crate::job::job_file(&args.trace) {
            return Ok(Source::Job(file));
        }
        if let (Reading::Passes(doing), None) = (reading, args.device) {
            if let Some(file) = TraceSource::file(&args.trace, args.format, doing)? {
                return Ok(Source::Trace(file));
            }
        }
        Ok(Source::Trace(TraceSource::read_whole(args.load(version)?)))
    }
}

/// One trace of a run (see the module's doc).
pub struct TraceSource {
    label: String,
    path: PathBuf,
    kind: Kind,
}

enum Kind {
    Held(Box<Trace>),
    File(Box<FileTrace>),
}

/// Opens the file once more, for a pass.
type Reopen = Box<dyn Fn() -> Result<TraceEvents, TraceError>>;

/// A native trace file and its reads.
struct FileTrace {
    passes: TraceFile<Reopen, TraceEvents>,
    rereads: Rc<Rereads>,
    /// How many of its notes were known (and printed) when it was opened.
    noted: usize,
}

impl FileTrace {
    /// Opens `path` and prints the notes of its header; `None` for a
    /// snapshot (which is read whole).
    fn open(path: &Path, format: Option<Format>, doing: &'static str) -> Result<Option<Self>> {
        let rereads = Rc::new(Rereads::new(path, format, doing));
        let Some(first) = rereads.open_first()? else {
            return Ok(None);
        };
        // A binary trace's notes are in its metadata: printed before the
        // run's own, as for a trace read whole (an RMM log's come at its
        // end).
        let noted = first.trace().notes.len();
        crate::inputs::print_streamed_notes(path, &first.trace().notes, None);
        let reads = Rc::clone(&rereads);
        let reopen: Reopen = Box::new(move || reads.open());
        Ok(Some(FileTrace {
            passes: TraceFile::opened(reopen, first),
            rereads,
            noted,
        }))
    }
}

/// The trace as a run read it through.
pub struct Ended<'a> {
    /// Its description: header, streams, pools, phases, notes (and, held,
    /// its events).
    pub trace: Cow<'a, Trace>,
    /// Its counts.
    pub counts: StreamCounts,
}

impl TraceSource {
    /// A trace read whole.
    pub fn read_whole(input: vramlab_replay::Input) -> Self {
        TraceSource {
            label: input.label,
            path: input.path,
            kind: Kind::Held(Box::new(input.trace)),
        }
    }

    /// The native trace file at `path`, to be read for each pass (`doing`
    /// says what for on the progress bar), its header's notes printed;
    /// `None` for a snapshot.
    pub fn file(path: &Path, format: Option<Format>, doing: &'static str) -> Result<Option<Self>> {
        Ok(
            FileTrace::open(path, format, doing)?.map(|file| TraceSource {
                label: vramlab_replay::input_label(path, file.passes.trace().header.device),
                path: path.to_path_buf(),
                kind: Kind::File(Box::new(file)),
            }),
        )
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its name in tables.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The passes an analysis makes over it.
    pub fn passes(&self) -> &dyn ReplayPasses {
        match &self.kind {
            Kind::Held(trace) => trace.as_ref(),
            Kind::File(file) => &file.passes,
        }
    }

    /// The trace held in memory (`None`: read for each pass).
    pub fn held(&self) -> Option<&Trace> {
        match &self.kind {
            Kind::Held(trace) => Some(trace),
            Kind::File(_) => None,
        }
    }

    /// Once a pass read the file through: clears the progress bar, prints
    /// the notes learnt while reading, and refuses a trace without events
    /// as a whole read refuses it. A held trace was checked as it was
    /// read.
    pub fn finish(&self) -> Result<Ended<'_>> {
        let ended = self.finish_any()?;
        if ended.counts.events == 0 {
            return Err(crate::inputs::nothing_to_replay(
                &self.path,
                &ended.trace.notes,
            ));
        }
        Ok(ended)
    }

    /// [`TraceSource::finish`] of a trace that may have had no events.
    pub fn finish_any(&self) -> Result<Ended<'_>> {
        match &self.kind {
            Kind::Held(trace) => Ok(Ended {
                trace: Cow::Borrowed(trace),
                counts: StreamCounts::of(trace),
            }),
            Kind::File(file) => {
                file.rereads.done();
                let end = file.passes.first_end().ok_or_else(|| {
                    anyhow::anyhow!("{}: the file was never read through", self.path.display())
                })?;
                let later = end.trace.notes.get(file.noted..).unwrap_or_default();
                // A trace of pinned host requests alone has no device
                // allocation to warn of.
                let counts = Some(end.counts).filter(|_| !end.trace.host_events);
                crate::inputs::print_streamed_notes(&self.path, later, counts);
                Ok(Ended {
                    trace: Cow::Owned(end.trace),
                    counts: end.counts,
                })
            }
        }
    }

    /// How many times the file was read through (`None`: held).
    pub fn reads(&self) -> Option<u32> {
        match &self.kind {
            Kind::Held(_) => None,
            Kind::File(file) => Some(file.passes.reads()),
        }
    }
}
