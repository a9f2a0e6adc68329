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
//!
//! Format v2 adds private pools (CUDA graphs' pools and MemPools): see
//! `pools.rs`. Format v3 adds requests to PyTorch's pinned host allocator:
//! `host_alloc,ID,SIZE` (the request; no stream), `host_free,ID` (no stream
//! used the block), `host_free_requested,ID` (streams used it: it waits for
//! their events), `host_free_completed,ID` (those events completed; the
//! allocator takes the block back at its next request) and
//! `host_empty_cache`. Host and device ids share one namespace. Format v4
//! adds what shares a device with PyTorch's allocator: engine pools
//! (`# pool.NAME: engine A,B`, a MemPool with its own allocator) with
//! `pool_sleep,NAME` and `pool_wake,NAME`, and device memory outside
//! PyTorch, `raw_alloc,ID,SIZE` and `raw_free,ID`. The writer writes the
//! lowest version a trace needs (v4, v3 for host rows, v2 for pools, else
//! v1); the reader reads all four.

mod events;
mod ids;
mod pools;
mod read;
mod write;

pub use events::{CsvEvents, IdUse, StreamCounts, StreamEnd, read_csv};
pub use write::{CsvWriter, write_csv};

/// The header row every file must have.
pub(crate) const HEADER_ROW: &str = "action,id,size,stream";
/// The first comment line the writer emits.
pub(crate) const MAGIC_LINE: &str = "# vramlab trace v1";
/// The first comment line of a trace with private pools.
pub(crate) const MAGIC_LINE_V2: &str = "# vramlab trace v2";
/// The first comment line of a trace with pinned host requests.
pub(crate) const MAGIC_LINE_V3: &str = "# vramlab trace v3";
/// The first comment line of a trace with engine pools or memory outside
/// PyTorch.
pub(crate) const MAGIC_LINE_V4: &str = "# vramlab trace v4";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TraceError;
    use crate::model::{Event, Trace};

    fn read(s: &str) -> Result<Trace, TraceError> {
        read_csv(s.as_bytes(), "t.csv")
    }

    /// A large numeric id allocated near the top of a file (beyond the id
    /// table's limit there) and freed thousands of lines later is the same
    /// id: `vramlab convert --start fresh` writes such files (the blocks
    /// in use at the first entry keep their snapshot ids).
    #[test]
    fn a_large_id_allocated_early_is_found_when_freed_late() {
        let mut csv =
            String::from("action,id,size,stream\nalloc,900000,4096,0\nalloc,70000,512,0\n");
        for i in 0..6000 {
            csv.push_str(&format!("alloc,{i},512,0\nfree,{i}\n"));
        }
        csv.push_str("free_requested,70000\nfree,900000\nfree_completed,70000\nalloc,900000,8,0\nfree,900000\n");
        let t = read(&csv).unwrap();
        assert_eq!(t.num_ids, 6003);
        let tail: Vec<Event> = t.events.iter().rev().take(5).rev().copied().collect();
        assert_eq!(
            tail,
            vec![
                Event::FreeRequested { id: 1 },
                Event::Free { id: 0 },
                Event::FreeCompleted { id: 1 },
                Event::Alloc {
                    id: 6002,
                    stream: 0,
                    size: 8
                },
                Event::Free { id: 6002 },
            ]
        );
    }

    /// Read block by block, a file of several input blocks gives the
    /// events of the whole read, and a bad line past the first block is
    /// the same error, line number included.
    #[test]
    fn blocks_read_as_the_whole_file() {
        let mut csv = String::from("action,id,size,stream\n");
        for i in 0..120_000 {
            csv.push_str(&format!("alloc,{i},{},0\nfree,{i}\n", 512 + i));
        }
        let whole = read(&csv).unwrap();
        let mut events = CsvEvents::open(csv.as_bytes(), "t.csv", IdUse::Unique).unwrap();
        let (mut all, mut buf, mut blocks) = (Vec::new(), Vec::new(), 0);
        while events.next_block(&mut buf).unwrap() {
            all.extend_from_slice(&buf);
            blocks += 1;
        }
        assert!(blocks > 1, "{blocks} block(s)");
        assert_eq!(all, whole.events);
        assert_eq!(events.finish().unwrap().counts.events, 240_000);
        csv.push_str("free,7\n");
        let want = read(&csv).unwrap_err().to_string();
        assert!(want.contains(":240002:"), "{want}");
        let mut events = CsvEvents::open(csv.as_bytes(), "t.csv", IdUse::Recycled).unwrap();
        let got = loop {
            match events.next_block(&mut buf) {
                Ok(true) => continue,
                Ok(false) => panic!("no error"),
                Err(e) => break e.to_string(),
            }
        };
        assert_eq!(got, want);
    }

    /// Rows the fast path takes (plain) and the same rows padded, with
    /// CRLF ends, tabs or non-ASCII ids (the general path) read alike.
    #[test]
    fn fast_and_general_paths_read_alike() {
        let plain = "action,id,size,stream\nalloc,1,4096,0\nalloc,k7,100,-3\nfree_requested,k7\nfree,1\nfree_completed,k7\nempty_cache\nalloc,1,16,0x7\nalloc,2,5\n";
        let expected = read(plain);
        let variants = [
            plain.replace('\n', "\r\n"),
            plain.replace(',', " , "),
            plain.replace(',', "\t,"),
            plain.replace("k7", "ü7"),
            format!("# comment\n\n{plain}"),
        ];
        for v in &variants {
            match (&expected, read(v)) {
                (Ok(a), Ok(b)) => {
                    assert_eq!((&a.events, &a.streams), (&b.events, &b.streams), "{v:?}")
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{v:?}"),
                (a, b) => panic!("{v:?}: {a:?} vs {b:?}"),
            }
        }
        // A row with a fifth column is refused on both paths.
        for bad in [
            "action,id,size,stream\nalloc,1,2,3,4\n",
            "action,id,size,stream\nalloc, 1,2,3,4\n",
        ] {
            let e = read(bad).unwrap_err().to_string();
            assert!(e.contains("too many columns"), "{e}");
        }
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
                "t.csv:2: unknown action 'malloc' (expected alloc, free, free_requested, free_completed, empty_cache, a pool action: pool_create, capture_begin, capture_end, pool_enter, pool_exit, pool_release, pool_sleep, pool_wake, a pinned host action: host_alloc, host_free, host_free_requested, host_free_completed, host_empty_cache, or raw_alloc, raw_free)",
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
                "# vramlab trace v5\naction,id,size,stream\n",
                "t.csv:1: this file is vramlab trace format 'v5'; this version of vramlab reads v1 to v4",
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
            "# source: x\n# device_total: 42\n# framework: torch 2.11\n# k: v\naction,id,size,stream\n# phase: build\nalloc,a,4096,3\nalloc,b,1\n#  phase:  step 0: forward \nfree_requested,a\nfree_completed,a\n# a plain comment\nempty_cache\nfree,b\n# phase: teardown\n",
        )
        .unwrap();
        let marks: Vec<(u64, &str)> = t
            .phases
            .iter()
            .map(|p| (p.event_index, p.label.as_str()))
            .collect();
        assert_eq!(
            marks,
            vec![(0, "build"), (2, "step 0: forward"), (6, "teardown")]
        );
        let mut out = Vec::new();
        write_csv(&t, &mut out, "o.csv").unwrap();
        let back = read_csv(out.as_slice(), "t.csv").unwrap();
        assert_eq!(back, t);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("# vramlab trace v1\n# source: x\n"));
    }
}
