//! A native CSV trace read block by block: [`CsvEvents`] hands its events
//! over as they are parsed, so that a replay can run while the file is
//! read and memory stays bounded by one input block, one block of events
//! and the ids that are live — not by the length of the file.

use std::io::{ErrorKind, Read};

pub use crate::csv::ids::IdUse;
use crate::csv::read::{Reader, Row};
use crate::error::TraceError;
use crate::lines::MAX_LINE;
use crate::model::{Event, Trace};

/// Bytes read from the input at a time.
const BLOCK: usize = 1 << 18;

/// Bytes of the first read: enough for a header, and few events, so that
/// a streamed replay starts on its first events without waiting for a
/// whole block to be parsed.
const FIRST_READ: usize = 1 << 14;

/// Reads a native CSV trace. `path` is used in error messages.
pub fn read_csv(input: impl Read, path: &str) -> Result<Trace, TraceError> {
    let mut events = CsvEvents::open(input, path, IdUse::Unique)?;
    while !events.at_end() {
        events.fill()?;
    }
    Ok(events.finish()?.trace)
}

/// What a finished read counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamCounts {
    /// Events read.
    pub events: u64,
    /// `alloc` rows among them.
    pub allocs: u64,
}

impl StreamCounts {
    /// The counts of a trace read whole.
    pub fn of(trace: &Trace) -> Self {
        StreamCounts {
            events: trace.events.len() as u64,
            allocs: trace.num_allocs() as u64,
        }
    }
}

/// A trace and what its read counted, from [`CsvEvents::finish`].
#[derive(Debug, Clone)]
pub struct StreamEnd {
    /// The trace: header, streams, pools, phases, id count; its events
    /// are those not handed over by [`CsvEvents::next_block`] (none when
    /// every block was taken).
    pub trace: Trace,
    /// The counts of the whole file.
    pub counts: StreamCounts,
}

/// A native CSV trace being read: open it (the header is read at once),
/// take its events with [`CsvEvents::next_block`] until it says the end,
/// then [`CsvEvents::finish`].
pub struct CsvEvents<R> {
    r: Reader,
    input: R,
    /// A block, plus room for a line that began in the block before.
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    /// The most bytes the next read asks for.
    read_size: usize,
    done: bool,
}

impl<R: Read> CsvEvents<R> {
    /// Starts reading `input` (named `path` in errors) and reads through
    /// its header row, so that [`CsvEvents::trace`] holds the header
    /// fields and declared pools; a file with no header row is an error.
    pub fn open(input: R, path: &str, id_use: IdUse) -> Result<Self, TraceError> {
        let mut s = CsvEvents {
            r: Reader::new(path, id_use),
            input,
            buf: vec![0u8; BLOCK + MAX_LINE + 2],
            pos: 0,
            filled: 0,
            read_size: FIRST_READ,
            done: false,
        };
        while !s.r.seen_header && !s.done {
            s.fill()?;
        }
        s.r.check_header()?;
        Ok(s)
    }

    /// The trace so far: header fields, declared pools, the streams met
    /// so far (indexed by the events' stream indices), phases; its events
    /// are those read and not yet handed over.
    pub fn trace(&self) -> &Trace {
        &self.r.trace
    }

    /// `true` once the input is read to its end.
    pub fn at_end(&self) -> bool {
        self.done
    }

    /// Events handed over so far.
    pub fn handed_over(&self) -> u64 {
        self.r.emitted
    }

    /// Moves the next events into `out` (cleared first; its capacity is
    /// kept for the reader's next block, so that buffers go back and forth
    /// without allocating). `Ok(false)` at the end of the file.
    pub fn next_block(&mut self, out: &mut Vec<Event>) -> Result<bool, TraceError> {
        while self.r.trace.events.is_empty() && !self.done {
            self.fill()?;
        }
        out.clear();
        if self.r.trace.events.is_empty() {
            return Ok(false);
        }
        std::mem::swap(out, &mut self.r.trace.events);
        self.r.emitted += out.len() as u64;
        Ok(true)
    }

    /// Reads one block of input and parses every whole line in it (at the
    /// end of the input, the last line too).
    fn fill(&mut self) -> Result<(), TraceError> {
        if self.done {
            return Ok(());
        }
        let r = &mut self.r;
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.filled, 0);
            self.filled -= self.pos;
            self.pos = 0;
        }
        let end = self.buf.len().min(self.filled + self.read_size);
        self.read_size = BLOCK;
        let n = loop {
            let room = self.buf.get_mut(self.filled..end).unwrap_or_default();
            match self.input.read(room) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(r.err(r.lineno + 1, format!("cannot read: {e}"))),
            }
        };
        self.filled += n;
        let block = self.buf.get(..self.filled).unwrap_or_default();
        let mut pos = 0;
        loop {
            let rest = block.get(pos..).unwrap_or_default();
            // A plain row is cut and its end found in one pass.
            if r.seen_header {
                if let Some((row, len)) = Row::plain_line(rest) {
                    r.lineno += 1;
                    r.row(row)?;
                    pos += len;
                    continue;
                }
            }
            let Some(i) = memchr::memchr(b'\n', rest) else {
                break;
            };
            r.line(rest.get(..i).unwrap_or_default())?;
            pos += i + 1;
        }
        self.pos = pos;
        let partial = self.filled - pos;
        if partial > MAX_LINE + 2 {
            return Err(r.err(
                r.lineno + 1,
                format!("line longer than {MAX_LINE} bytes (is this a text trace?)"),
            ));
        }
        if n == 0 {
            if partial > 0 {
                r.line(block.get(pos..self.filled).unwrap_or_default())?;
                self.pos = self.filled;
            }
            self.done = true;
        }
        Ok(())
    }

    /// Reads what is left and ends the read: the trace (with any events not
    /// handed over) and the counts of the whole file.
    pub fn finish(mut self) -> Result<StreamEnd, TraceError> {
        while !self.done {
            self.fill()?;
        }
        let counts = StreamCounts {
            events: self.r.emitted + self.r.trace.events.len() as u64,
            allocs: self.r.allocs,
        };
        Ok(StreamEnd {
            trace: self.r.finish()?,
            counts,
        })
    }
}
