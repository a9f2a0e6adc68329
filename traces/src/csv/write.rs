//! Writing the native CSV format.

use std::io::Write;

use crate::advice::{Cmd, Opt};
use crate::csv::{HEADER_ROW, MAGIC_LINE, MAGIC_LINE_V2};
use crate::error::{Location, TraceError};
use crate::model::{Event, Trace};

/// Writes `trace` in the native CSV format. Fails for traces that start from
/// a recorded allocator state, which the CSV format cannot hold.
pub fn write_csv(trace: &Trace, mut out: impl Write, path: &str) -> Result<(), TraceError> {
    let io =
        |e: std::io::Error| TraceError::new(path, Location::File, format!("cannot write: {e}"));
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
    let magic = if trace.pools.is_empty() {
        MAGIC_LINE
    } else {
        MAGIC_LINE_V2
    };
    writeln!(out, "{magic}").map_err(io)?;
    let one_line = |s: &str| s.replace(['\n', '\r'], " ");
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
    let mut buf = itoa_buf();
    let mut phases = trace.phases.iter().peekable();
    for (i, ev) in trace.events.iter().enumerate() {
        while let Some(p) = phases.next_if(|p| p.event_index <= i as u64) {
            writeln!(out, "# phase: {}", one_line(&p.label)).map_err(io)?;
        }
        match *ev {
            Event::Alloc { id, stream, size } => {
                let raw = trace.streams.get(stream as usize).copied().unwrap_or(0);
                out.write_all(b"alloc,").map_err(io)?;
                out.write_all(buf.format(id).as_bytes()).map_err(io)?;
                out.write_all(b",").map_err(io)?;
                out.write_all(buf.format(size).as_bytes()).map_err(io)?;
                out.write_all(b",").map_err(io)?;
                out.write_all(buf.format(raw).as_bytes()).map_err(io)?;
                out.write_all(b"\n").map_err(io)?;
            }
            Event::Free { id } => write_id(&mut out, b"free,", id, &mut buf).map_err(io)?,
            Event::FreeRequested { id } => {
                write_id(&mut out, b"free_requested,", id, &mut buf).map_err(io)?
            }
            Event::FreeCompleted { id } => {
                write_id(&mut out, b"free_completed,", id, &mut buf).map_err(io)?
            }
            Event::EmptyCache => out.write_all(b"empty_cache,,,\n").map_err(io)?,
            ref pool_event => {
                if let Some(row) = super::pools::row(pool_event, &trace.streams) {
                    writeln!(out, "{row}").map_err(io)?;
                }
            }
        }
    }
    // Marks after the last event (a phase with no events).
    for p in phases {
        writeln!(out, "# phase: {}", one_line(&p.label)).map_err(io)?;
    }
    out.flush().map_err(io)
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

fn itoa_buf() -> itoa::Buffer {
    itoa::Buffer::new()
}
