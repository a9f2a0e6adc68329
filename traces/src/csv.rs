//! The native text format, v1: a CSV anyone can write from any framework and
//! read with pandas.
//!
//! ```text
//! # vramlab trace v1
//! # source: my training step
//! # device_total: 85899345920
//! action,id,size,stream
//! alloc,x1,4096,0
//! alloc,x2,1048576
//! free,x1
//! free_requested,x2
//! free_completed,x2
//! empty_cache
//! ```
//!
//! * Lines starting with `#` are comments; before the header row, `# key:
//!   value` lines are header fields (`source`, `device_total`, `alloc_conf`,
//!   `framework`, `device`; others are kept as extras). Blank lines are
//!   ignored.
//! * The header row `action,id,size,stream` is required.
//! * `alloc` needs an id and a size in bytes (a non-negative integer; 0 is
//!   PyTorch's null allocation); the stream (a raw `cudaStream_t` value) is
//!   optional and defaults to 0. `free`, `free_requested` and
//!   `free_completed` need an id. `empty_cache` takes nothing.
//! * Ids are any text without commas. An id names one allocation from its
//!   `alloc` until its free completes; afterwards it may be reused.
//! * A bad row is an error that names the line and the reason.

use std::collections::HashMap;
use std::io::{BufRead, Write};

use crate::error::{Location, TraceError};
use crate::model::{AllocId, Event, StreamInterner, Trace, TraceHeader};

/// The header row every file must have.
pub const HEADER_ROW: &str = "action,id,size,stream";
/// The first comment line the writer emits.
pub const MAGIC_LINE: &str = "# vramlab trace v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Live {
    Allocated(AllocId, u64),
    Requested(AllocId, u64),
}

/// Reads a native CSV trace. `path` is used in error messages.
pub fn read_csv(input: impl BufRead, path: &str) -> Result<Trace, TraceError> {
    let mut trace = Trace::new(TraceHeader {
        source: path.to_string(),
        ..Default::default()
    });
    let mut live: HashMap<String, Live> = HashMap::new();
    let mut seen_header = false;
    let mut next_id: AllocId = 0;
    let mut streams = StreamInterner::default();
    let err = |line: u64, msg: String| TraceError::new(path, Location::Line(line), msg);

    let mut lines = crate::lines::Lines::new(input);
    let mut lineno = 0u64;
    while let Some(line) = lines.next_line() {
        lineno += 1;
        let line = line.map_err(|e| err(lineno, e.to_string()))?;
        let line = line.trim_end_matches('\r');
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if let Some(comment) = text.strip_prefix('#') {
            if !seen_header {
                parse_header_line(&mut trace.header, comment.trim()).map_err(|m| err(lineno, m))?;
            }
            continue;
        }
        if !seen_header {
            let cols: Vec<&str> = text.split(',').map(str::trim).collect();
            if cols != ["action", "id", "size", "stream"] {
                return Err(err(
                    lineno,
                    format!("expected the header row '{HEADER_ROW}', found '{text}'"),
                ));
            }
            seen_header = true;
            continue;
        }
        let mut cols = text.split(',').map(str::trim);
        let action = cols.next().unwrap_or("");
        let id = cols.next().unwrap_or("");
        let size = cols.next().unwrap_or("");
        let stream = cols.next().unwrap_or("");
        if let Some(extra) = cols.next() {
            return Err(err(
                lineno,
                format!("too many columns (unexpected '{extra}')"),
            ));
        }
        let need_id = |what: &str| {
            if id.is_empty() {
                Err(err(lineno, format!("{what} needs an id")))
            } else {
                Ok(())
            }
        };
        let no_size = |what: &str| {
            if size.is_empty() && stream.is_empty() {
                Ok(())
            } else {
                Err(err(
                    lineno,
                    format!("{what} takes only an id (size and stream must be empty)"),
                ))
            }
        };
        match action {
            "alloc" => {
                need_id("alloc")?;
                if size.is_empty() {
                    return Err(err(lineno, "alloc needs a size in bytes".into()));
                }
                let bytes = parse_u64(size).map_err(|m| err(lineno, format!("size: {m}")))?;
                let raw_stream = if stream.is_empty() {
                    0
                } else {
                    parse_stream(stream).map_err(|m| err(lineno, format!("stream: {m}")))?
                };
                if live.contains_key(id) {
                    return Err(err(
                        lineno,
                        format!("alloc of id '{id}', which is still allocated"),
                    ));
                }
                let dense = next_id;
                next_id = next_id
                    .checked_add(1)
                    .ok_or_else(|| err(lineno, "more than 4294967295 allocations".into()))?;
                let s = streams.index(&mut trace, raw_stream);
                trace.events.push(Event::Alloc {
                    id: dense,
                    stream: s,
                    size: bytes,
                });
                live.insert(id.to_string(), Live::Allocated(dense, lineno));
            }
            "free" | "free_requested" => {
                need_id(action)?;
                no_size(action)?;
                let dense = match live.get(id) {
                    Some(Live::Allocated(d, _)) => *d,
                    Some(Live::Requested(_, at)) => {
                        return Err(err(
                            lineno,
                            format!(
                                "{action} of id '{id}', whose free was already requested at line {at}"
                            ),
                        ));
                    }
                    None => {
                        return Err(err(
                            lineno,
                            format!("{action} of id '{id}', which is not allocated"),
                        ));
                    }
                };
                if action == "free" {
                    live.remove(id);
                    trace.events.push(Event::Free { id: dense });
                } else {
                    live.insert(id.to_string(), Live::Requested(dense, lineno));
                    trace.events.push(Event::FreeRequested { id: dense });
                }
            }
            "free_completed" => {
                need_id(action)?;
                no_size(action)?;
                match live.get(id) {
                    Some(Live::Requested(d, _)) => {
                        trace.events.push(Event::FreeCompleted { id: *d });
                        live.remove(id);
                    }
                    Some(Live::Allocated(..)) => {
                        return Err(err(
                            lineno,
                            format!(
                                "free_completed of id '{id}' without a free_requested before it"
                            ),
                        ));
                    }
                    None => {
                        return Err(err(
                            lineno,
                            format!("free_completed of id '{id}', which is not allocated"),
                        ));
                    }
                }
            }
            "empty_cache" => {
                if !id.is_empty() || !size.is_empty() || !stream.is_empty() {
                    return Err(err(
                        lineno,
                        "empty_cache takes no id, size or stream".into(),
                    ));
                }
                trace.events.push(Event::EmptyCache);
            }
            "" => return Err(err(lineno, "missing action".into())),
            other => {
                return Err(err(
                    lineno,
                    format!(
                        "unknown action '{other}' (expected alloc, free, free_requested, free_completed or empty_cache)"
                    ),
                ));
            }
        }
    }
    if !seen_header {
        return Err(TraceError::new(
            path,
            Location::File,
            format!("no header row '{HEADER_ROW}' found; is this a vramlab trace?"),
        ));
    }
    trace.num_ids = next_id;
    Ok(trace)
}

fn parse_u64(s: &str) -> Result<u64, String> {
    if s.starts_with('-') {
        return Err(format!("'{s}' is negative"));
    }
    s.parse::<u64>().map_err(|_| {
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            format!("'{s}' is too large")
        } else {
            format!("'{s}' is not a whole number of bytes")
        }
    })
}

/// Streams are raw `cudaStream_t` values; PyTorch reports them as signed
/// int64, so negative values are taken as their two's-complement pattern.
fn parse_stream(s: &str) -> Result<u64, String> {
    if let Some(hex) = s.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).map_err(|_| format!("'{s}' is not a stream handle"));
    }
    if s.starts_with('-') {
        return s
            .parse::<i64>()
            .map(|v| v as u64)
            .map_err(|_| format!("'{s}' is not a stream handle"));
    }
    s.parse::<u64>()
        .map_err(|_| format!("'{s}' is not a stream handle"))
}

fn parse_header_line(h: &mut TraceHeader, comment: &str) -> Result<(), String> {
    if comment.starts_with("vramlab trace") {
        let version = comment.trim_start_matches("vramlab trace").trim();
        if version != "v1" {
            return Err(format!(
                "this file is vramlab trace format '{version}'; this version of vramlab reads v1"
            ));
        }
        return Ok(());
    }
    let Some((key, value)) = comment.split_once(':') else {
        return Ok(()); // a plain comment
    };
    let key = key.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Ok(()); // prose that happens to contain a colon
    }
    // A lone carriage return inside a line becomes a space, as the writer
    // writes it, so that what is read survives a write and a read.
    let value = value.replace('\r', " ").trim().to_string();
    match key {
        // An empty source says nothing: the file's name stays the source
        // (the writer omits an empty one).
        "source" if value.is_empty() => {}
        "source" => h.source = value,
        "device_total" => {
            h.device_total = Some(parse_u64(&value).map_err(|m| format!("device_total: {m}"))?);
        }
        "alloc_conf" => h.alloc_conf = Some(value),
        "framework" => h.framework = Some(value),
        "device" => {
            h.device = value
                .parse()
                .map_err(|_| format!("device: '{value}' is not a device index"))?;
        }
        _ => {
            h.extra.insert(key.to_string(), value);
        }
    }
    Ok(())
}

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
                    "the trace starts mid-run ({} segments and {} blocks in use already existed); the CSV format cannot hold that initial state — use the binary format (.vlt), or `vramlab convert --start fresh` to write the blocks in use as the first allocations",
                    init.segments.len(),
                    init.live.len()
                ),
            ));
        }
    }
    let h = &trace.header;
    writeln!(out, "{MAGIC_LINE}").map_err(io)?;
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
    writeln!(out, "{HEADER_ROW}").map_err(io)?;
    let mut buf = itoa_buf();
    for ev in &trace.events {
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
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Result<Trace, TraceError> {
        read_csv(s.as_bytes(), "t.csv")
    }

    #[test]
    fn reads_all_actions_and_header_fields() {
        let t = read(
            "# vramlab trace v1\n# source: unit test\n# device_total: 1024\n# alloc_conf: expandable_segments:True\n# model: tiny\n\
             action,id,size,stream\nalloc,a,4096,0\nalloc,b,100,7\nfree,a\nfree_requested,b,,\n# mid comment\n\nfree_completed,b\nempty_cache,,,\nalloc,a,0\n",
        )
        .unwrap();
        assert_eq!(t.header.source, "unit test");
        assert_eq!(t.header.device_total, Some(1024));
        assert_eq!(
            t.header.alloc_conf.as_deref(),
            Some("expandable_segments:True")
        );
        assert_eq!(t.header.extra["model"], "tiny");
        assert_eq!(t.streams, vec![0, 7]);
        assert_eq!(
            t.events,
            vec![
                Event::Alloc {
                    id: 0,
                    stream: 0,
                    size: 4096
                },
                Event::Alloc {
                    id: 1,
                    stream: 1,
                    size: 100
                },
                Event::Free { id: 0 },
                Event::FreeRequested { id: 1 },
                Event::FreeCompleted { id: 1 },
                Event::EmptyCache,
                Event::Alloc {
                    id: 2,
                    stream: 0,
                    size: 0
                },
            ]
        );
        assert_eq!(t.num_ids, 3);
    }

    #[test]
    fn errors_name_the_line_and_reason() {
        let cases = [
            (
                "action,id,size,stream\nalloc,a,-5\n",
                "t.csv:2: size: '-5' is negative",
            ),
            (
                "action,id,size,stream\nalloc,a,12x\n",
                "t.csv:2: size: '12x' is not a whole number of bytes",
            ),
            (
                "action,id,size,stream\nalloc,a,99999999999999999999\n",
                "t.csv:2: size: '99999999999999999999' is too large",
            ),
            (
                "action,id,size,stream\nfree,a\n",
                "t.csv:2: free of id 'a', which is not allocated",
            ),
            (
                "action,id,size,stream\nalloc,a,1\nfree,a\nfree,a\n",
                "t.csv:4: free of id 'a', which is not allocated",
            ),
            (
                "action,id,size,stream\nalloc,a,1\nalloc,a,1\n",
                "t.csv:3: alloc of id 'a', which is still allocated",
            ),
            (
                "action,id,size,stream\nmalloc,a,1\n",
                "t.csv:2: unknown action 'malloc' (expected alloc, free, free_requested, free_completed or empty_cache)",
            ),
            (
                "action,id,size,stream\nalloc,a\n",
                "t.csv:2: alloc needs a size in bytes",
            ),
            (
                "action,id,size,stream\nalloc,,5\n",
                "t.csv:2: alloc needs an id",
            ),
            (
                "action,id,size,stream\nalloc,a,1,0,9\n",
                "t.csv:2: too many columns (unexpected '9')",
            ),
            (
                "action,id,size,stream\nalloc,a,1,s1\n",
                "t.csv:2: stream: 's1' is not a stream handle",
            ),
            (
                "action,id,size,stream\nalloc,a,1\nfree_completed,a\n",
                "t.csv:3: free_completed of id 'a' without a free_requested before it",
            ),
            (
                "action,id,size,stream\nalloc,a,1\nfree_requested,a\nfree,a\n",
                "t.csv:4: free of id 'a', whose free was already requested at line 3",
            ),
            (
                "action,id,size,stream\nfree,a,5\n",
                "t.csv:2: free takes only an id (size and stream must be empty)",
            ),
            (
                "action,id,size,stream\nempty_cache,x\n",
                "t.csv:2: empty_cache takes no id, size or stream",
            ),
            (
                "id,size\n",
                "t.csv:1: expected the header row 'action,id,size,stream', found 'id,size'",
            ),
            (
                "# only comments\n",
                "t.csv: no header row 'action,id,size,stream' found; is this a vramlab trace?",
            ),
            (
                "# vramlab trace v2\naction,id,size,stream\n",
                "t.csv:1: this file is vramlab trace format 'v2'; this version of vramlab reads v1",
            ),
            (
                "# device_total: lots\naction,id,size,stream\n",
                "t.csv:1: device_total: 'lots' is not a whole number of bytes",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                read(input).unwrap_err().to_string(),
                want,
                "input: {input:?}"
            );
        }
    }

    #[test]
    fn ids_are_reusable_after_free_and_streams_accept_hex_and_negative() {
        let t = read("action,id,size,stream\nalloc,1,10,0x10\nfree,1\nalloc,1,20,-1\nfree,1\n")
            .unwrap();
        assert_eq!(t.num_ids, 2);
        assert_eq!(t.streams, vec![0, 16, u64::MAX]);
    }

    #[test]
    fn header_values_read_survive_a_write_and_a_read() {
        // Found by fuzzing: a lone CR inside a header line, an empty source.
        for input in [
            "# framework: torch 2.11\r# model: tiny\naction,id,size,stream\n",
            "# source:\n# k: a\rb \r\naction,id,size,stream\nalloc,a,1\n",
        ] {
            let t = read(input).unwrap();
            let mut out = Vec::new();
            write_csv(&t, &mut out, "o.csv").unwrap();
            assert_eq!(read_csv(out.as_slice(), "t.csv").unwrap(), t, "{input:?}");
        }
        assert_eq!(
            read("# source:\naction,id,size,stream\n")
                .unwrap()
                .header
                .source,
            "t.csv"
        );
    }

    #[test]
    fn write_then_read_is_lossless() {
        let t = read(
            "# source: x\n# device_total: 42\n# framework: torch 2.11\n# k: v\naction,id,size,stream\nalloc,a,4096,3\nalloc,b,1\nfree_requested,a\nfree_completed,a\nempty_cache\nfree,b\n",
        )
        .unwrap();
        let mut out = Vec::new();
        write_csv(&t, &mut out, "o.csv").unwrap();
        let back = read_csv(out.as_slice(), "t.csv").unwrap();
        assert_eq!(back, t);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("# vramlab trace v1\n# source: x\n"));
    }
}
