//! Reading the native CSV format at memory speed.
//!
//! The input is read in large blocks and cut into lines with `memchr`; an
//! ASCII row is parsed as bytes (no per-line `String`, no UTF-8 check of
//! its digits, trims only where there is something to trim); ids that are
//! plain numbers — what vramlab's writer emits — are looked up by index,
//! other ids in a hash table with a fast hasher, and a trace on one stream
//! never hashes its stream. A line with non-ASCII bytes takes the text path
//! (validated UTF-8, Unicode trimming), so that every input reads exactly
//! as it did when every line was a `String`; errors name the line and say
//! the same.

use crate::csv::HEADER_ROW;
use crate::csv::ids::{IdUse, Ids, Live, Memory, State};
use crate::error::{Location, TraceError};
use crate::lines::MAX_LINE;
use crate::model::{AllocId, Event, StreamInterner, Trace, TraceHeader};

/// ASCII whitespace as `str::trim` sees it (vertical tab included).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !is_space(*first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !is_space(*last) {
            break;
        }
        s = rest;
    }
    s
}

/// Up to four fields of a row and what follows a fourth comma.
pub(super) struct Row<'a> {
    action: &'a [u8],
    id: &'a [u8],
    size: &'a [u8],
    stream: &'a [u8],
    extra: Option<&'a [u8]>,
}

impl<'a> Row<'a> {
    /// The fast path: a row of printable ASCII without spaces and with at
    /// most four fields, cut in one pass. Anything else (blank, comment,
    /// padded, non-ASCII or too many columns) is `None` and takes the
    /// general path, which reads it exactly the same way or words the error.
    /// [`Row::plain`] on the line at the start of `text`, scanning for its
    /// end at the same time: the row and the bytes it took, newline
    /// included. `None` for anything else, a line without its newline in
    /// `text` included.
    #[inline]
    pub(super) fn plain_line(text: &'a [u8]) -> Option<(Row<'a>, usize)> {
        if text.first().is_none_or(|&b| b == b'#') {
            return None;
        }
        let mut cuts = [0usize; 3];
        let mut commas = 0;
        for (i, &b) in text.iter().enumerate().take(MAX_LINE + 1) {
            if b == b'\n' {
                let line = text.get(..i)?;
                if line.is_empty() {
                    return None;
                }
                for c in cuts.iter_mut().skip(commas) {
                    *c = i;
                }
                let [a, b, c] = cuts;
                let field = |from: usize, to: usize| line.get(from..to).unwrap_or_default();
                let row = Row {
                    action: field(0, a),
                    id: field(a + 1, b),
                    size: field(b + 1, c),
                    stream: field(c + 1, i),
                    extra: None,
                };
                return Some((row, i + 1));
            }
            if b == b',' {
                *cuts.get_mut(commas)? = i;
                commas += 1;
            } else if !(0x21..0x7f).contains(&b) {
                return None;
            }
        }
        None
    }

    fn plain(line: &'a [u8]) -> Option<Row<'a>> {
        if line.first().is_none_or(|&b| b == b'#') {
            return None;
        }
        let mut cuts = [line.len(); 3];
        let mut commas = 0;
        for (i, &b) in line.iter().enumerate() {
            if b == b',' {
                *cuts.get_mut(commas)? = i;
                commas += 1;
            } else if !(0x21..0x7f).contains(&b) {
                return None;
            }
        }
        let [a, b, c] = cuts;
        let field = |from: usize, to: usize| line.get(from..to).unwrap_or_default();
        Some(Row {
            action: field(0, a),
            id: field(a + 1, b),
            size: field(b + 1, c),
            stream: field(c + 1, line.len()),
            extra: None,
        })
    }

    fn split(text: &'a [u8], unicode: bool) -> Row<'a> {
        let mut cols = text.split(|&b| b == b',').map(|c| field(c, unicode));
        Row {
            action: cols.next().unwrap_or_default(),
            id: cols.next().unwrap_or_default(),
            size: cols.next().unwrap_or_default(),
            stream: cols.next().unwrap_or_default(),
            extra: cols.next(),
        }
    }
}

/// A field, trimmed: bytes for ASCII rows, `str::trim` for the others
/// (already checked to be UTF-8).
fn field(c: &[u8], unicode: bool) -> &[u8] {
    if unicode {
        std::str::from_utf8(c).map_or(c, |s| s.trim().as_bytes())
    } else {
        trim(c)
    }
}

/// Text for a message (the bytes are UTF-8: ASCII, or checked).
fn text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// The row-by-row state of a read: the trace so far (its events since the
/// last hand-off), the live ids, the line number.
pub(super) struct Reader {
    path: Box<str>,
    pub(super) trace: Trace,
    ids: Ids,
    pub(super) seen_header: bool,
    /// The file says it is format v3 (pinned host rows allowed) or v4
    /// (engine pools and memory outside PyTorch too).
    v3: bool,
    v4: bool,
    next_id: AllocId,
    /// How dense ids are given out.
    id_use: IdUse,
    /// Dense ids whose allocation ended, for [`IdUse::Recycled`].
    spare: Vec<AllocId>,
    /// Events handed off before those in `trace.events`.
    pub(super) emitted: u64,
    /// `alloc` rows read.
    pub(super) allocs: u64,
    streams: StreamInterner,
    /// The last raw stream and its index: one stream never hashes.
    last_stream: Option<(u64, u32)>,
    pub(super) lineno: u64,
    /// Private pools declared (format v2).
    pools: super::pools::PoolNames,
}

impl Reader {
    pub(super) fn new(path: &str, id_use: IdUse) -> Self {
        Reader {
            path: path.into(),
            trace: Trace::new(TraceHeader {
                source: path.to_string(),
                ..Default::default()
            }),
            ids: Ids::default(),
            seen_header: false,
            v3: false,
            v4: false,
            next_id: 0,
            id_use,
            spare: Vec::new(),
            emitted: 0,
            allocs: 0,
            streams: StreamInterner::default(),
            last_stream: None,
            lineno: 0,
            pools: Default::default(),
        }
    }

    pub(super) fn err(&self, line: u64, msg: String) -> TraceError {
        TraceError::new(&*self.path, Location::Line(line), msg)
    }

    /// One line, without its `\n`.
    pub(super) fn line(&mut self, raw: &[u8]) -> Result<(), TraceError> {
        self.lineno += 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if self.seen_header && raw.len() <= MAX_LINE {
            if let Some(row) = Row::plain(raw) {
                return self.row(row);
            }
        }
        if raw.len() > MAX_LINE {
            return Err(self.err(
                self.lineno,
                format!("line longer than {MAX_LINE} bytes (is this a text trace?)"),
            ));
        }
        let mut body = raw;
        while let Some(b) = body.strip_suffix(b"\r") {
            body = b;
        }
        if body.is_ascii() {
            return self.content(trim(body), false);
        }
        match std::str::from_utf8(body) {
            Ok(s) => self.content(s.trim().as_bytes(), true),
            Err(_) => Err(self.err(
                self.lineno,
                "line is not UTF-8 text (is this a text trace?)".into(),
            )),
        }
    }

    /// A trimmed line: blank, a comment, the header row, or a row.
    fn content(&mut self, text: &[u8], unicode: bool) -> Result<(), TraceError> {
        if text.is_empty() {
            return Ok(());
        }
        if let Some(comment) = text.strip_prefix(b"#") {
            let c = text_of(comment);
            if !self.seen_header {
                let c = c.trim();
                if let Some(declared) = self.pools.header_line(c, &mut self.trace.pools) {
                    declared.map_err(|m| self.err(self.lineno, m))?;
                    return self.need_v4_for_engine();
                }
                crate::csv::read::parse_header_line(&mut self.trace.header, c)
                    .map_err(|m| self.err(self.lineno, m))?;
                if c.starts_with("vramlab trace v3") || c.starts_with("vramlab trace v4") {
                    self.trace.host_events = true;
                    self.v3 = true;
                    self.v4 = c.starts_with("vramlab trace v4");
                    self.trace.tenant_events = self.v4;
                }
            } else if let Some(label) = c.trim().strip_prefix("phase:") {
                self.trace.phases.push(crate::model::PhaseMark {
                    event_index: self.emitted + self.trace.events.len() as u64,
                    label: label.trim().to_string(),
                });
            }
            return Ok(());
        }
        if !self.seen_header {
            let cols: Vec<&[u8]> = text
                .split(|&b| b == b',')
                .map(|c| field(c, unicode))
                .collect();
            if cols != [&b"action"[..], b"id", b"size", b"stream"] {
                return Err(self.err(
                    self.lineno,
                    format!(
                        "expected the header row '{HEADER_ROW}', found '{}'",
                        text_of(text)
                    ),
                ));
            }
            self.seen_header = true;
            return Ok(());
        }
        self.row(Row::split(text, unicode))
    }

    pub(super) fn row(&mut self, row: Row<'_>) -> Result<(), TraceError> {
        if let Some(extra) = row.extra {
            return Err(self.err(
                self.lineno,
                format!("too many columns (unexpected '{}')", text(extra)),
            ));
        }
        match row.action {
            b"alloc" => self.alloc(&row, Memory::Device),
            b"free" | b"free_requested" => self.free(&row, Memory::Device),
            b"free_completed" => self.free_completed(&row, Memory::Device),
            b"empty_cache" => self.empty_cache(&row, Memory::Device),
            b"host_alloc" | b"host_free" | b"host_free_requested" | b"host_free_completed"
            | b"host_empty_cache"
                if !self.v3 =>
            {
                Err(self.err(
                    self.lineno,
                    format!(
                        "{}: pinned host rows need the format line '# vramlab trace v3' at the top of the file",
                        text(row.action)
                    ),
                ))
            }
            b"host_alloc" => self.alloc(&row, Memory::Host),
            b"host_free" | b"host_free_requested" => self.free(&row, Memory::Host),
            b"host_free_completed" => self.free_completed(&row, Memory::Host),
            b"host_empty_cache" => self.empty_cache(&row, Memory::Host),
            b"raw_alloc" | b"raw_free" | b"pool_sleep" | b"pool_wake" if !self.v4 => Err(self.err(
                self.lineno,
                format!(
                    "{}: rows of engine pools and of memory outside PyTorch need the format line '# vramlab trace v4' at the top of the file",
                    text(row.action)
                ),
            )),
            b"raw_alloc" => self.alloc(&row, Memory::Raw),
            b"raw_free" => self.free(&row, Memory::Raw),
            b"" => Err(self.err(self.lineno, "missing action".into())),
            other => self.pool_row(&text(other), &row),
        }
    }

    fn empty_cache(&mut self, row: &Row<'_>, memory: Memory) -> Result<(), TraceError> {
        if !row.id.is_empty() || !row.size.is_empty() || !row.stream.is_empty() {
            return Err(self.err(
                self.lineno,
                format!("{}empty_cache takes no id, size or stream", memory.prefix()),
            ));
        }
        self.trace.events.push(match memory {
            Memory::Device | Memory::Raw => Event::EmptyCache,
            Memory::Host => {
                self.trace.host_events = true;
                Event::HostEmptyCache
            }
        });
        Ok(())
    }

    /// A pool row (v2, `pools.rs`), or an unknown action.
    fn pool_row(&mut self, action: &str, row: &Row<'_>) -> Result<(), TraceError> {
        let fields = [text(row.id), text(row.size), text(row.stream)];
        let (streams, trace) = (&mut self.streams, &mut self.trace);
        let stream_of = |text: &str| match parse_stream(text) {
            Ok(raw) => Ok(streams.index(trace, raw)),
            Err(m) => Err(format!("stream: {m}")),
        };
        let ev = (self.pools.event(action, &fields, stream_of))
            .map_err(|m| TraceError::new(&*self.path, Location::Line(self.lineno), m))?;
        self.trace.events.push(ev);
        Ok(())
    }

    fn need_id(&self, row: &Row<'_>, what: &str) -> Result<(), TraceError> {
        if row.id.is_empty() {
            Err(self.err(self.lineno, format!("{what} needs an id")))
        } else {
            Ok(())
        }
    }

    fn only_id(&self, row: &Row<'_>, what: &str) -> Result<(), TraceError> {
        if row.size.is_empty() && row.stream.is_empty() {
            Ok(())
        } else {
            Err(self.err(
                self.lineno,
                format!("{what} takes only an id (size and stream must be empty)"),
            ))
        }
    }

    fn stream_index(&mut self, raw: u64) -> u32 {
        match self.last_stream {
            Some((r, i)) if r == raw => i,
            _ => {
                let i = self.streams.index(&mut self.trace, raw);
                self.last_stream = Some((raw, i));
                i
            }
        }
    }

    fn alloc(&mut self, row: &Row<'_>, memory: Memory) -> Result<(), TraceError> {
        let action = memory.action("alloc");
        self.need_id(row, action)?;
        if row.size.is_empty() {
            return Err(self.err(self.lineno, format!("{action} needs a size in bytes")));
        }
        if memory != Memory::Device && !row.stream.is_empty() {
            return Err(self.err(self.lineno, memory.no_stream().into()));
        }
        let bytes = digits(row.size)
            .map_or_else(|| parse_u64(&text(row.size)), Ok)
            .map_err(|m| self.err(self.lineno, format!("size: {m}")))?;
        let raw_stream = if row.stream.is_empty() {
            0
        } else {
            digits(row.stream)
                .map_or_else(|| parse_stream(&text(row.stream)), Ok)
                .map_err(|m| self.err(self.lineno, format!("stream: {m}")))?
        };
        let key = Ids::key(row.id);
        let still_allocated = |r: &Self| {
            r.err(
                r.lineno,
                format!(
                    "{action} of id '{}', which is still allocated",
                    text(row.id)
                ),
            )
        };
        // The id is taken first; an error ends the read, so what it took
        // is never given back.
        let dense = match self.spare.pop() {
            Some(d) => d,
            None => match self.next_id.checked_add(1) {
                Some(next) => std::mem::replace(&mut self.next_id, next),
                None if self.ids.get(key).is_some() => return Err(still_allocated(self)),
                None => {
                    return Err(self.err(self.lineno, "more than 4294967295 allocations".into()));
                }
            },
        };
        let live = Live {
            dense,
            state: State::Allocated,
            line: self.lineno,
            memory,
        };
        if !self.ids.insert_new(key, live) {
            return Err(still_allocated(self));
        }
        if memory == Memory::Host {
            self.trace.host_events = true;
            self.trace.events.push(Event::HostAlloc {
                id: dense,
                size: bytes,
            });
            return Ok(());
        }
        if memory == Memory::Raw {
            self.trace.events.push(Event::RawAlloc {
                id: dense,
                size: bytes,
            });
            return Ok(());
        }
        self.allocs += 1;
        let stream = self.stream_index(raw_stream);
        self.trace.events.push(Event::Alloc {
            id: dense,
            stream,
            size: bytes,
        });
        Ok(())
    }

    fn free(&mut self, row: &Row<'_>, memory: Memory) -> Result<(), TraceError> {
        let plain = matches!(row.action, b"free" | b"host_free" | b"raw_free");
        let action = memory.action(if plain { "free" } else { "free_requested" });
        self.need_id(row, action)?;
        self.only_id(row, action)?;
        let key = Ids::key(row.id);
        let lineno = self.lineno;
        // One lookup: a plain free takes the id out, a requested one
        // changes it in place (an error ends the read either way).
        let found = if plain {
            self.ids.remove(key)
        } else {
            self.ids.get_mut(key).map(|l| {
                let was = *l;
                if l.state == State::Allocated {
                    l.state = State::Requested;
                    l.line = lineno;
                }
                was
            })
        };
        let live = match found {
            Some(l) if l.memory != memory => {
                return Err(self.err(self.lineno, l.memory.mismatch(action, &text(row.id))));
            }
            Some(l) if l.state == State::Allocated => l,
            Some(l) => {
                return Err(self.err(
                    self.lineno,
                    format!(
                        "{action} of id '{}', whose free was already requested at line {}",
                        text(row.id),
                        l.line
                    ),
                ));
            }
            None => {
                return Err(self.err(
                    self.lineno,
                    format!("{action} of id '{}', which is not allocated", text(row.id)),
                ));
            }
        };
        let id = live.dense;
        if plain {
            self.release(id);
        }
        self.trace.events.push(match (memory, plain) {
            (Memory::Device, true) => Event::Free { id },
            (Memory::Device, false) => Event::FreeRequested { id },
            (Memory::Host, true) => Event::HostFree { id },
            (Memory::Host, false) => Event::HostFreeRequested { id },
            (Memory::Raw, _) => Event::RawFree { id },
        });
        Ok(())
    }

    fn free_completed(&mut self, row: &Row<'_>, memory: Memory) -> Result<(), TraceError> {
        let action = memory.action("free_completed");
        self.need_id(row, action)?;
        self.only_id(row, action)?;
        let key = Ids::key(row.id);
        // One lookup: the id is taken out (an error ends the read).
        match self.ids.remove(key) {
            Some(l) if l.memory != memory => {
                Err(self.err(self.lineno, l.memory.mismatch(action, &text(row.id))))
            }
            Some(l) if l.state == State::Requested => {
                self.trace.events.push(match memory {
                    Memory::Device | Memory::Raw => Event::FreeCompleted { id: l.dense },
                    Memory::Host => Event::HostFreeCompleted { id: l.dense },
                });
                self.release(l.dense);
                Ok(())
            }
            Some(_) => Err(self.err(
                self.lineno,
                format!(
                    "{action} of id '{}' without a {} before it",
                    text(row.id),
                    memory.action("free_requested")
                ),
            )),
            None => Err(self.err(
                self.lineno,
                format!("{action} of id '{}', which is not allocated", text(row.id)),
            )),
        }
    }

    /// The allocation of `dense` ended: with [`IdUse::Recycled`], the next
    /// `alloc` takes it.
    fn release(&mut self, dense: AllocId) {
        if self.id_use == IdUse::Recycled {
            self.spare.push(dense);
        }
    }

    /// An engine pool declared in a file older than v4 is an error.
    fn need_v4_for_engine(&self) -> Result<(), TraceError> {
        let engine = self
            .trace
            .pools
            .last()
            .is_some_and(|d| d.kind == crate::pools::PrivatePoolKind::Engine);
        if engine && !self.v4 {
            return Err(self.err(
                self.lineno,
                "engine pools need the format line '# vramlab trace v4' at the top of the file"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The error for a file without a header row, if this is one.
    pub(super) fn check_header(&self) -> Result<(), TraceError> {
        if self.seen_header {
            return Ok(());
        }
        Err(TraceError::new(
            &*self.path,
            Location::File,
            format!("no header row '{HEADER_ROW}' found; is this a vramlab trace?"),
        ))
    }

    /// The trace read (its events those not handed off), with its id count.
    pub(super) fn finish(mut self) -> Result<Trace, TraceError> {
        self.check_header()?;
        self.trace.num_ids = self.next_id;
        Ok(self.trace)
    }
}

/// ASCII bytes as text (callers pass ASCII or checked UTF-8).
fn text_of(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A plain run of at most 19 decimal digits as a number (anything else:
/// `None`, and the caller's slow path words the error).
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    let mut n = 0u64;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    Some(n)
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

pub(super) fn parse_header_line(h: &mut TraceHeader, comment: &str) -> Result<(), String> {
    if comment.starts_with("vramlab trace") {
        let version = comment.trim_start_matches("vramlab trace").trim();
        if !["v1", "v2", "v3", "v4"].contains(&version) {
            return Err(format!(
                "this file is vramlab trace format '{version}'; this version of vramlab reads v1 to v4"
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
