//! Writing the native CSV format.

use std::io::Write;

use crate::advice::{Cmd, Opt};
use crate::csv::{HEADER_ROW, MAGIC_LINE, MAGIC_LINE_V2, MAGIC_LINE_V3, MAGIC_LINE_V4};
use crate::error::{Location, TraceError};
use crate::model::{Event, PhaseMark, Trace};

/// Writes `trace` in the native CSV format. Fails for traces that start from
/// a recorded allocator state, which the CSV format cannot hold.
pub fn write_csv(trace: &Trace, out: impl Write, path: &str) -> Result<(), TraceError> {
    let mut w = CsvWriter::start(trace, out, path)?;
    w.events(&trace.events)?;
    w.finish().map(drop)
}

/// A native CSV trace written a block of events at a time: the header at
/// [`CsvWriter::start`], the rows (and the phase marks before them) as
/// [`CsvWriter::events`] gets them, the marks after the last event at
/// [`CsvWriter::finish`]. The bytes are those of [`write_csv`] of the
/// whole trace.
pub struct CsvWriter<'t, W: Write> {
    trace: &'t Trace,
    out: W,
    path: String,
    phases: std::iter::Peekable<std::slice::Iter<'t, PhaseMark>>,
    /// The index of the next event.
    next: u64,
    buf: itoa::Buffer,
}

impl<'t, W: Write> CsvWriter<'t, W> {
    /// Writes the header of `trace` (its events are not read: its header,
    /// pools, stream table and phase marks describe the events to come).
    /// Fails for a trace that starts from a recorded allocator state.
    pub fn start(trace: &'t Trace, mut out: W, path: &str) -> Result<Self, TraceError> {
        let io = io_error(path);
        if let Some(init) = &trace.initial {
            if !init.segments.is_empty() || !init.live.is_empty() {
                return Err(TraceError::new(
                    path,
                    Location::File,
                    format!(
                        "the trace starts mid-run ({} segments and {} blocks in use already existed); the CSV format cannot hold that initial state — use the binary format (.vlt), or `{}` to write the blocks in use as the first allocations",
                        init.segments.len(),
                        init.live.len(),
                        Cmd::Convert.with(&[], &[Opt::Start.with_word("fresh")])
                    ),
                ));
            }
        }
        let h = &trace.header;
        let magic = if trace.has_tenant_events() {
            MAGIC_LINE_V4
        } else if trace.host_events || trace.events.iter().any(Event::is_host) {
            MAGIC_LINE_V3
        } else if trace.pools.is_empty() {
            MAGIC_LINE
        } else {
            MAGIC_LINE_V2
        };
        writeln!(out, "{magic}").map_err(io)?;
        if !h.source.is_empty() {
            writeln!(out, "# source: {}", one_line(&h.source)).map_err(io)?;
        }
        if let Some(t) = h.device_total {
            writeln!(out, "# device_total: {t}").map_err(io)?;
        }
        if let Some(c) = &h.alloc_conf {
            writeln!(out, "# alloc_conf: {}", one_line(c)).map_err(io)?;
        }
        if let Some(fw) = &h.framework {
            writeln!(out, "# framework: {}", one_line(fw)).map_err(io)?;
        }
        if h.device != 0 {
            writeln!(out, "# device: {}", h.device).map_err(io)?;
        }
        for (k, v) in &h.extra {
            writeln!(out, "# {}: {}", one_line(k), one_line(v)).map_err(io)?;
        }
        for (i, p) in trace.pools.iter().enumerate() {
            writeln!(out, "# {}{i}: {}", super::pools::DECL_PREFIX, p.to_csv()).map_err(io)?;
        }
        writeln!(out, "{HEADER_ROW}").map_err(io)?;
        Ok(CsvWriter {
            trace,
            out,
            path: path.to_string(),
            phases: trace.phases.iter().peekable(),
            next: 0,
            buf: itoa::Buffer::new(),
        })
    }

    /// Writes the rows of `events`, the next events of the trace.
    pub fn events(&mut self, events: &[Event]) -> Result<(), TraceError> {
        let io = io_error(&self.path);
        let out = &mut self.out;
        let buf = &mut self.buf;
        for ev in events {
            let i = self.next;
            self.next += 1;
            while let Some(p) = self.phases.next_if(|p| p.event_index <= i) {
                writeln!(out, "# phase: {}", one_line(&p.label)).map_err(io)?;
            }
            match *ev {
                Event::Alloc { id, stream, size } => {
                    let raw = self
                        .trace
                        .streams
                        .get(stream as usize)
                        .copied()
                        .unwrap_or(0);
                    write_sized(out, b"alloc,", id, size, Some(raw), buf).map_err(io)?;
                }
                Event::Free { id } => write_id(out, b"free,", id, buf).map_err(io)?,
                Event::FreeRequested { id } => {
                    write_id(out, b"free_requested,", id, buf).map_err(io)?
                }
                Event::FreeCompleted { id } => {
                    write_id(out, b"free_completed,", id, buf).map_err(io)?
                }
                Event::EmptyCache => out.write_all(b"empty_cache,,,\n").map_err(io)?,
                Event::HostAlloc { id, size } => {
                    write_sized(out, b"host_alloc,", id, size, None, buf).map_err(io)?;
                }
                Event::HostFree { id } => write_id(out, b"host_free,", id, buf).map_err(io)?,
                Event::HostFreeRequested { id } => {
                    write_id(out, b"host_free_requested,", id, buf).map_err(io)?
                }
                Event::HostFreeCompleted { id } => {
                    write_id(out, b"host_free_completed,", id, buf).map_err(io)?
                }
                Event::HostEmptyCache => out.write_all(b"host_empty_cache,,,\n").map_err(io)?,
                Event::RawAlloc { id, size } => {
                    write_sized(out, b"raw_alloc,", id, size, None, buf).map_err(io)?;
                }
                Event::RawFree { id } => write_id(out, b"raw_free,", id, buf).map_err(io)?,
                ref pool_event => {
                    if let Some(row) = super::pools::row(pool_event, &self.trace.streams) {
                        writeln!(out, "{row}").map_err(io)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes the phase marks after the last event (a phase with no
    /// events), flushes, and gives the output back.
    pub fn finish(mut self) -> Result<W, TraceError> {
        let io = io_error(&self.path);
        for p in self.phases {
            writeln!(self.out, "# phase: {}", one_line(&p.label)).map_err(io)?;
        }
        self.out.flush().map_err(io)?;
        Ok(self.out)
    }
}

/// A write error of the file `path`.
fn io_error(path: &str) -> impl Fn(std::io::Error) -> TraceError + Copy + '_ {
    move |e| TraceError::new(path, Location::File, format!("cannot write: {e}"))
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// An `alloc` or `host_alloc` row: the id, the size, and the raw stream
/// (none for a host request).
fn write_sized(
    out: &mut impl Write,
    action: &[u8],
    id: u32,
    size: u64,
    stream: Option<u64>,
    buf: &mut itoa::Buffer,
) -> std::io::Result<()> {
    out.write_all(action)?;
    out.write_all(buf.format(id).as_bytes())?;
    out.write_all(b",")?;
    out.write_all(buf.format(size).as_bytes())?;
    out.write_all(b",")?;
    if let Some(raw) = stream {
        out.write_all(buf.format(raw).as_bytes())?;
    }
    out.write_all(b"\n")
}

fn write_id(
    out: &mut impl Write,
    action: &[u8],
    id: u32,
    buf: &mut itoa::Buffer,
) -> std::io::Result<()> {
    out.write_all(action)?;
    out.write_all(buf.format(id).as_bytes())?;
    out.write_all(b",,\n")
}
