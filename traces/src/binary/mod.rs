//! The compact binary native format (`.vlt`, optionally zstd-compressed as
//! `.vlt.zst`): everything a [`Trace`] holds, including the initial state
//! and the expected record that the CSV format cannot carry.
//!
//! Layout: the 8-byte magic `VRAMLABT`, a little-endian `u16` format version
//! (4 for a trace with private pools, else 3; version 3 files, without
//! private pools, version 2 files, without
//! phase marks, and version 1 files, whose initial state held only the
//! layout, are still read) and `u16` flags (bit 0: the rest is one zstd frame). Then a
//! length-prefixed (`u32` LE) postcard encoding of everything but the
//! events, and the events in chunks of at most 65,536: `u32` LE event count,
//! `u32` LE byte length, the postcard encoding of the events; a chunk with
//! count 0 ends the file. Chunks let a reader stream large traces and bound
//! every allocation by what the file really contains.

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::error::{Location, TraceError};
use crate::model::*;

mod events;

pub use events::{VltEvents, read_binary};

/// File magic.
pub(crate) const MAGIC: &[u8; 8] = b"VRAMLABT";
/// Version 4: private pools.
pub(crate) const VERSION: u16 = 4;
/// Version 5, written for traces with requests to the pinned host
/// allocator: version 4's layout, and events that may be host events.
pub(crate) const VERSION_HOST: u16 = 5;
/// Version 6, written for traces with engine pools or memory outside
/// PyTorch: version 5's layout, and events that may be
/// [`Event::is_tenant`].
pub(crate) const VERSION_TENANTS: u16 = 6;
/// Version 3, still read: no private pools.
const VERSION_3: u16 = 3;
/// The previous version, still read: its initial state held only the
/// recorded layout (the live blocks are derived from it).
const VERSION_1: u16 = 1;
/// Version 2, still read: no phase marks.
const VERSION_2: u16 = 2;
const FLAG_ZSTD: u16 = 1;
const CHUNK: usize = 65_536;
/// Largest encoded event (a postcard `Event` is at most 1 + 3×10 bytes).
const MAX_EVENT_BYTES: usize = 32;
/// Largest metadata block accepted (1 GiB).
const MAX_META: usize = 1 << 30;

/// Everything but the events. Postcard writes a struct's fields one after
/// the other with no framing, so version 3's layout is version 2's
/// ([`MetaV2`]) followed by the phase marks.
#[derive(Serialize, Deserialize)]
struct Meta {
    v2: MetaV2,
    phases: Vec<PhaseMark>,
}

/// Version 4's metadata: version 3's, then the private pools — their
/// declarations and the pool of each initial segment, reservation and
/// live block, in the order of the initial state's lists, and of each
/// final segment of the expected record (kept beside the state so that its
/// layout, and older files, stay as they were).
#[derive(Serialize, Deserialize)]
struct MetaV4 {
    v3: Meta,
    pools: Vec<crate::pools::PoolDecl>,
    segment_pools: Vec<Option<PoolIndex>>,
    reservation_pools: Vec<Option<PoolIndex>>,
    live_pools: Vec<Option<PoolIndex>>,
    final_pools: Vec<Option<PoolIndex>>,
}

/// Version 5's metadata: version 4's, then the host allocator's expected
/// decisions.
#[derive(Serialize, Deserialize)]
struct MetaV5 {
    v4: MetaV4,
    expected_host: Option<Vec<ExpectedHostDecision>>,
}

/// Version 2's metadata (everything version 3 has but the phase marks).
#[derive(Serialize, Deserialize)]
struct MetaV2 {
    header: TraceHeader,
    streams: Vec<u64>,
    initial: Option<InitialState>,
    num_ids: u32,
    expected: Option<ExpectedRecord>,
    notes: Vec<String>,
    frames: Vec<Vec<Frame>>,
    alloc_frames: Vec<Option<u32>>,
    num_events: u64,
}

/// Version 1's initial state: the layout only.
#[derive(Deserialize)]
struct InitialStateV1 {
    segments: Vec<InitialSegment>,
}

/// Version 1's expected record: without the retries.
#[derive(Deserialize)]
struct ExpectedRecordV1 {
    alloc_addresses: Vec<Option<u64>>,
    segment_events: Vec<ExpectedSegmentEvent>,
    ooms: Vec<ExpectedOom>,
    final_segments: Vec<FinalSegment>,
}

/// Version 1's metadata (field order as written then).
#[derive(Deserialize)]
struct MetaV1 {
    header: TraceHeader,
    streams: Vec<u64>,
    initial: Option<InitialStateV1>,
    num_ids: u32,
    expected: Option<ExpectedRecordV1>,
    notes: Vec<String>,
    frames: Vec<Vec<Frame>>,
    alloc_frames: Vec<Option<u32>>,
    num_events: u64,
}

impl From<MetaV1> for MetaV2 {
    fn from(m: MetaV1) -> MetaV2 {
        MetaV2 {
            header: m.header,
            streams: m.streams,
            initial: m.initial.map(|i| InitialState::from_segments(i.segments)),
            num_ids: m.num_ids,
            expected: m.expected.map(|e| ExpectedRecord {
                alloc_addresses: e.alloc_addresses,
                segment_events: e.segment_events,
                ooms: e.ooms,
                final_segments: e.final_segments,
                retries: Vec::new(),
            }),
            notes: m.notes,
            frames: m.frames,
            alloc_frames: m.alloc_frames,
            num_events: m.num_events,
        }
    }
}

/// Writes `trace` in the binary format, zstd-compressed when `compress`.
pub fn write_binary(
    trace: &Trace,
    out: impl Write,
    compress: bool,
    path: &str,
) -> Result<(), TraceError> {
    let mut w = VltWriter::start(trace, trace.events.len() as u64, out, compress, path)?;
    w.events(&trace.events)?;
    w.finish().map(drop)
}

/// Where a [`VltWriter`] writes: the file, or a zstd stream into it.
enum Sink<W: Write> {
    Plain(W),
    Zstd(zstd::stream::write::Encoder<'static, W>),
}

impl<W: Write> Write for Sink<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Zstd(z) => z.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.write_all(buf),
            Sink::Zstd(z) => z.write_all(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Zstd(z) => z.flush(),
        }
    }
}

/// A binary trace written a block of events at a time: the metadata at
/// [`VltWriter::start`] (which needs the number of events to come), the
/// events in chunks of 65,536 as [`VltWriter::events`] gets them, the end
/// marker at [`VltWriter::finish`]. The bytes are those of
/// [`write_binary`] of the whole trace.
pub struct VltWriter<W: Write> {
    sink: Sink<W>,
    /// Events not yet written: fewer than a chunk.
    pending: Vec<Event>,
    path: String,
    /// The version written holds host events.
    host: bool,
}

impl<W: Write> VltWriter<W> {
    /// Writes the metadata of `trace` (its events are not read: `num_events`
    /// says how many will come).
    pub fn start(
        trace: &Trace,
        num_events: u64,
        mut out: W,
        compress: bool,
        path: &str,
    ) -> Result<Self, TraceError> {
        let io = io_error(path);
        let enc = |e: postcard::Error| {
            TraceError::new(path, Location::File, format!("cannot encode: {e}"))
        };
        // A trace without private pools is written as version 3, byte for
        // byte what it was before pools, which older readers still read.
        let host = trace.host_events || trace.events.iter().any(Event::is_host);
        let version = if trace.has_tenant_events() {
            VERSION_TENANTS
        } else if host {
            VERSION_HOST
        } else if trace.pools.is_empty() {
            VERSION_3
        } else {
            VERSION
        };
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&version.to_le_bytes()).map_err(io)?;
        out.write_all(&(if compress { FLAG_ZSTD } else { 0 }).to_le_bytes())
            .map_err(io)?;
        let init = trace.initial.as_ref();
        let meta_v3 = Meta {
            v2: MetaV2 {
                header: trace.header.clone(),
                streams: trace.streams.clone(),
                initial: trace.initial.clone(),
                num_ids: trace.num_ids,
                expected: trace.expected.clone(),
                notes: trace.notes.clone(),
                frames: trace.frames.clone(),
                alloc_frames: trace.alloc_frames.clone(),
                num_events,
            },
            phases: trace.phases.clone(),
        };
        let meta = MetaV4 {
            v3: meta_v3,
            pools: trace.pools.clone(),
            segment_pools: init.map_or(Vec::new(), |i| i.segments.iter().map(|s| s.pool).collect()),
            reservation_pools: init.map_or(Vec::new(), |i| {
                i.reservations.iter().map(|r| r.pool).collect()
            }),
            live_pools: init.map_or(Vec::new(), |i| i.live.iter().map(|b| b.pool).collect()),
            final_pools: trace.expected.as_ref().map_or(Vec::new(), |x| {
                x.final_segments.iter().map(|s| s.pool).collect()
            }),
        };
        let mut sink = if compress {
            Sink::Zstd(zstd::stream::write::Encoder::new(out, 3).map_err(io)?)
        } else {
            Sink::Plain(out)
        };
        let m = if version == VERSION_3 {
            postcard::to_stdvec(&meta.v3)
        } else if version == VERSION_HOST || version == VERSION_TENANTS {
            postcard::to_stdvec(&MetaV5 {
                v4: meta,
                expected_host: trace.expected_host.clone(),
            })
        } else {
            postcard::to_stdvec(&meta)
        }
        .map_err(enc)?;
        sink.write_all(&(m.len() as u32).to_le_bytes())
            .map_err(io)?;
        sink.write_all(&m).map_err(io)?;
        Ok(VltWriter {
            sink,
            pending: Vec::new(),
            path: path.to_string(),
            host,
        })
    }

    /// Writes `events`, the next events of the trace (whole chunks at once;
    /// the rest waits for the next call or the end).
    pub fn events(&mut self, mut events: &[Event]) -> Result<(), TraceError> {
        if !self.host && events.iter().any(Event::is_host) {
            return Err(TraceError::new(
                &self.path,
                Location::File,
                "a request to the pinned host allocator in a trace whose header was written without them (a CSV trace with host rows should begin with '# vramlab trace v3')",
            ));
        }
        if !self.pending.is_empty() {
            let take = (CHUNK - self.pending.len()).min(events.len());
            let (now, rest) = events.split_at(take);
            self.pending.extend_from_slice(now);
            events = rest;
            if self.pending.len() < CHUNK {
                return Ok(());
            }
            let full = std::mem::take(&mut self.pending);
            self.chunk(&full)?;
            self.pending = full;
            self.pending.clear();
        }
        let mut chunks = events.chunks_exact(CHUNK);
        for c in chunks.by_ref() {
            self.chunk(c)?;
        }
        self.pending.extend_from_slice(chunks.remainder());
        Ok(())
    }

    /// Writes the last chunk and the end marker, ends the zstd stream,
    /// flushes, and gives the output back.
    pub fn finish(mut self) -> Result<W, TraceError> {
        if !self.pending.is_empty() {
            let last = std::mem::take(&mut self.pending);
            self.chunk(&last)?;
        }
        let io = io_error(&self.path);
        self.sink.write_all(&0u32.to_le_bytes()).map_err(io)?;
        self.sink.write_all(&0u32.to_le_bytes()).map_err(io)?;
        let mut out = match self.sink {
            Sink::Plain(w) => w,
            Sink::Zstd(z) => z.finish().map_err(io)?,
        };
        out.flush().map_err(io)?;
        Ok(out)
    }

    /// One chunk: its event count, its byte count, its events.
    fn chunk(&mut self, chunk: &[Event]) -> Result<(), TraceError> {
        let io = io_error(&self.path);
        let b = postcard::to_stdvec(chunk).map_err(|e| {
            TraceError::new(&self.path, Location::File, format!("cannot encode: {e}"))
        })?;
        self.sink
            .write_all(&(chunk.len() as u32).to_le_bytes())
            .map_err(io)?;
        self.sink
            .write_all(&(b.len() as u32).to_le_bytes())
            .map_err(io)?;
        self.sink.write_all(&b).map_err(io)
    }
}

/// A write error of the file `path`.
fn io_error(path: &str) -> impl Fn(std::io::Error) -> TraceError + Copy + '_ {
    move |e| TraceError::new(path, Location::File, format!("cannot write: {e}"))
}

/// `true` if `bytes` start like a binary trace.
pub(crate) fn is_binary(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The metadata of a file of `version`, as version 4's: version 3's parts
/// and the private pools (none before version 4).
type DecodedMeta = (
    MetaV2,
    Vec<PhaseMark>,
    InitialPools,
    Option<Vec<ExpectedHostDecision>>,
);

fn decode_meta(m: &[u8], version: u16) -> Result<DecodedMeta, postcard::Error> {
    let no_pools = |v3: Meta| MetaV4 {
        v3,
        pools: Vec::new(),
        segment_pools: Vec::new(),
        reservation_pools: Vec::new(),
        live_pools: Vec::new(),
        final_pools: Vec::new(),
    };
    let v4: MetaV4 = match version {
        VERSION_1 => no_pools(Meta {
            v2: postcard::from_bytes::<MetaV1>(m)?.into(),
            phases: Vec::new(),
        }),
        VERSION_2 => no_pools(Meta {
            v2: postcard::from_bytes(m)?,
            phases: Vec::new(),
        }),
        VERSION_3 => no_pools(postcard::from_bytes(m)?),
        VERSION_HOST | VERSION_TENANTS => {
            let v5: MetaV5 = postcard::from_bytes(m)?;
            return Ok(split_v4(v5.v4, v5.expected_host));
        }
        _ => postcard::from_bytes(m)?,
    };
    Ok(split_v4(v4, None))
}

/// Version 4's metadata in the parts a reader takes.
fn split_v4(v4: MetaV4, expected_host: Option<Vec<ExpectedHostDecision>>) -> DecodedMeta {
    let pools = InitialPools {
        pools: v4.pools,
        segments: v4.segment_pools,
        reservations: v4.reservation_pools,
        live: v4.live_pools,
        finals: v4.final_pools,
    };
    (v4.v3.v2, v4.v3.phases, pools, expected_host)
}

/// Version 4's pools: the declarations, and the pool of each initial
/// segment, reservation and live block.
struct InitialPools {
    pools: Vec<crate::pools::PoolDecl>,
    segments: Vec<Option<PoolIndex>>,
    reservations: Vec<Option<PoolIndex>>,
    live: Vec<Option<PoolIndex>>,
    finals: Vec<Option<PoolIndex>>,
}

impl InitialPools {
    /// Puts each final segment of the expected record in its pool; `Err`
    /// when the list does not match the record's.
    fn apply_final(&mut self, expected: &mut ExpectedRecord) -> Result<(), String> {
        let finals = std::mem::take(&mut self.finals);
        if !finals.is_empty() && finals.len() != expected.final_segments.len() {
            return Err(format!(
                "pools for {} final segments, but {} final segments",
                finals.len(),
                expected.final_segments.len()
            ));
        }
        for (s, p) in expected.final_segments.iter_mut().zip(finals) {
            s.pool = p;
        }
        Ok(())
    }

    /// Puts each initial segment, reservation and live block in its pool;
    /// `Err` when the lists do not match the state's.
    fn apply(self, init: &mut InitialState) -> Result<(), String> {
        let lists = [
            (self.segments.len(), init.segments.len(), "segments"),
            (
                self.reservations.len(),
                init.reservations.len(),
                "reservations",
            ),
            (self.live.len(), init.live.len(), "live blocks"),
        ];
        for (pools_len, len, what) in lists {
            if pools_len != 0 && pools_len != len {
                return Err(format!(
                    "pools for {pools_len} initial {what}, but {len} {what}"
                ));
            }
        }
        for (s, p) in init.segments.iter_mut().zip(self.segments) {
            s.pool = p;
        }
        for (r, p) in init.reservations.iter_mut().zip(self.reservations) {
            r.pool = p;
        }
        for (b, p) in init.live.iter_mut().zip(self.live) {
            b.pool = p;
        }
        Ok(())
    }
}

/// Structural checks every reader applies: ids below `num_ids`, streams in
/// the stream table, at least the default stream.
pub fn validate(t: &Trace) -> Result<(), (u64, String)> {
    if t.streams.is_empty() {
        return Err((0, "the stream table is empty".into()));
    }
    for (i, e) in t.events.iter().enumerate() {
        if let Some(id) = e.id() {
            if id >= t.num_ids {
                return Err((
                    i as u64,
                    format!("id {id} is not below the trace's {} ids", t.num_ids),
                ));
            }
        }
        if let Some(pool) = e.pool() {
            if pool as usize >= t.pools.len() {
                return Err((
                    i as u64,
                    format!(
                        "pool index {pool} is not among the trace's {} private pools",
                        t.pools.len()
                    ),
                ));
            }
        }
        if let Event::Alloc { stream, .. } | Event::CaptureBegin { stream, .. } = *e {
            if stream as usize >= t.streams.len() {
                return Err((
                    i as u64,
                    format!("stream index {stream} is not in the stream table"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Trace {
        sample_n(100_000)
    }

    fn sample_n(n: u32) -> Trace {
        let mut t = Trace::new(TraceHeader {
            source: "unit".into(),
            device_total: Some(1 << 30),
            ..Default::default()
        });
        let s = t.stream_index(7);
        for i in 0..n {
            t.events.push(Event::Alloc {
                id: i,
                stream: if i % 3 == 0 { s } else { 0 },
                size: 512 + i as u64 * 7,
            });
            t.events.push(if i % 5 == 0 {
                Event::FreeRequested { id: i }
            } else {
                Event::Free { id: i }
            });
            if i % 5 == 0 {
                t.events.push(Event::FreeCompleted { id: i });
            }
        }
        t.events.push(Event::EmptyCache);
        t.num_ids = n;
        t.notes.push("a note".into());
        t.phases = vec![
            PhaseMark {
                event_index: 0,
                label: "build".into(),
            },
            PhaseMark {
                event_index: t.events.len() as u64 / 2,
                label: "step 0: forward".into(),
            },
        ];
        t
    }

    /// Events handed to a [`VltWriter`] in blocks of any size, across
    /// chunk boundaries, give the bytes of the whole trace written at once;
    /// so do the same blocks to a [`crate::CsvWriter`], with a phase mark
    /// after the last event.
    #[test]
    fn written_in_blocks_as_written_whole() {
        for n in [0u32, 1, 30_000, 32_768, 32_769, 70_000] {
            let mut t = sample_n(n);
            t.phases.push(PhaseMark {
                event_index: t.events.len() as u64,
                label: "after".into(),
            });
            for compress in [false, true] {
                let mut whole = Vec::new();
                write_binary(&t, &mut whole, compress, "t.vlt").unwrap();
                for block in [1usize, 999, CHUNK - 1, CHUNK, CHUNK + 5, 200_000] {
                    let total = t.events.len() as u64;
                    let mut w = VltWriter::start(&t, total, Vec::new(), compress, "t.vlt").unwrap();
                    for b in t.events.chunks(block) {
                        w.events(b).unwrap();
                    }
                    let got = w.finish().unwrap();
                    assert!(got == whole, "{n} events in blocks of {block}");
                }
            }
            let mut whole = Vec::new();
            crate::write_csv(&t, &mut whole, "t.csv").unwrap();
            for block in [1usize, 999, 200_000] {
                let mut w = crate::CsvWriter::start(&t, Vec::new(), "t.csv").unwrap();
                for b in t.events.chunks(block) {
                    w.events(b).unwrap();
                }
                assert!(
                    w.finish().unwrap() == whole,
                    "{n} events in blocks of {block}"
                );
            }
        }
    }

    /// A version 2 file (no phase marks) still reads, as the same trace
    /// without marks.
    #[test]
    fn version_2_files_still_read() {
        let mut t = sample_n(50);
        t.phases.clear();
        let meta = MetaV2 {
            header: t.header.clone(),
            streams: t.streams.clone(),
            initial: None,
            num_ids: t.num_ids,
            expected: None,
            notes: t.notes.clone(),
            frames: Vec::new(),
            alloc_frames: Vec::new(),
            num_events: t.events.len() as u64,
        };
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION_2.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        let m = postcard::to_stdvec(&meta).unwrap();
        out.extend_from_slice(&(m.len() as u32).to_le_bytes());
        out.extend_from_slice(&m);
        let b = postcard::to_stdvec(&t.events).unwrap();
        out.extend_from_slice(&(t.events.len() as u32).to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&b);
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        let back = read_binary(&out[..], "v2.vlt").unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn round_trips_plain_and_compressed() {
        let t = sample();
        let mut sizes = Vec::new();
        for compress in [false, true] {
            let mut buf = Vec::new();
            write_binary(&t, &mut buf, compress, "t.vlt").unwrap();
            assert!(is_binary(&buf));
            let back = read_binary(buf.as_slice(), "t.vlt").unwrap();
            assert_eq!(back, t);
            sizes.push(buf.len());
        }
        assert!(sizes[1] < sizes[0], "zstd makes it smaller: {sizes:?}");
    }

    #[test]
    fn every_truncation_is_a_clear_error() {
        let mut t = sample_n(100);
        t.events.truncate(300);
        let mut buf = Vec::new();
        write_binary(&t, &mut buf, false, "t.vlt").unwrap();
        for n in 0..buf.len() {
            let e = read_binary(&buf[..n], "t.vlt").unwrap_err();
            assert!(e.to_string().starts_with("t.vlt"), "{e}");
        }
    }

    #[test]
    fn data_after_the_end_is_refused() {
        let t = sample_n(3);
        for compress in [false, true] {
            let mut one = Vec::new();
            write_binary(&t, &mut one, compress, "t.vlt").unwrap();
            assert_eq!(read_binary(one.as_slice(), "t.vlt").unwrap(), t);
            // Two files concatenated, or one byte of garbage.
            for tail in [one.clone(), vec![0u8]] {
                let mut two = one.clone();
                two.extend_from_slice(&tail);
                let e = read_binary(two.as_slice(), "t.vlt")
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains("data after the end of the trace")
                        || e.contains("cannot read after the end of the events"),
                    "{compress}: {e}"
                );
            }
        }
    }

    #[test]
    fn an_id_count_beyond_the_allocations_is_refused() {
        // A few bytes claiming four billion ids would size the replay's
        // per-id tables (tens of GB) before any event is replayed.
        let mut t = sample_n(3);
        t.num_ids = u32::MAX;
        let mut buf = Vec::new();
        write_binary(&t, &mut buf, false, "t.vlt").unwrap();
        assert_eq!(
            read_binary(buf.as_slice(), "t.vlt")
                .unwrap_err()
                .to_string(),
            "t.vlt: the file declares 4294967295 allocation ids but holds 3 allocations and 0 live initial blocks"
        );
    }

    #[test]
    fn corruption_is_detected() {
        let mut buf = Vec::new();
        write_binary(&sample_n(1000), &mut buf, false, "t.vlt").unwrap();
        let mut bad = buf.clone();
        bad[8] = 9;
        assert!(
            read_binary(bad.as_slice(), "t.vlt")
                .unwrap_err()
                .to_string()
                .contains("version 9")
        );
        let mut bad = buf.clone();
        bad[0] = b'X';
        assert!(
            read_binary(bad.as_slice(), "t.vlt")
                .unwrap_err()
                .to_string()
                .contains("VRAMLABT")
        );
        // A huge metadata length must not allocate it.
        let mut bad = buf.clone();
        bad[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_binary(bad.as_slice(), "t.vlt").is_err());
        // Flip bytes all over: errors, never panics.
        for i in 12..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0xff;
            let _ = read_binary(bad.as_slice(), "t.vlt");
        }
    }
}
