//! RAPIDS RMM allocation logs (`rmm::mr::logging_resource_adaptor`): a CSV
//! with the header `Thread,Time,Action,Pointer,Size,Stream` and the actions
//! `allocate`, `allocate failure` and `free` (`deallocate` in some
//! versions). Rows are replayed in file order — the time column has only
//! microsecond resolution and threads interleave — and allocations are
//! matched to frees by pointer.

use std::collections::HashMap;
use std::io::BufRead;

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
    let mut t = Trace::new(TraceHeader {
        source: path.to_string(),
        framework: Some("RAPIDS RMM logging_resource_adaptor".into()),
        ..Default::default()
    });
    let err = |line: u64, msg: String| TraceError::new(path, Location::Line(line), msg);
    let mut cols: Option<[usize; 4]> = None; // action, pointer, size, stream
    let mut time_col = None;
    let mut live: HashMap<u64, (AllocId, u64)> = HashMap::new();
    let mut next_id: AllocId = 0;
    let mut streams = StreamInterner::default();
    let mut failures = 0u64;
    let (mut first_time, mut last_time, mut wrapped) = (None::<u64>, 0u64, 0u64);
    let mut lines = crate::lines::Lines::new(input);
    let mut lineno = 0u64;
    while let Some(line) = lines.next_line() {
        lineno += 1;
        let line = line.map_err(|e| err(lineno, e.to_string()))?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let Some(c) = cols else {
            if !is_rmm_header(text) {
                return Err(err(
                    lineno,
                    format!(
                        "expected the RMM log header '{}', found '{text}'",
                        RMM_COLUMNS.join(",")
                    ),
                ));
            }
            let names: Vec<String> = text
                .split(',')
                .map(|c| c.trim().to_ascii_lowercase())
                .collect();
            let idx = |w: &str| names.iter().position(|c| c == w).unwrap_or(usize::MAX);
            cols = Some([idx("action"), idx("pointer"), idx("size"), idx("stream")]);
            time_col = names.iter().position(|c| c == "time");
            continue;
        };
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        let get = |i: usize, what: &str| {
            fields
                .get(i)
                .copied()
                .ok_or_else(|| err(lineno, format!("missing the {what} column")))
        };
        let action = get(c[0], "Action")?;
        let ptr_s = get(c[1], "Pointer")?;
        let size_s = get(c[2], "Size")?;
        let stream_s = get(c[3], "Stream")?;
        if let Some(tc) = time_col {
            if let Some(us) = fields.get(tc).and_then(|s| parse_time(s)) {
                if first_time.is_none() {
                    first_time = Some(us);
                } else if last_time > us.saturating_add(wrapped).saturating_add(43_200_000_000) {
                    // A jump back of more than 12 hours: past midnight.
                    wrapped = wrapped.saturating_add(86_400_000_000);
                }
                last_time = last_time.max(us.saturating_add(wrapped));
            }
        }
        let ptr = parse_hex_or_dec(ptr_s)
            .ok_or_else(|| err(lineno, format!("pointer '{ptr_s}' is not a number")))?;
        let size: u64 = size_s.parse().map_err(|_| {
            err(
                lineno,
                format!("size '{size_s}' is not a whole number of bytes"),
            )
        })?;
        let stream = parse_hex_or_dec(stream_s)
            .ok_or_else(|| err(lineno, format!("stream '{stream_s}' is not a number")))?;
        match action.to_ascii_lowercase().as_str() {
            "allocate" | "allocate failure" => {
                let id = next_id;
                next_id = next_id
                    .checked_add(1)
                    .ok_or_else(|| err(lineno, "more than 4294967295 allocations".into()))?;
                let s = streams.index(&mut t, stream);
                t.events.push(Event::Alloc {
                    id,
                    stream: s,
                    size,
                });
                if action.eq_ignore_ascii_case("allocate failure") {
                    // Replayed as a request: it never gets a free.
                    failures += 1;
                } else {
                    if live.contains_key(&ptr) {
                        return Err(err(
                            lineno,
                            format!("allocate returned {ptr_s}, which is still allocated"),
                        ));
                    }
                    live.insert(ptr, (id, size));
                }
            }
            "free" | "deallocate" => {
                let Some((id, allocated)) = live.remove(&ptr) else {
                    return Err(err(
                        lineno,
                        format!(
                            "free of {ptr_s}, which is not allocated (was it allocated before the log began?)"
                        ),
                    ));
                };
                // RMM logs the size a deallocation passes; a different one
                // than the allocation's means the log is not what it seems.
                if size != allocated {
                    return Err(err(
                        lineno,
                        format!(
                            "free of {ptr_s} with size {size}, but it was allocated with size {allocated}"
                        ),
                    ));
                }
                t.events.push(Event::Free { id });
            }
            other => {
                return Err(err(
                    lineno,
                    format!(
                        "unknown action '{other}' (expected allocate, allocate failure, free or deallocate)"
                    ),
                ));
            }
        }
    }
    if cols.is_none() {
        return Err(TraceError::new(
            path,
            Location::File,
            "empty file: no RMM log header",
        ));
    }
    if failures > 0 {
        t.notes.push(format!(
            "{failures} 'allocate failure' rows are replayed as requests (they failed under RMM's resource)"
        ));
    }
    if let Some(f) = first_time {
        t.header
            .extra
            .insert("duration_us".into(), (last_time - f).to_string());
    }
    t.num_ids = next_id;
    Ok(t)
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
