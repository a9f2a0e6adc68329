//! Opening trace files by format: chosen by extension (and, for `.csv`, by
//! the header row) or named explicitly.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read};
use std::path::Path;

use crate::advice::{Cmd, Opt};
use crate::binary::{VltEvents, VltWriter, is_binary, read_binary};
use crate::csv::{CsvEvents, CsvWriter, read_csv};
use crate::error::{Location, TraceError};
use crate::event_blocks::TraceEvents;
use crate::model::{Event, Trace};
use crate::pickle::MAX_INPUT_LEN;
use crate::rmm::{RmmEvents, is_rmm_header, read_rmm};
use crate::snapshot::{
    SizeRules, Snapshot, read_snapshot_streamed, read_snapshot_whole_owned, snapshot_to_traces,
};

/// A trace file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The native CSV text format (`.csv`).
    Csv,
    /// The native CSV text format, gzip-compressed (`.csv.gz`).
    CsvGz,
    /// The native binary format (`.vlt`; zstd-compressed: `.vlt.zst`).
    Binary,
    /// The native binary format, zstd-compressed (`.vlt.zst`).
    BinaryZstd,
    /// A PyTorch memory snapshot pickle (`.pickle`, `.pkl`).
    Snapshot,
    /// A RAPIDS RMM allocation log (`.csv` with RMM's header).
    Rmm,
}

impl Format {
    /// All formats with their names and descriptions, for help texts.
    pub const ALL: [(Format, &'static str, &'static str); 6] = [
        (Format::Csv, "csv", "native CSV (.csv)"),
        (
            Format::CsvGz,
            "csv.gz",
            "native CSV, gzip-compressed (.csv.gz)",
        ),
        (Format::Binary, "vlt", "native binary (.vlt)"),
        (
            Format::BinaryZstd,
            "vlt.zst",
            "native binary, zstd-compressed (.vlt.zst)",
        ),
        (
            Format::Snapshot,
            "snapshot",
            "PyTorch memory snapshot (.pickle, .pkl, gzip-compressed .pickle.gz)",
        ),
        (Format::Rmm, "rmm", "RAPIDS RMM allocation log (CSV)"),
    ];

    /// The format named `name` (`csv`, `vlt`, `vlt.zst`, `snapshot`, `rmm`).
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(f, _, _)| *f)
    }

    /// The format a file name's extension says (`.csv` may still turn out
    /// to be an RMM log when read).
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".csv") {
            Some(Format::Csv)
        } else if name.ends_with(".csv.gz") {
            Some(Format::CsvGz)
        } else if name.ends_with(".vlt.zst") {
            Some(Format::BinaryZstd)
        } else if name.ends_with(".vlt") {
            Some(Format::Binary)
        } else if name.ends_with(".pickle")
            || name.ends_with(".pkl")
            || name.ends_with(".pickle.gz")
            || name.ends_with(".pkl.gz")
        {
            Some(Format::Snapshot)
        } else {
            None
        }
    }
}

fn open_error(path: &Path, e: std::io::Error) -> TraceError {
    TraceError::new(
        path.display().to_string(),
        Location::File,
        format!("cannot open: {e}"),
    )
}

fn resolve(path: &Path, format: Option<Format>) -> Result<Format, TraceError> {
    if let Some(f) = format.or_else(|| Format::from_path(path)) {
        return Ok(f);
    }
    // A mistyped path is named as one, not as a file of unknown format.
    if let Err(e) = std::fs::metadata(path) {
        return Err(open_error(path, e));
    }
    let names: Vec<&str> = Format::ALL.iter().map(|(_, n, _)| *n).collect();
    Err(TraceError::new(
        path.display().to_string(),
        Location::File,
        format!(
            "cannot tell the format from the file name; name it with {} ({})",
            Opt::Format.bare(),
            names.join(", ")
        ),
    ))
}

/// The first line that is not blank and not a `#` comment. A line that is
/// too long or not text gives `None`: the CSV reader then reports it with
/// its line number.
fn first_data_line(r: &mut impl BufRead) -> std::io::Result<Option<String>> {
    // Callers reopen the file to read it from the start.
    let mut lines = crate::lines::Lines::new(r);
    while let Some(line) = lines.next_line() {
        let line = match line {
            Ok(l) => l,
            Err(crate::lines::LineError::Io(e)) => return Err(e),
            Err(_) => return Ok(None),
        };
        let t = line.trim();
        if !t.is_empty() && !t.starts_with('#') {
            return Ok(Some(t.to_string()));
        }
    }
    Ok(None)
}

/// Called with the number of bytes read from the file so far (compressed
/// bytes for `.csv.gz` and `.vlt.zst`), about every [`PROGRESS_STEP`]
/// bytes and once at the end of a read, so that a caller can show
/// progress on a large file.
pub type ReadProgress<'a> = &'a dyn Fn(u64);

/// How often [`ReadProgress`] is called: every 4 MiB read.
pub const PROGRESS_STEP: u64 = 4 << 20;

/// A reader that reports the bytes read through it.
struct Counting<R, P> {
    inner: R,
    read: u64,
    next_report: u64,
    progress: Option<P>,
}

impl<R, P: Fn(u64)> Counting<R, P> {
    fn new(inner: R, progress: Option<P>) -> Self {
        Counting {
            inner,
            read: 0,
            next_report: PROGRESS_STEP,
            progress,
        }
    }
}

impl<R: Read, P: Fn(u64)> Read for Counting<R, P> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if let Some(p) = &self.progress {
            if self.read >= self.next_report || n == 0 {
                p(self.read);
                self.next_report = self.read + PROGRESS_STEP;
            }
        }
        Ok(n)
    }
}

/// Reads the trace(s) in a file: one per device that has events. Snapshots
/// that start mid-run get their initial layout from `rules` (the recorded
/// settings' rounding; [`SizeRules::default`] is PyTorch's default); the
/// bytes read are reported to `progress`. Most callers want
/// `vramlab_replay::Inputs`, which lays snapshots out under their recorded
/// settings and picks devices.
pub fn read_traces(
    path: &Path,
    format: Option<Format>,
    rules: &SizeRules<'_>,
    progress: Option<ReadProgress<'_>>,
) -> Result<Vec<Trace>, TraceError> {
    let fmt = resolve(path, format)?;
    let name = path.display().to_string();
    let open = || {
        File::open(path)
            .map(|f| BufReader::new(Counting::new(f, progress)))
            .map_err(|e| open_error(path, e))
    };
    match fmt {
        Format::Csv => {
            if holds_rmm_log(path, false)? {
                Ok(vec![read_rmm(open()?, &name)?])
            } else {
                Ok(vec![read_csv(open()?, &name)?])
            }
        }
        Format::CsvGz => {
            let gz =
                || Ok::<_, TraceError>(BufReader::new(flate2::read::MultiGzDecoder::new(open()?)));
            if holds_rmm_log(path, true)? {
                Ok(vec![read_rmm(gz()?, &name)?])
            } else {
                Ok(vec![read_csv(gz()?, &name)?])
            }
        }
        Format::Rmm => Ok(vec![read_rmm(open()?, &name)?]),
        Format::Binary | Format::BinaryZstd => Ok(vec![read_binary(open()?, &name)?]),
        Format::Snapshot => {
            let snap = read_snapshot_file(path, progress)?;
            snapshot_to_traces(&snap, &name, rules)
        }
    }
}

/// `true` when the `.csv` (`gz`: `.csv.gz`) file at `path` is a RAPIDS RMM
/// log rather than a native trace, by its first line that is not blank and
/// not a comment.
fn holds_rmm_log(path: &Path, gz: bool) -> Result<bool, TraceError> {
    let file = File::open(path).map_err(|e| open_error(path, e))?;
    let first = if gz {
        first_data_line(&mut BufReader::new(flate2::read::MultiGzDecoder::new(file))).map_err(
            |e| {
                TraceError::new(
                    path.display().to_string(),
                    Location::File,
                    format!("cannot decompress: {e}"),
                )
            },
        )?
    } else {
        first_data_line(&mut BufReader::new(file)).map_err(|e| open_error(path, e))?
    };
    Ok(first.as_deref().is_some_and(is_rmm_header))
}

/// A trace file (native `.csv`, `.csv.gz`, `.vlt`, `.vlt.zst`, or an RMM
/// log) opened to be read block by block, with the bytes read reported to
/// `progress` (compressed bytes for a compressed file); `Ok(None)` for a
/// snapshot, whose entries [`read_traces`] keeps until the conversion.
pub fn open_events<P: Fn(u64) + Send + 'static>(
    path: &Path,
    format: Option<Format>,
    id_use: crate::csv::IdUse,
    progress: Option<P>,
) -> Result<Option<TraceEvents>, TraceError> {
    let fmt = resolve(path, format)?;
    let name = path.display().to_string();
    let file = || File::open(path).map_err(|e| open_error(path, e));
    let gz = fmt == Format::CsvGz;
    let input: Box<dyn Read + Send> = match fmt {
        Format::Snapshot => return Ok(None),
        Format::Csv | Format::CsvGz | Format::Rmm => {
            let counted = Counting::new(file()?, progress);
            if gz {
                Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(counted)))
            } else {
                Box::new(counted)
            }
        }
        Format::Binary | Format::BinaryZstd => {
            let input: Box<dyn BufRead + Send> =
                Box::new(BufReader::new(Counting::new(file()?, progress)));
            return VltEvents::open(input, &name, id_use).map(|e| Some(TraceEvents::Vlt(e)));
        }
    };
    if fmt == Format::Rmm || holds_rmm_log(path, gz)? {
        let input: Box<dyn BufRead + Send> = Box::new(BufReader::new(input));
        return RmmEvents::open(input, &name, id_use).map(|e| Some(TraceEvents::Rmm(e)));
    }
    CsvEvents::open(input, &name, id_use).map(|e| Some(TraceEvents::Csv(e)))
}

/// Reads a PyTorch memory snapshot file, reporting the bytes read to
/// `progress`. Files above `MAX_INPUT_LEN` (1 GiB) are refused before
/// anything is read.
///
/// The pickle (gzipped or not) is parsed as it is read, through a window of
/// a few hundred KiB, and its trace entries are converted as they arrive:
/// the file's bytes are never in memory whole. A file that this streamed
/// read cannot vouch for (an error, a pickle not shaped as PyTorch writes
/// one) is read again whole, which gives the answer and the error; so is
/// anything that is not a regular file (a pipe cannot be read twice). The
/// 1 GiB limit applies to the bytes read up to the pickle's end (`STOP`),
/// which for a gzipped file are the decompressed ones.
pub fn read_snapshot_file(
    path: &Path,
    progress: Option<ReadProgress<'_>>,
) -> Result<Snapshot, TraceError> {
    let f = File::open(path).map_err(|e| open_error(path, e))?;
    let meta = f.metadata().ok();
    let len = meta.as_ref().map(|m| m.len());
    // A pipe cannot be read again if the streamed read hands it back, and
    // the whole read words the refusal of a file above the limit.
    if !meta.is_some_and(|m| m.is_file()) || len.is_some_and(|len| len > MAX_INPUT_LEN as u64) {
        drop(f);
        return read_snapshot_file_whole(path, progress);
    }
    let mut input = BufReader::with_capacity(64 << 10, Counting::new(f, progress));
    let head = input.fill_buf().map_err(|e| open_error(path, e))?;
    let streamed = if head.starts_with(&[0x1f, 0x8b]) {
        let mut plain = BufReader::new(flate2::read::MultiGzDecoder::new(input));
        match plain.fill_buf() {
            Ok(head) if !is_binary(head) => read_snapshot_streamed(&mut plain, 0),
            _ => None,
        }
    } else if is_binary(head) {
        None
    } else {
        let len = len.and_then(|l| usize::try_from(l).ok()).unwrap_or(0);
        read_snapshot_streamed(&mut input, len)
    };
    match streamed {
        Some(snap) => Ok(snap),
        None => read_snapshot_file_whole(path, None),
    }
}

/// [`read_snapshot_file`] reading the file's bytes whole before the parse.
fn read_snapshot_file_whole(
    path: &Path,
    progress: Option<ReadProgress<'_>>,
) -> Result<Snapshot, TraceError> {
    let f = File::open(path).map_err(|e| open_error(path, e))?;
    let too_large = |size: String| {
        TraceError::new(
            path.display().to_string(),
            Location::File,
            format!(
                "the snapshot is {size}; the pickle reader accepts at most {MAX_INPUT_LEN} bytes (1 GiB): record fewer entries (_record_memory_history(max_entries=...))"
            ),
        )
    };
    if let Ok(len) = f.metadata().map(|m| m.len()) {
        if len > MAX_INPUT_LEN as u64 {
            return Err(too_large(format!("{len} bytes")));
        }
    }
    // The size check above does not cover pipes and files that grow.
    let mut bytes = Vec::new();
    Counting::new(f, progress)
        .take(MAX_INPUT_LEN as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| open_error(path, e))?;
    if bytes.len() > MAX_INPUT_LEN {
        return Err(too_large(format!("more than {MAX_INPUT_LEN} bytes")));
    }
    if bytes.starts_with(&[0x1f, 0x8b]) {
        // gzip (`.pickle.gz`): decompressed up to the same cap.
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes.as_slice())
            .take(MAX_INPUT_LEN as u64 + 1)
            .read_to_end(&mut plain)
            .map_err(|e| {
                TraceError::new(
                    path.display().to_string(),
                    Location::File,
                    format!("cannot decompress: {e}"),
                )
            })?;
        if plain.len() > MAX_INPUT_LEN {
            return Err(too_large(format!(
                "more than {MAX_INPUT_LEN} bytes once decompressed"
            )));
        }
        bytes = plain;
    }
    if is_binary(&bytes) {
        return Err(TraceError::new(
            path.display().to_string(),
            Location::File,
            "this is a vramlab binary trace, not a PyTorch snapshot",
        ));
    }
    read_snapshot_whole_owned(bytes, &path.display().to_string())
}

/// Writes `trace` to `path` in `format` (or the format its extension names).
pub fn write_trace(trace: &Trace, path: &Path, format: Option<Format>) -> Result<(), TraceError> {
    let mut w = TraceWriter::create(trace, trace.events.len() as u64, path, format)?;
    w.events(&trace.events)?;
    w.finish()
}

/// A trace file written a block of events at a time, in any format vramlab
/// writes (native CSV, `.csv.gz`, `.vlt`, `.vlt.zst`): created with the
/// trace's description (header, streams, pools, phase marks, initial state;
/// not its events) and the number of events to come, then fed the events,
/// then finished. The bytes are those of [`write_trace`] of the whole trace.
pub struct TraceWriter<'t> {
    inner: Writing<'t>,
    name: String,
}

enum Writing<'t> {
    Csv(CsvWriter<'t, BufWriter<File>>),
    CsvGz(CsvWriter<'t, flate2::write::GzEncoder<BufWriter<File>>>),
    Vlt(VltWriter<BufWriter<File>>),
}

impl<'t> TraceWriter<'t> {
    /// Creates `path` and writes the description of `trace` (its events
    /// are not read) for `num_events` events to come.
    pub fn create(
        trace: &'t Trace,
        num_events: u64,
        path: &Path,
        format: Option<Format>,
    ) -> Result<Self, TraceError> {
        let fmt = resolve(path, format)?;
        let name = path.display().to_string();
        if matches!(fmt, Format::Snapshot | Format::Rmm) {
            return Err(TraceError::new(
                &name,
                Location::File,
                match fmt {
                    Format::Snapshot => format!(
                        "writing a snapshot needs a replay: use `{}`",
                        Cmd::Replay.with(&[], &[Opt::SnapshotOut.with_placeholder("FILE")])
                    ),
                    _ => "vramlab does not write RMM logs; write .csv or .vlt".to_string(),
                },
            ));
        }
        let f = File::create(path)
            .map_err(|e| TraceError::new(&name, Location::File, format!("cannot create: {e}")))?;
        let w = BufWriter::new(f);
        let inner = match fmt {
            Format::Csv => Writing::Csv(CsvWriter::start(trace, w, &name)?),
            Format::CsvGz => {
                let z = flate2::write::GzEncoder::new(w, flate2::Compression::best());
                Writing::CsvGz(CsvWriter::start(trace, z, &name)?)
            }
            Format::Binary => Writing::Vlt(VltWriter::start(trace, num_events, w, false, &name)?),
            _ => Writing::Vlt(VltWriter::start(trace, num_events, w, true, &name)?),
        };
        Ok(TraceWriter { inner, name })
    }

    /// Writes `events`, the next events of the trace.
    pub fn events(&mut self, events: &[Event]) -> Result<(), TraceError> {
        match &mut self.inner {
            Writing::Csv(w) => w.events(events),
            Writing::CsvGz(w) => w.events(events),
            Writing::Vlt(w) => w.events(events),
        }
    }

    /// Ends the file (the last chunk, the end marker, the compressed
    /// stream's end) and flushes it.
    pub fn finish(self) -> Result<(), TraceError> {
        match self.inner {
            Writing::Csv(w) => w.finish().map(drop),
            Writing::CsvGz(w) => w.finish()?.finish().map(drop).map_err(|e| {
                TraceError::new(&self.name, Location::File, format!("cannot write: {e}"))
            }),
            Writing::Vlt(w) => w.finish().map(drop),
        }
    }
}
