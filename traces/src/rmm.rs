//! RAPIDS RMM allocation logs (`rmm::mr::logging_resource_adaptor`): a CSV
//! with the header `Thread,Time,Action,Pointer,Size,Stream` and the actions
//! `allocate`, `allocate failure` and `free` (`deallocate` in some
//! versions). Rows are replayed in file order — the time column has only
//! microsecond resolution and threads interleave — and allocations are
//! matched to frees by pointer.

use std::collections::HashMap;
use std::io::BufRead;

use crate::csv::{IdUse, StreamCounts, StreamEnd};
use crate::error::{Location, TraceError};
use crate::model::{AllocId, Event, StreamInterner, Trace, TraceHeader};

/// The columns an RMM log must have.
pub(crate) const RMM_COLUMNS: [&str; 6] = ["Thread", "Time", "Action", "Pointer", "Size", "Stream"];

/// `true` if `line` is an RMM log header row.
pub(crate) fn is_rmm_header(line: &str) -> bool {
    let cols: Vec<String> = line
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    ["action", "pointer", "size", "stream"]
        .iter()
        .all(|want| cols.iter().any(|c| c == want))
}

fn parse_hex_or_dec(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// `HH:MM:SS.ffffff` → microseconds since midnight.
fn parse_time(s: &str) -> Option<u64> {
    let mut it = s.trim().split(':');
    let h: u64 = it.next()?.parse().ok()?;
    let m: u64 = it.next()?.parse().ok()?;
    let sec: f64 = it.next()?.parse().ok()?;
    // An hour field of billions or a seconds field of `inf` is no time of
    // day: refused rather than overflowing.
    if h >= 10_000 || m >= 60 || !(0.0..86_400.0).contains(&sec) {
        return None;
    }
    Some((h * 3600 + m * 60) * 1_000_000 + (sec * 1e6).round() as u64)
}

/// Reads an RMM log.
pub fn read_rmm(input: impl BufRead, path: &str) -> Result<Trace, TraceError> {
    let mut log = RmmEvents::open(input, path, IdUse::Unique)?;
    let mut all = Vec::new();
    while log.read_rows(&mut all, usize::MAX)? {}
    let mut end = log.finish()?;
    end.trace.events = all;
    Ok(end.trace)
}

/// Rows handed over per block.
const BLOCK_ROWS: usize = 1 << 16;

/// Rows of the first block: few, so that a streamed replay starts on them
/// while the reader's thread parses the next block.
const FIRST_BLOCK_ROWS: usize = 1 << 10;

/// What the rows read so far left: the trace without its events, the live
/// pointers and the counts.
struct State {
    path: String,
    t: Trace,
    id_use: IdUse,
    lineno: u64,
    /// Columns of action, pointer, size and stream (after the header).
    cols: Option<[usize; 4]>,
    time_col: Option<usize>,
    /// Live allocations by pointer: id and size.
    live: HashMap<u64, (AllocId, u64)>,
    next_id: AllocId,
    /// Ids whose allocation was freed ([`IdUse::Recycled`]).
    spare: Vec<AllocId>,
    streams: StreamInterner,
    failures: u64,
    allocs: u64,
    events: u64,
    first_time: Option<u64>,
    last_time: u64,
    wrapped: u64,
}

/// An RMM log being read: open it (through its header row), take its
/// events with [`RmmEvents::next_block`], then [`RmmEvents::finish`].
/// With [`IdUse::Recycled`] a freed allocation's id is given out again,
/// so that memory follows the allocations live at once.
pub struct RmmEvents<R: BufRead> {
    lines: crate::lines::Lines<R>,
    st: State,
    done: bool,
}

impl<R: BufRead> RmmEvents<R> {
    /// Starts reading `input` (named `path` in errors) through its header
    /// row; a file without one is an error.
    pub fn open(input: R, path: &str, id_use: IdUse) -> Result<Self, TraceError> {
        let t = Trace::new(TraceHeader {
            source: path.to_string(),
            framework: Some("RAPIDS RMM logging_resource_adaptor".into()),
            ..Default::default()
        });
        let mut log = RmmEvents {
            lines: crate::lines::Lines::new(input),
            st: State {
                path: path.to_string(),
                t,
                id_use,
                lineno: 0,
                cols: None,
                time_col: None,
                live: HashMap::new(),
                next_id: 0,
                spare: Vec::new(),
                streams: StreamInterner::default(),
                failures: 0,
                allocs: 0,
                events: 0,
                first_time: None,
                last_time: 0,
                wrapped: 0,
            },
            done: false,
        };
        let mut none = Vec::new();
        while log.st.cols.is_none() && log.read_rows(&mut none, 1)? {}
        if log.st.cols.is_none() {
            return Err(TraceError::new(
                path,
                Location::File,
                "empty file: no RMM log header",
            ));
        }
        Ok(log)
    }

    /// The trace so far: header and the streams met (no events).
    pub fn trace(&self) -> &Trace {
        &self.st.t
    }

    /// Moves the next events into `out` (cleared first; its capacity is
    /// kept). `Ok(false)` at the end of the file.
    pub fn next_block(&mut self, out: &mut Vec<Event>) -> Result<bool, TraceError> {
        out.clear();
        let rows = if self.st.events == 0 {
            FIRST_BLOCK_ROWS
        } else {
            BLOCK_ROWS
        };
        while out.is_empty() && self.read_rows(out, rows)? {}
        Ok(!out.is_empty())
    }

    /// Reads what is left and ends the read: the trace (notes and duration
    /// included, no events) and the counts of the whole file.
    pub fn finish(mut self) -> Result<StreamEnd, TraceError> {
        let mut rest = Vec::new();
        while self.read_rows(&mut rest, BLOCK_ROWS)? {
            rest.clear();
        }
        let mut st = self.st;
        if st.failures > 0 {
            st.t.notes.push(format!(
                "{} 'allocate failure' rows are replayed as requests (they failed under RMM's resource)",
                st.failures
            ));
        }
        if let Some(f) = st.first_time {
            st.t.header
                .extra
                .insert("duration_us".into(), (st.last_time - f).to_string());
        }
        st.t.num_ids = st.next_id;
        Ok(StreamEnd {
            trace: st.t,
            counts: StreamCounts {
                events: st.events,
                allocs: st.allocs,
            },
        })
    }

    /// Reads up to `rows` more lines, their events onto the end of `out`;
    /// `Ok(false)` once the file is read to its end.
    fn read_rows(&mut self, out: &mut Vec<Event>, rows: usize) -> Result<bool, TraceError> {
        let mut n = 0;
        while n < rows && !self.done {
            let st = &mut self.st;
            let Some(line) = self.lines.next_line() else {
                self.done = true;
                break;
            };
            st.lineno += 1;
            let line = line.map_err(|e| st.err(e.to_string()))?;
            st.row(line, out)?;
            n += 1;
        }
        Ok(!self.done || n > 0)
    }
}

impl State {
    fn err(&self, msg: String) -> TraceError {
        TraceError::new(&*self.path, Location::Line(self.lineno), msg)
    }

    /// One line: the header, a blank line, or a row and its event.
    fn row(&mut self, line: &str, out: &mut Vec<Event>) -> Result<(), TraceError> {
        let text = line.trim();
        if text.is_empty() {
            return Ok(());
        }
        let Some(c) = self.cols else {
            if !is_rmm_header(text) {
                return Err(self.err(format!(
                    "expected the RMM log header '{}', found '{text}'",
                    RMM_COLUMNS.join(",")
                )));
            }
            let names: Vec<String> = text
                .split(',')
                .map(|c| c.trim().to_ascii_lowercase())
                .collect();
            let idx = |w: &str| names.iter().position(|c| c == w).unwrap_or(usize::MAX);
            self.cols = Some([idx("action"), idx("pointer"), idx("size"), idx("stream")]);
            self.time_col = names.iter().position(|c| c == "time");
            return Ok(());
        };
        // The five columns used (action, pointer, size, stream, time),
        // picked without collecting the row.
        let wants = [c[0], c[1], c[2], c[3], self.time_col.unwrap_or(usize::MAX)];
        let mut picked = [None::<&str>; 5];
        for (k, f) in text.split(',').enumerate() {
            for (slot, &want) in picked.iter_mut().zip(&wants) {
                if k == want {
                    *slot = Some(f.trim());
                }
            }
        }
        let [action, ptr_s, size_s, stream_s, time] = picked;
        let missing = |what: &str| self.err(format!("missing the {what} column"));
        let action = action.ok_or_else(|| missing("Action"))?;
        let ptr_s = ptr_s.ok_or_else(|| missing("Pointer"))?;
        let size_s = size_s.ok_or_else(|| missing("Size"))?;
        let stream_s = stream_s.ok_or_else(|| missing("Stream"))?;
        if let Some(us) = time.and_then(parse_time) {
            self.time(us);
        }
        let ptr = parse_hex_or_dec(ptr_s)
            .ok_or_else(|| self.err(format!("pointer '{ptr_s}' is not a number")))?;
        let size: u64 = size_s
            .parse()
            .map_err(|_| self.err(format!("size '{size_s}' is not a whole number of bytes")))?;
        let stream = parse_hex_or_dec(stream_s)
            .ok_or_else(|| self.err(format!("stream '{stream_s}' is not a number")))?;
        match action.to_ascii_lowercase().as_str() {
            "allocate" | "allocate failure" => {
                let failed = action.eq_ignore_ascii_case("allocate failure");
                if !failed && self.live.contains_key(&ptr) {
                    return Err(self.err(format!(
                        "allocate returned {ptr_s}, which is still allocated"
                    )));
                }
                let id = match self.spare.pop() {
                    Some(id) => id,
                    None => {
                        let id = self.next_id;
                        self.next_id = self
                            .next_id
                            .checked_add(1)
                            .ok_or_else(|| self.err("more than 4294967295 allocations".into()))?;
                        id
                    }
                };
                let s = self.streams.index(&mut self.t, stream);
                out.push(Event::Alloc {
                    id,
                    stream: s,
                    size,
                });
                self.allocs += 1;
                if failed {
                    // Replayed as a request: it never gets a free.
                    self.failures += 1;
                } else {
                    self.live.insert(ptr, (id, size));
                }
            }
            "free" | "deallocate" => {
                let Some(&(id, allocated)) = self.live.get(&ptr) else {
                    return Err(self.err(format!(
                        "free of {ptr_s}, which is not allocated (was it allocated before the log began?)"
                    )));
                };
                // RMM logs the size a deallocation passes; a different one
                // than the allocation's means the log is not what it seems.
                if size != allocated {
                    return Err(self.err(format!(
                        "free of {ptr_s} with size {size}, but it was allocated with size {allocated}"
                    )));
                }
                self.live.remove(&ptr);
                out.push(Event::Free { id });
                if self.id_use == IdUse::Recycled {
                    self.spare.push(id);
                }
            }
            other => {
                return Err(self.err(format!(
                    "unknown action '{other}' (expected allocate, allocate failure, free or deallocate)"
                )));
            }
        }
        self.events += 1;
        Ok(())
    }

    /// A row's time of day (microseconds): the log's first and last times,
    /// past midnight counted.
    fn time(&mut self, us: u64) {
        if self.first_time.is_none() {
            self.first_time = Some(us);
        } else if self.last_time
            > us.saturating_add(self.wrapped)
                .saturating_add(43_200_000_000)
        {
            // A jump back of more than 12 hours: past midnight.
            self.wrapped = self.wrapped.saturating_add(86_400_000_000);
        }
        self.last_time = self.last_time.max(us.saturating_add(self.wrapped));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_log_in_row_order() {
        let log = "Thread,Time,Action,Pointer,Size,Stream\n\
                   1,10:00:00.000100,allocate,0x7f0000000000,256,0x0\n\
                   2,10:00:00.000050,allocate,0x7f0000000100,1024,0x5\n\
                   1,10:00:00.000200,free,0x7f0000000000,256,0x0\n\
                   1,10:00:00.000300,allocate failure,0x0,1099511627776,0x0\n\
                   2,10:00:01.000300,deallocate,0x7f0000000100,1024,0x5\n";
        let t = read_rmm(log.as_bytes(), "rmm.csv").unwrap();
        assert_eq!(t.streams, vec![0, 5]);
        assert_eq!(
            t.events,
            vec![
                Event::Alloc {
                    id: 0,
                    stream: 0,
                    size: 256
                },
                Event::Alloc {
                    id: 1,
                    stream: 1,
                    size: 1024
                },
                Event::Free { id: 0 },
                Event::Alloc {
                    id: 2,
                    stream: 0,
                    size: 1 << 40
                },
                Event::Free { id: 1 },
            ]
        );
        assert_eq!(t.num_ids, 3);
        assert_eq!(t.header.extra["duration_us"], "1000200");
        assert!(t.notes[0].contains("1 'allocate failure'"));
    }

    /// Read block by block with recycled ids: the events of the whole
    /// read, ids below the allocations live at once, the same notes.
    #[test]
    fn a_log_read_in_blocks_recycles_its_ids() {
        let mut log = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
        for i in 0..200_000u64 {
            log.push_str(&format!(
                "1,10:00:00.0,allocate,{:#x},512,0x0\n",
                0x1000 + i % 3
            ));
            if i % 3 == 2 {
                for p in 0..3 {
                    log.push_str(&format!("1,10:00:00.0,free,{:#x},512,0x0\n", 0x1000 + p));
                }
            }
        }
        log.push_str("1,10:00:01.0,allocate failure,0x0,1024,0x0\n");
        let whole = read_rmm(log.as_bytes(), "rmm.csv").unwrap();
        let mut e = RmmEvents::open(log.as_bytes(), "rmm.csv", IdUse::Recycled).unwrap();
        let (mut block, mut n, mut blocks) = (Vec::new(), 0usize, 0);
        while e.next_block(&mut block).unwrap() {
            for (got, want) in block.iter().zip(&whole.events[n..]) {
                assert_eq!(std::mem::discriminant(got), std::mem::discriminant(want));
                assert!(got.id().is_some_and(|id| id < 3), "{got:?}");
            }
            n += block.len();
            blocks += 1;
        }
        assert_eq!(n, whole.events.len());
        assert!(blocks > 1);
        let end = e.finish().unwrap();
        assert_eq!(end.counts.events, whole.events.len() as u64);
        assert_eq!(end.counts.allocs, whole.num_allocs() as u64);
        assert_eq!(end.trace.notes, whole.notes);
        assert_eq!(end.trace.header, whole.header);
        assert_eq!(end.trace.num_ids, 3);
    }

    #[test]
    fn errors_name_the_line() {
        let h = "Thread,Time,Action,Pointer,Size,Stream\n";
        let cases = [
            (
                format!("{h}1,0:0:0.0,free,0x10,5,0x0\n"),
                "rmm.csv:2: free of 0x10, which is not allocated (was it allocated before the log began?)",
            ),
            (
                format!("{h}1,0:0:0.0,allocate,0x10,512,0x0\n1,0:0:0.1,free,0x10,256,0x0\n"),
                "rmm.csv:3: free of 0x10 with size 256, but it was allocated with size 512",
            ),
            (
                format!("{h}1,0:0:0.0,allocate,0x10,-5,0x0\n"),
                "rmm.csv:2: size '-5' is not a whole number of bytes",
            ),
            (
                format!("{h}1,0:0:0.0,resize,0x10,5,0x0\n"),
                "rmm.csv:2: unknown action 'resize' (expected allocate, allocate failure, free or deallocate)",
            ),
            (
                format!("{h}1,0:0:0.0,allocate,zz,5,0x0\n"),
                "rmm.csv:2: pointer 'zz' is not a number",
            ),
            (
                format!("{h}1,0:0:0.0,allocate\n"),
                "rmm.csv:2: missing the Pointer column",
            ),
            (
                "a,b\n".to_string(),
                "rmm.csv:1: expected the RMM log header 'Thread,Time,Action,Pointer,Size,Stream', found 'a,b'",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                read_rmm(input.as_bytes(), "rmm.csv")
                    .unwrap_err()
                    .to_string(),
                want
            );
        }
    }
}
